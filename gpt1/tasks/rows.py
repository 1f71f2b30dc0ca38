"""A task split's rows as text: each row's texts joined, its choices gathered, its label mapped, from the values of
its columns (``gpt1.tasks.split.TaskSplit.read`` reads the rows and names them in errors: ``locate``).

``index`` is each row's position in its split (counting from 0, before any slice), as in GLUE's prediction files;
errors name rows by it. A label of -1, null, "" or NaN means "no gold label": such rows are dropped (counted); a
split with no label at all (or no label column: a test split) is unlabeled, for predictions only. A label whose text
(``str(value)``) is one of ``label_names`` maps to its position there (strings, letters, "1"/"2"); other ints pass
through as class indices; regression labels (``num_labels: 1``) are floats. ``label_names`` default to the names of a
``ClassLabel`` column (hub datasets, parquet files written by datasets).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Optional

import numpy as np

from gpt1.core.errors import DataError
from gpt1.tasks.spec import TaskConfig

Locate = Callable[[int], str]
"""Where a row of the split (its ``index``) is, as an error names it: ``path:line``, or ``where row N``."""


def texts_of(cols: dict[str, list], columns: list[str], index: np.ndarray, locate: Locate) -> list[str]:
    """Each row's text: its columns' values joined with a space, empty ones skipped."""
    parts = [[_text(v, locate, int(index[r]), c) for r, v in enumerate(cols[c])] for c in columns]
    return parts[0] if len(parts) == 1 else [" ".join(p for p in row if p) for row in zip(*parts, strict=True)]


def _text(value: Any, locate: Locate, row: int, column: str) -> str:
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):  # an empty cell
        return ""
    if isinstance(value, (list, dict)):
        raise DataError(f"{locate(row)}: column {column!r} holds a {type(value).__name__}, not a text")
    return str(value)


def choices_of(
    cols: dict[str, list], columns: list[str], index: np.ndarray, locate: Locate, where: str
) -> list[list[str]]:
    """Each row's choices: from one list-valued column, or from several columns (trailing nulls: fewer choices)."""
    listed = len(columns) == 1 and any(isinstance(v, (list, tuple)) for v in cols[columns[0]] if v is not None)
    out = []
    for r, values in enumerate(zip(*(cols[c] for c in columns), strict=True)):
        row = int(index[r])
        if listed:
            values = values[0] or []
            if any(v is None for v in values):
                raise DataError(f"{locate(row)}: a choice in column {columns[0]!r} is null")
            names = [columns[0]] * len(values)
        else:
            present = [v is not None for v in values]
            k = present.index(False) if False in present else len(values)
            if any(present[k:]):
                raise DataError(
                    f"{locate(row)}: choice column {columns[k]!r} is empty but a later one "
                    "is not (only the last choices of a row may be missing)"
                )
            values, names = values[:k], columns[:k]
        if not values:
            raise DataError(f"{locate(row)}: no choices in {columns} (task.choices)")
        out.append([_text(v, locate, row, c) for v, c in zip(values, names, strict=True)])
    if len(columns) == 1 and not listed and out:
        raise DataError(
            f"{where}: task.choices is one column {columns[0]!r} of single texts: give several choice "
            "columns, or one column holding a list of choices per row"
        )
    return out


def labels_of(
    values: list,
    task: TaskConfig,
    names: Optional[list[str]],
    choices: Optional[list[list[str]]],
    index: np.ndarray,
    locate: Locate,
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
                    f"{locate(int(index[r]))}: label {v!r} in column {column!r} "
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
                f"{locate(int(index[r]))}: label {v!r} in column {column!r} "
                f"is not one of task.label_names {list(names)}"
            )
        else:
            raise DataError(
                f"{locate(int(index[r]))}: label {v!r} in column {column!r} "
                "is not a class index (0, 1, ...): list the labels in task.label_names, or set "
                "task.num_labels: 1 for scores"
            )
        if choices is not None and out[r] >= len(choices[r]):
            raise DataError(
                f"{locate(int(index[r]))}: label {v!r} picks choice {out[r]} but the row has {len(choices[r])} choices"
            )
    return out


def _no_label(v: Any) -> bool:
    """-1, null, "" or NaN: no gold label."""
    if v is None:
        return True
    if isinstance(v, str):
        return v.strip() in ("", "-1")
    return isinstance(v, (int, float, np.number)) and not isinstance(v, bool) and (v == -1 or math.isnan(v))
