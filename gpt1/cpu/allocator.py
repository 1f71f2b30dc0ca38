"""Two CPU memory settings for training and decoding, applied by ``gpt1.cpu.settings.configure`` (never at import);
``GPT1_SYSTEM_MALLOC=1`` opts out of both. Figures: experiments/results/benchmarks.md.

- glibc's allocator keeps freed memory for reuse (mmap threshold 1 GiB, the heap never trimmed): otherwise large
  blocks (the tied table's gradient, the logits, the activations) go back to the kernel on ``free`` and every step
  zero-faults them in again. The cost is a resident heap at the run's peak, which a training process holds anyway.
- torch backs its CPU tensors of 2 MB and up with transparent huge pages (``THP_MEM_ALLOC_ENABLE=1``): decoding
  streams the weights without a TLB miss every 4 KB. torch reads the variable once, at its first CPU allocation.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 2**30
TRIM_THRESHOLD = 2**31 - 1
LARGE_BLOCK = 1 << 20
"""While ``large_blocks_returned``: blocks of this many bytes and more are mapped apart, and unmapped when freed."""

_tuned = False  # tune_cpu_allocator applied its settings in this process (they last until it ends)


def _applies() -> bool:
    return sys.platform.startswith("linux") and os.environ.get("GPT1_SYSTEM_MALLOC") != "1"


def _mallopt():
    """libc's ``mallopt``, or None (musl and other libcs have none)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return None


def tune_cpu_allocator() -> bool:
    """Keep freed memory in the process for reuse (glibc only). True if applied."""
    global _tuned
    mallopt = _mallopt() if _applies() else None
    if mallopt is None:
        return False
    _tuned = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _tuned


@contextmanager
def large_blocks_returned() -> Iterator[None]:
    """For the duration, blocks of ``LARGE_BLOCK`` bytes and more go back to the system when freed: while datasets
    converts a table into its cache, rows of tens of MB are copied a few times each, and a heap that keeps every
    freed block, fragmented by blocks of each row's size, would grow with the rows. Nothing where
    ``tune_cpu_allocator`` did not apply (glibc's own threshold then rises to the blocks it sees freed, up to 32 MB)."""
    mallopt = _mallopt() if _tuned else None
    if mallopt is None:
        yield
        return
    mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK)
    try:
        yield
    finally:
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def request_huge_pages() -> bool:
    """Ask torch for huge pages (``THP_MEM_ALLOC_ENABLE=1``) unless the variable is set already (Linux only). True if
    torch is asked for them."""
    if _applies():
        os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    return os.environ.get("THP_MEM_ALLOC_ENABLE", "0") not in ("", "0")
