"""Callbacks of a gpt1 run: periodic checkpoints (written atomically), text samples, throughput."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, LearningRateMonitor, ModelCheckpoint, ThroughputMonitor
from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities import rank_zero_only

from gpt1.checkpoint import atomic_save
from gpt1.config import CallbacksConfig, SamplesConfig
from gpt1.tokenizer import prompt_ids


class AtomicCheckpointIO(TorchCheckpointIO):
    """Write each checkpoint to a temporary file and rename it: a crash or kill mid-save leaves the last good one."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: Any = None) -> None:
        atomic_save(checkpoint, path)


class PeriodicCheckpoint(ModelCheckpoint):
    """ModelCheckpoint that also saves ``last.ckpt`` when training stops off the interval (max_steps, max_time)."""

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_step != self._last_global_step_saved:
            trainer.save_checkpoint(Path(self.dirpath) / f"{self.CHECKPOINT_NAME_LAST}{self.FILE_EXTENSION}")


class SampleText(Callback):
    """Every ``every_n_steps`` updates and at the end of training, continue a prompt and log the text.

    Sampling uses its own seeded generator, so it never perturbs the training RNG stream.
    """

    def __init__(self, cfg: SamplesConfig) -> None:
        self.cfg = cfg
        self.last_text: str | None = None
        self.last_step = -1

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        every, step = self.cfg.every_n_steps, trainer.global_step
        if every > 0 and step > 0 and step % every == 0 and step != self.last_step:  # once per update
            self.sample(trainer, pl_module)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.cfg.every_n_steps > 0 and self.last_step != trainer.global_step:
            self.sample(trainer, pl_module)

    @rank_zero_only
    def sample(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        tokenizer, model = pl_module.tokenizer, pl_module.model
        prompt = prompt_ids(tokenizer, self.cfg.prompt)
        generator = torch.Generator(pl_module.device).manual_seed(trainer.global_step)
        was_training = model.training
        model.eval()
        ids = model.generate(
            torch.tensor([prompt], device=pl_module.device),
            self.cfg.max_new_tokens,
            temperature=self.cfg.temperature,
            top_k=self.cfg.top_k,
            generator=generator,
        )
        model.train(was_training)
        self.last_text, self.last_step = tokenizer.decode(ids[0].tolist()), trainer.global_step
        print(f"[sample @ step {trainer.global_step}] {self.last_text}", flush=True)
        for logger in trainer.loggers:
            if isinstance(logger, TensorBoardLogger):
                logger.experiment.add_text("samples", self.last_text, trainer.global_step)
            elif isinstance(logger, WandbLogger):
                logger.log_text("samples", columns=["step", "text"], data=[[trainer.global_step, self.last_text]])


def build_callbacks(cfg: CallbacksConfig, output_dir: Path, with_loggers: bool) -> list[Callback]:
    """The callbacks ``cfg`` asks for; checkpoints go to ``output_dir/checkpoints``."""
    keep = cfg.checkpoint.keep_last
    callbacks: list[Callback] = [
        PeriodicCheckpoint(
            dirpath=output_dir / "checkpoints",
            filename="step{step:07d}",
            auto_insert_metric_name=False,
            every_n_train_steps=cfg.checkpoint.every_n_steps,
            monitor="step",  # keeps the newest `keep` checkpoints
            mode="max",
            save_top_k=keep,
            save_last=True,
        ),
        SampleText(cfg.samples),
    ]
    if with_loggers:
        callbacks.append(LearningRateMonitor(logging_interval="step"))
        if cfg.throughput:  # train/device/items_per_sec is tokens/s per device (an item is a token), over 10 steps
            callbacks.append(
                ThroughputMonitor(lambda b: b["input_ids"].size(0), lambda b: b["input_ids"].numel(), window_size=10)
            )
    return callbacks
