"""Reading a sweep for ``gpt1 report``: its jobs (``find_jobs``), each one's overrides, saved config, metrics and
what ran it, attempt by attempt (its provenance.json)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from gpt1.app.config_files import yaml_problem
from gpt1.app.sweep import NOT_OF_THE_JOB
from gpt1.core.errors import DataError, UserError
from gpt1.core.provenance import attempts


@dataclass
class Job:
    """One run directory: its overrides, its saved config (plain YAML, unresolved) and its metrics (None: failed)."""

    path: Path
    overrides: dict[str, str]
    config: dict[str, Any]
    metrics: Optional[dict[str, Any]]
    ran: dict[str, str] = field(default_factory=dict)
    """What ran the job (``provenance``): column -> value."""
    attempts: list[str] = field(default_factory=list)
    """How each attempt at the job ended, oldest first (``outcomes``): a job that was stopped and resumed has two."""

    def value(self, key: str) -> str:
        """The job's value of a parameter: its override, else its config's value, else ""."""
        if key in self.overrides:
            return self.overrides[key]
        node: Any = self.config
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return ""
            node = node[part]
        if isinstance(node, dict):  # a config group's node: the option chosen is not recorded in the config
            return ""
        return node if isinstance(node, str) else json.dumps(node)


def find_jobs(dirs: Sequence[Path]) -> list[Job]:
    """Every job under ``dirs`` (a directory is a job itself, or holds jobs at any depth); UserError if a
    directory does not exist or holds none."""
    jobs = []
    for root in dirs:
        if not root.is_dir():
            raise UserError(f"{root}: no such directory (give sweep directories or run directories)")
        found = sorted(p.parent.parent for p in root.rglob(".hydra/overrides.yaml"))
        if not found:
            raise UserError(
                f"{root}: no jobs found (no .hydra/overrides.yaml below it): give a sweep directory "
                "(outputs/<run>/multirun/<time>) or a run directory"
            )
        jobs.extend(read_job(path) for path in found)
    return jobs


def read_job(path: Path) -> Job:
    """The job in ``path``; DataError naming the file if one is unreadable."""

    def load(name: str, reader: Any, shape: type) -> Any:
        file = path / name
        try:
            value = reader(file.read_text()) if file.is_file() else None
        except yaml.MarkedYAMLError as e:
            raise DataError(f"{yaml_problem(file, e)}; or move {name} aside to list the job as failed") from e
        except (ValueError, yaml.YAMLError) as e:
            what = "JSON" if name.endswith("json") else "YAML"
            raise DataError(
                f"{file}: not valid {what} ({e}): restore it, or move it aside to list the job as failed"
            ) from e
        if value is not None and not isinstance(value, shape):
            raise DataError(
                f"{file} holds {type(value).__name__}, not {shape.__name__} as gpt1 writes it: restore "
                "it, or move it aside to list the job as failed"
            )
        return value

    overrides = {}
    for item in load(".hydra/overrides.yaml", yaml.safe_load, list) or []:
        key, _, value = str(item).partition("=")
        if key.lstrip("+~") not in NOT_OF_THE_JOB:  # how a job was run (resume=auto), not which job: no parameter
            overrides[key.lstrip("+~")] = value
    metrics = load("metrics.json", json.loads, dict)
    config, tried = load(".hydra/config.yaml", yaml.safe_load, dict) or {}, attempts(path)
    return Job(path, overrides, config, metrics, provenance(tried), outcomes(tried))


def outcomes(tried: Sequence[dict[str, Any]]) -> list[str]:
    """How each attempt (a provenance.json record, ``gpt1.core.provenance``) ended: "finished", "stopped (exit status
    143)", "failed (<its error>)", or "no outcome" (killed outright, or still running)."""
    said = []
    for attempt in tried:
        outcome = attempt.get("outcome")
        if outcome == "stopped" and attempt.get("exit_status") is not None:
            outcome = f"stopped (exit status {attempt['exit_status']})"
        elif outcome == "failed" and attempt.get("error"):
            outcome = f"failed ({attempt['error']})"
        said.append(str(outcome or "no outcome"))
    return said


def provenance(tried: Sequence[dict[str, Any]]) -> dict[str, str]:
    """What ran a job, from its attempts (its provenance.json), as report columns; where its attempts differ, their
    values in order, joined by " -> "."""
    columns: dict[str, list[str]] = {}
    for attempt in tried:
        for key, value in _attempt_columns(attempt).items():
            if value not in columns.setdefault(key, []):
                columns[key].append(value)
    return {key: " -> ".join(values) for key, values in columns.items()}


def _attempt_columns(attempt: dict[str, Any]) -> dict[str, str]:
    code, machine, run = ({} if not isinstance(v, dict) else v for v in map(attempt.get, ("gpt1", "machine", "run")))
    if code.get("commit"):
        built = f"{code.get('version')} {code['commit'][:10]}" + (" +uncommitted changes" if code.get("dirty") else "")
    else:
        built = f"{code.get('version')} (installed, no git checkout)"
    columns = {"gpt1": built, **(attempt.get("packages") or {})}
    columns |= {"python": machine.get("python"), "host": machine.get("host"), "cpu": machine.get("cpu")}
    columns["gpu"] = f"{machine.get('gpus')} x {machine['gpu']}" if machine.get("gpu") else "none"
    if run:
        columns["processes"] = f"{run.get('processes')} ({run.get('nodes')} node{'s' if run.get('nodes') != 1 else ''})"
        columns["precision"] = str(run.get("precision"))
        by_kernel: dict[str, list[str]] = defaultdict(list)
        for kind, kernel in sorted(((run.get("kernels") or {}).get("cpu_matmuls") or {}).items()):
            by_kernel[kernel].append(kind)
        columns["cpu matmuls"] = "; ".join(f"{k}: {', '.join(kinds)}" for k, kinds in sorted(by_kernel.items()))
    return {key: str(value) for key, value in columns.items() if value is not None}


def ran_with(jobs: Sequence[Job]) -> tuple[list[str], dict[str, str]]:
    """The provenance columns whose values differ between ``jobs`` (a job without a value counts as ""), and those
    that are the same for all of them, with their value."""
    keys = list(dict.fromkeys(k for job in jobs for k in job.ran))
    values = {k: {job.ran.get(k, "") for job in jobs} for k in keys}
    return [k for k in keys if len(values[k]) > 1], {k: v.pop() for k, v in values.items() if len(v) == 1}
