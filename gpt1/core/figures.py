"""A run's metrics.json: written (``write_metrics``), and two compared figure by figure, to the last digit (``gpt1
<command> rerun=DIR``, experiments/compare_metrics.py); times and memory apart, each path less its run directory."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpt1.core.files import atomic_file
from gpt1.core.memory import peak_memory


def write_metrics(output_dir: Path, metrics: dict[str, Any]) -> Path:
    """Write ``metrics.json`` (atomically) in the run directory and return its path; the process's peak memory so far
    is added to ``metrics`` (``gpt1.core.memory.peak_memory``: peak_host_memory_gb, ...)."""
    metrics.update(peak_memory())
    path = output_dir / "metrics.json"
    with atomic_file(path, "w") as f:
        json.dump(metrics, f, indent=2, sort_keys=True)
    return path


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


def say_rerun(original: Path, rerun: Path) -> list[str]:
    """Say whether the metrics.json of ``rerun``, a rerun of the run in ``original``, came out equal to the
    original's to the last digit, and if not, which figures moved ; their keys."""
    before, after = (json.loads((d / "metrics.json").read_text()) for d in (original, rerun))
    found = compare(before, after, _roots(original, before), _roots(rerun, after))
    if not found.moved:
        print(
            f"rerun of {original}: metrics.json came out equal to the last digit ({found.figures} figures; "
            "times and memory apart)"
        )
    else:
        print(f"rerun of {original}: {len(found.moved)} of the {found.figures} figures of metrics.json moved:")
        for key, was, now in found.moved:
            print(f"  {key}: {was!r} -> {now!r}")
    return [key for key, _, _ in found.moved]


def _roots(run_dir: Path, metrics: dict[str, Any]) -> list[str]:
    """The ways a run's metrics.json may spell its run directory: as given, absolute, resolved, and as its last
    checkpoint's path does."""
    roots = {str(run_dir), str(run_dir.absolute()), str(run_dir.resolve())}
    if isinstance(metrics.get("last_checkpoint"), str):
        roots.add(str(Path(metrics["last_checkpoint"]).parent.parent))
    return sorted(roots)
