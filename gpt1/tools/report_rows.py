"""A sweep's jobs as ``gpt1 report``'s rows: one per setting (the swept parameters but the seed), a record per job
(per checkpoint of a zero-shot job), the median and spread of each metric over seeds, the paper's score beside."""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from gpt1.tools.report_jobs import Job

PAPER: dict[str, dict[str, float]] = {
    # task -> metric key suffix ("/accuracy": val/accuracy and test/accuracy) -> score x 100
    "mnli": {"/accuracy": 82.1, "_mismatched/accuracy": 81.4},
    "snli": {"/accuracy": 89.9},
    "scitail": {"/accuracy": 88.3},
    "qnli": {"/accuracy": 88.1},
    "rte": {"/accuracy": 56.0},
    "story_cloze": {"/accuracy": 86.5},
    "race": {"/accuracy": 59.0},
    "race_middle": {"/accuracy": 62.9},
    "race_high": {"/accuracy": 57.4},
    "cola": {"/mcc": 45.4},
    "sst2": {"/accuracy": 91.3},
    "mrpc": {"/f1": 82.3},
    "stsb": {"/pearson": 82.0},
    "qqp": {"/f1": 70.3},
}
"""The paper's fine-tuned scores (Tables 2 and 3, mostly test sets), as ../shared/reference/gpt1-facts.md gives them."""
SEED = "seed"
STEP = "step"
"""The extra grouping column of zero-shot rows: the pre-training step of the scored checkpoint."""


@dataclass
class Record:
    """One row's worth of one job: a fine-tuning or pre-training run, or one checkpoint of a zero-shot run."""

    job: Job
    params: dict[str, str]
    metrics: dict[str, float]
    main: Optional[str]
    """The metric the plots show (val/<the task's first metric>, zeroshot/<...>, val/ppl)."""
    task: Optional[str] = None
    zeroshot: bool = False


@dataclass
class Row:
    """The records of one setting (all swept parameters but the seed)."""

    params: dict[str, str]
    records: list[Record] = field(default_factory=list)

    @property
    def done(self) -> list[Record]:
        return [r for r in self.records if r.job.metrics is not None]

    @property
    def failed(self) -> int:
        return len(self.records) - len(self.done)

    def values(self, metric: str) -> list[float]:
        return [r.metrics[metric] for r in self.done if metric in r.metrics]

    def attempts(self) -> str:
        """The attempts of each of the row's jobs, in order: "1, 2, 1" (a seed's job stopped once and resumed)."""
        jobs = dict.fromkeys(r.job.path for r in self.records)  # (a zero-shot job: a record per checkpoint)
        counts = {r.job.path: len(r.job.attempts) for r in self.records}
        return ", ".join(str(counts[path]) for path in jobs)

    def ran(self, key: str) -> str:
        """What ran the row's jobs, for a provenance column: its value, or their values joined by " / "."""
        return " / ".join(sorted({r.job.ran.get(key, "") for r in self.records}))

    def task(self) -> Optional[str]:
        tasks = {r.task for r in self.done}
        return tasks.pop() if len(tasks) == 1 else None

    def paper(self, metric: str) -> Optional[float]:
        """The paper's score for ``metric`` (on our 0-1 scale) when this row's task is one of the paper's."""
        prefix, _, name = metric.partition("/")
        split = re.sub(r"^(val|test)", "", prefix)
        if prefix == split or any(r.zeroshot for r in self.records):  # baseline/, train/, zero-shot: no paper number
            return None
        score = PAPER.get(self.task() or "", {}).get(f"{split}/{name}")
        return None if score is None else score / 100


def _numbers(metrics: dict[str, Any], keep: Iterable[str]) -> dict[str, float]:
    return {
        k: float(metrics[k])
        for k in keep
        if isinstance(metrics.get(k), (int, float)) and not isinstance(metrics.get(k), bool)
    }


