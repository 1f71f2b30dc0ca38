"""What gpt1 writes (issue 39): files with the mode the umask gives an ordinary open(); a full disk or a directory
that cannot be written in one line that names the file, the space it needs and the last good checkpoint, with
nothing lost."""

import errno
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

import gpt1.core.files
from gpt1.app.runner import user_message
from gpt1.checkpoints.hf import export_hf
from gpt1.commands.pretrain import train
from tests.helpers import FEW, run_gpt1

CHECKPOINTED = [*FEW, "callbacks.checkpoint.every_n_steps=2", "trainer.precision=32-true"]


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_every_file_written_has_the_mode_the_umask_gives(tmp_path, mask, monkeypatch):
    """Checkpoints, metrics.json, logs, the kernels' record, the data cache (tokenizer, token streams) and an HF
    export: 0644 under umask 022, 0600 under 077 (tempfile's renamed files were 0600 whatever the umask)."""
    run, cache, hf = tmp_path / "run", tmp_path / "cache", tmp_path / "hf"
    previous = os.umask(mask)
    try:
        with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
            train(compose("pretrain", [f"paths.output_dir={run}", f"paths.cache_dir={cache}", *CHECKPOINTED]))
        export_hf(run / "checkpoints" / "last.ckpt", hf)
    finally:
        os.umask(previous)
    files = [p for d in (run, cache, hf) for p in d.rglob("*") if p.is_file()]
    wrong = {
        str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777)
        for p in files
        if p.stat().st_mode & 0o777 != 0o666 & ~mask
    }
    assert not wrong, f"not {oct(0o666 & ~mask)}: {wrong}"
    names = {p.name for p in files}
    assert {"last.ckpt", "step0000002.ckpt", "metrics.json", "metrics.csv", "model.safetensors", "config.json"} <= names
    assert any(p.suffix == ".bin" for p in files) and any(
        p.parent.name == "tokenizers" or "tokenizer" in p.name for p in files if p.is_relative_to(cache)
    ), names


def test_a_full_disk_names_the_file_the_space_and_keeps_the_previous_file(tmp_path, monkeypatch):
    """(Injected: the write's fsync fails as a full disk's does.) metrics.json, a cache file or an export alike."""
    path = tmp_path / "metrics.json"
    path.write_text("old")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_text("ckpt")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(gpt1.core.files.os, "fsync", full)
    with pytest.raises(OSError) as e:
        with gpt1.core.files.atomic_file(path, "w", needed=3 * 2**20) as f:
            f.write("new")
    message = user_message(e.value)
    assert message.startswith(f"no space left on the device of {path}: writing it needs about 3.0 MB, ")
    assert (
        f"metrics.json keeps its previous version, nothing else was lost; the last good checkpoint is "
        f"{tmp_path / 'checkpoints' / 'last.ckpt'}; free some space" in message
    )
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints", "metrics.json"]


def can_mount() -> bool:
    return sys.platform == "linux" and os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.fixture
def small_disk(tmp_path):
    """A 1.3 MB tmpfs (as root; skipped elsewhere): two checkpoints of the tiny model fit, not a third."""
    if not can_mount():
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "small"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1300k", "tmpfs", str(disk)]).returncode:
        pytest.skip("tmpfs cannot be mounted here")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


def test_a_run_on_a_full_disk_ends_in_one_line_naming_the_last_good_checkpoint(small_disk, cache_dir, tmp_path):
    run = small_disk / "run"
    overrides = [*CHECKPOINTED, "trainer.max_steps=6", f"hydra.run.dir={run}", f"paths.cache_dir={cache_dir}"]
    proc = run_gpt1("pretrain", *overrides, cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    ckpts = run / "checkpoints"
    assert last.startswith(
        f"error: no space left on the device of {ckpts / 'step0000004.ckpt'}: writing it needs about "
    ), proc.stderr
    assert f"the last good checkpoint is {ckpts / 'last.ckpt'}" in last
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in ckpts.iterdir()) == ["last.ckpt", "step0000002.ckpt"]  # no partial file


@pytest.mark.parametrize("key", ["hydra.run.dir", "paths.cache_dir"])
def test_an_output_or_cache_directory_that_cannot_be_written_is_named(tmp_path, key):
    (tmp_path / "a_file").write_text("")
    where = tmp_path / "a_file" / "dir"
    other = {"hydra.run.dir": f"paths.cache_dir={tmp_path / 'cache'}", "paths.cache_dir": f"hydra.run.dir={tmp_path}"}
    proc = run_gpt1("pretrain", *FEW, f"{key}={where}", other[key], cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    # the cache's first write is the sample data's unpacking, named by its key (paths.sample_data: cannot write ...)
    written, reason = re.sub(r"^error: (paths\.sample_data: )?cannot write ", "", last).split(": ", 1)
    assert Path(written).is_relative_to(where), last  # the directory, or the first one gpt1 makes in it
    assert reason == (
        f"{tmp_path / 'a_file'} is not a writable directory (Not a directory): make it "
        "writable or choose another directory (paths.output_dir, hydra.run.dir, paths.cache_dir or the command's "
        "output path)"
    )
