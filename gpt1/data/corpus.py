"""A pre-training corpus (configured by ``gpt1.data.data_config.DataConfig``): each split's raw documents (local files
or a hub split, ``CorpusSource``), and their tokenisation and packing into one flat token file per split (``pack``).

A .txt file, or a row of a table / hub dataset, is one document. Memory stays bounded whatever the corpus's shape:

- a document is read and encoded in pieces of about ``PIECE_CHARS`` characters, each ending at a line break (else a
  space). The "gpt1" pipeline's normaliser works character by character and its pre-tokenizer splits there, so the
  ids of the pieces, end to end, are exactly those of the whole document. Other pipelines (the "openai" one: ftfy,
  spaCy and the original's line-break rules) encode whole documents: their memory is bounded by the largest one;
- .txt files are read from disk piece by piece (decoded as datasets' text builder decodes them: in their encoding,
  invalid sequences replaced, universal newlines), and rows of tables and hub datasets are sliced from their Arrow
  files (datasets' cache), memory-mapped, the pages handed back as they are read (``MappedArrow``);
- pieces are encoded ``BATCH_CHARS`` of text at a time (``tokenizers``' threads over every core with ``num_proc``
  1, else ``num_proc`` forked processes of one thread each), at most two batches per process in flight, and the ids
  appended to the packed file as they come: each non-empty document followed by the eod token, one flat uint16
  array (uint32 for vocabularies past 65,536), written under a temporary name then renamed.
"""

from __future__ import annotations

import gc
import mmap
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import cached_property
from itertools import chain, groupby
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from gpt1.core.errors import DataError
from gpt1.core.files import atomic_file
from gpt1.core.progress import Meter
from gpt1.data.base import cache_key
from gpt1.data.data_config import DataConfig
from gpt1.data.encodings import read_encoding
from gpt1.data.formats import file_format
from gpt1.data.read_errors import warn_invalid
from gpt1.data.sources import ArrowRows, FileSource, HubSource, Source, checked_format
from gpt1.text.tokenizer import Tokenizer

PIECE_CHARS = 1 << 16
"""A piece of a document ends at its last line break (else space) within this many characters (bytes, for rows of
tables), or at the first one after them if there is none: text without whitespace is never cut."""
BATCH_CHARS = 1 << 20
"""The text encoded at once by each process; its encodings (about 25 bytes a character) bound the memory."""

Piece = tuple[str, bool]
"""A piece of a document's text, and whether it is the document's last."""


def pieces(text: str | bytes | memoryview, size: Optional[int] = PIECE_CHARS) -> Iterator[str]:
    """``text`` (a str, or UTF-8 bytes) in consecutive pieces of about ``size`` (None: whole), each but the last
    ending with a line break or a space (single bytes in UTF-8: bytes decode piece by piece as they do whole)."""
    raw = not isinstance(text, str)
    if size is None:
        yield str(text, "utf-8") if raw else text
        return
    newline, space = (b"\n", b" ") if raw else ("\n", " ")
    start, n = 0, len(text)
    while n - start > size:
        window = bytes(text[start : start + size]) if raw else text[start : start + size]
        end = window.rfind(newline) + 1 or window.rfind(space) + 1
        if end:
            end += start
        else:  # no whitespace within size: on to the next, a window at a time
            end = next_whitespace(text, start + size, newline, space, size)
            if end is None:
                break
        yield str(text[start:end], "utf-8") if raw else text[start:end]
        start = end
    yield str(text[start:], "utf-8") if raw else text[start:]


def next_whitespace(text: Any, start: int, newline: Any, space: Any, window: int) -> Optional[int]:
    """The position after the first line break or space of ``text`` from ``start`` on, or None."""
    for at in range(start, len(text), window):
        chunk = bytes(text[at : at + window]) if not isinstance(text, str) else text[at : at + window]
        found = [i for i in (chunk.find(newline), chunk.find(space)) if i >= 0]
        if found:
            return at + min(found) + 1
    return None


