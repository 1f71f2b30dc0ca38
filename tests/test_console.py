"""A run's console, line by line, the same whatever else is installed: a tiny pre-training (its BPE trained, each
pass counted to the corpus's documents), a fine-tune of it and a pre-training logged to W&B offline, each command
through the ``gpt1`` console script's code, in a process where rich imports (transformers' install brings it) and in
one where it cannot. One gpt1 line for the model, none of Lightning's model table (rich's box or its plain one) or
device lines, no W&B warning that "the anonymous setting has no effect"; W&B offline says where the run is and the
``wandb sync`` command that sends it, which runs as printed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import FEW, FEW_FINETUNE, OFFLINE_ENV, fresh_shell, run_python

RUNS = r"""
import json, sys
from importlib.machinery import PathFinder

HIDDEN = {"rich", "transformers"}  # not installed: without rich, no transformers either (its install brings rich)
if sys.argv[1] == "without-rich":  # Python's finder of installed modules and their metadata finds neither
    find_spec, find_distributions = PathFinder.find_spec, PathFinder.find_distributions

    def spec(name, path=None, target=None):
        return None if name.partition(".")[0] in HIDDEN else find_spec(name, path, target)

    def distributions(*args, **kwargs):
        return (d for d in find_distributions(*args, **kwargs) if (d.name or "").lower() not in HIDDEN)

    PathFinder.find_spec, PathFinder.find_distributions = staticmethod(spec), staticmethod(distributions)
import gpt1.app.cli

for argv in json.loads(sys.argv[2]):
    print("=== gpt1 " + argv[0], flush=True)
    sys.argv = ["gpt1", *argv]
    gpt1.app.cli.main()
try:
    import rich
except ModuleNotFoundError:
    print("=== rich cannot be imported")
"""
"""Run the ``gpt1`` commands of argv[2] (a JSON list of argument lists) one after the other in this process, with rich
importable or not (argv[1])."""

BPE = "training the BPE, pass {}/2: [01]/1 documents, .* characters/s.*"
PRETRAIN = [
    "Seed set to 1234",
    "+" + BPE.format(1),
    "+" + BPE.format(2),
    r"\[[\d :,-]+\]\[gpt1.data.pretrain_data\]\[INFO\] - trained a 513-token BPE in .*",
    "+tokenising train: [01]/1 documents, .*",
    r"\[[\d :,-]+\]\[gpt1.data.pretrain_data\]\[INFO\] - packed 1 documents into \d+ tokens in .*",
    "+tokenising valid: [01]/1 documents, .*",
    r"\[[\d :,-]+\]\[gpt1.data.pretrain_data\]\[INFO\] - packed 1 documents into \d+ tokens in .*",
    r"?Using bfloat16 Automatic Mixed Precision \(AMP\)",  # trainer.precision=auto where the CPU has native bf16
    r"run directory: \S+",
    "model: 42,848 parameters, vocab 513, context 32; on cpu",
    r"CPU matmul kernels: .*; chosen at the run's start \((measured|cached)\); .*",
    *(rf"step {n}/4 \({25 * n}%\), .* elapsed, .*train/loss [\d.]+.*" for n in (1, 2, 3, 4)),
    "`Trainer.fit` stopped: `max_steps=4` reached.",
    r"validation perplexity [\d.]+ \(unigram baseline [\d.]+\)",
    r"checkpoint: \S+/checkpoints/last.ckpt",
    r"metrics: \S+/metrics.json",
    r"peak memory: host [\d.]+ GB.*",
]
"""The expected console of a tiny pre-training on a new cache, a regex per line: "?" before one that may be absent,
"+" before one that shows once or more (progress that took longer than its interval)."""
FINETUNE = [
    *(
        rf"\[[\d :,-]+\]\[gpt1.tasks.task_data\]\[INFO\] - task sentiment, {split}: {n} examples, .*"
        for split, n in (("train", 64), ("validation", 16), ("test", 16))
    ),
    "run directory: .*/finetune",
    r"model: gpt, 42,944 parameters; task sentiment \(classification\), 1 x 8 examples per update per device; on cpu",
    r"CPU matmul kernels: .*; chosen at the run's start \((measured|cached)\); .*",
    *(rf"step {n}/4 \({25 * n}%\), .* elapsed, .*train/loss [\d.]+.*" for n in (1, 2, 3, 4)),
    "`Trainer.fit` stopped: `max_steps=4` reached.",
    r"val/accuracy [\d.]+ \(baseline [\d.]+\).*",
    r"checkpoint: .*/finetune/checkpoints/best.ckpt \(model_selection=best\)",
    "metrics: .*/finetune/metrics.json",
    r"peak memory: host [\d.]+ GB.*",
]
WANDB_OFFLINE = [
    "Seed set to 1234",
    r"W&B offline: the run is saved in (\S+); to send it to W&B \(logged in\): wandb sync \1",
    *PRETRAIN[8:],
]
"""The pre-training again (its data cached) with logger=wandb logger.wandb.mode=offline."""


def matches(lines: list[str], shape: list[str]) -> None:
    """Assert that ``lines`` are ``shape``, line by line (its "?" and "+" marks as ``PRETRAIN`` says)."""
    at = 0
    for pattern in shape:
        mark, regex = (pattern[0], pattern[1:]) if pattern[:1] in ("?", "+") else ("", pattern)
        seen = 0
        while at < len(lines) and re.fullmatch(regex, lines[at]) and (seen == 0 or mark == "+"):
            at, seen = at + 1, seen + 1
        assert seen or mark == "?", f"line {at + 1} is not /{regex}/:\n" + "\n".join(lines)
    assert at == len(lines), f"line {at + 1} is more than expected:\n" + "\n".join(lines)


@pytest.fixture(scope="module", params=["with-rich", "without-rich"])
def console(request, tmp_path_factory, sample_data) -> tuple[dict[str, list[str]], Path]:
    """The console of each command (pretrain, finetune, pretrain with W&B offline) in one process, by command."""
    d = tmp_path_factory.mktemp(request.param)
    cache = [f"paths.cache_dir={d / 'cache'}", f"paths.sample_data={sample_data}"]  # (a new cache: the BPE trains)
    shown = "trainer.enable_progress_bar=true"  # (in a log file: a line per tenth of the run)
    pretrain = ["pretrain", *FEW, shown, *cache, f"hydra.run.dir={d / 'pretrain'}"]
    finetune = ["finetune", "task=sentiment", f"init_from={d / 'pretrain/checkpoints/last.ckpt'}", *FEW_FINETUNE]
    finetune += [shown, *cache, f"hydra.run.dir={d / 'finetune'}"]
    wandb = [*pretrain[:-1], "logger=wandb", "logger.wandb.mode=offline", f"hydra.run.dir={d / 'wandb'}"]
    env = {k: v for k, v in OFFLINE_ENV.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(d / "home"), WANDB_DISABLE_GIT="true")
    argvs = json.dumps([pretrain, finetune, wandb])
    log = d / "console.log"  # one stream, in the order a terminal shows it
    proc = run_python("-c", RUNS, request.param, argvs, cwd=d, env=env, timeout=600, log=log)
    parts = re.split(r"^=== (gpt1 \w+|rich cannot be imported)\n", proc.stdout, flags=re.M)
    assert parts[0] == "" and parts[1::2][:3] == ["gpt1 pretrain", "gpt1 finetune", "gpt1 pretrain"], proc.stdout
    assert ("rich cannot be imported" in parts[1::2]) == (request.param == "without-rich")
    runs = dict(zip(["pretrain", "finetune", "wandb"], (part.splitlines() for part in parts[2::2])))
    return runs, d


def test_a_pretrain_prints_one_line_for_its_model_and_nothing_of_lightnings_tables_or_devices(console):
    matches(console[0]["pretrain"], PRETRAIN)


def test_a_finetune_prints_one_line_for_its_model_and_nothing_of_lightnings_tables_or_devices(console):
    matches(console[0]["finetune"], FINETUNE)


def test_wandb_offline_says_where_the_run_is_and_its_sync_command_runs_as_printed(console):
    """The ``wandb sync`` command gpt1 prints, in a new shell with nothing of this one's environment: it finds the run
    gpt1 saved and stops where it would reach W&B's servers (no API key here: tests never reach the network), before
    any upload; what is past that point, the upload, is W&B's own."""
    runs, d = console
    matches(runs["wandb"], WANDB_OFFLINE)
    command = re.search(r": (wandb sync \S+)$", runs["wandb"][1]).group(1)
    (d / "sync").mkdir()
    proc = fresh_shell(command, d / "sync", timeout=120)  # (its HOME empty: no ~/.netrc, no W&B settings, no key)
    (log,) = (d / "wandb" / "wandb").glob("offline-run-*/run-*.wandb")
    assert proc.returncode == 1 and "Syncing 1 run(s)" in proc.stderr, proc.stderr
    assert f"{log.name}" in proc.stderr and "No API key configured" in proc.stderr, proc.stderr


