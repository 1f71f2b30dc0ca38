"""The sample data (novels for pre-training, seven labelled tasks): ``paths.sample_data``, which the quickstart and the
sample tasks (``conf/task/*.yaml``) read.

It ships with gpt1, gzip-compressed (the repository's ``sample_data/``, installed as the package data
``gpt1.sample_data``), and is unpacked once into the data cache (``<paths.cache_dir>/sample_data/<digest>/``), each
file streamed out and checked against the sha256 of ``manifest.json``, so that every loader (text globs, JSON Lines,
CSV, Parquet) and every user reads plain files, the same bytes as the original sample. ``GPT1_SAMPLE_DATA`` points at
a folder of the same layout instead (nothing is unpacked then).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tempfile
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from gpt1.core.errors import DataError
from gpt1.core.files import write_error

ENV = "GPT1_SAMPLE_DATA"
"""The environment variable naming a sample-data folder of one's own (books/, tasks/ as gpt1's)."""
PACKAGE = "gpt1.sample_data"
"""The package data holding the compressed sample, its manifest.json and README.md."""
_CHUNK = 1 << 20


def sample_data(cache_dir: str | os.PathLike) -> str:
    """The sample data's folder: ``$GPT1_SAMPLE_DATA`` when set (it must exist), else gpt1's own sample unpacked
    into ``cache_dir`` (once: a later call finds it there)."""
    if os.environ.get(ENV):
        own = Path(os.environ[ENV]).expanduser().absolute()
        if not own.is_dir():
            raise DataError(f"{ENV}={os.environ[ENV]} is not a folder: point it at your sample data, or unset it")
        return str(own)
    return str(unpack(Path(cache_dir)))


def own_sample_hint(pattern: str) -> str:
    """What to say of a path under ``$GPT1_SAMPLE_DATA`` that does not exist ("" for any other path)."""
    own = os.environ.get(ENV)
    if not own or not str(Path(pattern).expanduser().absolute()).startswith(str(Path(own).expanduser().absolute())):
        return ""
    return f"it is under {ENV}={own}: put the sample's file there, or unset {ENV} to use gpt1's own sample"


def unpack(cache_dir: Path) -> Path:
    """gpt1's sample unpacked under ``cache_dir`` (made once, atomically: concurrent processes, e.g. the ranks of a
    job, each unpack into a folder of their own and the first rename wins). A file whose sha256 differs from the
    manifest's is refused."""
    try:
        shipped = files(PACKAGE)
        manifest = shipped.joinpath("manifest.json").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as e:
        raise DataError(
            f"gpt1's sample data is not installed with it ({PACKAGE}): reinstall gpt1, or set {ENV} to a folder "
            "holding the sample's books/ and tasks/"
        ) from e
    target = (cache_dir / "sample_data" / hashlib.sha256(manifest).hexdigest()[:16]).absolute()
    if target.is_dir():
        return target
    work = target.parent / ".unpacking"  # (its mkdtemp's name, for write_error)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        for name, entry in json.loads(manifest)["files"].items():
            _gunzip(shipped.joinpath(*f"{name}.gz".split("/")), work / name, entry["sha256"])
        for name in ("manifest.json", "README.md"):
            (work / name).write_bytes(shipped.joinpath(name).read_bytes())
        try:
            work.rename(target)
        except OSError:  # another process unpacked it first
            if not target.is_dir():
                raise
    except OSError as e:  # a full disk, an unwritable cache: one line
        error = write_error(target, e)
        if error is e:
            raise
        raise error from e
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _gunzip(src: Traversable, dst: Path, sha256: str) -> None:
    """Stream ``src`` (gzip) into ``dst``, checking the bytes written against ``sha256``."""
    digest = hashlib.sha256()
    dst.parent.mkdir(parents=True, exist_ok=True)
    with src.open("rb") as raw, gzip.open(raw) as f, dst.open("wb") as out:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != sha256:
        raise DataError(f"{src}: its sha256 is not the manifest's: the installed gpt1 is damaged, reinstall it")
