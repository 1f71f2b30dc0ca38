"""``gpt1 report``'s plots, one PNG per main metric, named for what it shows (``kind``)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from gpt1.tools.report_rows import SEED, STEP, Row, short, sort_key, summary

BASELINE = {"color": "grey", "linestyle": ":", "label": "baseline (majority / mean)"}
PAPER_STYLE = {"color": "C3", "linestyle": "--", "label": "paper"}
"""How the plots draw a row's baseline and the paper's score."""


def _label(params: dict[str, str], keys: Sequence[str], width: int = 32) -> str:
    """``k=v, ...``, floats at 4 significant digits, each long value (a path) cut to its last ``width`` characters."""
    cut = {k: short(params.get(k, "")) for k in keys}
    return ", ".join(f"{k}={v if len(v) <= width else '...' + v[-width:]}" for k, v in cut.items()) or "the one setting"


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
        if sort_key(row.params.get(x_key, ""))[0] == 0:
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
    """The PNG plots of the rows' main metrics, one per metric, named ``<kind>-<metric>.png`` for what it shows
    (``kind``); none for a metric of a single run."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    from matplotlib import pyplot as plt

    paths = []
    for main in dict.fromkeys(r.main for row in rows for r in row.done if r.main):
        shown = [row for row in rows if any(r.main == main for r in row.done)]
        if kind(swept, shown, main) is None:
            continue
        fig, what = figure(plt, swept, shown, main)
        path = out / f"{what}-{re.sub(r'[^A-Za-z0-9]+', '_', main).strip('_')}.png"
        fig.savefig(path, dpi=120, bbox_inches="tight")  # grows the canvas to fit long labels and the legend
        plt.close(fig)
        paths.append(path)
    return paths


def _differing(swept: Sequence[str], rows: Sequence[Row]) -> list[str]:
    return [k for k in swept if len({row.params.get(k) for row in rows}) > 1]  # what differs in a plot


def kind(swept: Sequence[str], rows: Sequence[Row], main: str) -> Optional[str]:
    """What the plot of ``main`` over ``rows`` shows: "zero_shot" (a curve over pre-training checkpoints),
    "layers_transferred" (a curve over ``n_transfer``), "ablation" (the settings of other swept parameters, every run
    a point), "seeds" (the one setting of a seeds-only sweep, a point per seed), "runs" (one setting run several times
    with the same seed); None for a single run, which a plot would not compare with anything."""
    keys = _differing(swept, rows)
    if STEP in keys or "n_transfer" in keys:
        return "zero_shot" if STEP in keys else "layers_transferred"
    if keys:
        return "ablation"
    if sum(len(row.values(main)) for row in rows) < 2:
        return None
    return "seeds" if len({r.job.value(SEED) for row in rows for r in row.done}) > 1 else "runs"


def figure(plt: Any, swept: Sequence[str], rows: Sequence[Row], main: str) -> tuple[Any, str]:
    """The figure of one main metric over ``rows`` (those that have it), and its ``kind`` (not None)."""
    from matplotlib.ticker import MaxNLocator

    keys, what = _differing(swept, rows), kind(swept, rows, main)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    x_key = {"zero_shot": STEP, "layers_transferred": "n_transfer"}.get(what)
    if x_key is None:
        _points(ax, rows, main, keys)
    else:
        _curves(ax, rows, main, x_key, [k for k in keys if k != x_key])
        ax.set_xlabel({STEP: "pre-training step (checkpoint)", "n_transfer": "layers transferred"}[x_key])
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps and layers are whole numbers
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        unique = dict(zip(labels, handles))  # one entry for the baseline and paper lines of every setting
        ax.legend(unique.values(), unique.keys(), fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_ylabel(main)
    ax.set_title(_title(main, rows, what), fontsize=10)
    return fig, what


def _title(main: str, rows: Sequence[Row], kind: str) -> str:
    """What the plot aggregates: the median and spread over seeds only where a setting has several."""
    counts = sorted({len(row.values(main)) for row in rows})
    n = str(counts[-1]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    if kind in ("seeds", "runs"):
        over = f"{n} seeds" if kind == "seeds" else f"{n} runs of the same seed"
        return f"{main} of one setting over {over}: every run (point), median (line), min-max (whisker)"
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
    if kind == "ablation":
        return f"{main} {what}: every run (point), median over {n} seeds (line), min-max (whisker)"
    return f"{main} {what}: median over {n} seeds (line), min-max (band)"
