"""``trainer=deepspeed``: Lightning's DeepSpeed ZeRO (every ``deepspeed*`` name), on CUDA GPUs only, with
consolidated checkpoints: each one file in gpt1's format that every gpt1 command loads.

DeepSpeed saves a checkpoint as a directory of shards, every rank its own. ``DeepSpeedConsolidated`` has the engine
write them to ``<checkpoint>.deepspeed/``, then rank 0 gathers the fp32 weights from them (``zero_to_fp32``) into the
checkpoint's own path with the training state Lightning keeps; the optimizer's moments stay in the shards, from which
a DeepSpeed run resumes. DeepSpeed itself is imported only where it runs.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

from lightning.fabric.utilities.types import _PATH
from lightning.pytorch.strategies import DeepSpeedStrategy, StrategyRegistry
from omegaconf import DictConfig

from gpt1.checkpoints.format import atomic_save
from gpt1.core.errors import ConfigError
from gpt1.training.strategies.base import TrainingStrategy, lightning_names

SHARDS = ".deepspeed"
"""The suffix of a checkpoint's shard directory: last.ckpt's shards are last.ckpt.deepspeed/."""
TAG = "checkpoint"
"""The tag under which Lightning's DeepSpeed strategy saves (the shard directory's subdirectory)."""


def shards_of(checkpoint: _PATH) -> Path:
    """The directory of a consolidated checkpoint's shards."""
    path = Path(checkpoint)
    return path.with_name(path.name + SHARDS)


class DeepSpeedConsolidated(DeepSpeedStrategy):
    """Lightning's ``DeepSpeedStrategy`` whose checkpoints are one file each (the shards kept beside it)."""

    def save_checkpoint(self, checkpoint: dict[str, Any], filepath: _PATH, storage_options: Any = None) -> None:
        filepath = self.broadcast(filepath)
        shards = shards_of(filepath)
        super().save_checkpoint(checkpoint, shards, storage_options)  # every rank writes its shards
        self.barrier()
        if self.is_global_zero:
            from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

            weights = get_fp32_state_dict_from_zero_checkpoint(str(shards), tag=TAG)  # the module's names, fp32
            state = {k: v for k, v in checkpoint.items() if k != "optimizer_states"}  # (the moments: in the shards)
            atomic_save({**state, "state_dict": weights}, filepath)
        self.barrier()

    def load_checkpoint(self, checkpoint_path: _PATH, weights_only: bool | None = None) -> dict[str, Any]:
        """Resume from a consolidated checkpoint's shards (the engine's own load: weights, optimizer moments)."""
        shards = shards_of(checkpoint_path)
        return super().load_checkpoint(shards if shards.is_dir() else checkpoint_path, weights_only)

    def remove_checkpoint(self, filepath: _PATH) -> None:
        """A periodic checkpoint no longer kept goes with its shards."""
        super().remove_checkpoint(filepath)
        if self.is_global_zero:
            shutil.rmtree(shards_of(filepath), ignore_errors=True)


class DeepSpeed(TrainingStrategy):
    """``DeepSpeedConsolidated`` at the ZeRO settings of its name, refused in one line where it cannot run."""

    names = lightning_names(DeepSpeedStrategy)
    gpus_only = True

    def check(self, cfg: DictConfig) -> None:
        super().check(cfg)
        if importlib.util.find_spec("deepspeed") is None:
            raise ConfigError(
                f"trainer.strategy={cfg.strategy} needs DeepSpeed, which is not installed: "
                "pip install 'gpt1[deepspeed]'"
            )

    def build(self, name: str, options: dict[str, Any]) -> DeepSpeedConsolidated:
        return DeepSpeedConsolidated(**{**StrategyRegistry[name]["init_params"], **options})

    def holds_training_state(self, checkpoint: dict[str, Any], path: Path) -> bool:
        """The file's loops, the optimizer's moments in the shards beside it."""
        return super().holds_training_state(checkpoint, path) or ("loops" in checkpoint and shards_of(path).is_dir())


STRATEGY = DeepSpeed()
