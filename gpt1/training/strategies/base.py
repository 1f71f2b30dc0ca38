"""``TrainingStrategy``, what a training strategy is to gpt1: the Lightning strategy that ``trainer.strategy`` builds
and the rules that go with it. Every method's default is Lightning's own behaviour."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.plugins.precision import MixedPrecision, Precision
from lightning.pytorch.strategies import Strategy, StrategyRegistry
from lightning.pytorch.utilities import GradClipAlgorithmType
from omegaconf import DictConfig
from torch import nn

from gpt1.core.errors import ConfigError


class TrainingStrategy:
    """A strategy as Lightning runs it by name (also a name Lightning knows and no module claims: xla, ...). A
    strategy's module subclasses it, overrides what differs and holds one instance as ``STRATEGY``."""

    names: tuple[str, ...] = ()
    """The values of ``trainer.strategy`` that choose it."""
    gpus_only = False
    """Whether it runs on CUDA GPUs only (``check`` refuses trainer.accelerator=cpu)."""

    def check(self, cfg: DictConfig) -> None:
        """Refuse, in one line (a ``ConfigError``) and before any data work, a trainer config (a ``TrainerConfig``
        node) that this strategy cannot run."""
        if self.gpus_only and str(cfg.accelerator).lower() == "cpu":
            raise ConfigError(
                f"trainer.strategy={cfg.strategy} runs on GPUs only (Lightning's), not "
                "trainer.accelerator=cpu: use trainer=fsdp (FSDP2) or trainer=ddp with "
                "trainer.accelerator=cpu on CPUs"
            )

    def build(self, name: str, options: dict[str, Any]) -> str | Strategy:
        """The ``strategy`` argument of Lightning's Trainer for ``trainer.strategy=name``: the name as is, or with
        ``options`` (``trainer.strategy_options``) its class built with them as keyword arguments."""
        if not options:
            return name
        if name not in StrategyRegistry:
            raise ConfigError(
                f"trainer.strategy_options needs a strategy name Lightning knows, not trainer.strategy="
                f"{name}: one of {', '.join(sorted(StrategyRegistry))}"
            )
        entry = StrategyRegistry[name]
        return entry["strategy"](**{**entry["init_params"], **options})

    def configure_model(self, module: L.LightningModule) -> None:
        """Prepare ``module`` (a ``GPT1Module``, on its device) in its ``configure_model``, once per fit, validate and
        test."""

    def clip_gradients(
        self,
        module: L.LightningModule,
        optimizer: torch.optim.Optimizer,
        value: float | None,
        algorithm: str | None,
    ) -> None:
        """Clip ``module``'s gradients (``LightningModule.configure_gradient_clipping``'s arguments) as Lightning
        does, except under bf16-mixed: Lightning refuses to clip for a fused optimizer under any mixed precision, but
        bf16 has no GradScaler, so its gradients are clipped as fp32's are."""
        plugin = module.trainer.precision_plugin
        if isinstance(plugin, MixedPrecision) and plugin.scaler is None:
            value, kind = clip_settings(module.trainer, value, algorithm)
            Precision.clip_gradients(plugin, optimizer, value or 0.0, kind)
        else:
            module.clip_gradients(optimizer, value, algorithm)

    def full_model(self, model: nn.Module) -> nn.Module | None:
        """The decoder ``model`` with all its weights on global rank 0, for what reads them outside a forward (text
        samples); None where a rank gets none. Every rank calls it (a gather is a collective)."""
        return model

    def holds_training_state(self, checkpoint: dict[str, Any], path: Path) -> bool:
        """Whether this strategy resumes from the checkpoint ``path`` (read as ``checkpoint``)."""
        return "loops" in checkpoint and "optimizer_states" in checkpoint


def clip_settings(
    trainer: L.Trainer, value: float | None, algorithm: str | None
) -> tuple[float | None, GradClipAlgorithmType]:
    """The clipping threshold and algorithm that apply: those given, else the Trainer's (by norm when none says)."""
    value = value if value is not None else trainer.gradient_clip_val
    return value, GradClipAlgorithmType(algorithm or trainer.gradient_clip_algorithm or "norm")


def lightning_names(strategy: type[Strategy]) -> tuple[str, ...]:
    """Every name under which Lightning registers the strategy class ``strategy`` (ddp, ddp_spawn, ...)."""
    return tuple(name for name, entry in StrategyRegistry.items() if entry["strategy"] is strategy)
