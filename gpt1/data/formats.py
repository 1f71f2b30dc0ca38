"""The formats of local data files, one entry each: ``FORMATS`` maps a file extension to a ``Format``, which says how
such a file is read (its ``datasets`` builder, header, columns, quoting) and where its rows are (a row's line, the
first row without a field), so that a new format is one subclass and one entry.

Quoting. A .csv or .tsv field that starts with a double quote is quoted (RFC 4180, as Python's csv module and pandas
write them: it may then hold separators and line breaks, inner quotes doubled) unless ``quoting="none"``, where every
quote is text: GLUE's and SNLI's .tsv files, whose sentences may start with a quote, need it.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import re
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any, ClassVar, Optional

import pandas as pd
import pyarrow.parquet as pq

from gpt1.core.quoting import Quoting
from gpt1.data.read_errors import json_error, utf8_error

TXT_COLUMN = "text"
"""The column a .txt file's text lands in."""


class Format:
    """How a local file of one kind is read; ``FORMATS`` gives each extension its format, so that a new format is a
    subclass and an entry there. The defaults: a file of columns whose rows are not lines (parquet)."""

    name: ClassVar[str]
    builder: ClassVar[str]
    """The ``datasets`` builder that loads it."""
    text: ClassVar[bool] = False
    """A plain-text file: one document, its whole text in one column (``TXT_COLUMN``), in its encoding
    (``gpt1.data.encodings``), invalid sequences replaced."""
    header: ClassVar[bool] = False
    """Whether its first line names the columns."""
    quoted: ClassVar[bool] = False
    """Whether ``quoting`` changes how it is read (module docstring)."""
    encoded: ClassVar[bool] = True
    """Whether its bytes are characters in an encoding (``gpt1.data.encodings.read_encoding``)."""
    signature: ClassVar[Optional[str]] = None
    """What ``gpt1.core.file_kinds.binary_kind`` calls a file of this format (a binary one); None for text."""

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
        # one row per file: its whole text, line breaks kept; invalid sequences replaced (``read_errors.warn_invalid``)
        return {"sample_by": "document", "encoding_errors": "replace"}

    def columns(self, path: Path, quoting: str) -> list[str]:
        return [TXT_COLUMN]


class Parquet(Format):
    name, builder, encoded = "parquet", "parquet", False  # (binary: its strings are UTF-8 by its specification)
    signature = "a parquet table"

    def columns(self, path: Path, quoting: str) -> list[str]:
        return pq.read_schema(path).names


class Json(Format):
    """JSON Lines (an object per line), or one array of objects."""

    name, builder = "json", "json"

    def columns(self, path: Path, quoting: str) -> list[str]:
        with open(path, encoding="utf-8-sig") as f:
            first = next((line for line in f if line.strip()), "")
        try:
            record = json.loads(first)
        except json.JSONDecodeError:  # not JSON Lines: a (pretty-printed) array of records
            with open(path, encoding="utf-8-sig") as f:
                records = json.load(f)
            record = records[0] if isinstance(records, list) and records else {}
        return list(record) if isinstance(record, dict) else []

    def problem(self, path: Path, quoting: str) -> Optional[str]:
        return json_error(path)

    def _lines(self, path: Path) -> Iterator[tuple[int, str]]:
        """Each non-blank line (datasets skips blank ones) with its number; none for one JSON array (its records are
        not lines)."""
        with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
            if f.read(1024).lstrip().startswith("["):
                return
            f.seek(0)
            yield from ((n, line) for n, line in enumerate(f, 1) if line.strip())

    def line_of_row(self, path: Path, row: int, quoting: str) -> Optional[int]:
        return next((n for n, _ in itertools.islice(self._lines(path), row, None)), None)

    def line_without(self, path: Path, column: str, quoting: str) -> Optional[int]:
        for n, line in self._lines(path):
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
            return utf8_error(path)
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

    def _records(self, path: Path, quoting: str) -> Iterator[tuple[int, list[str], int]]:
        """Each non-empty record of the file, the header first, with the lines it starts and ends on (pandas and
        datasets skip blank lines too)."""
        options = self.options(quoting)
        with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
            reader = csv.reader(f, delimiter=options["sep"], quoting=options["quoting"])
            start = 1
            for record in reader:
                if record:
                    yield start, record, reader.line_num
                start = reader.line_num + 1

    def line_of_row(self, path: Path, row: int, quoting: str) -> Optional[int]:
        return next((start for start, _, _ in itertools.islice(self._records(path, quoting), row + 1, None)), None)

    def line_without(self, path: Path, column: str, quoting: str) -> Optional[int]:
        at = None  # the column's position (None: the header still to come)
        for start, record, end in self._records(path, quoting):
            if at is None:
                if column not in record:
                    return None
                at = record.index(column)
            elif len(record) <= at and end == start:  # (one over several lines is a quoted field run on to a later
                return start  # quote, which TaskSplit warns of: task.quoting)
        return None


class Tsv(Csv):
    """Tab-separated values, a header first."""

    name, sep, holds = "tsv", "\t", "a tab"

    def unquoted_rows(self, path: Path) -> Optional[int]:
        """Its lines after the header, if each splits into the header's number of fields; else None (quoted
        fields, ragged lines)."""
        with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
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
