"""Whether the CPU kernel choices hold on a busy machine (issue 54, item 1): ``--measurements`` K rounds, each of

- a quiet measurement: ``gpt1.cpu.settings.configure()`` in a fresh process with an empty kernel cache, as a gpt1
  command's first start on a machine, then again with that cache (the difference: the probe's cost);
- the quiet reference: each kind's probe (``gpt1.cpu.probe.matmul_probes``) on each of its kernels, timed as a run
  multiplies (wall time, in a process whose threads spin as a run's do, the least of ``--reference-rounds`` rounds
  taken in turn), after the kernels chosen by nothing (``GPT1_CPU_MATMUL=torch``: the allocator and huge pages as a
  command sets them);
- a loaded measurement: the same first start beside ``--spinners`` N CPU-bound processes (``while True: pass``);
- with ``--wall-median``: the probe before issue 54 (the median of wall times, in the measuring process) beside the
  same N processes, for comparison;

the quiet and loaded measurements in turn (quiet first in even rounds). For every measurement it reports each kind's
choice and its quiet cost: the reference's time of the kernel chosen over the reference's best for that kind (the
median over rounds of each kernel's reference time). The issue's target: every choice of every loaded measurement
within 1.05 of the quiet best.

    python experiments/kernel_choice_load.py --out DIR   # 10 rounds beside 2 CPU-bound processes: 5-6 min (estimated)

Prints a table and writes DIR/kernel_choice_load.json. Run it on an otherwise quiet machine (its own load is what it
adds). Results: experiments/results/benchmarks.md ("CPU: how the kernels are chosen").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIRST_START = """if True:
    import json, resource, time
    start = time.perf_counter()
    from gpt1.cpu import settings
    s = settings.configure()
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    entry = json.loads(settings.cache_path().read_text())[settings.machine_key()] if s.source == "measured" else {}
    print(json.dumps({"wall_s": time.perf_counter() - start, "cpu_s": sum(u.ru_utime + u.ru_stime for u in usage),
                      "source": s.source, "choices": s.matmuls, "timings": s.timings, "busy": entry.get("busy"),
                      "load": entry.get("load")}))"""
"""A gpt1 command's start as far as its CPU settings: the import, configure() and (empty cache) the probe."""


def python(args: list[str], env: dict[str, str]) -> dict:
    """Run a fresh Python with ``args``; the JSON its last line prints."""
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def spinning(n: int) -> list[subprocess.Popen]:
    """``n`` CPU-bound processes, running once this returns."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    time.sleep(1.0)  # under way before the measurement starts
    return spinners


def stop(spinners: list[subprocess.Popen]) -> None:
    for p in spinners:
        p.kill()
        p.wait()


def first_start(cache: Path, spinners: int) -> dict:
    """configure() in a fresh process with an empty cache at ``cache``, beside ``spinners`` CPU-bound processes."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop("GPT1_CPU_MATMUL", None)
    busy = spinning(spinners)
    try:
        return python(["-c", FIRST_START], env)
    finally:
        stop(busy)


def reference(rounds: int) -> dict[str, dict[str, float]]:
    """In this process: kind -> kernel -> the least wall seconds of its probe over ``rounds`` rounds (five times as
    many for the inference kinds, as the probe) after an untimed one, the kernels in turn, reversed every other
    round."""
    from gpt1.cpu import kernels
    from gpt1.cpu.probe import matmul_probes
    from gpt1.cpu.settings import configure

    os.environ["GPT1_CPU_MATMUL"] = "torch"
    configure()  # the allocator and huge pages, as every command
    out = {}
    for kind, (probe, n) in matmul_probes(rounds).items():
        candidates, times = kernels.KERNELS[kind], {k: [] for k in kernels.KERNELS[kind]}
        for i in range(n + 1):
            for kernel in candidates if i % 2 else candidates[::-1]:
                start = time.perf_counter()
                probe(kernel)
                if i:
                    times[kernel].append(time.perf_counter() - start)
        out[kind] = {k: min(ts) for k, ts in times.items()}
    return out


def wall_median(rounds: int) -> dict[str, str]:
    """In this process: the choices of the probe before issue 54 (each kernel's median wall time over ``rounds``
    rounds, five times as many for the inference kinds, the kernels in turn, spinning threads)."""
    from gpt1.cpu import kernels
    from gpt1.cpu.probe import matmul_probes
    from gpt1.cpu.settings import choose, configure

    os.environ["GPT1_CPU_MATMUL"] = "torch"
    configure()
    timings = {}
    for kind, (probe, n) in matmul_probes(rounds).items():
        times = {k: [] for k in kernels.KERNELS[kind]}
        for i in range(n + 1):
            for kernel in kernels.KERNELS[kind]:
                start = time.perf_counter()
                probe(kernel)
                if i:
                    times[kernel].append(time.perf_counter() - start)
        timings[kind] = {k: statistics.median(ts) for k, ts in times.items()}
    return choose(timings)


