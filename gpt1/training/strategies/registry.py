"""The strategies by the ``trainer.strategy`` values that choose them: every module of this package but ``base`` and
this one holds one, as ``STRATEGY``, and is found by being there."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.strategies import StrategyRegistry

import gpt1.training.strategies as package
from gpt1.core.errors import ConfigError
from gpt1.training.strategies.base import TrainingStrategy

LIGHTNINGS = TrainingStrategy()
"""Lightning's own rules: for a strategy Lightning knows by name that no module claims (xla, ...), and for a Trainer
that ``build_trainer`` did not build."""
ATTRIBUTE = "gpt1_strategy"
"""The attribute under which a Trainer that ``build_trainer`` built keeps its strategy (``strategy_of``)."""


def strategies() -> dict[str, TrainingStrategy]:
    """Every strategy of the package by each of its names; a name that two modules claim is an error."""
    found: dict[str, TrainingStrategy] = {}
    for module in pkgutil.iter_modules(package.__path__):
        if module.name in ("base", "registry"):
            continue
        strategy = importlib.import_module(f"{package.__name__}.{module.name}").STRATEGY
        for name in strategy.names:
            if name in found:
                raise ValueError(f"trainer.strategy={name} is claimed by {type(found[name])} and {type(strategy)}")
            found[name] = strategy
    return found


def strategy_for(name: str) -> TrainingStrategy:
    """The strategy that ``trainer.strategy=name`` chooses; a ``ConfigError`` that lists the names if none does."""
    found = strategies()
    if name in found:
        return found[name]
    if name in StrategyRegistry:
        return LIGHTNINGS
    ours = sorted(n for n in found if n not in StrategyRegistry and n != "auto")
    names = sorted(n for n in StrategyRegistry if "find_unused" not in n)
    raise ConfigError(
        f"trainer.strategy={name}: not a strategy Lightning knows; choose auto or one of "
        f"{', '.join([*names, *ours])} (or trainer=ddp, fsdp, deepspeed)"
    )


def strategy_of(trainer: L.Trainer) -> TrainingStrategy:
    """The strategy ``trainer`` runs: the one ``build_trainer`` built it with (``ATTRIBUTE``), else Lightning's."""
    return getattr(trainer, ATTRIBUTE, LIGHTNINGS)


def resumable(checkpoint: dict[str, Any], path: Path) -> bool:
    """Whether a strategy resumes from the checkpoint ``path`` (read as ``checkpoint``): Lightning's loops and the
    optimizer's state, in the file or where the strategy that wrote it keeps it (DeepSpeed's shards beside it)."""
    return any(s.holds_training_state(checkpoint, path) for s in [LIGHTNINGS, *strategies().values()])
