"""Errors a user can fix (pure Python: the model code raises them too).

Raise ``UserError`` (or a subclass) where the problem is known, with a message that names the file (and line),
column, config key or checkpoint and says what to do. ``gpt1.app.runner`` reports them as one line, ``error: ...``, with
exit status 2. ``ranged`` declares a config field's bounds, which ``gpt1.app.ranges.check_ranges`` enforces.
"""

from __future__ import annotations

import dataclasses
from typing import Any

EXIT_USER_ERROR = 2


class UserError(Exception):
    """A problem with the user's input or configuration, reported as one line (no traceback)."""


class ConfigError(UserError, ValueError):
    """An invalid configuration value (names the key)."""


class DataError(UserError, ValueError):
    """Invalid or missing data (names the file, line, column or row)."""


class CheckpointError(UserError, ValueError):
    """A missing, corrupt, foreign or mismatched checkpoint (names the path)."""


def ranged(
    default: Any = dataclasses.MISSING,
    *,
    factory: Any = dataclasses.MISSING,
    ge: float | None = None,
    gt: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    hint: str = "",
) -> Any:
    """A dataclass field (``default``, or ``factory`` for a list) whose value, or each value of a list, ``check_ranges``
    keeps within ``ge <= v``, ``gt < v``, ``v < lt``, ``v <= le`` (None and missing values pass); ``hint``: what the
    special values mean, said when a value is refused (e.g. "-1: no limit")."""
    bounds = {op: bound for op, bound in (("ge", ge), ("gt", gt), ("lt", lt), ("le", le)) if bound is not None}
    return dataclasses.field(default=default, default_factory=factory, metadata={"bounds": bounds, "hint": hint})
