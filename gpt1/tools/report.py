"""``gpt1 report``: tables and plots of sweeps, from every job's overrides and ``metrics.json``.

    gpt1 report outputs/finetune/sentiment/multirun/2025-01-01_12-00-00
    gpt1 report SWEEP_A SWEEP_B --out results/         # several sweeps (or single run directories) in one report

A job is a directory with ``.hydra/overrides.yaml`` (each job of a Hydra multirun, or a single run). The swept
parameters are the overrides whose values differ between jobs; jobs that share all of them but ``seed`` form one row,
with the median, the min-max spread and the count (n) over seeds of every metric, beside the paper's own number where
the task is one of the paper's. What ran the jobs (their provenance.json: gpt1's commit, the packages, the machine,
processes, precision, kernels) is a column where it differs between jobs, a line where it does not. A job without
``metrics.json`` is listed as failed. Written into the first directory
(``--out`` elsewhere): ``report.md``, ``report.csv`` and PNG plots: the layers-transferred curve when ``n_transfer``
was swept, the zero-shot curve (score per pre-training step) for ``gpt1 zeroshot`` jobs, ablation plots otherwise
(every run a point).
"""

from __future__ import annotations

import csv
import json
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from gpt1.app.config_files import yaml_problem
from gpt1.app.runner import FlagParser, user_errors
from gpt1.app.sweep import NOT_OF_THE_JOB
from gpt1.core.errors import DataError, UserError
from gpt1.core.provenance import attempts

