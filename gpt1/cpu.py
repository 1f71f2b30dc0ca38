"""The CPU speed settings, applied by one explicit call, ``configure()``: every gpt1 command calls it before it
allocates anything; a Python user may call it too. Importing gpt1 changes nothing.

``configure()`` reads the environment each time it is called:

- ``GPT1_SYSTEM_MALLOC=1`` leaves glibc's allocator and torch's page size alone; otherwise freed memory is kept for
  reuse and torch is asked for huge pages (``THP_MEM_ALLOC_ENABLE=1`` unless set; torch reads it at its first CPU
  allocation, so call ``configure()`` before any): ``gpt1.allocator``.
- ``GPT1_CPU_MATMUL``: ``auto`` (the default) runs each kind of fp32 product (``gpt1.ops.KINDS``: training GEMMs,
  the tied head's, decoding, batched inference) on whichever of oneDNN and torch's matmuls ``measure_matmuls`` found
  faster on this machine: measured once (about a second), then read from ``cache_path()``, one entry per CPU model
  and flags, torch version, thread count and ISA override (measured again where it was taken while every core was
  busy and the machine is quiet now); ``onednn`` or ``torch`` forces one kernel for every kind.
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

from gpt1 import ops
from gpt1.allocator import request_huge_pages, tune_cpu_allocator

KERNELS = ("onednn", "torch")
MARGIN = 0.03
"""oneDNN is chosen for a kind only where it is faster than torch's matmuls by more than this fraction: on a tie
(within the measurement's noise) torch's own, public kernels."""

ISA_VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
"""Variables that change which kernels torch, oneDNN and MKL dispatch to: part of the cache key."""


@dataclass(frozen=True)
class CpuSettings:
    """What ``configure()`` applied."""

    allocator_tuned: bool
    """glibc's allocator keeps freed memory (``gpt1.allocator.tune_cpu_allocator``)."""
    huge_pages: bool
    """``THP_MEM_ALLOC_ENABLE`` asks torch for huge pages (effective if set before torch's first CPU allocation)."""
    matmuls: dict[str, str]
    """Kind of product -> "onednn" or "torch" (``gpt1.ops.CPU_MATMULS``)."""
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
    if choice not in ("auto", *KERNELS):
        warnings.warn(f"GPT1_CPU_MATMUL={choice!r} is not auto, onednn or torch: using auto", stacklevel=2)
        choice = "auto"
    timings: dict[str, dict[str, float]] = {}
    if not ops.onednn_available():
        matmuls, source = dict.fromkeys(ops.KINDS, "torch"), "no oneDNN"
    elif choice != "auto":
        matmuls, source = dict.fromkeys(ops.KINDS, choice), f"GPT1_CPU_MATMUL={choice}"
    else:
        timings, source = cached_timings()
        matmuls = choose(timings)
    ops.set_cpu_matmuls(matmuls)
    return CpuSettings(tuned, huge_pages, dict(ops.CPU_MATMULS), source, timings)


def choose(timings: dict[str, dict[str, float]]) -> dict[str, str]:
    """Kind -> the kernel to run: oneDNN where its median beat torch's by more than ``MARGIN``, else torch."""
    return {kind: "onednn" if t["onednn"] < (1 - MARGIN) * t["torch"] else "torch" for kind, t in timings.items()}


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


def machine_key() -> str:
    """What the matmul timings depend on: the CPU (model and a hash of its flags), torch's version, the thread count
    and any ISA override (``ISA_VARIABLES``)."""
    flags = hashlib.sha1(" ".join(cpu_flags()).encode()).hexdigest()[:12]
    isa = "".join(f", {v}={os.environ[v]}" for v in ISA_VARIABLES if os.environ.get(v))
    return f"{cpu_model()} (flags {flags}), torch {torch.__version__}, {torch.get_num_threads()} threads{isa}"


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
            entries[key] = {"timings": timings, "choices": choose(timings), "date": time.strftime("%Y-%m-%d %H:%M"),
                            "load": _load()}
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
    oneDNN's row-block products lose to torch's that win on a quiet machine)."""
    cores, now = os.cpu_count() or 1, _load()
    return isinstance(load_then, (int, float)) and now is not None and load_then >= cores and now <= cores / 2


def _valid(timings: object) -> bool:
    return isinstance(timings, dict) and set(timings) == set(ops.KINDS) and all(
        isinstance(t, dict) and all(isinstance(t.get(k), (int, float)) and t[k] > 0 for k in KERNELS)
        for t in timings.values()
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


def measure_matmuls(rounds: int = 5) -> dict[str, dict[str, float]]:
    """Kind -> kernel -> median seconds of a probe of that kind of product at GPT-1's width (768), through
    ``gpt1.ops.linear`` with the kind set to each kernel in turn (onednn, torch, onednn, ...: both under the same
    conditions), after one untimed round. Probes: "train", forward and backward of the MLP's two products at
    128 rows; "head", of a 6,144-row weight at 256 rows (sliced as the tied head's); "decode" and "batched", two
    blocks' eight weight matrices (57 MB, more than a cache holds) times 1 and 8 rows."""
    C = 768
    gen = torch.Generator().manual_seed(0)

    def randn(*shape: int, grad: bool = False) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * 0.02).requires_grad_(grad)

    mlp = [randn(4 * C, C, grad=True), randn(C, 4 * C, grad=True)]
    x_train, g_train = randn(128, C, grad=True), randn(128, C)
    head, x_head, g_head = randn(6144, C, grad=True), randn(256, C, grad=True), randn(256, 6144)
    blocks = [randn(n, k) for _ in range(2) for n, k in ((3 * C, C), (C, C), (4 * C, C), (C, 4 * C))]
    rows = {r: {w.size(1): randn(r, w.size(1)) for w in blocks} for r in (1, 8)}

    def train() -> None:
        for t in (*mlp, x_train):
            t.grad = None
        ops.linear(ops.linear(x_train, mlp[0]), mlp[1]).backward(g_train)

    def head_step() -> None:
        head.grad = x_head.grad = None
        ops.linear(x_head, head).backward(g_head)

    def products(r: int) -> Callable[[], None]:
        def run() -> None:
            with torch.no_grad():
                for w in blocks:
                    ops.linear(rows[r][w.size(1)], w)

        return run

    probes = {"train": train, "head": head_step, "decode": products(1), "batched": products(8)}
    saved = dict(ops.CPU_MATMULS)
    try:
        return {kind: _interleaved(kind, probe, rounds) for kind, probe in probes.items()}
    finally:
        ops.CPU_MATMULS.update(saved)


def _interleaved(kind: str, probe: Callable[[], None], rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in KERNELS}
    for i in range(rounds + 1):
        for kernel in KERNELS:
            ops.CPU_MATMULS[kind] = kernel
            start = time.perf_counter()
            probe()
            if i:  # the first round is untimed
                times[kernel].append(time.perf_counter() - start)
    return {kernel: statistics.median(ts) for kernel, ts in times.items()}
