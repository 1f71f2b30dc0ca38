"""The CPU speed settings, applied by one explicit call, ``configure()``: every gpt1 command calls it before it
allocates anything; a Python user may call it too. Importing gpt1 changes nothing.

``configure()`` reads the environment each time it is called:

- ``GPT1_SYSTEM_MALLOC=1`` leaves glibc's allocator and torch's page size alone; otherwise freed memory is kept for
  reuse and torch is asked for huge pages (``THP_MEM_ALLOC_ENABLE=1`` unless set; torch reads it at its first CPU
  allocation, so call ``configure()`` before any): ``gpt1.cpu.allocator``.
- ``GPT1_CPU_MATMUL``: ``auto`` (the default) runs each kind of fp32 product (``gpt1.cpu.kernels.KINDS``: the forward,
  input-gradient and weight-gradient products of the blocks and of the tied head, decoding, batched inference) on
  whichever of its kernels (``gpt1.cpu.kernels.KERNELS``: oneDNN, torch's matmuls, decoding's row or column blocks)
  ``measure_matmuls`` found fastest on this machine: measured once (two or three seconds), then read from
  ``cache_path()``, one entry per CPU model and flags, torch version, thread count, ISA override and version of
  the probes (measured again where it was taken while every core was busy and the machine is quiet now); ``onednn``
  or ``torch`` forces one kernel for every kind. A training run keeps the kernels it started with, whatever a
  resumed attempt's process chooses (``gpt1.training.callbacks.run_kernels.RunKernels``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from gpt1.cpu import kernels
from gpt1.cpu.allocator import request_huge_pages, tune_cpu_allocator

FORCED = ("onednn", "torch")
"""The kernels ``GPT1_CPU_MATMUL`` can force on every kind."""
MARGIN = 0.03
"""Another kernel is chosen for a kind only where it is faster than torch's matmuls by more than this fraction: on a
tie (within the measurement's noise) torch's own."""

ISA_VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
"""Variables that change which kernels torch, oneDNN and MKL dispatch to: part of the cache key."""


@dataclass(frozen=True)
class CpuSettings:
    """What ``configure()`` applied."""

    allocator_tuned: bool
    """glibc's allocator keeps freed memory (``gpt1.cpu.allocator.tune_cpu_allocator``)."""
    huge_pages: bool
    """``THP_MEM_ALLOC_ENABLE`` asks torch for huge pages (effective if set before torch's first CPU allocation)."""
    matmuls: dict[str, str]
    """Kind of product -> its kernel (``gpt1.cpu.kernels.CPU_MATMULS``)."""
    source: str
    """How the matmuls were chosen: "GPT1_CPU_MATMUL=onednn" (or torch), "measured", "cached" or "no oneDNN"."""
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    """Kind -> kernel -> median seconds of ``measure_matmuls``'s probe (where measured or cached)."""


def configure() -> CpuSettings:
    """Apply the CPU speed settings (see the module's docstring) as the environment says now; idempotent (the
    matmuls are measured at most once per process and machine). Returns what it applied."""
    huge_pages = request_huge_pages()  # first: before anything below allocates
    tuned = tune_cpu_allocator()
    choice = os.environ.get("GPT1_CPU_MATMUL", "auto")
    if choice not in ("auto", *FORCED):
        warnings.warn(f"GPT1_CPU_MATMUL={choice!r} is not auto, onednn or torch: using auto", stacklevel=2)
        choice = "auto"
    timings: dict[str, dict[str, float]] = {}
    if not kernels.onednn_available():
        matmuls, source = dict.fromkeys(kernels.KINDS, "torch"), "no oneDNN"
    elif choice != "auto":
        matmuls, source = dict.fromkeys(kernels.KINDS, choice), f"GPT1_CPU_MATMUL={choice}"
    else:
        timings, source = cached_timings()
        matmuls = choose(timings)
    kernels.set_cpu_matmuls(matmuls)
    global _APPLIED
    _APPLIED = CpuSettings(tuned, huge_pages, dict(kernels.CPU_MATMULS), source, timings)
    return _APPLIED


_APPLIED: CpuSettings | None = None


def applied() -> CpuSettings | None:
    """What this process's last ``configure()`` applied (None: never called; every product then runs on torch's
    kernels). A training run fixes its kernels at its start: ``gpt1.training.callbacks.run_kernels.RunKernels``."""
    return _APPLIED


def choose(timings: dict[str, dict[str, float]]) -> dict[str, str]:
    """Kind -> the kernel to run: the fastest where its median beat torch's by more than ``MARGIN``, else torch."""
    choices = {}
    for kind, t in timings.items():
        fastest = min(t, key=t.__getitem__)
        choices[kind] = fastest if t[fastest] < (1 - MARGIN) * t["torch"] else "torch"
    return choices


def cpu_model() -> str:
    """The CPU's model name ("AMD EPYC 9R14", ...; ``platform.processor()`` where /proc/cpuinfo has none)."""
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    """The CPU's feature flags (/proc/cpuinfo; empty elsewhere)."""
    return _cpuinfo("flags").split()


def _cpuinfo(name: str) -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.split(":")[0].strip() == name), "")
    except OSError:
        return ""


PROBES = 3
"""The version of ``measure_matmuls``'s probes: timings cached by other probes are measured again."""


