"""The one training stack of gpt1: a decoder with separate heads, its losses, optimizer and logging. ``GPT1Module``
pre-trains with the tied LM head only; ``TaskModule`` (``gpt1.training.task_module``) adds a task head and data."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torchmetrics import MeanMetric

from gpt1.checkpoints.format import metadata
from gpt1.core.compat import attached_trainer
from gpt1.core.errors import EXIT_USER_ERROR, UserError
from gpt1.cpu.layers import use_cpu_layers
from gpt1.model.lm_loss import IGNORE_INDEX, LMLoss, chunked_lm_loss
from gpt1.tasks.batches import real_tokens
from gpt1.tasks.spec import TaskConfig
from gpt1.text.tokenizer import Tokenizer
from gpt1.training.schema import NonFinite, OptimConfig, Schedule
from gpt1.training.strategies.registry import strategy_of


class NonFiniteLoss(UserError):
    """The training loss became NaN or inf (optim.nonfinite=stop)."""


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


def warmup_linear(x: float, warmup: float) -> float:
    """The original's opt.py ``warmup_linear`` of the fraction of training done ``x = t / t_total`` (t from 0 at the
    first update): ``x / warmup`` up to ``warmup`` (unrounded), else 1, times the decay ``1 - x`` (during the warm-up
    too)."""
    x = min(x, 1.0)
    return (x / warmup if x <= warmup and warmup > 0 else 1.0) * (1.0 - x)


def next_token_loss(
    model: nn.Module, input_ids: torch.Tensor, targets: torch.Tensor, lm_loss: LMLoss = LMLoss.chunked
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy of the model's next-token logits for ids (B, T) against targets (B, T), IGNORE_INDEX where
    not scored, and the number of scored positions. The data shifts the targets, so the logits are never copied."""
    hidden = model(input_ids)  # (B, T, C)
    scored = (targets != IGNORE_INDEX).sum()
    if LMLoss(lm_loss) == LMLoss.chunked:
        targets = targets.flatten()  # (B T,)
        weights = (targets != IGNORE_INDEX) / scored  # the mean over the scored positions
        table, products = model.lm_table(), model.lm_head.products
        loss = chunked_lm_loss(hidden.flatten(0, 1), table, model.config.vocab_size, targets, weights, None, products)
        return loss, scored
    logits = model.lm_logits(hidden)  # (B, T, V)
    # fp32 softmax even under bf16 autocast: a 40k-way log-softmax loses too much in bf16
    loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX)
    return loss, scored


