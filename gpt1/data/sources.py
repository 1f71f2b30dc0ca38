"""Raw text sources as ``datasets.Dataset``s: a ``Source`` is local files given by globs (``FileSource``) or a split
of a Hugging Face hub dataset (``HubSource``).

Shared by pre-training (a document per .txt file or per row) and fine-tuning (an example per row). The format of
a local file comes from its extension: ``FORMATS`` maps each to a ``Format``, which says how such a file is read
(its builder, header, errors and lines), so that a new format is one entry. Rows keep the order of the files and,
within a file, their own.

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
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Optional

import datasets
import pandas as pd
import pyarrow.parquet as pq

from gpt1.core.compat import csv_builder_logger, dataset_fingerprint, prepared_split
from gpt1.core.errors import DataError
from gpt1.core.quoting import Quoting
from gpt1.data.sample import own_sample_hint

log = logging.getLogger(__name__)

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
            where = own_sample_hint(pattern) or f"relative paths start at {Path.cwd()}"
            raise FileNotFoundError(f"{field}: {pattern!r} matches no file ({where}): fix the path or glob")
        files.update((Path(m).resolve(), None) for m in matches)
    return list(files)


class Format:
    """How a local file of one kind is read; ``FORMATS`` gives each extension its format, so that a new format is a
    subclass and an entry there. The defaults: a file of columns whose rows are not lines (parquet)."""

    name: ClassVar[str]
    builder: ClassVar[str]
    """The ``datasets`` builder that loads it."""
    text: ClassVar[bool] = False
    """A plain-text file: one document, its whole text in one column (``TXT_COLUMN``), invalid UTF-8 replaced."""
    header: ClassVar[bool] = False
    """Whether its first line names the columns."""
    quoted: ClassVar[bool] = False
    """Whether ``quoting`` changes how it is read (module docstring)."""

    def __str__(self) -> str:
        return self.name

    def options(self, quoting: str) -> dict[str, Any]:
        """The builder's options."""
        return {}

    def columns(self, path: Path, quoting: str) -> list[str]:
        """Its column names, from its header only (the first record of a JSON file)."""
        raise NotImplementedError

    def problem(self, path: Path, quoting: str) -> Optional[str]:
        """What is wrong with a file its builder failed to read, ``"path:line: ..."``; None if nothing is found."""
        return None

    def line_of_row(self, path: Path, row: int, quoting: str) -> Optional[int]:
        """The 1-based line where data row ``row`` starts; None where rows are not lines."""
        return None

    def line_without(self, path: Path, column: str, quoting: str) -> Optional[int]:
        """The 1-based line of the first row that has no field for ``column``, where the readers fill it with null;
        None if every row has it, or where rows are not lines."""
        return None

    def unquoted_rows(self, path: Path) -> Optional[int]:
        """Its rows if every quote in it is text (quoting "none"), counted without parsing; None where that count
        cannot be told from the lines."""
        return None


class Text(Format):
    """.txt: one document per file."""

    name, builder, text = "text", "text", True

    def options(self, quoting: str) -> dict[str, Any]:
        # one row per file: its whole text, line breaks kept; invalid UTF-8 replaced (counted by ``invalid_utf8``)
        return {"sample_by": "document", "encoding_errors": "replace"}

    def columns(self, path: Path, quoting: str) -> list[str]:
        return [TXT_COLUMN]


class Parquet(Format):
    name, builder = "parquet", "parquet"

    def columns(self, path: Path, quoting: str) -> list[str]:
        return pq.read_schema(path).names


