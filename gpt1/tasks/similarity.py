"""Similarity: an unordered pair, both orderings ``S a D b X`` and ``S b D a X`` decoded, their extract states added
before the classifier (or regressor), so that the prediction is symmetric in a and b (STS-B, QQP, MRPC)."""

from __future__ import annotations

import numpy as np
from torch import nn

from gpt1.model.heads import SimilarityHead
from gpt1.tasks.classification import Entailment
from gpt1.tasks.task_type import TaskType, Texts, Transform


class Similarity(Entailment):
    """Two sequences per example, the pair in both orders."""

    name = "similarity"
    batch = TaskType.batch  # (B, 2, T): both orderings

    def sequences(self, texts: Texts, i: int, transform: Transform) -> list[np.ndarray]:
        a, b = texts.text[i], texts.pair[i]
        return [transform.pair(a, b), transform.pair(b, a)]

    def head(self, n_embd: int, num_labels: int, pdrop: float) -> nn.Module:
        return SimilarityHead(n_embd, num_labels, pdrop)
