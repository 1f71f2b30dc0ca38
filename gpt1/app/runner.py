"""How a gpt1 command runs (``command``): a Hydra app whose user errors (a ``UserError``, Hydra's and OmegaConf's
configuration errors) end in one line on stderr, ``error: ...``, exit status 2 (``user_errors``; ``gpt1 bench`` and
``gpt1 report`` use it too); ``HYDRA_FULL_ERROR=1`` shows the traceback. Anything else is a bug and keeps its
traceback."""

from __future__ import annotations

import argparse
import atexit
import functools
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import hydra
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf.errors import OmegaConfBaseException

import gpt1
from gpt1.app.config_checks import check_choices, check_config
from gpt1.app.config_files import check_config_file
from gpt1.app.recorded import job_fields, with_record, with_replayed
from gpt1.app.registration import register
from gpt1.app.suggest import config_hint, given_with, what_to_give
from gpt1.app.sweep import ResumingLauncher
from gpt1.core import compat
from gpt1.core.errors import EXIT_USER_ERROR, ConfigError, UserError, exception_chain
from gpt1.core.files import WriteError, atomic_file, path_error, write_error
from gpt1.core.memory import memory_line, peak_memory
from gpt1.core.provenance import recorded_attempt
from gpt1.core.run_lock import hold, let_go, run_lock
from gpt1.cpu.settings import configure as configure_cpu

_LIBRARY_USER_ERRORS = {
    # submitit, when hydra/launcher=submitit_slurm starts on a machine without SLURM
    'Could not detect "srun"': "hydra/launcher=submitit_slurm submits to SLURM, but this machine has no srun: run the "
    "command on the cluster's login node, or here with hydra/launcher=submitit_local (or no launcher)",
    # Hydra, when hydra/launcher=submitit_slurm or submitit_local names the plugin's launcher and it is not installed
    "Unknown plugin class : 'hydra_plugins.hydra_submitit_launcher.": "hydra/launcher=submitit_slurm and "
    "submitit_local need Hydra's submitit launcher, which is not installed: pip install 'gpt1[slurm]'",
    # Hydra, when -m (--multirun) is given with --cfg, --info or --shell-completion, or two of those together
    "Only one of --run, --multirun, --cfg, --info and --shell_completion can be specified": "-m (--multirun), --cfg, "
    "--info and --shell-completion cannot be combined: --cfg job without -m prints a job's config (with one value "
    "of each swept key); -m alone runs the sweep",
}
"""A library's error message (its start) -> the one line that says what to do."""


def user_message(e: BaseException) -> str | None:
    """The one-line report of a user-fixable error, or None for a bug (which keeps its traceback)."""
    if isinstance(e, UserError):
        return " ".join(str(e).split())
    misplaced = path_error(Path(e.filename), e) if isinstance(e, OSError) and e.filename else None
    if misplaced is not None:  # a directory where a file should be, a file this user may not read
        return str(misplaced)
    failed = write_error(Path(e.filename), e) if isinstance(e, OSError) and e.filename else None
    if isinstance(failed, WriteError):  # a full disk, a directory that cannot be written
        return " ".join(str(failed).split())
    for start, message in _LIBRARY_USER_ERRORS.items():
        if str(e).startswith(start):
            return message
    if type(e).__module__.startswith("submitit."):  # a job of a -m run on SLURM failed: which, and its error
        from gpt1.cluster.slurm import failed_job_message

        return failed_job_message(e)
    hint = config_hint(e)  # a misspelt key or name, a group this command lacks, a swept group's override
    if hint is not None:
        return hint
    cause = e.__cause__ if isinstance(e.__cause__, OmegaConfBaseException) else e
    if isinstance(cause, OmegaConfBaseException):  # e.g. Key 'n_layr' not in 'GPTConfig' / cannot convert 'abc'
        first = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        # a resolver's own error (a WriteError rather than its OSError): its line, not OmegaConf's wrapping of it
        raised = next((c for c in exception_chain(cause)[1:] if isinstance(c, UserError)), None)
        if raised is not None:
            first = " ".join(str(raised).split())
        key = given_with(cause) or getattr(cause, "full_key", None)
        hint = " (`--cfg job` prints every key)" if "not in" in first else what_to_give(cause, first, key)
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
            print(f"error: {with_replayed(message)}", file=sys.stderr, flush=True)
            sys.exit(EXIT_USER_ERROR)

    return guarded


