"""A finished run's results, never silently redone or lost. A run resumed at the step its metrics.json was written at
(``resume=auto`` of a finished run, a finished job of a resumed sweep) keeps that file as its results, trains and
evaluates nothing. A metrics.json that is missing or cannot be read is named in one line, kept aside
(``metrics.json.damaged-<time>``) and rebuilt, every figure, from the copy the attempt that wrote it recorded in
provenance.json (``gpt1.training.run``); where no copy survives, the line says that the evaluation after training is
done again, and why."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from gpt1.checkpoints.format import read_checkpoint
from gpt1.core.errors import UserError
from gpt1.core.files import atomic_file, keep_aside
from gpt1.core.provenance import FILE, attempts

if TYPE_CHECKING:
    import lightning as L


@dataclass
class Kept:
    """What a resumed run finds of its results."""

    metrics: Optional[dict[str, Any]]
    """Its metrics.json (rebuilt if it had to be), if the run finished at the step asked; else None."""
    note: Optional[str] = None
    """The line that says what was wrong with metrics.json and what was done, if anything was."""
    again: bool = False
    """The run had finished, but its figures are lost: the evaluation after training must be done again."""


def kept_results(output_dir: Path, step: Optional[int], write: bool = True) -> Kept:
    """The results of the run in ``output_dir`` if it finished at ``step`` (None: any step, for a run that trains
    nothing): its metrics.json; else, where that is missing or damaged, the copy of the figures provenance.json
    holds of an attempt that ended at ``step``, written back (the damaged file kept aside; with ``write`` False,
    nothing is written: what would be). A damaged metrics.json, or a missing one after an attempt that finished,
    with no copy: ``again``, the evaluation to be done again."""
    path = output_dir / "metrics.json"
    try:
        metrics = json.loads(path.read_text())
        problem = None if isinstance(metrics, dict) else "does not hold a JSON object"
    except FileNotFoundError:
        metrics, problem = None, "is missing"
    except (OSError, ValueError) as e:
        metrics, problem = None, f"could not be read ({type(e).__name__}: {str(e).splitlines()[0]})"
    if problem is None:
        return Kept(metrics if step is None or metrics.get("steps") == step else None)
    tried = attempts(output_dir)
    copy = next((a["results"] for a in reversed(tried) if _results_at(a, step)), None)
    finished = any(a.get("outcome") == "finished" for a in tried)
    if copy is None and problem == "is missing" and not finished:
        return Kept(None)  # never written (a stop after the last update skipped it): nothing lost
    aside = f": kept as {keep_aside(path).name}" if path.exists() and write else ""
    at = f"step {step}" if step is not None else "its end"
    if copy is None:
        return Kept(
            None,
            f"note: {path} {problem}{aside}, and {FILE} holds no copy of figures of {at}: the evaluation after "
            f"training is done again on the weights of {at}, since its figures cannot be rebuilt (nothing is trained)",
            again=True,
        )
    if write:
        with atomic_file(path, "w") as f:
            json.dump(copy, f, indent=2, sort_keys=True)
    return Kept(copy, f"note: {path} {problem}{aside}: rebuilt from the copy of its figures in {FILE} ({at})")


def finished_results(trainer: L.Trainer, output_dir: Path) -> Optional[dict[str, Any]]:
    """The results of the run in ``output_dir``, resumed at its last step by ``trainer``, if it had finished (global
    rank 0's reading, said there when its metrics.json had to be rebuilt or its evaluation is done again)."""
    kept = kept_results(output_dir, trainer.global_step) if trainer.is_global_zero else None
    kept = trainer.strategy.broadcast(kept, src=0) or Kept(None)
    if trainer.is_global_zero:
        if kept.note:
            print(kept.note, file=sys.stderr, flush=True)
        if kept.metrics is not None:
            how = "rebuilt as it was written" if kept.note else "kept as it was"
            print(f"the run had finished at step {trainer.global_step}: its metrics.json is {how}")
    return kept.metrics


def _results_at(attempt: dict[str, Any], step: Optional[int]) -> bool:
    results = attempt.get("results")
    return isinstance(results, dict) and (step is None or results.get("steps") == step)


def checkpoint_step(path: Path) -> Optional[int]:
    """The global step a training checkpoint was saved at (its tensors mapped, not read), None where it cannot be
    read."""
    try:
        return read_checkpoint(path, mmap=True).get("global_step")
    except (UserError, AttributeError):
        return None
