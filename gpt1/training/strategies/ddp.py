"""``trainer=ddp``: Lightning's DDP (``ddp`` and its variants), on GPUs (NCCL) and CPUs (gloo) alike, as Lightning
runs it."""

from __future__ import annotations

from lightning.pytorch.strategies import DDPStrategy

from gpt1.training.strategies.base import TrainingStrategy, lightning_names


class DDP(TrainingStrategy):
    names = lightning_names(DDPStrategy)


STRATEGY = DDP()
