"""Every bad input of issue 6's battery, given to the CLI as a user gives it (overrides on the command line, on files
written in tmp_path), ends with exit status 2 and one line on stderr, ``error: ...``, that names the file (and line),
column, config key or checkpoint, and no traceback; HYDRA_FULL_ERROR=1 keeps the traceback. Every failure here happens
before any training.

The cases call each command's ``main`` (its Hydra app, behind ``gpt1.app.runner.command``) in this process, with
``sys.argv`` set as the console script sets it: a subprocess per case would pay torch's and Lightning's imports each
time (minutes in all). Three subprocess tests prove the whole path, ``python -m`` and the ``gpt1`` dispatcher: one
line and exit status 2 for a data error and a config error, and the traceback under HYDRA_FULL_ERROR=1."""

import importlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from gpt1.checkpoints.format import load_checkpoint, save_checkpoint
from gpt1.commands.pretrain import train
from tests.helpers import OFFLINE_ENV, run_python

PRETRAIN = ["model=tiny", "tokenizer.vocab_size=300", "data.batch_size=8", "logger=csv", "debug=fast"]
"""A pre-training run of seconds (the tiny model, 301 tokens with eod), as in the battery."""


def gpt1_subprocess(
    command: str, *overrides: str, cwd: Path, env: dict[str, str] = OFFLINE_ENV, module: str | None = None
) -> subprocess.CompletedProcess:
    """``python -m gpt1.commands.<command> overrides...`` (or ``python -m gpt1.app.cli <command> ...``, the console
    script's path, with ``module="cli"``) in ``cwd`` (made if need be), its run directory under ``cwd``."""
    cwd.mkdir(parents=True, exist_ok=True)
    argv = ["-m", "gpt1.app.cli", command] if module == "cli" else ["-m", f"gpt1.commands.{command}"]
    return run_python(*argv, *overrides, f"hydra.run.dir={cwd / 'run'}", cwd=cwd, env=env, check=False)


@pytest.fixture
def gpt1(monkeypatch, capsys):
    """``gpt1 <command> overrides...`` run in this process as the subprocess would run it:
    ``gpt1.commands.<command>.main`` with ``sys.argv`` as the console script leaves it, in ``cwd`` (made if need be),
    its run directory under ``cwd``, HYDRA_FULL_ERROR unset. Returns its exit status and what it printed, as a
    ``CompletedProcess``."""
    for key, value in OFFLINE_ENV.items():
        if key.startswith("HF_"):
            monkeypatch.setenv(key, value)
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)

    def run(command: str, *overrides: str, cwd: Path) -> subprocess.CompletedProcess:
        cwd.mkdir(parents=True, exist_ok=True)
        argv = [f"gpt1 {command}", *overrides, f"hydra.run.dir={cwd / 'run'}"]
        main = importlib.import_module(f"gpt1.commands.{command}").main
        monkeypatch.chdir(cwd)
        monkeypatch.setattr(sys, "argv", argv)
        capsys.readouterr()  # only this command's output
        assert not GlobalHydra.instance().is_initialized()  # hydra.main would refuse to start (exit status 1)
        root = logging.getLogger()
        handlers, level = root.handlers[:], root.level
        try:
            with pytest.raises(SystemExit) as exited:
                main()
        finally:  # Hydra's job logging (a console handler on this test's captured stdout, a file) ends with the run
            for handler in root.handlers[:]:
                if handler not in handlers:
                    root.removeHandler(handler)
                    handler.close()
            for handler in handlers:
                if handler not in root.handlers:
                    root.addHandler(handler)
            root.setLevel(level)
        assert not GlobalHydra.instance().is_initialized()  # hydra.main clears it, even on the way out by sys.exit
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(argv, exited.value.code, out, err)

    return run


def one_line_error(proc: subprocess.CompletedProcess, *names: str) -> str:
    """The error line of a refused run, checked: status 2, no traceback, the last line of stderr ``error: ...``
    naming each of ``names``."""
    assert proc.returncode == 2, f"exit status {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), proc.stderr
    for name in names:
        assert name in last, (name, last)
    print(last)  # (pytest -s: the battery's lines)
    return last


