"""One writer per run directory: ``run_lock`` holds ``<run dir>/run.lock`` while a command writes there, so that a
second gpt1 process on it stops at once, in one line naming the holder, instead of mixing its checkpoints and logs
with the first's. The design (a hard-linked file, a heartbeat, when a lock is stale, why not flock): docs/resume.md,
"One process per run directory". The holder, alone in the directory, removes what killed writes left there."""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Optional

from gpt1.core.errors import UserError
from gpt1.core.files import new_file_mode, remove_partial_writes
from gpt1.core.run_record import resume_command

NAME = "run.lock"
HEARTBEAT_S = 30.0
"""How often the holder touches its lock."""
STALE_S = 180.0
"""A lock held from another host and untouched this long is stale: its holder's heartbeat stopped (a lost node).
Heartbeats, a shared filesystem's attribute cache (up to a minute on NFS) and the hosts' clocks all fit in it."""


class RunDirectoryInUse(UserError):
    """Another live gpt1 process holds the run directory."""


@dataclass(frozen=True)
class Holder:
    """Who holds a run directory's lock."""

    host: str
    pid: int
    start: Optional[str]
    """The process's start ("<boot id>:<start time in clock ticks>", from /proc; None where there is no /proc)."""
    since: str
    command: str
    slurm_job: Optional[str] = None
    slurm_restart: int = 0

    @staticmethod
    def this_process(command: str) -> Holder:
        job = os.environ.get("SLURM_JOB_ID")
        return Holder(
            host=socket.gethostname(),
            pid=os.getpid(),
            start=_process_start(os.getpid()),
            since=datetime.now().astimezone().isoformat(sep=" ", timespec="seconds"),
            command=command,
            slurm_job=job,
            slurm_restart=int(os.environ.get("SLURM_RESTART_COUNT") or 0) if job else 0,
        )

    def __str__(self) -> str:
        job = f", SLURM job {self.slurm_job}" if self.slurm_job else ""
        return f"PID {self.pid} on {self.host} ({self.command}{job}), since {self.since}"


def _process_start(pid: int) -> Optional[str]:
    """``pid``'s start, unique on its host across reboots: "<boot id>:<start time>"; None without /proc or if ``pid``
    does not run (a zombie, killed and not yet reaped, does not)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()  # (after the command's name)
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else f"{boot}:{fields[19]}"  # state, then starttime (field 22 of proc(5))


def _runs(holder: Holder) -> bool:
    """Whether ``holder`` (of this host) still runs: its PID exists and is the same process."""
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process of that PID
        pass
    if holder.start is None or not Path("/proc").is_dir():
        return True  # nothing more to compare on this system
    return _process_start(holder.pid) == holder.start


def _stale(holder: Optional[Holder], age: float, me: Holder) -> Optional[str]:
    """Why the lock of ``holder`` (None: unreadable), touched ``age`` seconds ago, is stale; None if it is held."""
    if holder is not None and holder.slurm_job and holder.slurm_job == me.slurm_job:
        if holder.slurm_restart < me.slurm_restart:
            return (
                f"this SLURM job's attempt {holder.slurm_restart}, which SLURM ended before requeueing the job "
                f"(this is attempt {me.slurm_restart})"
            )
    if holder is not None and holder.host == me.host:
        if (holder.pid, holder.start) == (me.pid, me.start):
            return "this very process, which had not released it"
        return None if _runs(holder) else "which is no longer running (killed, or crashed)"
    if age > STALE_S:
        return f"whose heartbeat stopped {age / 60:.0f} minutes ago (its host lost, or the process killed)"
    return None


class RunLock:
    """The lock of the run directory ``directory``: ``acquire``, then ``release``."""

    def __init__(self, directory: Path, command: str) -> None:
        self.directory = Path(directory)
        self.path = self.directory / NAME
        self.me = Holder.this_process(command)
        self._stop = threading.Event()
        self._beat: Optional[threading.Thread] = None

    def acquire(self) -> None:
        """Hold the lock, taking over a stale one (saying so on stderr); ``RunDirectoryInUse`` if a live process
        holds it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.path.is_dir() or (self.path.is_symlink() and not self.path.exists()):
            raise UserError(
                f"{self.path} is {'a directory' if self.path.is_dir() else 'a broken symbolic link'}, where gpt1 keeps "
                "the run's lock file: remove it (no gpt1 process holds a lock that is not a file)"
            )
        mine = self._write_beside()
        try:
            while not self._link(mine):
                holder, age = self._read()
                if age is None:
                    continue  # released meanwhile: try again
                why = _stale(holder, age, self.me)
                if why is None:
                    raise RunDirectoryInUse(self._in_use(holder, age))
                os.replace(mine, self.path)  # (the stale lock goes, whole)
                time.sleep(0.2)  # two takeovers at once: the later replace wins; the earlier sees it on reading back
                now, _ = self._read()
                if now != self.me:
                    raise RunDirectoryInUse(self._in_use(now, 0.0))
                was = "an unreadable lock" if holder is None else f"the lock of {holder}"
                print(f"note: {self.path}: took over {was}, {why}", file=sys.stderr, flush=True)
                break
        finally:
            Path(mine).unlink(missing_ok=True)
        self._beat = threading.Thread(target=self._heartbeat, name="gpt1-run-lock", daemon=True)
        self._beat.start()

    def release(self) -> None:
        """Stop the heartbeat and remove the lock if it is still this process's."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        holder, _ = self._read()
        if holder == self.me:
            self.path.unlink(missing_ok=True)

    def _write_beside(self) -> str:
        """The lock's contents, in a temporary file beside it."""
        fd, tmp = tempfile.mkstemp(prefix=f".{NAME}.", suffix=".tmp", dir=self.directory)
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(self.me), f)
        os.chmod(tmp, new_file_mode())
        return tmp

    def _link(self, mine: str) -> bool:
        """Give the lock ``mine``'s contents if there is none; False if there is one."""
        try:
            os.link(mine, self.path)
            return True
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links: create the file exclusively, then write it
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, new_file_mode())
            except FileExistsError:
                return False
            with os.fdopen(fd, "w") as f:
                f.write(Path(mine).read_text())
            return True

    def _read(self) -> tuple[Optional[Holder], Optional[float]]:
        """The lock's holder (None if the file cannot be read as one) and the seconds since it was last touched
        (opened first: on NFS an open refreshes the file's attributes); (None, None) if there is no lock."""
        try:
            with open(self.path) as f:
                age = time.time() - os.fstat(f.fileno()).st_mtime
                text = f.read()
        except FileNotFoundError:
            return None, None
        try:
            return Holder(**json.loads(text)), age
        except (ValueError, TypeError):
            return None, age

    def _in_use(self, holder: Optional[Holder], age: float) -> str:
        who = str(holder) if holder is not None else f"a process whose lock {self.path} cannot be read"
        text = (
            f"{self.directory} is in use by another gpt1 process, {who}: two processes in one run directory would "
            "mix their checkpoints and logs. Wait for it to end, or stop it (Ctrl-C in its terminal"
            + (f", or kill {holder.pid} on {holder.host}" if holder is not None else "")
            + f": it saves last.ckpt first) and continue with {self._resume()}; or give this "
            "run a directory of its own (hydra.run.dir=...)"
        )
        if holder is None or holder.host != self.me.host:
            text += (
                f". If that process is gone (a lost node), its lock is taken over {STALE_S / 60:.0f} minutes after "
                f"its last heartbeat ({age:.0f} s ago), or delete {self.path}"
            )
        return text

    def _resume(self) -> str:
        """The command that continues the run, from its directory's record (``gpt1.core.run_record``)."""
        found = resume_command(self.directory)
        return found or f"its command, resume=auto hydra.run.dir={self.directory} added"

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            holder, _ = self._read()
            if holder != self.me:  # taken over (this process was thought gone): say so once, touch nothing
                print(
                    f"warning: {self.path} was taken over by {holder or 'another process'}: this process no longer "
                    "holds its run directory",
                    file=sys.stderr,
                    flush=True,
                )
                return
            try:
                os.utime(self.path)
            except OSError:
                pass  # (a filesystem hiccup: the next beat tries again)


