"""What ran: each attempt at a run (its first start, each resume) recorded in ``<run dir>/provenance.json``, so that a
result can be traced to the code, packages, machine, command and inputs that made it, and the run made again from its
record alone (its fields: docs/experiments.md). A provenance.json that cannot be read is kept aside, not
overwritten."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import gpt1
from gpt1.core.errors import UserError
from gpt1.core.files import atomic_file, keep_aside

FILE = "provenance.json"
COMMAND_LINE = "GPT1_COMMAND_LINE"
"""The variable in which the console script leaves the command line as typed, for the processes it starts (DDP's other
ranks, a launcher's jobs); without it, this process's arguments."""
PACKAGES = (
    "torch",
    "lightning",
    "torchmetrics",
    "numpy",
    "tokenizers",
    "datasets",
    "hydra-core",
    "omegaconf",
    "ftfy",
    "spacy",
    "triton",
)
"""The packages whose versions can change a run's numbers: its kernels and training loop, its metrics, its tokens
and data (``tokenizer=openai``'s ftfy and spaCy), its config; those not installed are left out."""
CPU_FLAGS = re.compile(r"^(avx.*|amx.*|fma|f16c|sse4_2|asimd.*|sve.*)$")
"""The CPU's vector extensions (/proc/cpuinfo flags) that decide which kernels run."""

_STARTED: set[Path] = set()
"""The run directories whose attempt this process recorded the start of."""


def attempts(output_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The attempts recorded in ``output_dir`` (oldest first); none where there is no readable record."""
    return _read(Path(output_dir) / FILE) or []


def _read(path: Path) -> Optional[list[dict[str, Any]]]:
    """The attempts of the record ``path``; None if it is missing or cannot be read as one."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    found = record.get("attempts") if isinstance(record, dict) else None
    return found if isinstance(found, list) and all(isinstance(a, dict) for a in found) else None


def _write(output_dir: Path, records: list[dict[str, Any]]) -> None:
    with atomic_file(output_dir / FILE, "w") as f:
        json.dump({"attempts": records}, f, indent=1, sort_keys=True)


def start_attempt(output_dir: str | os.PathLike, **fields: Any) -> None:
    """Record a new attempt at the run of ``output_dir``: when, the command and the working directory, the code,
    packages and machine, and ``fields`` (a command's job: ``command`` for a sweep's job, ``job``...)."""
    output_dir = Path(output_dir)
    record = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": command_line(),
        "cwd": os.getcwd(),
        "gpt1": code(),
        "packages": packages(),
        "machine": machine(),
        **fields,
    }
    path = output_dir / FILE
    earlier = _read(path)
    if earlier is None and path.is_file():  # damaged: its attempts kept, not overwritten
        aside = keep_aside(path)
        print(f"note: {path} could not be read: kept as {aside.name}; a new record starts", file=sys.stderr, flush=True)
    _write(output_dir, [*(earlier or []), record])
    _STARTED.add(output_dir.resolve())


def update_attempt(output_dir: str | os.PathLike, **fields: Any) -> dict[str, Any]:
    """Add ``fields`` to this process's attempt at the run of ``output_dir`` (started here if it was not); return the
    attempt."""
    output_dir = Path(output_dir)
    if output_dir.resolve() not in _STARTED:
        start_attempt(output_dir)
    records = attempts(output_dir)
    records[-1].update(fields)
    _write(output_dir, records)
    return records[-1]


@contextmanager
def recorded_attempt(output_dir: str | os.PathLike, **fields: Any) -> Iterator[None]:
    """Record an attempt at the run of ``output_dir`` (with ``fields``: ``start_attempt``'s) around the block, with its
    outcome: "finished" when the block returns, "stopped" on a signal's exit (``SystemExit``, e.g. SIGTERM's 143) or
    Ctrl-C, "failed" on an error."""
    start_attempt(output_dir, **fields)
    try:
        yield
    except SystemExit as e:
        if e.code in (0, None):
            end_attempt(output_dir, "finished")
        elif isinstance(e.code, int) and e.code > 128:  # 128 + a signal's number (SafeStop's)
            end_attempt(output_dir, "stopped", exit_status=e.code)
        else:
            end_attempt(output_dir, "failed", error=f"exit status {e.code}")
        raise
    except KeyboardInterrupt:
        end_attempt(output_dir, "stopped", exit_status=130)
        raise
    except BaseException as e:
        end_attempt(output_dir, "failed", error=_error_line(e))
        raise
    end_attempt(output_dir, "finished")


def end_attempt(output_dir: str | os.PathLike, outcome: str, **fields: Any) -> None:
    """Close this process's attempt at the run of ``output_dir`` with its ``outcome`` (and ``fields``)."""
    update_attempt(output_dir, ended=time.strftime("%Y-%m-%dT%H:%M:%S%z"), outcome=outcome, **fields)
    _STARTED.discard(Path(output_dir).resolve())


def _error_line(e: BaseException) -> str:
    """The error's one line: a ``UserError``'s message (as the runner prints it), else its type and first line."""
    if isinstance(e, UserError):
        return " ".join(str(e).split())
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def command_line() -> str:
    """The command line as typed (``COMMAND_LINE``, which the console script sets), else this process's arguments."""
    return os.environ.get(COMMAND_LINE) or shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])


