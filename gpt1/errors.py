"""The error type for problems a user can fix (bad input, bad configuration), and the command-boundary handler.

Raise ``UserError`` (or a subclass) where the problem is known, with a message that names the file (and line),
column, config key or checkpoint and says what to do. Each command's Hydra function is wrapped by
``user_errors``: a ``UserError`` prints ``error: <message>`` on stderr and exits with status 2, without a
traceback; ``HYDRA_FULL_ERROR=1`` re-raises it with the traceback. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class UserError(Exception):
    """A problem with the user's input or configuration, reported as one line (no traceback)."""


class ConfigError(UserError, ValueError):
    """An invalid configuration value (names the key)."""


class DataError(UserError, ValueError):
    """Invalid or missing data (names the file, line, column or row)."""


class CheckpointError(UserError, ValueError):
    """A missing, corrupt, foreign or mismatched checkpoint (names the path)."""


def user_errors(fn: F) -> F:
    """Wrap a command's entry function: a ``UserError`` becomes one line on stderr and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as e:
            if os.environ.get("HYDRA_FULL_ERROR") == "1":
                raise
            print(f"error: {e}", file=sys.stderr, flush=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]
