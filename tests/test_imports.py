"""Importing gpt1 changes nothing in the process, the model code is pure torch, and the modules import each other
without a circle, each name from the module that defines it."""

import ast
import runpy
import subprocess
import sys
from pathlib import Path

from tests.conftest import ENV_BEFORE_GPT1
from tests.helpers import REPO

PURE = [
    "gpt1.model",
    "gpt1.model.decoder",
    "gpt1.model.lstm",
    "gpt1.model.heads",
    "gpt1.model.registry",
    "gpt1.cpu.kernels",
    "gpt1.cpu.layers",
    "gpt1.cpu.decoding",
]
"""The model code: it imports torch and nothing of the training stack."""
BLOCKED = [
    "hydra",
    "omegaconf",
    "lightning",
    "pytorch_lightning",
    "lightning_fabric",
    "torchmetrics",
    "datasets",
    "tokenizers",
    "wandb",
    "transformers",
]


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=ENV_BEFORE_GPT1
    )


def test_the_model_code_imports_only_torch():
    code = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"{{name}} is blocked")
sys.meta_path.insert(0, Block())
for module in {PURE!r}:
    importlib.import_module(module)
from gpt1.model.decoder import GPT, GPTConfig
GPT(GPTConfig(vocab_size=16, n_ctx=8, n_layer=1, n_head=2, n_embd=8, n_inner=16))
"""
    proc = run(code)
    assert proc.returncode == 0, proc.stderr


def test_importing_every_module_leaves_the_process_as_it_was():
    """The environment, the import system, the modules already imported, the signal handlers and the hooks of
    uncaught exceptions, the warning filters, the loggers, torch's global settings, Hydra's config store and
    OmegaConf's resolvers, before and after importing every gpt1 module (its dependencies imported first: what they do
    is theirs); and each gpt1 module is in sys.modules under its own name only."""
    code = """
import copy, importlib, logging, os, pkgutil, signal, sys, threading, warnings
import torch, lightning, hydra, datasets
from hydra.core.config_store import ConfigStore
from omegaconf.basecontainer import BaseContainer
def state(loggers=None):
    return {
        "os.environ": dict(os.environ),
        "the import system": (list(sys.meta_path), list(sys.path_hooks), list(sys.path)),
        "signal handlers": {s: signal.getsignal(s) for s in signal.valid_signals()},
        "uncaught exception hooks": (sys.excepthook, threading.excepthook),
        "warnings.filters": list(warnings.filters),
        "loggers": {name: (log.level, list(log.handlers), list(log.filters), log.propagate, log.disabled)
                    for name, log in logging.root.manager.loggerDict.items()
                    if isinstance(log, logging.Logger) and (loggers is None or name in loggers)} | {
                    "root": (logging.root.level, list(logging.root.handlers))},
        "torch": (torch.get_num_threads(), torch.get_default_dtype(), torch.is_grad_enabled(),
                  torch.are_deterministic_algorithms_enabled(), torch.get_float32_matmul_precision(),
                  torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32, torch.backends.mkldnn.enabled,
                  torch.is_anomaly_enabled()),
        "ConfigStore": copy.deepcopy(ConfigStore.instance().repo),
        "resolvers": sorted(BaseContainer._resolvers),
    }
before, modules = state(), dict(sys.modules)
import gpt1
names = [m.name for m in pkgutil.walk_packages(gpt1.__path__, "gpt1.") if not m.name.startswith("gpt1.conf")]
for name in names:
    importlib.import_module(name)
after = state(before["loggers"])
for what in before:
    assert before[what] == after[what], f"importing gpt1 changed {what}"
replaced = [name for name, module in modules.items() if sys.modules.get(name) is not module]
assert not replaced, f"importing gpt1 replaced modules: {replaced}"
aliases = [k for k, m in sys.modules.items() if k.split(".")[0] == "gpt1" and getattr(m, "__name__", None) != k]
assert not aliases, f"modules under another name: {aliases}"
print(len(names))
"""
    proc = run(code)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) > 40  # every module was imported


LIGHT_COMMANDS = ["gpt1.commands.generate", "gpt1.commands.convert"]
"""Commands that load a checkpoint and no data: they start without the training and data stack."""
HEAVY = [
    "lightning",
    "pytorch_lightning",
    "lightning_fabric",
    "torchmetrics",
    "datasets",
    "pandas",
    "wandb",
    "transformers",
    "matplotlib",
    "scipy",
]
"""What takes seconds to import (lightning about 4 s on 2 cores, torchmetrics 2.5 s of it)."""


def test_the_commands_that_load_no_data_start_without_the_training_stack(tmp_path):
    """The config schema (``gpt1.app.config``: every task's and the data group's) stays light, and a checkpoint loads
    without torch's compiler: generate and convert start in about 2 s where these imports would add 5-6 s."""
    code = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {HEAVY!r} or name.startswith("torch._dynamo"):
            raise ImportError(f"{{name}} is blocked")
