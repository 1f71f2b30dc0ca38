"""Periodic checkpoints under <run dir>/checkpoints, the newest kept, and ``last.ckpt`` at every save and at the end."""

from __future__ import annotations

from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint

from gpt1.core.compat import last_global_step_saved


class PeriodicCheckpoint(ModelCheckpoint):
    """ModelCheckpoint that also saves ``last.ckpt`` when training stops off the interval (max_steps, max_time)."""

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_step != last_global_step_saved(self):
            trainer.save_checkpoint(Path(self.dirpath) / f"{self.CHECKPOINT_NAME_LAST}{self.FILE_EXTENSION}")
