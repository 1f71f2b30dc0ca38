"""The KV cache of incremental decoding: each block's keys and values of the tokens decoded so far (pure torch)."""

from __future__ import annotations

import torch


class LayerCache:
    """Keys and values of one block for the tokens decoded so far. Buffers of (B, H, capacity, D) are allocated
    once, on the first update, and filled in place: decoding a token copies only its own keys and values."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.length = 0
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append this step's (B, H, T, D) keys and values; return views of all of them so far."""
        if self.k is None:
            B, H, _, D = k.shape
            self.k = k.new_empty(B, H, self.capacity, D)
            self.v = v.new_empty(B, H, self.capacity, D)
        T = k.size(2)
        self.k.narrow(2, self.length, T).copy_(k)  # narrow, not [:, :, a:b]: Python indexing costs more than the copy
        self.v.narrow(2, self.length, T).copy_(v)
        self.length += T
        return self.k.narrow(2, 0, self.length), self.v.narrow(2, 0, self.length)
