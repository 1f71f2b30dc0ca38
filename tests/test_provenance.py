"""What ran a run (gpt1/core/provenance.py): every attempt at it (its start, each resume) recorded in its run
directory's provenance.json, with the command line as typed, gpt1's commit, the packages, the machine, how training
ran (processes, precision, kernels) and how the attempt ended."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

import gpt1
from gpt1.core import provenance
from gpt1.core.errors import ConfigError
from tests.helpers import FEW, FEW_FINETUNE, OFFLINE_ENV, REPO, run_gpt1


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_a_run_records_each_attempt_at_it(tmp_path, cache_dir):
    run = tmp_path / "run"
    typed = [
        "gpt1",
        "pretrain",
        *FEW,
        "trainer.precision=32-true",
        f"paths.cache_dir={cache_dir}",
        f"hydra.run.dir={run}",
    ]
    for extra in ([], ["resume=auto", "trainer.max_steps=6"]):  # the run, then a resumed attempt at it
        run_gpt1(*typed[1:], *extra, cwd=tmp_path, env={**OFFLINE_ENV, "GPT1_CPU_MATMUL": "torch"}, timeout=600)
    first, resumed = provenance.attempts(run)
    assert first["command"].startswith("gpt1 pretrain model=tiny ") and first["command"].endswith(
        f"hydra.run.dir={run}"
    )
    assert resumed["command"].endswith("resume=auto trainer.max_steps=6")
    if (REPO / ".git").exists():  # a checkout: its commit, and whether tracked files have uncommitted changes
        status = bool(git("status", "--porcelain", "--untracked-files=no"))
        assert first["gpt1"] == {"version": gpt1.__version__, "commit": git("rev-parse", "HEAD"), "dirty": status}
    assert first["packages"]["torch"] == torch.__version__ and "lightning" in first["packages"]
    machine = first["machine"]
    assert machine["cpu"] and machine["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert machine["gpus"] == torch.cuda.device_count() and machine["cpus"] == os.cpu_count()
    kernels = json.loads((run / "cpu-matmuls.json").read_text())
    assert first["run"]["kernels"]["cpu_matmuls"] == kernels == dict.fromkeys(kernels, "torch")
    assert {k: first["run"][k] for k in ("processes", "nodes", "accelerator", "precision", "start_step")} == {
        "processes": 1,
        "nodes": 1,
        "accelerator": "cpu",
        "precision": "32-true",
        "start_step": 0,
    }
    assert resumed["run"]["start_step"] == 4
    assert [a["outcome"] for a in (first, resumed)] == ["finished", "finished"]
    # what the run reads, hashed, and where it ran: enough to make it again from this record alone
    assert first["cwd"] == resumed["cwd"] == str(tmp_path)
    assert first["job"] == {"command": "pretrain", "overrides": typed[2:-1], "hydra": [], "config_dir": None}
    inputs = first["inputs"]
    assert inputs["tokenizer"] == described(inputs["tokenizer"]["path"])  # the BPE trained into the cache
    assert [Path(f["path"]).name for f in inputs["corpus"]["files"]] == ["northanger_abbey.txt", "persuasion.txt"]
    assert all(f == described(f["path"]) for f in inputs["corpus"]["files"])
    assert {Path(p).name for p in inputs["corpus"]["prepared"].values()} == {"train.bin", "valid.bin"}
    assert resumed["inputs"]["resume"]["path"] == str(run / "checkpoints" / "last.ckpt")
    assert first["results"]["steps"] == 4 and resumed["results"] == json.loads((run / "metrics.json").read_text())


def described(path: str) -> dict:
    data = Path(path).read_bytes()
    return {"path": path, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_a_finetune_records_the_hash_of_its_checkpoint_and_task_files_and_a_large_corpus_by_its_cache(
    make_cfg, tiny_ckpt, monkeypatch
):
    from gpt1.commands.finetune import finetune
    from gpt1.training import inputs

    cfg = make_cfg("finetune", [*FEW_FINETUNE, "task=sentiment", f"init_from={tiny_ckpt}"])
    finetune(cfg)
    (attempt,) = provenance.attempts(cfg.paths.output_dir)
    assert attempt["inputs"]["init_from"] == described(str(tiny_ckpt))
    task = attempt["inputs"]["task_data"]
    assert sorted(task) == ["test", "train", "validation"]
    assert all(f == described(f["path"]) for split in task.values() for f in split)

    monkeypatch.setattr(inputs, "HASHED", 0)  # a corpus larger than that: its files by size and time, and its cache
    data = SimpleNamespace(paths={"train": Path("cache/tokens/0123/train.bin")})
    corpus = inputs.corpus(OmegaConf.create({"train_files": [task["train"][0]["path"]]}), data)
    (train,) = corpus["files"]
    assert set(train) == {"path", "bytes", "modified_ns"} and corpus["prepared"]["train"].endswith("0123/train.bin")


def test_a_damaged_record_is_kept_aside_not_overwritten(tmp_path, capsys):
    (tmp_path / "provenance.json").write_text('{"attempts": [{"command": "gpt1 pre')
    provenance.start_attempt(tmp_path)
    (aside,) = tmp_path.glob("provenance.json.damaged-*")
    assert aside.read_text() == '{"attempts": [{"command": "gpt1 pre'
    assert len(provenance.attempts(tmp_path)) == 1
    assert capsys.readouterr().err == (
        f"note: {tmp_path / 'provenance.json'} could not be read: kept as {aside.name}; a new record starts\n"
    )


@pytest.mark.parametrize(
    "raised, outcome",
    [
        (None, {"outcome": "finished"}),
        (SystemExit(143), {"outcome": "stopped", "exit_status": 143}),  # SafeStop's SIGTERM
        (KeyboardInterrupt(), {"outcome": "stopped", "exit_status": 130}),
        (ConfigError("data.batch_size=7 is not a multiple\n of 2"), {"outcome": "failed", "error": ""}),
        (RuntimeError("boom\nmore"), {"outcome": "failed", "error": "RuntimeError: boom"}),
    ],
)
def test_an_attempt_ends_with_how_it_ended(tmp_path, raised, outcome):
    try:
        with provenance.recorded_attempt(tmp_path):
            if raised is not None:
                raise raised
    except BaseException as e:  # noqa: BLE001
        assert e is raised
    (attempt,) = provenance.attempts(tmp_path)
    if isinstance(raised, ConfigError):
        outcome["error"] = "data.batch_size=7 is not a multiple of 2"  # the one line the runner prints
    assert {k: attempt[k] for k in outcome} == outcome and "ended" in attempt and "run" not in attempt


def test_an_installed_gpt1_says_it_is_no_git_checkout(tmp_path, monkeypatch):
    (tmp_path / "site-packages" / "gpt1").mkdir(parents=True)
    monkeypatch.setattr(gpt1, "__file__", str(tmp_path / "site-packages" / "gpt1" / "__init__.py"))
    assert provenance.code() == {"version": gpt1.__version__, "commit": None, "source": "installed, not a git checkout"}


def test_the_command_line_is_the_console_scripts_for_the_processes_it_starts(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/usr/bin/gpt1-rank", "a=1"])
    monkeypatch.delenv(provenance.COMMAND_LINE, raising=False)
    assert provenance.command_line() == "gpt1-rank a=1"  # a process of its own
    monkeypatch.setenv(provenance.COMMAND_LINE, "gpt1 pretrain 'data.train_files=[a b]'")
    assert provenance.command_line() == "gpt1 pretrain 'data.train_files=[a b]'"  # as typed, in a DDP rank or a job
