"""``trainer=fsdp``: Fully Sharded Data Parallel through FSDP2 (``torch.distributed.fsdp.fully_shard``), on GPUs
(NCCL) and CPUs (gloo) alike: Lightning's FSDP1 refuses CPUs, its ``ModelParallelStrategy`` runs FSDP2 on a device
mesh of the device's type. ``FSDP2Strategy`` is that strategy with every process data-parallel and consolidated
checkpoints (one file in gpt1's format, as DDP's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lightning as L
from lightning.pytorch.strategies import ModelParallelStrategy
from omegaconf import DictConfig
from torch import nn

from gpt1.core.compat import set_data_parallel_size
from gpt1.core.errors import ConfigError
from gpt1.training.strategies.base import TrainingStrategy

PRECISIONS = ("auto", "32-true", "32", "bf16-mixed", "bf16", "bf16-true", "16-true")
"""The trainer.precision values Lightning's ModelParallelStrategy takes."""


class FSDP2Strategy(ModelParallelStrategy):
    """FSDP2 over every process, saving one consolidated checkpoint (rank 0 writes it) and loading one into the
    sharded module."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(tensor_parallel_size=1, save_distributed_checkpoint=False, **kwargs)

    def setup_environment(self) -> None:
        set_data_parallel_size(self, self.num_nodes * self.num_processes)  # every process a data-parallel shard
        super().setup_environment()

    def load_model_state_dict(self, checkpoint: Mapping[str, Any], strict: bool = True) -> None:
        """Assign a full state dict (one file) to the sharded module: each rank keeps its shard. Resuming goes
        through ``load_checkpoint``, which has taken the weights out already (no "state_dict" left)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        if "state_dict" in checkpoint:
            set_model_state_dict(
                self.lightning_module,
                checkpoint["state_dict"],
                options=StateDictOptions(full_state_dict=True, strict=strict),
            )


class FSDP2(TrainingStrategy):
    """``trainer.strategy=fsdp2``: ``FSDP2Strategy``, the module sharded, the weights gathered for decoding."""

    names = ("fsdp2",)

    def check(self, cfg: DictConfig) -> None:
        super().check(cfg)
        if str(cfg.precision) not in PRECISIONS:
            raise ConfigError(
                f"trainer=fsdp (FSDP2) does not take trainer.precision={cfg.precision}: use bf16-mixed, "
                "bf16-true, 16-true or 32-true"
            )

    def build(self, name: str, options: dict[str, Any]) -> FSDP2Strategy:
        return FSDP2Strategy(**options)

    def configure_model(self, module: L.LightningModule) -> None:
        """Shard ``module`` over the data-parallel dimension of its mesh: each block of its decoder (``model.h``), then
        the decoder's root (embeddings, so the tied LM head with them: one parameter, sharded once), then each head.
        Idempotent: Lightning calls ``configure_model`` once per fit, validate and test."""
        from torch.distributed.fsdp import FSDPModule, fully_shard

        if isinstance(module.model, FSDPModule):
            return
        mesh = module.device_mesh["data_parallel"]
        for block in getattr(module.model, "h", ()):
            fully_shard(block, mesh=mesh)
        fully_shard(module.model, mesh=mesh)
        for head in module.heads.values():
            fully_shard(head, mesh=mesh)

    def full_model(self, model: nn.Module) -> nn.Module | None:
        """An unsharded copy, on rank 0's device and on gpt1's CPU layers where model is."""
        import torch
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        from gpt1.checkpoints.format import empty_model
        from gpt1.cpu.layers import on_cpu_layers, use_cpu_layers
        from gpt1.model.registry import MODEL_TYPES, model_type

        device = next(model.parameters()).device
        state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if torch.distributed.get_rank() != 0:
            return None
        copy = empty_model(MODEL_TYPES[model_type(model)].model, model.config)  # not fully_shard's FSDP<class>
        copy.load_state_dict(state, assign=True)
        if on_cpu_layers(model):
            use_cpu_layers(copy)
        return copy.to(device)


STRATEGY = FSDP2()
