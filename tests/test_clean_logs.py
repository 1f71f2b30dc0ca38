"""Clean logs: every long command, its output redirected to a file (not a terminal, as a job's log or ``cmd > log``),
prints whole lines: progress as lines, no carriage return, no escape code (tqdm's redraws wrote both)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import FEW, FEW_FINETUNE, OFFLINE_ENV, run_gpt1

ENV = {**OFFLINE_ENV, "TERM": "xterm-256color"}
"""A terminal that shows colours and redraws, had the output not been redirected."""
COMMANDS = ["pretrain", "finetune", "evaluate", "zeroshot"]
"""The long commands (prepare's progress is pre-training's preparation, with a cache of its own here)."""
PROGRESS = {  # what a command's progress reads like in a log (regular expressions)
    "pretrain": ["tokenising valid: ", r"step 4/4 \(100%\)"],
    "finetune": [r"step 4/4 \(100%\)"],
    "evaluate": ["val/accuracy "],
    "zeroshot": [r"checkpoints: 1/1 ckpt \(100%\)", r"sequences: (\d+)/\1 seq \(100%\)"],
}


def run(log: Path, cwd: Path, *args: str) -> str:
    """``gpt1 ARGS > log 2>&1``; the log's text."""
    return run_gpt1(*args, cwd=cwd, env=ENV, log=log).stdout


@pytest.fixture(scope="module")
def logs(tmp_path_factory, tiny_ckpt, cache_dir) -> dict[str, str]:
    d = tmp_path_factory.mktemp("logs")
    bar = "trainer.enable_progress_bar=true"
    cache = f"paths.cache_dir={cache_dir}"
    few = [a for a in FEW if "enable_progress_bar" not in a]
    tuning = [a for a in FEW_FINETUNE if "enable_progress_bar" not in a]
    fresh = f"paths.cache_dir={d / 'cache'}"  # nothing prepared yet: preparation's progress shows
    out = {"pretrain": run(d / "pretrain.log", d, "pretrain", *few, bar, fresh, f"hydra.run.dir={d / 'pretrain'}")}
    tuned = [f"init_from={tiny_ckpt}", *tuning, bar, cache, f"hydra.run.dir={d / 'finetune'}"]
    out["finetune"] = run(d / "finetune.log", d, "finetune", "task=sentiment", *tuned)
    best = d / "finetune" / "checkpoints" / "best.ckpt"
    out["evaluate"] = run(d / "evaluate.log", d, "evaluate", f"ckpt={best}", bar, cache, f"hydra.run.dir={d / 'ev'}")
    splits = ["++task.splits.train='train[:64]'", "++task.splits.validation='validation[:64]'"]
    zs = ["task=sentiment", f"ckpts=[{tiny_ckpt}]", *splits, cache, f"hydra.run.dir={d / 'zs'}"]
    out["zeroshot"] = run(d / "zeroshot.log", d, "zeroshot", *zs)
    return out


@pytest.mark.parametrize("command", COMMANDS)
def test_a_redirected_command_prints_whole_lines(logs, command):
    text = logs[command]
    assert "\r" not in text, [line for line in text.split("\n") if "\r" in line][:3]
    assert "\x1b" not in text, [line for line in text.split("\n") if "\x1b" in line][:3]
    for progress in PROGRESS[command]:
        assert re.search(progress, text), text[-2000:]
