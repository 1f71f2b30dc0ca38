"""``gpt1 report``'s tables: report.csv (a line per row, every figure in full) and report.md."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from gpt1.tools.report_jobs import Job, ran_with
from gpt1.tools.report_rows import Row, short, summary, what_was_swept


def _fmt(x: Optional[float]) -> str:
    return "" if x is None else f"{x:.4g}"


def _several_attempts(rows: Sequence[Row]) -> bool:
    """Whether a job of the rows took more than one attempt (a stop and a resume): the tables then count them."""
    return any(len(r.job.attempts) > 1 for row in rows for r in row.records)


def write_csv(
    path: Path, swept: Sequence[str], metrics: Sequence[str], rows: Sequence[Row], differ: Sequence[str] = ()
) -> None:
    """One line per row: the settings, what ran them where that ``differ``s between jobs, n (jobs with metrics),
    failed, the attempts of each job where one took several, then median, min, max (and the paper's) of each metric."""
    papers = [m for m in metrics if any(row.paper(m) is not None for row in rows)]
    several = _several_attempts(rows)
    header = [*swept, *differ, "n", "failed", *(["attempts"] if several else [])]
    for m in metrics:
        header += [f"{m} median", f"{m} min", f"{m} max"] + ([f"{m} paper"] if m in papers else [])
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(header)
        for row in rows:
            line: list[Any] = [*(row.params.get(k, "") for k in swept), *map(row.ran, differ)]
            line += [len(row.done), row.failed, *([row.attempts()] if several else [])]
            for m in metrics:  # full precision: the CSV is for further analysis
                line += [*summary(row.values(m)), *([row.paper(m)] if m in papers else [])]
            out.writerow(["" if x is None else x for x in line])


def markdown(
    dirs: Sequence[Path],
    jobs: Sequence[Job],
    swept: Sequence[str],
    fixed: dict[str, str],
    metrics: Sequence[str],
    rows: Sequence[Row],
    plots: Sequence[Path],
) -> str:
    """The report: what was read, swept and ran it, the table (median [min, max] over n seeds per metric), the plots,
    the failed jobs and the jobs of several attempts."""
    differ, same = ran_with(jobs)
    papers = [m for m in metrics if any(row.paper(m) is not None for row in rows)]
    failed = [job for job in jobs if job.metrics is None]
    lines = [
        "# Sweep report",
        "",
        f"{len(jobs)} jobs ({len(failed)} failed) from " + ", ".join(f"`{d}`" for d in dirs) + ".",
        "",
        f"Swept: {what_was_swept(swept, jobs)}.",
    ]
    if fixed:
        lines += ["", "Fixed: " + ", ".join(f"`{k}={short(v)}`" for k, v in fixed.items()) + "."]
    if same:
        lines += ["", "Ran with (every job): " + "; ".join(f"{k} {v}" for k, v in same.items() if v) + "."]
    lines += [
        "",
        "Each cell: the median over seeds [min, max] (4 significant digits; report.csv: in full); n: jobs "
        "with metrics."
        + (
            " paper: Radford et al. 2018 (Tables 2-3, mostly test-set scores), on the same 0-1 scale." if papers else ""
        ),
        "",
        *_table(swept, differ, metrics, papers, rows),
    ]
    if plots:
        lines += ["", *(f"![{p.stem}]({p.name})" for p in plots)]
    if failed:
        lines += ["", "## Failed jobs (no metrics.json)", ""]
        lines += [f"- `{job.path}`: " + ", ".join(f"{k}={v}" for k, v in job.overrides.items()) for job in failed]
    retried = [job for job in jobs if len(job.attempts) > 1]
    if retried:
        lines += ["", "## Jobs of several attempts (their provenance.json)", ""]
        lines += [f"- `{job.path}`: {attempts_words(job.attempts)}" for job in retried]
    return "\n".join(lines) + "\n"


def attempts_words(outcomes: Sequence[str]) -> str:
    """A job's attempts (``Job.attempts``): "2 attempts: stopped (exit status 143), then finished"."""
    return f"{len(outcomes)} attempts: " + ", then ".join(outcomes)


def _table(
    swept: Sequence[str], differ: Sequence[str], metrics: Sequence[str], papers: Sequence[str], rows: Sequence[Row]
) -> list[str]:
    """The markdown table's lines: a row per setting."""
    several = _several_attempts(rows)
    header = [*swept, *differ, "n", "failed", *(["attempts"] if several else [])]
    for m in metrics:
        header += [m] + ([f"{m} (paper)"] if m in papers else [])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [*(short(row.params.get(k, "")) for k in swept), *map(row.ran, differ), str(len(row.done))]
        cells += [str(row.failed), *([row.attempts()] if several else [])]
        for m in metrics:
            median, low, high = summary(row.values(m))
            cells.append(
                "" if median is None else _fmt(median) if low == high else f"{_fmt(median)} [{_fmt(low)}, {_fmt(high)}]"
            )
            if m in papers:
                cells.append(_fmt(row.paper(m)))
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return lines
