"""What the tests share besides their fixtures (those: tests/conftest.py): the one way to start a command
(``run_gpt1``, ``run_python``, ``fresh_shell``) and the environment it runs in (``OFFLINE_ENV``), the overrides of
tiny runs, and the directories built once per test session for every pytest-xdist worker (``built_once``)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from gpt1.data.cache import made_once

REPO = Path(__file__).resolve().parents[1]

OFFLINE_ENV = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
OFFLINE_ENV.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", PYTHONUNBUFFERED="1")
"""The environment of a command a test starts: this process's as tests/conftest.py set it up (the session's cache of
measured CPU kernels, W&B offline) before any test ran, the hub libraries offline (a download fails loudly), the
output unbuffered (stdout and stderr in the order printed) and no HYDRA_FULL_ERROR (a user's setting that turns the
one-line errors into tracebacks; the tests that want it set it). Pass ``env={**OFFLINE_ENV, ...}`` to add to it."""

TINY_RUN = [
    "model=tiny",
    "tokenizer.vocab_size=512",
    "data.train_files=[${paths.sample_data}/books/train/northanger_abbey.txt]",
    "data.batch_size=8",
    "data.max_valid_windows=32",
    "logger=csv",
    "trainer.enable_progress_bar=false",
    "trainer.num_sanity_val_steps=0",
]
"""Overrides for a pretrain run of seconds: the tiny model on one novel, validated on 32 windows of another."""

FEW = [
    *TINY_RUN,
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "trainer.check_val_every_n_epoch=null",
    "trainer.limit_val_batches=2",
    "callbacks.samples.every_n_steps=0",
]
"""4 updates of the tiny model, validated twice on 2 batches."""

FEW_FINETUNE = [
    "++task.splits.train='train[:64]'",
    "++task.splits.validation='validation[:16]'",
    "++task.splits.test='test[:16]'",
    "batch_size=8",
    "trainer.max_steps=4",
    "logger=csv",
    "trainer.enable_progress_bar=false",
    "trainer.num_sanity_val_steps=0",
]
"""4 fine-tuning updates of 8 examples (of the first 64), validated and tested on 16 examples each."""

CAPPED = [
    "++task.splits.train='train[:256]'",
    "++task.splits.validation='validation[:48]'",
    "++task.splits.test='test[:40]'",
]
"""The first rows of each split of a task only (task.splits slices): seconds to read and encode."""

FAST = [
    *CAPPED,
    "batch_size=16",
    "trainer.max_steps=3",
    "logger=csv",
    "trainer.enable_progress_bar=false",
    "trainer.num_sanity_val_steps=0",
]
"""A fine-tuning run of seconds: 3 updates of 16 examples, on ``CAPPED``'s rows."""


GPT1 = str(Path(sys.executable).parent / "gpt1")
"""The ``gpt1`` console script that the install put beside this Python (its environment's bin/, first on a user's
PATH when the environment is active), whatever ``gpt1`` the PATH of the tests' process finds first."""


def console_script(name: str) -> Path:
    """Where the install put a package's console script (its environment's bin/, as on a user's PATH)."""
    files = importlib.metadata.distribution(name).files or []
    (script,) = [f for f in files if f.name == name and f.parent.name in ("bin", "Scripts")]
    return Path(script.locate()).resolve()


def run_gpt1(
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
    check: bool = True,
    log: Path | None = None,
) -> subprocess.CompletedProcess:
    """``gpt1 ARGS`` as a user types it: the console script of this Python's environment, run in ``cwd`` in ``env``
    (``OFFLINE_ENV`` unless given); see ``run_python``."""
    return _run([GPT1, *args], cwd, env, timeout, check, log)


def run_python(
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
    check: bool = True,
    log: Path | None = None,
) -> subprocess.CompletedProcess:
    """``python ARGS`` (``-m MODULE ...``, ``-c CODE ...``, a script) with this Python, run in ``cwd`` in ``env``
    (``OFFLINE_ENV`` unless given), its output captured as text; past ``timeout`` seconds it is killed and the test
    fails. ``check``: a status other than 0 fails the test, naming the command and showing what it printed.
    ``log``: stdout and stderr go into that file (as ``> log 2>&1``: not a terminal, nor a pipe), its text the
    returned stdout."""
    return _run([sys.executable, *args], cwd, env, timeout, check, log)


