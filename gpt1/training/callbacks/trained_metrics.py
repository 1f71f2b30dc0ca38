"""The training metrics of the update a checkpoint is saved at, kept in the checkpoint."""

from __future__ import annotations

from typing import Any, Optional

import lightning as L
from lightning.pytorch.callbacks import Callback


class TrainedMetrics(Callback):
    """Every checkpoint holds the training metrics (train/...) of the update it is saved at, and a resumed run gets
    them back (``restored``): an attempt resumed at a run's last step trains nothing, yet writes the uninterrupted
    run's train/loss and train/ppl to metrics.json."""

    def __init__(self) -> None:
        self.trainer: Optional[L.Trainer] = None
        self.restored: dict[str, float] = {}

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self.trainer = trainer

    def state_dict(self) -> dict[str, Any]:
        # (read as the checkpoint is saved: the update's own metrics, logged in its training step)
        logged = self.trainer.callback_metrics if self.trainer is not None else {}
        return {"train": {k: float(v) for k, v in logged.items() if k.startswith("train/")} or self.restored}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.restored = dict(state_dict.get("train", {}))
