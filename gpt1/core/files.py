"""Crash-safe file writes: whatever gpt1 writes appears whole or not at all, with the mode ``open()`` would give it;
a full disk or a directory that cannot be written ends in a ``WriteError`` that says which file, how much space it
needs and what was kept."""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Optional

from gpt1.core.errors import UserError, exception_chain

FULL = (errno.ENOSPC, errno.EDQUOT)
UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR)


class WriteError(UserError, OSError):
    """A file gpt1 must write cannot be: its disk is full, or its directory cannot be written."""


def umask() -> int:
    """The process's umask (from /proc where it says, which leaves it untouched; else set and put back)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


def new_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: 0666 less the umask (``tempfile``'s own files are 0600)."""
    return 0o666 & ~umask()


PARTIAL = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")
"""The name of ``atomic_file``'s temporary file (``tempfile.mkstemp``'s): ``.<name>.<8 characters>.tmp``."""
NOT_OURS = ("wandb", "tensorboard")
"""The folders of a run directory that other libraries write (their temporary files are theirs)."""


@contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "wb", needed: Optional[int] = None) -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing; on success fsync it, give it ``new_file_mode()`` and
    rename it to ``path``. needed: the bytes it will take, if known (said when the disk is full)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise write_error(path, e) from e
    try:
        os.fchmod(fd, new_file_mode())
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        written = Path(tmp).stat().st_size if Path(tmp).exists() else 0
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, Exception) and _errno(e) is not None:
            raise write_error(path, e, max(needed or 0, written)) from e
        raise


def keep_aside(path: Path) -> Path:
    """Rename a damaged file of gpt1's (a run's metrics.json or provenance.json that cannot be read) to
    ``<name>.damaged-<time>`` beside it, so that what replaces it loses nothing; the new path."""
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    n = 1
    while aside.exists():  # (twice in a second)
        n += 1
        aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}-{n}")
    os.replace(path, aside)
    return aside


def remove_partial_writes(directory: Path) -> list[Path]:
    """Remove, under ``directory``, the temporary files of ``atomic_file`` that a killed process left (a checkpoint
    up to its size): only gpt1's own, by name (``PARTIAL``), not in other libraries' folders (``NOT_OURS``) or in
    hidden ones; the paths removed. Only the directory's one writer may call it (``gpt1.core.run_lock``): another
    writer's file under way would go."""
    removed = []
    for root, folders, names in os.walk(directory):
        folders[:] = [f for f in folders if not f.startswith(".") and f not in NOT_OURS]
        for name in names:
            if PARTIAL.fullmatch(name):
                path = Path(root) / name
                path.unlink(missing_ok=True)
                removed.append(path)
    return sorted(removed)


def _errno(e: BaseException) -> Optional[int]:
    """The errno of a full disk or an unwritable place in ``e`` or the exceptions it came from (torch's writer
    reports a full disk as a RuntimeError, "file write failed", from an OSError or none)."""
    for cause in exception_chain(e):
        if isinstance(cause, OSError) and cause.errno in (*FULL, *UNWRITABLE):
            return cause.errno
        if "No space left on device" in str(cause):
            return errno.ENOSPC
    return None


def write_error(path: Path, e: BaseException, needed: int = 0) -> Exception:
    """The one-line ``WriteError`` for ``e`` raised writing ``path``, or ``e`` itself if it is neither a full disk
    nor an unwritable place."""
    code = _errno(e)
    if code in UNWRITABLE:
        where = next((p for p in [path.parent, *path.parent.parents] if p.exists()), path.parent)
        return WriteError(
            f"cannot write {path}: {where} is not a writable directory ({os.strerror(code)}): "
            "make it writable or choose another directory (paths.output_dir, hydra.run.dir, "
            "paths.cache_dir or the command's output path)"
        )
    if code in FULL:
        try:
            free = shutil.disk_usage(path.parent).free
        except OSError:
            free = 0
        kept = "keeps its previous version" if path.exists() else "was not written"
        need = f"about {_size(needed)}" if needed else "more than is free"
        return WriteError(
            f"no space left on the device of {path}: writing it needs {need}, {_size(free)} is free "
            f"there; {path.name} {kept}, nothing else was lost{_last_good(path)}; free some space, or "
            "choose another directory, and run the command again"
        )
    return e  # type: ignore[return-value]


def path_error(path: Path, e: BaseException) -> Optional[UserError]:
    """The one-line ``UserError`` for ``e`` raised opening or making ``path`` where it is not what gpt1 reads or
    writes there: a directory in a file's place, a file in a directory's, a broken symbolic link, a file this user may
    not read; None for another error."""
    code = e.errno if isinstance(e, OSError) else None
    if code == errno.EISDIR or (code == errno.ENOENT and path.is_symlink()):
        what = "a directory" if code == errno.EISDIR else f"a broken symbolic link (to {os.readlink(path)})"
        return UserError(f"{path} is {what}, where gpt1 reads or writes a file: remove it, or give a file's path")
    if code == errno.EEXIST and path.exists() and not path.is_dir():
        return UserError(f"{path} is a file, where gpt1 writes a directory: give a directory's path, or move the file")
    if code in (errno.EACCES, errno.EPERM) and path.exists() and not os.access(path, os.R_OK):
        return UserError(
            f"cannot read {path} ({os.strerror(code)}): give this user read permission (chmod a+r {path}), or run "
            "as its owner"
        )
    return None


def _last_good(path: Path) -> str:
    """ "; the last good checkpoint is X" for a file of a run directory (a checkpoint, metrics.json), X the newest
    checkpoint beside it or in its checkpoints/."""
    found = [p for d in (path.parent, path.parent / "checkpoints") if d.is_dir() for p in d.glob("*.ckpt")]
    if not found:
        return "; no checkpoint had been saved" if path.suffix == ".ckpt" else ""
    last = max(found, key=lambda p: (p.stat().st_mtime, p.name == "last.ckpt"))
    return f"; the last good checkpoint is {last}"


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 2**10:.0f} KB"
