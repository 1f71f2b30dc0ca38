"""The fuzzing harness's runner: one case is a ``gpt1 ...`` command line given to the real entry point, in a sandbox
(``tests.fuzz.world``), and judged by the properties every command keeps (``violations``).

A case runs in this process (``run_in_process``: the console script's ``gpt1.app.cli.main`` under a patched
``sys.argv``, its output captured at the file descriptors, a time bound by SIGALRM) or, for a sample, as the real
``gpt1`` console script in a process of its own (``run_subprocess``, optionally as an unprivileged user: root reads
any file, so "no read permission" needs another user). Before and after each case the harness lists every file of the
sandbox outside the case's run directory and the data cache (a fake HOME, the XDG directories, the working
directory, the inputs) and hashes the files of the sandbox's finished run: a write outside, or a finished run
changed, is a violation whatever the exit status.

The properties (``violations``): the command either succeeds (exit status 0), where the case's input is valid, or
exits 2 with exactly one ``error: ...`` line, the last of stderr, that names the thing (the file, and its line where
the format has lines, or the key) and says what to do; never a traceback, never a hang; nothing written outside; no
finished run changed. Whether an input is valid is the generator's verdict, made when it builds the case (``Expect``):
``valid``, ``invalid``, or ``either`` where a mutation (a flipped bit, a cut) may or may not leave the input usable.
"""

from __future__ import annotations

import atexit
import contextlib
import enum
import io
import json
import logging
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional


class Expect(enum.Enum):
    """The generator's verdict on a case's input, made before it runs."""

    valid = "valid"  # the command must succeed
    invalid = "invalid"  # the command must refuse it in one line
    either = "either"  # a mutation that may leave the input usable: success or a one-line refusal


@dataclass
class Case:
    """One generated input: the command line, the verdict, and what a refusal must name."""

    surface: str
    """Which input surface (docs/development.md, "The input surface"): overrides, yaml, task_data, ..."""
    argv: list[str]
    """The arguments after ``gpt1``: the command, then its overrides or flags."""
    expect: Expect
    names: list[str] = field(default_factory=list)
    """What the error line must contain: the file's name, a key, ``key=value`` (each of them)."""
    line: Optional[int] = None
    """The line of the file an error must name (``FILE:N:`` or ``FILE, line N``), where the generator knows it; 0: a
    line, which the parser decides (an unclosed bracket: where it gave up)."""
    what: str = ""
    """The mutation, in words (in the campaign's records and in a failure's message)."""
    timeout_s: float = 120.0
    """A case still running after this long is a hang."""


@dataclass
class Outcome:
    """What a case did."""

    status: Optional[int]
    """The exit status; None for a hang."""
    stdout: str
    stderr: str
    seconds: float
    escaped: Optional[str] = None
    """The traceback of an exception that left the entry point (in a process of its own: a traceback and status 1)."""
    hang: bool = False
    stray: list[str] = field(default_factory=list)
    """Paths written outside the run directory and the cache."""
    changed: list[str] = field(default_factory=list)
    """Files of the finished run changed or lost."""

    @property
    def error_lines(self) -> list[str]:
        return [line for line in (self.stdout + "\n" + self.stderr).splitlines() if line.startswith("error:")]


class CaseTimeout(BaseException):
    """A case ran past its bound (a BaseException: no ``except Exception`` in the command takes it for an error)."""


# -- the properties ------------------------------------------------------------------------------------------------

TRACEBACK = re.compile(r"Traceback \(most recent call last\)|HYDRA_FULL_ERROR=1 for a complete stack trace")
ADVICE = re.compile(
    r"\b(use|give|pass|set|choose|run|check|remove|fix|convert|add|quote|did you mean|update|save|create|rename|"
    r"install|iconv|re-?encode|write|start|delete|put|try|drop|lower|raise|replace|make|point|free|wait|stop|"
    r"resume|rerun|keep|move|list|name|declare|edit|split|join|shorten|restore|copy|prepare|see|close|indent|"
    r"must be|expected|"
    r"should|needs?|allowed|one of|at most|at least|or more|or less|or fewer)\b|pip install|--cfg job|"
    r"\bgpt1 (pretrain|prepare|finetune|evaluate|zeroshot|generate|convert|bench|report) \S+",
    re.IGNORECASE,
)
"""What a line that says what to do contains: a verb of advice, the values allowed, a command to run."""


