"""``trainer.strategy=fsdp`` (and ``fsdp_cpu_offload``): Lightning's FSDP1 (``FSDPStrategy``), on CUDA GPUs only;
``trainer=fsdp`` is FSDP2 (``gpt1.training.strategies.fsdp2``), which runs on CPUs too."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from hydra.utils import get_class
from lightning.pytorch.strategies import FSDPStrategy, Strategy
from lightning.pytorch.utilities import GradClipAlgorithmType

from gpt1.training.strategies.base import TrainingStrategy, clip_settings, lightning_names


class FSDP1(TrainingStrategy):
    names = lightning_names(FSDPStrategy)
    gpus_only = True

    def build(self, name: str, options: dict[str, Any]) -> str | Strategy:
        """As Lightning's, a ``*_policy`` option given as a list of class paths (``auto_wrap_policy``) becoming the
        set of those classes."""
        policies = {k: v for k, v in options.items() if k.endswith("_policy") and isinstance(v, list)}
        return super().build(name, {**options, **{k: {get_class(path) for path in v} for k, v in policies.items()}})

    def clip_gradients(
        self,
        module: L.LightningModule,
        optimizer: torch.optim.Optimizer,
        value: float | None,
        algorithm: str | None,
    ) -> None:
        """By norm, FSDP's own (Lightning refuses to clip FSDP's by norm: Lightning-AI/pytorch-lightning#19235):
        each rank holds a shard of the gradients, so the norm is reduced over the ranks."""
        threshold, kind = clip_settings(module.trainer, value, algorithm)
        if kind != GradClipAlgorithmType.NORM:
            super().clip_gradients(module, optimizer, value, algorithm)
        elif threshold:
            module.trainer.model.clip_grad_norm_(threshold)


STRATEGY = FSDP1()