class Json(Format):
    """JSON Lines (an object per line), or one array of objects."""

    name, builder = "json", "json"

    def columns(self, path: Path, quoting: str) -> list[str]:
        with open(path, encoding="utf-8") as f:
            first = next((line for line in f if line.strip()), "")
        try:
            record = json.loads(first)
        except json.JSONDecodeError:  # not JSON Lines: a (pretty-printed) array of records
            with open(path, encoding="utf-8") as f:
                records = json.load(f)
            record = records[0] if isinstance(records, list) and records else {}
        return list(record) if isinstance(record, dict) else []

    def problem(self, path: Path, quoting: str) -> Optional[str]:
        return json_error(path)

    def line_of_row(self, path: Path, row: int, quoting: str) -> Optional[int]:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            if f.read(1024).lstrip().startswith("["):
                return None  # one JSON array: its records are not lines
            f.seek(0)
            records = (n for n, line in enumerate(f, 1) if line.strip())  # (blank lines skipped, as datasets does)
            return next(itertools.islice(records, row, None), None)

    def line_without(self, path: Path, column: str, quoting: str) -> Optional[int]:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
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


class Csv(Format):
    """Comma-separated values, a header first."""

    name, builder, header, quoted = "csv", "csv", True, True
    sep: ClassVar[str] = ","
    holds: ClassVar[str] = "a comma"

    def options(self, quoting: str) -> dict[str, Any]:
        """pandas.read_csv's options (datasets' csv builder takes the same)."""
        return {"sep": self.sep, "quoting": csv.QUOTE_NONE if Quoting(quoting) == Quoting.none else csv.QUOTE_MINIMAL}

    def columns(self, path: Path, quoting: str) -> list[str]:
        try:
            return [str(c) for c in pd.read_csv(path, nrows=0, **self.options(quoting)).columns]
        except pd.errors.EmptyDataError:
            return []

    def problem(self, path: Path, quoting: str) -> Optional[str]:
        """The parser's complaint (pandas names the line), or None if it parses."""
        try:
            pd.read_csv(path, **self.options(quoting))
        except UnicodeDecodeError:
            return _utf8_error(path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
            ragged = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(e))
            if ragged:
                expected, line, saw = ragged.groups()
                return (
                    f"{path}:{line}: {saw} fields where the header has {expected}: quote a field that holds "
                    f"{self.holds}, or fix the line"
                )
            return f"{path}: {str(e).strip()}"
        return None

    def _records(self, f: Any, quoting: str) -> Iterator[tuple[int, list[str], int]]:
        """Each non-empty record of the open file, the header first, with the lines it starts and ends on (pandas
        and datasets skip blank lines too)."""
        options = self.options(quoting)
        reader = csv.reader(f, delimiter=options["sep"], quoting=options["quoting"])
        start = 1
        for record in reader:
            if record:
                yield start, record, reader.line_num
            start = reader.line_num + 1

    def line_of_row(self, path: Path, row: int, quoting: str) -> Optional[int]:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            records = self._records(f, quoting)
            return next((start for start, _, _ in itertools.islice(records, row + 1, None)), None)

    def line_without(self, path: Path, column: str, quoting: str) -> Optional[int]:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            at = None  # the column's position (None: the header still to come)
            for start, record, end in self._records(f, quoting):
                if at is None:
                    if column not in record:
                        return None
                    at = record.index(column)
                elif len(record) <= at and end == start:  # (one over several lines is a quoted field run on to a
                    return start  # later quote, which TaskSource warns of: task.quoting)
        return None


class Tsv(Csv):
    """Tab-separated values, a header first."""

    name, sep, holds = "tsv", "\t", "a tab"

    def unquoted_rows(self, path: Path) -> Optional[int]:
        """Its lines after the header, if each splits into the header's number of fields; else None (quoted
        fields, ragged lines)."""
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            lines = [line.rstrip("\r\n") for line in f if line.strip()]
        fields = lines[0].count("\t") if lines else 0
        return len(lines) - 1 if all(line.count("\t") == fields for line in lines) else None


FORMATS: dict[str, Format] = {
    ".txt": Text(),
    ".jsonl": Json(),
    ".json": Json(),  # JSON Lines, or one array of objects
    ".csv": Csv(),
    ".tsv": Tsv(),
    ".parquet": Parquet(),
}
"""File extension -> how such a file is read."""


