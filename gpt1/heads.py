"""Task heads of the paper's fine-tuning (section 3.3), in pure torch.

Each head reads the decoder's final hidden state at the ``[extract]`` token of each input sequence:

- ``ClassificationHead`` (classification and entailment): dropout, then Linear(C, num_labels).
- ``SimilarityHead``: the two orderings' states (a; b) and (b; a) **added** element-wise, then dropout and
  Linear(C, num_labels); the sum makes the prediction symmetric in a and b.
- ``MultipleChoiceHead``: dropout, then Linear(C, 1) per choice: (B, K) logits for a softmax over the choices,
  with padded (masked) choices at -inf. ``linear`` matches HF DoubleHeads' ``multiple_choice_head.summary``.

num_labels == 1 makes classification and similarity heads regressors (one score per example).
``task_logits`` runs a batch of any task type through the decoder and its head: all the sequences of an example
(two orderings, K choices) go through the decoder in one forward pass, flattened to (B * S, T).

Shapes: B examples, S sequences per example (1, 2 or K), T tokens, C = n_embd.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

TASK_TYPES = ("classification", "entailment", "similarity", "multiple_choice")


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
        logits = self.linear(self.dropout(states)).squeeze(-1)  # (B, K)
        if choice_mask is not None:
            logits = logits.masked_fill(~choice_mask, float("-inf"))
        return logits


def build_head(task_type: str, n_embd: int, num_labels: int, pdrop: float = 0.1, init_std: float = 0.02) -> nn.Module:
    """The head of a task type, its weights drawn from N(0, init_std) and its bias 0 (as the original's)."""
    if task_type in ("classification", "entailment"):
        head = ClassificationHead(n_embd, num_labels, pdrop)
    elif task_type == "similarity":
        head = SimilarityHead(n_embd, num_labels, pdrop)
    elif task_type == "multiple_choice":
        head = MultipleChoiceHead(n_embd, pdrop)
    else:
        raise ValueError(f"unknown task type {task_type!r}: one of {', '.join(TASK_TYPES)}")
    nn.init.normal_(head.linear.weight, std=init_std)
    nn.init.zeros_(head.linear.bias)
    return head


def task_logits(
    decoder: Callable[[torch.Tensor], torch.Tensor], head: nn.Module, batch: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run a task batch through ``decoder`` (ids (N, T) -> hidden (N, T, C)) and ``head``.

    batch: ``input_ids`` (B, T) or (B, S, T), ``extract`` (B,) or (B, S), ``choice_mask`` (B, K) for multiple
    choice. Returns the head's logits ((B, num_labels), or (B, K)) and the hidden states (B * S, T, C) of the
    flattened sequences, for the auxiliary LM loss.
    """
    ids, extract = batch["input_ids"], batch["extract"]
    hidden = decoder(ids.reshape(-1, ids.size(-1)))  # (N, T, C), N = B * S: every sequence in one pass
    rows = torch.arange(hidden.size(0), device=hidden.device)
    states = hidden[rows, extract.reshape(-1)]  # (N, C): the state at each sequence's extract token
    states = states.view(*extract.shape, hidden.size(-1))  # (B, C) or (B, S, C)
    if isinstance(head, MultipleChoiceHead):
        return head(states, batch.get("choice_mask")), hidden
    return head(states), hidden