def file_pieces(path: Path, size: Optional[int] = PIECE_CHARS) -> Iterator[str]:
    """A .txt file's text in ``pieces``, read ``size`` characters at a time (None: whole), decoded as a text-mode
    ``read()`` of the whole file decodes it: in UTF-8, or the encoding its byte-order mark declares, the mark dropped
    (``gpt1.data.encodings``), invalid sequences replaced with U+FFFD, "\\r\\n" and "\\r" read as "\\n"."""
    with open(path, encoding=read_encoding(path, text=True).file_codec, errors="replace") as f:
        if size is None:
            yield f.read()
            return
        rest = ""
        while block := f.read(size):
            *done, rest = pieces(rest + block, size)  # rest starts where pieces of the whole text would
            yield from done
        yield rest


def marked(parts: Iterator[str]) -> Iterator[Piece]:
    """A document's pieces, the last one marked."""
    piece = next(parts)
    for following in parts:
        yield piece, False
        piece = following
    yield piece, True


def row_pieces(
    column: pa.ChunkedArray | pa.Array,
    size: Optional[int],
    where: str = "the text column",
    read_to: Optional[Callable[[int], None]] = None,
) -> Iterator[Piece]:
    """The pieces of each row of a string column (``where`` names it in errors), sliced from its Arrow buffers (a
    row is never copied whole); a null row is an empty document. ``read_to`` is told, after each row, the address up
    to which its text buffer has been read."""
    for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        if not (pa.types.is_string(chunk.type) or pa.types.is_large_string(chunk.type)):
            raise DataError(f"{where} holds {chunk.type}, not text: set data.text_column to the column that does")
        offsets = np.frombuffer(
            chunk.buffers()[1], dtype=np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        )
        offsets = offsets[chunk.offset : chunk.offset + len(chunk) + 1]  # (rows + 1,) byte offsets into data
        buffer = chunk.buffers()[2]
        data = memoryview(buffer or b"")
        valid = chunk.is_valid().to_numpy(zero_copy_only=False)
        for i in range(len(chunk)):
            if not valid[i]:
                yield "", True
                continue
            yield from marked(pieces(data[offsets[i] : offsets[i + 1]], size))
            if read_to is not None and buffer is not None:
                read_to(buffer.address + int(offsets[i + 1]))


RELEASE_BYTES = 16 << 20
"""Reading an Arrow file through, its pages are handed back each time this many bytes of it have been read."""


class MappedArrow:
    """An Arrow IPC stream file (datasets' cache) memory-mapped read-only, whose pages are handed back as it is read:
    a memory map keeps every page it has touched resident (counted in the process's RSS, and so growing with the
    corpus) until it is unmapped."""

    def __init__(self, path: str | os.PathLike) -> None:
        with open(path, "rb") as f:
            self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.buffer = pa.py_buffer(self.map)
        self.released = 0  # pages below this offset have been handed back

    def batches(self) -> pa.RecordBatchStreamReader:
        """Its record batches, zero-copy over the map."""
        return pa.ipc.open_stream(self.buffer)

    def read_to(self, address: int) -> None:
        """Everything below ``address`` (within the map) has been read: hand its pages back, ``RELEASE_BYTES`` at a
        time (MADV_DONTNEED on a read-only file map: the map stays valid; a page read again comes back from the page
        cache)."""
        end = (address - self.buffer.address) // mmap.PAGESIZE * mmap.PAGESIZE
        if end - self.released >= RELEASE_BYTES and hasattr(self.map, "madvise"):  # (madvise: not on Windows)
            self.map.madvise(mmap.MADV_DONTNEED, self.released, end - self.released)
            self.released = end


def table_pieces(rows: ArrowRows, column: str, size: Optional[int], where: str) -> Iterator[Piece]:
    """The pieces of each row of ``column`` of ``rows``, in order, read from their Arrow files through maps whose
    pages are handed back as the rows are read (``MappedArrow``): what stays resident is about ``RELEASE_BYTES`` and
    the row being read, whatever the table's size."""
    for path, skip, take in rows.files:
        mapped = MappedArrow(path)
        for batch in mapped.batches():
            if skip >= batch.num_rows:
                skip -= batch.num_rows
                continue
            if take == 0:
                break
            batch = batch.slice(skip, batch.num_rows - skip if take < 0 else min(take, batch.num_rows - skip))
            skip, take = 0, take if take < 0 else take - batch.num_rows
            yield from row_pieces(batch.column(column), size, where, mapped.read_to)