class FlagParser(argparse.ArgumentParser):
    """An ``argparse`` parser whose mistakes are a one-line ``ConfigError`` naming the flag and what to do, in place
    of argparse's usage block and exit: gpt1 bench's and gpt1 report's, and every Hydra command's flags'."""

    def error(self, message: str) -> NoReturn:
        split = message.startswith("unrecognized arguments") and "=" in message
        hint = "; give the overrides (key=value) together, after the flags" if split else ""
        listing = "--hydra-help" if "--hydra-help" in self.format_usage() else "--help"  # (Hydra's --help: the app's)
        raise ConfigError(f"{message}{hint}: see `{self.prog} {listing}` for its flags")


def check_overrides(argv: list[str]) -> None:
    """Refuse an override that names no key (``=5``, ``+=x``), which Hydra takes for a config group's, and Hydra's
    ``--experimental-rerun``, which unpickles a file (a file from outside never runs code): a ``ConfigError`` naming
    it."""
    for i, arg in enumerate(argv):
        if arg.split("=")[0] == "--experimental-rerun":
            given = arg.partition("=")[2] or (argv[i + 1] if i + 1 < len(argv) else "")
            raise ConfigError(
                f"--experimental-rerun {given}: gpt1 does not rerun from a pickled config (unpickling it could run "
                "code from the file): run the command again with the overrides in its run's .hydra/overrides.yaml"
            )
    for arg in argv:
        if re.match(r"[+~]*=", arg):
            raise ConfigError(f"{arg}: an override is key=value, and this one names no key: put its key before the =")


_KEPT: dict[str, dict[Path, bytes]] = {}
"""A run directory -> its .hydra/ record as it was before this process's job started in it."""


class KeepRunRecord(Callback):
    """Hydra callback of every gpt1 command (conf/hydra/default.yaml): before Hydra writes a run's .hydra/ record, the
    run's config is checked (``gpt1.app.config_checks``) and the record already there kept, so that a command refused
    there (now or later) leaves it as it found it (``put_back_records``). Hydra has no such hook for a sweep's job."""

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        output_dir, subdir = Path(config.hydra.run.dir), config.hydra.output_subdir
        record = output_dir / subdir if subdir else None
        found = [p for p in sorted(record.glob("*.yaml")) if p.is_file()] if record and record.is_dir() else []
        _KEPT[str(output_dir.absolute())] = {path: path.read_bytes() for path in found}
        user_errors(check_choices)(config)  # a user error exits, in one line
        user_errors(check_config)(config)

    def on_run_end(self, config: Any, **kwargs: Any) -> None:
        _KEPT.pop(str(Path(config.hydra.run.dir).absolute()), None)  # it ran: its new record stands


def put_back_records() -> None:
    """The .hydra/ records of the run directories this process started a run in, as they were before
    (``KeepRunRecord``): after a command was refused."""
    while _KEPT:
        for path, data in _KEPT.popitem()[1].items():
            with atomic_file(path) as f:
                f.write(data)


