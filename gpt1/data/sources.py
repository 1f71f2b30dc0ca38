"""Raw text sources as ``datasets.Dataset``s: local files given by globs, or a Hugging Face hub dataset.

Shared by pre-training (a document per .txt file or per row) and fine-tuning (an example per row). The format of
a local file comes from its extension (``FORMATS``); rows keep the order of the files and, within a file, their own.

Quoting. A .csv or .tsv field that starts with a double quote is quoted (RFC 4180, as Python's csv module and pandas
write them: it may then hold separators and line breaks, inner quotes doubled) unless ``quoting="none"``, where every
quote is text: GLUE's and SNLI's .tsv files, whose sentences may start with a quote, need it.

Invalid UTF-8. A .txt file is plain text: its invalid bytes are replaced with U+FFFD and counted, and a warning names
the file, how many were replaced and the byte offset of the first (a stray byte in a large corpus should not stop a
run). A structured file (.jsonl/.json, .csv, .tsv) must be valid UTF-8: an invalid byte is a ``DataError`` naming
the file, its line and the byte offset (``read_error``), since a replaced byte inside a quoted field or a key may
change what the row says.
"""

from __future__ import annotations

import codecs
import csv
import glob
import hashlib
import itertools
import json
import logging
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Optional

import datasets
import pandas as pd
import pyarrow.parquet as pq

from gpt1.core.compat import csv_builder_logger
from gpt1.core.errors import DataError
from gpt1.core.quoting import Quoting

log = logging.getLogger(__name__)

FORMATS: dict[str, str] = {
    ".txt": "text",
    ".jsonl": "json",
    ".json": "json",  # JSON Lines, or one array of objects
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
}
"""File extension -> format."""
_BUILDERS: dict[str, tuple[str, dict[str, Any]]] = {
    # one row per file: its whole text, line breaks kept; invalid UTF-8 replaced (counted by ``invalid_utf8``)
    "text": ("text", {"sample_by": "document", "encoding_errors": "replace"}),
    "json": ("json", {}),
    "csv": ("csv", {}),  # and _table_options
    "tsv": ("csv", {}),  # and _table_options
    "parquet": ("parquet", {}),
}


def _table_options(fmt: str, quoting: str) -> dict[str, Any]:
    """pandas.read_csv's options (datasets' csv builder takes the same) for a .csv or .tsv file."""
    return {
        "sep": "\t" if fmt == "tsv" else ",",
        "quoting": csv.QUOTE_NONE if Quoting(quoting) == Quoting.none else csv.QUOTE_MINIMAL,
    }


TXT_COLUMN = "text"
"""The column a .txt file's text lands in (unless ``load_files(txt_column=...)`` says otherwise)."""


def resolve_files(patterns: Sequence[str], field: str) -> list[Path]:
    """Expand globs (relative to the current directory, ``**`` recursing) into absolute paths: the sorted matches
    of each pattern, in pattern order, each file once. ``field`` (e.g. ``data.train_files``) names the setting in
    errors."""
    files: dict[Path, None] = {}  # ordered set
    for pattern in patterns:
        matches = sorted(p for p in glob.glob(os.path.expanduser(pattern), recursive=True) if os.path.isfile(p))
        if not matches:
            raise FileNotFoundError(
                f"{field}: {pattern!r} matches no file (relative paths start at {Path.cwd()}): fix the path or glob"
            )
        files.update((Path(m).resolve(), None) for m in matches)
    return list(files)


def file_format(path: str | os.PathLike) -> str:
    """The format of ``path`` from its extension; a ``ValueError`` listing the supported ones if unknown."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"{path}: unsupported file type {suffix!r}; supported: {', '.join(FORMATS)}")
    return FORMATS[suffix]


def file_columns(path: str | os.PathLike, quoting: str = "minimal") -> list[str]:
    """Column names of a data file, from its header only (the first record for JSON); [TXT_COLUMN] for .txt."""
    fmt, path = file_format(path), Path(path)
    if fmt == "text":
        return [TXT_COLUMN]
    if fmt == "parquet":
        return pq.read_schema(path).names
    if fmt in ("csv", "tsv"):
        try:
            return [str(c) for c in pd.read_csv(path, nrows=0, **_table_options(fmt, quoting)).columns]
        except pd.errors.EmptyDataError:
            return []
    with open(path, encoding="utf-8") as f:
        first = next((line for line in f if line.strip()), "")
    try:
        record = json.loads(first)
    except json.JSONDecodeError:  # not JSON Lines: a (pretty-printed) array of records
        with open(path, encoding="utf-8") as f:
            records = json.load(f)
        record = records[0] if isinstance(records, list) and records else {}
    return list(record) if isinstance(record, dict) else []


def tsv_rows_unquoted(path: str | os.PathLike) -> Optional[int]:
    """The rows of a .tsv file whose every quote is text (quoting "none"): its lines after the header, if each
    splits into the header's number of fields; else None (quoted fields, ragged lines)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        lines = [line.rstrip("\r\n") for line in f if line.strip()]
    fields = lines[0].count("\t") if lines else 0
    return len(lines) - 1 if all(line.count("\t") == fields for line in lines) else None


