"""Every file a training run reads, with a hash of its content, for its provenance.json (``gpt1.core.provenance``);
a corpus of more than ``HASHED`` bytes by its files' sizes and modification times and the key of its prepared cache
instead (hashing gigabytes would take minutes: the cache's key changes whenever those do)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from gpt1.data.base import DataModule
from gpt1.data.pretrain_data import PretrainDataModule
from gpt1.data.sources import resolve_files
from gpt1.tasks.task_data import TaskDataModule

HASHED = 256 * 2**20
"""The most bytes of a corpus whose files are hashed (a task's are, whatever their size)."""


def run_inputs(cfg: DictConfig, data: DataModule, resume: Optional[str]) -> dict[str, Any]:
    """What the run of ``cfg`` on ``data`` (prepared) reads, resumed from ``resume``: name -> ``described`` files."""
    found: dict[str, Any] = {}
    for key in ("init_from", "tokenizer_from"):
        value = None if OmegaConf.is_missing(cfg, key) else cfg.get(key)
        if value and value != "random":
            found[key] = described(Path(value))
    if resume is not None:
        found["resume"] = described(Path(resume))
    if isinstance(data, PretrainDataModule):
        tokenizer = data.tokenizer_path or cfg.tokenizer.get("path")
        if tokenizer and not cfg.get("init_from"):  # (init_from's tokenizer is its checkpoint's)
            found["tokenizer"] = described(Path(tokenizer))
        found["corpus"] = corpus(cfg.data, data)
    elif isinstance(data, TaskDataModule):
        task = data.task
        if task.data_files is not None:
            found["task_data"] = {
                split: [described(p) for p in resolve_files(_globs(globs), f"task.data_files.{split}")]
                for split, globs in task.data_files.items()
            }
        else:
            found["task_data"] = {"hub": task.dataset, "config": task.dataset_config, "data_dir": task.data_dir}
    return found


def corpus(cfg: Any, data: PretrainDataModule) -> dict[str, Any]:
    """The corpus's files or its hub dataset, and the files of its prepared cache (named by the cache's key)."""
    files = [p for key in ("train_files", "valid_files") if cfg.get(key) for p in resolve_files(_globs(cfg[key]), key)]
    hashed = sum(p.stat().st_size for p in files) <= HASHED
    found: dict[str, Any] = {"files": [described(p) if hashed else _stat(p) for p in files]}
    if cfg.get("hf_dataset"):
        found["hub"] = {"dataset": cfg.hf_dataset, "config": cfg.get("hf_config")}
    found["prepared"] = {split: str(path.absolute()) for split, path in data.paths.items()}
    return found


def described(path: Path) -> dict[str, Any]:
    """A file as the record gives it: absolute path, bytes and sha256; a directory (a tokenizer's): each of its
    files so."""
    if path.is_dir():
        return {"path": str(path.absolute()), "files": [described(p) for p in sorted(path.rglob("*")) if p.is_file()]}
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return {"path": str(path.absolute()), "bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def _stat(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"path": str(path.absolute()), "bytes": st.st_size, "modified_ns": st.st_mtime_ns}


def _globs(value: Any) -> Sequence[str]:
    """A data setting's globs: one, or a list."""
    return [value] if isinstance(value, str) else [str(v) for v in value]
