"""The ``gpt1`` console script as a user runs it: subcommands, Hydra flags, errors, and HF round trips."""

import json
import math
import sys

import pytest
import torch

from gpt1.checkpoints.format import load_checkpoint
from gpt1.commands.convert import positional_to_overrides
from gpt1.commands.evaluate import evaluate
from tests.helpers import REPO, TINY_RUN, run_gpt1, run_python, sweep_jobs


def test_help_lists_the_commands(tmp_path):
    out = run_gpt1("--help", cwd=tmp_path).stdout
    for command in ("pretrain", "evaluate", "generate", "convert"):
        assert command in out
    assert run_gpt1("nonsense", cwd=tmp_path, check=False).returncode == 2


def test_a_command_is_its_module_its_yaml_its_schema_and_its_help_line():
    """A command is gpt1/commands/NAME.py (its ``main``), conf/NAME.yaml (a schema the app registers first in its
    defaults), a line in the console script's ``COMMANDS`` and a row of README's table; a tool (plain flags) is
    gpt1/tools/NAME.py and ``TOOLS`` instead: a module without the rest, or the rest without a module, fails here."""
    import importlib

    import yaml
    from hydra.core.config_store import ConfigStore

    from gpt1.app.cli import COMMANDS, TOOLS
    from gpt1.app.registration import register

    root = REPO
    register()
    schemas = {name.removesuffix(".yaml") for name in ConfigStore.instance().repo if name.endswith(".yaml")}
    modules = {p.stem for p in (root / "gpt1" / "commands").glob("*.py") if p.stem != "__init__"}
    assert modules == set(COMMANDS) - set(TOOLS)
    readme = (root / "README.md").read_text()
    for name in COMMANDS:
        package = "tools" if name in TOOLS else "commands"
        assert callable(importlib.import_module(f"gpt1.{package}.{name}").main), name
        assert f"| `gpt1 {name}` |" in readme, name
        if name not in TOOLS:
            defaults = yaml.safe_load((root / "conf" / f"{name}.yaml").read_text())["defaults"]
            assert defaults[0] in schemas, name


def test_a_ctrl_c_while_a_command_starts_ends_it_in_one_line(monkeypatch, capsys):
    """A Ctrl-C during the imports (a second or more under load) ended in a KeyboardInterrupt traceback."""
    import gpt1.app.cli

    def interrupted(name):
        raise KeyboardInterrupt

    monkeypatch.setattr(sys, "argv", ["gpt1", "pretrain"])
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", sys.modules["__main__"].__spec__)  # (main sets it)
    monkeypatch.setattr(gpt1.app.cli.importlib, "import_module", interrupted)
    with pytest.raises(SystemExit) as stop:
        gpt1.app.cli.main()
    assert stop.value.code == 130
    assert capsys.readouterr().err == "stopped by Ctrl-C before gpt1 pretrain had anything to save (exit status 130)\n"


def test_cfg_job_prints_the_composed_config_of_an_experiment(tmp_path):
    out = run_gpt1("pretrain", "experiment=paper", "--cfg", "job", cwd=tmp_path).stdout
    assert "n_layer: 12" in out and "lr: 0.00025" in out and "warmup_steps: 2000" in out


def test_a_misspelt_key_fails_at_start_up_naming_it(tmp_path):
    proc = run_gpt1("pretrain", "model.n_layr=3", cwd=tmp_path, check=False)
    assert proc.returncode != 0
    assert "n_layr" in proc.stderr and "Traceback" not in proc.stderr  # Hydra's message, not a stack dump


@pytest.mark.slow  # 30 s; the long commands from the command line: tests/test_clean_logs.py
def test_pretrain_then_evaluate_and_generate_from_the_command_line(tmp_path, cache_dir):
    run = tmp_path / "run"
    run_gpt1("pretrain", *TINY_RUN, "debug=fast", f"hydra.run.dir={run}", f"paths.cache_dir={cache_dir}", cwd=tmp_path)
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == 4 and (run / ".hydra" / "config.yaml").is_file()
    ckpt = run / "checkpoints" / "last.ckpt"
    out = run_gpt1(
        "evaluate",
        f"ckpt={ckpt}",
        "data.max_valid_windows=8",
        f"paths.cache_dir={cache_dir}",
        f"hydra.run.dir={tmp_path / 'eval'}",
        "trainer.enable_progress_bar=false",
        cwd=tmp_path,
    ).stdout
    assert "perplexity" in out
    out = run_gpt1(
        "generate",
        f"ckpt={ckpt}",
        "prompt=she said",
        "max_new_tokens=5",
        f"hydra.run.dir={tmp_path / 'gen'}",
        cwd=tmp_path,
    ).stdout
    assert "she said" in out


def test_python_dash_m_runs_a_command(tmp_path):
    proc = run_python("-m", "gpt1.commands.generate", "--cfg", "job", cwd=tmp_path, timeout=120)
    assert "max_new_tokens: 100" in proc.stdout


