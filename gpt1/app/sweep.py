"""A sweep (``-m``) that can be resumed: each job in a directory named by its overrides, not its position
(``job_dir``), and ``resume=auto hydra.sweep.dir=DIR`` going on where it stopped, whatever launcher runs its jobs
(``ResumingLauncher``; ``continue_study`` for an Optuna search kept in a storage). A sweep extended or reordered maps
every earlier job to its own directory."""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from gpt1.app.objective import job_value
from gpt1.core.provenance import attempts
from gpt1.core.run_lock import run_lock
from gpt1.core.run_record import override, override_key, sweep_record
from gpt1.training.hydra_job import swept_keys

if TYPE_CHECKING:
    from gpt1.training.kept_results import Kept

NOT_OF_THE_JOB = ("resume", "optimized_metric")
"""Overrides that say how to run a job or read its value, not which job it is: left out of its directory's name."""
READABLE = 96
"""The longest readable part of a job directory's name (a file name has 255 bytes at most)."""


def job_dir(overrides: Sequence[str], swept: Optional[set[str]] = None) -> str:
    """The directory of the job of ``overrides`` in its sweep: a readable part (its overrides of the ``swept`` keys,
    else all, sorted, less those whose values are paths, cut to ``READABLE`` characters), then ``-`` and 8 hex digits
    of a hash of its sorted overrides, its identity: ``aux_lm_weight=0.5,seed=2-1f3a9c0e``."""
    mine = sorted(o for o in overrides if override_key(o) not in NOT_OF_THE_JOB)
    digest = hashlib.sha256("\n".join(mine).encode()).hexdigest()[:8]
    named = [o for o in mine if override_key(o) in (swept or ())] or mine
    readable = ""
    for item in (re.sub(r"[^\w.,=+-]", "_", o) for o in named if "/" not in o.partition("=")[2]):
        joined = f"{readable},{item}" if readable else item
        if len(joined) > READABLE:
            break
        readable = joined
    return f"{readable}-{digest}" if readable else digest


def job_dir_of(*, _root_: DictConfig) -> str:
    """``${gpt1.job_dir:}`` (``hydra.sweep.subdir``): ``job_dir`` of the job's overrides and its sweep's swept keys, or
    the sweep's directory of the same hash (a sweep extended by values of a key names the job otherwise)."""
    hydra = _root_.hydra
    sweep = Path(str(hydra.sweep.dir))
    name = job_dir(list(hydra.overrides.task), swept_keys(hydra, sweep))
    digest = name.rpartition("-")[2]
    if sweep.is_dir():
        for found in sorted(sweep.glob(f"*{digest}")):
            if found.is_dir() and (found.name == digest or found.name.endswith(f"-{digest}")):
                return found.name
    return name


@dataclass
class Job:
    """A job of a resumed sweep, as its directory says before it is launched."""

    overrides: list[str]
    directory: Path
    metrics: Optional[dict[str, Any]]
    """Its metrics.json if it finished (``gpt1.training.kept_results``: rebuilt if it was lost), else None."""
    step: Optional[int]
    """The step of its checkpoints/last.ckpt (None: none), which it resumes from."""
    error: Optional[str]
    """The error its last attempt failed on (provenance.json), if it failed."""
    kept: Optional[Kept] = None
    """What was found of its results, where its metrics.json was lost or damaged (``Kept.note`` says it)."""

    @classmethod
    def read(cls, overrides: list[str], directory: Path, command: str = "gpt1") -> Job:
        """The job of ``overrides`` in ``directory``; a finished job's lost or damaged metrics.json is rebuilt there
        from its provenance.json (holding its directory, as ``command``), or left for its evaluation to be done
        again."""
        from gpt1.training.kept_results import checkpoint_step, kept_results  # (Lightning's import)

        last = directory / "checkpoints" / "last.ckpt"
        tried = attempts(directory)
        failed = tried[-1].get("error") if tried and tried[-1].get("outcome") == "failed" else None
        step = checkpoint_step(last) if last.is_file() else None
        kept = kept_results(directory, step, write=False)
        if kept.metrics is not None and kept.note:  # to be rebuilt: holding the job's directory
            with run_lock(directory, command):
                kept = kept_results(directory, step)
        return cls(overrides, directory, kept.metrics, step, failed, kept if kept.note else None)

    def line(self, own: Sequence[str]) -> str:
        """What becomes of the job, in one line that names it by its ``own`` overrides and directory."""
        lost = self.kept.note.removeprefix("note: ") if self.kept is not None else ""
        if self.metrics is not None:
            fate = "finished before: not run again" + (f"; {lost}" if lost else ", its directory kept as it was")
        elif self.kept is not None and self.kept.again:
            fate = f"finished before at step {self.step}; {lost}"
        else:
            before = f"failed before ({self.error}), " if self.error else ""
            started = "started again" if before or self.directory.is_dir() else "started"
            fate = before + (f"resumed at step {self.step}" if self.step is not None else started)
        return f"{' '.join(own) or 'the job'}: {fate} ({self.directory})"


