"""Every ``gpt1 ...`` command of README.md, docs/*.md and experiments/README.md (what reproduces today's figures): their
fenced bash blocks and inline code run as written, split into arguments as bash splits them (``shlex``: quotes removed,
as the shell gives them to gpt1), each goes through its command's whole Hydra path, sweeps and launchers included, every
job's config composed, interpolations resolved and values range-checked, with the job's work replaced by a recorder (no
training, no data: ``--cfg job`` does the same but refuses ``-m``). Rewritten: only budgets (an Optuna search runs 2
trials, not 20), and the files a command names are made (docs/finetuning.md's task YAML, fake sweep directories for
``gpt1 report``). SLURM jobs run in this process instead of being submitted; ``<run>`` and ``<time>`` become a run
directory's timestamp (bash would read ``<run>`` as a redirection). ``gpt1 bench`` (plain flags, timings) is tested by
tests/test_bench.py. The paper's sweeps (6 to 39 jobs each) are marked slow. The pages' Python blocks run too, in order,
on a tiny model."""

import collections
import importlib
import json
import logging
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml
from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from omegaconf import DictConfig, OmegaConf

from gpt1.app.cli import TOOLS
from gpt1.app.config_checks import check_config
from tests.helpers import FEW, FEW_FINETUNE

README = Path(__file__).resolve().parents[1] / "README.md"
PAGES = [README, *sorted((README.parent / "docs").glob("*.md")), README.parent / "experiments" / "README.md"]
"""The README, the docs/ pages and the table of today's figures: every command and Python block in them runs."""
BODIES = {
    "pretrain": "train",
    "prepare": "prepare",
    "finetune": "finetune",
    "evaluate": "evaluate",
    "zeroshot": "zeroshot",
    "generate": "generate",
    "convert": "convert",
}
"""Command -> the function its Hydra app calls with the composed config (replaced by the recorder)."""


