"""Language-modelling examples from a packed token stream: windows of n_ctx + 1 tokens, drawn at random for training
(the paper; ``gpt1.data.loader.EpochSampler``), consecutive for validation (every token but the first predicted once).
T = n_ctx below."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import Dataset


@dataclass(frozen=True)
class TokenStream:
    """Tokens [start, stop) of a packed .bin file, memory-mapped on ``open`` (so it pickles into workers cheaply)."""

    path: str
    dtype: str
    start: int
    stop: int

    def __len__(self) -> int:
        return self.stop - self.start

    def open(self) -> np.ndarray:
        return np.memmap(self.path, dtype=self.dtype, mode="r")[self.start : self.stop]


class WindowDataset(Dataset):
    """Window ``i`` = tokens [i * stride, i * stride + T + 1) of a stream, as ``{"input_ids": (T,), "targets": (T,)}``
    int64 tensors, targets being the inputs shifted left by one. ``limit`` keeps only the first windows."""

    def __init__(self, stream: TokenStream, n_ctx: int, stride: int, limit: Optional[int] = None) -> None:
        self.stream, self.n_ctx, self.stride = stream, n_ctx, stride
        n = max(0, (len(stream) - 1 - n_ctx) // stride + 1)  # starts s with s + T + 1 <= len(stream)
        self.length = n if limit is None else min(n, limit)
        self._tokens: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if not 0 <= i < self.length:
            raise IndexError(f"window {i} out of range [0, {self.length})")
        if self._tokens is None:
            self._tokens = self.stream.open()
        start = i * self.stride
        window = torch.from_numpy(self._tokens[start : start + self.n_ctx + 1].astype(np.int64))  # (T + 1,)
        return {"input_ids": window[:-1], "targets": window[1:]}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokens": None}  # workers map the file themselves
