"""The fuzzing harness's sandbox: a folder that stands for a user's machine, with the valid inputs the generators
mutate, a finished run that cases point at, and the directories a command must not write to.

    root/
      home/  xdg/{config,cache,data}/  cwd/     HOME, the XDG directories and the working directory of every case
                                                ($XDG_CACHE_HOME: a library's cache, where a command may write)
      assets/                                   the valid inputs: corpus.txt, task/{train,validation}.csv, conf/
                                                (--config-dir: task/mine.yaml, experiment/mine.yaml), hf/ (an HF
                                                openai-gpt folder), tokenizer.json, openai/ (a vocab.json+merges.txt)
      finished/                                 a finished tiny pre-training run (its files hashed around every case)
      cache/                                    the data cache (GPT1_CACHE_DIR): a command may write here
      cases/N/                                  a case's own inputs, then removed
      runs/N/                                   a case's run directory: a command may write here; then removed

``World.run`` writes a ``Recipe``'s files, runs its command line (``tests.fuzz.harness``), and returns the case, what
it did and the properties it broke. A command line names the sandbox's places by placeholders ({in}, {run}, ...:
``Recipe``); a file's content names them relative to the working directory, where cwd/assets and cwd/case (the
case's inputs) are symbolic links: a task YAML's ``train: case/train.csv``.
"""

from __future__ import annotations

import itertools
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from tests.fuzz import harness
from tests.fuzz.harness import Case, Expect, Outcome

HYDRA_COMMANDS = ("pretrain", "prepare", "finetune", "evaluate", "zeroshot", "generate", "convert")

TINY = [
    "model=tiny",
    "tokenizer.vocab_size=300",
    "data.batch_size=4",
    "data.max_valid_windows=8",
    "logger=csv",
    "debug=fast",
    "trainer.max_steps=2",
    "callbacks.samples.every_n_steps=0",
    "callbacks.checkpoint.every_n_steps=0",
]
"""A pre-training run of seconds: the tiny model (2 blocks of 32, context 32) on assets/corpus.txt."""

FINETUNE = [
    "batch_size=4",
    "trainer.max_steps=1",
    "logger=csv",
    "trainer.enable_progress_bar=false",
    "trainer.num_sanity_val_steps=0",
]
"""A fine-tuning run of one update."""

BASES = {
    "generate": ["generate", "ckpt={ckpt}", "max_new_tokens=4", "prompt=she said"],
    "evaluate": ["evaluate", "ckpt={ckpt}", "data.valid_files=[{assets}/valid.txt]", "data.max_valid_windows=4"],
    "pretrain": ["pretrain", *TINY, "data.train_files=[{assets}/corpus.txt]", "data.valid_files=[{assets}/valid.txt]"],
    "prepare": ["prepare", *TINY, "data.train_files=[{assets}/corpus.txt]", "data.valid_files=[{assets}/valid.txt]"],
    "finetune": ["finetune", "--config-dir", "{assets}/conf", "task=mine", "init_from={ckpt}", *FINETUNE],
    "zeroshot": ["zeroshot", "--config-dir", "{assets}/conf", "task=mine", "ckpts=[{ckpt}]"],
    "convert": ["convert", "to-hf", "{ckpt}", "{run}/hf"],
}
"""Each Hydra command's valid command line of a second or a few: what the generators of overrides add to."""


@dataclass(frozen=True)
class Huge:
    """A file's content: ``unit`` repeated ``times`` (its repr stays short in a failure's report)."""

    unit: bytes
    times: int

    def __bytes__(self) -> bytes:
        return self.unit * self.times


@dataclass(frozen=True)
class Special:
    """A path that is not a plain readable file: a directory, a dangling symbolic link, or a file its reader may not
    read (mode 000: only a process of another user is refused, root reads it)."""

    kind: str  # "directory" | "dangling" | "unreadable"
    content: bytes = b""


@dataclass(frozen=True)
class Cut:
    """The file already at the path (a copy) cut to its first ``size`` bytes."""

    size: int


@dataclass(frozen=True)
class Flip:
    """The file already at the path (a copy) with bits flipped: (offset, bit), offsets taken modulo its size."""

    spots: tuple[tuple[int, int], ...]


Content = Union[bytes, str, Huge, Special, Cut, Flip, None]
"""What ``write`` puts at a path; None: nothing (the file removed)."""


