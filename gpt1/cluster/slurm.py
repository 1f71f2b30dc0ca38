"""gpt1 on SLURM through Hydra's submitit launcher (``hydra/launcher=submitit_slurm``): the launcher's defaults that
follow the trainer, job states from ``squeue`` on a cluster that keeps no accounting, and the one line that says
which job of a sweep failed. Requeueing is submitit's (``gpt1.training.callbacks.safe_stop`` saves first);
Lightning's own is off (``slurm_environment``): it saves an ``hpc_ckpt_*.ckpt`` that ``resume=auto`` does not read,
on a signal (USR1) that submitit does not ask SLURM for.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from gpt1.core.compat import slurm_job_watcher, submitted_arguments

SLURM_LAUNCHER = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"


def on_cpu(accelerator: str, cpu: Any, other: Any) -> Any:
    """``${gpt1.on_cpu:${trainer.accelerator},A,B}``: A when the trainer runs on the CPU, else B (the launcher's
    GPUs, tasks and CPUs per node follow the trainer)."""
    return cpu if accelerator == "cpu" else other


def slurm_environment() -> list[Any]:
    """Lightning's cluster environment for a SLURM job, without its auto-requeue (submitit requeues); none
    elsewhere."""
    from lightning.fabric.plugins.environments import SLURMEnvironment

    return [SLURMEnvironment(auto_requeue=False)] if SLURMEnvironment.detect() else []


class SubmititCallback(Callback):
    """Hydra callback of every gpt1 command (conf/hydra/default.yaml): before a ``-m`` run submits to SLURM, take the
    job states from ``squeue`` where ``sacct`` has no accounting to read them from."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.hydra.launcher.get("_target_") == SLURM_LAUNCHER:
            try:
                watch_with_squeue_without_accounting()
            except ImportError:  # no plugin: the launcher says to install it
                pass


def watch_with_squeue_without_accounting() -> None:
    """submitit reads job states from ``sacct`` only: on a cluster without accounting it repeats an error every few
    seconds, and a job that ends without a result (killed, or exited on an error) is never seen to end, so that the
    sweep waits forever. Where ``sacct`` fails, the states come from ``squeue`` instead, said once."""
    from gpt1.cluster.squeue import SqueueWatcher

    if isinstance(slurm_job_watcher(), SqueueWatcher):
        return
    try:
        probe = subprocess.run(["sacct", "-n", "-X", "-o", "JobID", "-S", "now"], capture_output=True, timeout=60)
        accounting = probe.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        accounting = False
    if not accounting:
        print(
            "note: this SLURM keeps no accounting (sacct): job states come from squeue only",
            file=sys.stderr,
            flush=True,
        )
        slurm_job_watcher(replace_with=SqueueWatcher())


def failed_job_message(error: BaseException) -> Optional[str]:
    """The one line for submitit's error about a job of a sweep that failed: which job (its number, the overrides that
    set it apart from the sweep's other jobs, its SLURM id), the last line of its error log (srun's own aside) and
    the log's path. None when the error names no job's files."""
    found = re.search(r"(\S+)/(\d+(?:_\d+)?)_(\d+)_(?:result\.pkl|log\.err)", str(error))
    if found is None:
        return None
    folder, job_id, task = Path(found.group(1)), found.group(2), found.group(3)
    log = folder / f"{job_id}_{task}_log.err"
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines()] if log.is_file() else []
    written = [line for line in lines if line and not line.startswith("srun: ")]  # (a killed task wrote none)
    last = (written or [line for line in lines if line] or ["no error output"])[-1]
    which = f"SLURM job {job_id}"
    jobs = _submitted(folder.parent)
    if job_id in jobs:
        number, overrides = jobs[job_id]
        others = [set(o) for j, (_, o) in jobs.items() if j != job_id]
        own = [o for o in overrides if any(o not in other for other in others)]
        which = f"job {number} ({' '.join(own) + '; ' if own else ''}{which})"
    return f"{which} of the sweep failed: {last.removeprefix('error: ')} (its log: {log})"


def _submitted(folder: Path) -> dict[str, tuple[int, list[str]]]:
    """SLURM job id -> (Hydra job number, overrides) of the jobs whose submitit folders are in ``folder``, read from
    the pickles submitit ran (the launcher's arguments); what cannot be read is left out."""
    jobs = {}
    for path in folder.glob("*/*_submitted.pkl"):
        try:
            overrides, _, number = submitted_arguments(path)[:3]
            jobs[path.parent.name] = (number, list(overrides))
        except Exception:  # noqa: BLE001  (a job named by its SLURM id alone)
            pass
    return jobs
