"""The weights of the best validation during fine-tuning (model_selection=best), written as the validations come, as
the original fine-tuning code keeps ``best_params``; ``gpt1.training.selection`` loads them back after training."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

import lightning as L
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.trainer.states import TrainerFn


class BestWeights(Callback):
    """After each validation of ``fit`` (not the sanity check), write the weights to ``path`` (weights only, with the
    model, tokenizer and task, loadable by every command) when ``monitor`` (e.g. ``val/accuracy``; higher is
    better) beats every earlier validation's, strictly, as the original's ``score > best_score``. Keeps the best
    value, its step and its validation metrics (keys starting with one of ``prefixes``); a resumed run keeps them,
    and where its weights are (``source``: ``path``, or the interrupted run's when it resumed in another directory)."""

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
