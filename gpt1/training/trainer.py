"""The Lightning Trainer of a run, as its ``trainer`` config says: precision and strategy resolved, atomic checkpoints,
gpt1's console output; and ``check_accelerator``, which every command calls before any work."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import lightning as L
import torch
from hydra.utils import get_class
from lightning.pytorch.accelerators import AcceleratorRegistry
from lightning.pytorch.callbacks import Callback, ProgressBar
from lightning.pytorch.loggers import Logger
from lightning.pytorch.strategies import Strategy, StrategyRegistry
from omegaconf import DictConfig, OmegaConf

from gpt1.cluster.slurm import slurm_environment
from gpt1.core import compat
from gpt1.core.errors import ConfigError
from gpt1.training.callbacks.atomic_io import AtomicCheckpointIO
from gpt1.training.console import StepProgress, SummaryWithoutZeroFlops, quiet_library_noise
from gpt1.training.deepspeed import DeepSpeedConsolidated
from gpt1.training.fsdp import NAME as FSDP2
from gpt1.training.fsdp import FSDP2Strategy
from gpt1.training.hydra_job import group_choice


def build_trainer(
    cfg: DictConfig, output_dir: Path, loggers: list[Logger] | None = None, callbacks: list[Callback] | None = None
) -> L.Trainer:
    """A Lightning Trainer as ``cfg`` (a ``TrainerConfig`` node) says, under ``output_dir``, atomic checkpoints.

    An integer ``val_check_interval`` counts training batches across epochs (``check_val_every_n_epoch`` None), so
    an epoch shorter than the interval (a small corpus) is no error. The model summary is Lightning's, without what
    says nothing (a FLOPs count of 0); the progress bar counts updates to the run's budget (``StepProgress``).
    """
    quiet_library_noise()
    if torch.cuda.is_available():
        torch.set_float32_matmul_precision("high")  # TF32 matmuls for fp32 runs on Ampere and later
    args = OmegaConf.to_container(cfg, resolve=True)
    args["strategy"] = build_strategy(args["strategy"], args.pop("strategy_options", None) or {})
    args["precision"] = resolve_precision(args["precision"], args["accelerator"])
    interval = args.get("val_check_interval")
    if isinstance(interval, int) and not isinstance(interval, bool):
        args["check_val_every_n_epoch"] = None
    callbacks = [*(callbacks or []), SummaryWithoutZeroFlops()]
    if args.get("enable_progress_bar", True) and not any(isinstance(c, ProgressBar) for c in callbacks):
        callbacks.append(StepProgress())  # counts updates to the budget, on a terminal and in a log file
    return L.Trainer(
        **args,
        default_root_dir=output_dir,
        logger=loggers or False,
        callbacks=callbacks,
        enable_model_summary=False,  # SummaryWithoutZeroFlops instead of Lightning's
        plugins=[AtomicCheckpointIO(), *slurm_environment()],  # submitit requeues, not Lightning
    )


def resolve_precision(precision: str, accelerator: str) -> str:
    """trainer.precision as Lightning takes it: "auto" is bf16 autocast where the device multiplies bf16 natively
    (a CUDA GPU with bf16; a CPU with AVX512-BF16 or AMX), else fp32."""
    if precision != "auto":
        return precision
    if accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available()):
        native = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    else:
        native = compat.cpu_multiplies_bf16()
    return "bf16-mixed" if native else "32-true"


def build_strategy(name: str, options: dict[str, Any]) -> str | Strategy:
    """Lightning's strategy ``name`` (ddp, fsdp, deepspeed_stage_2, ...) as is, or with ``options`` its class built
    with them as keyword arguments; a ``*_policy`` option given as a list of class paths (FSDP's auto_wrap_policy)
    becomes the set of those classes. ``fsdp2`` (trainer=fsdp) is gpt1's ``FSDP2Strategy``, a DeepSpeed strategy
    (trainer=deepspeed: deepspeed_stage_2) gpt1's ``DeepSpeedConsolidated``: both write one checkpoint file."""
    if name == FSDP2:
        return FSDP2Strategy(**options)
    if name.startswith("deepspeed") and name in StrategyRegistry:
        return DeepSpeedConsolidated(**{**StrategyRegistry[name]["init_params"], **options})
    if not options:
        return name
    if name not in StrategyRegistry:
        raise ConfigError(
            f"trainer.strategy_options needs a strategy name Lightning knows, not trainer.strategy="
            f"{name}: one of {', '.join(sorted(StrategyRegistry))}"
        )
    entry = StrategyRegistry[name]
    for key, value in options.items():
        if key.endswith("_policy") and isinstance(value, list):
            options[key] = {get_class(path) for path in value}
    return entry["strategy"](**{**entry["init_params"], **options})


PRECISIONS = ("auto", "32-true", "bf16-mixed", "16-mixed", "bf16-true", "16-true", "64-true", "32", "16", "bf16", "64")
"""trainer.precision's values: Lightning's (but Transformer Engine's), and auto (``resolve_precision``)."""
DURATION = re.compile(r"\d+:\d{1,2}:\d{1,2}:\d{1,2}")  # DD:HH:MM:SS, as Lightning parses it


def check_accelerator(cfg: DictConfig) -> None:
    """Refuse, in one line and before any data work, a trainer config that Lightning would refuse (an unknown
    strategy or precision, a malformed duration) or that this machine cannot run: a DeepSpeed strategy without
    DeepSpeed, GPUs it does not have (before Lightning does, at length)."""
    if cfg.strategy not in ("auto", FSDP2) and cfg.strategy not in StrategyRegistry:
        names = sorted(name for name in StrategyRegistry if "find_unused" not in name)
        raise ConfigError(
            f"trainer.strategy={cfg.strategy}: not a strategy Lightning knows; choose auto or one of "
            f"{', '.join(names)}, {FSDP2} (or trainer=ddp, fsdp, deepspeed)"
        )
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
    accelerator = str(cfg.accelerator).lower()
    if str(cfg.strategy).startswith(("fsdp", "deepspeed")) and cfg.strategy != FSDP2 and accelerator == "cpu":
        raise ConfigError(
            f"trainer.strategy={cfg.strategy} runs on GPUs only (Lightning's), not "
            "trainer.accelerator=cpu: use trainer=fsdp (FSDP2) or trainer=ddp with "
            "trainer.accelerator=cpu on CPUs"
        )
    fsdp2_precisions = ("auto", "32-true", "32", "bf16-mixed", "bf16", "bf16-true", "16-true")  # Lightning's, for FSDP2
    if cfg.strategy == FSDP2 and str(cfg.precision) not in fsdp2_precisions:
        raise ConfigError(
            f"trainer=fsdp (FSDP2) does not take trainer.precision={cfg.precision}: use bf16-mixed, "
            "bf16-true, 16-true or 32-true"
        )
    if str(cfg.strategy).startswith("deepspeed") and importlib.util.find_spec("deepspeed") is None:
        raise ConfigError(
            f"trainer.strategy={cfg.strategy} needs DeepSpeed, which is not installed: pip install 'gpt1[deepspeed]'"
        )
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
    """``compile=true``: compile ``module.model`` in place (``nn.Module.compile``), so that its ``state_dict``, and so
    the checkpoints, keep plain parameter names (no ``_orig_mod.``) that every gpt1 command loads; and the module's
    ``next_token_loss`` as one graph with it. Left eager, the tied head's (B T, V) logits and their fp32
    cross-entropy took a third of a compiled GPT-1 step on an H100 (experiments/results/benchmarks.md)."""
    if enabled:
        module.model.compile()
        module.next_token_loss = torch.compile(module.next_token_loss)