def code() -> dict[str, Any]:
    """gpt1's version and where it runs from: {"version", "commit", "dirty"} from a git checkout, else
    {"version", "commit": None, "source": "installed, not a git checkout"}."""
    package = Path(gpt1.__file__).resolve().parent

    def git(*args: str) -> Optional[str]:
        try:
            done = subprocess.run(["git", "-C", str(package), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    # the package's own files tracked by the repository it is in (not a virtual environment inside another project's)
    if git("ls-files", "--error-unmatch", "__init__.py") is None:
        return {"version": gpt1.__version__, "commit": None, "source": "installed, not a git checkout"}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"version": gpt1.__version__, "commit": git("rev-parse", "HEAD"), "dirty": bool(status)}


def packages() -> dict[str, str]:
    """Name -> version of the ``PACKAGES`` installed."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def machine() -> dict[str, Any]:
    """This machine: host, OS, Python, CPU (model, vector extensions, the capability torch dispatches to, count), GPUs
    (model and count of those visible; CUDA's version), none where there is no CUDA device."""
    import torch  # (here: the console script reads COMMAND_LINE without importing torch)

    model, flags = _cpuinfo()
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return {
        "host": platform.node(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "cpu": model,
        "cpu_flags": flags,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpus": os.cpu_count(),
        "gpu": torch.cuda.get_device_name(0) if gpus else None,
        "gpus": gpus,
        "cuda": torch.version.cuda,
    }


def _cpuinfo() -> tuple[str, list[str]]:
    """The CPU's model name and its vector extensions (``CPU_FLAGS``) from /proc/cpuinfo; elsewhere the platform's
    processor name and none."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), []
    fields = dict(re.findall(r"^(model name|flags|Features)\s*:\s*(.*)$", text, re.M))
    flags = (fields.get("flags") or fields.get("Features") or "").split()
    return fields.get("model name") or platform.machine(), sorted(f for f in set(flags) if CPU_FLAGS.match(f))


def finished_at(output_dir: Path) -> int | None:
    """The step the run in ``output_dir`` finished at, as its metrics.json or a finished attempt's copy of it says
    (-1: finished, at a step neither says); None if it had not finished."""
    metrics = output_dir / "metrics.json"
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        return int(json.loads(metrics.read_text())["steps"])
    done = [a for a in attempts(output_dir) if a.get("outcome") == "finished"]
    steps = [a["results"].get("steps") for a in done if isinstance(a.get("results"), dict)]
    if steps and isinstance(steps[-1], int):
        return steps[-1]
    return -1 if done or metrics.exists() else None