sys.meta_path.insert(0, Block())
for module in {LIGHT_COMMANDS!r}:
    importlib.import_module(module)
from gpt1.app.registration import register
register()
from gpt1.checkpoints.format import load_checkpoint, save_checkpoint
from gpt1.model.decoder import GPT, GPTConfig
from gpt1.text.tokenizer import train_bpe
tok = train_bpe(["a tiny corpus of words, and of more words"] * 20, vocab_size=60)
save_checkpoint({str(tmp_path / "tiny.ckpt")!r}, GPT(GPTConfig(vocab_size=tok.vocab_size, n_ctx=8, n_layer=1, n_head=2,
                n_embd=8, n_inner=16)), tok)
print(load_checkpoint({str(tmp_path / "tiny.ckpt")!r}).model.tokens_embed.weight.device)
"""
    proc = run(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["cpu"]


def test_each_package_says_what_it_holds():
    """The tree is the map: every folder of the package has a docstring in its ``__init__.py``."""
    import gpt1

    root = Path(gpt1.__file__).parent
    packages = [p for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    assert len(packages) >= 12
    for package in packages:
        assert ast.get_docstring(ast.parse((package / "__init__.py").read_text())), f"{package.name}/__init__.py"


def test_the_quick_tier_covers_every_package():
    """``pytest -m quick`` has tests of each package of gpt1 (tests/conftest.py QUICK)."""
    import gpt1
    from tests.conftest import QUICK

    root = Path(gpt1.__file__).parent
    packages = {p.name for p in root.iterdir() if (p / "__init__.py").exists()}
    assert set(QUICK) == packages
    assert all(QUICK.values())


STRUCTURE = runpy.run_path(str(REPO / "tools" / "structure.py"))
"""tools/structure.py's functions: the package's imports read from its source."""


def test_no_two_modules_import_each_other_even_through_others():
    """Counting every import: inside functions, under TYPE_CHECKING, and importlib's of a module named in the file."""
    found = [{e.source for e in edges} for edges in STRUCTURE["circles"](REPO)]
    assert found == []


def test_every_import_names_the_module_that_defines_the_name():
    """In gpt1/, tests/, experiments/ and tools/: no name imported from a module that only hands it on (``gpt1.api``
    aside, the library's face), no path of a module that is gone."""
    assert STRUCTURE["faces"](REPO) == []


def test_no_module_is_over_500_lines():
    """A file that grows past it does several jobs: split it along its seams (``tools/structure.py size``)."""
    lines = STRUCTURE["size"](REPO)
    assert len(lines) == len(STRUCTURE["module_files"](REPO)) > 100
    assert {file: n for file, n in lines.items() if n > 500} == {}


def test_the_size_command_prints_the_package_lines_as_the_development_page_shows_it():
    """``python tools/structure.py size`` (docs/development.md, row package-size): the total and the longest first."""
    lines = STRUCTURE["size"](REPO)
    done = subprocess.run([sys.executable, "tools/structure.py", "size"], cwd=REPO, capture_output=True, text=True)
    longest = next(iter(lines.items()))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{sum(lines.values())} lines in {len(lines)} modules; the longest: {longest[0]} ")


def test_the_checks_of_the_structure_see_a_circle_and_a_face(tmp_path):
    """The two checks above can fail: a circle through a function-level import and an importlib string, and a name
    imported through a package's face, in a package of three files."""
    package = tmp_path / "gpt1"
    package.mkdir()
    (package / "__init__.py").write_text("from gpt1.a import A\n")
    (package / "a.py").write_text("A = 1\n\ndef f():\n    from gpt1.b import g\n")
    (package / "b.py").write_text('import importlib\n\ndef g():\n    importlib.import_module("gpt1.a")\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("from gpt1 import A\n")
    circles = STRUCTURE["circles"](tmp_path)
    assert [{e.source for e in edges} for edges in circles] == [{"gpt1.a", "gpt1.b"}]
    assert STRUCTURE["faces"](tmp_path) == ["tests/test_x.py:1: from gpt1 import A"]
