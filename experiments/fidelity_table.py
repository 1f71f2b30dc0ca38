"""Prints issue 25's before/after table from the runs of experiments/fidelity.sh: each sample task's validation
metrics per column, the median over seeds [min, max].

    python experiments/fidelity_table.py outputs/fidelity
"""

import json
import statistics
import sys
from pathlib import Path

COLUMNS = {
    "before": "before (9263b2c)",
    "after": "after",
    "ckpt_dropout": "after, the checkpoint's dropout (none)",
    "occurrence": "after, `model.embd_dropout=occurrence`",
    "schedule_linear": "after, `optim.schedule=linear`",
    "selection_last": "after, `model_selection=last`",
}
TASKS = ["sentiment", "entailment", "nli", "similarity", "paraphrase", "multiple_choice", "story"]


def cell(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.3f}" if values else ""
    return f"{statistics.median(values):.3f} [{min(values):.3f}, {max(values):.3f}]"


def main(out: Path) -> None:
    runs = {}  # (column, task) -> every seed's metrics.json
    for path in sorted(out.glob("seed*/*/*/pretrained/metrics.json")):
        column, task = path.parts[-4], path.parts[-3]
        runs.setdefault((column, task), []).append(json.loads(path.read_text()))
    seeds = sorted({p.name for p in out.glob("seed*")})
    print(
        f"Validation metrics, median [min, max] over {len(seeds)} seeds ({', '.join(seeds)}); baseline: the constant"
        " prediction's.\n"
    )
    print("| task | metric | baseline | " + " | ".join(COLUMNS.values()) + " |")
    print("|---" * (3 + len(COLUMNS)) + "|")
    for task in TASKS:
        first = next((m[0] for (c, t), m in runs.items() if t == task), None)
        if first is None:
            continue
        for metric in (k.split("/", 1)[1] for k in first if k.startswith("val/") and k != "val/loss"):
            cells = [cell([m[f"val/{metric}"] for m in runs.get((column, task), [])]) for column in COLUMNS]
            print(f"| {task} | {metric} | {first[f'baseline/{metric}']:.3f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "outputs/fidelity"))