@pytest.fixture(scope="module")
def bad(tmp_path_factory, sample_data) -> Path:
    """A directory of good and bad inputs: text, tables, checkpoints, fine-tuning tasks."""
    d = tmp_path_factory.mktemp("bad")
    novel = (sample_data / "books/train/northanger_abbey.txt").read_text(encoding="utf-8")
    (d / "good.txt").write_text(novel[:20_000], encoding="utf-8")
    (d / "empty.txt").write_text("")
    (d / "small.txt").write_text("a few words.")
    (d / "malformed.jsonl").write_text('{"text": "a line"}\n{"text": "a broken line"\n{"text": "another"}\n')
    (d / "nocolumn.jsonl").write_text('{"body": "a line", "id": 1}\n{"body": "another", "id": 2}\n')
    (d / "latin1.jsonl").write_bytes('{"text": "hello"}\n{"text": "café"}\n'.encode("latin-1"))
    (d / "utf16.jsonl").write_bytes('{"text": "hello"}\n{"text": "café"}\n'.encode("utf-16"))
    (d / "unmarked.txt").write_bytes(novel[:2000].encode("utf-16-le"))
    (d / "corrupt.ckpt").write_text("not a checkpoint")
    torch.save({"weights": torch.zeros(3)}, d / "foreign.ckpt")

    rows = [json.loads(line) for line in (sample_data / "tasks/sentiment/train.jsonl").open()][:32]
    (d / "neutral.jsonl").write_text(
        "".join(json.dumps({**r, "label": "neutral" if i == 7 else r["label"]}) + "\n" for i, r in enumerate(rows))
    )
    (d / "unlabelled.jsonl").write_text("".join(json.dumps({**r, "label": -1}) + "\n" for r in rows))
    return d


@pytest.fixture(scope="module")
def trained(tmp_path_factory, cache_dir, bad) -> Path:
    """A tiny pre-training run of 2 updates on good.txt: its last.ckpt (a Lightning checkpoint, with training
    state), and beside it weights.ckpt (weights only), truncated.ckpt, vocab.ckpt (its tokenizer and model disagree)
    and shape.ckpt (its weights do not fit its model config)."""
    run = tmp_path_factory.mktemp("trained")
    overrides = [
        f"paths.output_dir={run}",
        f"paths.cache_dir={cache_dir}",
        *PRETRAIN,
        "trainer.max_steps=2",
        f"data.train_files={bad}/good.txt",
        f"data.valid_files={bad}/good.txt",
        "callbacks.samples.every_n_steps=0",
    ]
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        train(compose(config_name="pretrain", overrides=overrides))
    last = run / "checkpoints" / "last.ckpt"
    loaded = load_checkpoint(last)
    save_checkpoint(run / "weights.ckpt", loaded.model, loaded.tokenizer)
    (run / "truncated.ckpt").write_bytes(last.read_bytes()[:4096])
    raw = torch.load(last, map_location="cpu", weights_only=False)
    config = raw["gpt1"]["model_config"]
    torch.save({**raw, "gpt1": {**raw["gpt1"], "model_config": {**config, "vocab_size": 600}}}, run / "vocab.ckpt")
    wider = {**config, "n_embd": 64, "n_inner": 256}
    torch.save({**raw, "gpt1": {**raw["gpt1"], "model_config": wider}}, run / "shape.ckpt")
    return run


