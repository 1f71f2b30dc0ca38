"""Checkpoints written atomically: a crash or kill mid-save leaves the last good one (Lightning's checkpoint-IO plugin,
which every gpt1 Trainer takes)."""

from __future__ import annotations

import os
from typing import Any

from lightning.pytorch.plugins.io import TorchCheckpointIO

from gpt1.checkpoints.format import atomic_save


class AtomicCheckpointIO(TorchCheckpointIO):
    """Write each checkpoint to a temporary file and rename it: a crash or kill mid-save leaves the last good one."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: Any = None) -> None:
        atomic_save(checkpoint, path)