def _run(
    argv: list[str], cwd: Path, env: Mapping[str, str] | None, timeout: float, check: bool, log: Path | None
) -> subprocess.CompletedProcess:
    env = dict(OFFLINE_ENV if env is None else env)
    if log is None:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    else:
        with log.open("w") as out:
            done = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
        done.stdout = log.read_text(encoding="utf-8", errors="replace")
    if check and done.returncode != 0:
        said = f"{done.stdout[-3000:]}\n{(done.stderr or '')[-3000:]}"
        pytest.fail(f"{' '.join(argv)} failed (exit status {done.returncode}):\n{said}", pytrace=False)
    return done


def fresh_shell(command: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """``command`` as a user pastes it into a new terminal: ``bash -c`` in ``cwd``, with PATH to the install's scripts
    (gpt1's, W&B's) and the system's, an empty HOME under ``cwd``, the hub offline, and the session's cache of measured
    CPU kernels; nothing else of this process's environment."""
    bins = dict.fromkeys([str(Path(sys.executable).parent), str(console_script("wandb").parent), "/usr/bin", "/bin"])
    env = {"PATH": os.pathsep.join(bins), "HOME": str(cwd / "home"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env["XDG_CACHE_HOME"] = OFFLINE_ENV["XDG_CACHE_HOME"]
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def sweep_jobs(sweep: Path) -> list[Path]:
    """The job directories of a sweep directory (each named by its overrides, gpt1/app/sweep.py), in the order Hydra
    numbered the jobs (their .hydra/hydra.yaml)."""
    import yaml

    jobs = [p.parent.parent for p in sweep.glob("*/.hydra/hydra.yaml")]
    return sorted(
        jobs, key=lambda job: yaml.safe_load((job / ".hydra" / "hydra.yaml").read_text())["hydra"]["job"]["num"]
    )


def shared_dir(factory: pytest.TempPathFactory, name: str) -> Path:
    """The directory ``name`` that every pytest-xdist worker of this session finds at the same place (the session's
    base temporary directory, of which each worker's is a folder), or this process's alone without xdist."""
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    directory = root / "shared" / name
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The directory ``name`` made by ``build(directory)`` once for the test session, however many pytest-xdist
    workers ask for it: the first builds it holding a lock (``gpt1.data.cache.made_once``, as gpt1's own cache
    entries), the others wait and find it built. Then read-only: its files and folders lose their write bits, and
    ``unchanged`` (each fixture's teardown) fails the session if a test wrote into it all the same (root ignores the
    bits); a test that must change a file copies it first."""
    directory = shared_dir(factory, "built") / name
    digests = directory.with_name(f"{name}.sha256.json")

    def make() -> None:
        shutil.rmtree(directory, ignore_errors=True)  # a build that failed in another worker
        directory.mkdir()
        build(directory)
        files = {str(p.relative_to(directory)): _digest(p) for p in sorted(directory.rglob("*")) if p.is_file()}
        for path in [*directory.rglob("*"), directory]:
            path.chmod(path.stat().st_mode & ~0o222)
        digests.write_text(json.dumps(files))

    made_once(digests, make)
    return directory


def unchanged(directory: Path) -> None:
    """Fail where a file of ``built_once``'s ``directory`` changed, appeared or went since it was built."""
    expected = json.loads(directory.with_name(f"{directory.name}.sha256.json").read_text())
    found = {str(p.relative_to(directory)): _digest(p) for p in sorted(directory.rglob("*")) if p.is_file()}
    changed = sorted(k for k in expected.keys() | found.keys() if expected.get(k) != found.get(k))
    assert not changed, f"a test wrote into the shared {directory} (copy a file before changing it): {changed}"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