def violations(case: Case, outcome: Outcome) -> list[str]:
    """The properties ``outcome`` breaks, in words (empty: the case passed)."""
    found = []
    text = outcome.stdout + "\n" + outcome.stderr
    if outcome.hang:
        return [f"hang: still running after {case.timeout_s:.0f} s"]
    if outcome.escaped or TRACEBACK.search(text):
        found.append("traceback: " + _last_lines(outcome.escaped or text))
    found += [f"wrote outside the run directory: {p}" for p in outcome.stray]
    found += [f"changed the finished run: {p}" for p in outcome.changed]
    if outcome.status == 0:
        if case.expect is Expect.invalid:
            found.append("accepted an invalid input (exit status 0)")
        return found
    if outcome.status != 2:
        return [*found, f"exit status {outcome.status}: " + _last_lines(text)]
    if case.expect is Expect.valid:
        found.append("refused a valid input: " + _last_lines(text, 1))
    errors = outcome.error_lines
    lines = outcome.stderr.strip().splitlines()
    if len(errors) != 1 or not lines or not lines[-1].startswith("error:"):
        return [*found, f"{len(errors)} error lines, the last line of stderr: {lines[-1] if lines else ''!r}"]
    line = errors[0]
    found += [f"the error line does not name {name!r}: {line}" for name in case.names if name not in line]
    number = str(case.line) if case.line else r"\d+"  # (0: a line, which the parser decides)
    if case.line is not None and not re.search(rf"(:{number}:|, line {number}\b)", line):
        found.append(f"the error line does not name line {case.line or 'N'}: {line}")
    if not ADVICE.search(line.partition(":")[2]):
        found.append(f"the error line does not say what to do: {line}")
    return found


def _last_lines(text: str, n: int = 3) -> str:
    return " | ".join(line for line in text.strip().splitlines()[-n:])


# -- the sandbox's watch -----------------------------------------------------------------------------------------


def listing(root: Path, skip: Sequence[Path]) -> dict[str, tuple]:
    """Every path under ``root`` but those under ``skip``: its kind, and a file's size and modification time."""
    out: dict[str, tuple] = {}
    skipped = {str(p) for p in skip}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if os.path.join(folder, d) not in skipped]
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            if path in skipped:
                continue
            st = os.lstat(path)  # (a folder's own time changes with its entries, which are listed themselves)
            out[path] = (
                (st.st_mode >> 12,) if stat.S_ISDIR(st.st_mode) else (st.st_mode >> 12, st.st_size, st.st_mtime_ns)
            )
    return out


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (a tiny run: well under a megabyte) by its path relative to ``root``: its bytes, or
    for a symbolic link its target's name."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            out[str(path.relative_to(root))] = b"-> " + os.readlink(path).encode()
        elif path.is_file():
            out[str(path.relative_to(root))] = path.read_bytes()
    return out


REWRITTEN_AT_START = (".hydra/config.yaml", ".hydra/hydra.yaml", "csv/hparams.yaml")
"""What Hydra and Lightning write anew at every start of a run (its resumes too): the composed config and the logged
hyper-parameters. The record of the command, .hydra/overrides.yaml, keeps its entries."""
REPORT = re.compile(r"(report\.(md|csv)|[^/]+\.png)")
"""What ``gpt1 report`` writes into the folder it reports on (anew at each report)."""


def run_changes(before: dict[str, bytes], after: dict[str, bytes], refused: bool) -> list[str]:
    """What of a finished run was lost or changed between two snapshots. Records that only grow may grow: the
    attempts of provenance.json (the earlier ones kept as they were) and the log. A run that was resumed (not
    ``refused``) has its config written anew, and its overrides.yaml may gain entries (resume=auto) but lose none; a
    command that refused to run leaves all of these as they were."""
    found = []
    for name, old in before.items():
        new = after.get(name)
        if new is None:
            found.append(f"{name} (lost)")
        elif new != old and not _grew(name, old, new, refused):
            found.append(f"{name} (changed)")
    return found


def _rows(data: bytes) -> set[frozenset]:
    """A CSV file's rows, each as its set of (column, value) that are not empty."""
    import csv

    return {frozenset((k, v) for k, v in row.items() if v) for row in csv.DictReader(io.StringIO(data.decode()))}