PAPER: dict[str, dict[str, float]] = {
    # Radford et al. 2018, Tables 2 and 3 (scores x 100; mostly test sets): task -> metric key suffix -> score.
    # "/accuracy" matches val/accuracy and test/accuracy, "_mismatched/accuracy" val_mismatched/accuracy.
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
"""The paper's fine-tuned scores of its twelve tasks (RACE also by level), as ../shared/reference/gpt1-facts.md
gives them."""
SEED = "seed"
STEP = "step"
"""The extra grouping column of zero-shot rows: the pre-training step of the scored checkpoint."""
BASELINE = {"color": "grey", "linestyle": ":", "label": "baseline (majority / mean)"}
PAPER_STYLE = {"color": "C3", "linestyle": "--", "label": "paper"}
"""How the plots draw a row's baseline and the paper's score."""


@dataclass
class Job:
    """One run directory: its overrides, its saved config (plain YAML, unresolved), its metrics (None: failed) and
    what ran it (``provenance``)."""

    path: Path
    overrides: dict[str, str]
    config: dict[str, Any]
    metrics: Optional[dict[str, Any]]
    ran: dict[str, str] = field(default_factory=dict)
    """What ran the job (``provenance``): column -> value."""

    def value(self, key: str) -> str:
        """The job's value of a parameter: its override, else its config's value, else ""."""
        if key in self.overrides:
            return self.overrides[key]
        node: Any = self.config
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return ""
            node = node[part]
        if isinstance(node, dict):  # a config group's node: the option chosen is not recorded in the config
            return ""
        return node if isinstance(node, str) else json.dumps(node)


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


def find_jobs(dirs: Sequence[Path]) -> list[Job]:
    """Every job under ``dirs`` (a directory is a job itself, or holds jobs at any depth); UserError if a
    directory does not exist or holds none."""
    jobs = []
    for root in dirs:
        if not root.is_dir():
            raise UserError(f"{root}: no such directory (give sweep directories or run directories)")
        found = sorted(p.parent.parent for p in root.rglob(".hydra/overrides.yaml"))
        if not found:
            raise UserError(
                f"{root}: no jobs found (no .hydra/overrides.yaml below it): give a sweep directory "
                "(outputs/<run>/multirun/<time>) or a run directory"
            )
        jobs.extend(read_job(path) for path in found)
    return jobs


def read_job(path: Path) -> Job:
    """The job in ``path``; DataError naming the file if one is unreadable."""

    def load(name: str, reader: Any, shape: type) -> Any:
        file = path / name
        try:
            value = reader(file.read_text()) if file.is_file() else None
        except yaml.MarkedYAMLError as e:
            raise DataError(f"{yaml_problem(file, e)}; or move {name} aside to list the job as failed") from e
        except (ValueError, yaml.YAMLError) as e:
            what = "JSON" if name.endswith("json") else "YAML"
            raise DataError(
                f"{file}: not valid {what} ({e}): restore it, or move it aside to list the job as failed"
            ) from e
        if value is not None and not isinstance(value, shape):
            raise DataError(
                f"{file} holds {type(value).__name__}, not {shape.__name__} as gpt1 writes it: restore "
                "it, or move it aside to list the job as failed"
            )
        return value

    overrides = {}
    for item in load(".hydra/overrides.yaml", yaml.safe_load, list) or []:
        key, _, value = str(item).partition("=")
        if key.lstrip("+~") not in NOT_OF_THE_JOB:  # how a job was run (resume=auto), not which job: no parameter
            overrides[key.lstrip("+~")] = value
    metrics = load("metrics.json", json.loads, dict)
    return Job(path, overrides, load(".hydra/config.yaml", yaml.safe_load, dict) or {}, metrics, provenance(path))


def provenance(path: Path) -> dict[str, str]:
    """What ran the job in ``path``, from its provenance.json (``gpt1.core.provenance``), as report columns: gpt1
    (version, commit, uncommitted changes), the packages' versions, Python, the host, CPU, GPUs, processes, precision
    and CPU matmul kernels. Where its attempts (a first start, each resume) differ, their values in order, joined by
    " -> "; none for a job without a record."""
    columns: dict[str, list[str]] = {}
    for attempt in attempts(path):
        for key, value in _attempt_columns(attempt).items():
            if value not in columns.setdefault(key, []):
                columns[key].append(value)
    return {key: " -> ".join(values) for key, values in columns.items()}


def _attempt_columns(attempt: dict[str, Any]) -> dict[str, str]:
    code, machine, run = ({} if not isinstance(v, dict) else v for v in map(attempt.get, ("gpt1", "machine", "run")))
    if code.get("commit"):
        built = f"{code.get('version')} {code['commit'][:10]}" + (" +uncommitted changes" if code.get("dirty") else "")
    else:
        built = f"{code.get('version')} (installed, no git checkout)"
    columns = {"gpt1": built, **(attempt.get("packages") or {})}
    columns |= {"python": machine.get("python"), "host": machine.get("host"), "cpu": machine.get("cpu")}
    columns["gpu"] = f"{machine.get('gpus')} x {machine['gpu']}" if machine.get("gpu") else "none"
    if run:
        columns["processes"] = f"{run.get('processes')} ({run.get('nodes')} node{'s' if run.get('nodes') != 1 else ''})"
        columns["precision"] = str(run.get("precision"))
        by_kernel: dict[str, list[str]] = defaultdict(list)
        for kind, kernel in sorted(((run.get("kernels") or {}).get("cpu_matmuls") or {}).items()):
            by_kernel[kernel].append(kind)
        columns["cpu matmuls"] = "; ".join(f"{k}: {', '.join(kinds)}" for k, kinds in sorted(by_kernel.items()))
    return {key: str(value) for key, value in columns.items() if value is not None}


def ran_with(jobs: Sequence[Job]) -> tuple[list[str], dict[str, str]]:
    """The provenance columns whose values differ between ``jobs`` (a job without a value counts as ""), and those
    that are the same for all of them, with their value."""
    keys = list(dict.fromkeys(k for job in jobs for k in job.ran))
    values = {k: {job.ran.get(k, "") for job in jobs} for k in keys}
    return [k for k in keys if len(values[k]) > 1], {k: v.pop() for k, v in values.items() if len(v) == 1}


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
            main = next((f"zeroshot/{k}" for k in scores), None)
            records.append(
                Record(
                    job,
                    {**params, STEP: str(step)},
                    {**metrics, **{f"zeroshot/{k}": v for k, v in scores.items()}},
                    main,
                    task,
                    True,
                )
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
    ordered = sorted(rows.values(), key=lambda row: [_sort_key(row.params.get(k, "")) for k in swept])
    return swept, fixed, ordered


def _sort_key(value: str) -> tuple[int, float, str]:
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


def _fmt(x: Optional[float]) -> str:
    return "" if x is None else f"{x:.4g}"


def _short(value: str, digits: int = 4) -> str:
    """A parameter's value as the table and the plots show it: a float at ``digits`` significant digits (an Optuna
    trial's optim.lr=1.9182157424526116e-05 -> 1.918e-05), anything else (integers, names, paths) as it is."""
    if re.fullmatch(r"\s*[-+]?\d+\s*", value):
        return value
    try:
        return f"{float(value):.{digits}g}"
    except ValueError:
        return value


def write_csv(
    path: Path, swept: Sequence[str], metrics: Sequence[str], rows: Sequence[Row], differ: Sequence[str] = ()
) -> None:
    """One line per row: the settings, what ran them where that ``differ``s between jobs (``ran_with``), n (jobs with
    metrics), failed, then median, min, max (and the paper's score, where there is one) of each metric."""
    papers = [m for m in metrics if any(row.paper(m) is not None for row in rows)]
    header = [*swept, *differ, "n", "failed"]
    for m in metrics:
        header += [f"{m} median", f"{m} min", f"{m} max"] + ([f"{m} paper"] if m in papers else [])
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(header)
        for row in rows:
            line: list[Any] = [*(row.params.get(k, "") for k in swept), *map(row.ran, differ)]
            line += [len(row.done), row.failed]
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
    """The report: what was read and what ran it, the table (median [min, max] over n seeds per metric, and what ran
    each row where that differs between jobs), the plots, failed jobs."""
    differ, same = ran_with(jobs)
    papers = [m for m in metrics if any(row.paper(m) is not None for row in rows)]
    failed = [job for job in jobs if job.metrics is None]
    lines = [
        "# Sweep report",
        "",
        f"{len(jobs)} jobs ({len(failed)} failed) from " + ", ".join(f"`{d}`" for d in dirs) + ".",
    ]
    if fixed:
        lines += ["", "Fixed: " + ", ".join(f"`{k}={_short(v)}`" for k, v in fixed.items()) + "."]
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
    ]
    header = [*swept, *differ, "n", "failed"]
    for m in metrics:
        header += [m] + ([f"{m} (paper)"] if m in papers else [])
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [*(_short(row.params.get(k, "")) for k in swept), *map(row.ran, differ), str(len(row.done))]
        cells.append(str(row.failed))
        for m in metrics:
            median, low, high = summary(row.values(m))
            cells.append(
                "" if median is None else _fmt(median) if low == high else f"{_fmt(median)} [{_fmt(low)}, {_fmt(high)}]"
            )
            if m in papers:
                cells.append(_fmt(row.paper(m)))
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    if plots:
        lines += ["", *(f"![{p.stem}]({p.name})" for p in plots)]
    if failed:
        lines += ["", "## Failed jobs (no metrics.json)", ""]
        lines += [f"- `{job.path}`: " + ", ".join(f"{k}={v}" for k, v in job.overrides.items()) for job in failed]
    return "\n".join(lines) + "\n"


def _label(params: dict[str, str], keys: Sequence[str], width: int = 32) -> str:
    """``k=v, ...``, floats at 4 significant digits, each long value (a path) cut to its last ``width`` characters."""
    cut = {k: _short(params.get(k, "")) for k in keys}
    return ", ".join(f"{k}={v if len(v) <= width else '...' + v[-width:]}" for k, v in cut.items()) or "run"


def _baseline(row: Row, main: str) -> Optional[float]:
    """The row's baseline (majority class / mean) of its main metric, as its jobs recorded it."""
    values = row.values("baseline/" + main.split("/", 1)[1])
    return values[0] if values else None


def _points(ax: Any, rows: Sequence[Row], main: str, keys: Sequence[str]) -> None:
    """Every run's value as a point (a setting's seeds side by side), a setting's median as a short line and its
    min-max spread as a whisker; its baseline and the paper's score as short lines across it. The y axis spans the
    data (every run, baseline and paper score), so that a difference of a point shows; there are no bars, since a bar
    rising from such a floor shows a ratio that is not there (0.5907 against 0.5852 as a factor of two)."""
    labels = [_label(row.params, keys) for row in rows]
    shown = [v for row in rows for v in (*row.values(main), _baseline(row, main), row.paper(main)) if v is not None]
    low, high = min(shown), max(shown)
    pad = 0.15 * (high - low) or 0.05 * abs(high) or 0.05
    ax.set_ylim(low - pad, high + pad)
    for i, row in enumerate(rows):
        values = row.values(main)
        median, low, high = summary(values)
        spread = 0.3 * (len(values) > 1)
        xs = [i - spread / 2 + spread * k / max(len(values) - 1, 1) for k in range(len(values))]  # side by side
        ax.scatter(xs, values, color="C0", s=28, zorder=3, label="a run")
        if len(values) > 1:
            ax.hlines(median, i - 0.3, i + 0.3, color="k", linewidth=2, zorder=4, label="median")
            ax.errorbar(i, median, yerr=[[median - low], [high - median]], color="k", capsize=4, zorder=2)
        for value, style in ((_baseline(row, main), BASELINE), (row.paper(main), PAPER_STYLE)):
            if value is not None:
                ax.hlines(value, i - 0.4, i + 0.4, **style)
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.grid(axis="y", alpha=0.3)
    long = len(rows) > 3 or max(map(len, labels)) > 20
    ax.set_xticks(range(len(rows)), labels, rotation=25 if long else 0, ha="right" if long else "center", fontsize=8)


def _curves(ax: Any, rows: Sequence[Row], main: str, x_key: str, keys: Sequence[str]) -> None:
    """One line per setting of ``keys``: the median against ``x_key`` (numeric), the min-max spread as a band;
    its baseline and the paper's score as horizontal lines of its colour."""
    lines: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if _sort_key(row.params.get(x_key, ""))[0] == 0:
            lines[_label(row.params, keys)].append(row)
    for i, (label, members) in enumerate(lines.items()):
        xs = [float(row.params[x_key]) for row in members]
        stats = [summary(row.values(main)) for row in members]
        ax.plot(xs, [s[0] for s in stats], marker="o", color=f"C{i}", label=label if keys else None)
        ax.fill_between(xs, [s[1] for s in stats], [s[2] for s in stats], color=f"C{i}", alpha=0.2)
        for value, style in ((_baseline(members[0], main), BASELINE), (members[0].paper(main), PAPER_STYLE)):
            if value is not None:  # in the line's colour, its own legend entry (a task's baseline is its own)
                named = f"{label}: {style['label']}" if keys else style["label"]
                ax.axhline(value, **{**style, "color": f"C{i}", "label": named})


def plot(out: Path, swept: Sequence[str], rows: Sequence[Row]) -> list[Path]:
    """The PNG plots of the rows' main metrics, one per metric: zero-shot curves (score per pre-training step),
    layers-transferred curves (when ``n_transfer`` was swept) or ablation plots (every run a point)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    from matplotlib import pyplot as plt

    paths = []
    for main in dict.fromkeys(r.main for row in rows for r in row.done if r.main):
        fig, kind = figure(plt, swept, [row for row in rows if any(r.main == main for r in row.done)], main)
        path = out / f"{kind}-{re.sub(r'[^A-Za-z0-9]+', '_', main).strip('_')}.png"
        fig.savefig(path, dpi=120, bbox_inches="tight")  # grows the canvas to fit long labels and the legend
        plt.close(fig)
        paths.append(path)
    return paths


def figure(plt: Any, swept: Sequence[str], rows: Sequence[Row], main: str) -> tuple[Any, str]:
    """The figure of one main metric over ``rows`` (those that have it), and its kind: zero_shot,
    layers_transferred or ablation."""
    from matplotlib.ticker import MaxNLocator

    keys = [k for k in swept if len({row.params.get(k) for row in rows}) > 1]  # what differs in this plot
    x_key = STEP if STEP in keys else "n_transfer" if "n_transfer" in keys else None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if x_key is None:
        kind = "ablation"
        _points(ax, rows, main, keys)
    else:
        kind = {STEP: "zero_shot", "n_transfer": "layers_transferred"}[x_key]
        _curves(ax, rows, main, x_key, [k for k in keys if k != x_key])
        ax.set_xlabel({STEP: "pre-training step (checkpoint)", "n_transfer": "layers transferred"}[x_key])
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps and layers are whole numbers
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        unique = dict(zip(labels, handles))  # one entry for the baseline and paper lines of every setting
        ax.legend(unique.values(), unique.keys(), fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_ylabel(main)
    ax.set_title(_title(main, rows, kind), fontsize=10)
    return fig, kind


def _title(main: str, rows: Sequence[Row], kind: str) -> str:
    """What the plot aggregates: the median and spread over seeds only where a setting has several."""
    counts = sorted({len(row.values(main)) for row in rows})
    what = {
        "zero_shot": "per pre-training checkpoint",
        "layers_transferred": "by layers transferred",
        "ablation": "per setting",
    }[kind]
    if counts[-1] <= 1:
        return (
            f"{main} {what}: one run each (no seeds to aggregate):\nno spread to judge a difference by; "
            "sweep seed=1,2,3 for one"
        )
    n = str(counts[-1]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    if kind == "ablation":
        return f"{main} {what}: every run (point), median over {n} seeds (line), min-max (whisker)"
    return f"{main} {what}: median over {n} seeds (line), min-max (band)"


def report(dirs: Sequence[Path], out: Optional[Path] = None) -> dict[str, Any]:
    """Read the jobs under ``dirs``, write report.md, report.csv and the plots into ``out`` (default: the first
    directory); return {"jobs", "failed", "swept", "ran_with", "rows", "markdown", "csv", "plots"} (ran_with: the
    provenance columns that differ between jobs)."""
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
    print(
        f"{result['jobs']} jobs ({len(result['failed'])} failed), {len(result['rows'])} rows; swept: "
        f"{', '.join(result['swept']) or 'nothing'}"
    )
    for path in (result["markdown"], result["csv"], *result["plots"]):
        print(path)
    return result


if __name__ == "__main__":
    main()
