"""``gpt1 report``: tables and plots of sweeps, from every job's overrides and ``metrics.json``.

    gpt1 report outputs/finetune/sentiment/multirun/2025-01-01_12-00-00
    gpt1 report SWEEP_A SWEEP_B --out results/         # several sweeps (or single run directories) in one report

A job is a directory with ``.hydra/overrides.yaml`` (``report_jobs``); jobs that share every swept parameter but
``seed`` form one row (``report_rows``), written to report.md and report.csv (``report_tables``) and PNG plots
(``report_plots``) in the first directory (``--out`` elsewhere). What it shows: docs/experiments.md.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from gpt1.app.runner import FlagParser, user_errors
from gpt1.core.memory import memory_line, peak_memory
from gpt1.tools.report_jobs import find_jobs, ran_with
from gpt1.tools.report_plots import plot
from gpt1.tools.report_rows import group, metric_columns, what_was_swept
from gpt1.tools.report_tables import attempts_words, markdown, write_csv


def report(dirs: Sequence[Path], out: Optional[Path] = None) -> dict[str, Any]:
    """Read the jobs under ``dirs``, write report.md, report.csv and the plots into ``out`` (default: the first
    directory); return {"jobs", "failed", "swept", "sweep", "attempts", "ran_with", "rows", "markdown", "csv",
    "plots"} (sweep: what was swept, in words; attempts: job -> each attempt's outcome, for the jobs of several;
    ran_with: the provenance columns that differ between jobs)."""
    jobs = find_jobs(dirs)
    out = out or dirs[0]
    out.mkdir(parents=True, exist_ok=True)
    swept, fixed, rows = group(jobs)
    metrics = metric_columns(rows)
    plots = plot(out, swept, rows)
    write_csv(out / "report.csv", swept, metrics, rows, ran_with(jobs)[0])
    (out / "report.md").write_text(markdown(dirs, jobs, swept, fixed, metrics, rows, plots))
    return {
        "jobs": len(jobs),
        "failed": [str(j.path) for j in jobs if j.metrics is None],
        "swept": swept,
        "sweep": what_was_swept(swept, jobs),
        "attempts": {str(j.path): j.attempts for j in jobs if len(j.attempts) > 1},
        "ran_with": ran_with(jobs)[0],
        "rows": rows,
        "markdown": out / "report.md",
        "csv": out / "report.csv",
        "plots": plots,
    }


@user_errors
def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    p = FlagParser(prog="gpt1 report", description=__doc__.split("\n")[0])
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="sweep directories or run directories")
    p.add_argument("--out", type=Path, default=None, help="where to write (default: the first DIR)")
    args = p.parse_args(argv)
    result = report(args.dirs, args.out)
    rows = len(result["rows"])
    print(
        f"{result['jobs']} jobs ({len(result['failed'])} failed), {rows} row{'s' if rows != 1 else ''}; swept: "
        f"{result['sweep']}"
    )
    for job, outcomes in result["attempts"].items():
        print(f"{job}: {attempts_words(outcomes)}")
    for path in (result["markdown"], result["csv"], *result["plots"]):
        print(path)
    print(memory_line(peak_memory()), file=sys.stderr, flush=True)  # every command's last line
    return result


if __name__ == "__main__":
    main()