@dataclass
class Recipe:
    """A case before it is written: its files and its command line, with placeholders the world fills in: {in} (the
    case's input folder), {run} (its run directory), {assets}, {finished}, {ckpt} (the finished run's last.ckpt),
    {cache}."""

    surface: str
    what: str
    argv: list[str]
    expect: Expect
    names: list[str] = field(default_factory=list)
    line: Optional[int] = None
    files: dict[str, Content] = field(default_factory=dict)
    """Path (with placeholders) -> its content; written before the case runs."""
    copy: dict[str, str] = field(default_factory=dict)
    """Destination -> source (with placeholders; a folder is copied whole), before ``files`` are written."""
    run_dir: bool = True
    """Add hydra.run.dir={run} to a Hydra command that names none."""
    kept_run: Optional[str] = None
    """A folder (with placeholders) that holds a finished run's copy: judged as the finished run is, nothing of it
    lost or changed (``harness.run_changes``) but the records the case damaged (its ``files``)."""
    timeout_s: float = 120.0

    def __repr__(self) -> str:  # hypothesis prints a failing example's: the files' contents shortened
        files = {k: (v[:60] + b"..." if isinstance(v, bytes) and len(v) > 60 else v) for k, v in self.files.items()}
        return (
            f"Recipe({self.surface!r}, {self.what!r}, argv={self.argv!r}, expect={self.expect.value}, "
            f"names={self.names!r}, line={self.line!r}, files={files!r}, copy={self.copy!r})"
        )


