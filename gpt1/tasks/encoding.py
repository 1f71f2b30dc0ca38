"""A task split's examples as token ids (``EncodedSplit``), without special tokens (the task type's transformation
adds them), stored flat (``Ragged``) and cached as one .npz file per split."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np

from gpt1.core.files import atomic_file
from gpt1.tasks.examples import Examples

if TYPE_CHECKING:
    from gpt1.text.tokenizer import Tokenizer

CACHE_VERSION = 1  # part of every cache key: bump when the encoded layout changes


@dataclass
class Ragged:
    """Variable-length id sequences stored flat: sequence i is ``values[offsets[i]:offsets[i + 1]]``."""

    values: np.ndarray
    """(total,) int32 ids."""
    offsets: np.ndarray
    """(n + 1,) int64."""

    @classmethod
    def of(cls, seqs: Sequence[Sequence[int]]) -> Ragged:
        lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int32, count=int(offsets[-1]))
        return cls(values, offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    @property
    def lengths(self) -> np.ndarray:
        """(n,) int64."""
        return np.diff(self.offsets)


@dataclass
class EncodedSplit:
    """One split's examples as token ids, without special tokens (those come with the transformation)."""

    text: Ragged
    """(N, ·) the text, premise or context."""
    pair: Optional[Ragged]
    """(N, ·) the second text (entailment, similarity)."""
    choices: Optional[Ragged]
    """(sum K_i, ·) every row's choices in turn: row i's are choices[choice_offsets[i]:choice_offsets[i + 1]]."""
    choice_offsets: Optional[np.ndarray]
    """(N + 1,) int64 (multiple choice)."""
    labels: Optional[np.ndarray]
    """(N,) int64 or float32; None: unlabeled."""
    index: np.ndarray
    """(N,) int64 rows in the split."""
    rows: int
    """Rows read, before dropping those without a label."""
    label_names: Optional[list[str]]
    """The source's ClassLabel names, if any."""

    def __len__(self) -> int:
        return len(self.index)

    @property
    def dropped(self) -> int:
        return self.rows - len(self.index)

    @classmethod
    def encode(cls, ex: Examples, tokenizer: Tokenizer) -> EncodedSplit:
        choices = offsets = None
        if ex.choices is not None:
            choices = Ragged.of(tokenizer.encode_batch([c for row in ex.choices for c in row]))
            offsets = np.zeros(len(ex.choices) + 1, dtype=np.int64)
            np.cumsum([len(row) for row in ex.choices], out=offsets[1:])
        pair = Ragged.of(tokenizer.encode_batch(ex.pair)) if ex.pair is not None else None
        text = Ragged.of(tokenizer.encode_batch(ex.text))
        return cls(text, pair, choices, offsets, ex.labels, ex.index, ex.rows, ex.label_names)

    def save(self, path: Path) -> None:
        arrays: dict[str, np.ndarray] = {"index": self.index}
        for name in ("text", "pair", "choices"):
            part = getattr(self, name)
            if part is not None:
                arrays[f"{name}.values"], arrays[f"{name}.offsets"] = part.values, part.offsets
        if self.choice_offsets is not None:
            arrays["choice_offsets"] = self.choice_offsets
        if self.labels is not None:
            arrays["labels"] = self.labels
        arrays["meta"] = np.array(json.dumps({"rows": self.rows, "label_names": self.label_names}))
        with atomic_file(path) as f:
            np.savez(f, **arrays)

    @classmethod
    def load(cls, path: Path) -> EncodedSplit:
        with np.load(path, allow_pickle=False) as z:
            a = {k: z[k] for k in z.files}
        meta = json.loads(str(a["meta"]))
        part = {
            n: Ragged(a[f"{n}.values"], a[f"{n}.offsets"]) if f"{n}.values" in a else None
            for n in ("text", "pair", "choices")
        }
        return cls(**part, choice_offsets=a.get("choice_offsets"), labels=a.get("labels"), index=a["index"], **meta)
