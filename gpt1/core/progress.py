"""Progress on stderr: tqdm's bars on a terminal, whole lines in a log (``bar``, ``Meter``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from datetime import timedelta
from typing import IO, Any, Optional

from tqdm import tqdm


def bar(
    iterable: Optional[Iterable[Any]] = None,
    *,
    desc: str,
    unit: str,
    total: Optional[int] = None,
    leave: bool = True,
    terminal: Optional[bool] = None,
) -> tqdm | Lines:
    """Progress on stderr (a command's results stay on stdout): a tqdm bar on a terminal (``leave=False``: an inner
    bar, erased when done), else ``Lines``. ``terminal``: the caller's say (None: whether stderr is one)."""
    if not (sys.stderr.isatty() if terminal is None else terminal):
        return Lines(iterable, desc=desc, unit=unit, total=total, tenths=leave)
    return tqdm(
        iterable, desc=desc, unit=unit, total=total, leave=leave, file=sys.stderr, dynamic_ncols=True, mininterval=0.5
    )


class Lines:
    """A bar's progress as lines for a log, where tqdm's redraws are escape codes: "checkpoints: 3/10 ckpt (30%),
    0:00:12 elapsed, 0:00:28 left" at every tenth of ``total`` (unless ``tenths`` is false) and at least every
    ``every_s`` seconds, and a last line at ``close``; tqdm's ``update``, ``close`` and iteration."""

    def __init__(
        self,
        iterable: Optional[Iterable[Any]] = None,
        *,
        desc: str,
        unit: str,
        total: Optional[int] = None,
        tenths: bool = True,
        every_s: float = 30.0,
    ) -> None:
        self.iterable, self.desc, self.unit, self.tenths, self.every_s = iterable, desc, unit, tenths, every_s
        self.total = len(iterable) if total is None and hasattr(iterable, "__len__") else total
        self.n, self.said = 0, -1  # said: n at the last line printed
        self.started = self.shown = time.monotonic()
        self.tenth = 0

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update(1)
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        tenth = 10 * self.n // self.total if self.total and self.tenths else 0
        if tenth > self.tenth or now - self.shown >= self.every_s:
            self.tenth, self.shown = tenth, now
            self.say(now)

    def line(self, now: float) -> str:
        elapsed = now - self.started
        done = f"{self.desc}: {self.n:,}" + (f"/{self.total:,}" if self.total else "") + f" {self.unit}"
        if self.total:
            done += f" ({100 * self.n // self.total}%)"
        parts = [done, f"{timedelta(seconds=round(elapsed))} elapsed"]
        if self.total and 0 < self.n < self.total:
            parts.append(f"{timedelta(seconds=round(elapsed / self.n * (self.total - self.n)))} left")
        return ", ".join(parts)

    def say(self, now: float) -> None:
        print(self.line(now), file=sys.stderr, flush=True)
        self.said = self.n

    def close(self) -> None:
        if self.said != self.n:
            self.say(time.monotonic())


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
    """Documents done (of ``total``) and an amount (``unit``: tokens) with its rate: a tqdm bar when ``file`` (stderr)
    is a terminal, else a line every ``interval`` seconds and a last one at ``close``. Work that reads the documents
    ``passes`` times (a BPE's training) calls ``next_pass`` before each: each pass counts from 0, named in the line
    ("training the BPE, pass 1/2: 9/9 documents, ...")."""

    def __init__(
        self,
        desc: str,
        unit: str,
        total: Optional[int] = None,
        interval: float = 15.0,
        file: Optional[IO[str]] = None,
        passes: int = 1,
    ) -> None:
        self.desc, self.unit, self.total, self.interval, self.passes = desc, unit, total, interval, passes
        self.file = file or sys.stderr
        self.bar = None
        self.pass_no = 0  # the pass under way (0: none begun by next_pass; a one-pass meter counts from the start)
        self._start()

    def _start(self) -> None:
        self.docs, self.amount = 0, 0
        self.start = self.shown = time.perf_counter()
        if self.file.isatty():
            self.bar = tqdm(
                desc=self.label,
                unit=" documents",
                total=self.total,
                file=self.file,
                dynamic_ncols=True,
                mininterval=0.5,
            )

    @property
    def label(self) -> str:
        """``desc``, and the pass under way where there are several: "training the BPE, pass 2/2"."""
        return f"{self.desc}, pass {self.pass_no}/{self.passes}" if self.passes > 1 else self.desc

    def next_pass(self) -> Meter:
        """Begin the next pass over the documents (the previous one ends in its last line); returns the meter."""
        if self.pass_no:
            self.close()
            self._start()
        self.pass_no += 1
        if self.bar is not None:
            self.bar.set_description(self.label, refresh=False)
        return self

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
            print(f"{self.label}: {self.status()}", file=self.file, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            print(
                f"{self.label}: {self.status()} in {time.perf_counter() - self.start:.0f} s", file=self.file, flush=True
            )
