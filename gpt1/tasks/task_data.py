"""A fine-tuning task's data: ``TaskDataModule`` serves every split of a ``TaskConfig`` (``gpt1.tasks.spec``), each a
``TaskSplit`` (``gpt1.tasks.split``: read, checked and encoded once, cached), its labels settled, transformed and
batched. The splits are resolved when the module is made; ``prepare_data`` encodes those the cache lacks, on the
process that prepares, and ``setup`` loads them, on every rank: each once, however often Lightning calls them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
from omegaconf import DictConfig
from torch.utils.data import DataLoader

from gpt1.core.errors import ConfigError, DataError
from gpt1.data.base import DataModule, cache_key
from gpt1.data.loader import EpochSampler
from gpt1.tasks.batches import Collate, TaskDataset, longest_first
from gpt1.tasks.encoding import EncodedSplit
from gpt1.tasks.spec import ROLES, TASK_SPECIAL_TOKENS, TaskConfig, split_specs, task_from_dict
from gpt1.tasks.split import TaskSplit
from gpt1.tasks.task_type import Transform

if TYPE_CHECKING:
    from gpt1.text.tokenizer import Tokenizer

log = logging.getLogger(__name__)


class TaskDataModule(DataModule):
    """A task's splits, transformed and batched.

    task: a ``TaskConfig`` (or a dict / OmegaConf node of one). tokenizer: a ``gpt1.text.tokenizer.Tokenizer`` holding
    ``TASK_SPECIAL_TOKENS``. n_ctx: the model's context. batch_size: training examples per update over all devices
    (``connect`` splits it); micro_batch_size: per device and forward pass (None: the device's share in one pass);
    eval_batch_size: evaluation's (None: micro_batch_size, else batch_size). seed: the training order. cache_dir: the
    datasets cache and the encoded splits (None: no cache). roles: which roles to load (None: all the task has; e.g.
    ("validation", "test") to evaluate). predict: the test split will be predicted (fine-tuning's predict=true), so
    ``setup("fit")`` demands one.
    """

    ORDER_KEYS = {
        "seed": "seed",
        "global_batch_size": "batch_size",
        "train_examples": "training examples",
    }

    def __init__(
        self,
        task: TaskConfig | Mapping[str, Any] | DictConfig,
        tokenizer: Tokenizer,
        n_ctx: int,
        batch_size: int,
        seed: int,
        cache_dir: str | os.PathLike | None,
        num_workers: int = 0,
        eval_batch_size: Optional[int] = None,
        roles: Optional[Sequence[str]] = None,
        micro_batch_size: Optional[int] = None,
        predict: bool = False,
    ) -> None:
        super().__init__(batch_size, seed, num_workers, micro_batch_size)
        self.predict = predict
        self.task = self._given = task_from_dict(task)
        """The task; after ``setup`` with its labels settled (``num_labels``, ``label_names``): the drivers read it."""
        if n_ctx < 5:
            raise ConfigError(f"model.n_ctx={n_ctx}: a task example needs at least 5 tokens (3 special, 1 per text)")
        self.tokenizer, self.n_ctx = tokenizer, n_ctx
        self.eval_batch_size = eval_batch_size or micro_batch_size or batch_size
        cache_dir = None if cache_dir is None else Path(cache_dir)
        unknown = [r for r in roles or () if r not in ROLES]
        if unknown:
            raise ValueError(f"unknown roles {unknown}: choose among {ROLES}")
        specs = [s for s in split_specs(self.task) if roles is None or s.role in roles]
        key = None if cache_dir is None or tokenizer is None else cache_key(tokenizer.to_str())  # (one hash)
        self.splits = {s.id: TaskSplit(self._given, s, cache_dir, tokenizer, key) for s in specs}
        """Split id -> the split (``TaskSplit``), resolved, in role order."""
        self.roles: dict[str, list[str]] = {r: [s.id for s in specs if s.role == r] for r in ROLES}
        """Role -> the ids of its splits, in order (the order of the val/test/predict dataloaders)."""
        self.name = self.task.name or "task"
        self.stats: dict[str, dict[str, int]] = {}
        """Split id -> {"examples", "truncated", "dropped"}; set by ``setup``."""
        self.eval_splits: dict[str, str] = {}
        """Metric prefix -> split id, for every labelled validation and test split: "val" for the first validation
        split, "val_<suffix>" for the others (validation_mismatched -> "val_mismatched"); "test" likewise."""
        self.metric_prefixes: tuple[list[Optional[str]], list[str]] = ([], [])
        """The metric prefix of each validation and test dataloader, in order (None: a validation split without
        labels, which gets no metrics): what ``TaskModule`` logs its metrics under; set by ``setup``."""
        self.encoded: dict[str, EncodedSplit] = {}
        """Split id -> its examples as ids; set by ``setup``."""
        self._datasets: dict[str, TaskDataset] = {}

    # -- preparation ------------------------------------------------------------------------------------------

    def prepare_data(self) -> None:
        """Read and encode every split the cache lacks (every split without a cache) into it, once."""
        for split in self.splits.values():
            split.prepare()

    def setup(self, stage: Optional[str] = None) -> None:
        """Load every split (as ``prepare_data`` encoded it, else from the cache), check it, settle the labels, count
        the truncated examples. Once: a later call does nothing (the datasets, made last, say it is done)."""
        if self._datasets:
            return
        if stage == "fit":
            for role in ("train", "validation"):
                if not self.roles[role]:
                    raise ConfigError(
                        f"task {self.name} has no {role} split: give task.data_files.{role} "
                        f"(or map a split to it with task.splits.{role})"
                    )
        specials = tuple(self.tokenizer.special_id(role) for role in TASK_SPECIAL_TOKENS)
        encoded = {sid: split.encoded() for sid, split in self.splits.items()}
        for sid, split in encoded.items():
            if self.splits[sid].role != "test" and len(split) == 0:
                raise DataError(
                    f"task {self.name}: the {sid} split has no examples ({self.splits[sid].where}: "
                    f"{split.rows} rows, {split.dropped} without a label)"
                )
        self._settle_labels(encoded)
        self.encoded = encoded
        transform = Transform(*specials, self.n_ctx, self.task.truncation)
        kind = self.task.kind
        self.stats = {
            sid: {
                "examples": len(split),
                "truncated": int(kind.truncated(split, transform).sum()),
                "dropped": split.dropped,
            }
            for sid, split in encoded.items()
        }
        self.eval_splits = {}
        for role, prefix in (("validation", "val"), ("test", "test")):
            for i, sid in enumerate(self.roles[role]):
                if self.has_labels(sid):
                    suffix = sid[len(role) + 1 :] if sid.startswith(f"{role}_") else sid
                    self.eval_splits[prefix if i == 0 else f"{prefix}_{suffix}"] = sid
        prefix_of = {split: prefix for prefix, split in self.eval_splits.items()}
        self.metric_prefixes = (
            [prefix_of.get(s) for s in self.roles["validation"]],
            [prefix_of[s] for s in self.roles["test"] if self.has_labels(s)],
        )
        for sid, s in self.stats.items():
            log.info(
                "task %s, %s: %d examples, %d truncated to n_ctx %d (%s), %d dropped without a label%s",
                self.name,
                sid,
                s["examples"],
                s["truncated"],
                self.n_ctx,
                self.task.truncation,
                s["dropped"],
                "" if self.has_labels(sid) else ", unlabeled",
            )
        if stage == "fit":
            self._check_trainable()
        self._datasets = {sid: TaskDataset(split, kind, transform) for sid, split in encoded.items()}

    def _check_trainable(self) -> None:
        """Refuse, before any training, what fine-tuning cannot do with these splits: select weights without a
        labelled validation split, train on fewer examples than one batch, predict without a test split."""
        if "val" not in self.eval_splits:
            raise ConfigError(
                f"task {self.name} has no labelled validation split: add one (task.data_files or task.splits)"
            )
        n_train = self.stats.get("train", {"examples": 0})["examples"]
        if n_train < self.batch_size:  # whole batches only, as the original: not one update
            raise ConfigError(
                f"task {self.name} has {n_train} training examples, fewer than batch_size={self.batch_size}: "
                "an epoch trains on whole batches only (the last partial one is left out, as the original "
                "code), so nothing would train; lower batch_size"
            )
        if self.predict and not self.roles["test"]:
            raise ConfigError(f"predict=true, but task {self.name} has no test split to predict")

    def _settle_labels(self, encoded: dict[str, EncodedSplit]) -> None:
        """Settle the task's num_labels and label_names (``self.task``) from the data; check every label against
        them."""
        t = self._given
        names = t.label_names or next((s.label_names for s in encoded.values() if s.label_names), None)
        labelled = {sid: s for sid, s in encoded.items() if s.labels is not None}
        top = -1 if t.regression else max((int(s.labels.max(initial=-1)) for s in labelled.values()), default=-1)
        num_labels = 1 if t.regression else t.kind.num_labels(t.num_labels, names, top, list(encoded.values()))
        self.task = replace(t, num_labels=num_labels, label_names=names)
        if t.regression:
            return
        for sid, s in labelled.items():
            bad = np.flatnonzero(s.labels >= num_labels)
            if len(bad):
                source = f"task.num_labels={t.num_labels}" if t.num_labels else f"task.label_names {names}"
                raise DataError(
                    f"{self.splits[sid].locate(s.index[bad[0]])}: "
                    f"label {s.labels[bad[0]]} is out of range for {num_labels} classes ({source})"
                )
        train = labelled.get(self.roles["train"][0]) if self.roles["train"] else None
        if names and train is not None and not t.kind.choices:
            absent = [name for i, name in enumerate(names) if i not in set(train.labels.tolist())]
            if absent:
                log.warning(
                    "task %s: %s of task.label_names never occur%s in the training split (%s): the model "
                    "never learns to predict %s; check the training data's labels, or task.label_names",
                    self.name,
                    ", ".join(map(repr, absent)),
                    "s" if len(absent) == 1 else "",
                    self.splits[self.roles["train"][0]].where,
                    "it" if len(absent) == 1 else "them",
                )

    # -- queries ----------------------------------------------------------------------------------------------

    def has_labels(self, split: str) -> bool:
        """Whether ``split`` has gold labels (metrics) or not (predictions only)."""
        return self.encoded[split].labels is not None

    def train_labels(self) -> np.ndarray:
        """(N,) the training split's labels (int64 classes or float32 scores): the majority / mean baseline."""
        if "train" not in self.encoded:
            raise RuntimeError("no training split: call setup() first, on a task with a train split")
        return self.encoded["train"].labels

    def dataset(self, split: str) -> TaskDataset:
        """The transformed examples of ``split``."""
        return self._datasets[split]

    # -- loaders ----------------------------------------------------------------------------------------------

    def train_dataloader(self) -> DataLoader:
        if "train" not in self._datasets:
            raise RuntimeError("no training split: call setup() first, on a task with a train split")
        ds = self._datasets["train"]
        epoch, consumed, replicas, rank = self.resume_point()
        sampler = EpochSampler(len(ds), self.seed, self.batch_size, epoch, consumed, replicas, rank)
        return self.loader(ds, self.device_batch_size, sampler, self.collate())

    def order_state(self) -> dict[str, Any]:
        """What fixes the order of the training examples (``ORDER_KEYS``)."""
        train = len(self._datasets["train"]) if "train" in self._datasets else 0
        return {
            "seed": self.seed,
            "global_batch_size": self.batch_size,
            "train_examples": train,
        }

    def val_dataloader(self) -> DataLoader | list[DataLoader]:
        """One loader per validation split (a list when there are several), in ``roles["validation"]`` order."""
        return self._eval_loaders(self.roles["validation"])

    def test_dataloader(self) -> DataLoader | list[DataLoader]:
        """One loader per labelled test split, in ``roles["test"]`` order."""
        return self._eval_loaders([s for s in self.roles["test"] if self.has_labels(s)])

    def predict_dataloader(self) -> DataLoader | list[DataLoader]:
        """One loader per test split, labelled or not, in ``roles["test"]`` order."""
        return self._eval_loaders(self.roles["test"])

    def _eval_loaders(self, splits: list[str]) -> DataLoader | list[DataLoader]:
        loaders = [
            self.eval_loader(
                self._datasets[s], self.eval_batch_size, longest_first(self._datasets[s].lengths()), self.collate()
            )
            for s in splits
        ]
        return loaders[0] if len(loaders) == 1 else loaders

    def collate(self) -> Collate:
        """The collate function of this task's batches."""
        return Collate(self.task.kind, self.task.regression)
