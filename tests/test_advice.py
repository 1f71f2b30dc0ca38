"""What gpt1 tells a user to type, typed as printed: the command or override is read from the real output of a
command (run through the ``gpt1`` console script's code), run in a fresh shell (``bash -c``, with nothing of this
process's environment but the install's scripts on PATH, an empty HOME, the hub offline), and checked to do what the
message says. Here: the closest valid name of a misspelt group option or key, with its value ("did you mean
model.n_layer=3?"), a key a + or ++ added to a typed config, the ``++`` that adds a key of one's own to a mapping
(task.splits, trainer.strategy_options), the iconv conversion of a file in another encoding, the ``gpt1 convert
from-hf`` of a Hugging Face directory given as a checkpoint, and the epochs that train a run its recipe under-trains.
W&B's advice runs in tests/test_wandb_env.py (a W&B that cannot start) and tests/test_console.py (``wandb sync``)."""

from __future__ import annotations

import json
import logging
import re
import shlex
import sys

import pytest
import yaml
from hydra.core.global_hydra import GlobalHydra

from gpt1.core.provenance import COMMAND_LINE
from gpt1.data.encodings import UTF8, sniff
from tests.helpers import TINY_RUN, fresh_shell


@pytest.fixture
def gpt1(monkeypatch, capsys, tmp_path):
    """``gpt1(*argv)``: the ``gpt1`` console script's code on ``argv`` in this process, in tmp_path; its exit status,
    stdout and stderr. What it sets for the process (the command line, PYTHONSAFEPATH) is put back after the test."""
    import gpt1.app.cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    monkeypatch.setenv(COMMAND_LINE, "")
    monkeypatch.setenv("PYTHONSAFEPATH", "1")
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", sys.modules["__main__"].__spec__)  # (main sets it)

    def run(*argv: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["gpt1", *argv])
        root = logging.getLogger()
        handlers, level = root.handlers[:], root.level
        try:
            gpt1.app.cli.main()
            code = 0
        except SystemExit as e:
            code = e.code
        finally:  # Hydra's job logging (handlers on the root logger, on the captured streams) ends with the command
            GlobalHydra.instance().clear()
            for handler in set(root.handlers) - set(handlers):
                root.removeHandler(handler)
                handler.close()
            root.setLevel(level)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def error_line(err: str) -> str:
    (line,) = [line for line in err.splitlines() if line.startswith("error: ")]
    return line


def test_each_suggestion_for_a_mistaken_name_or_key_typed_in_its_place_runs(gpt1, tmp_path, cache_dir):
    """One command with four mistakes, each named in turn with what to type in its place: a misspelt experiment, a
    misspelt key (its value kept), a key of one's own set in a mapping without ++, and a misspelt key added with +
    (which Hydra lets past a typed config: such a run went on, the key unread). The command with all four
    replacements, as printed, runs in a fresh shell and sets what each said."""
    argv = ["prepare", *(o for o in TINY_RUN if not o.startswith("tokenizer.")), f"paths.cache_dir={cache_dir}"]
    argv += ["experiment=quickstrt", "tokenizer.vocab_sise=512"]  # (run directories: outputs/prepare/<time>)
    argv += ["trainer.strategy_options.find_unused_parameters=false", "+data.max_valid_windowz=16"]
    words = [shlex.quote(a) for a in argv]  # the command as a shell reads it
    said = []
    for _ in range(4):  # each in turn, in this process
        code, _, err = gpt1(*(shlex.split(w)[0] for w in words))
        line = error_line(err)
        said.append(line)
        found = re.search(r"did you mean (\S+)\?", line) or re.search(r"type (\S+) in place of (\S+)$", line)
        assert code == 2 and found, line
        if found.re.pattern.startswith("did"):  # in place of the override of the key the line names first
            key = line.removeprefix("error: ").split(":")[0].split("=")[0]
            (at,) = [i for i, a in enumerate(argv) if a.partition("=")[0].lstrip("+~") == key]
        else:
            at = words.index(found.group(2))
        words[at], argv[at] = found.group(1), shlex.split(found.group(1))[0]
    assert [re.search(r"(did you mean|type) (\S+?)\??( |$)", line).group(2) for line in said] == [
        "experiment=quickstart",
        "tokenizer.vocab_size=512",
        "++trainer.strategy_options.find_unused_parameters=false",
        "data.max_valid_windows=16",
    ]
    assert "not a key of DataConfig, so a + or ++ cannot add it" in said[-1]

    done = fresh_shell(" ".join(["gpt1", *words]), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (run_dir,) = [metrics.parent for metrics in tmp_path.glob("outputs/prepare/*/metrics.json")]
    config = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text())
    assert config["tokenizer"]["vocab_size"] == 512 and config["data"]["max_valid_windows"] == 16
    assert config["trainer"]["strategy_options"] == {"find_unused_parameters": False}
    hydra = yaml.safe_load((run_dir / ".hydra" / "hydra.yaml").read_text())["hydra"]
    assert hydra["runtime"]["choices"]["experiment"] == "quickstart"
    assert json.loads((run_dir / "metrics.json").read_text())["vocab_size"] == 513


