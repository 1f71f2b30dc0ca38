"""Raw text sources as ``datasets.Dataset``s: a ``Source`` is local files given by globs (``FileSource``) or a split
of a Hugging Face hub dataset (``HubSource``).

Shared by pre-training (a document per .txt file or per row) and fine-tuning (an example per row). The format of
a local file comes from its extension (``gpt1.data.formats``); rows keep the order of the files and, within a file,
their own. A file that does not read fails in one ``DataError`` line naming it and its line (``read_error``).
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Optional

import datasets

from gpt1.core.compat import csv_builder_logger, dataset_fingerprint, prepared_split
from gpt1.core.errors import DataError, exception_chain
from gpt1.core.file_kinds import binary_kind, describe, head
from gpt1.core.quoting import Quoting
from gpt1.data.conversion import convert
from gpt1.data.encodings import read_encoding
from gpt1.data.formats import Format, file_format
from gpt1.data.read_errors import warn_invalid
from gpt1.data.sample import own_sample_hint


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


def _check_columns(where: str, have: Sequence[str], want: Sequence[str]) -> None:
    missing = [c for c in want if c not in have]
    if missing:
        raise DataError(f"{where} has no column {', '.join(map(repr, missing))}; its columns are {list(have)}")


def checked_format(path: Path) -> Format:
    """``path``'s format, from its extension, and its content checked against it: a ``DataError`` listing the
    supported formats if the extension is unknown, naming what the file is if its first bytes say another kind (an
    image named .txt, a pickle named .jsonl), or naming its encoding and the conversion to run
    (``gpt1.data.encodings.read_encoding``)."""
    try:
        fmt = file_format(path)
    except ValueError as e:
        raise DataError(str(e)) from e
    first = head(path)
    kind = binary_kind(first) or ("NUL bytes" if first and not first.strip(b"\x00") else None)
    if (kind is not None or fmt.signature is not None) and kind != fmt.signature:
        what = kind or describe(path)
        raise DataError(f"{path} is {what}, not a {fmt.name} file: give a {path.suffix} file of {fmt.name} data")
    if fmt.encoded:
        read_encoding(path, fmt.text)
    return fmt


def load_files(
    files: Sequence[str | os.PathLike],
    columns: Optional[Sequence[str]] = None,
    cache_dir: str | os.PathLike | None = None,
    quoting: str = "minimal",
) -> datasets.Dataset:
    """Load ``files`` (any mix of ``FORMATS``) into one Dataset, rows in file order.

    columns: keep only these, checked file by file from the headers (a missing one names the file and the columns
    it has); needed to mix formats whose other columns differ. cache_dir: datasets' cache (None: its default).
    quoting: of .csv and .tsv files, "minimal" or "none" (``gpt1.data.formats``).
    """
    parts = []
    for builder in prepared_builders(files, columns, cache_dir, quoting):
        ds = builder.as_dataset(split="train")
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
    quoting: str = "minimal",
) -> Iterator[datasets.DatasetBuilder]:
    """For each run of ``files`` of one format, in order: datasets' builder of the run, its rows
    converted into datasets' cache (split "train"); what ``load_files`` loads (its arguments), not yet mapped."""
    if not files:
        raise ValueError("load_files: no files given")

    def kind(path: Path) -> tuple[Format, Optional[str]]:  # its format, and a .txt file's codec (a builder takes one)
        fmt = checked_format(path)
        encoding = read_encoding(path, fmt.text) if fmt.encoded else None
        return fmt, encoding.file_codec if fmt.text else None

    for (fmt, codec), group in itertools.groupby(map(Path, files), key=kind):
        group = list(group)
        if columns is not None:
            for path in group:
                _check_columns(str(path), fmt.columns(path, quoting), columns)
        if fmt.text:
            for path in group:
                warn_invalid(path, read_encoding(path, text=True))
        # its "Failed to read file" log: the caller reports the file in one line; datasets' bars ("Downloading
        # data: 40/40 files" for files already here) say nothing of local files
        with _quiet(csv_builder_logger()), _no_progress_bars():
            builder = datasets.load_dataset_builder(
                fmt.builder,
                data_files=[str(p) for p in group],
                cache_dir=_str(cache_dir),
                **fmt.options(quoting),
                **({"encoding": codec} if codec else {}),
            )
            convert(builder)
        split = builder.info.splits.get("train") if builder.info.splits else None
        if split is None or not split.num_examples:
            named = ", ".join(map(str, group))
            has = "has" if len(group) == 1 else "have"
            what = f"{has} a header but no rows" if fmt.header else f"{has} no rows"
            raise DataError(f"{named} {what}: give {'it' if len(group) == 1 else 'them'} examples")
        yield builder


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

    def key(self) -> str:
        """Changes whenever its rows may, without reading them."""
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

    def columns(self, path: Path) -> list[str]:
        """The column names of one of the files, from its header (the first record of a JSON file)."""
        with self._reading([path]):
            return checked_format(path).columns(path, self.quoting)

    def key(self) -> str:
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
            for builder in prepared_builders(files, [column], self.cache_dir, quoting=self.quoting):
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
        except (datasets.exceptions.DatasetGenerationError, ValueError) as e:  # malformed JSON/CSV/header, bad UTF-8
            raise DataError(read_error(files, e, self.quoting)) from e
        except OSError as e:  # a damaged table (pyarrow's "Couldn't deserialize thrift"), not a file system's error
            if e.filename:
                raise
            raise DataError(read_error(files, e, self.quoting)) from e


class HubSource(Source):
    """One split of a Hugging Face hub dataset, loaded on first use; ``where`` names it in errors. data_dir: the files
    of a dataset that must be obtained by hand (e.g. Story Cloze)."""

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
        with _loading(self.where):
            builder = datasets.load_dataset_builder(
                self.name, self.config, cache_dir=_str(self.cache_dir), data_dir=_str(self.data_dir)
            )
            convert(builder)
        return builder

    @cached_property
    def dataset(self) -> datasets.Dataset:
        """The whole split."""
        with _loading(self.where):
            return self.builder.as_dataset(split=self.split)

    def key(self) -> str:
        """The datasets fingerprint of the split."""
        return dataset_fingerprint(self.dataset)

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
    cause = exception_chain(error)[-1]
    detail = (str(cause).strip().splitlines() or [""])[0]
    return (
        f"{', '.join(map(str, files))}: could not be read ({type(cause).__name__}: {detail}): give an intact copy "
        "(a file cut short or damaged does not read)"
    )


def _str(path: str | os.PathLike | None) -> Optional[str]:
    return None if path is None else str(path)