def _grew(name: str, old: bytes, new: bytes, refused: bool) -> bool:
    """Whether ``old`` -> ``new`` is a change the record ``name`` may go through (``run_changes``)."""
    import yaml

    if name.endswith(".log"):
        return new.startswith(old)
    if REPORT.fullmatch(name):
        return True
    try:
        if name == "csv/metrics.csv":  # rewritten whole at each save: its rows kept (a column may be added)
            return _rows(old) <= _rows(new)
        if name == "provenance.json":
            old_attempts, new_attempts = json.loads(old)["attempts"], json.loads(new)["attempts"]
            return new_attempts[: len(old_attempts)] == old_attempts
        if refused:
            return False
        if name == ".hydra/overrides.yaml":
            return set(yaml.safe_load(old) or []) <= set(yaml.safe_load(new) or [])
    except (ValueError, KeyError, TypeError, AttributeError, yaml.YAMLError):  # (UnicodeDecodeError: a ValueError)
        return False
    return name in REWRITTEN_AT_START


def differences(before: dict, after: dict) -> list[str]:
    """The paths added, removed or changed between two listings."""
    keys = sorted(set(before) | set(after))
    return [
        f"{k} ({'added' if k not in before else 'removed' if k not in after else 'changed'})"
        for k in keys
        if before.get(k) != after.get(k)
    ]


# -- running a case ----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def captured() -> Iterator[dict[str, str]]:
    """Everything written to stdout and stderr inside the block, at the file descriptors (C libraries, processes
    started) and by Python (``sys.stdout``/``sys.stderr``, the logging handlers that hold the streams they found),
    into the dict it yields once the block ends: {"stdout": ..., "stderr": ...}."""
    result: dict[str, str] = {}
    files = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
    old_streams = (sys.stdout, sys.stderr)
    for stream in old_streams:
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    os.dup2(files[0].fileno(), 1)
    os.dup2(files[1].fileno(), 2)
    # onto the descriptors themselves, never closed: a handler made in the block (a library imported there) keeps its
    # stream, which then writes wherever the descriptor points
    new_streams = [
        io.TextIOWrapper(open(fd, "wb", closefd=False), encoding="utf-8", errors="replace", write_through=True)
        for fd in (1, 2)
    ]
    sys.stdout, sys.stderr = new_streams
    swapped = []
    old_ids = {id(s): new for s, new in zip((*old_streams, sys.__stdout__, sys.__stderr__), new_streams * 2)}
    for handler in _stream_handlers():
        if id(handler.stream) in old_ids:
            swapped.append((handler, handler.stream))
            handler.stream = old_ids[id(handler.stream)]
    try:
        yield result
    finally:
        for handler, stream in swapped:
            handler.stream = stream
        for stream in new_streams:
            stream.flush()
        sys.stdout, sys.stderr = old_streams
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        for key, f in zip(("stdout", "stderr"), files):
            f.seek(0)
            result[key] = f.read().decode("utf-8", errors="replace")
            f.close()


def _stream_handlers() -> list[logging.StreamHandler]:
    loggers = [
        logging.getLogger(),
        *(v for v in logging.root.manager.loggerDict.values() if isinstance(v, logging.Logger)),
    ]
    return [h for lg in loggers for h in lg.handlers if type(h) is logging.StreamHandler]


