"""Generation: one sampling loop for every decoder and the choice of each token (pure torch). A decoder says how it
reads the sequence so far (``Decoder.reader``: a KV cache, an LSTM's state or the whole sequence again).

Shapes: B batch, T sequence length, C = n_embd, V = vocab_size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import torch
from torch.nn import functional as F


class Decoder(Protocol):
    """What ``generate`` needs of a model: how it reads a sequence, and its LM head."""

    def reader(self, idx: torch.Tensor, use_cache: bool) -> Callable[[torch.Tensor], torch.Tensor]:
        """A function that ``generate`` calls once per new token with the whole sequence so far (B, T), starting with
        idx, and that gives hidden states (B, t, C) whose last position predicts the next token; with use_cache it
        reads only the tokens it has not read (the state it carries holds the others)."""
        ...

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor: ...


@torch.no_grad()
def generate(
    model: Decoder,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    use_cache: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Continue idx (B, T) by max_new_tokens tokens -> (B, T + max_new_tokens), each chosen by ``sample_next`` from the
    LM head's logits at the last position; temperature 0 decodes greedily."""
    read = model.reader(idx, use_cache)
    for _ in range(max_new_tokens):
        logits = model.lm_logits(read(idx)[:, -1]).float()  # (B, V)
        idx = torch.cat([idx, sample_next(logits, temperature, top_k, generator)], dim=1)
    return idx


def sample_next(
    logits: torch.Tensor, temperature: float, top_k: int | None, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Pick one token per row of logits (B, V) -> (B, 1): argmax at temperature 0, else top-k sampling."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    # a temperature so small that logits / it overflow: the same distribution from the top logit (0 and -inf); a
    # select on the device, not a branch, so that decoding never waits on the host for it (B, V)
    scaled = logits / temperature
    shifted = (logits - logits.amax(dim=-1, keepdim=True)) / temperature
    logits = torch.where(torch.isfinite(scaled).all(dim=-1, keepdim=True), scaled, shifted)
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, -math.inf)
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)
