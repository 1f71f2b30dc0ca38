"""The sample data ships with gpt1 (sample_data/, gzip-compressed) and is unpacked once into the cache, each file's
bytes those of its manifest; ``GPT1_SAMPLE_DATA`` points elsewhere, and a missing sample says so in one line."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpt1.core.errors import DataError
from gpt1.data import sample
from gpt1.data.sources import resolve_files

REPO = Path(__file__).resolve().parents[1]
MANIFEST = json.loads((REPO / "sample_data/manifest.json").read_text())


def test_the_repository_holds_every_file_of_the_manifest_compressed_and_small():
    shipped = {p.relative_to(REPO / "sample_data").as_posix() for p in (REPO / "sample_data").rglob("*.gz")}
    assert shipped == {f"{name}.gz" for name in MANIFEST["files"]}
    assert max((REPO / "sample_data" / name).stat().st_size for name in shipped) < 2 * 1024**2
    assert sum((REPO / "sample_data" / name).stat().st_size for name in shipped) < 10 * 1000**2
    readme = (REPO / "sample_data/README.md").read_text()
    assert MANIFEST["canary"] in readme  # the BIG-bench canary travels with the files derived from BIG-bench
    for source in MANIFEST["sources"]:
        assert f"`{source}`" in readme  # each source named, with its licence


def test_it_unpacks_once_into_the_cache_with_the_manifests_bytes(tmp_path, monkeypatch):
    monkeypatch.delenv(sample.ENV, raising=False)
    folder = Path(sample.sample_data(tmp_path / "cache"))
    assert folder.parent == (tmp_path / "cache" / "sample_data").absolute()
    for name, entry in MANIFEST["files"].items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == entry["sha256"], name
    assert (folder / "README.md").is_file() and (folder / "manifest.json").is_file()
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no half-unpacked folder left beside it
    stamp = (folder / "books/valid/persuasion.txt").stat().st_mtime_ns
    assert sample.sample_data(tmp_path / "cache") == str(folder)
    assert (folder / "books/valid/persuasion.txt").stat().st_mtime_ns == stamp  # found, not unpacked again


def test_a_damaged_file_is_refused_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(sample.ENV, raising=False)
    damaged = tmp_path / "package"
    shutil.copytree(REPO / "sample_data", damaged)
    (damaged / "tasks/story/test.jsonl.gz").write_bytes(gzip.compress(b'{"context": "not the sample"}\n'))
    monkeypatch.setattr(sample, "files", lambda package: damaged)
    with pytest.raises(DataError, match=r"story/test.jsonl.gz: its sha256 is not the manifest's"):
        sample.sample_data(tmp_path / "cache")
    assert list((tmp_path / "cache" / "sample_data").iterdir()) == []


def test_gpt1_sample_data_points_elsewhere_and_a_missing_sample_names_it(tmp_path, monkeypatch):
    own = tmp_path / "mine"
    (own / "books/train").mkdir(parents=True)
    monkeypatch.setenv(sample.ENV, str(own))
    assert sample.sample_data(tmp_path / "cache") == str(own)
    assert not (tmp_path / "cache").exists()  # nothing unpacked
    with pytest.raises(FileNotFoundError, match=f"under {sample.ENV}={own}: .* unset {sample.ENV}"):
        resolve_files([f"{own}/books/train/*.txt"], "data.train_files")
    monkeypatch.setenv(sample.ENV, str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match=f"{sample.ENV}=.*nowhere is not a folder"):
        sample.sample_data(tmp_path / "cache")


def test_the_quickstart_reads_the_shipped_sample_from_any_directory(tmp_path, cache_dir):
    """A config composed from a directory with nothing beside it: the books are those of the manifest, unpacked into
    the run's cache (what a clone without ../shared, or an installed gpt1, runs)."""
    env = {k: v for k, v in os.environ.items() if k != sample.ENV}
    code = (
        "from gpt1 import api; cfg = api.compose('pretrain', ['paths.cache_dir=cache']); "
        "print(cfg.data.train_files[0]); print(cfg.run_name)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    books, run_name = done.stdout.split()
    assert Path(books).parent == (tmp_path / "cache/sample_data").resolve() / Path(books).parts[-4] / "books/train"
    assert run_name == "quickstart" and len(list(Path(books).parent.glob("*.txt"))) == 9
