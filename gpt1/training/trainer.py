"""The Lightning Trainer of a run, as its ``trainer`` config says: precision and strategy resolved, atomic checkpoints,
gpt1's console output; and ``check_accelerator``, which every command calls before any work."""

from __future__ import annotations

import re
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.accelerators import AcceleratorRegistry
from lightning.pytorch.callbacks import Callback, ProgressBar
from lightning.pytorch.loggers import Logger
from omegaconf import DictConfig, OmegaConf

from gpt1.cluster.slurm import slurm_environment
from gpt1.core import compat
from gpt1.core.errors import ConfigError
from gpt1.training.callbacks.atomic_io import AtomicCheckpointIO
from gpt1.training.console import StepProgress, quiet_library_noise
from gpt1.training.hydra_job import group_choice
from gpt1.training.strategies.registry import ATTRIBUTE, strategy_for


def build_trainer(
    cfg: DictConfig, output_dir: Path, loggers: list[Logger] | None = None, callbacks: list[Callback] | None = None
) -> L.Trainer:
    """A Lightning Trainer as ``cfg`` (a ``TrainerConfig`` node) says, under ``output_dir``; it keeps its strategy
    for the module and the callbacks to ask (``strategy_of``). An integer ``val_check_interval`` counts training
    batches across epochs, so an epoch shorter than the interval (a small corpus) is no error."""
    quiet_library_noise()
    if torch.cuda.is_available():
        torch.set_float32_matmul_precision("high")  # TF32 matmuls for fp32 runs on Ampere and later
    args = OmegaConf.to_container(cfg, resolve=True)
    strategy = strategy_for(args["strategy"])
    args["strategy"] = strategy.build(args["strategy"], args.pop("strategy_options", None) or {})
    args["precision"] = resolve_precision(args["precision"], args["accelerator"])
    interval = args.get("val_check_interval")
    if isinstance(interval, int) and not isinstance(interval, bool):
        args["check_val_every_n_epoch"] = None
    callbacks = list(callbacks or [])
    if args.get("enable_progress_bar", True) and not any(isinstance(c, ProgressBar) for c in callbacks):
        callbacks.append(StepProgress())
    trainer = L.Trainer(
        **args,
        default_root_dir=output_dir,
        logger=loggers or False,
        callbacks=callbacks,
        enable_model_summary=False,  # the command says the model in a line of its own, with or without rich
        plugins=[AtomicCheckpointIO(), *slurm_environment()],  # submitit requeues, not Lightning
    )
    setattr(trainer, ATTRIBUTE, strategy)  # what the module and the callbacks ask (strategy_of)
    return trainer


def resolve_precision(precision: str, accelerator: str) -> str:
    """trainer.precision as Lightning takes it: "auto" is bf16 autocast where the device multiplies bf16 natively,
    else fp32."""
    if precision != "auto":
        return precision
    if accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available()):
        native = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    else:
        native = compat.cpu_multiplies_bf16()
    return "bf16-mixed" if native else "32-true"


PRECISIONS = ("auto", "32-true", "bf16-mixed", "16-mixed", "bf16-true", "16-true", "64-true", "32", "16", "bf16", "64")
"""trainer.precision's values: Lightning's (but Transformer Engine's), and auto (``resolve_precision``)."""
DURATION = re.compile(r"\d+:\d{1,2}:\d{1,2}:\d{1,2}")  # DD:HH:MM:SS, as Lightning parses it


def check_accelerator(cfg: DictConfig) -> None:
    """Refuse, in one line and before any data work, a trainer config that Lightning would refuse (at length), that
    its strategy refuses (``TrainingStrategy.check``) or that this machine cannot run (GPUs it does not have)."""
    strategy = strategy_for(cfg.strategy)
    if str(cfg.precision) not in PRECISIONS:
        raise ConfigError(f"trainer.precision={cfg.precision}: choose one of {', '.join(PRECISIONS)}")
    if str(cfg.accelerator).lower() not in ("auto", "gpu", *AcceleratorRegistry):
        raise ConfigError(
            f"trainer.accelerator={cfg.accelerator}: not an accelerator Lightning knows; choose auto, gpu or one of "
            f"{', '.join(AcceleratorRegistry)}"
        )
    for key in ("max_time", "val_check_interval"):
        if isinstance(cfg[key], str) and not DURATION.fullmatch(cfg[key]):
            raise ConfigError(
                f"trainer.{key}={cfg[key]}: give a duration as DD:HH:MM:SS (e.g. 00:12:00:00)"
                + (
                    ", or a number of batches (int) or a fraction of an epoch (float)"
                    if key == "val_check_interval"
                    else ""
                )
            )
    strategy.check(cfg)
    accelerator = str(cfg.accelerator).lower()
    if accelerator not in ("gpu", "cuda"):
        return
    chosen = group_choice("trainer")
    asked = f"trainer.accelerator={cfg.accelerator}"
    if chosen not in (None, "cpu", "default"):  # trainer=gpu, trainer=ddp: name the option the user chose
        asked = f"trainer={chosen} ({asked})"
    if not torch.cuda.is_available():
        if accelerator == "gpu" and torch.backends.mps.is_available():
            return  # Apple silicon: Lightning's gpu is MPS
        raise ConfigError(
            f"{asked} asks for a GPU, but no CUDA GPU is visible: use trainer=cpu (or trainer.accelerator=cpu)"
        )
    devices, visible = cfg.devices, torch.cuda.device_count()
    if isinstance(devices, int) and not isinstance(devices, bool) and devices > visible:
        raise ConfigError(
            f"trainer.devices={devices}, but {visible} CUDA GPU{'s are' if visible > 1 else ' is'} "
            f"visible: use trainer.devices={visible} (or -1: all of them)"
        )


def compile_model(module: L.LightningModule, enabled: bool) -> None:
    """``compile=true``: compile ``module.model`` in place, so that the checkpoints keep plain parameter names (no
    ``_orig_mod.``); and the module's ``next_token_loss`` as one graph with it: left eager, the tied head's (B T, V)
    logits and their fp32 cross-entropy took a third of a compiled GPT-1 step on an H100."""
    if enabled:
        module.model.compile()
        module.next_token_loss = torch.compile(module.next_token_loss)