HINT = ": set data.text_column to the one that holds the text"
"""What an error about the text column (or a file without rows) adds."""


class CorpusSource:
    """One split's raw documents (local files or a hub split), read on demand in bounded pieces, and a key that
    changes with them."""

    def __init__(self, cfg: DataConfig, split: str, cache_dir: Path) -> None:
        files = cfg.train_files if split == "train" else cfg.valid_files
        hub = (cfg.hf_dataset, cfg.hf_config, cfg.hf_train_split if split == "train" else cfg.hf_valid_split)
        self.column, self.quoting = cfg.text_column, str(cfg.quoting)
        self.source: Source
        if files:
            self.source = FileSource(files, f"data.{split}_files", str(cache_dir / "datasets"), self.quoting, HINT)
            self.files = self._checked(self.source, files)
            more = f" and {len(self.files) - 1} more" if len(self.files) > 1 else ""
            self.where = f"data.{split}_files ({self.files[0]}{more})"
        else:
            self.files = None
            self.where = f"data.hf_dataset={hub[0]} (config {hub[1]}, split {hub[2]})"
            self.source = HubSource(*hub, self.where, str(cache_dir / "datasets"), hint=HINT)

    @staticmethod
    def _checked(source: FileSource, globs: list[str]) -> list[Path]:
        """The files, checked before any work: each has a known format, and not all are empty."""
        for path in source.files:
            checked_format(path)
        if all(path.stat().st_size == 0 for path in source.files):
            which = source.files[0] if len(source.files) == 1 else f"every file of {globs}"
            raise DataError(f"{source.setting}: {which} is empty: give a corpus with text in it")
        return source.files

    @cached_property
    def parts(self) -> list[list[Path] | ArrowRows]:
        """The documents in order: runs of .txt files (read from disk), and tables and hub splits converted into
        datasets' cache on first use (``ArrowRows``), each holding ``self.column``."""
        if self.files is None:
            return [self.source.arrow_rows(self.column)]
        parts: list[list[Path] | ArrowRows] = []
        for text, run in groupby(self.files, key=lambda path: file_format(path).text):
            files = list(run)
            parts.append(files if text else self.source.arrow_rows(self.column, files))
        return parts

    @cached_property
    def num_documents(self) -> int:
        return sum(len(part) for part in self.parts)

    @cached_property
    def key(self) -> str:
        """Changes whenever the documents may: for files, without reading them; for a hub split, datasets'
        fingerprint of it."""
        return cache_key(self.source.key() if self.files is not None else self.parts[0].key, self.column)

    def pieces(self, size: Optional[int] = PIECE_CHARS) -> Iterator[Piece]:
        """Every document in ``pieces`` of about ``size`` characters (None: whole), in order."""
        for part in self.parts:
            if isinstance(part, list):
                for path in part:
                    warn_invalid(path, read_encoding(path, text=True))
                    yield from marked(file_pieces(path, size))
            else:
                yield from table_pieces(part, self.column, size, f"column {self.column!r} of {self.where}")

    def texts(self, meter: Optional[Meter] = None) -> Iterator[str]:
        """The non-empty pieces of every document (what a BPE trains on), counted on ``meter``."""
        for text, last in self.pieces():
            if meter is not None:
                meter.update(int(last), len(text))
            if text:
                yield text


def token_dtype(tokenizer: Tokenizer) -> str:
    """The packed streams' dtype: 16 bits per token while the vocabulary fits."""
    return "uint16" if tokenizer.vocab_size <= 1 << 16 else "uint32"