def leads_its_run() -> bool:
    """Whether this process is its run's first (or only) process, which holds the run directory: global rank 0, read
    from what launchers set before any Trainer exists: torchrun's RANK, SLURM's SLURM_PROCID (a task of the job),
    else the NODE_RANK (or GROUP_RANK) and LOCAL_RANK that Lightning gives the processes it starts."""
    for name in ("RANK", "SLURM_PROCID"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name]) == 0
    node = os.environ.get("NODE_RANK") or os.environ.get("GROUP_RANK") or "0"
    return node == "0" and os.environ.get("LOCAL_RANK", "0") == "0"


_HELD: dict[Path, list] = {}
"""Run directory -> [its RunLock, how many holds of this process are on it]."""


def hold(directory: str | os.PathLike, command: str) -> None:
    """Hold ``directory``'s lock (``RunLock``), as ``command`` (e.g. "gpt1 pretrain"), and remove the partial files
    of killed writes in it; reentrant within a process (each ``hold`` ends with a ``let_go``). The other processes
    of a run (DDP's ranks but the first) hold nothing."""
    if not leads_its_run():
        return
    key = Path(directory).resolve()
    if key in _HELD:
        _HELD[key][1] += 1
        return
    lock = RunLock(key, command)
    lock.acquire()
    _HELD[key] = [lock, 1]
    removed = remove_partial_writes(key)
    if removed:
        names = ", ".join(str(p.relative_to(key)) for p in removed)
        print(
            f"removed {len(removed)} partial file{'s' if len(removed) > 1 else ''} of a write that was killed: "
            f"{names} (in {key})",
            file=sys.stderr,
            flush=True,
        )


def let_go(directory: str | os.PathLike) -> None:
    """End a ``hold`` of ``directory``: the last one releases its lock."""
    key = Path(directory).resolve()
    if key in _HELD:
        _HELD[key][1] -= 1
        if not _HELD[key][1]:
            _HELD.pop(key)[0].release()


@contextmanager
def run_lock(directory: str | os.PathLike, command: str) -> Iterator[None]:
    """``hold`` ``directory`` for the block."""
    hold(directory, command)
    try:
        yield
    finally:
        let_go(directory)
