"""A task split as a torch dataset of transformed examples, its batches and its evaluation order.

Batches (``Collate``; right padding with ``PAD_ID`` to the batch's longest sequence, T; the task type lays them
out, ``TaskType.batch``): ``input_ids``, ``targets`` (B, T) or (B, K, T), ``extract`` (B,) or (B, K), and for
multiple choice ``choice_mask`` (B, K), K the most choices of an example in the batch (an example with fewer gets
all-padding dummy sequences, masked False); ``labels`` (B,) long (class, choice index) or float (regression), absent
for unlabeled splits; ``index`` (B,) long. ``extract`` is the position of the extract token; ``targets`` are
next-token targets, ``IGNORE_INDEX`` where not scored: every real token after the first is predicted (delimiter and
extract included), as the original's ``M[:, 1:]``; a dummy choice has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from gpt1.model.lm_loss import IGNORE_INDEX
from gpt1.tasks.encoding import EncodedSplit
from gpt1.tasks.task_type import TaskType, Transform

PAD_ID = 0
"""Id that right-pads batches (never scored, never read by a head)."""


class TaskDataset(Dataset):
    """A split's examples, transformed by the task type: item i = ``{"sequences": [(T_k,) int64 per sequence],
    "index", "label"}``."""

    def __init__(self, split: EncodedSplit, task_type: TaskType, transform: Transform) -> None:
        self.split, self.type, self.transform = split, task_type, transform

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i: int) -> dict[str, Any]:
        s = self.split
        item = {"sequences": self.type.sequences(s, i, self.transform), "index": int(s.index[i])}
        if s.labels is not None:
            item["label"] = s.labels[i].item()
        return item

    def lengths(self) -> np.ndarray:
        """(N,) tokens of each example's longest sequence, before the special tokens and the cut to n_ctx."""
        s = self.split
        n = s.text.lengths
        if s.pair is not None:
            n = n + s.pair.lengths
        if s.choices is not None:
            n = n + np.maximum.reduceat(s.choices.lengths, s.choice_offsets[:-1])
        return n


class Collate:
    """Items of a ``TaskDataset`` -> a batch (module docstring): right-padded to the longest sequence, dummy
    sequences for examples with fewer, laid out by the task type."""

    def __init__(self, task_type: TaskType, regression: bool) -> None:
        self.type, self.regression = task_type, regression

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        B = len(items)
        K = max(len(it["sequences"]) for it in items)
        T = max(len(s) for it in items for s in it["sequences"])
        input_ids = torch.full((B, K, T), PAD_ID, dtype=torch.long)
        targets = torch.full((B, K, T), IGNORE_INDEX, dtype=torch.long)
        extract = torch.zeros(B, K, dtype=torch.long)
        mask = torch.zeros(B, K, dtype=torch.bool)
        for b, it in enumerate(items):
            for k, seq in enumerate(it["sequences"]):
                ids, n = torch.from_numpy(seq), len(seq)
                input_ids[b, k, :n] = ids
                targets[b, k, : n - 1] = ids[1:]  # position t predicts token t + 1
                extract[b, k] = n - 1
                mask[b, k] = True
        batch = self.type.batch(input_ids, extract, targets, mask)
        if "label" in items[0]:
            batch["labels"] = torch.tensor(
                [it["label"] for it in items], dtype=torch.float32 if self.regression else torch.long
            )
        batch["index"] = torch.tensor([it["index"] for it in items], dtype=torch.long)
        return batch


def real_tokens(batch: Mapping[str, torch.Tensor]) -> int:
    """Tokens of a batch that are not padding: each sequence of a task batch up to its extract token (a dummy
    choice none); every token of a pre-training batch (no ``extract``: its windows are never padded)."""
    if "extract" not in batch:
        return batch["input_ids"].numel()
    lengths = batch["extract"] + 1  # (B,) or (B, K)
    if "choice_mask" in batch:
        lengths = lengths * batch["choice_mask"]
    return int(lengths.sum())


def longest_first(lengths: np.ndarray) -> list[int]:
    """Evaluation's order: the longest examples first, so that a batch's sequences have similar lengths and little
    padding (and a batch too large for memory fails first). Metrics do not depend on the order; predictions are
    written in index order."""
    return np.argsort(-lengths, kind="stable").tolist()