class ResumingLauncher:
    """A sweeper's launcher, wrapped (``gpt1.app.runner.command``): with ``resume=auto``, the jobs that finished are
    not launched (the sweeper gets their value from their metrics.json), the others are, resuming from their
    last.ckpt, and one line per job says what becomes of it. Without ``resume=auto``, the launcher it wraps."""

    def __init__(self, launcher: Any) -> None:
        self.launcher = launcher
        self.announced = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.launcher, name)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        if OmegaConf.select(self.launcher.config, "resume") != "auto":
            return self.launcher.launch(job_overrides, initial_job_idx)
        configs = [self._config(list(o), initial_job_idx + i) for i, o in enumerate(job_overrides)]
        command = str(self.launcher.config.hydra.job.config_name)
        jobs = [Job.read(list(o), self._directory(c), f"gpt1 {command}") for o, c in zip(job_overrides, configs)]
        sweep = Path(str(self.launcher.config.hydra.sweep.dir))
        if not self.announced:  # (a sweeper may launch its jobs in batches: Optuna's one trial at a time)
            self.announced = True
            if not any(job.directory.is_dir() for job in jobs) and not _holds_jobs(sweep):
                print(
                    f"note: resume=auto, but {sweep} holds no jobs of this or any sweep: every job starts"
                    f"{_earlier(sweep, command)}",
                    file=sys.stderr,
                    flush=True,
                )
            print(f"resuming the sweep in {sweep} (resume=auto):", flush=True)
        swept = swept_keys(configs[0].hydra, sweep)
        for job in jobs:
            print("  " + job.line(_own(job.overrides, [j.overrides for j in jobs], swept)), flush=True)
        todo = [i for i, job in enumerate(jobs) if job.metrics is None]
        launched = iter(self.launcher.launch([job_overrides[i] for i in todo], initial_job_idx) if todo else [])
        returns = []
        for job, cfg in zip(jobs, configs):
            if job.metrics is None:
                returns.append(next(launched))
                continue
            done = JobReturn(overrides=job.overrides, working_dir=str(job.directory), status=JobStatus.COMPLETED)
            done.return_value = job_value(cfg, job.metrics)
            returns.append(done)
        return returns

    def _config(self, overrides: list[str], num: int) -> DictConfig:
        """The job's config, as the launchers compose it (its number set, which a sweep's subdir may name)."""
        cfg = self.launcher.hydra_context.config_loader.load_sweep_config(self.launcher.config, overrides)
        with open_dict(cfg):
            cfg.hydra.job.id = cfg.hydra.job.num = num
        return cfg

    @staticmethod
    def _directory(cfg: DictConfig) -> Path:
        return Path(str(OmegaConf.select(cfg, "hydra.sweep.dir"))) / str(OmegaConf.select(cfg, "hydra.sweep.subdir"))