def _check_columns(where: str, have: Sequence[str], want: Sequence[str]) -> None:
    missing = [c for c in want if c not in have]
    if missing:
        raise DataError(f"{where} has no column {', '.join(map(repr, missing))}; its columns are {list(have)}")


def load_files(
    files: Sequence[str | os.PathLike],
    columns: Optional[Sequence[str]] = None,
    cache_dir: str | os.PathLike | None = None,
    txt_column: str = TXT_COLUMN,
    quoting: str = "minimal",
) -> datasets.Dataset:
    """Load ``files`` (any mix of ``FORMATS``) into one Dataset, rows in file order.

    columns: keep only these, checked file by file from the headers (a missing one names the file and the columns
    it has); needed to mix formats whose other columns differ. txt_column: the column a .txt file's text lands in,
    so that .txt files line up with tabular ones. cache_dir: datasets' cache (None: its default). quoting: of .csv
    and .tsv files, "minimal" or "none" (module docstring).
    """
    if not files:
        raise ValueError("load_files: no files given")
    parts = []
    for fmt, group in itertools.groupby(map(Path, files), key=file_format):  # one builder per run of a format
        group = list(group)
        if columns is not None:
            for path in group:
                have = [txt_column] if fmt == "text" else file_columns(path, quoting)
                _check_columns(str(path), have, columns)
        if fmt == "text":
            for path in group:
                _warn_invalid_utf8(path)
        builder, kwargs = _BUILDERS[fmt]
        kwargs = _table_options(fmt, quoting) if fmt in ("csv", "tsv") else kwargs
        try:
            # its "Failed to read file" log: the caller reports the file in one line; datasets' bars ("Downloading
            # data: 40/40 files" for files already here) say nothing of local files
            with _quiet(csv_builder_logger()), _no_progress_bars():
                ds = datasets.load_dataset(
                    builder, data_files=[str(p) for p in group], split="train", cache_dir=_str(cache_dir), **kwargs
                )
        except ValueError as e:  # datasets' 'Instruction "train" corresponds to no data!'
            if "corresponds to no data" not in str(e):
                raise
            named = ", ".join(map(str, group))
            has = "has" if len(group) == 1 else "have"
            what = f"{has} a header but no rows" if fmt in ("csv", "tsv") else f"{has} no rows"
            raise DataError(f"{named} {what}: give {'it' if len(group) == 1 else 'them'} examples") from e
        if fmt == "text" and txt_column != TXT_COLUMN:
            ds = ds.rename_column(TXT_COLUMN, txt_column)
        parts.append(ds if columns is None else ds.select_columns(list(columns)))
    if len(parts) == 1:
        return parts[0]
    # Formats infer types independently (e.g. string vs large_string): align them on the first part's.
    features = parts[0].features
    return datasets.concatenate_datasets([p if p.features == features else p.cast(features) for p in parts])


@contextmanager
def _quiet(logger: logging.Logger) -> Iterator[None]:
    """``logger`` silenced for the duration (a filter, removed after: nothing else changes)."""

    def drop(record: logging.LogRecord) -> bool:
        return False

    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    """datasets' progress bars off for the duration, then as they were."""
    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def row_location(where: str, row: int, quoting: str = "minimal") -> str:
    """Where data row ``row`` (0-based, the header not counted) of ``where`` is: ``path:line`` (the file's line,
    1-based, as the parsers' own errors count) when ``where`` is one .csv, .tsv or JSON Lines file, else ``where row N``
    (several files, a hub dataset, a JSON array)."""
    path = Path(where)
    fmt = file_format(path) if path.suffix.lower() in FORMATS else None
    if path.is_file() and fmt in ("csv", "tsv", "json"):
        line = _line_of_row(path, fmt, row, quoting)
        if line is not None:
            return f"{where}:{line}"
    return f"{where} row {row}"