# -- pre-training data ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "train_files, valid_files, names",
    [
        pytest.param("nothere.txt", "good.txt", ["data.train_files", "nothere.txt", "matches no file"], id="missing"),
        pytest.param("*.xyz", "good.txt", ["data.train_files", "*.xyz", "matches no file"], id="glob-matching-nothing"),
        pytest.param("empty.txt", "good.txt", ["data.train_files", "empty.txt", "is empty"], id="empty"),
        pytest.param(
            "small.txt",
            "good.txt",
            ["data.train_files", "small.txt", "fewer than one window", "model.n_ctx"],
            id="smaller-than-a-window",
        ),
        pytest.param("malformed.jsonl", "good.txt", ["malformed.jsonl:2:", "not valid JSON"], id="malformed-jsonl"),
        pytest.param(
            "nocolumn.jsonl",
            "good.txt",
            ["nocolumn.jsonl", "'text'", "['body', 'id']", "data.text_column"],
            id="missing-text-column",
        ),
        pytest.param("latin1.jsonl", "good.txt", ["latin1.jsonl:2:", "invalid UTF-8", "byte 31 "], id="invalid-utf8"),
        pytest.param(
            "utf16.jsonl",
            "good.txt",
            ["utf16.jsonl is UTF-16 (little-endian, by its byte-order mark)", "iconv -f UTF-16 -t UTF-8"],
            id="utf16-table",
        ),
        pytest.param(
            "unmarked.txt", "good.txt", ["unmarked.txt looks like UTF-16LE", "iconv -f UTF-16LE"], id="utf16-unmarked"
        ),
    ],
)
def test_bad_pretraining_data_is_named_in_one_line(gpt1, bad, cache_dir, train_files, valid_files, names):
    proc = gpt1(
        "pretrain",
        *PRETRAIN,
        f"data.train_files={bad / train_files}",
        f"data.valid_files={bad / valid_files}",
        f"paths.cache_dir={cache_dir}",
        cwd=bad.parent / f"run-{train_files}-{valid_files}".replace("*", "_"),
    )
    one_line_error(proc, *names)


# -- configuration ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, names",
    [
        pytest.param(["model.n_layr=3"], ["model.n_layr", "not in"], id="misspelt-key"),
        pytest.param(["model.n_layer=two"], ["model.n_layer", "'two'"], id="wrong-type"),
        pytest.param(["trainer=gpu"], ["trainer=gpu", "no CUDA GPU is visible", "use trainer=cpu"], id="trainer-gpu"),
        pytest.param(["trainer=ddp"], ["trainer=ddp", "no CUDA GPU is visible", "use trainer=cpu"], id="trainer-ddp"),
        pytest.param(
            ["trainer.max_steps=-5"],
            ["trainer.max_steps=-5", "out of range", ">= -1", "-1: bounded by"],
            id="negative-steps",
        ),
        pytest.param(["optim.lr=-1"], ["optim.lr=-1.0", ">= 0"], id="negative-lr"),
        pytest.param(["optim.betas=[0.9,1.5]"], ["optim.betas=[0.9, 1.5]", "< 1"], id="beta-of-one-or-more"),
        pytest.param(["model.n_ctx=0"], ["model.n_ctx=0", ">= 1"], id="no-context"),
        pytest.param(["model.attn_pdrop=1.0"], ["model.attn_pdrop=1.0", ">= 0 and < 1"], id="dropout-of-one"),
        pytest.param(["data.batch_size=0"], ["data.batch_size=0", ">= 1"], id="empty-batch"),
        pytest.param(["callbacks.samples.top_k=0"], ["callbacks.samples.top_k=0", "null: all tokens"], id="top-k-0"),
        pytest.param(["trainer.precision=17"], ["trainer.precision=17", "bf16-mixed"], id="unknown-precision"),
        pytest.param(["trainer.strategy=dpp"], ["trainer.strategy=dpp", "ddp, "], id="unknown-strategy"),
        pytest.param(["trainer.max_time=12h"], ["trainer.max_time=12h", "DD:HH:MM:SS"], id="malformed-max-time"),
        pytest.param(
            ["logger=wandb", "logger.wandb.mode=of"], ["logger.wandb.mode", "'of'", "offline"], id="unknown-wandb-mode"
        ),
    ],
)
def test_bad_configuration_is_named_in_one_line(gpt1, tmp_path, bad, overrides, names):
    if "trainer=" in overrides[0] and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    proc = gpt1(
        "pretrain",
        *PRETRAIN,
        f"data.train_files={bad}/good.txt",
        f"data.valid_files={bad}/good.txt",
        f"paths.cache_dir={tmp_path / 'cache'}",
        *overrides,
        cwd=tmp_path,
    )
    one_line_error(proc, *names)
    # refused before a tokenizer is trained: the cache holds at most the sample data (a clone unpacks its own there)
    assert {p.name for p in (tmp_path / "cache").glob("*")} <= {"sample_data"}


