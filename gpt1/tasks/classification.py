"""Classification (``S text X``) and entailment (``S premise D hypothesis X``): one sequence per example, a linear
classifier (or regressor) on its extract token's state."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from gpt1.model.heads import ClassificationHead
from gpt1.tasks.task_type import TaskType, Texts, Transform, kept_lengths


class Classification(TaskType):
    """One text: ``S text X`` (SST-2, CoLA)."""

    name = "classification"
    heuristics = ("verbalizer", "mean_logprob")

    def sequences(self, texts: Texts, i: int, transform: Transform) -> list[np.ndarray]:
        return [transform.single(texts.text[i])]

    def truncated(self, texts: Texts, transform: Transform) -> np.ndarray:
        return texts.text.lengths > transform.n_ctx - 2

    def batch(
        self, input_ids: torch.Tensor, extract: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """One sequence per example: input_ids and targets (B, T), extract (B,)."""
        return {"input_ids": input_ids[:, 0], "extract": extract[:, 0], "targets": targets[:, 0]}

    def head(self, n_embd: int, num_labels: int, pdrop: float) -> nn.Module:
        return ClassificationHead(n_embd, num_labels, pdrop)


class Entailment(Classification):
    """An ordered pair: ``S premise D hypothesis X`` (MNLI, SNLI, SciTail, QNLI, RTE)."""

    name = "entailment"
    text_pair = True
    heuristics = ()

    def sequences(self, texts: Texts, i: int, transform: Transform) -> list[np.ndarray]:
        return [transform.pair(texts.text[i], texts.pair[i])]

    def truncated(self, texts: Texts, transform: Transform) -> np.ndarray:
        a, b = texts.text.lengths, texts.pair.lengths
        ka, kb = kept_lengths(a, b, transform.n_ctx, transform.truncation)
        return (ka < a) | (kb < b)
