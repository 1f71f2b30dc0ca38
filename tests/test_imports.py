"""Importing gpt1 changes nothing in the process, and the model code is pure torch."""

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import ENV_BEFORE_GPT1

PURE = [
    "gpt1.model",
    "gpt1.model.decoder",
    "gpt1.model.layers",
    "gpt1.model.lstm",
    "gpt1.model.heads",
    "gpt1.model.token_step",
    "gpt1.cpu.kernels",
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
from gpt1.model import GPT, PRESETS
GPT(PRESETS["tiny"])
"""
    proc = run(code)
    assert proc.returncode == 0, proc.stderr


def test_importing_every_module_leaves_the_process_as_it_was():
    """The environment, the warning filters, Hydra's config store and OmegaConf's resolvers, before and after
    importing every gpt1 module (its dependencies imported first: what they do is theirs)."""
    code = """
import copy, importlib, os, pkgutil, warnings
import torch, lightning, hydra, datasets
from hydra.core.config_store import ConfigStore
from omegaconf.basecontainer import BaseContainer
def state():
    return (dict(os.environ), list(warnings.filters), copy.deepcopy(ConfigStore.instance().repo),
            sorted(BaseContainer._resolvers))
before = state()
import gpt1
names = [m.name for m in pkgutil.walk_packages(gpt1.__path__, "gpt1.") if not m.name.startswith("gpt1.conf")]
for name in names:
    importlib.import_module(name)
after = state()
for what, b, a in zip(["os.environ", "warnings.filters", "ConfigStore", "resolvers"], before, after):
    assert b == a, f"importing gpt1 changed {what}: {a if what != 'os.environ' else set(a.items()) ^ set(b.items())}"
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
from gpt1.app.config import register
register()
from gpt1.checkpoints.format import load_checkpoint, save_checkpoint
from gpt1.model import GPT, GPTConfig
from gpt1.text.tokenizer import train_bpe
tok = train_bpe(["a tiny corpus of words, and of more words"] * 20, vocab_size=60)
save_checkpoint({str(tmp_path / "tiny.ckpt")!r}, GPT(GPTConfig(vocab_size=tok.vocab_size, n_ctx=8, n_layer=1, n_head=2,
                n_embd=8, n_inner=16)), tok)
print(load_checkpoint({str(tmp_path / "tiny.ckpt")!r}).model.tokens_embed.weight.device)
"""
    proc = run(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["cpu"]


def test_the_old_module_paths_are_the_modules_in_their_new_homes():
    """Issue 38 moved every module into a room: each old path (``gpt1.tokenizer``, ``gpt1.data.tasks``, ...) still
    imports, as the very module of its new home (one module, two names: a monkeypatch or an isinstance through either
    sees the same objects), and old pickles find their classes."""
    code = """
import importlib, pickle, sys
import gpt1
for old, new in gpt1.MOVED.items():
    assert importlib.import_module(old) is importlib.import_module(new), old
    assert sys.modules[new].__spec__.name == new, new  # the alias left the module's own spec
from gpt1.tokenizer import Tokenizer
from gpt1.text.tokenizer import Tokenizer as T2
from gpt1.data.config import Quoting
assert Tokenizer is T2 and pickle.loads(pickle.dumps(Quoting.none)) is Quoting.none
# the modules that became packages keep the old modules' names on the package
from gpt1.model import GPT, PRESETS, GPTConfig, LayerCache
from gpt1.cpu import configure, measure_matmuls, PROBES
from gpt1.app import command, user_errors
import gpt1.cpu.settings, gpt1.app.runner
assert configure is gpt1.cpu.settings.configure and command is gpt1.app.runner.command
print(len(gpt1.MOVED))
"""
    proc = run(code)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) >= 24


def test_each_room_says_what_it_holds():
    """The tree is the map: every folder of the package has a docstring in its ``__init__.py``."""
    import gpt1

    root = Path(gpt1.__file__).parent
    rooms = [p for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    assert len(rooms) >= 12
    for room in rooms:
        assert ast.get_docstring(ast.parse((room / "__init__.py").read_text())), f"{room.name}/__init__.py"


def test_the_quick_tier_covers_every_room():
    """``pytest -m quick`` has tests of each room of the package (tests/conftest.py QUICK)."""
    import gpt1
    from tests.conftest import QUICK

    root = Path(gpt1.__file__).parent
    rooms = {p.name for p in root.iterdir() if (p / "__init__.py").exists()}
    assert set(QUICK) == rooms
    assert all(QUICK.values())


def test_the_layers_old_names_resolve_in_gpt1_model_layers():
    """The model's layers left gpt1.cpu.kernels (gpt1.ops before the rooms) for gpt1.model.layers: old imports and
    pickles that name them there still find them, and nothing else resolves there by accident."""
    import pickle

    import pytest

    import gpt1.cpu.kernels
    import gpt1.model.layers
    import gpt1.ops

    assert gpt1.cpu.kernels.LAYERS == ("linear", "Linear", "dropout", "Dropout", "embedding", "Embedding", "attention")
    for name in gpt1.cpu.kernels.LAYERS:
        assert getattr(gpt1.ops, name) is getattr(gpt1.cpu.kernels, name) is getattr(gpt1.model.layers, name)
    from gpt1.ops import Linear

    assert Linear is gpt1.model.layers.Linear
    assert (
        pickle.loads(b"cgpt1.ops\nDropout\n.")
        is pickle.loads(b"cgpt1.cpu.kernels\nDropout\n.")
        is gpt1.model.layers.Dropout
    )
    with pytest.raises(AttributeError, match="has no attribute 'Attention'"):
        gpt1.cpu.kernels.Attention  # noqa: B018


def test_the_old_paths_of_data_tasks_and_cluster_modules_are_the_moved_modules():
    import importlib

    import gpt1

    olds = ["gpt1.tasks.base", "gpt1.zeroshot", "gpt1.metrics", "gpt1.data.tasks", "gpt1.data.pretrain"]
    for old in [*olds, "gpt1.data.config", "gpt1.slurm", "gpt1.squeue"]:
        assert importlib.import_module(old) is importlib.import_module(gpt1.MOVED[old]), old
    from gpt1.tasks import TaskType
    from gpt1.tasks.base import TaskType as old_type  # (tasks/base.py is tasks/task_type.py: data/ has a base.py)

    assert old_type is TaskType


CONFIG_NAMES = """Schedule Selection NonFinite WandbMode OptimConfig TrainerConfig WandbConfig LoggerConfig
CheckpointConfig
SamplesConfig CallbacksConfig PathsConfig PretrainConfig CheckpointModelConfig FinetuneConfig EvaluateConfig
GenerateConfig ConvertConfig ZeroshotCommandConfig resolve_device group_choice task_name
default_output_dir corpus_name register check_ranges""".split()
"""What ``gpt1.config`` (later ``gpt1.app.config``) gave before it was split by job (issue 38)."""


def test_the_old_config_paths_give_every_name_they_gave():
    """``gpt1.config`` and ``gpt1.app.config`` give each name the one module gave, the very object of its new home."""
    import importlib

    import gpt1.app.config

    old = importlib.import_module("gpt1.config")
    for name in CONFIG_NAMES:
        home = importlib.import_module(gpt1.app.config.MOVED.get(name, "gpt1.app.config"))
        assert getattr(old, name) is getattr(gpt1.app.config, name) is getattr(home, name), name
    assert not hasattr(old, "no_such_name")


def test_the_callbacks_keep_their_old_paths():
    """``gpt1.training.callbacks`` was one module: its names still import from it, and ``BestWeights`` from
    ``gpt1.training.selection``, now that each callback has a module of its own."""
    import gpt1.training.callbacks as callbacks
    from gpt1.training.callbacks.best_weights import BestWeights
    from gpt1.training.callbacks.safe_stop import SafeStop
    from gpt1.training.selection import BestWeights as selected

    names = ["AtomicCheckpointIO", "PeriodicCheckpoint", "SafeStop", "SampleText", "LogShortRuns", "BestWeights"]
    assert all(isinstance(getattr(callbacks, name), type) for name in names)
    assert callable(callbacks.build_callbacks) and callable(callbacks.print_above_bar)
    assert callbacks.SafeStop is SafeStop and callbacks.BestWeights is BestWeights is selected
