"""Stop a pre-training run three ways at odd moments, resume it each time, and read every artifact afterwards: the
field check of exact resume (docs/resume.md), as a user meets it.

One uninterrupted run of the quickstart's model (``--steps`` updates, a checkpoint every ``--every``), then the same
command stopped by Ctrl-C (SIGINT), then by SIGTERM, then by SIGKILL between two checkpoints, each time resumed with
``resume=auto hydra.run.dir=DIR``, the last attempt to the end. Each stop comes when the run's CSV log shows a given
step, so it lands mid-epoch and mid-interval. Then it checks, and prints, for the interrupted run against the
uninterrupted one:

- the exit statuses (130 for Ctrl-C, 143 for SIGTERM, -9 for SIGKILL, 0 at the end) and each stop's last line;
- the final weights and Adam moments of ``last.ckpt``: bit for bit;
- ``csv/metrics.csv``: every step once, in order, every logged value equal;
- ``metrics.json``: every figure equal but times and memory;
- the run's log file: the lines of every attempt kept.

    python experiments/stop_resume_check.py --out /tmp/stop-resume   # about 3 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

APART = ("time", "memory", "_s", "per_s", "throughput", "run_dir", "checkpoint", "log")
"""metrics.json keys whose values may differ between two runs of the same config (times, memory, paths)."""


def command(run_dir: Path, steps: int, every: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gpt1",
        "pretrain",
        f"hydra.run.dir={run_dir}",
        f"trainer.max_steps={steps}",
        f"trainer.val_check_interval={steps}",
        "trainer.log_every_n_steps=1",
        f"callbacks.checkpoint.every_n_steps={every}",
        f"callbacks.samples.every_n_steps={steps}",
        *extra,
    ]


def logged_steps(run_dir: Path) -> int:
    """The last step in the run's CSV log so far (-1 before the first)."""
    path = run_dir / "csv" / "metrics.csv"
    try:
        with open(path) as f:
            steps = [int(row["step"]) for row in csv.DictReader(f) if row.get("step")]
    except (OSError, ValueError, KeyError):
        return -1
    return max(steps, default=-1)


def run(run_dir: Path, steps: int, every: int, stop: tuple[int, int] | None, log: Path, *extra: str) -> int:
    """Run the command; with ``stop`` = (step, signal), send the signal once the CSV log shows that step. Returns
    the exit status."""
    with open(log, "a") as out:
        proc = subprocess.Popen(command(run_dir, steps, every, *extra), stdout=out, stderr=subprocess.STDOUT)
        while stop is not None and proc.poll() is None:
            if logged_steps(run_dir) >= stop[0]:
                proc.send_signal(stop[1])
                break
            time.sleep(0.05)
        return proc.wait(timeout=900)


def rows(run_dir: Path) -> list[dict]:
    with open(run_dir / "csv" / "metrics.csv") as f:
        return list(csv.DictReader(f))


def figures(run_dir: Path) -> dict:
    data = json.loads((run_dir / "metrics.json").read_text())
    return {k: v for k, v in data.items() if not any(word in k for word in APART)}


def state(run_dir: Path) -> dict[str, torch.Tensor]:
    ckpt = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    tensors = {f"weights/{k}": v for k, v in ckpt["state_dict"].items()}
    for i, moments in ckpt["optimizer_states"][0]["state"].items():
        tensors.update({f"adam/{i}/{k}": v for k, v in moments.items() if isinstance(v, torch.Tensor)})
    return tensors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="a scratch directory")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--every", type=int, default=10, help="checkpoint every this many steps")
    parser.add_argument("--stops", type=int, nargs=3, default=[13, 27, 46], help="steps at which to stop")
    args, extra = parser.parse_known_args()
    args.out.mkdir(parents=True, exist_ok=True)
    whole, stopped = args.out / "uninterrupted", args.out / "stopped"
    log = args.out / "driver.log"
    status = {"uninterrupted": run(whole, args.steps, args.every, None, log, *extra)}
    for step, sig in zip(args.stops, (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)):
        resume = ("resume=auto",) if stopped.exists() else ()
        status[f"{sig.name} at step {step}"] = run(stopped, args.steps, args.every, (step, sig), log, *resume, *extra)
    status["resumed to the end"] = run(stopped, args.steps, args.every, None, log, "resume=auto", *extra)
    print(json.dumps(status))

    problems = []
    want = {"uninterrupted": 0, "resumed to the end": 0}
    want.update({k: v for k, v in zip(list(status)[1:4], (130, 143, -signal.SIGKILL))})
    problems += [f"{k}: exit status {status[k]}, not {v}" for k, v in want.items() if status[k] != v]

    a, b = state(whole), state(stopped)
    differ = [k for k in a if k not in b or not torch.equal(a[k], b[k])]
    print(f"last.ckpt: {len(a)} tensors (weights and Adam moments), {len(differ)} differ")
    problems += [f"last.ckpt: {k} differs" for k in differ[:5]]

    ra, rb = rows(whole), rows(stopped)
    steps_b = [r["step"] for r in rb]
    print(
        f"metrics.csv: {len(ra)} rows uninterrupted, {len(rb)} after three stops; steps in order once each: "
        f"{steps_b == sorted(set(steps_b), key=int) or 'no'}"
    )
    if ra != rb:
        first = next(i for i, (x, y) in enumerate(zip(ra + [{}], rb + [{}])) if x != y)
        problems.append(
            f"metrics.csv differs: first at row {first}: {ra[first : first + 1]} vs {rb[first : first + 1]}"
        )

    fa, fb = figures(whole), figures(stopped)
    differ = sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k))
    print(f"metrics.json: {len(fa)} figures, {len(differ)} differ {differ}")
    problems += [f"metrics.json: {k}: {fa.get(k)} vs {fb.get(k)}" for k in differ]

    logs = sorted(p.name for p in stopped.glob("*.log"))
    for name in logs:
        text = (stopped / name).read_text()
        print(f"{name}: {text.count('resumed from')} 'resumed from' lines, {len(text.splitlines())} lines")
    print("\n".join(["PROBLEMS:", *problems]) if problems else "all equal")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
