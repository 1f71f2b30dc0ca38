"""Periodic checkpoints under <run dir>/checkpoints, the newest kept, and ``last.ckpt`` at every save and at the end."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Optional

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint

from gpt1.core.compat import last_global_step_saved


class PeriodicCheckpoint(ModelCheckpoint):
    """ModelCheckpoint that also saves ``last.ckpt`` when training stops off the interval (max_steps, max_time)."""

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: Optional[str] = None) -> None:
        # The directory is the run's own (gpt1 names it, one writer holds it): a resumed run finds its checkpoints
        # there, which Lightning, knowing no better, warns of ("exists and is not empty").
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
            super().setup(trainer, pl_module, stage)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_step != last_global_step_saved(self):
            trainer.save_checkpoint(Path(self.dirpath) / f"{self.CHECKPOINT_NAME_LAST}{self.FILE_EXTENSION}")
