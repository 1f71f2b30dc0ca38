"""Reading a task's split: its rows (local files or a hub split) -> labelled examples as text.

``index`` is a row's position in its split (counting from 0, before any slice), as in GLUE's prediction files;
errors name rows by it. A label of -1, null, "" or NaN means "no gold label": such rows are dropped (counted); a
split with no label at all (or no label column: a test split) is unlabeled, for predictions only. A label whose text
(``str(value)``) is one of ``label_names`` maps to its position there (strings, letters, "1"/"2"); other ints pass
through as class indices; regression labels (``num_labels: 1``) are floats. ``label_names`` default to the names of a
``ClassLabel`` column (hub datasets, parquet files written by datasets).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import datasets
import numpy as np

from gpt1.core.errors import DataError
from gpt1.core.quoting import Quoting
from gpt1.data.base import cache_key
from gpt1.data.formats import file_format, line_without, row_location
from gpt1.data.sources import FileSource, HubSource, Source
from gpt1.tasks.examples import Examples
from gpt1.tasks.spec import SplitSpec, TaskConfig, as_columns

log = logging.getLogger(__name__)


class TaskSource:
    """Where one split's rows come from (a ``Source``: local files, columns checked from the headers, or a hub
    split), and which of them it needs."""

    def __init__(self, task: TaskConfig, spec: SplitSpec, cache_dir: Optional[Path]) -> None:
        self.task, self.spec, self.quoting = task, spec, str(task.quoting)
        self.extra = {key: getattr(task, key) for key in task.kind.columns if getattr(task, key) is not None}
        self.columns = [
            *as_columns(task.text),
            *as_columns(task.text_pair),
            *as_columns(task.choices),
            *self.extra.values(),
        ]
        datasets_cache = None if cache_dir is None else str(cache_dir / "datasets")
        self.files: Optional[list[Path]] = None
        self.source: Source
        if task.data_files is not None:
            self.source = FileSource(
                task.data_files[spec.name], f"task.data_files.{spec.name}", datasets_cache, self.quoting
            )
            self.files = self.source.files
            self.where = str(self.files[0]) if len(self.files) == 1 else f"task.data_files.{spec.name}"
        else:
            self.where = f"{task.dataset} ({task.dataset_config}) split {spec.name}"
            where = f"{self.where} (task.splits.{spec.role})"
            self.source = HubSource(task.dataset, task.dataset_config, spec.name, where, datasets_cache, task.data_dir)
        self.has_label = (
            self._check_files() if self.files is not None else self._check(self.where, self.source.dataset.column_names)
        )

    def _check(self, where: str, have: Sequence[str]) -> bool:
        """Raise for a missing text/choice column, or a missing label column outside a test split; return whether
        the label column is there."""
        t = self.task
        for key, value in (("text", t.text), ("text_pair", t.text_pair), ("choices", t.choices), *self.extra.items()):
            missing = [c for c in as_columns(value) if c not in have]
            if missing:
                raise DataError(
                    f"{where}: no column {missing[0]!r} (task.{key}); its columns are {list(have)}: set task.{key} to "
                    "one of them"
                )
        if t.label in have:
            return True
        if self.spec.role != "test":
            raise DataError(
                f"{where}: no label column {t.label!r} (task.label); its columns are {list(have)}: set task.label to "
                "the one that holds the labels"
            )
        return False

    def _check_files(self) -> bool:
        labelled = []
        for path in self.files:
            if path.stat().st_size == 0:
                raise DataError(f"{path} is empty (task.data_files.{self.spec.name}): give it rows, or another file")
            labelled.append(self._check(str(path), self.source.columns(path)))
        if any(labelled) and not all(labelled):
            without = [str(p) for p, has in zip(self.files, labelled, strict=True) if not has]
            raise DataError(
                f"{without[0]} has no label column {self.task.label!r} but other files of "
                f"task.data_files.{self.spec.name} do: label all of them or none"
            )
        return all(labelled)

    @property
    def key(self) -> str:
        """Changes whenever the split's rows may: the files (paths, sizes, mtimes) and quoting, or the hub
        fingerprint."""
        return cache_key(self.source.key(), self.spec.name, self.spec.start, self.spec.stop, self.task.split_seed)

    def rows(self) -> tuple[datasets.Dataset, np.ndarray]:
        """The split's rows in the needed columns, sliced (in ``task.split_seed``'s order when set), and the position
        of each in the whole split (n,) int64."""
        ds = self.source.rows(self.columns + ([self.task.label] if self.has_label else []))
        if self.files is not None:
            self._warn_if_quotes_swallowed_rows(len(ds))
        start, stop = self.spec.bounds(len(ds))
        if self.task.split_seed is not None and (self.spec.start or self.spec.stop):  # train_test_split's order
            index = np.random.RandomState(self.task.split_seed).permutation(len(ds))[start:stop].astype(np.int64)
            return ds.select(index), index
        index = np.arange(start, stop, dtype=np.int64)
        return (ds if (start, stop) == (0, len(ds)) else ds.select(range(start, stop))), index

    def _warn_if_quotes_swallowed_rows(self, rows: int) -> None:
        """.tsv files read with quoting minimal into fewer rows than their lines, each of the header's number of
        fields, give: a field that starts with a quote ran, as quoted, to the next quote (GLUE's files)."""
        if self.quoting != Quoting.minimal:
            return
        lines = [file_format(p).unquoted_rows(p) for p in self.files]
        if None not in lines and sum(lines) > rows:
            log.warning(
                "%s: %d rows read from %d lines: a field that starts with a double quote was read as quoted "
                "(task.quoting=minimal), up to the next quote, across tabs and lines; if the quotes are "
                "text, as in GLUE's .tsv files, set task.quoting=none",
                self.where,
                rows,
                sum(lines),
            )

    def read(self) -> Examples:
        """The split's examples: texts joined, choices gathered, labels mapped, rows without a label dropped."""
        ds, index = self.rows()
        cols = ds.to_dict()
        n, t, where = len(ds), self.task, self.where
        text = _texts(cols, as_columns(t.text), where, index)
        pair = _texts(cols, as_columns(t.text_pair), where, index) if t.text_pair is not None else None
        choices = _choices(cols, as_columns(t.choices), where, index) if t.choices is not None else None
        if self.extra:  # the type makes its examples of them (Winograd: the pronoun substituted)
            extra = {key: cols[column] for key, column in self.extra.items()}
            text, pair, choices = t.kind.examples(t, extra, text, pair, choices, where, index)
        feature = ds.features.get(t.label)
        source_names = list(feature.names) if isinstance(feature, datasets.ClassLabel) else None
        if not self.has_label:
            return Examples(text, pair, choices, None, index, n, source_names)
        spec = self.spec
        if n == 0 and spec.role != "test":
            sliced = f" (task.splits.{spec.role}: {spec.name}[{spec.start or ''}:{spec.stop or ''}])"
            raise DataError(
                f"{where}: the {spec.role} split has no rows"
                f"{sliced if spec.start or spec.stop else ''}: give it examples"
            )
        labels = _labels(cols[t.label], t, t.label_names or source_names, choices, where, index)
        keep = ~np.isnan(labels) if t.regression else labels >= 0
        if not keep.all() and self.files is not None:  # dropped rows: none may be a row with its label field missing
            for path in self.files:
                line = line_without(path, t.label, self.quoting)
                if line is not None:
                    raise DataError(
                        f"{path}:{line}: the row has no field for the label column {t.label!r} "
                        "(task.label), as if a field were missing: fix the row (an empty label field, -1 "
                        "or null marks a row without a gold label, which is left out)"
                    )
        if not keep.any():
            if self.spec.role != "test":
                raise DataError(
                    f"{where}: no row has a label in column {t.label!r} (task.label); "
                    f"the {self.spec.role} split needs labels"
                )
            return Examples(text, pair, choices, None, index, n, source_names)
        if not keep.all():
            rows = np.flatnonzero(keep).tolist()
            text = [text[i] for i in rows]
            pair = None if pair is None else [pair[i] for i in rows]
            choices = None if choices is None else [choices[i] for i in rows]
        return Examples(text, pair, choices, labels[keep], index[keep], n, source_names)


def _texts(cols: dict[str, list], columns: list[str], where: str, index: np.ndarray) -> list[str]:
    """Each row's text: its columns' values joined with a space, empty ones skipped."""
    parts = [[_text(v, where, int(index[r]), c) for r, v in enumerate(cols[c])] for c in columns]
    return parts[0] if len(parts) == 1 else [" ".join(p for p in row if p) for row in zip(*parts, strict=True)]


def _text(value: Any, where: str, row: int, column: str) -> str:
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):  # an empty cell
        return ""
    if isinstance(value, (list, dict)):
        raise DataError(f"{row_location(where, row)}: column {column!r} holds a {type(value).__name__}, not a text")
    return str(value)


