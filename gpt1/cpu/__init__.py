"""The CPU path: its settings (threads, allocator, the measured choice of matmul kernel per kind) and the kernels."""

import importlib


def __getattr__(name: str):
    # `gpt1.cpu` was one module (now gpt1.cpu.settings) before the package had rooms: its names still resolve here.
    if name in _SETTINGS:
        return getattr(importlib.import_module("gpt1.cpu.settings"), name)
    raise AttributeError(f"module 'gpt1.cpu' has no attribute {name!r}")


_SETTINGS = (
    "FORCED",
    "MARGIN",
    "ISA_VARIABLES",
    "CpuSettings",
    "configure",
    "applied",
    "choose",
    "cpu_model",
    "cpu_flags",
    "PROBES",
    "machine_key",
    "cache_path",
    "cached_timings",
    "measure_matmuls",
)
