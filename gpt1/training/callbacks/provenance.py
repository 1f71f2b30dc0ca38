"""A training run's part of its provenance record (``gpt1.core.provenance``): how it ran, once training starts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import WandbLogger

from gpt1.core.provenance import update_attempt
from gpt1.cpu import kernels


class RecordRun(Callback):
    """At training's start (a resumed attempt's too), on rank 0: ``run_record`` into the attempt's record in
    ``<run dir>/provenance.json``, and the whole attempt into W&B's config. After ``RunKernels``, which fixes a
    resumed run's CPU kernels."""

    def __init__(self, output_dir: str | os.PathLike) -> None:
        self.output_dir = Path(output_dir)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        attempt = update_attempt(self.output_dir, run=run_record(trainer))
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                logger.experiment.config.update({"provenance": attempt}, allow_val_change=True)


def run_record(trainer: L.Trainer) -> dict[str, Any]:
    """How ``trainer`` runs, and its kernels: the CPU matmuls, float32 matmul precision and, on CUDA, the SDPA
    backends enabled."""
    used = {
        "cpu_matmuls": dict(kernels.CPU_MATMULS),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    if torch.cuda.is_available():
        backends = torch.backends.cuda
        used["sdpa"] = {
            "flash": backends.flash_sdp_enabled(),
            "mem_efficient": backends.mem_efficient_sdp_enabled(),
            "cudnn": backends.cudnn_sdp_enabled(),
            "math": backends.math_sdp_enabled(),
        }
    return {
        "processes": trainer.world_size,
        "nodes": trainer.num_nodes,
        "devices": trainer.num_devices,
        "accelerator": type(trainer.accelerator).__name__.removesuffix("Accelerator").lower(),
        "precision": trainer.precision,
        "strategy": type(trainer.strategy).__name__,
        "passes_per_update": trainer.accumulate_grad_batches,
        "start_step": trainer.global_step,
        "kernels": used,
    }