def _choices(cols: dict[str, list], columns: list[str], where: str, index: np.ndarray) -> list[list[str]]:
    """Each row's choices: from one list-valued column, or from several columns (trailing nulls: fewer choices)."""
    listed = len(columns) == 1 and any(isinstance(v, (list, tuple)) for v in cols[columns[0]] if v is not None)
    out = []
    for r, values in enumerate(zip(*(cols[c] for c in columns), strict=True)):
        row = int(index[r])
        if listed:
            values = values[0] or []
            if any(v is None for v in values):
                raise DataError(f"{row_location(where, row)}: a choice in column {columns[0]!r} is null")
            names = [columns[0]] * len(values)
        else:
            present = [v is not None for v in values]
            k = present.index(False) if False in present else len(values)
            if any(present[k:]):
                raise DataError(
                    f"{row_location(where, row)}: choice column {columns[k]!r} is empty but a later one "
                    "is not (only the last choices of a row may be missing)"
                )
            values, names = values[:k], columns[:k]
        if not values:
            raise DataError(f"{row_location(where, row)}: no choices in {columns} (task.choices)")
        out.append([_text(v, where, row, c) for v, c in zip(values, names, strict=True)])
    if len(columns) == 1 and not listed and out:
        raise DataError(
            f"{where}: task.choices is one column {columns[0]!r} of single texts: give several choice "
            "columns, or one column holding a list of choices per row"
        )
    return out


