"""A run directory remembers its command (docs/resume.md): ``with_record`` rewrites a command line of ``resume=auto
hydra.run.dir=DIR`` (``-m``: ``hydra.sweep.dir``) or ``rerun=DIR`` to the record's overrides, those given beside in
their place, each that differs named with what it changes (``gpt1.app.effects``); ``job_fields`` is what an attempt
records of its job, so that a run's provenance.json alone can be replayed too."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import OmegaConf

from gpt1.app.effects import effect
from gpt1.core.errors import ConfigError
from gpt1.core.provenance import command_line
from gpt1.core.run_lock import leads_its_run
from gpt1.core.run_record import WHERE, Record, override, override_key, resume_command, run_record, sweep_record

WITH_VALUE = {"--cfg", "-c", "--package", "-p", "--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd"}
WITH_VALUE |= {"--experimental-rerun"}
"""Hydra's flags that take the next argument as their value (``--info`` may: one of ``INFO``)."""
INFO = {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"}
NOT_REPLAYED = ("resume", "rerun")
"""A record's overrides that a rerun leaves out: it starts afresh, and repeats no rerun."""
OF_A_SWEEP = ("hydra.launcher", "hydra/launcher", "hydra.sweeper", "hydra/sweeper")
"""The Hydra overrides of a sweep that its jobs' own commands leave out (how the jobs were launched)."""


def with_record(argv: Sequence[str], command: str) -> list[str]:
    """``gpt1 <command>``'s arguments ``argv``, with a run's or a sweep's recorded command where they ask for it (module
    docstring); else as they are. A ``ConfigError`` for a record of another command or kind (a sweep given as a run),
    and for ``rerun`` of a directory without a finished run."""
    REPLAYED.clear()  # (a command run before in this process replayed its own)
    flags, overrides = _split(argv)
    given = _values(overrides)
    if given is None:  # a malformed override: Hydra says what
        return list(argv)
    multirun = "-m" in flags or "--multirun" in flags
    if "rerun" in given:
        record = _rerun_record(Path(given["rerun"]), command)
        record.overrides = [o for o in record.overrides if override_key(o) not in NOT_REPLAYED]
        return _merged(flags, overrides, record, "the record of the run it repeats")
    if given.get("resume") != "auto":
        return list(argv)
    where = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    if where not in given:
        return list(argv)
    directory = Path(given[where])
    record = sweep_record(directory) if multirun else run_record(directory)
    other = run_record(directory) if multirun else sweep_record(directory)
    if record is None and other is not None:
        kind = "a run's directory, not a sweep's" if multirun else "a sweep's directory, not a run's"
        flag, key = ("", "hydra.run.dir") if multirun else (" -m", "hydra.sweep.dir")
        raise ConfigError(
            f"{where}={directory}: {directory} is {kind}: continue it with "
            f"gpt1 {other.command}{flag} resume=auto {override(key, directory.absolute())}"
        )
    if record is None:  # a first start (under a requeueing scheduler), or no run yet: the command as given
        return list(argv)
    if record.command != command:
        sweep = f"gpt1 {record.command} -m resume=auto {override(where, directory.absolute())}"
        resume = sweep if multirun else resume_command(directory)
        raise ConfigError(
            f"{where}={directory}: {directory} holds a {'sweep' if multirun else 'run'} of gpt1 {record.command} "
            f"({record.source}), not of gpt1 {command}: continue it with {resume}"
        )
    return _merged(flags, overrides, record, f"the {'sweep' if multirun else 'run'}'s record")


def _rerun_record(directory: Path, command: str) -> Record:
    """The record of the finished run ``rerun=directory`` repeats; a ``ConfigError`` where there is none."""
    record = run_record(directory)
    if record is None:
        raise ConfigError(
            f"rerun={directory}: {directory} holds no record of a gpt1 run (.hydra/ or provenance.json): give the "
            "directory of a run made by a gpt1 command"
        )
    if record.command != command:
        raise ConfigError(
            f"rerun={directory}: {directory} holds a run of gpt1 {record.command}, not of gpt1 {command}: rerun it "
            f"with gpt1 {record.command} {override('rerun', directory.absolute())}"
        )
    if not (directory / "metrics.json").is_file():
        raise ConfigError(
            f"rerun={directory}: {directory} holds no metrics.json to compare a rerun with (the run did not finish, "
            f"or its metrics.json was lost): finish it, or rebuild it, with {resume_command(directory)}"
        )
    return record


def _split(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Hydra's flags (with their values) and the overrides of a command line."""
    flags: list[str] = []
    overrides: list[str] = []
    takes_value = False
    for arg in argv:
        if takes_value:
            flags.append(arg)
            takes_value = False
        elif arg.startswith("-"):
            flags.append(arg)
            takes_value = arg in WITH_VALUE
        elif flags and flags[-1] in ("--info", "-i") and arg in INFO:
            flags.append(arg)
        else:
            overrides.append(arg)
    return flags, overrides


def _values(overrides: Sequence[str]) -> Optional[dict[str, Any]]:
    """Key -> value of ``overrides`` as Hydra reads them (quotes removed; the last of a key holds); None if one does
    not parse."""
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException:
        return None
    return {o.key_or_group: o.value() for o in parsed if not o.is_delete()}  # (~rerun: Hydra's, refused there)


REPLAYED: list[tuple[Path, Optional[Path]]] = []
"""The record this process's command line was rebuilt from (``with_record``), which its errors name, and why
provenance.json's where it stood in for a .hydra/ file."""


def with_replayed(message: str) -> str:
    """An error line ``message``, naming the record the command replayed where it did (a key or value in the error
    may be the record's) and the message does not."""
    if not REPLAYED or str(REPLAYED[-1][0]) in message:
        return message
    source, instead = REPLAYED[-1]
    why = f", as {instead} could not be read" if instead else ""
    return f"{message} (the command replayed {source}{why}: if the record is at fault, restore it or give the command)"


def _merged(flags: list[str], given: list[str], record: Record, whose: str) -> list[str]:
    """The command line of ``record`` with the ``given`` overrides in place of its own, and Hydra's ``flags`` (its
    --config-dir unless one is given); a note for each given override that differs, and for another working
    directory."""
    lines = []
    replayed = [*record.overrides, *record.hydra]
    source = record.source / "overrides.yaml" if record.source.is_dir() else record.source  # (.hydra/ or a file)
    if _values(replayed) is None:  # cut short or damaged: Hydra cannot parse what the record holds
        raise ConfigError(
            f"{source}: its overrides do not parse as Hydra's (damaged?): restore it, or give the command in full"
        )
    REPLAYED.append((source, record.instead))
    at = {override_key(o): i for i, o in enumerate(replayed)}
    for o in given:
        key = override_key(o)
        if key in WHERE:
            continue
        before = replayed[at[key]] if key in at else None
        if before != o and key not in NOT_REPLAYED:
            was = f"differs from {whose} ({before})" if before else f"is not in {whose} (it ran with the default)"
            lines.append(f"note: {o} {was}: {effect(key)}")
        if key in at:
            replayed[at[key]] = o
        else:
            at[key] = len(replayed)
            replayed.append(o)
    replayed += [o for o in given if override_key(o) in WHERE]
    flags = list(flags)
    dirs = [flags[i + 1] for i, f in enumerate(flags[:-1]) if f in ("--config-dir", "-cd")]
    dirs += [f.partition("=")[2] for f in flags if f.startswith("--config-dir=")]
    if record.config_dir and not dirs:
        flags.append(f"--config-dir={record.config_dir}")
    elif record.config_dir and dirs[-1] != record.config_dir:
        lines.append(f"note: --config-dir {dirs[-1]} differs from {whose} ({record.config_dir}): {effect('task')}")
    if record.cwd and Path(record.cwd) != Path.cwd():
        lines.append(
            f"note: the run was made in {record.cwd}; its relative paths (the default cache, outputs/cache, among "
            f"them) are read from this directory, {Path.cwd()}: cd {shlex.quote(record.cwd)} first to read its own"
        )
    if leads_its_run():  # (DDP's other ranks get rank 0's command line, the record already rewritten by it)
        for line in lines:
            print(line, file=sys.stderr, flush=True)
    return [*flags, *replayed]


def job_fields() -> dict[str, Any]:
    """What the attempt of this Hydra job records of it: ``job``, the record that replays it; for a sweep's job, also
    its own command line as ``command`` (the sweep's in ``sweep_command``). None outside a Hydra job."""
    if not HydraConfig.initialized():
        return {}
    hydra = HydraConfig.get()
    given = [s.path for s in hydra.runtime.config_sources if s.provider == "command-line"]
    config_dir = given[0].removeprefix("file://") if given else None
    task = [str(o) for o in OmegaConf.to_container(hydra.overrides.task)]  # (as typed: interpolations unresolved)
    beside = [str(o) for o in OmegaConf.to_container(hydra.overrides.hydra) if override_key(str(o)) not in WHERE]
    job = {"command": hydra.job.config_name, "overrides": task, "hydra": beside, "config_dir": config_dir}
    if hydra.mode != RunMode.MULTIRUN:
        return {"job": job}
    job["sweep_dir"] = str(Path(hydra.sweep.dir).absolute())
    own = [o for o in beside if not override_key(o).startswith(OF_A_SWEEP)]
    cd = [f"--config-dir={config_dir}"] if config_dir else []
    line = shlex.join(["gpt1", hydra.job.config_name, *cd, *own, *task])
    line += " " + override("hydra.run.dir", Path(hydra.runtime.output_dir).absolute())
    return {"job": job, "command": line, "sweep_command": command_line()}
