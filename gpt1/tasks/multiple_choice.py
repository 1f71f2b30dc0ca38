"""Multiple choice: ``S context D choice_k X`` for each of an example's K choices, a score per choice, a softmax over
them (RACE, Story Cloze). Examples may have fewer choices than others: a batch pads them with masked sequences."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
from torch import nn

from gpt1.model.heads import MultipleChoiceHead
from gpt1.tasks.task_type import TaskType, Texts, Transform, kept_lengths


class MultipleChoice(TaskType):
    """K sequences per example; the label is the index of the right choice."""

    name = "multiple_choice"
    choices = True
    can_regress = False
    heuristics = ("multiple_choice",)
    default_heuristic = "multiple_choice"

    def num_labels(
        self, configured: Optional[int], label_names: Optional[list[str]], top_label: int, splits: list[Texts]
    ) -> int:
        """The most choices of any example."""
        return max((int(np.diff(s.choice_offsets).max(initial=0)) for s in splits), default=0)

    def head_outputs(self, num_labels: int) -> int:
        return 1  # a score per choice

    def ordered(self, text: Any, choice: Any) -> tuple[Any, Any]:
        """An example's text and one of its choices (ids, or lengths) in the order of their pair: the text first."""
        return text, choice

    def sequences(self, texts: Texts, i: int, transform: Transform) -> list[np.ndarray]:
        a, offsets = texts.text[i], texts.choice_offsets
        return [transform.pair(*self.ordered(a, texts.choices[k])) for k in range(offsets[i], offsets[i + 1])]

    def truncated(self, texts: Texts, transform: Transform) -> np.ndarray:
        offsets = texts.choice_offsets
        a, b = self.ordered(np.repeat(texts.text.lengths, np.diff(offsets)), texts.choices.lengths)  # per choice
        ka, kb = kept_lengths(a, b, transform.n_ctx, transform.truncation)
        if len(a) == 0:
            return np.zeros(len(offsets) - 1, dtype=bool)
        return np.logical_or.reduceat((ka < a) | (kb < b), offsets[:-1])  # any of the example's choices

    def batch(
        self, input_ids: torch.Tensor, extract: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        return {"input_ids": input_ids, "extract": extract, "targets": targets, "choice_mask": mask}

    def pack(self, training: bool, share_context: bool) -> str:
        """The context the choices share decoded once in evaluation (no dropout: the same states), and in training
        with ``share_context`` (its dropout masks then shared by the choices)."""
        return "context" if share_context or not training else "sequences"

    def head(self, n_embd: int, num_labels: int, pdrop: float) -> nn.Module:
        return MultipleChoiceHead(n_embd, pdrop)