@contextlib.contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    """``CaseTimeout`` in the block after ``seconds`` (SIGALRM: the main thread only)."""

    def expire(signum, frame):
        raise CaseTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def environment(env: dict[str, str], cwd: Path) -> Iterator[None]:
    """The process's environment and working directory set to ``env`` and ``cwd`` in the block, then put back (a
    command sets variables of its own: PYTHONSAFEPATH, GPT1_COMMAND_LINE, Lightning's seed)."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def _loggers() -> dict[str, logging.Logger]:
    return {
        "": logging.getLogger(),
        **{n: lg for n, lg in logging.Logger.manager.loggerDict.items() if isinstance(lg, logging.Logger)},
    }


def _process_state() -> tuple:
    """What a command run in this process changes and the next must not inherit: every logger's handlers, filters,
    level and propagation (gpt1's console quiets Lightning's loggers with handlers on the stream of the moment, here
    the case's captured one, closed after it), the signal handlers of SIGINT and SIGTERM, ``__main__``'s module spec,
    ``sys.argv``."""
    loggers = {n: (lg.handlers[:], lg.filters[:], lg.level, lg.propagate) for n, lg in _loggers().items()}
    return (
        loggers,
        signal.getsignal(signal.SIGINT),
        signal.getsignal(signal.SIGTERM),
        getattr(sys.modules["__main__"], "__spec__", None),
        sys.argv[:],
    )


def _restore(state: tuple) -> None:
    loggers, sigint, sigterm, spec, argv = state
    kept = {h for handlers, *_ in loggers.values() for h in handlers}
    for name, logger in _loggers().items():
        for handler in logger.handlers:
            if handler not in kept:  # (bound to the case's captured stream)
                handler.close()
        if name not in loggers:  # made in the case (a library imported there first): its own level and filters
            logger.handlers[:] = [h for h in logger.handlers if h in kept]
            continue
        handlers, filters, level, propagate = loggers[name]
        logger.handlers[:], logger.filters[:] = handlers, filters
        logger.setLevel(level)
        logger.propagate = propagate
    signal.signal(signal.SIGINT, sigint)
    signal.signal(signal.SIGTERM, sigterm)
    sys.modules["__main__"].__spec__ = spec
    sys.argv[:] = argv
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()  # (a case stopped by its time bound inside a Hydra app)


@contextlib.contextmanager
def process_exit_of_gpt1() -> Iterator[None]:
    """What gpt1 registers with ``atexit`` in the block runs at its end, as at the end of the process it stands for
    (e.g. a run directory's lock let go after a refused run); a library's own exit handlers (imported in the block
    for the first time) keep waiting for the real end of the process."""
    registered: list = []
    register, unregister = atexit.register, atexit.unregister

    def keep(fn, *args, **kwargs):
        owner = getattr(getattr(fn, "__self__", None), "__module__", None) or getattr(fn, "__module__", "") or ""
        if owner.startswith("gpt1."):
            registered.append((fn, args, kwargs))
            return fn
        return register(fn, *args, **kwargs)

    def forget(fn):
        registered[:] = [r for r in registered if r[0] != fn]
        unregister(fn)

    atexit.register, atexit.unregister = keep, forget
    try:
        yield
    finally:
        atexit.register, atexit.unregister = register, unregister
        for fn, args, kwargs in reversed(registered):
            fn(*args, **kwargs)


def run_in_process(argv: Sequence[str], env: dict[str, str], cwd: Path, timeout_s: float) -> Outcome:
    """``gpt1 ARGV`` as the console script runs it, in this process: ``gpt1.app.cli.main`` with ``sys.argv`` set, in
    ``cwd`` with ``env`` added to the environment."""
    from gpt1.app import cli

    state = _process_state()
    status, escaped, hang = 0, None, False
    start = time.monotonic()
    with captured() as out, environment(env, cwd), process_exit_of_gpt1():
        sys.argv[:] = ["gpt1", *argv]
        try:
            with time_bound(timeout_s):
                cli.main()
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except CaseTimeout:
            status, hang = None, True
        except BaseException:  # noqa: BLE001  (in a process of its own: a traceback, exit status 1)
            status, escaped = 1, traceback.format_exc()
        finally:
            _restore(state)
    return Outcome(status, out["stdout"], out["stderr"], time.monotonic() - start, escaped, hang)


def gpt1_script() -> str:
    """The ``gpt1`` console script of this Python's environment."""
    here = Path(sys.executable).parent / "gpt1"
    return str(here) if here.exists() else shutil.which("gpt1") or "gpt1"


def run_subprocess(
    argv: Sequence[str], env: dict[str, str], cwd: Path, timeout_s: float, user: Optional[int] = None
) -> Outcome:
    """``gpt1 ARGV``, the real console script, in a process of its own (as the user of id ``user``, by setpriv, where
    given): the environment of this one with ``env`` added, less HYDRA_FULL_ERROR."""
    full = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"} | env
    command = [gpt1_script(), *argv]
    if user is not None:
        command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]
    start = time.monotonic()
    try:
        proc = subprocess.run(command, env=full, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        return Outcome(None, str(e.stdout or ""), str(e.stderr or ""), time.monotonic() - start, hang=True)
    return Outcome(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


def record(case: Case, outcome: Outcome, found: list[str]) -> None:
    """Append the case and what it did to $GPT1_FUZZ_RECORD (a JSON Lines file), where set: the campaign's log."""
    path = os.environ.get("GPT1_FUZZ_RECORD")
    if not path:
        return
    entry = {
        "surface": case.surface,
        "what": case.what,
        "expect": case.expect.value,
        "argv": case.argv,
        "status": outcome.status,
        "seconds": round(outcome.seconds, 3),
        "error": outcome.error_lines[-1] if outcome.error_lines else None,
        "hang": outcome.hang,
        "traceback": bool(outcome.escaped or TRACEBACK.search(outcome.stdout + outcome.stderr)),
        "stray": outcome.stray,
        "changed": outcome.changed,
        "violations": found,
    }
    # one write(2) on an O_APPEND descriptor: the campaign's pytest-xdist workers append to one file, line by line
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
    finally:
        os.close(fd)
