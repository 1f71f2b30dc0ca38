"""``trainer=ddp``: Lightning's DDP (``ddp`` and its variants, ``ddp_spawn``, ``ddp_find_unused_parameters_true``,
...), on GPUs (NCCL) and CPUs (gloo) alike: every process a whole model, the gradients all-reduced, so each rank
clips the same full gradients; rank 0 writes the checkpoint, one file, as one device's."""

from __future__ import annotations

from lightning.pytorch.strategies import DDPStrategy

from gpt1.training.strategies.base import TrainingStrategy, lightning_names


class DDP(TrainingStrategy):
    names = lightning_names(DDPStrategy)


STRATEGY = DDP()
