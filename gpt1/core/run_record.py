"""What a run directory remembers of the command that made it, read back (``gpt1.app.recorded`` replays it;
``resume_command`` is the advice printed after a stop or by the run lock): Hydra's ``.hydra/hydra.yaml`` and
``overrides.yaml``, else the newest attempt of its provenance.json that recorded its job; a sweep's multirun.yaml.
Read with PyYAML: Hydra's own loaders are for the layers above."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from gpt1.core.provenance import attempts

WHERE = ("hydra.run.dir", "hydra.sweep.dir", "hydra.mode", "hydra.output_subdir")
"""The Hydra overrides that say where a job writes and how it was launched: not replayed from a record (the command
that resumes a run gives its directory)."""
PLAIN = re.compile(r"[\w./@+:%$*?|-]+( [\w./@+:%$*?|-]+)*")
"""A value that Hydra's grammar reads as it is: of these characters, spaces between them (others are quoted)."""


@dataclass
class Record:
    """The command a run or a sweep was made by."""

    command: str
    """Its command's name: pretrain, finetune, ..."""
    overrides: list[str]
    """Its overrides, as typed (Hydra's task overrides)."""
    hydra: list[str]
    """The Hydra overrides given beside them (a launcher, a sweeper's settings, ...), ``WHERE``'s left out."""
    config_dir: Optional[str]
    """The ``--config-dir`` it read, if any."""
    cwd: Optional[str]
    """The working directory it ran in (relative paths of the record are relative to it)."""
    sweep: Optional[Path]
    """A job of a sweep: the sweep's directory, else None."""
    source: Path
    """The file the record was read from."""
    instead: Optional[Path] = None
    """provenance.json's record: the run's .hydra/ file that exists but could not be read (None: none)."""


def run_record(directory: str | os.PathLike) -> Optional[Record]:
    """The record of the run in ``directory``: its .hydra/, else the newest attempt of its provenance.json that
    recorded its job and did not fail (a command refused is recorded too), else the newest that failed; None if it
    has neither (a run made from Python, or no run)."""
    directory = Path(directory)
    hydra = _yaml(directory / ".hydra" / "hydra.yaml")
    overrides = _yaml(directory / ".hydra" / "overrides.yaml")
    read = {"hydra.yaml": isinstance(hydra, dict) and isinstance(hydra.get("hydra"), dict)}
    read["overrides.yaml"] = isinstance(overrides, list)
    if all(read.values()):
        node = hydra["hydra"]
        multirun = node.get("mode") == "MULTIRUN" and (directory.parent / "multirun.yaml").is_file()
        return _record(node, [str(o) for o in overrides], directory.parent if multirun else None, directory / ".hydra")
    # a .hydra/ file there but not as Hydra writes it (empty, cut, damaged): named where provenance.json stands in
    unread = next(
        (directory / ".hydra" / f for f, ok in read.items() if not ok and (directory / ".hydra" / f).exists()), None
    )
    tried = attempts(directory)[::-1]  # the newest first, an attempt refused or failed after the others
    for attempt in [a for a in tried if a.get("outcome") != "failed"] + [
        a for a in tried if a.get("outcome") == "failed"
    ]:
        job = attempt.get("job")
        if isinstance(job, dict) and isinstance(job.get("command"), str) and isinstance(job.get("overrides"), list):
            sweep = job.get("sweep_dir")
            return Record(
                job["command"],
                [str(o) for o in job["overrides"]],
                [str(o) for o in job.get("hydra") or []],
                job.get("config_dir"),
                attempt.get("cwd"),
                Path(sweep) if sweep else None,
                directory / "provenance.json",
                unread,
            )
    return None


def sweep_record(directory: str | os.PathLike) -> Optional[Record]:
    """The record of the sweep in ``directory`` (its multirun.yaml), None if there is none."""
    path = Path(directory) / "multirun.yaml"
    saved = _yaml(path)
    if not isinstance(saved, dict) or not isinstance(saved.get("hydra"), dict):
        return None
    node = saved["hydra"]
    return _record(node, [str(o) for o in (node.get("overrides") or {}).get("task") or []], None, path)


def _record(node: dict[str, Any], overrides: list[str], sweep: Optional[Path], source: Path) -> Optional[Record]:
    """A record from a Hydra config node as Hydra saves it (hydra.yaml, multirun.yaml)."""
    job, runtime = node.get("job") or {}, node.get("runtime") or {}
    if not isinstance(job, dict) or not job.get("config_name"):
        return None
    sources = runtime.get("config_sources") or [] if isinstance(runtime, dict) else []
    given = [s["path"] for s in sources if isinstance(s, dict) and s.get("provider") == "command-line"]
    hydra = [str(o) for o in (node.get("overrides") or {}).get("hydra") or [] if override_key(str(o)) not in WHERE]
    config_dir = given[0].removeprefix("file://") if given else None
    return Record(str(job["config_name"]), overrides, hydra, config_dir, runtime.get("cwd"), sweep, source)


def _yaml(path: Path) -> Any:
    import yaml  # (here: importing gpt1.core stays light)

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return None


def override_key(override: str) -> str:
    """The key (or config group) an override sets: ``++task.splits.train='train[:64]'`` -> ``task.splits.train``."""
    return override.partition("=")[0].lstrip("+~")


def override(key: str, value: str | os.PathLike) -> str:
    """``key=value`` as Hydra reads it back (a value outside ``PLAIN`` quoted), quoted for a shell."""
    value = str(value)
    if not PLAIN.fullmatch(value):
        value = "'" + value.replace("'", "\\'") + "'"
    return shlex.quote(f"{key}={value}")


def resume_command(directory: str | os.PathLike) -> Optional[str]:
    """The command that continues the run in ``directory`` from its record, as a shell reads it: ``gpt1 <command>
    resume=auto hydra.run.dir=DIR``; for a job of a sweep, the sweep's resume, ``gpt1 <command> -m resume=auto
    hydra.sweep.dir=SWEEP`` (which resumes this job with the others). None where the run has no record."""
    record = run_record(directory)
    if record is None:
        return None
    if record.sweep is not None:
        return f"gpt1 {record.command} -m resume=auto {override('hydra.sweep.dir', record.sweep.absolute())}"
    return f"gpt1 {record.command} resume=auto {override('hydra.run.dir', Path(directory).absolute())}"
