"""Plumbing shared by the gpt1 commands: the Trainer, its loggers, resume, the metrics.json of a run, and the
scoring of a fine-tuned model on its task (``gpt1 finetune``, ``gpt1 evaluate``)."""

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
from gpt1.data.tasks import TaskConfig, TaskDataModule
from gpt1.errors import ConfigError
from gpt1.io import atomic_file
from gpt1.module import TaskModule, build_metric


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
        raise ConfigError(f"resume={resume}: no such checkpoint (give a .ckpt path, or resume=auto)")
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


def task_prefixes(data: TaskDataModule) -> tuple[list[str | None], list[str]]:
    """The metric prefix of each of a task's validation and test dataloaders, in order (None: a validation split
    without labels, which gets no metrics)."""
    prefix_of = {split: prefix for prefix, split in data.eval_splits.items()}
    val = [prefix_of.get(s) for s in data.roles["validation"]]
    return val, [prefix_of[s] for s in data.roles["test"] if data.has_labels(s)]


def score(trainer: L.Trainer, module: TaskModule, data: TaskDataModule) -> dict[str, float]:
    """The task's metrics (and loss) on every validation split, and on every test split that has labels:
    {"val/accuracy": ..., "val_mismatched/accuracy": ..., "test/accuracy": ..., ...}."""
    results: dict[str, float] = {}
    for out in trainer.validate(module, datamodule=data, verbose=False):
        results.update(out)
    if any(module.prefixes["test"]):
        for out in trainer.test(module, datamodule=data, verbose=False):
            results.update(out)
    return {k: float(v) for k, v in sorted(results.items())}


def baseline_metrics(task: TaskConfig, data: TaskDataModule) -> dict[str, float]:
    """The task's metrics on the first validation split of a constant prediction: the majority class (or choice
    position) of the training labels, their mean for regression. A constant correlates with nothing: mcc, pearson
    and spearman are 0 (sklearn's convention; torchmetrics' degenerate-case values are not meaningful)."""
    train = torch.from_numpy(data.train_labels())
    regression = task.num_labels == 1 and task.type != "multiple_choice"
    constant = train.float().mean() if regression else train.long().bincount().argmax()
    labels = torch.from_numpy(data.encoded[data.eval_splits["val"]].labels)
    metrics = {}
    for name in task.metrics:
        if name in ("mcc", "pearson", "spearman"):
            metrics[f"baseline/{name}"] = 0.0
            continue
        metric = build_metric(name, task.type, task.num_labels)
        metric.update(constant.expand_as(labels), labels)
        metrics[f"baseline/{name}"] = float(metric.compute())
    return metrics


def write_predictions(trainer: L.Trainer, module: TaskModule, data: TaskDataModule, directory: Path) -> list[Path]:
    """Predict every test split, labelled or not, into ``directory/<split id>.tsv`` (test.tsv; MNLI's
    test_matched.tsv, test_mismatched.tsv): a header, then ``index<TAB>prediction`` per example in index order
    (GLUE's submission format); label names when the task has them, else class or choice ids, or scores."""
    outputs = trainer.predict(module, datamodule=data)
    per_split = outputs if outputs and isinstance(outputs[0], list) else [outputs]  # a list per dataloader
    names = module.task.label_names
    paths = []
    for split, batches in zip(data.roles["test"], per_split, strict=True):
        index = torch.cat([b["index"] for b in batches]).tolist()
        preds = torch.cat([b["prediction"] for b in batches]).tolist()
        path = directory / f"{split}.tsv"
        lines = ["index\tprediction"]
        for i, p in sorted(zip(index, preds, strict=True)):
            lines.append(f"{i}\t{f'{p:.6g}' if isinstance(p, float) else names[p] if names else p}")
        if trainer.is_global_zero:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(path, "w") as f:
                f.write("\n".join(lines) + "\n")
        paths.append(path)
    return paths
