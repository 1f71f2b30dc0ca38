"""Stop a pre-training run three ways at odd moments, resume it each time, and read every artifact afterwards: the
field check of exact resume (docs/resume.md), as a user meets it. ``--finetune``: the same for a fine-tuning run
under random signals (below).

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

``--finetune``: a fine-tuning run of sentiment (validation after each of its 2 epochs, the best validation's weights
kept, the auxiliary LM on, 40 updates, a checkpoint every 5) from a tiny model it pre-trains first, once
uninterrupted, then stopped ``--stops`` times by a signal drawn from SIGINT, SIGTERM and SIGKILL, each 0-3 s (drawn)
after a periodic checkpoint (drawn from those still ahead: the last one's moment is its last validation, the test
or metrics.json; once it is trained, a moment drawn is that long after the attempt starts, its imports) appears
(``--seed``: the draws), and resumed each time with ``resume=auto``; then, if it has not trained to its last update,
stopped by Ctrl-C as its last update's checkpoint appears; then resumed to the end, and once more (finished: nothing
is evaluated again). It checks last.ckpt's weights and Adam moments and best.ckpt's weights (bit
for bit), metrics.json, the CSV log, that the finished run's resume changed neither, and prints what each attempt
said.

    python experiments/stop_resume_check.py --finetune --out /tmp/stop-resume-ft --seed 1
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
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
    ckpt = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    tensors = {f"weights/{k}": v for k, v in ckpt["state_dict"].items()}
    for i, moments in ckpt["optimizer_states"][0]["state"].items():
        tensors.update({f"adam/{i}/{k}": v for k, v in moments.items() if isinstance(v, torch.Tensor)})
    return tensors


def tensors(name: str, a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> list[str]:
    """Compare, and print, two checkpoints' tensors bit for bit; the differences."""
    differ = [k for k in a if k not in b or not torch.equal(a[k], b[k])]
    print(f"{name}: {len(a)} tensors, {len(differ)} differ")
    return [f"{name}: {k} differs" for k in differ[:5]]


def logs_and_figures(whole: Path, stopped: Path) -> list[str]:
    """Compare, and print, the CSV logs' rows (their timings and the throughput monitor's rows aside) and
    metrics.json's figures of the two runs; the differences."""
    problems = []
    ra, rb = rows(whole), rows(stopped)
    steps = [r["step"] for r in rb if "train/loss" in r]
    print(
        f"metrics.csv: {len(ra)} rows of losses, learning rates and evaluations uninterrupted, {len(rb)} after the "
        f"stops; losses logged once per step, in order: {steps == sorted(set(steps), key=int)}"
    )
    if ra != rb:
        first = next(i for i, (x, y) in enumerate(zip(ra + [{}], rb + [{}])) if x != y)
        problems.append(f"metrics.csv differs: first at row {first}: {ra[first:][:1]} vs {rb[first:][:1]}")
    ta, tb = rows(whole, throughput=True), rows(stopped, throughput=True)
    print(f"metrics.csv, the throughput monitor's rows (per attempt, not compared): {len(ta)} and {len(tb)}")
    fa, fb = figures(whole), figures(stopped)
    differ = sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k))
    print(f"metrics.json: {len(fa)} figures, {len(differ)} differ {differ}")
    return problems + [f"metrics.json: {k}: {fa.get(k)} vs {fb.get(k)}" for k in differ]


GPT1 = shutil.which("gpt1") or str(Path(sys.executable).parent / "gpt1")
TINY = ["model=tiny", "tokenizer.vocab_size=512", "trainer.max_steps=20", "callbacks.samples.every_n_steps=0"]
FINETUNE = [
    "task=sentiment",
    "++task.splits.train='train[:160]'",
    "++task.splits.validation='validation[:64]'",
    "++task.splits.test='test[:64]'",
    "batch_size=8",
    "trainer.max_epochs=2",
    "trainer.max_steps=-1",
    "trainer.log_every_n_steps=1",
    "callbacks.checkpoint.every_n_steps=5",
    "callbacks.checkpoint.keep_last=-1",
]
"""2 epochs of 20 updates, validated after each; model_selection=best and aux_lm_weight=0.5 (the defaults)."""
STEPS, EVERY = 40, 5
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


