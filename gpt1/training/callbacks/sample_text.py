"""Text sampled from the model during training, printed above the progress bar and logged, to watch it learn."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger

from gpt1.text.tokenizer import prompt_ids
from gpt1.training.console import print_above_bar
from gpt1.training.schema import SamplesConfig
from gpt1.training.strategies.registry import strategy_of


class SampleText(Callback):
    """Every ``every_n_steps`` updates and at the end of training, continue a prompt and log the text; with a seeded
    generator of its own, so that it never perturbs the training RNG stream."""

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

    def sample(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        tokenizer = pl_module.tokenizer
        model = strategy_of(trainer).full_model(pl_module.model)  # (sharded: every rank gathers, rank 0 decodes)
        self.last_step = trainer.global_step  # on every rank alike, so that they sample at the same steps
        if not trainer.is_global_zero:
            return
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
        self.last_text = tokenizer.decode(ids[0].tolist())
        print_above_bar(trainer, f"[sample @ step {trainer.global_step}] {self.last_text}")
        for logger in trainer.loggers:
            if isinstance(logger, TensorBoardLogger):
                logger.experiment.add_text("samples", self.last_text, trainer.global_step)
            elif isinstance(logger, WandbLogger):
                logger.log_text("samples", columns=["step", "text"], data=[[trainer.global_step, self.last_text]])
