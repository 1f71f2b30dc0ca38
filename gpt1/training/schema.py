"""The training schemas: the optimizer (``OptimConfig``), Lightning's Trainer (``TrainerConfig``), the loggers
(``LoggerConfig``), the callbacks (``CallbacksConfig``) and model selection (``Selection``), as the ``optim``,
``trainer``, ``logger`` and ``callbacks`` groups of every training command fill them (``gpt1.app.config`` composes the
command schemas from them). Plain dataclasses: importing them imports neither Lightning nor Hydra."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional

from gpt1.core.errors import ranged


class Schedule(str, Enum):
    """Learning-rate schedule after the linear warm-up."""

    cosine = "cosine"  # to 0 at the last step (pre-training, as in the paper)
    linear = "linear"  # to 0 at the last step
    warmup_linear = "warmup_linear"  # the original's opt.py, fine-tuning's: a function of the fraction t / total
    constant = "constant"


class Selection(str, Enum):
    """Which weights a fine-tuning run ends with (``FinetuneConfig.model_selection``)."""

    best = "best"  # those of the best validation, as the original
    last = "last"  # those of the last update


class NonFinite(str, Enum):
    """What a NaN or inf training loss does."""

    stop = "stop"  # end the run with a message naming the step; the checkpoints already saved are left as they were
    skip = "skip"  # leave the weights (and the optimizer's moments) as they were for that update, warn, count it


class WandbMode(str, Enum):
    """Where W&B sends a run."""

    online = "online"
    offline = "offline"  # files under the run directory only, no account: `wandb sync` them later
    disabled = "disabled"


@dataclass
class OptimConfig:
    """Adam with decoupled weight decay on matrices only, linear warm-up then decay (the paper's recipe)."""

    lr: float = ranged(2.5e-4, ge=0)
    """Peak learning rate, reached at the end of the warm-up."""
    weight_decay: float = ranged(0.01, ge=0)
    """Decoupled weight decay ("modified L2"), applied to weights with ndim > 1 only (not biases or gains)."""
    betas: list[float] = ranged(factory=lambda: [0.9, 0.999], ge=0, lt=1)
    """Adam's (beta1, beta2)."""
    eps: float = ranged(1e-8, ge=0)
    """Adam's epsilon."""
    warmup_steps: int = ranged(2000, ge=0)
    """Optimizer steps of linear warm-up from 0 to lr."""
    warmup_fraction: Optional[float] = ranged(None, ge=0, le=1)
    """Warm up over this fraction of all the updates instead (fine-tuning: 0.002, the paper's 0.2%); when set it
    overrides warmup_steps."""
    schedule: Schedule = Schedule.cosine
    """Decay after the warm-up, to 0 at trainer.max_steps (or at the end of trainer.max_epochs)."""
    decay_steps: Optional[int] = ranged(None, ge=1)
    """Decay to 0 at this many updates instead (nanoGPT's lr_decay_iters): more than the run's, a run stopped early
    on the schedule of a longer one."""
    nonfinite: NonFinite = NonFinite.stop
    """A NaN or inf training loss: stop (before the weights take it: the run ends with one line naming the step,
    exit status 2, and last.ckpt stays as it was) or skip (that update is not applied, the step still counts and the
    schedule moves on; a warning per skipped update, counted in train/skipped_batches and metrics.json's
    skipped_batches)."""


@dataclass
class TrainerConfig:
    """Arguments of ``lightning.Trainer`` (its docs give every detail); scale by choosing the ``trainer`` group."""

    accelerator: str = "auto"
    """cpu, gpu, or auto."""
    devices: Any = "auto"
    """How many devices per node (-1: all), or which ones."""
    strategy: str = "auto"
    """ddp, fsdp, deepspeed_stage_2, ... (auto: single device)."""
    strategy_options: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the strategy's class (trainer=fsdp: sharding_strategy, state_dict_type, auto_wrap_policy
    as a list of module class paths); empty: Lightning's defaults for the strategy name."""
    num_nodes: int = ranged(1, ge=1)
    """Nodes of a multi-node run (e.g. under SLURM)."""
    precision: str = "32-true"
    """32-true, bf16-mixed, 16-mixed, ..., or auto: bf16-mixed where the device multiplies bf16 natively (a CUDA GPU
    with bf16, a CPU with AVX512-BF16 or AMX), else 32-true."""
    max_steps: int = ranged(-1, ge=-1, hint="-1: bounded by max_epochs")
    """Optimizer updates to run (-1: bounded by max_epochs); the lr schedule decays to 0 at the end."""
    max_epochs: Optional[int] = ranged(None, ge=-1, hint="-1: no limit")
    """Epochs of data.samples_per_epoch windows each, when max_steps is -1."""
    max_time: Optional[str] = None
    """Wall-clock limit, "DD:HH:MM:SS"."""
    gradient_clip_val: Optional[float] = ranged(1.0, ge=0, hint="0 or null: no clipping")
    """Clip the global gradient norm to this (the original code's max_grad_norm); 0 or None: no clipping."""
    accumulate_grad_batches: int = ranged(1, ge=1)
    """Batches per optimizer update."""
    val_check_interval: Optional[Any] = None
    """Validate every this many training batches (int, counted across epochs: an epoch may be shorter) or fraction
    of an epoch (float)."""
    check_val_every_n_epoch: Optional[int] = ranged(1, ge=1)
    """Validate every this many epochs; ignored (None) with an integer val_check_interval."""
    limit_train_batches: Optional[Any] = None
    """Train on only this many batches (int) or fraction (float) of each epoch."""
    limit_val_batches: Optional[Any] = None
    """Validate on only this many batches (int) or fraction (float)."""
    num_sanity_val_steps: int = ranged(2, ge=-1, hint="-1: every validation batch")
    """Validation batches run before training, to catch errors early."""
    log_every_n_steps: int = ranged(50, ge=1)
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
    project: Optional[str] = None
    """W&B project (None: $WANDB_PROJECT, else gpt1)."""
    entity: Optional[str] = None
    """W&B team or user (None: $WANDB_ENTITY, else your default)."""
    name: Optional[str] = None
    """Run name (None: the job's overrides in a multirun, else <task or run name>-<run dir name>)."""
    group: Optional[str] = None
    """Run group (None: the sweep directory in a multirun, so that a sweep's jobs group together; else none)."""
    mode: Optional[WandbMode] = None
    """online, offline (no account; `wandb sync` later) or disabled (None: $WANDB_MODE, else online)."""
    dir: Optional[str] = None
    """Where W&B writes its files, in a wandb/ folder (None: $WANDB_DIR, else the run directory)."""
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

    every_n_steps: int = ranged(1000, ge=0)
    """Save every this many optimizer steps."""
    keep_last: int = ranged(3, ge=-1, hint="-1: all")
    """How many periodic checkpoints to keep (-1: all)."""


@dataclass
class SamplesConfig:
    """Text sampled from the model during training, printed and logged, to watch it learn."""

    every_n_steps: int = ranged(1000, ge=0, hint="0: never")
    """Sample every this many optimizer steps, and once at the end of training (0: never)."""
    prompt: Optional[str] = "the"
    """Text to continue (empty: the eod token, as at the start of a document; None: the first words of the
    validation text, so that a corpus's samples start from its own words)."""
    max_new_tokens: int = ranged(48, ge=1)
    """Tokens to sample."""
    temperature: float = ranged(0.8, ge=0, hint="0: greedy")
    """Softmax temperature; 0 decodes greedily."""
    top_k: Optional[int] = ranged(40, ge=1, hint="null: all tokens")
    """Sample among the k most likely tokens only (None: all)."""


@dataclass
class CallbacksConfig:
    """What runs alongside training: checkpoints, text samples, throughput."""

    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    samples: SamplesConfig = field(default_factory=SamplesConfig)
    throughput: bool = True
    """Log tokens/s per device (train/device/items_per_sec) and, on GPUs with a known peak, MFU (train/device/mfu);
    padding is not counted."""