def _labels(
    values: list,
    task: TaskConfig,
    names: Optional[list[str]],
    choices: Optional[list[list[str]]],
    where: str,
    index: np.ndarray,
) -> np.ndarray:
    """(N,) labels: float32 scores (NaN: none) for regression, else int64 class / choice indices (-1: none)."""
    column = task.label
    if task.regression:
        out = np.empty(len(values), dtype=np.float32)
        for r, v in enumerate(values):
            if _no_label(v):
                out[r] = np.nan
                continue
            try:
                out[r] = float(v)
            except (TypeError, ValueError):
                raise DataError(
                    f"{row_location(where, index[r], task.quoting)}: label {v!r} in column {column!r} "
                    "is not a number (task.num_labels is 1: regression)"
                ) from None
        return out
    lookup = {str(n): i for i, n in enumerate(names or [])}
    out = np.empty(len(values), dtype=np.int64)
    for r, v in enumerate(values):
        if _no_label(v):
            out[r] = -1
            continue
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if str(v) in lookup:
            out[r] = lookup[str(v)]
        elif isinstance(v, (int, np.integer)) and v >= 0 and (names is None or v < len(names)):
            out[r] = v
        elif names is not None:
            raise DataError(
                f"{row_location(where, index[r], task.quoting)}: label {v!r} in column {column!r} "
                f"is not one of task.label_names {list(names)}"
            )
        else:
            raise DataError(
                f"{row_location(where, index[r], task.quoting)}: label {v!r} in column {column!r} "
                "is not a class index (0, 1, ...): list the labels in task.label_names, or set "
                "task.num_labels: 1 for scores"
            )
        if choices is not None and out[r] >= len(choices[r]):
            raise DataError(
                f"{row_location(where, index[r], task.quoting)}: label {v!r} picks choice {out[r]} "
                f"but the row has {len(choices[r])} choices"
            )
    return out


def _no_label(v: Any) -> bool:
    """-1, null, "" or NaN: no gold label."""
    if v is None:
        return True
    if isinstance(v, str):
        return v.strip() in ("", "-1")
    return isinstance(v, (int, float, np.number)) and not isinstance(v, bool) and (v == -1 or math.isnan(v))
