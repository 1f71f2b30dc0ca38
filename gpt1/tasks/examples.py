"""A task split's examples as text: what a source reads (``gpt1.tasks.rows``), what fine-tuning encodes and what
zero-shot scores."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass
class Examples:
    """One split's examples as text, rows without a gold label dropped (N rows kept)."""

    text: list[str]
    """(N,) the text, premise or context."""
    pair: Optional[list[str]]
    """(N,) the second text (entailment, similarity)."""
    choices: Optional[list[list[str]]]
    """(N, K_i) each row's choices (multiple choice)."""
    labels: Optional[np.ndarray]
    """(N,) int64 class or choice index, or float32 score; None: an unlabeled split."""
    index: np.ndarray
    """(N,) int64: each example's row in its split."""
    rows: int
    """Rows read, before dropping."""
    label_names: Optional[list[str]]
    """The class names of the source's ClassLabel label column, if any."""
