"""Progress bars: tqdm's, on stderr (``gpt1 zeroshot``'s checkpoints and sequences; training's, through
``gpt1.training.console.StepProgress``), ``write`` to print a line above them without breaking them, and ``Meter``,
the documents and rate of corpus preparation, a bar on a terminal and plain lines in a log."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import IO, Any, Optional

from tqdm import tqdm


def bar(
    iterable: Optional[Iterable[Any]] = None, *, desc: str, unit: str, total: Optional[int] = None, leave: bool = True
) -> tqdm:
    """A tqdm bar on stderr (what a command prints, its results, stays on stdout); ``leave=False`` for an inner bar,
    erased when done."""
    return tqdm(
        iterable, desc=desc, unit=unit, total=total, leave=leave, file=sys.stderr, dynamic_ncols=True, mininterval=0.5
    )


def write(text: str) -> None:
    """Print ``text`` on stdout above the bars that show, which are redrawn below it."""
    tqdm.write(text, file=sys.stdout)


def _si(x: float) -> str:
    """1234567 -> "1.23M"."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}"
    return f"{x:.3g}"


class Meter:
    """Documents done (of ``total``) and an amount (``unit``: tokens, characters) with its rate, for work that takes
    minutes: a tqdm bar when ``file`` (stderr) is a terminal, else a plain line every ``interval`` seconds and a last
    one at ``close``, so that a log shows it move too."""

    def __init__(
        self, desc: str, unit: str, total: Optional[int] = None, interval: float = 15.0, file: Optional[IO[str]] = None
    ) -> None:
        self.desc, self.unit, self.total, self.interval = desc, unit, total, interval
        self.file = file or sys.stderr
        self.docs, self.amount = 0, 0
        self.start = self.shown = time.perf_counter()
        self.bar = None
        if self.file.isatty():
            self.bar = tqdm(
                desc=desc, unit=" documents", total=total, file=self.file, dynamic_ncols=True, mininterval=0.5
            )

    def status(self) -> str:
        """E.g. "12/40 documents, 2.51M tokens, 251k tokens/s"."""
        rate = self.amount / max(time.perf_counter() - self.start, 1e-9)
        of = f"/{self.total:,}" if self.total is not None else ""
        return f"{self.docs:,}{of} documents, {_si(self.amount)} {self.unit}, {_si(rate)} {self.unit}/s"

    def update(self, docs: int, amount: int) -> None:
        self.docs += docs
        self.amount += amount
        now = time.perf_counter()
        if self.bar is not None:
            self.bar.set_postfix_str(
                f"{_si(self.amount)} {self.unit}, {_si(self.amount / max(now - self.start, 1e-9))} {self.unit}/s",
                refresh=False,
            )
            self.bar.update(docs)
        elif now - self.shown >= self.interval:
            self.shown = now
            print(f"{self.desc}: {self.status()}", file=self.file, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            print(
                f"{self.desc}: {self.status()} in {time.perf_counter() - self.start:.0f} s", file=self.file, flush=True
            )
