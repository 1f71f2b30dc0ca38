"""Plumbing shared by the gpt1 commands: the Trainer, its loggers, resume and the metrics.json of a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger, WandbLogger
from omegaconf import DictConfig, OmegaConf

from gpt1.callbacks import AtomicCheckpointIO
from gpt1.config import LoggerConfig
from gpt1.io import atomic_file


def build_loggers(cfg: LoggerConfig, output_dir: Path, run_name: str) -> list[Logger]:
    """CSV and TensorBoard files under ``output_dir``, and W&B if enabled."""
    loggers: list[Logger] = []
    if cfg.csv:
        loggers.append(CSVLogger(output_dir, name="csv", version=""))
    if cfg.tensorboard:
        loggers.append(TensorBoardLogger(output_dir, name="tensorboard", version="", default_hp_metric=False))
    if cfg.wandb.enabled:
        w = cfg.wandb
        loggers.append(
            WandbLogger(
                project=w.project, entity=w.entity, name=w.name or run_name, save_dir=str(output_dir),
                mode=w.mode, tags=list(w.tags),
            )
        )
    return loggers


def build_trainer(
    cfg: DictConfig, output_dir: Path, loggers: list[Logger] | None = None, callbacks: list[Callback] | None = None
) -> L.Trainer:
    """A Lightning Trainer as ``cfg`` (a ``TrainerConfig`` node) says, under ``output_dir``, atomic checkpoints."""
    if torch.cuda.is_available():
        torch.set_float32_matmul_precision("high")  # TF32 matmuls for fp32 runs on Ampere and later
    return L.Trainer(
        **OmegaConf.to_container(cfg, resolve=True),
        default_root_dir=output_dir,
        logger=loggers or False,
        callbacks=callbacks or [],
        plugins=[AtomicCheckpointIO()],
    )


def resolve_resume(resume: str | None, output_dir: Path) -> str | None:
    """The checkpoint to resume from: a path, or "auto" for this run directory's last.ckpt when there is one."""
    if resume is None:
        return None
    if resume == "auto":
        last = output_dir / "checkpoints" / "last.ckpt"
        return str(last) if last.is_file() else None
    if not Path(resume).is_file():
        raise FileNotFoundError(f"resume={resume}: no such checkpoint (give a .ckpt path, or resume=auto)")
    return resume


def log_config(trainer: L.Trainer, cfg: DictConfig) -> None:
    """Record the whole resolved config with every logger (hparams.yaml, TensorBoard, W&B)."""
    for logger in trainer.loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))


def write_metrics(output_dir: Path, metrics: dict[str, Any]) -> Path:
    """Write ``metrics.json`` (atomically) in the run directory and return its path."""
    path = output_dir / "metrics.json"
    with atomic_file(path, "w") as f:
        json.dump(metrics, f, indent=2, sort_keys=True)
    return path