def test_lightnings_line_of_the_gpus_each_process_sees_is_silenced_too(capfd, monkeypatch):
    """On a GPU Lightning says "LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]" at each Trainer's start, besides the lines
    above; here on any machine (it counts the GPUs there are, none on a CPU)."""
    import logging

    from lightning.pytorch.accelerators import CUDAAccelerator

    from gpt1.training.console import quiet_library_noise

    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # (which Lightning sets: put back after the test)
    logger = logging.getLogger("lightning.pytorch.accelerators.cuda")
    monkeypatch.setattr(logger, "filters", [])  # (as at a process's start: a gpt1 run before in this one quieted it)
    handler = logging.StreamHandler()  # (to stderr, as Hydra's job logging would print it)
    logger.addHandler(handler)
    try:
        CUDAAccelerator.set_nvidia_flags(0)
        assert "CUDA_VISIBLE_DEVICES: [" in capfd.readouterr().err  # Lightning says it
        quiet_library_noise()
        CUDAAccelerator.set_nvidia_flags(0)
        assert capfd.readouterr().err == ""
    finally:
        logger.removeHandler(handler)


def test_a_resumed_run_is_not_warned_of_its_own_checkpoints(tmp_path):
    """Resumed into its directory, a run finds its checkpoints there: Lightning's ModelCheckpoint warns that the
    directory "exists and is not empty", gpt1's PeriodicCheckpoint (whose directory the run owns) does not."""
    import warnings

    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    from gpt1.training.callbacks.periodic_checkpoint import PeriodicCheckpoint

    (tmp_path / "last.ckpt").write_bytes(b"a checkpoint of the run")
    trainer = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    for callback, warned in ((ModelCheckpoint(dirpath=tmp_path), True), (PeriodicCheckpoint(dirpath=tmp_path), False)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            callback.setup(trainer, L.LightningModule(), "fit")
        assert any("exists and is not empty" in str(w.message) for w in caught) == warned, callback
