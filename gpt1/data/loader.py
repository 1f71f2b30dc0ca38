"""What the data modules share for an exact resume and for any number of processes: a DataLoader whose iterator starts
at the first batch, so that a resumed run's sampler sees the restored counters; evaluation's share of each process;
and the warning when a resume changes the training order."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Optional

from torch.utils.data import DataLoader, DistributedSampler

from gpt1.core.errors import DataError


class DeferredDataLoader(DataLoader):
    """A DataLoader whose iterator is created when the first batch is asked for, not by ``iter()``.

    Lightning calls ``iter()`` on the train loader when it sets its loop up, which can come before it restores a
    checkpoint's counters (``estimated_stepping_batches``, read by ``configure_optimizers``, sets it up early when
    training is bounded by epochs). With worker processes a DataLoader's iterator asks its sampler for the first
    batches as soon as it exists, so a resumed run's sampler would read the epoch's draws to leave out (and the epoch)
    before they are restored, and replay the epoch from its start. Deferred, the sampler is asked at the first batch.
    """

    def __iter__(self) -> Iterator[Any]:
        return _Deferred(super().__iter__)


class _Deferred:
    def __init__(self, start: Callable[[], Iterator[Any]]) -> None:
        self._start = start
        self._iterator: Optional[Iterator[Any]] = None

    def __iter__(self) -> _Deferred:
        return self

    def __next__(self) -> Any:
        if self._iterator is None:
            self._iterator = self._start()
        return next(self._iterator)


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