def machine_key() -> str:
    """What the matmul timings depend on: the CPU (model and a hash of its flags), torch's version, the thread count,
    any ISA override (``ISA_VARIABLES``) and the probes (``PROBES``)."""
    flags = hashlib.sha1(" ".join(cpu_flags()).encode()).hexdigest()[:12]
    isa = "".join(f", {v}={os.environ[v]}" for v in ISA_VARIABLES if os.environ.get(v))
    return (
        f"{cpu_model()} (flags {flags}), torch {torch.__version__}, {torch.get_num_threads()} threads{isa}, "
        f"probes {PROBES}"
    )


def cache_path() -> Path:
    """``$XDG_CACHE_HOME/gpt1/cpu-matmuls.json`` (``~/.cache`` where XDG_CACHE_HOME is unset)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "gpt1" / "cpu-matmuls.json"


_MEASURED: dict[str, tuple[dict[str, dict[str, float]], str]] = {}
"""machine_key() -> the timings measured or read in this process, and their source."""


def cached_timings() -> tuple[dict[str, dict[str, float]], str]:
    """This machine's matmul timings and where they came from ("measured" or "cached"): as this process's earlier
    call had them, from ``cache_path()``, or measured now and written there (under a lock, so that processes
    started together, e.g. DDP's ranks, measure once). An unreadable or unwritable cache only costs a measurement."""
    key = machine_key()
    if key in _MEASURED:
        return _MEASURED[key]
    path = cache_path()
    with _locked(path):
        entries = _read_json(path)
        entry = entries.get(key, {})
        timings, source = entry.get("timings"), "cached"
        if not _valid(timings) or _busy_then_quiet_now(entry.get("load")):
            timings, source = measure_matmuls(), "measured"
            entries[key] = {
                "timings": timings,
                "choices": choose(timings),
                "date": time.strftime("%Y-%m-%d %H:%M"),
                "load": _load(),
            }
            with contextlib.suppress(OSError):
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
                tmp.replace(path)
    _MEASURED[key] = timings, source
    return timings, source


def _load() -> float | None:
    """The 1-minute load average (None where the OS has none)."""
    with contextlib.suppress(OSError, AttributeError):
        return os.getloadavg()[0]
    return None


def _busy_then_quiet_now(load_then: object) -> bool:
    """Whether timings taken at load average ``load_then`` are worth re-taking now: taken while other work held
    every core, and now at most half of them are busy (other processes slow the kernels unevenly: under load,
    decoding's row-block products lose to torch's that win on a quiet machine)."""
    cores, now = os.cpu_count() or 1, _load()
    return isinstance(load_then, (int, float)) and now is not None and load_then >= cores and now <= cores / 2


def _valid(timings: object) -> bool:
    return (
        isinstance(timings, dict)
        and set(timings) == set(kernels.KINDS)
        and all(
            isinstance(t, dict)
            and set(t) == set(kernels.KERNELS[kind])
            and all(isinstance(v, (int, float)) and v > 0 for v in t.values())
            for kind, t in timings.items()
        )
    )


def _read_json(path: Path) -> dict:
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path``'s lock file where the OS has ``fcntl`` and the directory can be made."""
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_suffix(".lock"), "w")  # noqa: SIM115  (closed below)
    except (ImportError, OSError):
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def measure_matmuls(rounds: int = 3) -> dict[str, dict[str, float]]:
    """Kind (``gpt1.cpu.kernels.KINDS``) -> kernel (``gpt1.cpu.kernels.KERNELS``) -> median seconds of a probe of that
    kind of product at GPT-1's width (768), its kernels taken in turn (onednn, torch, onednn, ...: each under the same
    conditions) after one untimed round: ``rounds`` rounds of the training products, five times as many of the inference
    ones (a few milliseconds each, whose near-ties fewer rounds decide by chance). Probes: "train.*", the MLP's two
    weights (3,072 x 768 and 768 x 3,072) at 512 rows (at fewer, oneDNN's forward wins a probe that it loses in real
    steps: experiments/results/benchmarks.md); "head.*", a 24,576-row weight (75 MB, more than a cache holds, as the
    tied head's; a shorter one leaves the forward's choice to chance: experiments/results/benchmarks.md) at 128 rows;
    "batched", two blocks' eight weight matrices (57 MB, more than a cache holds) times 8 rows, and "decode", the same
    and the head's weight (its quarter of a GPT-1 token's bytes) times 1 row, each stored as decoding stores it on the
    kernel timed (``gpt1.cpu.kernels.decoding_layout``), all through ``gpt1.cpu.kernels.cpu_linear``."""
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

    # kind -> (probe, rounds)
    probes = {f"{kind}.{product}": (training(kind, product), rounds) for kind in layers for product in products}
    probes |= {"decode": (inference("decode", 1), 5 * rounds), "batched": (inference("batched", 8), 5 * rounds)}
    return {kind: _interleaved(probe, kernels.KERNELS[kind], n) for kind, (probe, n) in probes.items()}


def _interleaved(probe: Callable[[str], None], candidates: tuple[str, ...], rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in candidates}
    for i in range(rounds + 1):
        for kernel in candidates:
            start = time.perf_counter()
            probe(kernel)
            if i:  # the first round is untimed
                times[kernel].append(time.perf_counter() - start)
    return {kernel: statistics.median(ts) for kernel, ts in times.items()}