def test_the_iconv_conversion_of_a_file_in_another_encoding_runs_and_gpt1_reads_what_it_writes(
    gpt1, tmp_path, cache_dir, sample_data, tiny_ckpt
):
    rows = (sample_data / "tasks/sentiment/train.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    data = tmp_path / "my data"  # a space in the path: the command quotes it
    data.mkdir()
    (data / "train.jsonl").write_text("".join(rows[:48]), encoding="utf-16")  # (with its byte-order mark)
    (data / "validation.jsonl").write_text("".join(rows[48:64]), encoding="utf-8")
    config = tmp_path / "conf" / "task"
    config.mkdir(parents=True)
    task = {"type": "classification", "text": "sentence", "label": "label", "metrics": ["accuracy"]}
    task["data_files"] = {split: str(data / f"{split}.jsonl") for split in ("train", "validation")}
    (config / "mine.yaml").write_text(yaml.safe_dump(task))
    argv = ["finetune", "--config-dir", str(tmp_path / "conf"), "task=mine", f"init_from={tiny_ckpt}"]
    argv += [f"paths.cache_dir={cache_dir}", "batch_size=8", "trainer.max_steps=2", "logger=csv"]
    argv += ["trainer.enable_progress_bar=false", f"hydra.run.dir={tmp_path / 'run'}"]

    code, _, err = gpt1(*argv)
    line = error_line(err)
    assert code == 2 and "train.jsonl is UTF-16 (little-endian, by its byte-order mark)" in line, line
    command = line.split("convert it: ")[1]
    done = fresh_shell(command, tmp_path)
    assert done.returncode == 0, done.stderr
    converted = data / "train.utf8.jsonl"
    assert sniff(converted) == UTF8 and converted.read_text(encoding="utf-8") == "".join(rows[:48])

    task["data_files"]["train"] = str(converted)  # given in the file's place, it fine-tunes
    (config / "mine.yaml").write_text(yaml.safe_dump(task))
    code, _, err = gpt1(*argv[:-1], f"hydra.run.dir={tmp_path / 'run2'}")
    assert code == 0, err[-3000:]
    assert json.loads((tmp_path / "run2" / "metrics.json").read_text())["steps"] == 2


def test_a_hugging_face_directory_given_as_a_checkpoint_converts_as_printed_and_its_checkpoint_runs(
    gpt1, tmp_path, tiny_ckpt
):
    from gpt1.checkpoints.hf import export_hf

    export_hf(tiny_ckpt, tmp_path / "hf model")  # a Hugging Face openai-gpt directory (config.json, safetensors)
    generate = ["generate", "prompt=she said", "max_new_tokens=3", "temperature=0"]
    code, _, err = gpt1(*generate, f"ckpt={tmp_path / 'hf model'}", f"hydra.run.dir={tmp_path / 'gen'}")
    line = error_line(err)
    found = re.search(r"convert it first, (gpt1 convert from-hf .+), then give (.+) in its place$", line)
    assert code == 2 and found and "is a Hugging Face model directory, not a gpt1 checkpoint" in line, line
    done = fresh_shell(found.group(1), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (ckpt,) = shlex.split(found.group(2))
    code, out, err = gpt1(*generate, f"ckpt={ckpt}", f"hydra.run.dir={tmp_path / 'gen2'}")
    assert code == 0 and re.search(r"^she said", out, re.M), out + err[-3000:]
    weights = tmp_path / "hf model" / "model.safetensors"  # its weights file: the same conversion, of its directory
    code, _, err = gpt1(*generate, f"ckpt={weights}", f"hydra.run.dir={tmp_path / 'gen3'}")
    assert code == 2 and f"{found.group(1)}, then give" in error_line(err), err


def test_a_run_its_epochs_under_train_names_the_epochs_that_give_enough_updates(capsys):
    """The line's arithmetic, on a trainer's budget alone: the epochs it names are the fewest that reach
    ``FEWEST_UPDATES`` (the paper's smallest task's updates); a budget of steps, a resumed run or enough updates
    say nothing. The whole of it, a run and the command as printed: the slow test below."""
    from types import SimpleNamespace

    from gpt1.training.callbacks.few_updates import FEWEST_UPDATES, FewUpdates

    def said(updates: float, epochs: int = 3, max_steps: int = -1, step: int = 0) -> str:
        trainer = SimpleNamespace(estimated_stepping_batches=updates, max_epochs=epochs, max_steps=max_steps)
        FewUpdates().on_train_start(SimpleNamespace(**vars(trainer), global_step=step, is_global_zero=True), None)
        return capsys.readouterr().err

    assert FEWEST_UPDATES == 231
    for per_epoch in (1, 2, 18, 76):
        line = said(3 * per_epoch)
        found = re.search(r"add trainer\.max_epochs=(\d+) to the command for (\d+) updates$", line.strip())
        assert found, line
        epochs = int(found.group(1))
        assert (
            epochs * per_epoch >= FEWEST_UPDATES > (epochs - 1) * per_epoch
            and int(found.group(2)) == epochs * per_epoch
        )
        assert line.startswith(f"warning: {3 * per_epoch} updates (3 epochs of {per_epoch}), too few to train")
    assert said(3 * 77) == said(6, max_steps=6) == said(6, step=2) == said(float("inf")) == ""


@pytest.mark.slow  # 54 updates, then the 234 it names: 101 s of CPU for these on the loaded 2-core machine
def test_a_run_its_epochs_under_train_says_so_and_the_epochs_it_names_train_it(
    gpt1, tmp_path, cache_dir, sample_data, tiny_ckpt
):
    """A task of one's own of 600 rows: the paper's recipe (3 epochs of batches of 32, the last partial batch
    dropped) gives it 54 updates, fewer than the paper's smallest task gets (231); the run says so and names the
    trainer.max_epochs that gives at least as many, which added to the command as printed gives them, unwarned."""
    rows = (sample_data / "tasks/sentiment/train.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "train.jsonl").write_text("".join(rows[:600]))
    (tmp_path / "validation.jsonl").write_text("".join(rows[600:616]))
    (tmp_path / "conf" / "task").mkdir(parents=True)
    task = {"type": "classification", "text": "sentence", "label": "label", "metrics": ["accuracy"]}
    task["data_files"] = {split: str(tmp_path / f"{split}.jsonl") for split in ("train", "validation")}
    (tmp_path / "conf" / "task" / "mine.yaml").write_text(yaml.safe_dump(task))
    argv = ["finetune", "--config-dir", str(tmp_path / "conf"), "task=mine", f"init_from={tiny_ckpt}", "logger=csv"]
    argv += [f"paths.cache_dir={cache_dir}", "trainer.enable_progress_bar=false"]  # (outputs/ in tmp_path: each run's)

    code, _, err = gpt1(*argv)
    assert code == 0, err[-3000:]
    (line,) = [line for line in err.splitlines() if line.startswith("warning: ")]
    found = re.fullmatch(
        r"warning: (\d+) updates \(3 epochs of 18\), too few to train .*: add (trainer\.max_epochs=(\d+)) to the "
        r"command for (\d+) updates",
        line,
    )
    assert found and found.group(1) == "54" and found.group(3) == "13" and found.group(4) == "234", line
    (first,) = tmp_path.glob("outputs/finetune/mine/*/metrics.json")
    assert json.loads(first.read_text())["steps"] == 54

    done = fresh_shell(f"{shlex.join(['gpt1', *argv])} {found.group(2)}", tmp_path)
    assert done.returncode == 0 and "warning:" not in done.stderr, done.stderr[-3000:]
    (second,) = set(tmp_path.glob("outputs/finetune/mine/*/metrics.json")) - {first}
    assert json.loads(second.read_text())["steps"] == 234