@pytest.mark.parametrize(
    "command, overrides, names",
    [
        pytest.param(
            "finetune", ["task=sentiment", "init_from=random", "head_pdrop=1.5"], ["head_pdrop=1.5"], id="finetune"
        ),
        pytest.param(
            "finetune",
            ["task=sentiment", "init_from=random", "model=lstm", "model.hidden_size=0"],
            ["model.hidden_size=0"],
            id="finetune-lstm",
        ),
        pytest.param(
            "finetune",
            ["task=sentiment", "init_from=random", "model.pad_vocab_to_multiple=0"],
            ["model.pad_vocab_to_multiple=0"],
            id="finetune-checkpoint-model",
        ),
        pytest.param(
            "generate", ["ckpt=nothere.ckpt", "temperature=-1"], ["temperature=-1.0", "0: greedy"], id="generate"
        ),
        pytest.param(
            "zeroshot", ["ckpts=[nothere.ckpt]", "task=sentiment", "batch_size=0"], ["batch_size=0"], id="zeroshot"
        ),
        pytest.param(
            "evaluate", ["ckpt=nothere.ckpt", "data.max_valid_windows=0"], ["data.max_valid_windows=0"], id="evaluate"
        ),
    ],
)
def test_every_command_refuses_a_value_out_of_range_first(gpt1, tmp_path, command, overrides, names):
    """The range is checked before anything else: the checkpoints named here do not exist."""
    one_line_error(gpt1(command, *overrides, cwd=tmp_path), *names, "out of range")


@pytest.mark.parametrize(
    "override, quoted",
    [
        ("prompt=It was a dark night, and she said", "'prompt=\"It was a dark night, and she said\"'"),  # a comma
        ("prompt=she said [yes]", "'prompt=\"she said [yes]\"'"),  # brackets
    ],
)
def test_a_value_with_commas_or_brackets_names_the_argument_and_the_quoting_that_works(
    gpt1, tmp_path, override, quoted
):
    """As bash passes ``prompt="It was a dark night, and she said"`` (its quotes removed)."""
    last = one_line_error(gpt1("generate", "ckpt=none.ckpt", override, cwd=tmp_path), override, quoted)
    assert "Ambiguous" not in last and "1. To use it" not in last  # Hydra's own multi-line advice, not shown


@pytest.mark.parametrize("flags", [["-m", "--cfg", "job"], ["--multirun", "--info", "config"]])
def test_flags_that_cannot_be_combined_are_named_in_one_line(gpt1, tmp_path, flags):
    proc = gpt1("finetune", *flags, "task=sentiment", "init_from=x.ckpt", "seed=1,2", cwd=tmp_path)
    one_line_error(
        proc, "-m (--multirun), --cfg, --info and --shell-completion cannot be combined", "--cfg job without -m"
    )


