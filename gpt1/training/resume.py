"""Resuming a run: which checkpoint, checked before Lightning reads it."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import lightning as L

from gpt1.checkpoints.format import missing_key, read_checkpoint, state_mismatch
from gpt1.core.errors import CheckpointError, ConfigError
from gpt1.core.provenance import finished_at
from gpt1.training.strategies.registry import resumable


def resolve_resume(resume: str | None, output_dir: Path) -> str | None:
    """The checkpoint to resume from: a path, or "auto" for this run directory's (``newest_complete``) when there is
    one; checked before any data work: readable and a gpt1 training checkpoint (weights and training state), a
    ``CheckpointError`` that names it otherwise. ``check_resume_fits`` checks it against the model once there is
    one."""
    if resume is None:
        return None
    if resume == "auto":
        path = newest_complete(output_dir / "checkpoints")  # (checked there)
        return None if path is None else str(path)
    path = Path(resume)
    if not path.is_file():
        raise ConfigError(f"resume={resume}: no such checkpoint (give a .ckpt path, or resume=auto)")
    training_state(path, resume)
    return str(path)


def training_state(path: Path, resume: str) -> dict[str, Any]:
    """The checkpoint ``path`` (given as resume=``resume``), read as data; a ``CheckpointError`` unless it is a gpt1
    training checkpoint, with the weights and the training state (in the file, or where the strategy that wrote it
    keeps it: ``gpt1.training.strategies.registry.resumable``)."""
    raw = read_checkpoint(path, mmap=True)
    if not isinstance(raw, dict) or not isinstance(raw.get("gpt1"), dict) or "state_dict" not in raw:
        raise CheckpointError(
            f"resume={resume} is not a gpt1 checkpoint: give a checkpoint of a gpt1 run "
            "(<run dir>/checkpoints/last.ckpt)"
        )
    if not resumable(raw, path):
        raise CheckpointError(
            f"resume={resume} holds weights but no training state (it was not saved by a "
            f"training run): start from its weights with init_from={path} instead"
        )
    return raw


PERIODIC = re.compile(r"step(\d+)\.ckpt")
"""The name of a periodic checkpoint (``gpt1.training.callbacks.build_callbacks``: step{step:07d}.ckpt)."""


def newest_complete(checkpoints: Path) -> Path | None:
    """The checkpoint ``resume=auto`` continues from in a run's ``checkpoints`` folder: ``last.ckpt``; if it is
    missing (a kill during its first write) or cannot be read, the newest periodic checkpoint that can, said in a
    line; None if the run saved none. A ``CheckpointError`` if ``last.ckpt`` cannot be read and no other can, if it
    is not a file, or if the run had finished: training again from an earlier step would write its results again."""
    last = checkpoints / "last.ckpt"
    if last.exists() and not last.is_file():
        raise CheckpointError(
            f"resume=auto: {last} is not a file: put the run's last checkpoint there, or move it away"
        )
    problem = None
    if last.is_file():
        try:
            training_state(last, f"auto ({last})")
            return last
        except CheckpointError as e:
            problem = e
    why = "is missing" if problem is None else f"cannot be read ({problem})"
    periodic = sorted((int(m.group(1)), p) for p in checkpoints.glob("step*.ckpt") if (m := PERIODIC.fullmatch(p.name)))
    newest = next(((step, path) for step, path in reversed(periodic) if _readable(path)), None)
    finished = finished_at(checkpoints.parent)
    if finished is not None and (newest is None or newest[0] != finished):
        again = newest and f"; to train it again from step {newest[0]}, type resume={newest[1]} in place of resume=auto"
        raise CheckpointError(
            f"resume=auto: {last} {why}, and the run had finished: nothing is trained or written again, its results "
            f"stand in {checkpoints.parent / 'metrics.json'}{again or ''}"
        )
    if newest is not None:
        step, path = newest
        print(
            f"resume=auto: {last} {why}: resuming from {path}, the newest complete checkpoint of the run (step {step})",
            file=sys.stderr,
            flush=True,
        )
        return path
    if problem is not None:
        raise problem
    return None


def _readable(path: Path) -> bool:
    try:
        training_state(path, f"auto ({path})")
        return True
    except CheckpointError:
        return False


def check_resume_fits(path: str | None, module: L.LightningModule, trainer: L.Trainer) -> int | None:
    """The step the checkpoint ``path`` (from ``resolve_resume``; None: no resume) was saved at, if its parameters,
    shapes and tokenizer are those of ``module``, about to train, and its loops' counters have the form ``trainer``
    restores; a ``CheckpointError`` naming the difference otherwise."""
    if path is None:
        return None
    raw = read_checkpoint(Path(path), mmap=True)
    ours = {k: v for k, v in module.state_dict().items() if k.startswith(("model.", "heads."))}
    theirs = {k: v for k, v in raw["state_dict"].items() if k.startswith(("model.", "heads."))}
    misfit = state_mismatch(theirs, ours)
    tokenizer = getattr(module, "tokenizer", None)
    if misfit is None and tokenizer is not None and raw["gpt1"].get("tokenizer") != tokenizer.to_str():
        misfit = "its tokenizer differs from this run's"
    if misfit:
        raise CheckpointError(
            f"resume={path} does not fit this run's model ({misfit}): resume with the settings it was "
            "saved with (model, tokenizer, data: its run directory's .hydra/config.yaml), or start a new run"
        )
    loops = raw.get("loops")
    missing = missing_key(trainer.fit_loop.state_dict(), loops.get("fit_loop") if isinstance(loops, dict) else loops)
    if loops is not None and missing:  # (else Lightning's KeyError as it restores them)
        raise CheckpointError(
            f"resume={path}: its training loop's counters are damaged ({missing} is missing): resume from another "
            f"checkpoint of the run, or start from its weights with init_from={path}"
        )
    return raw.get("global_step")