def records_of(job: Job, params: dict[str, str]) -> list[Record]:
    """The job's records: one per job, or one per checkpoint of a ``gpt1 zeroshot`` job."""
    m = job.metrics
    if m is None:
        return [Record(job, params, {}, None)]
    task = m.get("task")
    metrics = _numbers(m, (k for k in m if "/" in k))  # val/accuracy, test/f1, baseline/mcc, train/ppl, ...
    if isinstance(m.get("checkpoints"), list):
        records = []
        for c in m["checkpoints"]:
            scores = _numbers(c, (k for k in c if k not in ("path", "step", "truncated", "threshold")))
            step = c.get("step") if c.get("step") is not None else Path(str(c.get("path"))).stem
            scores = {f"zeroshot/{k}": v for k, v in scores.items()}
            records.append(
                Record(job, {**params, STEP: str(step)}, {**metrics, **scores}, next(iter(scores), None), task, True)
            )
        return records
    first = (job.config.get("task") or {}).get("metrics") or []
    if task is not None:  # fine-tuning: the task's first metric on the first validation split
        main = (
            f"val/{first[0]}"
            if first and f"val/{first[0]}" in metrics
            else next((k for k in metrics if k.startswith("val/") and k != "val/loss"), None)
        )
    else:  # pre-training
        main = "val/ppl" if "val/ppl" in metrics else None
    return [Record(job, params, metrics, main, task)]


def group(jobs: Sequence[Job]) -> tuple[list[str], dict[str, str], list[Row]]:
    """The swept parameters but the seed (those whose values differ between jobs), the fixed overrides, and the
    rows: one per setting, in order of the settings' values."""
    keys = list(dict.fromkeys(k for job in jobs for k in job.overrides))
    values = {k: [job.value(k) for job in jobs] for k in keys}
    swept = [k for k in keys if len(set(values[k])) > 1 and k != SEED]
    fixed = {k: v[0] for k, v in values.items() if len(set(v)) == 1 and k != SEED}
    rows: dict[tuple[tuple[str, str], ...], Row] = {}
    for job in jobs:
        for record in records_of(job, {k: job.value(k) for k in swept}):
            key = tuple(record.params.items())
            rows.setdefault(key, Row(record.params)).records.append(record)
    if any(STEP in row.params for row in rows.values()):
        swept.append(STEP)
    ordered = sorted(rows.values(), key=lambda row: [sort_key(row.params.get(k, "")) for k in swept])
    return swept, fixed, ordered


def sort_key(value: str) -> tuple[int, float, str]:
    """Numbers in numeric order, before other strings."""
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def metric_columns(rows: Sequence[Row]) -> list[str]:
    """Every metric of the rows: the plotted (main) ones first, then val, test, baseline and the rest."""
    metrics = {k for row in rows for r in row.done for k in r.metrics}
    mains = list(dict.fromkeys(r.main for row in rows for r in row.done if r.main))
    order = {"zeroshot": 0, "val": 1, "test": 2, "baseline": 3}
    rest = sorted(metrics - set(mains), key=lambda k: (order.get(k.split("/")[0].split("_")[0], 4), k))
    return [*mains, *rest]


def summary(values: Sequence[float]) -> tuple[Optional[float], Optional[float], Optional[float]]:
    """(median, min, max) of ``values``; Nones when there are none."""
    if not values:
        return None, None, None
    return statistics.median(values), min(values), max(values)


def short(value: str, digits: int = 4) -> str:
    """A parameter's value as the table and the plots show it: a float at ``digits`` significant digits (an Optuna
    trial's optim.lr=1.9182157424526116e-05 -> 1.918e-05), anything else (integers, names, paths) as it is."""
    if re.fullmatch(r"\s*[-+]?\d+\s*", value):
        return value
    try:
        return f"{float(value):.{digits}g}"
    except ValueError:
        return value


def what_was_swept(swept: Sequence[str], jobs: Sequence[Job]) -> str:
    """The sweep in words: "aux_lm_weight, each setting over seeds 1, 2, 3", "the seed only (seeds 1, 2, 3): one
    setting" (a seeds-only sweep), "nothing: one setting"."""
    seeds = sorted({job.value(SEED) for job in jobs}, key=sort_key)
    over = ", ".join(seeds) if len(seeds) > 1 else ""
    if swept:
        return ", ".join(swept) + (f", each setting over seeds {over}" if over else "")
    return f"the seed only (seeds {over}): one setting" if over else "nothing: one setting"
