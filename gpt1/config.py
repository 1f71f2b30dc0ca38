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
    """Arguments of ``lightning.Trainer`` (see its docs); scale by choosing the ``trainer`` group, not by code."""

    accelerator: str = "auto"
    devices: Any = "auto"
    strategy: str = "auto"
    num_nodes: int = 1
    precision: str = "32-true"
    max_steps: int = -1
    max_epochs: Optional[int] = None
    max_time: Optional[str] = None
    gradient_clip_val: Optional[float] = 1.0
    accumulate_grad_batches: int = 1
    val_check_interval: Optional[Any] = None
    check_val_every_n_epoch: Optional[int] = 1
    limit_train_batches: Optional[Any] = None
    limit_val_batches: Optional[Any] = None
    num_sanity_val_steps: int = 2
    log_every_n_steps: int = 50
    enable_progress_bar: bool = True
    deterministic: bool = False
    fast_dev_run: Any = False
    overfit_batches: float = 0.0


@dataclass
class WandbConfig:
    """Weights & Biases logging; mode=offline needs no account (sync later with `wandb sync`)."""

    enabled: bool = False
    project: str = "gpt1"
    entity: Optional[str] = None
    name: Optional[str] = None
    mode: str = "online"
    """online, offline or disabled."""
    tags: list[str] = field(default_factory=list)


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
    max_new_tokens: int = 48
    temperature: float = 0.8
    top_k: Optional[int] = 40


@dataclass
class CallbacksConfig:
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

    task_name: str = "pretrain"
    """Names the run directory under outputs/."""
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

    task_name: str = "evaluate"
    ckpt: str = MISSING
    """The gpt1 checkpoint to evaluate."""
    seed: int = 1234
    data: DataConfig = field(default_factory=DataConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)


@dataclass
class GenerateConfig:
    """``gpt1 generate``: sample continuations of a prompt from a checkpoint."""

    task_name: str = "generate"
    ckpt: str = MISSING
    """The gpt1 checkpoint to sample from."""
    prompt: str = ""
    """Text to continue; empty starts from the start token."""
    max_new_tokens: int = 100
    temperature: float = 1.0
    """Softmax temperature; 0 decodes greedily."""
    top_k: Optional[int] = 40
    """Sample among the k most likely tokens only (None: all)."""
    num_samples: int = 1
    seed: int = 1234
    use_cache: bool = True
    """Decode incrementally with a KV cache (same tokens, faster)."""
    device: str = "auto"
    """cpu, cuda, or auto (cuda when available)."""
    paths: PathsConfig = field(default_factory=PathsConfig)


@dataclass
class ConvertConfig:
    """``gpt1 convert from-hf SRC DST`` / ``gpt1 convert to-hf SRC DST``: Hugging Face openai-gpt interop."""

    task_name: str = "convert"
    direction: str = MISSING
    """from-hf (HF directory -> gpt1 checkpoint) or to-hf (gpt1 checkpoint -> HF directory)."""
    src: str = MISSING
    dst: str = MISSING
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