def test_the_slurm_launcher_without_slurm_is_named_in_one_line(gpt1, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no srun here: submitit's own check refuses the launch
    proc = gpt1("pretrain", "-m", *PRETRAIN, "hydra/launcher=submitit_slurm", cwd=tmp_path)
    one_line_error(proc, "hydra/launcher=submitit_slurm", "no srun", "hydra/launcher=submitit_local")


def test_finetune_checks_its_trainer_before_reading_the_checkpoint(gpt1, tmp_path):
    proc = gpt1("finetune", "task=sentiment", "init_from=nothere.ckpt", "trainer.precision=bf17", cwd=tmp_path)
    one_line_error(proc, "trainer.precision=bf17")


@pytest.mark.parametrize(
    "src, names",
    [
        pytest.param("nothere", ["nothere/config.json does not exist", "openai-gpt model directory"], id="missing"),
        pytest.param("broken", ["broken/config.json is not valid JSON"], id="malformed-config"),
        pytest.param("weightless", ["neither model.safetensors nor pytorch_model.bin"], id="no-weights"),
    ],
)
def test_an_unusable_hf_directory_is_named_in_one_line(gpt1, tmp_path, src, names):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    (tmp_path / "weightless").mkdir()
    (tmp_path / "weightless" / "config.json").write_text('{"model_type": "openai-gpt"}')
    proc = gpt1("convert", "direction=from-hf", f"src={tmp_path / src}", f"dst={tmp_path / 'out.ckpt'}", cwd=tmp_path)
    one_line_error(proc, *names)
    assert not (tmp_path / "out.ckpt").exists()


def test_a_model_config_that_cannot_be_built_fails_before_any_data_work(gpt1, tmp_path, bad):
    proc = gpt1(
        "pretrain",
        *PRETRAIN,
        f"data.train_files={bad}/good.txt",
        f"data.valid_files={bad}/good.txt",
        f"paths.cache_dir={tmp_path / 'cache'}",
        "model.n_head=5",
        cwd=tmp_path,
    )
    one_line_error(proc, "model.n_embd=32", "model.n_head=5", "multiple")
    # no tokenizer trained, nothing tokenised: the cache holds at most the sample data (a clone unpacks its own there)
    assert {p.name for p in (tmp_path / "cache").glob("*")} <= {"sample_data"}


# -- the whole command line, in a subprocess ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "module, overrides, names",
    [
        pytest.param(
            None,
            ["data.train_files={bad}/nothere.txt"],
            ["data.train_files", "nothere.txt", "matches no file"],
            id="data-error-python-m-gpt1.commands.pretrain",
            marks=pytest.mark.slow,  # 27 s; the data errors' lines: the tests above, in this process
        ),
        pytest.param(
            "cli",
            ["data.train_files={bad}/good.txt", "model.n_layr=3"],
            ["model.n_layr", "not in"],
            id="config-error-python-m-gpt1.app.cli",
        ),
    ],
)
def test_the_command_line_prints_one_line_and_exits_2(tmp_path, bad, module, overrides, names):
    proc = gpt1_subprocess(
        "pretrain",
        *PRETRAIN,
        *(o.format(bad=bad) for o in overrides),
        f"data.valid_files={bad}/good.txt",
        f"paths.cache_dir={tmp_path / 'cache'}",
        cwd=tmp_path,
        module=module,
    )
    one_line_error(proc, *names)


def test_hydra_full_error_keeps_the_traceback(tmp_path, bad):
    proc = gpt1_subprocess(
        "pretrain",
        *PRETRAIN,
        f"data.train_files={bad}/nothere.txt",
        f"data.valid_files={bad}/good.txt",
        f"paths.cache_dir={tmp_path / 'cache'}",
        cwd=tmp_path,
        env={**OFFLINE_ENV, "HYDRA_FULL_ERROR": "1"},
    )
    assert proc.returncode == 1 and "Traceback" in proc.stderr and "DataError: data.train_files" in proc.stderr


# -- checkpoints ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command, ckpt, names",
    [
        pytest.param("generate", "{bad}/nothere.ckpt", ["nothere.ckpt", "does not exist"], id="missing"),
        pytest.param(
            "evaluate", "{bad}/corrupt.ckpt", ["corrupt.ckpt", "is a text file", "not a checkpoint"], id="corrupt"
        ),
        pytest.param("generate", "{run}/truncated.ckpt", ["truncated.ckpt", "cannot be read"], id="truncated"),
        pytest.param("evaluate", "{bad}/foreign.ckpt", ["foreign.ckpt", "not a gpt1 checkpoint"], id="foreign"),
        pytest.param(
            "generate",
            "{run}/vocab.ckpt",
            ["vocab.ckpt", "tokenizer has 301 tokens", "600"],
            id="tokenizer-and-model-vocab-differ",
        ),
        pytest.param(
            "evaluate",
            "{run}/shape.ckpt",
            ["shape.ckpt", "tokens_embed.weight is (301, 32)", "(301, 64)"],
            id="weights-do-not-fit-the-model-config",
        ),
    ],
)
def test_unusable_checkpoints_are_named_in_one_line(gpt1, bad, trained, command, ckpt, names):
    path = ckpt.format(bad=bad, run=trained)
    proc = gpt1(command, f"ckpt={path}", cwd=bad.parent / f"{command}-{Path(path).name}")
    one_line_error(proc, *names)


def test_a_language_model_scored_on_a_task_says_it_has_no_head(gpt1, tmp_path, trained, cache_dir):
    proc = gpt1(
        "evaluate",
        f"ckpt={trained}/checkpoints/last.ckpt",
        "task=sentiment",
        f"paths.cache_dir={cache_dir}",
        cwd=tmp_path,
    )
    one_line_error(proc, "last.ckpt", "no classification head", "gpt1 finetune")


