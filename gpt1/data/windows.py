"""Language-modelling examples from a packed token stream: windows of n_ctx + 1 tokens, drawn at random for training
(the paper), consecutive for validation (every token but the first predicted once). T = n_ctx below."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import Dataset, DistributedSampler


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


class WindowSampler(DistributedSampler):
    """Window starts drawn uniformly (with replacement) from [0, n_windows): ``num_samples`` per epoch rounded up to
    whole global batches of ``batch_size``, a function of (seed, epoch) only: runs repeat exactly, and each epoch
    (``set_epoch``, called by Lightning) draws anew.

    Under data parallelism this rank takes draws ``rank, rank + num_replicas, ...`` of the epoch's, in batches of its
    share: update k then trains on draws [k * batch_size, (k + 1) * batch_size) of the epoch over all the ranks and
    passes, whatever their number (``batch_size`` is a multiple of ``num_replicas``, ``gpt1.data.base.split_batch``).
    Whole batches make it so at an epoch's end too: a last partial batch would be split unevenly over the ranks (or
    padded with extra draws), and so hold other examples on another number of processes.

    ``consumed()`` is how many of this rank's draws of the epoch were already trained on (a resumed run's); they are
    left out. It is called when iteration starts (at the loader's first batch: ``DeferredDataLoader``), not when the
    sampler is built: Lightning may build the train loader (e.g. for ``estimated_stepping_batches``) before it
    restores a checkpoint's counters. The length stays the whole epoch's share, so those counters stay right. Being a
    ``DistributedSampler``, Lightning uses it as is under DDP (it wraps only other samplers).
    """

    def __init__(
        self,
        n_windows: int,
        num_samples: int,
        seed: int,
        batch_size: int,
        epoch: int = 0,
        consumed: Callable[[], int] = lambda: 0,
        num_replicas: int = 1,
        rank: int = 0,
    ) -> None:
        if n_windows < 1 or num_samples < 1:
            raise ValueError(f"WindowSampler needs n_windows >= 1 and num_samples >= 1, got {n_windows}, {num_samples}")
        if batch_size % num_replicas:
            raise ValueError(f"batch_size={batch_size} is not a multiple of num_replicas={num_replicas}")
        super().__init__(range(n_windows), num_replicas=num_replicas, rank=rank, shuffle=False, seed=seed)
        self.n_windows, self.epoch, self.consumed = n_windows, epoch, consumed
        self.total_size = math.ceil(num_samples / batch_size) * batch_size  # the epoch's draws over all the ranks
        self.num_samples = self.total_size // num_replicas  # this rank's share (DistributedSampler's meaning)

    def __iter__(self) -> Iterator[int]:
        draws = np.random.default_rng([self.seed, self.epoch]).integers(0, self.n_windows, self.total_size)
        return iter(draws[self.rank :: self.num_replicas][self.consumed() :].tolist())