class World:
    """The sandbox (module docstring). ``build`` makes its assets and finished run once."""

    def __init__(self, root: Path, cache: Optional[Path] = None) -> None:
        self.root = Path(root)
        self.home, self.cwd = self.root / "home", self.root / "cwd"
        self.xdg = {name: self.root / "xdg" / name for name in ("config", "cache", "data")}
        self.assets, self.finished = self.root / "assets", self.root / "finished"
        self.cache = Path(cache) if cache else self.root / "cache"
        self.cases, self.runs = self.root / "cases", self.root / "runs"
        self.counter = itertools.count()
        self.finished_files: dict[str, bytes] = {}
        self.sample_data = ""

    @property
    def ckpt(self) -> Path:
        return self.finished / "checkpoints" / "last.ckpt"

    def env(self) -> dict[str, str]:
        """The variables every case runs with: the fake HOME and XDG directories, the data cache, the hubs offline,
        the CPU's matmuls on torch's kernels (none measured, nothing cached per machine)."""
        return {
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.xdg["config"]),
            "XDG_CACHE_HOME": str(self.xdg["cache"]),
            "XDG_DATA_HOME": str(self.xdg["data"]),
            "GPT1_CACHE_DIR": str(self.cache),
            "GPT1_CPU_MATMUL": "torch",
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "WANDB_MODE": "offline",
            "PYTHONUNBUFFERED": "1",
        }

    # -- building ----------------------------------------------------------------------------------------------

    def build(self) -> None:
        """The assets and the finished run (a tiny pre-training run; a few seconds)."""
        for path in (self.home, self.cwd, *self.xdg.values(), self.assets, self.cache, self.cases, self.runs):
            path.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)  # a case run as another user (no read permission) passes through
        from gpt1.data.sample import sample_data

        self.sample_data = sample_data(self.cache)
        novel = (Path(self.sample_data) / "books/train/northanger_abbey.txt").read_text(encoding="utf-8")
        (self.assets / "corpus.txt").write_text(novel[:20_000], encoding="utf-8")
        (self.assets / "valid.txt").write_text(novel[20_000:26_000], encoding="utf-8")
        task = self.assets / "task"
        task.mkdir(exist_ok=True)
        for split, n in (("train", 24), ("validation", 8)):
            (task / f"{split}.csv").write_text(TASK_HEADER + "".join(task_row(i) for i in range(n)))
        (self.assets / "conf" / "task").mkdir(parents=True, exist_ok=True)
        (self.assets / "conf" / "task" / "mine.yaml").write_text(task_yaml(task))
        (self.cwd / "assets").symlink_to(self.assets)  # a file's content names the assets as assets/... (module doc)
        (self.assets / "conf" / "experiment").mkdir(parents=True, exist_ok=True)
        (self.assets / "conf" / "experiment" / "mine.yaml").write_text(EXPERIMENT_YAML)
        self._must_succeed(["pretrain", *TINY, *self.corpus_args(), f"hydra.run.dir={self.finished}"])
        self._must_succeed(
            ["convert", "to-hf", str(self.ckpt), str(self.assets / "hf"), f"hydra.run.dir={self.root / 'runs' / 'hf'}"]
        )
        shutil.rmtree(self.root / "runs" / "hf")
        from gpt1 import api

        tokenizer = api.load_checkpoint(self.ckpt).tokenizer
        (self.assets / "tokenizer.json").write_text(tokenizer.to_str(), encoding="utf-8")
        self.finished_files = harness.snapshot(self.finished)
        # what the libraries make of the XDG directories on their first import in a process of their own, as on any
        # machine they ran on before (lightning imports torchmetrics, which imports matplotlib: its config folder),
        # so that a console-script case is judged by what gpt1 writes, whichever case ran first
        subprocess.run([sys.executable, "-c", "import lightning"], env={**os.environ, **self.env()}, check=True)

    def corpus_args(self) -> list[str]:
        return [f"data.train_files=[{self.assets}/corpus.txt]", f"data.valid_files=[{self.assets}/valid.txt]"]

    def _must_succeed(self, argv: list[str]) -> None:
        outcome = harness.run_in_process(argv, self.env(), self.cwd, timeout_s=600)
        if outcome.status != 0:
            raise RuntimeError(f"the sandbox's gpt1 {' '.join(argv)} failed:\n{outcome.stdout}\n{outcome.stderr}")

    # -- running a case ----------------------------------------------------------------------------------------

    def fill(self, text: str, places: dict[str, str]) -> str:
        for key, value in places.items():
            text = text.replace("{" + key + "}", value)
        return text

    def run(
        self, recipe: Recipe, *, subprocess: bool = False, user: Optional[int] = None, keep: bool = False
    ) -> tuple[Case, Outcome, list[str]]:
        """Write ``recipe``'s files, run its command (in this process, or the console script in a process of its own,
        as the user ``user`` where given), and judge it: (the case, what it did, the properties it broke)."""
        n = next(self.counter)
        inputs, run = self.cases / str(n), self.runs / str(n)
        inputs.mkdir(parents=True)
        _remove(self.cwd / "case")
        (self.cwd / "case").symlink_to(inputs)
        places = {
            "in": str(inputs),
            "run": str(run),
            "assets": str(self.assets),
            "finished": str(self.finished),
            "ckpt": str(self.ckpt),
            "cache": str(self.cache),
        }
        for dst, src in recipe.copy.items():
            src_path, dst_path = Path(self.fill(src, places)), Path(self.fill(dst, places))
            dst_path.parent.mkdir(parents=True, exist_ok=True)
            if src_path.is_dir():
                shutil.copytree(src_path, dst_path, symlinks=True)
            else:
                shutil.copy2(src_path, dst_path)
        for name, content in recipe.files.items():
            write(Path(self.fill(name, places)), content)
        argv = [self.fill(a, places) for a in recipe.argv]
        if recipe.run_dir and argv and argv[0] in HYDRA_COMMANDS:
            argv = with_run_dir(argv, run)
        case = Case(
            recipe.surface,
            argv,
            recipe.expect,
            [self.fill(name, places) for name in recipe.names],
            recipe.line,
            recipe.what,
            recipe.timeout_s,
        )
        env = self.env()
        if user is not None:  # another user: a home, a cache and a run directory it may write to
            env |= {
                "HOME": str(run / "home"),
                "GPT1_CACHE_DIR": str(run / "cache"),
                "XDG_CACHE_HOME": str(run / "xdg"),
                "GPT1_SAMPLE_DATA": self.sample_data,
            }  # (unpacked once, where that user may read it)
            for path in (run, run / "home", run / "cache", run / "xdg"):
                path.mkdir(parents=True, exist_ok=True)
                os.chown(path, user, user)
        allowed = [self.cache, self.xdg["cache"], run, self.finished]  # (the finished run: compared file by file)
        watched = harness.listing(self.root, skip=allowed)
        kept = Path(self.fill(recipe.kept_run, places)) if recipe.kept_run else None
        damaged = {str(Path(self.fill(name, places)).relative_to(kept)) for name in recipe.files} if kept else set()
        kept_before = harness.snapshot(kept) if kept else {}
        if subprocess or user is not None:
            outcome = harness.run_subprocess(argv, env, self.cwd, recipe.timeout_s, user=user)
        else:
            outcome = harness.run_in_process(argv, env, self.cwd, recipe.timeout_s)
        outcome.stray = harness.differences(watched, harness.listing(self.root, skip=allowed))
        after = harness.snapshot(self.finished)
        outcome.changed = harness.run_changes(self.finished_files, after, refused=outcome.status != 0)
        self.finished_files = after  # (a change is judged once: the next case starts from the run as it is now)
        if kept is not None:
            before = {k: v for k, v in kept_before.items() if k not in damaged}
            changed = harness.run_changes(before, harness.snapshot(kept), refused=outcome.status != 0)
            outcome.changed += [f"{kept.name}/{change}" for change in changed]
        found = harness.violations(case, outcome)
        harness.record(case, outcome, found)
        if not keep:
            for path in (inputs, run):
                _remove(path)
        return case, outcome, found


