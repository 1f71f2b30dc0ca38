"""Typed Hydra schemas of every gpt1 command, registered in Hydra's ConfigStore on import.

Each command's primary YAML (``conf/<command>.yaml``) lists its schema first in its defaults, so every config
group and command-line override is merged into a typed node: a misspelt key or a wrong type fails at start-up
with the offending key named. The ``model`` group's options are the presets of ``gpt1.model.PRESETS``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from gpt1.data.pretrain import DataConfig
from gpt1.model import PRESETS, GPTConfig
from gpt1.tokenizer import TokenizerConfig


class Schedule(str, Enum):
    """Learning-rate schedule after the linear warm-up."""

    cosine = "cosine"  # to 0 at the last step (pre-training, as in the paper)
    linear = "linear"  # to 0 at the last step (fine-tuning, as in the paper)
    constant = "constant"


@dataclass
class OptimConfig:
    """Adam with decoupled weight decay on matrices only, linear warm-up then decay (the paper's recipe)."""

    lr: float = 2.5e-4
    """Peak learning rate, reached at the end of the warm-up."""
    weight_decay: float = 0.01
    """Decoupled weight decay ("modified L2"), applied to weights with ndim > 1 only (not biases or gains)."""
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    """Adam's (beta1, beta2)."""
    eps: float = 1e-8
    """Adam's epsilon."""
    warmup_steps: int = 2000
    """Optimizer steps of linear warm-up from 0 to lr."""
    schedule: Schedule = Schedule.cosine
    """Decay after the warm-up, to 0 at trainer.max_steps (or at the end of trainer.max_epochs)."""


@dataclass
class TrainerConfig:
    """Arguments of ``lightning.Trainer`` (its docs give every detail); scale by choosing the ``trainer`` group."""

    accelerator: str = "auto"
    """cpu, gpu, or auto."""
    devices: Any = "auto"
    """How many devices per node (-1: all), or which ones."""
    strategy: str = "auto"
    """ddp, fsdp, deepspeed_stage_2, ... (auto: single device)."""
    num_nodes: int = 1
    """Nodes of a multi-node run (e.g. under SLURM)."""
    precision: str = "32-true"
    """32-true, bf16-mixed, 16-mixed, ..."""
    max_steps: int = -1
    """Optimizer updates to run (-1: bounded by max_epochs); the lr schedule decays to 0 at the end."""
    max_epochs: Optional[int] = None
    """Epochs of data.samples_per_epoch windows each, when max_steps is -1."""
    max_time: Optional[str] = None
    """Wall-clock limit, "DD:HH:MM:SS"."""
    gradient_clip_val: Optional[float] = 1.0
    """Clip the global gradient norm to this (the original code's max_grad_norm); None: no clipping."""
    accumulate_grad_batches: int = 1
    """Batches per optimizer update."""
    val_check_interval: Optional[Any] = None
    """Validate every this many training batches (int) or fraction of an epoch (float)."""
    check_val_every_n_epoch: Optional[int] = 1
    """Validate every this many epochs (None with an integer val_check_interval: count across epochs)."""
    limit_train_batches: Optional[Any] = None
    """Train on only this many batches (int) or fraction (float) of each epoch."""
    limit_val_batches: Optional[Any] = None
    """Validate on only this many batches (int) or fraction (float)."""
    num_sanity_val_steps: int = 2
    """Validation batches run before training, to catch errors early."""
    log_every_n_steps: int = 50
    """Log training metrics every this many updates."""
    enable_progress_bar: bool = True
    """Show a progress bar (turn off for log files)."""
    deterministic: bool = False
    """Force deterministic kernels (slower)."""
    fast_dev_run: Any = False
    """Run n batches of train/val/test as a smoke test (True: 1)."""
    overfit_batches: Any = 0.0
    """Train and validate on this many batches (int) or this fraction of them (float) only (debug=overfit).
    Typed Any: under a float schema `1` (one batch) would become 1.0 (every batch)."""


@dataclass
class WandbConfig:
    """Weights & Biases logging; mode=offline needs no account (sync later with `wandb sync`)."""

    enabled: bool = False
    """Log to W&B too (logger=wandb sets it)."""
    project: str = "gpt1"
    """W&B project."""
    entity: Optional[str] = None
    """W&B team or user (None: your default)."""
    name: Optional[str] = None
    """Run name (None: <task>-<run dir name>)."""
    mode: str = "online"
    """online, offline or disabled."""
    tags: list[str] = field(default_factory=list)
    """Tags to filter runs by."""


@dataclass
class LoggerConfig:
    """Where metrics go: local CSV and TensorBoard files by default, W&B on demand (logger=wandb)."""

    csv: bool = True
    tensorboard: bool = True
    wandb: WandbConfig = field(default_factory=WandbConfig)


@dataclass
class CheckpointConfig:
    """Periodic checkpoints under <run dir>/checkpoints, plus last.ckpt at every save and at the end."""

    every_n_steps: int = 1000
    """Save every this many optimizer steps."""
    keep_last: int = 3
    """How many periodic checkpoints to keep (-1: all)."""


@dataclass
class SamplesConfig:
    """Text sampled from the model during training, printed and logged, to watch it learn."""

    every_n_steps: int = 1000
    """Sample every this many optimizer steps, and once at the end of training (0: never)."""
    prompt: str = "the"
    """Text to continue (empty: the start token)."""
    max_new_tokens: int = 48
    """Tokens to sample."""
    temperature: float = 0.8
    """Softmax temperature; 0 decodes greedily."""
    top_k: Optional[int] = 40
    """Sample among the k most likely tokens only (None: all)."""


@dataclass
class CallbacksConfig:
    """What runs alongside training: checkpoints, text samples, throughput."""

    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    samples: SamplesConfig = field(default_factory=SamplesConfig)
    throughput: bool = True
    """Log tokens/s per device (train/device/items_per_sec) and, on GPUs with a known peak, MFU (train/device/mfu)."""


@dataclass
class PathsConfig:
    """Every path a run touches; relative paths are relative to the directory gpt1 is started from."""

    sample_data: str = MISSING
    """The sample data shipped beside the checkout (env GPT1_SAMPLE_DATA overrides)."""
    output_dir: str = MISSING
    """This run's directory (Hydra's run dir): logs, checkpoints, metrics.json."""
    cache_dir: str = MISSING
    """Tokenised corpora and trained tokenizers, shared across runs (env GPT1_CACHE_DIR overrides)."""


@dataclass
class PretrainConfig:
    """``gpt1 pretrain``: train the GPT-1 decoder with the LM objective on a corpus."""

    run_name: str = "pretrain"
    """Names the run directory: outputs/<run_name>/<time>."""
    seed: int = 1234
    """Seeds torch, numpy, python and the data order."""
    init_from: Optional[str] = None
    """Start from the weights and tokenizer of this gpt1 checkpoint (e.g. converted OpenAI weights)."""
    resume: Optional[str] = None
    """Continue an interrupted run: a checkpoint path, or "auto" for last.ckpt of this run directory."""
    model: GPTConfig = MISSING
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    callbacks: CallbacksConfig = field(default_factory=CallbacksConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)


@dataclass
class EvaluateConfig:
    """``gpt1 evaluate``: token perplexity of a checkpoint on a corpus (data.valid_files or a hub split)."""

    run_name: str = "evaluate"
    ckpt: str = MISSING
    """The gpt1 checkpoint to evaluate."""
    seed: int = 1234
    """Seeds everything (evaluation itself is deterministic)."""
    data: DataConfig = field(default_factory=DataConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)


@dataclass
class GenerateConfig:
    """``gpt1 generate``: sample continuations of a prompt from a checkpoint."""

    run_name: str = "generate"
    ckpt: str = MISSING
    """The gpt1 checkpoint to sample from."""
    prompt: str = ""
    """Text to continue; empty starts from the start token."""
    max_new_tokens: int = 100
    """Tokens to sample after the prompt (past model.n_ctx the context slides)."""
    temperature: float = 1.0
    """Softmax temperature; 0 decodes greedily."""
    top_k: Optional[int] = 40
    """Sample among the k most likely tokens only (None: all)."""
    num_samples: int = 1
    """Continuations to sample (one batch)."""
    seed: int = 1234
    """Seeds the sampling generator: the same seed gives the same text."""
    use_cache: bool = True
    """Decode incrementally with a KV cache (same tokens, faster)."""
    device: str = "auto"
    """cpu, cuda, or auto (cuda when available)."""
    paths: PathsConfig = field(default_factory=PathsConfig)


@dataclass
class ConvertConfig:
    """``gpt1 convert from-hf SRC DST`` / ``gpt1 convert to-hf SRC DST``: Hugging Face openai-gpt interop."""

    run_name: str = "convert"
    direction: str = MISSING
    """from-hf (HF directory -> gpt1 checkpoint) or to-hf (gpt1 checkpoint -> HF directory)."""
    src: str = MISSING
    """from-hf: an HF model directory; to-hf: a gpt1 checkpoint."""
    dst: str = MISSING
    """from-hf: the gpt1 checkpoint to write; to-hf: the HF directory to write."""
    tokenizer: Optional[str] = None
    """from-hf: tokenizer to attach when SRC has none (tokenizer.json, or a dir with vocab.json + merges.txt)."""
    paths: PathsConfig = field(default_factory=PathsConfig)


def default_sample_data() -> str:
    """``shared/data`` beside the checkout holding this package, else beside the current directory."""
    beside_checkout = Path(__file__).resolve().parents[2] / "shared" / "data"
    return str(beside_checkout if beside_checkout.is_dir() else Path.cwd().parent / "shared" / "data")


def register() -> None:
    """Register the schemas and model presets with Hydra (idempotent)."""
    if not OmegaConf.has_resolver("gpt1.default_sample_data"):
        OmegaConf.register_new_resolver("gpt1.default_sample_data", default_sample_data)
    cs = ConfigStore.instance()
    for name, schema in [
        ("pretrain_schema", PretrainConfig),
        ("evaluate_schema", EvaluateConfig),
        ("generate_schema", GenerateConfig),
        ("convert_schema", ConvertConfig),
    ]:
        cs.store(name=name, node=schema)
    for name, preset in PRESETS.items():
        cs.store(group="model", name=name, node=preset)


register()
