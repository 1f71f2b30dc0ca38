"""Task heads of the paper's fine-tuning (section 3.3), in pure torch: each reads the decoder's final hidden state at
the ``[extract]`` token of each input sequence; num_labels == 1 makes a regressor. ``MultipleChoiceHead.linear``
matches HF DoubleHeads' ``multiple_choice_head.summary``. Shapes: B examples, K choices, C = n_embd.
"""

from __future__ import annotations

import torch
from torch import nn


class ClassificationHead(nn.Module):
    """Extract-token state (B, C) -> logits (B, num_labels)."""

    def __init__(self, n_embd: int, num_labels: int, pdrop: float = 0.1) -> None:
        super().__init__()
        self.dropout = nn.Dropout(pdrop)
        self.linear = nn.Linear(n_embd, num_labels)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return self.linear(self.dropout(states))


class SimilarityHead(ClassificationHead):
    """Extract-token states of both orderings (B, 2, C) -> logits (B, num_labels): the two states are summed."""

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return super().forward(states[:, 0] + states[:, 1])  # a + b == b + a exactly: symmetric in the pair


class MultipleChoiceHead(nn.Module):
    """Extract-token states of K choices (B, K, C) -> logits (B, K); choices masked out (padding) get -inf."""

    def __init__(self, n_embd: int, pdrop: float = 0.1) -> None:
        super().__init__()
        self.dropout = nn.Dropout(pdrop)
        self.linear = nn.Linear(n_embd, 1)

    def forward(self, states: torch.Tensor, choice_mask: torch.Tensor | None = None) -> torch.Tensor:
        # one dropout mask per example, shared by its choices (the original's noise shape [B, 1, C]): the choices'
        # scores differ by their states, not by their masks
        keep = self.dropout(states.new_ones(states.size(0), 1, states.size(-1)))  # (B, 1, C): 0 or 1 / (1 - p)
        logits = self.linear(states * keep).squeeze(-1)  # (B, K)
        if choice_mask is not None:
            logits = logits.masked_fill(~choice_mask, float("-inf"))
        return logits


def init_head(head: nn.Module, init_std: float = 0.02) -> nn.Module:
    """Draw ``head.linear``'s weights from N(0, init_std) and zero its bias, as the original initialises its heads."""
    nn.init.normal_(head.linear.weight, std=init_std)
    nn.init.zeros_(head.linear.bias)
    return head
