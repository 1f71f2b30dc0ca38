"""The Hydra job this process runs, if any: the option chosen for a config group (``trainer=ddp``: "ddp"), which the
messages of a refused config name. Light: importing it imports Hydra's runtime config only."""

from __future__ import annotations

from typing import Optional

from hydra.core.hydra_config import HydraConfig


def group_choice(group: str) -> Optional[str]:
    """The option chosen for a config group in this Hydra run (task=sentiment: "sentiment"); None outside a run
    (e.g. a config composed by ``hydra.compose``)."""
    return HydraConfig.get().runtime.choices.get(group) if HydraConfig.initialized() else None
