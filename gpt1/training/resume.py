"""Resuming a run: which checkpoint, checked before Lightning reads it."""

from __future__ import annotations

from pathlib import Path

import lightning as L

from gpt1.checkpoints.format import read_checkpoint, state_mismatch
from gpt1.core.errors import CheckpointError, ConfigError
from gpt1.training.deepspeed import shards_of


def resolve_resume(resume: str | None, output_dir: Path) -> str | None:
    """The checkpoint to resume from: a path, or "auto" for this run directory's last.ckpt when there is one; checked
    before any data work: readable and a gpt1 training checkpoint (weights and training state), a ``CheckpointError``
    that names it otherwise. ``check_resume_fits`` checks it against the model once there is one."""
    if resume is None:
        return None
    if resume == "auto":
        last = output_dir / "checkpoints" / "last.ckpt"
        if not last.is_file():
            return None
        path, resume = last, f"auto ({last})"
    else:
        path = Path(resume)
        if not path.is_file():
            raise ConfigError(f"resume={resume}: no such checkpoint (give a .ckpt path, or resume=auto)")
    raw = read_checkpoint(path, mmap=True)
    if not isinstance(raw, dict) or not isinstance(raw.get("gpt1"), dict) or "state_dict" not in raw:
        raise CheckpointError(
            f"resume={resume} is not a gpt1 checkpoint: give a checkpoint of a gpt1 run "
            "(<run dir>/checkpoints/last.ckpt)"
        )
    if "loops" not in raw or ("optimizer_states" not in raw and not shards_of(path).is_dir()):  # (DeepSpeed's: shards)
        raise CheckpointError(
            f"resume={resume} holds weights but no training state (it was not saved by a "
            f"training run): start from its weights with init_from={path} instead"
        )
    return str(path)


def check_resume_fits(path: str | None, module: L.LightningModule) -> str | None:
    """``path`` (from ``resolve_resume``) if its parameters, shapes and tokenizer are those of ``module``, about to
    train; a ``CheckpointError`` naming the difference otherwise."""
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
    return path