def file_format(path: str | os.PathLike) -> Format:
    """The format of ``path`` from its extension; a ``ValueError`` listing the supported ones if unknown."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"{path}: unsupported file type {suffix!r}; supported: {', '.join(FORMATS)}")
    return FORMATS[suffix]


def file_columns(path: str | os.PathLike, quoting: str = "minimal") -> list[str]:
    """Column names of a data file, from its header only (the first record for JSON); [TXT_COLUMN] for .txt."""
    return file_format(path).columns(Path(path), quoting)


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
    parts = []
    for fmt, builder in prepared_builders(files, columns, cache_dir, txt_column, quoting):
        ds = builder.as_dataset(split="train")
        if fmt.text and txt_column != TXT_COLUMN:
            ds = ds.rename_column(TXT_COLUMN, txt_column)
        parts.append(ds if columns is None else ds.select_columns(list(columns)))
    if len(parts) == 1:
        return parts[0]
    # Formats infer types independently (e.g. string vs large_string): align them on the first part's.
    features = parts[0].features
    return datasets.concatenate_datasets([p if p.features == features else p.cast(features) for p in parts])


def prepared_builders(
    files: Sequence[str | os.PathLike],
    columns: Optional[Sequence[str]] = None,
    cache_dir: str | os.PathLike | None = None,
    txt_column: str = TXT_COLUMN,
    quoting: str = "minimal",
) -> Iterator[tuple[Format, datasets.DatasetBuilder]]:
    """For each run of ``files`` of one format, in order: the format and datasets' builder of the run, its rows
    converted into datasets' cache (split "train"); what ``load_files`` loads (its arguments), not yet mapped."""
    if not files:
        raise ValueError("load_files: no files given")
    for fmt, group in itertools.groupby(map(Path, files), key=file_format):
        group = list(group)
        if columns is not None:
            for path in group:
                have = [txt_column] if fmt.text else fmt.columns(path, quoting)
                _check_columns(str(path), have, columns)
        if fmt.text:
            for path in group:
                warn_invalid_utf8(path)
        # its "Failed to read file" log: the caller reports the file in one line; datasets' bars ("Downloading
        # data: 40/40 files" for files already here) say nothing of local files
        with _quiet(csv_builder_logger()), _no_progress_bars():
            builder = datasets.load_dataset_builder(
                fmt.builder, data_files=[str(p) for p in group], cache_dir=_str(cache_dir), **fmt.options(quoting)
            )
            builder.download_and_prepare()
        split = builder.info.splits.get("train") if builder.info.splits else None
        if split is None or not split.num_examples:
            named = ", ".join(map(str, group))
            has = "has" if len(group) == 1 else "have"
            what = f"{has} a header but no rows" if fmt.header else f"{has} no rows"
            raise DataError(f"{named} {what}: give {'it' if len(group) == 1 else 'them'} examples")
        yield fmt, builder


@dataclass(frozen=True)
class ArrowRows:
    """Rows as datasets' cache holds them, to be read through once (``gpt1.data.corpus.table_pieces``) without a
    Dataset, whose memory maps of every file would keep pages of each record batch resident: Arrow IPC stream files,
    each with the rows to skip and to take (-1: the rest), in order; ``key`` changes whenever the rows may."""

    files: tuple[tuple[str, int, int], ...]
    num_rows: int
    key: str

    def __len__(self) -> int:
        return self.num_rows


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
    fmt = FORMATS.get(path.suffix.lower())
    line = fmt.line_of_row(path, row, quoting) if fmt is not None and path.is_file() else None
    return f"{where}:{line}" if line is not None else f"{where} row {row}"


def line_without(path: Path, column: str, quoting: str = "minimal") -> Optional[int]:
    """The 1-based line of the first data row of a .csv, .tsv or JSON Lines file that has no field for ``column``
    (fewer fields than the header's up to it; a record without the key), where the readers fill it with null; None
    if every row has it, or for other formats."""
    return file_format(path).line_without(path, column, quoting)


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
    builder = prepared_hub(name, config, cache_dir, data_dir, where)
    with _loading(where):
        ds = builder.as_dataset(split=split)
    if columns is None:
        return ds
    _check_columns(where, ds.column_names, columns)
    return ds.select_columns(list(columns))


