"""Two metrics.json files compared figure by figure, to the last digit: ``gpt1 <command> rerun=DIR`` (a rerun against
the run it repeats) and experiments/compare_metrics.py (a behaviour check's runs before and after a change).

Times and peak memory (keys with "time", "per_sec" or "memory") move between any two runs, so they are listed apart;
a path is compared with its own run directory's prefix taken off (``<dir>``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

TIMED = ("time", "per_sec", "memory")
"""Words of the keys whose figures differ between any two runs: compared apart."""


@dataclass
class Comparison:
    """What moved between two metrics.json files."""

    figures: int
    """The figures compared (the earlier file's, times and memory apart)."""
    moved: list[tuple[str, Any, Any]]
    """(key, before, after) of each figure that differs ("(absent)" where a file lacks it), in key order."""
    timed: list[str]
    """The keys of times and memory, not compared."""

    def lines(self, name: str = "metrics.json") -> list[str]:
        """One line per figure that moved, then the count: what compare_metrics.py prints per file."""
        moved = [f"{name}: {k}: {a!r} -> {b!r}" for k, a, b in self.moved]
        apart = ", ".join(self.timed)
        return [*moved, f"{name}: {self.figures} figures, {len(self.moved)} differ; times and memory apart: {apart}"]


def flat(value: Any, roots: Sequence[str], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every figure of a metrics.json's ``value`` as (dotted key, value): lists by index; in strings, each of
    ``roots`` (the run directory, as given and resolved) becomes ``<dir>``."""
    if isinstance(value, (dict, list)):
        for k, v in value.items() if isinstance(value, dict) else enumerate(value):
            yield from flat(v, roots, f"{prefix}{k}.")
    elif isinstance(value, str):
        for root in sorted(roots, key=len, reverse=True):  # the longest first: a resolved path holds the given one
            value = value.replace(root, "<dir>")
        yield prefix[:-1], value
    else:
        yield prefix[:-1], value


def compare(before: Any, after: Any, before_roots: Sequence[str] = (), after_roots: Sequence[str] = ()) -> Comparison:
    """Compare two metrics.json contents (``*_roots``: each one's run directory, as given and resolved)."""
    a, b = dict(flat(before, before_roots)), dict(flat(after, after_roots))
    timed = sorted(k for k in a.keys() | b.keys() if any(w in k for w in TIMED))
    absent = "(absent)"
    moved = [(k, a.get(k, absent), b.get(k, absent)) for k in sorted(a.keys() | b.keys()) if k not in timed]
    return Comparison(len(a) - len([k for k in timed if k in a]), [m for m in moved if m[1] != m[2]], timed)