@pytest.mark.slow  # 16 s; sweeps from the command line: tests/test_sweeps.py
def test_multirun_sweeps_over_overrides(tmp_path, cache_dir):
    sweep = tmp_path / "sweep"
    run_gpt1(
        "pretrain",
        "-m",
        *TINY_RUN,
        "debug=fast",
        "optim.lr=1e-3,3e-3",
        "callbacks.samples.every_n_steps=0",
        f"hydra.sweep.dir={sweep}",
        f"paths.cache_dir={cache_dir}",
        cwd=tmp_path,
    )
    jobs = sweep_jobs(sweep)
    assert [job.name.rpartition("-")[0] for job in jobs] == ["optim.lr=0.001", "optim.lr=0.003"]  # by its overrides
    for job in jobs:
        assert json.loads((job / "metrics.json").read_text())["steps"] == 4


def test_positional_convert_arguments_become_overrides():
    assert positional_to_overrides(["from-hf", "a/b", "c.ckpt", "tokenizer=t"]) == [
        "direction='from-hf'",
        "src='a/b'",
        "dst='c.ckpt'",
        "tokenizer=t",
    ]
    assert positional_to_overrides(["to-hf", "x", "y", "--cfg", "job"])[-2:] == ["--cfg", "job"]


@pytest.mark.slow  # 16 s; both conversions in this process: tests/test_hf.py
def test_convert_from_hf_then_generate_then_back_to_hf(tmp_path, make_cfg):
    """Converted OpenAI-format weights work with every command, and survive the round trip exactly."""
    transformers = pytest.importorskip("transformers")
    from gpt1.text.tokenizer import train_bpe

    tokenizer = train_bpe(["the quick brown fox jumps over the lazy dog"] * 20, vocab_size=60)
    tokenizer.bpe.model.save(str(tmp_path))  # vocab.json + merges.txt without special tokens, as openai-gpt's
    vocab_size = len(json.loads((tmp_path / "vocab.json").read_text()))
    config = transformers.OpenAIGPTConfig(vocab_size=vocab_size, n_positions=32, n_embd=32, n_layer=2, n_head=2)
    torch.manual_seed(0)
    hf = transformers.OpenAIGPTLMHeadModel(config).eval()
    hf.save_pretrained(tmp_path / "hf")
    for name in ("vocab.json", "merges.txt"):
        (tmp_path / "hf" / name).write_bytes((tmp_path / name).read_bytes())

    run_gpt1("convert", "from-hf", str(tmp_path / "hf"), str(tmp_path / "model.ckpt"), cwd=tmp_path)
    out = run_gpt1("generate", "ckpt=model.ckpt", "prompt=the quick", "temperature=0", "max_new_tokens=4", cwd=tmp_path)
    loaded = load_checkpoint(tmp_path / "model.ckpt")
    ids = torch.tensor([loaded.tokenizer.encode("the quick")])
    with torch.no_grad():
        for _ in range(4):  # HF's greedy decoding, by hand
            ids = torch.cat([ids, hf(ids).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert loaded.tokenizer.decode(ids[0].tolist()) in out.stdout  # gpt1 generate picks the same tokens

    # evaluate too: its vocab has no end-of-document token, so documents are joined without one
    result = evaluate(
        make_cfg(
            "evaluate",
            [f"ckpt={tmp_path / 'model.ckpt'}", "data.max_valid_windows=4", "trainer.enable_progress_bar=false"],
        )
    )
    assert math.isfinite(result["ppl"]) and result["tokens"] == 4 * 32

    run_gpt1("convert", "to-hf", "model.ckpt", str(tmp_path / "back"), cwd=tmp_path)
    back = transformers.OpenAIGPTLMHeadModel.from_pretrained(tmp_path / "back").eval()
    x = torch.randint(0, vocab_size, (2, 10))
    with torch.no_grad():
        assert torch.allclose(back(x).logits, hf(x).logits, atol=1e-5)


@pytest.mark.slow  # 15 s
def test_pretrain_on_a_corpus_it_has_never_seen(tmp_path, sample_data):
    """The issue's command, verbatim in form: a bare glob of .txt files and a validation file."""
    stories = [json.loads(line)["context"] for line in (sample_data / "tasks/story/train.jsonl").open()]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(0, 600, 100):  # six documents of a hundred narratives each
        (corpus / f"part{i // 100}.txt").write_text("\n".join(stories[i : i + 100]))
    (tmp_path / "held_out.txt").write_text("\n".join(stories[600:]))
    run = tmp_path / "run"
    run_gpt1(
        "pretrain",
        "data.train_files=corpus/*.txt",
        "data.valid_files=held_out.txt",
        "model=tiny",
        "tokenizer.vocab_size=400",
        "debug=fast",
        f"hydra.run.dir={run}",
        "paths.cache_dir=cache",
        cwd=tmp_path,
    )
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == 4 and metrics["val_ppl"] > 0 and metrics["val_unigram_ppl"] > 0
    assert len(list((tmp_path / "cache" / "tokenizers").glob("*.json"))) == 1  # a BPE trained on this corpus
