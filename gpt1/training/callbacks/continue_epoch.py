"""An epoch resumed in another number of forward passes per update (``ContinueEpoch``)."""

from __future__ import annotations

import lightning as L
from lightning.pytorch.callbacks import Callback

from gpt1.core.compat import count_batches_in_passes
from gpt1.core.errors import CheckpointError


class ContinueEpoch(Callback):
    """A run resumed with another number of forward passes per update than its checkpoint's run took counts the
    epoch's batches that Lightning restored in this run's passes, so that the epoch goes on at the same example (the
    training order is one of global batches: ``gpt1.data.base.DataModule``)."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        then, now = getattr(trainer.datamodule, "resumed_passes", None), trainer.accumulate_grad_batches
        if then is not None and then != now and not count_batches_in_passes(trainer, then, now):
            raise CheckpointError(
                f"{trainer.ckpt_path} was saved in the middle of an update of {then} forward passes, which this run "
                f"takes in {now}: resume it with the processes and micro_batch_size it was saved with"
            )
