"""Errors a user can fix, and the one place they are reported: the ``command`` decorator of every gpt1 command.

Raise ``UserError`` (or a subclass) where the problem is known, with a message that names the file (and line),
column, config key or checkpoint and says what to do. ``command`` turns it, Hydra's configuration errors (a
misspelt key, a wrong type, a missing value, an unknown group option) and values outside their schema field's
bounds (``ranged``) into one line on stderr, ``error: ...``, and exit status 2. ``HYDRA_FULL_ERROR=1`` shows the
traceback instead. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import hydra
from hydra._internal import utils as hydra_utils
from hydra.errors import HydraException
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gpt1.allocator import tune_cpu_allocator

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
    default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING, ge: float | None = None,
    gt: float | None = None, lt: float | None = None, le: float | None = None, hint: str = "",
) -> Any:
    """A dataclass field (``default``, or ``factory`` for a list) whose value, or each value of a list, ``check_ranges``
    keeps within ``ge <= v``, ``gt < v``, ``v < lt``, ``v <= le`` (None and missing values pass); ``hint``: what the
    special values mean, said when a value is refused (e.g. "-1: no limit")."""
    bounds = {op: bound for op, bound in (("ge", ge), ("gt", gt), ("lt", lt), ("le", le)) if bound is not None}
    return dataclasses.field(default=default, default_factory=factory, metadata={"bounds": bounds, "hint": hint})


_BOUNDS = {"ge": (operator.ge, ">="), "gt": (operator.gt, ">"), "lt": (operator.lt, "<"), "le": (operator.le, "<=")}


def check_ranges(cfg: DictConfig, prefix: str = "") -> None:
    """Refuse a value outside its schema field's ``ranged`` bounds, in ``cfg`` and every config below it: a
    ``ConfigError`` naming the key. Every command's entry function (``gpt1.pretrain.train``, ...) calls it first,
    so that a bad value fails at start-up rather than when it is first used (after a tokenizer is trained, a corpus
    packed, a model built), from the command line and from Python alike."""
    schema = OmegaConf.get_type(cfg)
    fields = {f.name: f.metadata for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else {}
    for key in cfg:
        node = cfg._get_node(key)
        if isinstance(node, DictConfig):
            check_ranges(node, f"{prefix}{key}.")
        elif "bounds" in fields.get(key, {}) and not OmegaConf.is_missing(cfg, key) and cfg[key] is not None:
            value, bounds = cfg[key], fields[key]["bounds"]
            for v in value if isinstance(value, ListConfig) else [value]:
                if not all(_BOUNDS[op][0](v, bound) for op, bound in bounds.items()):
                    rule = " and ".join(f"{_BOUNDS[op][1]} {bound}" for op, bound in bounds.items())
                    hint = f" ({fields[key]['hint']})" if fields[key]["hint"] else ""
                    raise ConfigError(f"{prefix}{key}={value}: out of range; choose a value {rule}{hint}")


_LIBRARY_USER_ERRORS = {
    # submitit, when hydra/launcher=submitit_slurm starts on a machine without SLURM
    'Could not detect "srun"': "hydra/launcher=submitit_slurm submits to SLURM, but this machine has no srun: run the "
    "command on the cluster's login node, or here with hydra/launcher=submitit_local (or no launcher)",
    # Hydra, when hydra/launcher=submitit_slurm or submitit_local names the plugin's launcher and it is not installed
    "Unknown plugin class : 'hydra_plugins.hydra_submitit_launcher.": "hydra/launcher=submitit_slurm and "
    "submitit_local need Hydra's submitit launcher, which is not installed: pip install 'gpt1[slurm]'",
}
"""A library's error message (its start) -> the one line that says what to do."""


def user_message(e: BaseException) -> str | None:
    """The one-line report of a user-fixable error, or None for a bug (which keeps its traceback)."""
    if isinstance(e, UserError):
        return " ".join(str(e).split())
    for start, message in _LIBRARY_USER_ERRORS.items():
        if str(e).startswith(start):
            return message
    if type(e).__module__.startswith("submitit."):  # a job of a -m run on SLURM failed: which, and its error
        from gpt1.slurm import failed_job_message

        return failed_job_message(e)
    cause = e.__cause__ if isinstance(e.__cause__, OmegaConfBaseException) else e
    if isinstance(cause, OmegaConfBaseException):  # e.g. Key 'n_layr' not in 'GPTConfig' / cannot convert 'abc'
        first = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        key = getattr(cause, "full_key", None)
        hint = " (`--cfg job` prints every key)" if "not in" in first else ""
        return f"{key}: {first}{hint}" if key and key not in first else first + hint
    if isinstance(e, HydraException):  # an unknown config group option, a malformed override
        return _one_line(str(e).split("Config search path")[0])
    return None


def _one_line(text: str) -> str:
    """Hydra's multi-line messages on one line: the lines after one ending in ':' become a comma-separated list."""
    out: list[str] = []
    listing = False
    for line in (raw.strip() for raw in text.splitlines()):
        if not line:
            listing = False
        elif listing:
            out[-1] += (" " if out[-1].endswith(":") else ", ") + line
        else:
            out.append(line)
            listing = line.endswith(":")
    return "; ".join(out)


def user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn``; a user error it raises (see ``user_message``) becomes one line on stderr and exit status 2."""

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001  (re-raised unless it is a user error)
            message = user_message(e)
            if message is None or os.environ.get("HYDRA_FULL_ERROR") == "1":
                raise
            print(f"error: {message}", file=sys.stderr, flush=True)
            sys.exit(EXIT_USER_ERROR)

    return guarded


@contextmanager
def _one_line_config_errors() -> Iterator[None]:
    """Report Hydra's own errors (composing the config from the command line) through ``user_errors`` too."""
    original = hydra_utils.run_and_report
    hydra_utils.run_and_report = lambda func: original(user_errors(func))
    try:
        yield
    finally:
        hydra_utils.run_and_report = original


def command(config_name: str) -> Callable[[Callable[[Any], Any]], Callable[[], None]]:
    """``@hydra.main`` for a gpt1 command: its config ``conf/<config_name>.yaml`` from the installed package, user
    errors (in the configuration or raised by the command) reported as one line, and the CPU allocator tuned
    (``gpt1.allocator``) in every process that runs it, DDP's other ranks included."""

    def decorate(fn: Callable[[Any], Any]) -> Callable[[], None]:
        hydra_main = hydra.main(version_base="1.3", config_path="pkg://gpt1.conf", config_name=config_name)(
            user_errors(fn)
        )

        @functools.wraps(fn)
        def main() -> None:
            tune_cpu_allocator()  # before the first large allocation
            with _one_line_config_errors():
                hydra_main()

        return main

    return decorate