@pytest.mark.parametrize(
    "resume, overrides, names",
    [
        pytest.param("{bad}/nothere.ckpt", [], ["resume=", "nothere.ckpt", "no such checkpoint"], id="missing"),
        pytest.param("{run}/weights.ckpt", [], ["weights.ckpt", "no training state", "init_from="], id="weights-only"),
        pytest.param(
            "{run}/checkpoints/last.ckpt",
            ["model.n_embd=64"],
            ["last.ckpt", "does not fit", "(301, 32) in the checkpoint but (301, 64) here"],
            id="other-shape",
        ),
        pytest.param(
            "{run}/checkpoints/last.ckpt",
            ["tokenizer.vocab_size=320"],
            ["last.ckpt", "does not fit", "(301, 32) in the checkpoint but (321, 32) here"],
            id="other-vocab",
        ),
    ],
)
def test_a_checkpoint_that_cannot_be_resumed_is_named_in_one_line(
    gpt1, bad, trained, cache_dir, resume, overrides, names
):
    path = resume.format(bad=bad, run=trained)
    proc = gpt1(
        "pretrain",
        *PRETRAIN,
        f"data.train_files={bad}/good.txt",
        f"data.valid_files={bad}/good.txt",
        f"paths.cache_dir={cache_dir}",
        f"resume={path}",
        *overrides,
        cwd=bad.parent / f"resume-{Path(path).name}-{len(overrides)}-{overrides[0][:7] if overrides else ''}",
    )
    one_line_error(proc, *names)


# -- fine-tuning data -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "train_file, names",
    [
        pytest.param("neutral.jsonl", ["neutral.jsonl:8:", "'neutral'", "task.label_names"], id="unknown-label"),
        pytest.param(
            "unlabelled.jsonl", ["unlabelled.jsonl", "no row has a label", "train split"], id="no-training-examples"
        ),
    ],
)
def test_bad_finetuning_data_is_named_in_one_line(gpt1, bad, trained, cache_dir, train_file, names):
    proc = gpt1(
        "finetune",
        "task=sentiment",
        f"task.data_files.train={bad / train_file}",
        f"init_from={trained}/checkpoints/last.ckpt",
        f"paths.cache_dir={cache_dir}",
        cwd=bad.parent / f"finetune-{train_file}",
    )
    one_line_error(proc, *names)


def test_a_training_split_sliced_to_nothing_is_named(gpt1, tmp_path, trained, cache_dir):
    proc = gpt1(
        "finetune",
        "task=sentiment",
        "++task.splits.train='train[:0]'",
        f"init_from={trained}/checkpoints/last.ckpt",
        f"paths.cache_dir={cache_dir}",
        cwd=tmp_path,
    )
    one_line_error(proc, "train.jsonl", "the train split has no rows", "train[:0]")


@pytest.mark.parametrize(
    "command, args", [("generate", ["ckpt=nothere.ckpt"]), ("zeroshot", ["ckpts=[nothere.ckpt]", "task=sentiment"])]
)
@pytest.mark.parametrize(
    "device, names",
    [("tpu", ["device=tpu", "cpu, cuda, cuda:N or auto"]), ("cuda:7", ["device=cuda:7", "visible here", "device=cpu"])],
)
def test_a_device_this_machine_lacks_is_named_before_the_checkpoint(gpt1, tmp_path, command, args, device, names):
    if device.startswith("cuda") and torch.cuda.device_count() > 7:
        pytest.skip("this machine has 8 GPUs")
    one_line_error(gpt1(command, *args, f"device={device}", cwd=tmp_path), *names)


# -- mistakes whose message misled (issue 27): the culprit and the fix, the closest valid name ------------------------


def test_closest_valid_name():
    from gpt1.app.suggest import closest

    assert closest("lable", ["text", "label", "label_names"]) == "label"
    assert closest("Sentiment", ["sentiment", "sst2"]) == "sentiment"
    assert closest("learning_rate", ["lr", "eps"]) is None


