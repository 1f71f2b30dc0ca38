"""The Hydra job this process runs, if any: the option chosen for a config group, which the messages of a refused
config name, and the keys its sweep sweeps."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf


def group_choice(group: str) -> Optional[str]:
    """The option chosen for a config group in this Hydra run (task=sentiment: "sentiment"); None outside a run
    (e.g. a config composed by ``hydra.compose``)."""
    return HydraConfig.get().runtime.choices.get(group) if HydraConfig.initialized() else None


def swept_keys(hydra: DictConfig, sweep: Path) -> set[str]:
    """The keys a multirun sweeps, from a job's ``hydra`` config node: its sweeper's params (an experiment's) and the
    command line's sweeps, as the sweep directory's multirun.yaml records them (a job's own overrides hold one value
    each)."""
    keys = set((hydra.sweeper.get("params") or {}).keys())
    saved = sweep / "multirun.yaml"
    if saved.is_file():
        command_line = OverridesParser.create().parse_overrides(list(OmegaConf.load(saved).hydra.overrides.task))
        keys |= {o.key_or_group for o in command_line if o.is_sweep_override()}
    return keys
