"""Errors a user can fix (pure Python: the model code raises them too): a ``UserError`` names the file (and line),
key or checkpoint and says what to do; ``gpt1.app.runner`` reports it as one line. ``ranged``: a config field's
bounds."""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Optional

EXIT_USER_ERROR = 2


class UserError(Exception):
    """A problem with the user's input or configuration, reported as one line (no traceback)."""


class ConfigError(UserError, ValueError):
    """An invalid configuration value (names the key)."""


class DataError(UserError, ValueError):
    """Invalid or missing data (names the file, line, column or row)."""


class CheckpointError(UserError, ValueError):
    """A missing, corrupt, foreign or mismatched checkpoint (names the path)."""


def exception_chain(e: BaseException) -> list[BaseException]:
    """``e`` and the exceptions it came from (``__cause__``, else ``__context__``: Hydra re-raises in ``except``)."""
    found: list[BaseException] = []
    while e is not None and not any(e is f for f in found):
        found.append(e)
        e = e.__cause__ or e.__context__
    return found


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
    """A dataclass field (``default``, or ``factory`` for a list) whose value, or each value of a list, ``check_config``
    keeps within ``ge <= v``, ``gt < v``, ``v < lt``, ``v <= le`` (None and missing values pass); ``hint``: what the
    special values mean, said when a value is refused (e.g. "-1: no limit")."""
    bounds = {op: bound for op, bound in (("ge", ge), ("gt", gt), ("lt", lt), ("le", le)) if bound is not None}
    return dataclasses.field(default=default, default_factory=factory, metadata={"bounds": bounds, "hint": hint})


_BOUNDS = {"ge": (operator.ge, ">="), "gt": (operator.gt, ">"), "lt": (operator.lt, "<"), "le": (operator.le, "<=")}


def out_of_bounds(metadata: Any, value: Any) -> Optional[str]:
    """What ``value`` (or an item of it, a list) of a ``ranged`` field (its ``metadata``) should be, where it is out
    of the field's bounds: "choose a value >= 0 and < 1 (hint)"; None where it is within them, None or not ranged."""
    bounds = metadata.get("bounds") if metadata else None
    if not bounds or value is None:
        return None
    for v in value if isinstance(value, (list, tuple)) else [value]:
        if not all(_BOUNDS[op][0](v, bound) for op, bound in bounds.items()):
            rule = " and ".join(f"{_BOUNDS[op][1]} {bound}" for op, bound in bounds.items())
            return f"choose a value {rule}" + (f" ({metadata['hint']})" if metadata.get("hint") else "")
    return None


def fields_out_of_bounds(instance: Any) -> Optional[str]:
    """The first field of the dataclass ``instance`` whose value is not of its declared type (int, float, str, bool)
    or is out of its ``ranged`` bounds, as "name=value: what to give" (``out_of_bounds``); None where all are
    right. For a dataclass built from a file (a checkpoint's model config, an HF config.json), which no schema typed."""
    for field in dataclasses.fields(instance):
        value = getattr(instance, field.name)
        name = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
        kind, words = _SCALARS.get(name, (None, ""))
        if kind is not None and not isinstance(value, kind):
            return f"{field.name}={value!r}: give {words}"
        rule = out_of_bounds(field.metadata, value) if kind is not None else None
        if rule is not None:
            return f"{field.name}={value!r}: {rule}"
    return None


_SCALARS = {
    "int": (int, "an integer"),
    "float": ((int, float), "a number"),
    "str": (str, "a string"),
    "bool": (bool, "true or false"),
}
"""A field's declared type (its name, as ``from __future__ import annotations`` leaves it) -> what its value is, in
Python and in words."""
