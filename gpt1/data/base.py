"""What gpt1's two data modules share: the global batch split over devices (``connect``), loaders that resume a
training epoch exactly, the training order saved in checkpoints, and one cache key."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Optional

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from gpt1.core.compat import epoch_batch_progress
from gpt1.core.errors import ConfigError
from gpt1.data.loader import DeferredDataLoader, EvalShard, warn_if_order_changed


def cache_key(*parts: Any) -> str:
    """A short hash of ``parts`` (JSON, keys sorted): the name of a cached file derived from exactly those inputs."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def split_batch(
    batch_size: int,
    world_size: int,
    micro_batch_size: Optional[int] = None,
    accumulate: int = 1,
    key: str = "batch_size",
) -> tuple[int, int]:
    """(examples per device per pass, passes per update) such that an update sees ``batch_size`` examples over
    ``world_size`` devices: ``micro_batch_size`` given, the passes follow; else ``accumulate`` passes of the device's
    share. A ``ConfigError`` naming ``key`` when the batch does not divide."""
    if micro_batch_size is None:
        if batch_size % (world_size * accumulate):
            raise ConfigError(
                f"{key}={batch_size} (examples per update, over all devices) is not a multiple of devices x "
                f"trainer.accumulate_grad_batches = {world_size} x {accumulate}: choose a batch size that is"
            )
        return batch_size // (world_size * accumulate), accumulate
    if batch_size % (micro_batch_size * world_size):
        raise ConfigError(
            f"{key}={batch_size} is not a multiple of micro_batch_size x devices = {micro_batch_size} x {world_size}: "
            "choose a micro_batch_size that divides it"
        )
    return micro_batch_size, batch_size // (micro_batch_size * world_size)


class DataModule(L.LightningDataModule):
    """A gpt1 data module: ``batch_size`` examples per update over all devices, split by ``connect`` once the
    Trainer is known; a seeded training order that a resumed run continues mid-epoch; loaders whose worker seeds never
    draw from the global RNG.

    The training order is one of global batches (``EpochSampler``), so a run may resume on another number of
    processes, devices or nodes. Subclasses name what fixes their training order in ``ORDER_KEYS`` (key -> how a
    resume's warning names it) and return those settings from ``order_state``.
    """

    ORDER_KEYS: ClassVar[dict[str, str]] = {}

    def __init__(
        self,
        batch_size: int,
        seed: int,
        num_workers: int = 0,
        micro_batch_size: Optional[int] = None,
        batch_key: str = "batch_size",
    ) -> None:
        super().__init__()
        self.batch_size, self.micro_batch_size, self.batch_key = batch_size, micro_batch_size, batch_key
        self.seed, self.num_workers = seed, num_workers
        self.device_batch_size = micro_batch_size or batch_size
        """Examples per device per forward pass; set by ``connect``."""
        self.passes = 1
        """Forward passes per update (the Trainer's ``accumulate_grad_batches``); set by ``connect``."""
        self.resumed_passes: Optional[int] = None
        """The passes per update of the run whose checkpoint this one resumes (``load_state_dict``), None otherwise."""

    def connect(self, world_size: int, accumulate: int = 1) -> int:
        """Split the global batch over ``world_size`` devices (``micro_batch_size`` each, else their share in
        ``accumulate`` passes); return the passes per update (the Trainer's ``accumulate_grad_batches``)."""
        self.device_batch_size, self.passes = split_batch(
            self.batch_size, world_size, self.micro_batch_size, accumulate, self.batch_key
        )
        return self.passes

    # -- the training order ---------------------------------------------------------------------------------------

    def resume_point(self) -> tuple[int, Callable[[], int], int, int]:
        """What a training sampler needs to continue an epoch: (epoch, consumed, num_replicas, rank), ``consumed()``
        being this rank's examples of the epoch already trained on, read from Lightning's counters (restored on
        resume, in this run's passes: ``gpt1.training.callbacks.continue_epoch.ContinueEpoch``) when iteration
        starts; (0, 0, 1, 0) without a Trainer."""
        trainer = self.trainer
        if trainer is None:
            return 0, lambda: 0, 1, 0
        progress = epoch_batch_progress(trainer)  # batches of this epoch
        return (
            trainer.current_epoch,
            lambda: progress.processed * self.device_batch_size,
            trainer.world_size,
            trainer.global_rank,
        )

    def order_state(self) -> dict[str, Any]:
        """The settings in ``ORDER_KEYS``, as this run has them."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """What fixes the training order, and the passes per update that Lightning's saved batch counts are in, saved
        in checkpoints (Lightning's datamodule state)."""
        return {**self.order_state(), "passes": self.passes}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """On resume: warn where this run draws its training examples otherwise than the checkpoint's run did; keep
        the passes per update its batch counts are in (another number of processes may take other passes)."""
        warn_if_order_changed(self, state, self.ORDER_KEYS)
        self.resumed_passes = state.get("passes")

    def loader(
        self,
        ds: Dataset,
        batch_size: int,
        sampler: Optional[Sampler[int]] = None,
        collate_fn: Optional[Callable[[list[Any]], Any]] = None,
    ) -> DataLoader:
        """A loader of ``ds`` in ``sampler``'s order (None: in order), which asks the sampler for its order at the
        first batch (after a resume has restored the counters)."""
        return DeferredDataLoader(
            ds,
            batch_size=batch_size,
            sampler=sampler,
            collate_fn=collate_fn,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            pin_memory=torch.cuda.is_available(),
            generator=torch.Generator().manual_seed(self.seed),  # worker seeds never draw from the global RNG
        )

    def eval_loader(
        self,
        ds: Dataset,
        batch_size: int,
        order: Optional[Sequence[int]] = None,
        collate_fn: Optional[Callable[[list[Any]], Any]] = None,
    ) -> DataLoader:
        """A loader of this process's share of ``ds`` for evaluation (``EvalShard``): the examples of ``order`` (None:
        in index order) at this rank's positions, every example once over all the processes."""
        replicas, rank = (self.trainer.world_size, self.trainer.global_rank) if self.trainer is not None else (1, 0)
        shard = EvalShard(range(len(ds)) if order is None else order, replicas, rank)
        return self.loader(ds, batch_size, shard, collate_fn)
