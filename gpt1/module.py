"""The one training stack of gpt1: a GPT-1 decoder with separate heads, its losses, optimizer and logging.

Pre-training uses the tied LM head only. Fine-tuning adds task heads to ``heads`` (classification, similarity,
multiple choice) and keeps the LM loss as the auxiliary objective, so it adds heads and data, not a second stack.
"""

from __future__ import annotations

import math
import random
from typing import Any

import lightning as L
import numpy as np
import torch
from tokenizers import Tokenizer
from torch import nn
from torch.nn import functional as F
from torchmetrics import MeanMetric

from gpt1.checkpoint import metadata
from gpt1.config import OptimConfig, Schedule
from gpt1.model import GPT

IGNORE_INDEX = -100
"""Target id of positions that are not scored (padding)."""


def lr_factor(step: int, warmup_steps: int, total_steps: int, schedule: Schedule) -> float:
    """Multiplier of the peak lr after ``step`` updates, as the original's opt.py: a linear warm-up ramp times a
    decay over the whole run (cosine or linear to 0 at ``total_steps``, or none)."""
    warmup = min(1.0, (step + 1) / warmup_steps) if warmup_steps > 0 else 1.0
    progress = min(1.0, step / max(1, total_steps))
    decay = {
        Schedule.cosine: 0.5 * (1.0 + math.cos(math.pi * progress)),
        Schedule.linear: 1.0 - progress,
        Schedule.constant: 1.0,
    }[Schedule(schedule)]
    return warmup * decay


class GPT1Module(L.LightningModule):
    """A GPT-1 decoder (``model``), task heads (``heads``) and the tokenizer that checkpoints carry."""

    def __init__(self, model: GPT, tokenizer: Tokenizer, optim: OptimConfig) -> None:
        super().__init__()
        if tokenizer.get_vocab_size() != model.config.vocab_size:
            raise ValueError(
                f"tokenizer has {tokenizer.get_vocab_size()} tokens, model {model.config.vocab_size}: "
                "resize the model's embeddings to the tokenizer"
            )
        self.model = model
        self.heads = nn.ModuleDict()
        self.tokenizer = tokenizer
        self.optim = optim
        self.val_nll = MeanMetric()
        self.test_nll = MeanMetric()
        self.flops_per_batch = 0  # read by Lightning's ThroughputMonitor to report MFU
        self._flops_shape: tuple[int, int] | None = None

    def lm_loss(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean next-token cross-entropy over every scored position, and the number of scored positions."""
        logits = self.model.lm_logits(self.model(batch["input_ids"]))  # (B, T, V)
        targets = batch["targets"]  # (B, T), IGNORE_INDEX where not scored
        # fp32 softmax even under bf16 autocast: a 40k-way log-softmax loses too much in bf16
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX)
        return loss, (targets != IGNORE_INDEX).sum()

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        B, T = batch["input_ids"].shape
        if self._flops_shape != (B, T):  # recount only when the shape changes
            self.flops_per_batch, self._flops_shape = self.model.flops_per_token(T) * B * T, (B, T)
        loss, _ = self.lm_loss(batch)
        self.log("train/loss", loss, prog_bar=True)
        self.log("train/ppl", loss.exp())
        return loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        loss, n = self.lm_loss(batch)
        self.val_nll.update(loss, weight=n)  # token-weighted, so the epoch value is the per-token NLL

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        loss, n = self.lm_loss(batch)
        self.test_nll.update(loss, weight=n)

    def _log_perplexity(self, prefix: str, nll: MeanMetric) -> None:
        value = nll.compute()
        self.log(f"{prefix}/loss", value, prog_bar=True)
        self.log(f"{prefix}/ppl", value.exp(), prog_bar=True)
        nll.reset()

    def on_validation_epoch_end(self) -> None:
        self._log_perplexity("val", self.val_nll)

    def on_test_epoch_end(self) -> None:
        self._log_perplexity("test", self.test_nll)

    def configure_optimizers(self) -> dict[str, Any]:
        """AdamW with weight decay on matrices (ndim > 1) only; warm-up and decay stepped every update."""
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [
            {"params": [p for p in params if p.ndim > 1], "weight_decay": self.optim.weight_decay},
            {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0},
        ]
        optimizer = torch.optim.AdamW(groups, lr=self.optim.lr, betas=tuple(self.optim.betas), eps=self.optim.eps)
        total = int(self.trainer.estimated_stepping_batches)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: lr_factor(step, self.optim.warmup_steps, total, self.optim.schedule)
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["gpt1"] = metadata(self.model.config, self.tokenizer)
        checkpoint["rng"] = rng_state()  # Lightning keeps no RNG state: a resumed run draws the same dropout masks

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if "rng" in checkpoint:
            set_rng_state(checkpoint["rng"])


def rng_state() -> dict[str, Any]:
    """The state of every random generator training draws from (python, numpy, torch CPU and CUDA)."""
    name, key, pos, has_gauss, gauss = np.random.get_state()
    numpy = (name, torch.from_numpy(key.astype(np.int64)), pos, has_gauss, gauss)  # tensors: weights_only-loadable
    state = {"python": random.getstate(), "numpy": numpy, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what ``rng_state`` captured."""
    random.setstate(state["python"])
    name, key, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, key.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
