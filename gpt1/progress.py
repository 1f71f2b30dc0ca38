"""Progress bars: tqdm's, on stderr (``gpt1 zeroshot``'s checkpoints and sequences; training's, through
``gpt1.training.console.StepProgress``), and ``write`` to print a line above them without breaking them."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, Optional

from tqdm import tqdm


def bar(iterable: Optional[Iterable[Any]] = None, *, desc: str, unit: str, total: Optional[int] = None,
        leave: bool = True) -> tqdm:
    """A tqdm bar on stderr (what a command prints, its results, stays on stdout); ``leave=False`` for an inner bar,
    erased when done."""
    return tqdm(iterable, desc=desc, unit=unit, total=total, leave=leave, file=sys.stderr, dynamic_ncols=True,
                mininterval=0.5)


def write(text: str) -> None:
    """Print ``text`` on stdout above the bars that show, which are redrawn below it."""
    tqdm.write(text, file=sys.stdout)
