"""The CPU matmul kernels a run's weights are made with, fixed at its start and carried by its checkpoints
(``RunKernels``): a stopped and resumed run multiplies as it started."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

import lightning as L
from lightning.pytorch.callbacks import Callback

from gpt1.core.files import atomic_file
from gpt1.cpu import kernels, settings
from gpt1.cpu.layers import on_cpu_layers

RECORD = "cpu-matmuls.json"
"""The run directory's record of its kernels (what its checkpoints carry), for people and tools to read."""


class RunKernels(Callback):
    """Fix the kernel of each kind of CPU product for the whole run, since a kernel changes the weights' last bits:
    rank 0's choice when the run starts from step 0, sent to every rank, saved in every checkpoint and in
    ``RECORD``; a resumed run takes its checkpoint's, whatever this process would choose. One line says which were
    used, where they came from, and whether the model runs on gpt1's CPU layers, the ones that use them."""

    def __init__(self, output_dir: Path) -> None:
        self.record = Path(output_dir) / RECORD
        self.loaded: Optional[dict[str, str]] = None
        """The kernels of the checkpoint the run resumes from (None: none, or an older gpt1's checkpoint)."""

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage == "fit":  # rank 0's choice on every rank (a rank measures its own machine, at its own load)
            kernels.set_cpu_matmuls(trainer.strategy.broadcast(dict(kernels.CPU_MATMULS), src=0))

    def state_dict(self) -> dict[str, Any]:
        return {"cpu_matmuls": dict(kernels.CPU_MATMULS)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.loaded = dict(state_dict["cpu_matmuls"])

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        own = dict(kernels.CPU_MATMULS)
        if self.loaded is not None:
            kernels.set_cpu_matmuls(self.loaded)
            source = f"those of {trainer.ckpt_path}, which this run was started with"
        else:
            applied = settings.applied()
            how = applied.source if applied else "torch's, gpt1.cpu.settings.configure not called"
            source = (
                f"chosen at the run's start ({how})"
                if not trainer.global_step
                else f"this process's ({how}): {trainer.ckpt_path} records none (saved by an older gpt1)"
            )
        if not trainer.is_global_zero:
            return
        used = dict(kernels.CPU_MATMULS)
        layers = "gpt1's CPU layers" if on_cpu_layers(pl_module.model) else "torch's own layers (not on the CPU)"
        line = f"CPU matmul kernels: {_kinds(used)}; {source}"
        forced = os.environ.get("GPT1_CPU_MATMUL", "auto")
        if self.loaded is not None and forced in settings.FORCED and used != own:
            line += f" (GPT1_CPU_MATMUL={forced} applies to new runs only: a resumed run keeps its kernels)"
        line += f"; the model on {layers}"
        print(line, file=sys.stderr, flush=True)
        with atomic_file(self.record, "w") as f:
            json.dump(used, f, indent=1, sort_keys=True)


def _kinds(matmuls: dict[str, str]) -> str:
    """The kinds grouped by kernel, in one line: "onednn for train.forward, ...; torch for decode, ..."."""
    by_kernel: dict[str, list[str]] = {}
    for kind, kernel in matmuls.items():
        by_kernel.setdefault(kernel, []).append(kind)
    return "; ".join(f"{kernel} for {', '.join(kinds)}" for kernel, kinds in by_kernel.items())
