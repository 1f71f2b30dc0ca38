"""Entries of the data cache made once, however many processes or nodes start on it: the first to take the lock
beside an entry makes it, the others wait (saying so in one line), then find it made.

The lock is ``fcntl.flock`` on a file beside the entry: local file systems support it, and so do the shared file
systems of clusters (NFS maps it onto its byte-range locks, Lustre with its flock mount option, GPFS natively). The
kernel releases it when its holder dies, so a preparer killed mid-way leaves no stale lock: the next waiter takes
over, and the entry, written to a temporary file and renamed, is whole or absent.
"""

from __future__ import annotations

import fcntl
import sys
from collections.abc import Callable
from pathlib import Path


def made_once(path: Path, make: Callable[[], None]) -> bool:
    """Make the file ``path`` with ``make()`` unless it exists, in one process at a time (the lock
    ``.<name>.lock`` beside it); return whether this process made it."""
    if path.is_file():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(f".{path.name}.lock")
    with open(lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another process to prepare {path} (it holds {lock})", file=sys.stderr, flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        if path.is_file():  # made while this process waited
            return False
        make()
        return True
