"""Stop a pre-training run three ways at odd moments, resume it each time, and read every artifact afterwards: the
field check of exact resume (docs/resume.md), as a user meets it.

One uninterrupted run of the quickstart's model (``--steps`` updates, a checkpoint every ``--every``), then the same
command stopped by Ctrl-C (SIGINT), then by SIGTERM, then by SIGKILL, each time resumed with ``resume=auto
hydra.run.dir=DIR``, the last attempt to the end, and then once more (a finished run: nothing to do). Each stop comes
a given time after a given periodic checkpoint appears, so it lands between checkpoints. Then it checks, and prints,
for the interrupted run against the uninterrupted one:

- the exit statuses: 130 (Ctrl-C), 143 (SIGTERM), -9 (SIGKILL), 0 at the end and after it;
- the final weights and Adam moments of ``last.ckpt``: bit for bit;
- ``csv/metrics.csv``: every step once, in order, every logged value equal but times;
- ``metrics.json``: every figure equal but times and memory, and unchanged by the last, finished, resume;
- what each attempt said: its stop line (SIGINT, SIGTERM), where it resumed from, that the run had finished.

    python experiments/stop_resume_check.py --out /tmp/stop-resume   # about 3 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
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
        shutil.which("gpt1") or str(Path(sys.executable).parent / "gpt1"),
        "pretrain",
        f"hydra.run.dir={run_dir}",
        f"trainer.max_steps={steps}",
        f"trainer.val_check_interval={steps}",
        "trainer.log_every_n_steps=1",
        f"callbacks.checkpoint.every_n_steps={every}",
        f"callbacks.samples.every_n_steps={steps}",
        *extra,
    ]


def run(run_dir: Path, steps: int, every: int, stop: tuple[int, float, int] | None, log: Path, *extra: str) -> int:
    """Run the command; with ``stop`` = (step, seconds, signal), send the signal that many seconds after the
    periodic checkpoint of that step appears. Returns the exit status."""
    with open(log, "a") as out:
        proc = subprocess.Popen(
            command(run_dir, steps, every, *extra),
            stdout=out,
            stderr=subprocess.STDOUT,
            # as a terminal's Ctrl-C finds it: a shell's background job (this script under nohup, &) ignores SIGINT
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        if stop is not None:
            step, seconds, sig = stop
            while proc.poll() is None and not (run_dir / "checkpoints" / f"step{step:07d}.ckpt").exists():
                time.sleep(0.02)
            time.sleep(seconds)
            if proc.poll() is None:
                proc.send_signal(sig)
        return proc.wait(timeout=900)


THROUGHPUT = ("train/batches", "train/lengths", "train/samples", "train/device/", "validate/")
"""Lightning's ThroughputMonitor's columns: counts and rates of the process that logged them, so each attempt's
start afresh (its rates need a window of batches first); compared apart."""


def rows(run_dir: Path, throughput: bool = False) -> list[dict]:
    """The CSV log's rows without the timings (they differ between any two runs): the training's (losses,
    learning rates, validation), or with ``throughput`` the throughput monitor's."""
    out = []
    with open(run_dir / "csv" / "metrics.csv") as f:
        for r in csv.DictReader(f):
            kept = {k: v for k, v in r.items() if v and k.startswith(THROUGHPUT) == throughput and "time" not in k}
            if set(kept) - {"epoch", "step"}:
                out.append({"step": r["step"], **kept})
    return out


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
    parser.add_argument(
        "--stops", type=int, nargs=3, default=[10, 30, 40], help="stop after these steps' checkpoints appear"
    )
    parser.add_argument("--delays", type=float, nargs=3, default=[1.3, 0.5, 2.5], help="... and these seconds")
    args, extra = parser.parse_known_args()
    args.out.mkdir(parents=True, exist_ok=True)
    whole, stopped = args.out / "uninterrupted", args.out / "stopped"
    log = args.out / "driver.log"
    status = {"uninterrupted": run(whole, args.steps, args.every, None, log, *extra)}
    for step, delay, sig in zip(args.stops, args.delays, (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)):
        resume = ("resume=auto",) if stopped.exists() else ()
        stop = (step, delay, sig)
        status[f"{sig.name} {delay} s after step {step}"] = run(
            stopped, args.steps, args.every, stop, log, *resume, *extra
        )
    status["resumed to the end"] = run(stopped, args.steps, args.every, None, log, "resume=auto", *extra)
    finished = (stopped / "metrics.json").read_text()
    status["resumed once more (finished)"] = run(stopped, args.steps, args.every, None, log, "resume=auto", *extra)
    print(json.dumps(status))

    problems = []
    want = {"uninterrupted": 0, "resumed to the end": 0, "resumed once more (finished)": 0}
    want.update({k: v for k, v in zip(list(status)[1:4], (130, 143, -signal.SIGKILL))})
    problems += [f"{k}: exit status {status[k]}, not {v}" for k, v in want.items() if status[k] != v]

    a, b = state(whole), state(stopped)
    differ = [k for k in a if k not in b or not torch.equal(a[k], b[k])]
    print(f"last.ckpt: {len(a)} tensors (weights and Adam moments), {len(differ)} differ")
    problems += [f"last.ckpt: {k} differs" for k in differ[:5]]

    ra, rb = rows(whole), rows(stopped)
    steps = [r["step"] for r in rb if "train/loss" in r]
    print(
        f"metrics.csv: {len(ra)} rows of losses, learning rates and validation uninterrupted, {len(rb)} after the "
        f"stops; losses logged once per step, in order: {steps == sorted(set(steps), key=int)}"
    )
    if ra != rb:
        first = next(i for i, (x, y) in enumerate(zip(ra + [{}], rb + [{}])) if x != y)
        problems.append(
            f"metrics.csv differs: first at row {first}: {ra[first : first + 1]} vs {rb[first : first + 1]}"
        )
    ta, tb = rows(whole, throughput=True), rows(stopped, throughput=True)
    print(f"metrics.csv, the throughput monitor's rows (per attempt, not compared): {len(ta)} and {len(tb)}")

    if (stopped / "metrics.json").read_text() != finished:
        problems.append("metrics.json changed when the finished run was resumed")
    fa, fb = figures(whole), figures(stopped)
    differ = sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k))
    print(f"metrics.json: {len(fa)} figures, {len(differ)} differ {differ}")
    problems += [f"metrics.json: {k}: {fa.get(k)} vs {fb.get(k)}" for k in differ]

    said = log.read_text()  # every attempt's output, in order
    lines = [line for line in said.splitlines() if line.startswith(("stopped by", "resumed from", "the run had"))]
    print("the attempts said:\n  " + "\n  ".join(lines))
    if (
        len(lines) != 6
    ):  # 2 stops by a signal that saves, each resumed, and the SIGKILL's and the finished run's resumes
        problems.append(f"{len(lines)} stop and resume lines, not 6")
    print("\n".join(["PROBLEMS:", *problems]) if problems else "all equal")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
