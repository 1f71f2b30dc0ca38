"""The training metrics of a run shorter than Lightning's logging interval, logged all the same."""

from __future__ import annotations

import math

import lightning as L
from lightning.pytorch.callbacks import Callback


class LogShortRuns(Callback):
    """In a run of fewer updates than ``trainer.log_every_n_steps`` (a short fine-tune), the interval becomes the
    run's length, so that its last update is logged (Lightning logs every n-th update only)."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        updates = trainer.estimated_stepping_batches
        if math.isfinite(updates) and 0 < updates < trainer.log_every_n_steps:
            trainer.log_every_n_steps = int(updates)
