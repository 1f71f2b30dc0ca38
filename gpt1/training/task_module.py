"""Fine-tuning's LightningModule: the pre-training stack plus a task head, the task loss with the LM loss as the
auxiliary objective, and the task's metrics."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F
from torchmetrics import MaxMetric, MeanMetric, MinMetric

from gpt1.model.lm_loss import IGNORE_INDEX, LMLoss, chunked_lm_loss
from gpt1.model.registry import MODEL_TYPES, model_type
from gpt1.tasks.metrics import build_metric
from gpt1.tasks.spec import TaskConfig
from gpt1.text.tokenizer import Tokenizer
from gpt1.training.module import GPT1Module
from gpt1.training.packing import TaskOutput, task_logits
from gpt1.training.schema import OptimConfig

SINGLE_CLASS = "single_class_prediction"
"""Logged per evaluation split (``val/single_class_prediction``: 1.0 when every example was predicted as one class);
metrics.json's ``single_class_prediction`` is the main validation split's, as a boolean."""


class TaskModule(GPT1Module):
    """Fine-tuning: the decoder, a task head (``heads[<task type>]``), the task loss + ``aux_lm_weight`` x LM loss,
    and the task's metrics per evaluation split, logged per epoch as ``<prefix>/<metric>`` (e.g. ``val/accuracy``).

    task: the task spec with ``num_labels`` resolved (checkpoints carry it). val_prefixes / test_prefixes: the
    metric prefix of each validation / test dataloader, in order (None: a split without labels). share_context:
    train with the context of an example's choices decoded once, its dropout masks then the same for every choice
    (false: each choice with its own, as the original).
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        optim: OptimConfig,
        task: TaskConfig,
        val_prefixes: Sequence[str] = ("val",),
        test_prefixes: Sequence[str] = (),
        aux_lm_weight: float = 0.5,
        head_pdrop: float = 0.1,
        share_context: bool = False,
        lm_loss: LMLoss = LMLoss.chunked,
    ) -> None:
        super().__init__(model, tokenizer, optim, lm_loss)
        self.task = task
        self.kind = task.kind
        self.regression = task.regression
        self.aux_lm_weight = aux_lm_weight
        self.share_context = share_context
        self.packs = MODEL_TYPES[model_type(model)].packs  # its decoder reads packed rows (GPT-1's does)
        self.head_name = self.kind.name  # e.g. "similarity": its weights are heads.similarity.* in checkpoints
        self.heads[self.head_name] = self.kind.build_head(model.config.n_embd, task.num_labels, head_pdrop)
        self.prefixes = {"val": list(val_prefixes), "test": list(test_prefixes)}
        self.val_keys = tuple(f"{p}/" for p in val_prefixes if p)
        prefixes = [p for p in (*val_prefixes, *test_prefixes) if p is not None]

        def metrics() -> nn.ModuleDict:
            return nn.ModuleDict(
                {m: build_metric(m, self.regression, self.kind.choices, task.num_labels) for m in task.metrics}
            )

        self.metrics = nn.ModuleDict({p: metrics() for p in prefixes})
        self.eval_loss = nn.ModuleDict({p: MeanMetric() for p in prefixes})
        # the smallest and largest class (choice) predicted: equal when every example got one class, which a score
        # alone hides (it is then the share of that class); regression predicts scores, not classes
        self.predicted = (
            nn.ModuleDict()
            if self.regression
            else nn.ModuleDict({p: nn.ModuleDict({"min": MinMetric(), "max": MaxMetric()}) for p in prefixes})
        )

    @property
    def head(self) -> nn.Module:
        return self.heads[self.head_name]

    def forward(self, batch: dict[str, torch.Tensor]) -> TaskOutput:
        # packed rows give the same states: training drops the padding, evaluation (no dropout) also decodes a shared
        # context once; in training only with share_context, which shares its dropout masks across the choices
        pack = self.kind.pack(self.training, self.share_context) if self.packs else "none"
        return task_logits(self.model, self.head, batch, pack=pack)

    def predictions(self, logits: torch.Tensor) -> torch.Tensor:
        """Class or choice ids (B,), or scores (B,) for regression."""
        return self.kind.predict(logits, self.regression)

    def task_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.kind.loss(logits, labels, self.regression)

    def sequence_lm_loss(self, hidden: torch.Tensor, index: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The auxiliary LM loss as the original computes it: each sequence's mean next-token loss over its scored
        tokens, then the mean over sequences (dummy multiple-choice sequences, with no scored token, left out).

        hidden (R, C) and index (B, [S,] T): ``TaskOutput``'s; targets (B, [S,] T), IGNORE_INDEX where not scored."""
        targets, index = targets.reshape(-1, targets.size(-1)), index.reshape(-1, targets.size(-1))  # (N, T)
        scored = targets != IGNORE_INDEX  # (N, T)
        # the LM head runs once per distinct state: a shared context's tokens are scored for every choice
        rows, row_of = torch.unique(index[scored], return_inverse=True)  # (U,), (M,)
        counts = scored.sum(1, keepdim=True)  # (N, 1)
        weights = (1.0 / counts.clamp(min=1)).expand_as(scored)[scored]  # (M,): 1 / tokens of its sequence
        sequences = (counts > 0).sum().clamp(min=1)
        if self.lm_loss_kind == LMLoss.chunked:
            table, vocab, products = self.model.lm_table(), self.model.config.vocab_size, self.model.lm_head.products
            return chunked_lm_loss(hidden[rows], table, vocab, targets[scored], weights / sequences, row_of, products)
        log_probs = F.log_softmax(self.model.lm_logits(hidden[rows]).float(), dim=-1)  # (U, V)
        token_loss = -log_probs[row_of, targets[scored]]  # (M,)
        return (token_loss * weights).sum() / sequences

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self.count_flops(batch)
        out = self(batch)
        task_loss = self.task_loss(out.logits, batch["labels"])
        loss = task_loss
        if self.aux_lm_weight:
            lm_loss = self.sequence_lm_loss(out.hidden, out.index, batch["targets"])
            loss = task_loss + self.aux_lm_weight * lm_loss
            self.log("train/lm_loss", lm_loss)
        self.check_finite(loss)
        self.log("train/task_loss", task_loss)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def _evaluate(self, stage: str, batch: dict[str, torch.Tensor], dataloader_idx: int) -> None:
        prefix = self.prefixes[stage][dataloader_idx]
        if prefix is None:  # a split without labels
            return
        logits = self(batch).logits
        labels = batch["labels"]
        self.eval_loss[prefix].update(self.task_loss(logits, labels), weight=labels.size(0))
        preds = self.predictions(logits)
        for metric in self.metrics[prefix].values():
            metric.update(preds, labels)
        for metric in self.predicted[prefix].values() if prefix in self.predicted else ():
            metric.update(preds.float())

    def _log_metrics(self, stage: str) -> None:
        for prefix in filter(None, self.prefixes[stage]):
            self.log(f"{prefix}/loss", self.eval_loss[prefix].compute(), prog_bar=True)
            self.eval_loss[prefix].reset()
            for name, metric in self.metrics[prefix].items():
                self.log(f"{prefix}/{name}", metric.compute().float(), prog_bar=name == self.task.metrics[0])
                metric.reset()
            if prefix in self.predicted:  # 1.0: every example of the split predicted as one class
                low, high = (self.predicted[prefix][end] for end in ("min", "max"))
                self.log(f"{prefix}/{SINGLE_CLASS}", (low.compute() == high.compute()).float())
                low.reset()
                high.reset()

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        self._evaluate("val", batch, dataloader_idx)

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        self._evaluate("test", batch, dataloader_idx)

    def on_validation_epoch_end(self) -> None:
        self._log_metrics("val")

    def on_test_epoch_end(self) -> None:
        self._log_metrics("test")

    def predict_step(
        self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0
    ) -> dict[str, torch.Tensor]:
        logits = self(batch).logits
        return {"index": batch["index"], "prediction": self.predictions(logits)}
