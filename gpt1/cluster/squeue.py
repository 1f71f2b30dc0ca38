"""submitit's watcher of SLURM jobs reading ``squeue`` instead of ``sacct``, for a cluster that keeps no accounting
(``gpt1.cluster.slurm.watch_with_squeue_without_accounting`` puts it in place)."""

from __future__ import annotations

import time
from typing import Optional

from gpt1.core.compat import slurm_watcher_base


class SqueueWatcher(slurm_watcher_base()):
    """Job states from ``squeue`` (every state, each array task on its line). A job that is not in squeue has ended
    (over the cluster's ``MinJobAge`` ago), once it has been seen there or two minutes after it was submitted: its
    result file, or its absence, says how."""

    ENDED = "ENDED"

    def __init__(self) -> None:
        super().__init__(delay_s=30)  # squeue is cheap: a job that failed is seen within 30 s
        self._seen: set[str] = set()

    def command(self, pending: set[str]) -> Optional[list[str]]:
        if not pending:
            return None
        return ["squeue", "-h", "-r", "--states=all", "-o", "%i|%T|%N"]

    def read_info(self, string: bytes | str) -> dict[str, dict[str, str]]:
        text = string.decode() if isinstance(string, bytes) else string
        info = {}
        for line in text.splitlines():
            job_id, state, nodes = (line.split("|") + ["", ""])[:3]
            info[job_id.strip()] = {"JobID": job_id.strip(), "State": state.strip(), "NodeList": nodes.strip()}
        registered = self.registered()
        self._seen |= info.keys() & registered
        for job_id in registered - info.keys():
            if job_id in self._seen or time.time() - self.started() > 120:
                info[job_id] = {"JobID": job_id, "State": self.ENDED, "NodeList": ""}
        return info