def line_without(path: Path, column: str, quoting: str = "minimal") -> Optional[int]:
    """The 1-based line of the first data row of a .csv, .tsv or JSON Lines file that has no field for ``column``
    (fewer fields than the header's up to it; a record without the key), where the readers fill it with null; None
    if every row has it, or for other formats."""
    fmt = file_format(path)
    if fmt not in ("csv", "tsv", "json"):
        return None
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        if fmt == "json":
            if f.read(1024).lstrip().startswith("["):
                return None  # one JSON array: its records are not lines
            f.seek(0)
            for n, line in enumerate(f, 1):
                if line.strip():
                    with suppress(ValueError):
                        record = json.loads(line)
                        if isinstance(record, dict) and column not in record:
                            return n
            return None
        options = _table_options(fmt, quoting)
        reader = csv.reader(f, delimiter=options["sep"], quoting=options["quoting"])
        at, start = None, 1  # the column's position (None: the header still to come); the next record's line
        for record in reader:
            if record:
                if at is None:
                    if column not in record:
                        return None
                    at = record.index(column)
                elif len(record) <= at and reader.line_num == start:  # (one over several lines is a quoted
                    return start  # field run on to a later quote, which TaskSource warns of: task.quoting)
            start = reader.line_num + 1
    return None


def _line_of_row(path: Path, fmt: str, row: int, quoting: str) -> Optional[int]:
    """The 1-based line where data row ``row`` starts (blank lines skipped, as pandas and datasets skip them)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        if fmt == "json":
            if f.read(1024).lstrip().startswith("["):
                return None  # one JSON array: its records are not lines
            f.seek(0)
            records = (n for n, line in enumerate(f, 1) if line.strip())
            return next(itertools.islice(records, row, None), None)
        options = _table_options(fmt, quoting)
        reader = csv.reader(f, delimiter=options["sep"], quoting=options["quoting"])
        seen, start = -1, 1  # data rows read (-1: the header still to come); the line the next record starts on
        for record in reader:
            if record:
                if seen == row:
                    return start
                seen += 1
            start = reader.line_num + 1
    return None


def load_hub(
    name: str,
    config: Optional[str] = None,
    split: str = "train",
    columns: Optional[Sequence[str]] = None,
    cache_dir: str | os.PathLike | None = None,
    data_dir: str | os.PathLike | None = None,
    where: Optional[str] = None,
) -> datasets.Dataset:
    """Load one split of a Hugging Face hub dataset (downloaded once, then read from ``cache_dir``), keeping only
    ``columns`` when given. data_dir: the files of a dataset that must be obtained by hand (e.g. Story Cloze).
    A dataset that cannot be loaded (unknown, offline and not cached, a missing split) is a ``DataError`` naming
    ``where`` (how the caller's config names it) and the library's reason."""
    where = where or f"hub dataset {name!r} (config {config!r}, split {split!r})"
    try:
        ds = datasets.load_dataset(name, config, split=split, cache_dir=_str(cache_dir), data_dir=_str(data_dir))
    except (ValueError, OSError, RuntimeError, datasets.exceptions.DatasetNotFoundError) as e:  # as datasets says
        detail = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise DataError(f"cannot load {where}: {detail}") from e
    if columns is None:
        return ds
    _check_columns(where, ds.column_names, columns)
    return ds.select_columns(list(columns))


def files_key(files: Sequence[str | os.PathLike], quoting: str = "minimal") -> str:
    """A hash of the paths, sizes and modification times of ``files``, and of the quoting that reads any .csv/.tsv
    among them: changes whenever the rows read from them may, without reading them (what datasets' own fingerprint of
    local files rests on too)."""
    h = hashlib.sha256()
    for path in files:
        st = os.stat(path)
        h.update(f"{Path(path).resolve()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    if Quoting(quoting) != Quoting.minimal and any(file_format(p) in ("csv", "tsv") for p in files):
        h.update(f"quoting {quoting}".encode())  # the default adds nothing: keys from before the option stay valid
    return h.hexdigest()[:16]


def read_error(files: Sequence[str | os.PathLike], error: BaseException, quoting: str = "minimal") -> str:
    """Why ``files`` could not be loaded (``error``: what loading them raised), in one line naming the file and
    the line where it can: the first malformed line of a JSON Lines file, the parser's complaint about a CSV/TSV
    file (pandas gives the line), the first invalid UTF-8 byte; else the root cause of ``error``."""
    for path in files:
        fmt = file_format(path)
        table = fmt in ("csv", "tsv")
        found = json_error(path) if fmt == "json" else _csv_error(path, fmt, quoting) if table else None
        if found:
            return found
    cause = error
    while (cause.__cause__ or cause.__context__) is not None:
        cause = cause.__cause__ or cause.__context__
    detail = (str(cause).strip().splitlines() or [""])[0]
    return f"{', '.join(map(str, files))}: could not be read ({type(cause).__name__}: {detail})"


def json_error(path: str | os.PathLike) -> Optional[str]:
    """``"path:line: what is wrong"`` for the first line of a JSON Lines file that is not a JSON object (for a file
    holding one JSON array: where it fails to parse), or its first invalid UTF-8 byte; None if it is well formed."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _utf8_error(path)
    if text.lstrip().startswith("["):
        try:
            json.loads(text)
        except json.JSONDecodeError as e:
            return f"{path}:{e.lineno}: not valid JSON ({e.msg}, column {e.colno}): fix the file"
        return None
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            return f"{path}:{lineno}: not valid JSON ({e.msg}, column {e.colno}): fix or remove the line"
        if not isinstance(record, dict):
            return f"{path}:{lineno}: not a JSON object (JSON Lines: one object per line, columns as keys)"
    return None


def _csv_error(path: str | os.PathLike, fmt: str, quoting: str) -> Optional[str]:
    """The parser's complaint about a CSV/TSV file (pandas names the line), or None if it parses."""
    try:
        pd.read_csv(path, **_table_options(fmt, quoting))
    except UnicodeDecodeError:
        return _utf8_error(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        ragged = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(e))
        if ragged:
            expected, line, saw = ragged.groups()
            return (
                f"{path}:{line}: {saw} fields where the header has {expected}: quote a field that holds "
                f"{'a tab' if fmt == 'tsv' else 'a comma'}, or fix the line"
            )
        return f"{path}: {str(e).strip()}"
    return None


def _utf8_error(path: str | os.PathLike) -> Optional[str]:
    """``"path:line: invalid UTF-8 (byte N of the file)"`` for the first invalid byte of ``path``, or None."""
    data = Path(path).read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        return f"{path}:{line}: invalid UTF-8 (byte {e.start} of the file): save it as UTF-8"
    return None


def invalid_utf8(path: str | os.PathLike, block: int = 1 << 20) -> tuple[int, Optional[int]]:
    """(how many invalid UTF-8 sequences ``path`` holds, the byte offset of the first or None): each becomes one
    U+FFFD when decoded with errors="replace". Reads ``block`` bytes at a time (a corpus file may be larger than
    memory)."""
    first, done, pending = None, 0, b""  # bytes checked before ``pending``, the incomplete sequence at a block's end
    with open(path, "rb") as f:
        while first is None:
            data = f.read(block)
            try:
                _, used = codecs.utf_8_decode(pending + data, "strict", not data)
            except UnicodeDecodeError as e:
                first = done + e.start
                break
            done, pending = done + used, (pending + data)[used:]
            if not data:
                return 0, None
        # Every U+FFFD of the replaced text is an invalid sequence, except those written as such (bytes EF BF BD,
        # always decoded as one character: EF cannot continue a sequence).
        f.seek(0)
        decoder, replaced, tail = codecs.getincrementaldecoder("utf-8")("replace"), 0, b""
        while data := f.read(block):
            replaced += decoder.decode(data).count("\ufffd") - (tail + data).count(b"\xef\xbf\xbd")
            tail = (tail + data)[-2:]  # a written U+FFFD across two blocks (never counted twice: it needs three bytes)
        replaced += decoder.decode(b"", True).count("\ufffd")
    return replaced, first


def _warn_invalid_utf8(path: str | os.PathLike) -> None:
    count, first = invalid_utf8(path)
    if count:
        log.warning(
            "%s: %d invalid UTF-8 byte sequence%s replaced with U+FFFD (the first at byte %d of the file)",
            path,
            count,
            "" if count == 1 else "s",
            first,
        )


def _str(path: str | os.PathLike | None) -> Optional[str]:
    return None if path is None else str(path)
