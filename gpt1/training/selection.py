"""Model selection by validation, as the original fine-tuning code (train.py keeps ``best_params`` by validation
accuracy and predicts the test set from them): ``BestWeights`` (``gpt1.training.callbacks.best_weights``) writes the
weights that score best on the task's main metric during training; ``select_weights`` loads them back after training
for the test metrics, the predictions and the fine-tuned checkpoint."""

from __future__ import annotations

from typing import Any, Optional

import lightning as L

from gpt1.checkpoints.format import read_checkpoint
from gpt1.core.errors import CheckpointError
from gpt1.training.callbacks.best_weights import BestWeights


def select_weights(trainer: L.Trainer, best: Optional[BestWeights], last: dict[str, float]) -> dict[str, Any]:
    """The weights training ends with: with ``best`` (model_selection=best) those of the best validation, the last
    weights' validation ``last`` included (offered to ``best`` if no validation of fit scored them), loaded into the
    trainer's module; else the last ones. Returns their validation metrics (``val/...``), the last weights' as
    ``val_last/...``, and ``selected_step``."""
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
