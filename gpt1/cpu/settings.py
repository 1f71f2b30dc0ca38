"""The CPU speed settings, applied by one explicit call, ``configure()``: every gpt1 command calls it before it
allocates anything; a Python user may call it too. Importing gpt1 changes nothing.

``configure()`` reads the environment each time: ``GPT1_SYSTEM_MALLOC=1`` leaves glibc's allocator and torch's page
size alone (``gpt1.cpu.allocator``). ``GPT1_CPU_MATMUL``: ``auto`` (the default) runs each kind of fp32 product on
whichever of its kernels ``gpt1.cpu.probe.measure_matmuls`` found fastest on this machine, measured once (a few
seconds) and then read from ``cache_path()``, one entry per ``machine_key()``, with the share of the CPUs other work
took meanwhile (measured again once a machine that was busy then is quiet); ``onednn`` or ``torch`` forces one kernel
for every kind. A training run keeps the kernels it started with (``gpt1.training.callbacks.run_kernels``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from gpt1.cpu import kernels
from gpt1.cpu.allocator import request_huge_pages, tune_cpu_allocator
from gpt1.cpu.probe import PROBES, OtherWork, measure_matmuls

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
    """Kind -> kernel -> seconds of ``gpt1.cpu.probe.measure_matmuls``'s probe (where measured or cached)."""


def configure() -> CpuSettings:
    """Apply the CPU speed settings as the environment says now; idempotent (the matmuls are measured at most once
    per process and machine). Returns what it applied."""
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
    kernels)."""
    return _APPLIED


def choose(timings: dict[str, dict[str, float]]) -> dict[str, str]:
    """Kind -> the kernel to run: the fastest where it beat torch's by more than ``MARGIN``, else torch."""
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


def machine_key() -> str:
    """What the matmul timings depend on: the CPU (model and a hash of its flags), torch's version, the thread count,
    any ISA override (``ISA_VARIABLES``) and the probes (``gpt1.cpu.probe.PROBES``)."""
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
    started together, e.g. DDP's ranks, measure once) with the load average and ``busy``, the share of the CPUs'
    time other processes took meanwhile. An unreadable or unwritable cache only costs a measurement."""
    key = machine_key()
    if key in _MEASURED:
        return _MEASURED[key]
    path = cache_path()
    with _locked(path):
        entries = _read_json(path)
        entry = entries.get(key, {})
        timings, source = entry.get("timings"), "cached"
        if not _valid(timings) or _busy_then_quiet_now(entry.get("busy")):
            others = OtherWork()
            timings, source = measure_matmuls(), "measured"
            entries[key] = {
                "timings": timings,
                "choices": choose(timings),
                "date": time.strftime("%Y-%m-%d %H:%M"),
                "load": _load(),
                "busy": others.share(),
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


BUSY = 0.25
"""Timings measured while other processes took at least this share of the CPUs' time are re-checked when quiet."""
QUIET = 0.25
"""The machine is quiet when its 1-minute load average is at most this many runnable processes per core."""


def _busy_then_quiet_now(busy_then: object) -> bool:
    """Whether timings measured while other work took ``busy_then`` of the CPUs' time are worth measuring again now:
    at least ``BUSY`` then, and the machine quiet now (``QUIET``; the load average costs nothing to read). The probe
    is built to choose alike under load (``gpt1.cpu.probe``): this re-check catches what it could not."""
    cores, now = os.cpu_count() or 1, _load()
    return isinstance(busy_then, (int, float)) and busy_then >= BUSY and now is not None and now <= QUIET * cores


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
