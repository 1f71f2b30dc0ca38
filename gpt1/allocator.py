"""A CPU allocator setting that spares training steps from the kernel's page faults.

glibc's malloc serves large blocks (here: the 124 MB gradient of the tied embedding, the (B, T, V) logits, every
activation of a 768-wide model) with fresh ``mmap`` pages and returns them to the kernel on ``free``: every step
then zero-faults hundreds of MB back in. Raising the mmap threshold to 1 GiB and never trimming the heap keeps
freed blocks for reuse. On the 2-core reference machine a full GPT-1 training step runs about 10% faster
(experiments/benchmarks.md); the cost is a resident heap at the run's peak, which a training process holds anyway.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3


def tune_cpu_allocator() -> bool:
    """Keep freed memory in the process for reuse (glibc only; ``GPT1_SYSTEM_MALLOC=1`` opts out). True if applied."""
    if not sys.platform.startswith("linux") or os.environ.get("GPT1_SYSTEM_MALLOC") == "1":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other libcs have no mallopt
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, 2**30)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