def prepared_hub(
    name: str,
    config: Optional[str],
    cache_dir: str | os.PathLike | None,
    data_dir: str | os.PathLike | None,
    where: str,
) -> datasets.DatasetBuilder:
    """The builder of a hub dataset, its splits downloaded and converted into datasets' cache (what ``load_hub``
    loads, not yet mapped)."""
    with _loading(where):
        builder = datasets.load_dataset_builder(name, config, cache_dir=_str(cache_dir), data_dir=_str(data_dir))
        builder.download_and_prepare()
    return builder


@contextmanager
def _loading(where: str) -> Iterator[None]:
    """What loading a hub dataset raises (unknown, offline and not cached, a missing split), as a ``DataError``
    naming ``where`` and the library's reason."""
    try:
        yield
    except (ValueError, OSError, RuntimeError, datasets.exceptions.DatasetNotFoundError) as e:  # as datasets says
        detail = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise DataError(f"cannot load {where}: {detail}") from e


class Source:
    """Where rows come from: local files (``FileSource``) or a split of a hub dataset (``HubSource``). Either fails
    in one ``DataError`` line that names the file (and its line) or the dataset; ``hint`` is what an error about
    its columns (or a file without rows) adds: how to name other columns."""

    hint: str = ""

    def key(self, columns: Optional[Sequence[str]] = None) -> str:
        """Changes whenever its rows (in ``columns``) may, without reading them."""
        raise NotImplementedError

    def rows(self, columns: Sequence[str]) -> datasets.Dataset:
        """Its rows in ``columns``."""
        raise NotImplementedError


class FileSource(Source):
    """Local files given by globs (``resolve_files``), of any mix of ``FORMATS``; ``setting`` (e.g.
    ``data.train_files``) names them in errors. cache_dir: datasets' cache; quoting: of .csv and .tsv files."""

    def __init__(
        self,
        globs: str | Sequence[str],
        setting: str,
        cache_dir: Optional[str] = None,
        quoting: str = "minimal",
        hint: str = "",
    ) -> None:
        try:
            self.files = resolve_files([globs] if isinstance(globs, str) else list(globs), setting)
        except FileNotFoundError as e:
            raise DataError(str(e)) from e
        self.setting, self.cache_dir, self.quoting, self.hint = setting, cache_dir, str(quoting), hint

    @staticmethod
    def format(path: Path) -> Format:
        """``path``'s format; a ``DataError`` listing the supported ones if its extension is unknown."""
        try:
            return file_format(path)
        except ValueError as e:
            raise DataError(str(e)) from e

    def columns(self, path: Path) -> list[str]:
        """The column names of one of the files, from its header (the first record of a JSON file)."""
        fmt = self.format(path)
        try:
            return fmt.columns(path, self.quoting)
        except ValueError as e:  # a first JSON record that does not parse, invalid UTF-8
            raise DataError(read_error([path], e, self.quoting)) from e

    def key(self, columns: Optional[Sequence[str]] = None) -> str:
        return files_key(self.files, self.quoting)

    def rows(self, columns: Sequence[str], files: Optional[Sequence[Path]] = None) -> datasets.Dataset:
        """The rows of ``files`` (default: all of them) in ``columns``, checked file by file from the headers."""
        files = self.files if files is None else files
        with self._reading(files):
            return load_files(files, columns, self.cache_dir, quoting=self.quoting)

    def arrow_rows(self, column: str, files: Optional[Sequence[Path]] = None) -> ArrowRows:
        """The rows of ``files`` (default: all of them), converted into datasets' cache, their ``column`` checked
        file by file from the headers."""
        files = self.files if files is None else files
        parts = []
        with self._reading(files):
            for _, builder in prepared_builders(files, [column], self.cache_dir, quoting=self.quoting):
                parts.append(prepared_split(builder, "train"))
        return ArrowRows(sum((p[0] for p in parts), ()), sum(p[1] for p in parts), files_key(files, self.quoting))

    @contextmanager
    def _reading(self, files: Sequence[Path]) -> Iterator[None]:
        """What reading ``files`` raises, as one ``DataError`` line naming the file (and its line)."""
        try:
            yield
        except DataError as e:  # a missing column, a file without rows
            if not self.hint:
                raise
            raise DataError(f"{e}{self.hint}") from e
        except (datasets.exceptions.DatasetGenerationError, ValueError) as e:  # malformed JSON/CSV, bad UTF-8
            raise DataError(read_error(files, e, self.quoting)) from e