class GPT1Module(L.LightningModule):
    """A decoder (``model``, of ``gpt1.model.registry.MODEL_TYPES``), task heads (``heads``) and the tokenizer that
    checkpoints carry."""

    def __init__(
        self, model: nn.Module, tokenizer: Tokenizer, optim: OptimConfig, lm_loss: LMLoss = LMLoss.chunked
    ) -> None:
        super().__init__()
        if tokenizer.vocab_size != model.config.vocab_size:
            raise ValueError(
                f"tokenizer has {tokenizer.vocab_size} tokens, model {model.config.vocab_size}: "
                "resize the model's embeddings to the tokenizer"
            )
        self.model = model
        self.heads = nn.ModuleDict()
        self.tokenizer = tokenizer
        self.optim = optim
        self.lm_loss_kind = LMLoss(lm_loss)
        self.task: TaskConfig | None = None  # the fine-tuning task, which checkpoints carry
        self.val_nll = MeanMetric()
        self.test_nll = MeanMetric()
        self.flops_per_batch = 0  # read by Lightning's ThroughputMonitor to report MFU
        self._flops_per_token = (0, 0)  # (T, the model's training FLOPs per token at sequence length T)
        self.validated_at: int | None = None
        """The global step of the last full validation (not the sanity check): the weights its val/* describe."""
        self.val_keys: tuple[str, ...] = ("val/",)
        """The key prefixes of its validation metrics (a task's: MNLI's ("val/", "val_mismatched/"))."""
        self.skipped_batches = 0
        """Updates not applied because a loss was NaN or inf (optim.nonfinite=skip); checkpoints carry it."""
        self._skip_update = False

    def configure_model(self) -> None:
        """On the CPU, gpt1's CPU layers (``gpt1.cpu.layers``); then what the run's strategy does to the model."""
        if self.trainer.strategy.root_device.type == "cpu":
            use_cpu_layers(self.model, self.heads)
        strategy_of(self.trainer).configure_model(self)

    def lm_loss(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.next_token_loss(batch["input_ids"], batch["targets"])

    def next_token_loss(self, input_ids: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``next_token_loss`` of this module's model: ``compile=true`` compiles it as one graph."""
        return next_token_loss(self.model, input_ids, targets, self.lm_loss_kind)

    def on_before_batch_transfer(self, batch: dict[str, Any], dataloader_idx: int) -> dict[str, Any]:
        """``batch["tokens"]``: its tokens, padding excluded, for the throughput and MFU; counted while the batch is
        still on the CPU (no wait for the device)."""
        batch["tokens"] = real_tokens(batch)
        return batch

    def count_flops(self, batch: dict[str, Any]) -> None:
        """Set ``flops_per_batch`` (Lightning's ThroughputMonitor's MFU): the batch's tokens x FLOPs per token."""
        T = batch["input_ids"].size(-1)
        if self._flops_per_token[0] != T:  # flops_per_token walks the parameters: recount only when T changes
            self._flops_per_token = (T, self.model.flops_per_token(T))
        self.flops_per_batch = self._flops_per_token[1] * batch["tokens"]

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self.count_flops(batch)
        loss, _ = self.lm_loss(batch)
        self.check_finite(loss)
        self.log("train/loss", loss, prog_bar=True)
        self.log("train/ppl", loss.exp())
        return loss

    def check_finite(self, loss: torch.Tensor) -> None:
        """Act on a NaN or inf training loss (on any rank) as optim.nonfinite says: raise ``NonFiniteLoss`` before
        the update, or mark the update to be skipped (``on_before_optimizer_step``). Reading the loss's value waits
        for the device, once per batch (the progress bar and DDP's per-step checks wait anyway)."""
        finite = bool(torch.isfinite(loss.detach()))
        bad = not finite
        if self.trainer.world_size > 1:  # every rank decides alike, or DDP's collectives would hang
            bad = self.trainer.strategy.reduce_boolean_decision(bad, all=False)
        if not bad:
            return
        value = "non-finite on another process" if finite else f"{loss.item()}"
        step = self.trainer.global_step
        if NonFinite(self.optim.nonfinite) == NonFinite.skip:
            if not self._skip_update and self.trainer.is_global_zero:
                print(
                    f"warning: the training loss is {value} at step {step}: its update is skipped "
                    f"(optim.nonfinite=skip; {self.skipped_batches + 1} so far)",
                    file=sys.stderr,
                    flush=True,
                )
            self._skip_update = True
            return
        if not self.trainer.is_global_zero:  # every rank stops; rank 0 says why, once
            raise SystemExit(EXIT_USER_ERROR)
        ckpt = getattr(self.trainer.checkpoint_callback, "dirpath", None)
        last = Path(ckpt) / "last.ckpt" if ckpt else None
        kept = f"{last}, saved before it, is left as it was" if last and last.is_file() else "no checkpoint was saved"
        raise NonFiniteLoss(
            f"the training loss is {value} at step {step}, so training stopped before updating the weights with it "
            f"(optim.nonfinite=stop); {kept}. Lower optim.lr or raise optim.warmup_steps, or set optim.nonfinite=skip "
            "to skip such batches"
        )

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Skip an update marked by ``check_finite``: without gradients the optimizer leaves every weight and moment as
        it was (a GradScaler, which has already seen the non-finite gradients, skips it too)."""
        if self._skip_update:
            self._skip_update = False
            optimizer.zero_grad(set_to_none=True)
            self.skipped_batches += 1
            self.log("train/skipped_batches", float(self.skipped_batches))

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

    def on_validation_end(self) -> None:
        if not self.trainer.sanity_checking:
            self.validated_at = self.trainer.global_step

    def on_test_epoch_end(self) -> None:
        self._log_perplexity("test", self.test_nll)

    def configure_optimizers(self) -> dict[str, Any]:
        """AdamW (fused) with weight decay on weight matrices and embeddings only (not biases, not LayerNorm); warm-up
        and decay stepped every update."""
        params = [p for p in self.parameters() if p.requires_grad]
        # by module and name, not by p.ndim: FSDP shows its sharded parameters as 1-D
        no_decay = {
            id(p) for m in self.modules() for name, p in m.named_parameters(recurse=False)
            if isinstance(m, nn.LayerNorm) or name.startswith("bias")
        }  # fmt: skip
        groups = [
            {"params": [p for p in params if id(p) not in no_decay], "weight_decay": self.optim.weight_decay},
            {"params": [p for p in params if id(p) in no_decay], "weight_decay": 0.0},
        ]
        # fused: one kernel for every parameter's update instead of a dozen elementwise ops each (CPU and CUDA); not
        # under fp16's GradScaler, which must unscale the gradients before they are clipped
        fused = all(p.device.type in ("cpu", "cuda") for p in params) and self.trainer.precision != "16-mixed"
        optimizer = torch.optim.AdamW(
            groups, lr=self.optim.lr, betas=tuple(self.optim.betas), eps=self.optim.eps, fused=fused
        )
        total = int(self.trainer.estimated_stepping_batches)
        warmup = self.optim.warmup_steps
        if self.optim.warmup_fraction is not None:
            warmup = round(self.optim.warmup_fraction * total)
        decay = self.optim.decay_steps or total
        if Schedule(self.optim.schedule) == Schedule.warmup_linear:  # fine-tuning's: the original's, unrounded
            fraction = self.optim.warmup_fraction if self.optim.warmup_fraction is not None else warmup / decay
            factor = lambda step: warmup_linear(step / max(1, decay), fraction)  # noqa: E731
        else:
            factor = lambda step: lr_factor(step, warmup, decay, self.optim.schedule)  # noqa: E731
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def configure_gradient_clipping(
        self,
        optimizer: torch.optim.Optimizer,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Clip as the run's strategy does (``TrainingStrategy.clip_gradients``)."""
        strategy_of(self.trainer).clip_gradients(self, optimizer, gradient_clip_val, gradient_clip_algorithm)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["gpt1"] = metadata(self.model, self.tokenizer, self.task)
        checkpoint["rng"] = rng_state()  # Lightning keeps no RNG state: a resumed run draws the same dropout masks
        if self.trainer.world_size > 1:  # (every rank saves, rank 0 writes: a collective)
            # each rank's own: fine-tuning's packed rows give each rank its own token count, so its own dropout draws
            checkpoint["rng_per_rank"] = [None] * self.trainer.world_size
            torch.distributed.all_gather_object(checkpoint["rng_per_rank"], checkpoint["rng"])
        checkpoint["skipped_batches"] = self.skipped_batches

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        per_rank = checkpoint.get("rng_per_rank")
        if per_rank and attached_trainer(self) is not None and len(per_rank) == self.trainer.world_size:
            set_rng_state(per_rank[self.trainer.global_rank])
        elif "rng" in checkpoint:
            set_rng_state(checkpoint["rng"])
        self.skipped_batches = checkpoint.get("skipped_batches", 0)


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