def in_child(measure: str, rounds: int, spinners: int = 0) -> dict:
    """``measure`` (``reference`` or ``wall_median``) in a fresh process of this script, beside ``spinners``."""
    busy = spinning(spinners)
    try:
        return python([__file__, f"_{measure}", f"--rounds={rounds}"], dict(os.environ))
    finally:
        stop(busy)


def costs(choices: dict[str, str], best: dict[str, dict[str, float]]) -> dict[str, float]:
    """Kind -> the quiet time of its chosen kernel over the quiet best of that kind."""
    return {kind: t[choices[kind]] / min(t.values()) for kind, t in best.items()}


def table(rows: list[dict], best: dict[str, dict[str, float]]) -> str:
    kinds = list(best)
    head = ["measurement", "busy", "load", "first start s", "CPU s", *kinds, "worst"]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for row in rows:
        c = costs(row["choices"], best)
        busy = f"{row['busy']:.2f}" if row.get("busy") is not None else "-"
        load = f"{row['load']:.1f}" if row.get("load") is not None else "-"
        cells = [f"{row['choices'][k]} ({c[k]:.2f})" for k in kinds]
        start = f"{row['wall_s']:.1f}" if "wall_s" in row else "-"
        cpu = f"{row['cpu_s']:.1f}" if "cpu_s" in row else "-"
        lines.append(" | ".join([row["name"], busy, load, start, cpu, *cells, f"{max(c.values()):.2f}"]))
    lines.append(
        " | ".join(["quiet reference, ms (median over rounds)", "", "", "", ""]
                   + [", ".join(f"{k} {v * 1e3:.2f}" for k, v in best[kind].items()) for kind in kinds] + [""])
    )  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--measurements", type=int, default=10, help="rounds of quiet and loaded measurements")
    p.add_argument("--spinners", type=int, default=2, help="CPU-bound processes beside each loaded measurement")
    p.add_argument("--reference-rounds", type=int, default=5, help="rounds of the quiet reference's training kinds")
    p.add_argument("--wall-median", action="store_true", help="also the probe before issue 54, under the same load")
    p.add_argument("--out", type=Path, default=Path("outputs/kernel_choice_load"))
    p.add_argument("--rounds", type=int, default=3, help=argparse.SUPPRESS)  # (_reference, _wall_median)
    p.add_argument("measure", nargs="?", choices=["_reference", "_wall_median"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        print(json.dumps(reference(args.rounds) if args.measure == "_reference" else wall_median(args.rounds)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    rows, references = [], []
    for r in range(args.measurements):
        order = ("quiet", "loaded") if r % 2 == 0 else ("loaded", "quiet")
        for how in order:
            cache = Path(tempfile.mkdtemp(prefix=f"{how}-{r}-", dir=args.out))
            row = first_start(cache, args.spinners if how == "loaded" else 0)
            if how == "quiet":
                row["warm_start_s"] = first_start(cache, 0)["wall_s"]  # the same start with the cache filled
                references.append(in_child("reference", args.reference_rounds))
            rows.append({"name": f"{how} {r}", **row})
            print(json.dumps(rows[-1]), flush=True)
        if args.wall_median:
            choices = in_child("wall_median", 3, args.spinners)
            rows.append({"name": f"loaded {r}, median of wall times (before issue 54)", "choices": choices})
            print(json.dumps(rows[-1]), flush=True)
    best = {
        kind: {k: statistics.median(ref[kind][k] for ref in references) for k in references[0][kind]}
        for kind in references[0]
    }
    loaded = [max(costs(row["choices"], best).values()) for row in rows if row["name"].startswith("loaded")
              and "before" not in row["name"]]  # fmt: skip
    quiet = [row for row in rows if row["name"].startswith("quiet")]
    probe_s = [row["wall_s"] - row["warm_start_s"] for row in quiet]
    summary = {
        "loaded_worst": max(loaded),
        "loaded_within_5_percent": sum(c <= 1.05 for c in loaded),
        "loaded_measurements": len(loaded),
        "probe_cost_s_quiet": [min(probe_s), statistics.median(probe_s), max(probe_s)],
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    (args.out / "kernel_choice_load.json").write_text(
        json.dumps({"summary": summary, "rows": rows, "references": references, "best": best}, indent=1) + "\n"
    )
    print(table(rows, best))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
