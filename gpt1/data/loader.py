"""What the data modules share for an exact resume and for any number of processes: the training order
(``EpochSampler``), a DataLoader whose iterator starts at the first batch, so that a resumed run's sampler sees the
restored counters; evaluation's share of each process; and the warning when a resume changes the training order."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader, DistributedSampler

from gpt1.core.errors import DataError


class EpochSampler(DistributedSampler):
    """A training epoch's order of ``n`` examples in whole global batches of ``batch_size``, a function of (seed,
    epoch) only: runs repeat exactly, and each epoch (``set_epoch``, called by Lightning) draws anew.

    draws None (fine-tuning): a seeded shuffle (torch's ``randperm``, as ``DistributedSampler``'s), each example
    once, its last ``n % batch_size`` left out of the epoch, as the original's ``iter_data(..., truncate=True)``.
    draws given (pre-training's windows): that many starts drawn uniformly with replacement (numpy's, seeded with
    (seed, epoch)), rounded up to whole global batches.

    Under data parallelism this rank takes draws ``rank, rank + num_replicas, ...`` of the epoch's, in batches of its
    share: update k then trains on draws [k * batch_size, (k + 1) * batch_size) of the epoch over all the ranks and
    passes, whatever their number (``batch_size`` is a multiple of ``num_replicas``, ``gpt1.data.base.split_batch``).
    Whole batches make it so at an epoch's end too: a last partial batch would be split unevenly over the ranks (or
    padded with extra draws), and so hold other examples on another number of processes.

    ``consumed()`` is how many of this rank's draws of the epoch a resumed run already trained on, left out; it is
    asked when iteration starts (``DeferredDataLoader`` says why). The length stays the whole epoch's share, so
    Lightning's counters stay right. Being a ``DistributedSampler``, Lightning uses it as is under DDP.
    """

    def __init__(
        self,
        n: int,
        seed: int,
        batch_size: int,
        epoch: int = 0,
        consumed: Callable[[], int] = lambda: 0,
        num_replicas: int = 1,
        rank: int = 0,
        draws: Optional[int] = None,
    ) -> None:
        if draws is not None and (n < 1 or draws < 1):
            raise ValueError(f"EpochSampler needs n >= 1 and draws >= 1, got {n}, {draws}")
        if batch_size % num_replicas:
            raise ValueError(f"batch_size={batch_size} is not a multiple of num_replicas={num_replicas}")
        shuffle = draws is None
        super().__init__(range(n), num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed, drop_last=shuffle)
        self.draws, self.epoch, self.consumed = draws, epoch, consumed
        whole = n // batch_size if shuffle else math.ceil(draws / batch_size)
        self.total_size = whole * batch_size  # the epoch's draws over all the ranks
        self.num_samples = self.total_size // num_replicas  # this rank's share (DistributedSampler's meaning)

    def __iter__(self) -> Iterator[int]:
        if self.draws is None:
            order = torch.randperm(len(self.dataset), generator=torch.Generator().manual_seed(self.seed + self.epoch))
        else:
            order = np.random.default_rng([self.seed, self.epoch]).integers(0, len(self.dataset), self.total_size)
        return iter(order[: self.total_size].tolist()[self.rank :: self.num_replicas][self.consumed() :])


class DeferredDataLoader(DataLoader):
    """A DataLoader whose iterator is created when the first batch is asked for, not by ``iter()``.

    Lightning calls ``iter()`` on the train loader when it sets its loop up, which can come before it restores a
    checkpoint's counters (``estimated_stepping_batches``, read by ``configure_optimizers``, sets it up early when
    training is bounded by epochs). With worker processes a DataLoader's iterator asks its sampler for the first
    batches as soon as it exists, so a resumed run's sampler would read the epoch's draws to leave out (and the epoch)
    before they are restored, and replay the epoch from its start. Deferred, the sampler is asked at the first batch.
    """

    def __iter__(self) -> Iterator[Any]:
        yield from super().__iter__()  # (a generator: its body, and so DataLoader's iterator, starts at the first next)


class EvalShard(DistributedSampler):
    """This process's share of an evaluation: the examples of ``order`` at positions rank, rank + num_replicas, ...:
    every example once over all the processes, so that a metric is the same on any number of them. (Lightning's own
    sampler evens the shares out by repeating examples, which then count twice, as many as the processes need.)
    Being a ``DistributedSampler``, Lightning uses it as is. Fewer examples than processes are refused: Lightning
    skips an evaluation of no batches on that process, and the others would wait for it forever at their metrics'
    synchronisation."""

    def __init__(self, order: Sequence[int], num_replicas: int = 1, rank: int = 0) -> None:
        if 0 < len(order) < num_replicas:
            raise DataError(
                f"an evaluation split of {len(order)} examples leaves some of the {num_replicas} processes none: "
                "give it at least one example per process, or run on fewer processes (trainer.devices, "
                "trainer.num_nodes)"
            )
        super().__init__(range(len(order)), num_replicas=num_replicas, rank=rank, shuffle=False)
        self.order = list(order)[rank::num_replicas]
        self.num_samples = len(self.order)

    def __iter__(self) -> Iterator[int]:
        return iter(self.order)

    def __len__(self) -> int:
        return len(self.order)


def warn_if_order_changed(datamodule: Any, saved: Mapping[str, Any], names: Mapping[str, str]) -> None:
    """On resume: one warning line (on rank 0) naming each setting that fixes the training order (``names``: key ->
    how the line names it) and differs between the checkpoint's run (``saved``) and this one (``datamodule``'s
    ``state_dict()``). Training then goes on, but not on the examples the interrupted run would have seen."""
    now = datamodule.state_dict()
    differ = [f"{names[k]}: {saved[k]} -> {now[k]}" for k in names if k in saved and saved[k] != now[k]]
    if differ and (datamodule.trainer is None or datamodule.trainer.is_global_zero):
        print(
            f"warning: resuming with another data order than the checkpoint's run ({'; '.join(differ)}): "
            "training goes on, but not on the examples the interrupted run would have seen",
            file=sys.stderr,
            flush=True,
        )