@pytest.mark.parametrize(
    "command, overrides, names",
    [
        pytest.param(
            "pretrain", ["model.n_layr=3"], ["model.n_layr", "did you mean model.n_layer=3?"], id="config-key"
        ),
        pytest.param("pretrain", ["modle=small"], ["modle", "did you mean model=small?"], id="config-group-key"),
        pytest.param(
            "finetune",
            ["task=sentimnt", "init_from=x.ckpt"],
            ["task=sentimnt", "did you mean task=sentiment?"],
            id="task-name",
        ),
        pytest.param(
            "finetune",
            ["experiment=ablation_auxlm", "task=sentiment", "init_from=x.ckpt"],
            ["experiment=ablation_auxlm", "did you mean experiment=ablation_aux_lm?"],
            id="experiment-name",
        ),
        pytest.param(
            "pretrain",
            ["task=sentiment"],
            ["task=sentiment", "gpt1 pretrain takes no task", "gpt1 finetune task=sentiment init_from=CKPT"],
            id="pretrain-task",
        ),
        pytest.param("evaluate", [], ["ckpt is required", "ckpt="], id="evaluate-without-ckpt"),
        pytest.param(
            "zeroshot",
            ["-m", "ckpts=[x.ckpt]", "task=sentiment,story", '++task.splits.validation="validation[:9]"'],
            ["++task.splits.validation", "while task is swept (task=sentiment,story)", "one command per task"],
            id="override-of-a-swept-group",
        ),
    ],
)
def test_a_misspelt_or_misplaced_name_gets_its_fix(gpt1, tmp_path, command, overrides, names):
    proc = gpt1(command, *overrides, cwd=tmp_path)
    one_line_error(proc, *names)
    assert "Seed set" not in proc.stdout + proc.stderr  # nothing before the error line


def test_a_misspelt_field_of_a_task_yaml_names_the_file_and_the_closest_field(gpt1, tmp_path):
    (tmp_path / "my_conf" / "task").mkdir(parents=True)
    yaml_file = tmp_path / "my_conf" / "task" / "mine.yaml"
    yaml_file.write_text("type: classification\ndata_files: {train: t.csv}\ntext: text\nlable: label\n")
    proc = gpt1("finetune", "--config-dir", str(tmp_path / "my_conf"), "task=mine", "init_from=x.ckpt", cwd=tmp_path)
    one_line_error(proc, f"{yaml_file}: unknown field 'lable'", "did you mean label?")


def test_a_run_directory_as_a_checkpoint_names_the_checkpoints_in_it(gpt1, tmp_path, trained):
    proc = gpt1("finetune", "task=sentiment", f"init_from={trained}", cwd=tmp_path)
    one_line_error(proc, f"{trained} is a directory", f"{trained}/checkpoints/last.ckpt", "checkpoints/step")


@pytest.fixture(scope="module")
def csv_task(tmp_path_factory) -> Path:
    """my_conf/task/<name>.yaml over CSV files of string labels: good.csv, ragged.csv (line 32 has three fields),
    neutral.csv (line 34 has an unknown label), header.csv (a header and no rows)."""
    d = tmp_path_factory.mktemp("csv_task")
    rows = "".join(f'"a {"fine" if i % 2 else "dull"} film, {i}",{"pos" if i % 2 else "neg"}\n' for i in range(40))
    lines = rows.splitlines(keepends=True)
    (d / "good.csv").write_text("text,label\n" + rows)
    (d / "ragged.csv").write_text("text,label\n" + "".join(lines[:30]) + "too,many,fields\n" + "".join(lines[30:]))
    (d / "neutral.csv").write_text("text,label\n" + "".join(lines[:32]) + "meh,neutral\n" + "".join(lines[32:]))
    (d / "header.csv").write_text("text,label\n")
    (d / "my_conf" / "task").mkdir(parents=True)
    for name in ("ragged", "neutral", "header"):
        (d / "my_conf" / "task" / f"{name}.yaml").write_text(
            f"type: classification\ndata_files: {{train: {d}/{name}.csv, validation: {d}/good.csv}}\n"
            "text: text\nlabel: label\nlabel_names: [neg, pos]\n"
        )
    return d


