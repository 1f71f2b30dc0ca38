"""A run whose epochs give it too few updates to train says so at its start, with the epochs that would
(``FewUpdates``): a small task of one's own under the paper's 3 epochs of batches of 32 gets a handful."""

from __future__ import annotations

import math

import lightning as L
from lightning.pytorch.callbacks import Callback

from gpt1.training.console import say

FEWEST_UPDATES = 3 * (2490 // 32)
"""231: the updates of the paper's smallest task, RTE (2,490 training examples), under its fine-tuning recipe (3
epochs of batches of 32, the last partial batch dropped). A run whose epochs give it fewer is called under-trained."""


class FewUpdates(Callback):
    """At the start of a run whose budget is epochs and whose epochs come to fewer than ``FEWEST_UPDATES`` updates,
    one line naming them and the trainer.max_epochs that gives enough (a resumed run has said it at its start)."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        updates, epochs = trainer.estimated_stepping_batches, trainer.max_epochs
        if trainer.max_steps > 0 or trainer.global_step or not math.isfinite(updates) or not epochs or epochs < 1:
            return
        if 0 < updates < FEWEST_UPDATES:
            per_epoch = updates / epochs
            raised = math.ceil(FEWEST_UPDATES / per_epoch)
            say(
                trainer,
                f"warning: {updates:g} updates ({epochs} epochs of {per_epoch:g}), too few to train (the paper's "
                f"smallest task, RTE, gets {FEWEST_UPDATES} from its recipe): add trainer.max_epochs={raised} to the "
                f"command for {math.floor(raised * per_epoch)} updates",
            )