def with_run_dir(argv: list[str], run: Path) -> list[str]:
    """``argv`` with hydra.run.dir=RUN (hydra.sweep.dir with -m) among its overrides, where it names none: before the
    first override (Hydra's parser takes the overrides as one run of arguments; gpt1 convert's positional ones come
    first: after them)."""
    key = "hydra.sweep.dir" if "-m" in argv or "--multirun" in argv else "hydra.run.dir"
    if any(a.lstrip("+").startswith(f"{key}=") for a in argv):
        return argv
    if argv[0] == "convert":  # after its positional arguments and overrides, before any flag
        first = next((i for i, a in enumerate(argv[1:], 1) if a.startswith("-")), len(argv))
    else:
        first = next((i for i, a in enumerate(argv[1:], 1) if "=" in a and not a.startswith("-")), len(argv))
    return [*argv[:first], f"{key}={run}", *argv[first:]]


def write(path: Path, content: Content) -> None:
    """Write ``content`` at ``path`` (its folders made), replacing what is there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, (Cut, Flip)):
        data = bytearray(path.read_bytes() if path.is_file() else b"")  # (a record the run has not written yet)
        if isinstance(content, Cut):
            data = data[: content.size]
        for at, bit in content.spots if isinstance(content, Flip) and data else ():
            data[at % len(data)] ^= 1 << bit
        content = bytes(data)
    _remove(path)
    if content is None:
        return
    if isinstance(content, Special):
        if content.kind == "directory":
            path.mkdir()
        elif content.kind == "dangling":
            path.symlink_to(path.parent / f"{path.name}.nowhere")
        else:
            path.write_bytes(content.content)
            path.chmod(0)
        return
    path.write_bytes(
        bytes(content) if isinstance(content, Huge) else content.encode() if isinstance(content, str) else content
    )


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        for inner in path.rglob("*"):  # (mode 000 folders and files: removable by their owner all the same)
            if not inner.is_symlink():
                inner.chmod(inner.stat().st_mode | stat.S_IRWXU)
        shutil.rmtree(path)


# -- the valid task: a classification of short texts, two labels -------------------------------------------------------

TASK_HEADER = "text,label\n"
WORDS = ["a", "fine", "dull", "film", "the", "plot", "was", "good", "bad", "story", "and", "it", "very"]


def task_row(i: int) -> str:
    return f"{WORDS[i % len(WORDS)]} {'fine' if i % 2 else 'dull'} film {i},{'pos' if i % 2 else 'neg'}\n"


def task_yaml(task: Path, train: Optional[str] = None) -> str:
    """A task YAML of one's own over the CSV files in ``task`` (``train``: another training file)."""
    return (
        "# a task of one's own: two labels over short texts\n"
        "type: classification\n"
        "data_files:\n"
        f"  train: {train or task / 'train.csv'}\n"
        f"  validation: {task / 'validation.csv'}\n"
        "text: text\n"
        "label: label\n"
        "label_names: [neg, pos]\n"
        "metrics: [accuracy]\n"
        "zeroshot: {heuristic: verbalizer, words: [dull, fine]}\n"
    )


EXPERIMENT_YAML = """\
# @package _global_
# an experiment of one's own: the paper's recipe with a lower learning rate
defaults:
  - override /trainer: cpu
optim:
  lr: 1.0e-4
seed: 7
"""