@pytest.mark.parametrize(
    "name, names",
    [
        pytest.param(
            "neutral", ["neutral.csv:34:", "'neutral'", "task.label_names"], id="label-error-at-the-file-line"
        ),
        pytest.param("header", ["header.csv has a header but no rows", "give it examples"], id="header-only"),
    ],
)
def test_a_bad_task_csv_is_named_at_its_line(gpt1, csv_task, trained, cache_dir, name, names):
    proc = gpt1(
        "finetune",
        "--config-dir",
        str(csv_task / "my_conf"),
        f"task={name}",
        f"init_from={trained}/checkpoints/last.ckpt",
        f"paths.cache_dir={cache_dir}",
        cwd=csv_task / name,
    )
    one_line_error(proc, *names)


def test_a_ragged_csv_row_is_one_line_without_the_loggers_output(csv_task, trained, cache_dir):
    """In a subprocess: datasets' own log handler writes to the stderr it found at import, past pytest's capture."""
    proc = gpt1_subprocess(
        "finetune",
        "--config-dir",
        str(csv_task / "my_conf"),
        "task=ragged",
        f"init_from={trained}/checkpoints/last.ckpt",
        f"paths.cache_dir={cache_dir}",
        cwd=csv_task / "ragged-subprocess",
    )
    one_line_error(proc, "ragged.csv:32: 3 fields where the header has 2", "quote a field that holds a comma")
    assert "Failed to read file" not in proc.stderr + proc.stdout, proc.stderr


def test_lightnings_srun_warning_is_silenced(tmp_path, monkeypatch):
    import warnings

    from lightning.pytorch.trainer.connectors.accelerator_connector import SLURMEnvironment

    from gpt1.training.console import quiet_library_noise

    srun = tmp_path / "srun"
    srun.write_text("#!/bin/sh\n")
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    for key in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(key)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SLURMEnvironment._validate_srun_used()
        assert any("`srun` command is available" in str(w.message) for w in caught)  # Lightning warns here
        caught.clear()
        quiet_library_noise()
        SLURMEnvironment._validate_srun_used()
    assert not caught, [str(w.message) for w in caught]


def test_a_gpt1_folder_in_the_working_directory_imported_in_place_of_gpt1_is_named_in_one_line(tmp_path):
    """``python -m`` puts the working directory first on Python's path: a clone of the repository there, a folder
    named gpt1 without __init__.py, is imported as gpt1 (a namespace package) where the install is editable (the
    installed gpt1 is found by a finder after the path's). The config then failed to resolve, naming no cause
    (``paths.sample_data: TypeError ... NoneType``)."""
    (tmp_path / "gpt1" / "gpt1").mkdir(parents=True)
    env = {k: v for k, v in OFFLINE_ENV.items() if k != "PYTHONSAFEPATH"}  # (a command run in this process sets it)
    probe = run_python("-c", "import gpt1; print(gpt1.__file__)", cwd=tmp_path, env=env, check=False)
    if probe.stdout.strip() != "None":
        pytest.skip("the installed gpt1 comes before the working directory's folder here (not an editable install)")
    proc = gpt1_subprocess("generate", "ckpt=x.ckpt", cwd=tmp_path, env=env)
    assert proc.returncode == 2 and proc.stderr == (
        f"error: gpt1 was imported from {tmp_path / 'gpt1'}, a folder without __init__.py, not from the installed gpt1 "
        "package: `python -m` and `python -c` put the working directory first on Python's path; run the gpt1 command "
        "instead, or start from another directory\n"
    )


def test_a_value_that_cannot_be_resolved_names_the_resolvers_own_error():
    from omegaconf import OmegaConf

    from gpt1.app.runner import user_message
    from gpt1.core.errors import DataError

    def missing() -> str:
        raise DataError("the sample data is not at /nowhere: set GPT1_SAMPLE_DATA")

    OmegaConf.register_new_resolver("test_missing", missing)
    cfg = OmegaConf.create({"paths": {"sample_data": "${test_missing:}"}})
    with pytest.raises(Exception) as error:
        OmegaConf.to_container(cfg, resolve=True)
    assert user_message(error.value) == "paths.sample_data: the sample data is not at /nowhere: set GPT1_SAMPLE_DATA"
