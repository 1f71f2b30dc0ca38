"""The DataLoader of the data modules: its iterator starts at the first batch, so a resumed run's sampler sees the
restored counters."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Optional

from torch.utils.data import DataLoader


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