class HubSource(Source):
    """One split of a Hugging Face hub dataset, loaded on first use (``load_hub``); ``where`` names it in errors."""

    def __init__(
        self,
        name: str,
        config: Optional[str],
        split: str,
        where: str,
        cache_dir: Optional[str] = None,
        data_dir: str | os.PathLike | None = None,
        hint: str = "",
    ) -> None:
        self.name, self.config, self.split, self.where = name, config, split, where
        self.cache_dir, self.data_dir, self.hint = cache_dir, data_dir, hint

    @cached_property
    def builder(self) -> datasets.DatasetBuilder:
        """Its builder, every split downloaded and converted into datasets' cache."""
        return prepared_hub(self.name, self.config, self.cache_dir, self.data_dir, self.where)

    @cached_property
    def dataset(self) -> datasets.Dataset:
        """The whole split."""
        with _loading(self.where):
            return self.builder.as_dataset(split=self.split)

    def key(self, columns: Optional[Sequence[str]] = None) -> str:
        """The datasets fingerprint of its rows (in ``columns``)."""
        return dataset_fingerprint(self.dataset if columns is None else self.rows(columns))

    def rows(self, columns: Sequence[str]) -> datasets.Dataset:
        self._check(columns, self.dataset.column_names)
        return self.dataset.select_columns(list(columns))

    def arrow_rows(self, column: str) -> ArrowRows:
        """The split's rows in datasets' cache (``column`` checked), keyed by the fingerprint datasets gives the
        split."""
        features = self.builder.info.features
        if features is not None:  # (known once prepared, for every packaged builder)
            self._check([column], list(features))
        with _loading(self.where):
            files, num_rows, fingerprint = prepared_split(self.builder, self.split)
        return ArrowRows(files, num_rows, fingerprint)

    def _check(self, columns: Sequence[str], have: Sequence[str]) -> None:
        try:
            _check_columns(self.where, have, columns)
        except DataError as e:
            raise DataError(f"{e}{self.hint}") from None


def files_key(files: Sequence[str | os.PathLike], quoting: str = "minimal") -> str:
    """A hash of the paths, sizes and modification times of ``files``, and of the quoting that reads any .csv/.tsv
    among them: changes whenever the rows read from them may, without reading them (what datasets' own fingerprint of
    local files rests on too)."""
    h = hashlib.sha256()
    for path in files:
        st = os.stat(path)
        h.update(f"{Path(path).resolve()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    if Quoting(quoting) != Quoting.minimal and any(file_format(p).quoted for p in files):
        h.update(f"quoting {quoting}".encode())  # the default adds nothing: keys from before the option stay valid
    return h.hexdigest()[:16]


def read_error(files: Sequence[str | os.PathLike], error: BaseException, quoting: str = "minimal") -> str:
    """Why ``files`` could not be loaded (``error``: what loading them raised), in one line naming the file and
    the line where it can: the first malformed line of a JSON Lines file, the parser's complaint about a CSV/TSV
    file (pandas gives the line), the first invalid UTF-8 byte; else the root cause of ``error``."""
    for path in files:
        found = file_format(path).problem(Path(path), quoting)
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


def warn_invalid_utf8(path: str | os.PathLike) -> None:
    """A warning naming ``path``, how many invalid UTF-8 sequences it holds and where the first is; none if none."""
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
