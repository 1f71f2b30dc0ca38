"""The paper's LSTM baseline (Table 5: a single layer of 2048 units), with the GPT decoder's interface.

Same token embeddings (taken from the checkpoint fine-tuning starts from), input transformations, heads and
auxiliary LM loss as the transformer; only the decoder differs. ``forward`` returns (B, T, n_embd) hidden states:
the LSTM's output projected back to the embedding width, so the tied LM head and the task heads work unchanged.

Shapes: B batch, T sequence length, C = n_embd, U = hidden_size, V = vocab_size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import nn

from gpt1.core.errors import ranged
from gpt1.model.decoder import TiedHead, grown
from gpt1.model.generation import generate


@dataclass
class LSTMConfig:
    """Architecture of the LSTM baseline (``model=lstm``); the defaults are the paper's."""

    vocab_size: int = ranged(40478, ge=1)
    """Tokens the model can read and predict; gpt1 commands set it from the tokenizer."""
    n_ctx: int = ranged(512, ge=1)
    """Longest input sequence (tasks truncate to it); an LSTM has no position table. With init_from a
    checkpoint, the checkpoint's context."""
    n_embd: int = ranged(768, ge=1)
    """Width of the token embeddings (and of the hidden states the heads read). With init_from a checkpoint, the
    checkpoint's width, whose embeddings the LSTM takes."""
    hidden_size: int = ranged(2048, ge=1)
    """LSTM units per layer (2048 in the paper)."""
    n_layer: int = ranged(1, ge=1)
    """Stacked LSTM layers (1 in the paper)."""
    embd_pdrop: float = ranged(0.1, ge=0, lt=1)
    """Dropout on the token embeddings."""
    resid_pdrop: float = ranged(0.1, ge=0, lt=1)
    """Dropout on the projected LSTM output."""
    init_std: float = ranged(0.02, ge=0)
    """Std of the normal init of the embeddings and the output projection (the LSTM keeps torch's init)."""


class LSTM(nn.Module):
    """LSTM language model: ``forward`` gives hidden states (B, T, C), ``lm_logits`` the tied LM head on them."""

    def __init__(self, config: LSTMConfig) -> None:
        super().__init__()
        self.config = config
        self.tokens_embed = nn.Embedding(config.vocab_size, config.n_embd)  # shared with the LM head
        self.drop = nn.Dropout(config.embd_pdrop)
        self.lstm = nn.LSTM(config.n_embd, config.hidden_size, num_layers=config.n_layer, batch_first=True)
        self.proj = nn.Linear(config.hidden_size, config.n_embd)
        self.out_drop = nn.Dropout(config.resid_pdrop)
        self.lm_head = TiedHead()  # reads tokens_embed's table
        nn.init.normal_(self.tokens_embed.weight, std=config.init_std)
        nn.init.normal_(self.proj.weight, std=config.init_std)
        nn.init.zeros_(self.proj.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Token ids (B, T) -> hidden states (B, T, C); position t sees tokens 0..t only."""
        if idx.size(1) > self.config.n_ctx:
            raise ValueError(f"sequence of {idx.size(1)} tokens exceeds the context of {self.config.n_ctx}")
        return self._run(idx)[0]

    def _run(self, idx: torch.Tensor, state: tuple[torch.Tensor, ...] | None = None) -> tuple[torch.Tensor, tuple]:
        """Token ids (B, T) after ``state`` (the LSTM's (h, c); None: the start) -> hidden states (B, T, C) and the
        state after them."""
        out, state = self.lstm(self.drop(self.tokens_embed(idx)), state)  # (B, T, U)
        return self.out_drop(self.proj(out)), state  # (B, T, C)

    def lm_table(self) -> torch.Tensor:
        return self.tokens_embed.weight

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden, self.lm_table())

    generate = generate  # the loop of GPT.generate, reading through ``reader``

    def reader(self, idx: torch.Tensor, use_cache: bool) -> Callable[[torch.Tensor], torch.Tensor]:
        """How ``generate`` reads the sequence so far (``generation.Decoder``): with use_cache the LSTM's state
        carries the past, so each call reads only the tokens not read yet; without, the whole sequence again."""
        if not use_cache:
            return lambda idx: self._run(idx)[0]
        state, read = None, 0  # the LSTM's (h, c) after the first `read` tokens

        def carried(idx: torch.Tensor) -> torch.Tensor:
            nonlocal state, read
            hidden, state = self._run(idx[:, read:], state)
            read = idx.size(1)
            return hidden

        return carried

    def resize_token_embeddings(self, vocab_size: int) -> None:
        """Grow the vocabulary (e.g. for new special tokens); new rows are drawn from N(0, init_std)."""
        old = self.config.vocab_size
        if vocab_size < old:
            raise ValueError(f"cannot shrink the vocabulary from {old} to {vocab_size}")
        self.config = replace(self.config, vocab_size=vocab_size)
        self.tokens_embed = grown(self.tokens_embed, old, vocab_size, self.config.init_std)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self, seq_len: int | None = None) -> int:
        """Training FLOPs per token: 6 N (each weight in one multiply-add, forward and twice backward)."""
        return 6 * self.num_params()