def encode_flat(tokenizer: Tokenizer, texts: list[str], dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """The ids of ``texts`` end to end, (tokens,) ``dtype``, and each text's count of them, (texts,) int64."""
    ids = tokenizer.encode_batch(texts)
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    return np.fromiter(chain.from_iterable(ids), dtype=dtype, count=int(lengths.sum())), lengths


def pack(
    src: Iterable[Piece],
    path: str | os.PathLike,
    tokenizer: Tokenizer,
    eod: Optional[int],
    num_proc: int = 1,
    meter: Optional[Meter] = None,
    batch_chars: int = BATCH_CHARS,
) -> int:
    """Encode the documents of ``src`` (its pieces, in order) and write their ids end to end to ``path`` as one flat
    array (``token_dtype``), each non-empty document followed by ``eod`` (None: nothing); return the number of
    tokens. ``num_proc`` processes encode (1: this one, on ``tokenizers``' threads); ``meter`` counts documents and
    tokens. The file appears complete or not at all."""
    dtype, n, doc_tokens = token_dtype(tokenizer), 0, 0
    with atomic_file(Path(path)) as f:
        for batch, (tokens, lengths) in _encoded(_batches(src, batch_chars), tokenizer, dtype, num_proc):
            ends, at = np.cumsum(lengths), []  # (pieces,) end of each piece in tokens; where eods go
            for end, length, (_, last) in zip(ends, lengths, batch):
                doc_tokens += length
                if last:
                    if doc_tokens and eod is not None:
                        at.append(end)
                    doc_tokens = 0
            tokens = np.insert(tokens, at, eod) if at else tokens
            tokens.tofile(f)
            n += len(tokens)
            if meter is not None:
                meter.update(sum(last for _, last in batch), len(tokens))
    return n


def _batches(src: Iterable[Piece], chars: int) -> Iterator[list[Piece]]:
    """``src`` in lists of pieces of about ``chars`` characters in all."""
    batch, size = [], 0
    for piece in src:
        batch.append(piece)
        size += len(piece[0])
        if size >= chars:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


_worker_tokenizer: Optional[Tokenizer] = None  # a forked worker's tokenizer (inherited, never pickled)


def _init_worker(tokenizer: Tokenizer) -> None:
    global _worker_tokenizer
    _worker_tokenizer = tokenizer


def _encode_in_worker(texts: list[str], dtype: str) -> tuple[np.ndarray, np.ndarray]:
    return encode_flat(_worker_tokenizer, texts, dtype)


def _encoded(
    batches: Iterator[list[Piece]], tokenizer: Tokenizer, dtype: str, num_proc: int
) -> Iterator[tuple[list[Piece], tuple[np.ndarray, np.ndarray]]]:
    """Each batch with its ``encode_flat`` result, in order, while the next ones encode: in a thread (num_proc 1:
    ``tokenizers`` releases the GIL and uses every core) or in ``num_proc`` forked processes; at most two batches
    per process are in flight, so memory does not grow with the corpus."""
    if num_proc == 1:
        threads = ThreadPoolExecutor(1)

        def submit(texts: list[str]) -> Any:
            return threads.submit(encode_flat, tokenizer, texts, dtype)

        def result(future: Any) -> tuple[np.ndarray, np.ndarray]:
            return future.result()

        def close() -> None:
            threads.shutdown(cancel_futures=True)
    else:
        gc.freeze()  # the workers' collector leaves the inherited objects, so their pages stay shared, not copied
        try:
            with serial_tokenizers():  # one thread per worker, and no warning about the parent's thread pool
                pool = multiprocessing.get_context("fork").Pool(num_proc, _init_worker, (tokenizer,))
        finally:
            gc.unfreeze()

        def submit(texts: list[str]) -> Any:
            return pool.apply_async(_encode_in_worker, (texts, dtype))

        def result(async_result: Any) -> tuple[np.ndarray, np.ndarray]:
            return async_result.get()

        close = pool.terminate
    pending: deque = deque()
    try:
        for batch in batches:
            pending.append((batch, submit([text for text, _ in batch])))
            if len(pending) >= 2 * num_proc:
                batch, job = pending.popleft()
                yield batch, result(job)
        while pending:
            batch, job = pending.popleft()
            yield batch, result(job)
    finally:
        close()


@contextmanager
def serial_tokenizers() -> Iterator[None]:
    """TOKENIZERS_PARALLELISM=false for the duration: processes forked meanwhile encode on one thread each (they
    would anyway, after warning that the parent's thread pool cannot survive a fork)."""
    old = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = old