def holds_run_dir(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A command's function, ``fn(cfg, ...)``, run holding its run directory ``cfg.paths.output_dir``
    (``gpt1.core.run_lock``: one writer per run directory), from the command line and from Python (``gpt1.api``)."""
    name = f"gpt1 {fn.__module__.rsplit('.', 1)[-1]}"

    @functools.wraps(fn)
    def holding(cfg: Any, *args: Any, **kwargs: Any) -> Any:
        with run_lock(cfg.paths.output_dir, name):
            return fn(cfg, *args, **kwargs)

    return holding


class HoldRunDir(Callback):
    """Hydra callback of every gpt1 command (conf/hydra/default.yaml): a run (not a sweep's job) holds its run directory
    (``gpt1.core.run_lock``) from before Hydra writes there to its end, so that a second process on it stops having
    written nothing; a refused one exits in one line here (Hydra takes a callback's exception for a warning)."""

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        self.directory = config.hydra.run.dir
        user_errors(_holdable)(self.directory)
        user_errors(hold)(self.directory, f"gpt1 {config.hydra.job.name}")  # a user error exits, in one line
        atexit.register(self._let_go)  # a stop by signal exits past on_run_end

    def on_run_end(self, config: Any, **kwargs: Any) -> None:
        atexit.unregister(self._let_go)
        self._let_go()

    def _let_go(self) -> None:
        let_go(self.directory)


def _holdable(directory: str) -> None:
    if not str(directory).strip():  # Hydra would run in the working directory, writing its files among the user's
        raise ConfigError(
            "hydra.run.dir is empty: give the run a directory of its own (hydra.run.dir=DIR), or leave it out for "
            "outputs/<run>/<time>"
        )


def from_the_installed_package() -> None:
    """Make this command's processes run the installed gpt1 whatever folders sit in the working directory: ``python
    -m`` (how Lightning starts DDP's other ranks) puts it first on ``sys.path``, where a clone of the repository would
    be imported as a namespace package. ``PYTHONSAFEPATH`` leaves it out in every process the command starts; a
    process that imported gpt1 from such a folder all the same stops here, in one line."""
    os.environ["PYTHONSAFEPATH"] = "1"
    if gpt1.__file__ is None:  # a namespace package: a folder named gpt1 without __init__.py
        raise UserError(
            f"gpt1 was imported from {', '.join(gpt1.__path__)}, a folder without __init__.py, not from the "
            "installed gpt1 package: `python -m` and `python -c` put the working directory first on Python's path; "
            "run the gpt1 command instead, or start from another directory"
        )


def command(config_name: str) -> Callable[[Callable[[Any], Any]], Callable[[], None]]:
    """``@hydra.main`` for a gpt1 command (``conf/<config_name>.yaml`` of the installed package): user errors as one
    line, its peak memory as its last, each attempt recorded in provenance.json (global rank 0), a run or sweep
    resumable from its directory's record alone, and the CPU settings applied in every process that runs it (DDP's
    other ranks and a submitit launcher's jobs included)."""

    def decorate(fn: Callable[[Any], Any]) -> Callable[[], None]:
        @functools.wraps(fn)
        def job(cfg: Any) -> Any:
            from lightning_utilities.core.rank_zero import rank_zero_only

            from_the_installed_package()  # (a launcher's job process has not run main below)
            configure_cpu()  # (idempotent: a no-op where main below ran)
            if getattr(rank_zero_only, "rank", 0) != 0:
                return fn(cfg)
            # provenance.json: what ran, and how it ended; written holding the run directory (a sweep's job, whose
            # directory HoldRunDir does not hold; reentrant where it does), so that a second process writes nothing
            with (
                run_lock(cfg.paths.output_dir, f"gpt1 {config_name}"),
                recorded_attempt(cfg.paths.output_dir, **job_fields()),
            ):
                result = fn(cfg)
            if getattr(rank_zero_only, "rank", 0) == 0:  # (read again: the Trainer sets it to the global rank)
                print(memory_line(peak_memory()), file=sys.stderr, flush=True)  # its last line, once
            return result

        hydra_main = hydra.main(version_base="1.3", config_path="pkg://gpt1.conf", config_name=config_name)(
            user_errors(job)
        )

        @functools.wraps(fn)
        def main() -> None:
            user_errors(from_the_installed_package)()
            user_errors(check_overrides)(sys.argv[1:])
            configure_cpu()  # before the first large allocation
            register()
            sys.argv[1:] = user_errors(with_record)(sys.argv[1:], config_name)  # resume=auto, rerun=: a run's record
            with (
                compat.hydra_reports_through(user_errors),
                compat.hydra_flags_parsed_by(FlagParser),
                compat.hydra_config_files_checked_by(check_config_file),
                compat.launchers_wrapped_by(ResumingLauncher),  # resumable sweeps
            ):
                try:
                    user_errors(hydra_main)()  # the flags' own errors (one line each), before Hydra composes anything
                except SystemExit as e:
                    if e.code == EXIT_USER_ERROR:  # refused: a run's record as this command found it
                        put_back_records()
                    raise

        return main

    return decorate
