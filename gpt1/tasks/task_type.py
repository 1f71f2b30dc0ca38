"""The interface of a task type: what it asks of a task spec, how it turns an example into sequences (the paper's
input transformation, section 3.3), how a batch is laid out, its head and loss, and how it predicts.

``S``, ``D``, ``X`` below are the start, delimiter and extract tokens. Shapes: B examples, K sequences per example,
T tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Optional, Protocol

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from gpt1.model.heads import init_head


class Truncation(str, Enum):
    """How a too-long example is cut to the context."""

    original = "original"  # each text to its share of n_ctx, keeping its beginning, as the original code
    longest_first = "longest_first"  # tokens from the end of the longer text, only as many as needed

    def __str__(self) -> str:
        return self.value


def kept_lengths(a: Any, b: Any, n_ctx: int, truncation: Truncation) -> tuple[Any, Any]:
    """How many tokens of a pair's texts (lengths ``a``, ``b``: ints or arrays) fit ``n_ctx`` with the three special
    tokens, under ``truncation``; each text keeps its beginning. ``original`` gives each text ``(n_ctx - 3) // 2``
    (254 at n_ctx 512, the original's ``n_ctx // 2 - 2``)."""
    budget = n_ctx - 3
    if truncation == Truncation.original:
        return np.minimum(a, budget // 2), np.minimum(b, budget // 2)
    ka = np.minimum(a, np.maximum(budget - b, (budget + 1) // 2))  # the shorter text whole if it fits in half
    return ka, np.minimum(b, budget - ka)


@dataclass(frozen=True)
class Transform:
    """Builds the sequences of the transformations: the special tokens' ids, the context, the truncation."""

    start: int
    delimiter: int
    extract: int
    n_ctx: int
    truncation: Truncation = Truncation.original

    def single(self, a: np.ndarray) -> np.ndarray:
        """``S a X``, the text cut to ``n_ctx - 2`` tokens."""
        return np.concatenate([[self.start], a[: self.n_ctx - 2], [self.extract]]).astype(np.int64)

    def pair(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``S a D b X``, the texts cut as ``kept_lengths`` says."""
        ka, kb = kept_lengths(len(a), len(b), self.n_ctx, self.truncation)
        return np.concatenate([[self.start], a[:ka], [self.delimiter], b[:kb], [self.extract]]).astype(np.int64)


class Ragged(Protocol):
    """Variable-length id sequences (``gpt1.tasks.encoding.Ragged``): ``seqs[i]`` and ``seqs.lengths`` (n,)."""

    lengths: np.ndarray

    def __getitem__(self, i: int) -> np.ndarray: ...


class Texts(Protocol):
    """A split's encoded texts (``gpt1.tasks.encoding.EncodedSplit``), as a task type reads them."""

    text: Ragged
    """(N, ·) the text, premise or context."""
    pair: Optional[Ragged]
    """(N, ·) the second text of pairs."""
    choices: Optional[Ragged]
    """(sum K_i, ·) every row's choices in turn: row i's are ``choices[choice_offsets[i]:choice_offsets[i + 1]]``."""
    choice_offsets: Optional[np.ndarray]
    """(N + 1,) int64."""


class TaskType:
    """One kind of task, registered by ``name`` (``gpt1.tasks.registry.register``): a task spec's ``type`` picks it.

    Subclasses set the class attributes and implement ``sequences`` and ``truncated``; the rest has defaults for a
    classifier of one or more sequences per example, whose head reads the extract token's final state.
    """

    name: ClassVar[str]
    """The value of ``task.type`` that picks this type; also the key of its head in checkpoints (heads.<name>.*)."""
    text_pair: ClassVar[bool] = False
    """Whether its examples have a second text (``task.text_pair``)."""
    choices: ClassVar[bool] = False
    """Whether its examples have choices (``task.choices``), and its labels pick one of them."""
    columns: ClassVar[tuple[str, ...]] = ()
    """Further ``TaskConfig`` keys, each naming a column this type reads (Winograd: ``pronoun``, ``pronoun_loc``);
    ``examples`` gets their values."""
    can_regress: ClassVar[bool] = True
    """Whether ``task.num_labels: 1`` makes it a regression on scores (MSE loss, a score per example)."""
    heuristics: ClassVar[tuple[str, ...]] = ()
    """The zero-shot heuristics (``gpt1.tasks.heuristics``) that score it."""
    default_heuristic: ClassVar[Optional[str]] = None
    """The heuristic ``gpt1 zeroshot`` uses when ``task.zeroshot.heuristic`` is unset."""

    def __str__(self) -> str:
        return self.name

    # -- the spec ------------------------------------------------------------------------------------------------

    def regresses(self, num_labels: Optional[int]) -> bool:
        """Whether a task of this type with ``num_labels`` classes regresses scores."""
        return self.can_regress and num_labels == 1

    def num_labels(
        self, configured: Optional[int], label_names: Optional[list[str]], top_label: int, splits: list[Texts]
    ) -> int:
        """The head's classes once the data is read: ``task.num_labels`` (``configured``), else the label names',
        else the largest label seen (``top_label``) + 1, at least 2."""
        return configured or (len(label_names) if label_names else max(2, top_label + 1))

    def check(self, task: Any) -> None:
        """Raise a ``ConfigError`` naming the key for what a spec (``TaskConfig``) of this type lacks, beyond
        ``text_pair`` and ``choices``. Default: nothing more."""

    def examples(
        self,
        task: Any,
        columns: dict[str, list],
        text: list[str],
        pair: Optional[list[str]],
        choices: Optional[list[list[str]]],
        where: str,
        index: np.ndarray,
    ) -> tuple[list[str], Optional[list[str]], Optional[list[list[str]]]]:
        """A split's examples from the texts, second texts and choices read from its rows, and the values of the
        ``columns`` keys' columns (key -> a value per row); ``where`` and ``index`` name rows in errors. Default:
        as read."""
        return text, pair, choices

    def head_outputs(self, num_labels: int) -> int:
        """Outputs of the head's linear layer for ``num_labels``."""
        return num_labels

    # -- examples and batches ------------------------------------------------------------------------------------

    def sequences(self, texts: Texts, i: int, transform: Transform) -> list[np.ndarray]:
        """Example ``i`` of ``texts`` as its input sequences, special tokens included: (T_k,) int64 each."""
        raise NotImplementedError

    def truncated(self, texts: Texts, transform: Transform) -> np.ndarray:
        """(N,) bool: which examples lose tokens to the context."""
        raise NotImplementedError

    def batch(
        self, input_ids: torch.Tensor, extract: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """A batch's tensors from its padded sequences: input_ids and targets (B, K, T), extract and mask (B, K),
        mask False for the padding sequences of examples with fewer. Default: all of them but the mask."""
        return {"input_ids": input_ids, "extract": extract, "targets": targets}

    def pack(self, training: bool, share_context: bool) -> str:
        """How the decoder runs a batch (``gpt1.training.packing.task_logits``'s pack): in training, packed rows without
        padding; in evaluation padded rows."""
        return "sequences" if training else "none"

    # -- head, loss, predictions ---------------------------------------------------------------------------------

    def head(self, n_embd: int, num_labels: int, pdrop: float) -> nn.Module:
        """The head (``gpt1.model.heads``) on the extract tokens' states, before its initialisation."""
        raise NotImplementedError

    def build_head(self, n_embd: int, num_labels: int, pdrop: float = 0.1, init_std: float = 0.02) -> nn.Module:
        """The head, its weights drawn from N(0, init_std) and its bias 0 (as the original's)."""
        return init_head(self.head(n_embd, num_labels, pdrop), init_std)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor, regression: bool) -> torch.Tensor:
        """Mean cross-entropy over the examples (over classes or choices), in fp32; MSE for regression."""
        if regression:
            return F.mse_loss(logits.squeeze(-1).float(), labels.float())
        return F.cross_entropy(logits.float(), labels)

    def predict(self, logits: torch.Tensor, regression: bool) -> torch.Tensor:
        """Class or choice ids (B,), or scores (B,) for regression."""
        return logits.squeeze(-1) if regression else logits.argmax(-1)
