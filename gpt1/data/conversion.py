"""A table's conversion into datasets' Arrow cache (``convert``), in memory bounded whatever the size of its rows.

datasets' writer buffers ``writer_batch_size`` rows (1,000) before it writes them, and writes that many per record
batch (which gpt1 reads back one at a time: ``gpt1.data.corpus.table_pieces``): rows of whole books (a long JSON Lines
row, a parquet row group of one row, a .txt file read as one document) would sit in memory whole until the end of
the file. So a batch holds as many rows as fit in ``RECORD_BATCH_BYTES`` (at least one; datasets' default where that
is more), from the largest row, estimated cheaply before the conversion: the longest line of a JSON Lines, .csv or
.tsv file, a .txt document's size, a parquet file's largest row group per row (files on the hub, other formats: the
default). While converting, glibc hands blocks of 1 MB and more back when freed
(``gpt1.cpu.allocator.large_blocks_returned``): a row is copied a few times as it is read, and a heap fragmented by
blocks of each row's size would grow with the rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, Optional

import numpy as np
import pyarrow.parquet as pq

from gpt1.core.compat import set_writer_batch_size
from gpt1.cpu.allocator import large_blocks_returned

RECORD_BATCH_BYTES = 16 << 20
"""The most bytes of rows written in one record batch (and buffered before it), unless a row alone is more."""
SCAN_BYTES = 1 << 20
"""A file's lines are measured this many bytes at a time."""


def longest_line(path: str | os.PathLike, block: int = SCAN_BYTES) -> int:
    """The length in bytes of the longest line of ``path`` (its line break included), read ``block`` bytes at a
    time."""
    longest, start, at = 0, 0, 0  # the current line's first byte; the block's first byte, in the file
    with open(path, "rb") as f:
        while data := f.read(block):
            ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")) + at + 1  # (breaks,) line ends
            if len(ends):
                longest = max(longest, int(ends[0]) - start, int(np.diff(ends).max(initial=0)))
                start = int(ends[-1])
            at += len(data)
    return max(longest, at - start)


def largest_row(path: str, builder: str, document: bool = False) -> Optional[int]:
    """An estimate of the largest row, in bytes, that datasets' ``builder`` ("json", "csv", "text", "parquet") reads
    from the local file ``path`` (``document``: a text file is one row); None where it cannot be told cheaply."""
    if builder == "parquet":
        meta = pq.ParquetFile(path).metadata
        groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
        return max((g.total_byte_size // max(g.num_rows, 1) for g in groups), default=0)
    if builder == "text" and document:
        return os.path.getsize(path)
    if builder in ("json", "csv", "text"):
        with open(path, "rb") as f:
            if builder == "json" and f.read(1024).lstrip().startswith(b"["):
                return None  # one JSON array: read whole, as one table of all its records (never buffered)
        return longest_line(path)
    return None


def rows_per_batch(largest: Iterable[Optional[int]], default: int) -> Optional[int]:
    """The rows per record batch for rows of at most ``max(largest)`` bytes: as many as fit in
    ``RECORD_BATCH_BYTES`` (at least one); None (``default``, datasets' own) where that is as many or more, or where
    no size is known."""
    sizes = [size for size in largest if size is not None]
    if not sizes:
        return None
    rows = max(1, RECORD_BATCH_BYTES // max(max(sizes), 1))
    return rows if rows < default else None


def convert(builder: Any) -> None:
    """``builder.download_and_prepare()`` in bounded memory (module docstring)."""
    bound_record_batches(builder)
    with large_blocks_returned():
        builder.download_and_prepare()


def bound_record_batches(builder: Any) -> None:
    """Before ``builder.download_and_prepare()``: if its splits are still to be converted, set the rows per record
    batch of the conversion from the largest row of its local data files (module docstring)."""
    import datasets

    if builder.info.splits:  # converted already (datasets read its info from the cache)
        return
    data_files = builder.config.data_files or {}
    files = [str(f) for split in data_files.values() for f in split if os.path.isfile(f)]
    document = getattr(builder.config, "sample_by", None) == "document"
    rows = rows_per_batch(
        (largest_row(f, builder.name, document) for f in files), datasets.config.DEFAULT_MAX_BATCH_SIZE
    )
    if rows is not None:
        set_writer_batch_size(builder, rows)