def attempt(args: list[str], log: Path, stop=None) -> int:
    """Run ``gpt1 args``; ``stop(proc)`` (if given) waits for its moment and sends its signal. The exit status."""
    with open(log, "a") as out:
        out.write(f"\n$ gpt1 {' '.join(args)}\n")
        out.flush()
        proc = subprocess.Popen(
            [GPT1, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's Ctrl-C finds it
        )
        if stop is not None:
            stop(proc)
        return proc.wait(timeout=1800)


def when(checkpoint: Path, seconds: float, sig: int):
    """Send ``sig`` ``seconds`` after ``checkpoint`` (a periodic one) appears: a moment of training chosen by its
    step, whatever the machine's speed (the last update's: its last validation, the test, metrics.json)."""

    def stop(proc: subprocess.Popen) -> None:
        while proc.poll() is None and not checkpoint.exists():
            time.sleep(0.02)
        try:
            proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            proc.send_signal(sig)

    return stop


def saved_step(run_dir: Path) -> int:
    """The step of the run's last.ckpt (0 if none)."""
    last = run_dir / "checkpoints" / "last.ckpt"
    return torch.load(last, map_location="cpu", weights_only=True, mmap=True)["global_step"] if last.exists() else 0


def best(run_dir: Path) -> dict[str, torch.Tensor]:
    ckpt = torch.load(run_dir / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=True)
    return ckpt["state_dict"]


def finetune_check(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """The --finetune check; its problems."""
    log = args.out / "driver.log"
    pretrained = args.out / "pretrained"
    if not (pretrained / "checkpoints" / "last.ckpt").exists():
        attempt(["pretrain", *TINY, f"hydra.run.dir={pretrained}", *extra], log)
    common = ["finetune", *FINETUNE, f"init_from={pretrained / 'checkpoints' / 'last.ckpt'}", *extra]
    whole, stopped = args.out / "uninterrupted", args.out / "stopped"
    status = {"uninterrupted": attempt([*common, f"hydra.run.dir={whole}"], log)}
    draw = random.Random(args.seed)
    resume = [*common, f"hydra.run.dir={stopped}", "resume=auto"]
    for i in range(args.stops):  # each a random signal a random 0-3 s after a periodic checkpoint still ahead
        ahead = [step for step in range(EVERY, STEPS + 1, EVERY) if step > saved_step(stopped)] or [STEPS]
        sig, step, seconds = draw.choice(SIGNALS), draw.choice(ahead), draw.uniform(0.0, 3.0)
        checkpoint = stopped / "checkpoints" / f"step{step:07d}.ckpt"
        status[f"{i + 1}: {sig.name} {seconds:.1f} s after step {step}"] = attempt(
            resume, log, when(checkpoint, seconds, sig)
        )
    if saved_step(stopped) < STEPS:  # (else a stop above came after the last update already)
        last = stopped / "checkpoints" / f"step{STEPS:07d}.ckpt"
        status["Ctrl-C after the last update"] = attempt(resume, log, when(last, 0.0, signal.SIGINT))
    status["resumed to the end"] = attempt(resume, log)
    finished = (stopped / "metrics.json").read_text(), (stopped / "csv" / "metrics.csv").read_text()
    status["resumed once more (finished)"] = attempt(resume, log)
    print(json.dumps(status, indent=1))

    problems = [f"{k}: exit status {v}, not 0" for k, v in status.items() if k.startswith(("un", "res")) and v != 0]
    stops = {k: v for k, v in status.items() if k[0].isdigit()}
    # (-2, -15: the signal came as the command started, before Python or gpt1 took it; the run after the last update
    # is trained, so a stop drawn then lands that early)
    stopped_ok = (0, 130, 143, -signal.SIGINT, -signal.SIGTERM, -signal.SIGKILL)
    problems += [f"{k}: exit status {v}" for k, v in stops.items() if v not in stopped_ok]
    if status.get("Ctrl-C after the last update", 130) != 130:
        problems.append(f"Ctrl-C after the last update: exit status {status['Ctrl-C after the last update']}, not 130")
    problems += tensors("last.ckpt (weights, Adam moments)", state(whole), state(stopped))
    problems += tensors("best.ckpt", best(whole), best(stopped))
    problems += logs_and_figures(whole, stopped)
    if ((stopped / "metrics.json").read_text(), (stopped / "csv" / "metrics.csv").read_text()) != finished:
        problems.append("metrics.json or the CSV changed when the finished run was resumed")
    said = [
        line
        for line in log.read_text().splitlines()
        if line.startswith(("stopped by", "resumed from", "the run had", "note:", "removed", "resume=auto:", "error:"))
    ]
    print("the attempts said:\n  " + "\n  ".join(said))
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="a scratch directory")
    parser.add_argument("--finetune", action="store_true", help="fine-tuning under random signals")
    parser.add_argument("--seed", type=int, default=0, help="--finetune: the draws of the signals and their moments")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--every", type=int, default=10, help="checkpoint every this many steps")
    parser.add_argument(
        "--stops",
        type=int,
        nargs="+",
        default=[10, 30, 40],
        help="stop after these steps' checkpoints appear (--finetune: how many random stops, 6 unless given)",
    )
    parser.add_argument("--delays", type=float, nargs=3, default=[1.3, 0.5, 2.5], help="... and these seconds")
    args, extra = parser.parse_known_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.finetune:
        args.stops = args.stops[0] if len(args.stops) == 1 else 6
        problems = finetune_check(args, extra)
        print("\n".join(["PROBLEMS:", *problems]) if problems else "all equal")
        sys.exit(1 if problems else 0)
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

    problems += tensors("last.ckpt (weights, Adam moments)", state(whole), state(stopped))
    if (stopped / "metrics.json").read_text() != finished:
        problems.append("metrics.json changed when the finished run was resumed")
    problems += logs_and_figures(whole, stopped)

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
