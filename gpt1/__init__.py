"""gpt1: a faithful GPT-1 reproduction and experiment framework on PyTorch Lightning and Hydra.

The package's rooms, from the top down (each may import only those below it; pyproject.toml's import-linter
contract checks it): ``api`` (the library) > ``commands``, ``tools`` > ``app`` > ``training`` > ``data`` >
``tasks`` > ``checkpoints`` > ``cpu`` > ``model``, ``text``, ``cluster`` > ``core``.

Importing it changes nothing in the process but one entry of ``sys.meta_path``, which resolves the module paths of
the flat layout before the rooms (``gpt1.tokenizer``, ``gpt1.checkpoint``, ...) to their new homes, so that old
imports and old pickles keep working; ``gpt1.cpu.settings.configure()`` applies the CPU speed settings (every gpt1
command calls it)."""

import importlib
import importlib.abc
import importlib.util
import sys

__version__ = "0.1.0"

MOVED = {
    "gpt1.errors": "gpt1.core.errors",
    "gpt1.io": "gpt1.core.files",
    "gpt1.progress": "gpt1.core.progress",
    "gpt1.memory": "gpt1.core.memory",
    "gpt1.allocator": "gpt1.cpu.allocator",
    "gpt1.ops": "gpt1.cpu.kernels",
    "gpt1.lstm": "gpt1.model.lstm",
    "gpt1.heads": "gpt1.model.heads",
    "gpt1.decoding": "gpt1.cpu.decoding",
    "gpt1.tokenizer": "gpt1.text.tokenizer",
    "gpt1.openai_text": "gpt1.text.openai_text",
    "gpt1.checkpoint": "gpt1.checkpoints.format",
    "gpt1.hf": "gpt1.checkpoints.hf",
    "gpt1.transfer": "gpt1.checkpoints.transfer",
    "gpt1.metrics": "gpt1.tasks.metrics",
    "gpt1.zeroshot": "gpt1.tasks.heuristics",
    "gpt1.tasks.base": "gpt1.tasks.task_type",
    "gpt1.data.tasks": "gpt1.data.task_data",
    "gpt1.data.pretrain": "gpt1.data.pretrain_data",
    "gpt1.data.config": "gpt1.data.data_config",
    "gpt1.config": "gpt1.app.config",
    "gpt1.cli": "gpt1.app.cli",
    "gpt1.suggest": "gpt1.app.suggest",
    "gpt1.slurm": "gpt1.cluster.slurm",
    "gpt1.squeue": "gpt1.cluster.squeue",
}
"""Old module path -> its home now. ``gpt1.model``, ``gpt1.cpu`` and ``gpt1.app`` became packages whose faces keep
the old modules' names."""


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import gpt1.tokenizer`` gives the module object of ``gpt1.text.tokenizer`` itself (one module, two names)."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec):
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__  # the import system sets the alias's spec on the module: put its own back
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())
