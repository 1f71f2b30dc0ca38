"""gpt1 as a Python library: the common jobs in one place (docs/library.md shows each one at work).

    from gpt1 import api
    cfg = api.compose("finetune", ["task=sentiment", "init_from=CKPT", "trainer.max_steps=300"])
    metrics = api.finetune(cfg)                    # what `gpt1 finetune ...` does, no Hydra runtime needed
    loaded = api.load_checkpoint(metrics["checkpoint"])

Each name is the function or class the commands use, imported when first used. The command functions take a config
from ``compose``, write to ``paths.output_dir`` (outputs/<run_name>/<time> unless set) and return their metrics.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omegaconf import DictConfig

_NAMES = {
    # checkpoints and OpenAI's weights
    "load_checkpoint": "gpt1.checkpoints.format",  # a gpt1 checkpoint -> Loaded(model, tokenizer, heads, task, raw)
    "save_checkpoint": "gpt1.checkpoints.format",
    "import_hf": "gpt1.checkpoints.hf",  # an HF openai-gpt directory (OpenAI's weights) -> a gpt1 checkpoint file
    # a gpt1 checkpoint -> an HF openai-gpt directory (transformers, lm-evaluation-harness)
    "export_hf": "gpt1.checkpoints.hf",
    # the model and its tokenizer
    "GPT": "gpt1.model.decoder",
    "GPTConfig": "gpt1.model.decoder",
    "model_config": "gpt1.app.model_group",  # conf/model/NAME.yaml as its config (a GPTConfig for "small")
    "PRESETS": "gpt1.app.model_group",  # GPT-1's sizes by name: PRESETS["small"] is model_config("small")
    "Tokenizer": "gpt1.text.tokenizer",
    "load_tokenizer": "gpt1.text.tokenizer",
    "train_bpe": "gpt1.text.tokenizer",
    "prompt_ids": "gpt1.text.tokenizer",  # a generation prompt's ids (empty: the end-of-document token)
    # the commands' functions: a composed config in, the metrics (generate: the texts) out
    "configure_cpu": ("gpt1.cpu.settings", "configure"),
    "pretrain": ("gpt1.commands.pretrain", "train"),
    "finetune": "gpt1.commands.finetune",
    "evaluate": "gpt1.commands.evaluate",
    "zeroshot": "gpt1.commands.zeroshot",
    "generate": "gpt1.commands.generate",
}
"""Public name -> its module (or (module, name there))."""

__all__ = ["compose", *_NAMES]


def compose(command: str, overrides: Sequence[str] = (), *, task: Any = None) -> DictConfig:
    """The config that ``gpt1 <command> <overrides...>`` runs with, composed by Hydra from the installed conf/ and
    typed by gpt1's schemas (a misspelt key or a wrong type fails here), without starting a Hydra app (call it outside
    one: Hydra keeps one global instance): the group choices it names are settled (``run_name``, ``task.name``).

    ``task``: a task of one's own for finetune, evaluate or zeroshot, in place of ``task=NAME``: a ``TaskConfig``, a
    dict of its fields or a task YAML file's path (``gpt1.app.registration.task_option``). ``rerun=DIR`` among
    ``overrides`` composes the finished run in DIR again from its record, as the command line does."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from omegaconf import open_dict

    from gpt1.app.recorded import with_record
    from gpt1.app.registration import register, task_option
    from gpt1.core.errors import ConfigError

    register()
    overrides = [o for o in with_record(list(overrides), command) if not o.startswith("-")]  # rerun=DIR: its record's
    with contextlib.ExitStack() as scope:
        if task is not None:
            if any(o.lstrip("+~").split("=")[0] == "task" for o in overrides):
                raise ConfigError("compose got a task and a task= override: give one of them")
            overrides = [*overrides, f"task={scope.enter_context(task_option(task))}"]
        with initialize_config_module("gpt1.conf", version_base="1.3"):
            cfg = hydra_compose(command, overrides=list(overrides), return_hydra_config=True)
    with open_dict(cfg):  # what needs Hydra's node (the groups chosen) is read, then the node goes
        cfg.run_name = cfg.run_name  # finetune/${gpt1.choice:task} -> finetune/sentiment
        if cfg.get("task") is not None and not cfg.task.name:
            cfg.task.name = cfg.hydra.runtime.choices.get("task")
        del cfg["hydra"]
    return cfg


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'gpt1.api' has no attribute {name!r}; it has {', '.join(__all__)}")
    where = _NAMES[name]
    module, attr = (where, name) if isinstance(where, str) else where
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # imported once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
