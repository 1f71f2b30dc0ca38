"""A CPU allocator setting that spares training steps from the kernel's page faults.

glibc's malloc serves large blocks (here: the 124 MB gradient of the tied embedding, the (B, T, V) logits, every
activation of a 768-wide model) with fresh ``mmap`` pages and returns them to the kernel on ``free``: every step
then zero-faults hundreds of MB back in. Raising the mmap threshold to 1 GiB and never trimming the heap keeps
freed blocks for reuse. On the 2-core reference machine a full GPT-1 training step runs about 10% faster
(experiments/benchmarks.md); the cost is a resident heap at the run's peak, which a training process holds anyway.

It also asks torch to back its large CPU tensors (2 MB and up) with transparent huge pages
(``THP_MEM_ALLOC_ENABLE=1``, unless set), so that decoding streams the weights without a TLB miss every 4 KB: its
matrix-vector products ran at 22 GB/s instead of 15-17 (a training step gained nothing measurable). torch reads
the variable once, at its first CPU allocation: ``import gpt1`` sets it (``request_huge_pages``), before anything
allocates.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3


def _applies() -> bool:
    """Linux, and not opted out with ``GPT1_SYSTEM_MALLOC=1``."""
    return sys.platform.startswith("linux") and os.environ.get("GPT1_SYSTEM_MALLOC") != "1"


def tune_cpu_allocator() -> bool:
    """Keep freed memory in the process for reuse (glibc only; ``GPT1_SYSTEM_MALLOC=1`` opts out). True if applied."""
    if not _applies():
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other libcs have no mallopt
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, 2**30)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


def request_huge_pages() -> None:
    """Ask torch for transparent huge pages under its large CPU tensors, unless ``THP_MEM_ALLOC_ENABLE`` is set
    (Linux only; ``GPT1_SYSTEM_MALLOC=1`` opts out). Effective only before torch's first CPU allocation."""
    if _applies():
        os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
