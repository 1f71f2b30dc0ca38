"""The probe that times each kind of fp32 CPU product on each of its kernels, for ``gpt1.cpu.settings`` to choose from,
so that other work on the machine does not change the choice.

Other processes slow the kernels unevenly: a kernel of many short parallel regions (the head's input gradient in
slices, decoding's products) waits at every region's end for whichever thread the scheduler set aside, and libgomp's
threads spin while they wait; the median of wall times chose, beside two CPU-bound processes, kernels whose quiet
time was 1.26x to 3.4x the best. So the probe runs in a process of its own with ``OMP_WAIT_POLICY=PASSIVE`` (a
waiting thread sleeps) and takes the CPU time of the busiest thread: the kernel's critical path, which another
process's load changes little. Each kernel's figure is the minimum over rounds, the kernels taken in turn, in the
reverse order every other round. Figures: experiments/results/benchmarks.md ("CPU: how the kernels are chosen");
experiments/kernel_choice_load.py measures the choices' quiet cost under load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from gpt1.cpu import kernels
from gpt1.cpu.allocator import tune_cpu_allocator

PROBES = 4
"""The version of the probes and their statistic: timings cached by other probes are measured again
(``gpt1.cpu.settings.machine_key``)."""


def matmul_probes(rounds: int = 3) -> dict[str, tuple[Callable[[str], None], int]]:
    """Kind -> (a probe of that kind of product at GPT-1's width as a function of the kernel, its rounds): ``rounds``
    of the training products, five times as many of the inference ones (a few ms each, near-ties). "train.*": the
    MLP's two weights at 512 rows (at fewer, oneDNN's forward wins a probe that it loses in real steps); "head.*": a
    24,576-row weight (75 MB, more than a cache holds, as the tied head's; a shorter one leaves the choice to chance)
    at 128 rows; "batched": two blocks' eight weights (57 MB) times 8 rows; "decode": the same and the head's weight
    (its quarter of a token's bytes) times 1 row, each stored as decoding stores it on the kernel timed."""
    C, M, V = 768, 512, 24576  # V: the head probe's rows
    gen = torch.Generator().manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen) * 0.02

    # (weight (out, in), x (M, in), grad (M, out)) of each training product's probe
    layers = {
        "train": [(randn(4 * C, C), randn(M, C), randn(M, 4 * C)), (randn(C, 4 * C), randn(M, 4 * C), randn(M, C))],
        "head": [(randn(V, C), randn(M // 4, C), randn(M // 4, V))],
    }
    products = {
        "forward": lambda w, x, g, kernel: kernels.linear_forward(x, w, None, kernel),
        "input_grad": lambda w, x, g, kernel: kernels.linear_input_grad(g, w, kernel),
        "weight_grad": lambda w, x, g, kernel: kernels.linear_weight_grad(g, x, w, kernel),
    }
    blocks = [randn(n, k) for _ in range(2) for n, k in ((3 * C, C), (C, C), (4 * C, C), (C, 4 * C))]
    rows = {r: {w.size(1): randn(r, w.size(1)) for w in blocks} for r in (1, 8)}
    probed = {"decode": [*blocks, layers["head"][0][0]], "batched": blocks}  # decoding: the head's share of bytes too

    def training(kind: str, product: str) -> Callable[[str], None]:
        return lambda kernel: [products[product](*layer, kernel) for layer in layers[kind]]

    def inference(kind: str, r: int) -> Callable[[str], None]:
        stored: dict[str, list[torch.Tensor]] = {}  # kernel -> the weights as decoding stores them for it

        def run(kernel: str) -> None:
            with kernels.using(kind, kernel):
                if kernel not in stored:
                    stored[kernel] = [kernels.decoding_layout(w) for w in probed[kind]]
                with torch.no_grad():
                    for w in stored[kernel]:
                        kernels.cpu_linear(rows[r][w.size(1)], w)

        return run

    probes = {f"{kind}.{product}": (training(kind, product), rounds) for kind in layers for product in products}
    return probes | {"decode": (inference("decode", 1), 5 * rounds), "batched": (inference("batched", 8), 5 * rounds)}


def probe_matmuls(rounds: int = 3) -> dict[str, dict[str, float]]:
    """Kind -> kernel -> seconds of ``matmul_probes``' probe of that kind on that kernel, in this process."""
    return {kind: interleaved(probe, kernels.KERNELS[kind], n) for kind, (probe, n) in matmul_probes(rounds).items()}


def cpu_seconds() -> tuple[float, float]:
    """(this thread's CPU seconds, this process's), for ``busiest_thread``."""
    return time.thread_time(), time.process_time()


def busiest_thread(start: tuple[float, float], end: tuple[float, float]) -> float:
    """The CPU seconds between two ``cpu_seconds()`` of the busiest thread: this one (the main thread, which runs its
    share of every parallel region and every serial op) or the mean of the others (torch's pool, which splits a
    region's work evenly)."""
    own, others = end[0] - start[0], (end[1] - start[1]) - (end[0] - start[0])
    return max(own, others / max(1, torch.get_num_threads() - 1))


def interleaved(probe: Callable[[str], None], candidates: tuple[str, ...], rounds: int) -> dict[str, float]:
    """Kernel -> the least ``busiest_thread`` seconds of ``probe(kernel)`` over ``rounds`` rounds after an untimed one,
    the kernels taken in turn, in the reverse order every other round (each kernel timed after each other)."""
    times: dict[str, list[float]] = {k: [] for k in candidates}
    for i in range(rounds + 1):
        for kernel in candidates if i % 2 else candidates[::-1]:
            start = cpu_seconds()
            probe(kernel)
            if i:  # the first round is untimed
                times[kernel].append(busiest_thread(start, cpu_seconds()))
    return {kernel: min(ts) for kernel, ts in times.items()}


def measure_matmuls(rounds: int = 3) -> dict[str, dict[str, float]]:
    """``probe_matmuls`` in a process of its own whose waiting threads sleep, with this process's thread count and the
    same gpt1; in this process (less robust to load), with a warning, where that process fails."""
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}  # (which would make its threads spin)
    env |= {"OMP_WAIT_POLICY": "PASSIVE", "PYTHONPATH": path}
    command = [sys.executable, "-m", "gpt1.cpu.probe", str(torch.get_num_threads()), str(rounds)]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True, timeout=900)
        return json.loads(done.stdout.splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        why = getattr(e, "stderr", None) or str(e)
        warnings.warn(f"the CPU kernel probe's process failed ({why.strip().splitlines()[-1]}): measuring in this one",
                      stacklevel=2)  # fmt: skip
        return probe_matmuls(rounds)


class OtherWork:
    """The share of the machine's CPU time (0 to 1) that processes other than this one and its children took from its
    creation to ``share()``, from /proc/stat (None where there is none): 0.5 on a 2-core machine where one other
    process kept a core busy."""

    def __init__(self) -> None:
        self.start = _machine_and_own()

    def share(self) -> float | None:
        end = _machine_and_own()
        if self.start is None or end is None or end[1] <= self.start[1]:
            return None
        busy, total, own = (b - a for a, b in zip(self.start, end, strict=True))
        return min(1.0, max(0.0, (busy - own) / total))


def _machine_and_own() -> tuple[float, float, float] | None:
    """(the machine's busy CPU seconds, its total CPU seconds, this process's and its children's CPU seconds) so far;
    None without /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError):
        return None
    import resource  # (Unix: where there is a /proc/stat)

    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    own = me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime
    return (sum(fields) - idle) / tick, sum(fields) / tick, own


def main(argv: list[str]) -> None:
    """``python -m gpt1.cpu.probe THREADS ROUNDS``: ``probe_matmuls`` on THREADS threads, as JSON on stdout."""
    threads, rounds = (int(a) for a in argv)
    tune_cpu_allocator()  # the allocator the measuring process runs with (huge pages: THP_MEM_ALLOC_ENABLE, inherited)
    torch.set_num_threads(threads)
    print(json.dumps(probe_matmuls(rounds)))


if __name__ == "__main__":
    main(sys.argv[1:])
