"""The data modules' shared loader and base: a loader that asks its sampler for the order at the first batch, the
global batch split over devices, evaluation's share of each process, the warning of a resume that changes the order."""

import pytest
import torch
from torch.utils.data import Sampler

from gpt1.core.errors import ConfigError, DataError
from gpt1.data.base import DataModule, split_batch
from gpt1.data.loader import DeferredDataLoader, EvalShard, warn_if_order_changed


class Recorded(Sampler[int]):
    """An order that records when it was asked for, and starts at ``start`` (set late, as a resume's counters)."""

    def __init__(self) -> None:
        self.start, self.asked = 0, 0

    def __iter__(self):
        self.asked += 1
        return iter(range(self.start, 6))

    def __len__(self) -> int:
        return 6


@pytest.mark.parametrize("workers", [0, 1])
def test_the_deferred_loader_asks_its_sampler_at_the_first_batch(workers):
    sampler = Recorded()
    loader = DeferredDataLoader(list(range(6)), batch_size=2, sampler=sampler, num_workers=workers)
    batches = iter(loader)
    assert sampler.asked == 0  # a plain DataLoader with workers would have asked already
    sampler.start = 2  # e.g. Lightning restoring a checkpoint's counters after iter()
    assert [b.tolist() for b in batches] == [[2, 3], [4, 5]] and sampler.asked == 1


def test_a_plain_loader_with_workers_asks_at_iter():
    """Why the deferred one exists: with workers, iter() already draws the first indices."""
    sampler = Recorded()
    batches = iter(torch.utils.data.DataLoader(list(range(6)), batch_size=2, sampler=sampler, num_workers=1))
    sampler.start = 2
    assert next(batches).tolist() == [0, 1]


def test_the_global_batch_is_split_over_devices_passes_or_micro_batches():
    assert split_batch(64, 4) == (16, 1) and split_batch(64, 4, accumulate=2) == (8, 2)
    assert split_batch(32, 2, micro_batch_size=4) == (4, 4)
    with pytest.raises(ConfigError, match=r"^batch_size=32 is not a multiple of micro_batch_size x devices = 6 x 1"):
        split_batch(32, 1, micro_batch_size=6)


class Order(DataModule):
    ORDER_KEYS = {"seed": "seed", "batch_size": "examples per device"}

    def order_state(self):
        return {"seed": self.seed, "batch_size": self.device_batch_size}


def test_connect_sets_the_device_batch_and_returns_the_passes(capsys):
    data = Order(batch_size=32, seed=1, micro_batch_size=8)
    assert data.connect(world_size=2) == 2 and data.device_batch_size == 8
    data = Order(batch_size=32, seed=1)
    assert data.connect(world_size=2) == 1 and data.device_batch_size == 16
    assert data.resume_point()[0] == 0 and data.resume_point()[1]() == 0  # no Trainer: from the start
    data.load_state_dict({"seed": 2, "batch_size": 16})
    warning = capsys.readouterr().err
    assert warning.count("\n") == 1 and "seed: 2 -> 1" in warning and "examples per device" not in warning
    warn_if_order_changed(data, {"seed": 1, "batch_size": 16}, Order.ORDER_KEYS)
    assert capsys.readouterr().err == ""


def test_an_evaluation_counts_each_example_once_over_any_number_of_processes():
    """Lightning's own sampler pads the shares of 7 examples over 2 or 4 processes to 8, repeating some."""
    order = [6, 0, 5, 1, 4, 2, 3]  # e.g. longest first
    assert list(EvalShard(order)) == order
    for n in (2, 4):
        shards = [list(EvalShard(order, num_replicas=n, rank=r)) for r in range(n)]
        assert sorted(i for shard in shards for i in shard) == list(range(7)) and shards[0] == order[::n]
        assert [len(EvalShard(order, n, r)) for r in range(n)] == [len(s) for s in shards]
    assert isinstance(EvalShard(order), torch.utils.data.DistributedSampler)  # so Lightning does not wrap it
    with pytest.raises(DataError, match="an evaluation split of 7 examples leaves some of the 8 processes none"):
        EvalShard(order, num_replicas=8, rank=7)  # (Lightning would skip rank 7's evaluation, and the others wait)