def readme_commands() -> dict[str, str]:
    """Each ``gpt1 ...`` command of the README and docs/, as written (a bash block's continued lines joined) -> its
    comment."""
    text = "\n".join(page.read_text() for page in PAGES)
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            found += [part.strip() for part in line.split("&&") if part.strip().startswith("gpt1 ")]
    found += re.findall(r"`(gpt1 \w+ [^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))  # inline, with arguments
    commands = {}
    for line in found:
        command, _, comment = line.partition(" # ")
        commands.setdefault(command.strip(), comment.strip())
    return commands


COMMANDS = readme_commands()
FAILING = {c: comment for c, comment in COMMANDS.items() if comment.startswith("fails")}
"""The commands the README shows failing (a misspelt key): they fail as it says, in one line."""


def test_the_readme_has_its_commands():
    assert len(COMMANDS) > 40 and FAILING
    assert any("'++task.splits.train=" in c for c in COMMANDS)  # the slice of the Fine-tune section


@pytest.fixture
def run_as_written(tmp_path, monkeypatch):
    """Run one README command line in this process; return the configs its jobs got."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPT1_CACHE_DIR", str(tmp_path / "cache"))
    recorded: list[DictConfig] = []

    def recorder(cfg: DictConfig, *args, **kwargs):
        check_config(cfg)
        OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
        recorded.append(cfg)
        score = collections.defaultdict(lambda: 0.5)  # what finetune's and zeroshot's apps return a sweeper
        return {**score, "checkpoints": [score]} if "ckpts" in cfg else score

    for command, body in BODIES.items():
        monkeypatch.setattr(importlib.import_module(f"gpt1.commands.{command}"), body, recorder)
    Plugins.instance()  # Hydra's first plugin scan re-executes the plugins' modules: patch the classes it keeps
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher

    monkeypatch.setattr(BaseSubmititLauncher, "launch", BasicLauncher.launch)  # here, not through sbatch

    def run(line: str) -> list[DictConfig]:
        argv = shlex.split(re.sub(r"<(run|time)>", "2025-01-01_12-00-00", line))  # the placeholders of run dirs
        assert argv[0] == "gpt1", line
        if "hparams_search=optuna" in argv:
            argv.append("hydra.sweeper.n_trials=2")  # the budget
        make_inputs(argv, tmp_path)
        monkeypatch.setattr(sys, "argv", [f"gpt1 {argv[1]}", *argv[2:]])
        package = "tools" if argv[1] in TOOLS else "commands"
        main = importlib.import_module(f"gpt1.{package}.{argv[1]}").main
        root = logging.getLogger()
        handlers, level = root.handlers[:], root.level
        try:
            main()
        except SystemExit as e:
            assert e.code in (0, None), f"{line}: exit status {e.code}"
        finally:  # Hydra's job logging (handlers on the root logger) ends with the command
            GlobalHydra.instance().clear()
            for handler in root.handlers[:]:
                if handler not in handlers:
                    root.removeHandler(handler)
                    handler.close()
            root.setLevel(level)
        return recorded

    return run


RECORDED = {"pretrain": [], "finetune": ["task=sentiment", "init_from=model.ckpt"]}
"""What the run and sweep directories the pages resume (resume=auto hydra.run.dir=DIR, -m ... hydra.sweep.dir=DIR) or
rerun (rerun=DIR) recorded of their command (gpt1/core/run_record.py), where the page's earlier command made them."""


def make_inputs(argv: list[str], root: Path) -> None:
    """The files a command reads before its job starts: a --config-dir's task (docs/finetuning.md's task YAML), the
    sweep and run directories given to gpt1 report (two fake jobs each), the records of the runs and sweeps resumed or
    rerun (``RECORDED``)."""
    given = dict(a.split("=", 1) for a in argv[2:] if "=" in a and not a.startswith("-"))
    where = "hydra.sweep.dir" if "-m" in argv else "hydra.run.dir"
    directory = given.get("rerun") or (given.get(where) if given.get("resume") == "auto" else None)
    if directory is not None and argv[1] in RECORDED:
        task = RECORDED[argv[1]] + (["seed=1,2,3"] if "-m" in argv else [])
        hydra = {"job": {"config_name": argv[1]}, "mode": "MULTIRUN" if "-m" in argv else "RUN"}
        hydra["overrides"] = {"task": task, "hydra": []}
        record = root / directory
        record.mkdir(parents=True, exist_ok=True)
        if "-m" in argv:
            (record / "multirun.yaml").write_text(yaml.safe_dump({"hydra": hydra}))
        else:
            (record / ".hydra").mkdir(exist_ok=True)
            (record / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": hydra}))
            (record / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(task))
            (record / "metrics.json").write_text("{}")
    if "--config-dir" in argv:
        pages = "\n".join(page.read_text() for page in PAGES)
        task = next(b for b in re.findall(r"```yaml\n(.*?)```", pages, re.S) if b.startswith("type:"))
        (root / argv[argv.index("--config-dir") + 1] / "task").mkdir(parents=True, exist_ok=True)
        (root / argv[argv.index("--config-dir") + 1] / "task" / "mine.yaml").write_text(task)
    if argv[1] == "report":
        out = argv[argv.index("--out") + 1] if "--out" in argv else None
        for arg in (a for a in argv[2:] if not a.startswith("-") and a != out):
            for seed in (1, 2):
                job = root / arg / str(seed)
                (job / ".hydra").mkdir(parents=True, exist_ok=True)
                (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["task=sentiment", f"seed={seed}"]))
                (job / "metrics.json").write_text(json.dumps({"task": "sentiment", "val/accuracy": 0.6 + seed / 100}))


def _marks(line: str) -> list[pytest.MarkDecorator]:
    """The paper's sweeps (an experiment of 6 to 39 jobs, an Optuna search) are slow: a second or more per job."""
    return [pytest.mark.slow] if re.search(r"-m experiment=|hparams_search=", line) else []


@pytest.mark.parametrize(
    "line", [pytest.param(c, marks=_marks(c)) for c in COMMANDS if not c.startswith("gpt1 bench") and c not in FAILING]
)
def test_a_readme_command_runs_as_written(run_as_written, line, capsys):
    configs = run_as_written(line)
    out, err = capsys.readouterr()
    assert "error:" not in err, err
    if "--cfg" in line:
        assert "run_name:" in out  # the config, printed
    elif not line.startswith("gpt1 report"):
        assert configs, f"{line}: no job started\n{out}\n{err}"


@pytest.mark.parametrize("line", list(FAILING))
def test_a_readme_command_shown_failing_fails_as_it_says(run_as_written, line, capsys):
    with pytest.raises(AssertionError, match="exit status 2"):
        run_as_written(line)
    err = capsys.readouterr().err.strip().splitlines()
    said = re.search(r"(Key .*)", FAILING[line]).group(1)  # fails at once: Key 'n_layr' not in 'GPTConfig'
    assert err[-1].startswith("error: ") and said in err[-1], err


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


TINY_API = {
    "pretrain": [*FEW, "callbacks.samples.every_n_steps=0"],
    "finetune": FEW_FINETUNE,
    "evaluate": ["data.batch_size=16", "trainer.enable_progress_bar=false"],
    "zeroshot": ["++task.splits.train='train[:64]'", "++task.splits.validation='validation[:16]'"],
    "generate": ["max_new_tokens=4"],
}
"""What the Python blocks' configs get appended: a tiny model, a few updates, a few examples (the budgets)."""


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=lambda p: p.name)
def test_a_pages_python_blocks_run_as_written(page, tmp_path, monkeypatch, cache_dir):
    """A page's Python blocks, in order, in one namespace, in an empty directory, as a user would paste them; each
    config ``gpt1.api.compose`` makes gets the budgets of ``TINY_API`` (and the session's data cache) appended."""
    from gpt1 import api

    compose = api.compose
    monkeypatch.setattr(
        api,
        "compose",
        lambda command, overrides=(), **kwargs: compose(
            command, [*overrides, *TINY_API.get(command, []), f"paths.cache_dir={cache_dir}"], **kwargs
        ),
    )
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)  # as in a new process: no Hydra job ran before
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in python_blocks(page):
        exec(compile(block, f"{page.name} (a python block)", "exec"), namespace)  # noqa: S102  (the page's own code)
    assert (tmp_path / "outputs").is_dir() or page.name != "library.md"  # runs went where the page says