def _holds_jobs(sweep: Path) -> bool:
    return sweep.is_dir() and any((p / ".hydra").is_dir() for p in sweep.iterdir())


def _earlier(sweep: Path, command: str) -> str:
    """What a resume=auto that found no jobs in ``sweep`` says of the sweeps of ``gpt1 command`` beside it: the
    command that resumes the newest of them (its recorded overrides, ``gpt1.app.recorded``), else that there is
    none."""
    beside = sweep.parent
    earlier = [
        p
        for p in (beside.iterdir() if beside.is_dir() else [])
        if p != sweep and _holds_jobs(p) and (found := sweep_record(p)) is not None and found.command == command
    ]
    if not earlier:
        return f"; {beside} holds no earlier sweep of gpt1 {command} (give one's directory: hydra.sweep.dir)"
    newest = max(earlier, key=lambda p: (p / "multirun.yaml").stat().st_mtime)
    return f"; the newest sweep beside it resumes with gpt1 {command} -m resume=auto " + override(
        "hydra.sweep.dir", newest.absolute()
    )


def _own(overrides: Sequence[str], every: Sequence[Sequence[str]], swept: set[str]) -> list[str]:
    """The overrides that name a job: those of the ``swept`` keys, else those that set it apart from the other jobs of
    its batch, else all of them."""
    mine = [o for o in overrides if override_key(o) not in NOT_OF_THE_JOB]
    others = [set(o) for o in every if list(o) != list(overrides)]
    apart = [o for o in mine if any(o not in other for other in others)]
    return [o for o in mine if override_key(o) in swept] or apart or mine


class ContinueStudy(Callback):
    """Hydra callback of every gpt1 command (conf/hydra/default.yaml): a ``-m`` run of Hydra's Optuna sweeper with
    ``resume=auto`` and a storage (``hydra.sweeper.storage``) continues the study kept there (``continue_study``)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweeper = config.hydra.sweeper
        given = config.hydra.overrides.task
        resuming = any(override_key(o) == "resume" and o.partition("=")[2] == "auto" for o in given)
        if resuming and "optuna" in str(sweeper.get("_target_", "")) and sweeper.get("storage"):
            continue_study(config)


def continue_study(config: DictConfig) -> None:
    """Continue the Optuna study of ``config``'s sweeper from its storage: its complete trials count towards
    ``n_trials``; a trial that was running when the search stopped, or failed, is marked failed and its parameters
    asked first again, so that its job resumes from its own last.ckpt. One line per trial says which."""
    import warnings

    import optuna
    from optuna.exceptions import ExperimentalWarning
    from optuna.trial import TrialState

    sweeper = config.hydra.sweeper
    try:
        study = optuna.load_study(study_name=sweeper.study_name, storage=sweeper.storage)
    except KeyError:  # no such study yet
        return
    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    done = [t.params for t in complete]
    again: list[dict[str, Any]] = []
    print(f"continuing the Optuna study {study.study_name} of {sweeper.storage} (resume=auto)", flush=True)
    for trial in trials:
        params = " ".join(f"{k}={v}" for k, v in sorted(trial.params.items()))  # (a storage's order is its own)
        if trial.state == TrialState.RUNNING:  # stopped with the search: it would never end
            study.tell(trial.number, state=TrialState.FAIL)
        if trial.state == TrialState.COMPLETE:
            print(f"  trial {trial.number} ({params}): finished before, value {trial.value}", flush=True)
        elif trial.state in (TrialState.RUNNING, TrialState.FAIL) and trial.params not in done + again:
            print(f"  trial {trial.number} ({params}): did not finish: run again first, as a new trial", flush=True)
            again.append(trial.params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)  # (enqueue_trial is experimental in optuna 2)
        for params in again:
            study.enqueue_trial(params)
    with read_write(config.hydra.sweeper):
        sweeper.n_trials = max(0, sweeper.n_trials - len(complete))
    print(f"  {sweeper.n_trials} trials to run", flush=True)
