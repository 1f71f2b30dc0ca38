"""Model selection by validation (model_selection=best), as the original fine-tuning code (train.py keeps
``best_params`` by validation accuracy and predicts the test set from them)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

import lightning as L
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.trainer.states import TrainerFn

from gpt1.checkpoints.format import read_checkpoint
from gpt1.core.errors import CheckpointError


class BestWeights(Callback):
    """After each validation of ``fit`` (not the sanity check), write the weights to ``path`` (loadable by every
    command) when ``monitor`` (higher is better) beats every earlier validation's, strictly, as the original's
    ``score > best_score``. Keeps the best value, its step, its validation metrics (keys starting with one of
    ``prefixes``) and where its weights are (``source``: the interrupted run's when it resumed in another
    directory)."""

    def __init__(self, path: Path, monitor: str, prefixes: tuple[str, ...]) -> None:
        self.path, self.monitor, self.prefixes = Path(path), monitor, prefixes
        self.source = self.path
        self.best: Optional[float] = None
        self.step: Optional[int] = None
        self.metrics: dict[str, float] = {}

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if (
            trainer.sanity_checking
            or trainer.state.fn != TrainerFn.FITTING
            or self.monitor not in trainer.callback_metrics
        ):
            return
        self.offer(
            trainer,
            float(trainer.callback_metrics[self.monitor]),
            {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith(self.prefixes)},
        )

    def offer(self, trainer: L.Trainer, value: float, metrics: dict[str, float]) -> bool:
        """Keep the module's weights at ``trainer.global_step`` if ``value`` beats the best so far; whether it did."""
        if math.isnan(value) or (self.best is not None and not value > self.best):
            return False
        self.best, self.step, self.metrics, self.source = value, trainer.global_step, metrics, self.path
        trainer.save_checkpoint(self.path, weights_only=True)
        return True

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "step": self.step, "metrics": self.metrics, "source": str(self.source)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best, self.step, self.metrics = state_dict["best"], state_dict["step"], state_dict["metrics"]
        self.source = Path(state_dict["source"])


def select_weights(trainer: L.Trainer, best: Optional[BestWeights], last: dict[str, float]) -> dict[str, Any]:
    """The weights training ends with, loaded into the trainer's module: with ``best`` those of the best validation,
    the last weights' (``last``) a candidate too; else the last ones. Returns their validation metrics, the last
    weights' as ``val_last/...``, and ``selected_step``."""
    step = trainer.global_step
    selected = {
        "val_last/" + k.split("/", 1)[1] if k.startswith("val/") else k.replace("/", "_last/", 1): v
        for k, v in last.items()
    }
    if best is None:
        return {**last, **selected, "selected_step": step}
    if best.step != step and best.monitor in last:  # the last weights, validated after fit, are a candidate too
        best.offer(trainer, last[best.monitor], dict(last))
    if best.step is None:  # nothing validated: the last weights
        return {**last, **selected, "selected_step": step}
    if best.step != step:
        if not best.source.is_file():
            raise CheckpointError(
                f"{best.source}: the weights of the best validation (step {best.step}) are gone; "
                "model_selection=last keeps the last weights instead"
            )
        trainer.strategy.load_model_state_dict(read_checkpoint(best.source))
        if best.source != best.path:  # resumed in another directory: the fine-tuned checkpoint goes in this one
            trainer.save_checkpoint(best.path, weights_only=True)
    return {**best.metrics, **selected, "selected_step": best.step}
