"""Typed Hydra schemas of every gpt1 command, registered in Hydra's ConfigStore by ``register`` (the commands call it).

Each command's primary YAML (``conf/<command>.yaml``) lists its schema first in its defaults, so every config
group and command-line override is merged into a typed node: a misspelt key or a wrong type fails at start-up
with the offending key named. The ``model`` group's options are the presets of ``gpt1.model.PRESETS`` and, for
``gpt1 finetune``, ``checkpoint`` (the starting checkpoint's architecture) and ``lstm`` (the LSTM baseline).
"""

from __future__ import annotations

import dataclasses
import operator
import re
import time
import warnings
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import torch
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf

import gpt1
from gpt1.cluster.slurm import on_cpu
from gpt1.core.errors import ConfigError, ranged
from gpt1.data.data_config import DataConfig
from gpt1.model import PRESETS, GPTConfig
from gpt1.model.lstm import LSTMConfig
from gpt1.tasks.spec import TaskConfig
from gpt1.text.tokenizer import TokenizerConfig


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
    project: str = "gpt1"
    """W&B project."""
    entity: Optional[str] = None
    """W&B team or user (None: your default)."""
    name: Optional[str] = None
    """Run name (None: the job's overrides in a multirun, else <task or run name>-<run dir name>)."""
    group: Optional[str] = None
    """Run group (None: the sweep directory in a multirun, so that a sweep's jobs group together; else none)."""
    mode: WandbMode = WandbMode.online
    """online, offline (no account; `wandb sync` later) or disabled."""
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


@dataclass
class PathsConfig:
    """Every path a run touches; relative paths are relative to the directory gpt1 is started from."""

    sample_data: str = MISSING
    """The sample data shipped beside the checkout (env GPT1_SAMPLE_DATA overrides)."""
    output_dir: str = MISSING
    """This run's directory (Hydra's run dir): logs, checkpoints, metrics.json. Outside a ``gpt1 <command>`` run (a
    config composed in Python) the same layout, outputs/<run_name>/<time>."""
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
    compile: bool = False
    """Compile the model with torch.compile (in place: checkpoints keep plain parameter names); faster steps on a
    GPU after a first one that takes a while to compile."""


@dataclass
class CheckpointModelConfig:
    """``model=checkpoint``, the default of ``gpt1 finetune``: the architecture of the checkpoint fine-tuning starts
    from (init_from, or tokenizer_from with init_from=random); only its dropouts and its vocabulary padding can
    change."""

    embd_pdrop: Optional[float] = ranged(0.1, ge=0, lt=1)
    """Dropout on the embeddings: the recipe's 0.1, whatever the checkpoint was pre-trained with, as the original
    fine-tuning code (None: the checkpoint's)."""
    attn_pdrop: Optional[float] = ranged(0.1, ge=0, lt=1)
    """Dropout on the attention probabilities: 0.1 (None: the checkpoint's; transformers only)."""
    resid_pdrop: Optional[float] = ranged(0.1, ge=0, lt=1)
    """Dropout on the residual branches: 0.1 (None: the checkpoint's)."""
    embd_dropout: Optional[str] = "table"
    """How embedding dropout draws its masks (``gpt1.model.GPTConfig.embd_dropout``): ``table``, the original's
    (one mask per row of the token and position tables, the tied LM head reads the dropped table), or
    ``occurrence`` (per token occurrence, as Hugging Face's and pre-training's; None: the checkpoint's)."""
    pad_vocab_to_multiple: Optional[int] = ranged(None, ge=1)
    """Round the embedding table up to a multiple of this (None: the checkpoint's). 64 on GPUs, where the head of an
    odd vocabulary (OpenAI's 40,478 + 3 special tokens) runs on slow kernels; padded rows are never scored."""


@dataclass
class FinetuneConfig:
    """``gpt1 finetune task=NAME init_from=CKPT``: fine-tune a pre-trained decoder on a supervised task (paper
    section 3.2); the defaults are the paper's recipe (experiment=finetune)."""

    run_name: str = "finetune"
    """Names the run directory: outputs/<run_name>/<time> (finetune.yaml: finetune/<task>)."""
    task: TaskConfig = MISSING
    """The task: task=NAME reads conf/task/NAME.yaml, or DIR/task/NAME.yaml with --config-dir DIR."""
    init_from: str = MISSING
    """The gpt1 checkpoint to start from (gpt1 pretrain, gpt1 convert from-hf), or "random" for the
    no-pre-training ablation (needs tokenizer_from)."""
    tokenizer_from: Optional[str] = None
    """With init_from=random: the checkpoint whose tokenizer, and with model=checkpoint whose architecture, the
    randomly initialised model takes (use init_from's checkpoint for a like-for-like ablation)."""
    aux_lm_weight: float = ranged(0.5, ge=0)
    """The paper's lambda: weight of the auxiliary LM loss over the input tokens (0: task loss only)."""
    n_transfer: int = ranged(-1, ge=-1, hint="-1: all blocks")
    """How many of the checkpoint's blocks are transferred (embeddings always; -1: all); the others start fresh."""
    head_pdrop: float = ranged(0.1, ge=0, lt=1)
    """Dropout before the task head's linear layer."""
    share_context: bool = False
    """Multiple choice in training: decode the context an example's choices share once for all of them, padding
    dropped (faster: experiments/benchmarks.md; its dropout masks are then the same for every choice). false: each
    choice decoded on its own, with its own masks, as the original. Evaluation always decodes it once (no dropout: the
    same states, so the same scores)."""
    model_selection: Selection = Selection.best
    """Which weights give the test metrics, the predictions and the fine-tuned checkpoint: best, those of the
    validation (every epoch, trainer.check_val_every_n_epoch) that scored best on the task's main metric, written to
    checkpoints/best.ckpt, as the original; last, the weights training ended with. metrics.json: val/<metric> of the
    selected weights, val_last/<metric> of the last, selected_step."""
    predict: bool = False
    """Write test-split predictions to <run dir>/predictions/test.tsv (index<TAB>prediction, GLUE style)."""
    batch_size: int = ranged(32, ge=1)
    """Examples per optimizer update, over all devices (32 in the paper)."""
    micro_batch_size: Optional[int] = ranged(None, ge=1)
    """Examples per device per forward pass (None: batch_size / devices, one pass per update); gradients accumulate
    over batch_size / (micro_batch_size x devices) passes. Also the evaluation batch size (None: batch_size)."""
    num_workers: int = ranged(0, ge=0)
    """DataLoader worker processes."""
    seed: int = 1234
    """Seeds torch, numpy, python, the fresh weights and the data order."""
    resume: Optional[str] = None
    """Continue an interrupted run: a checkpoint path, or "auto" for last.ckpt of this run directory."""
    model: Any = MISSING
    """model=checkpoint (default: the checkpoint's architecture, dropouts overridable), model=lstm (the paper's
    LSTM baseline, taking the checkpoint's token embeddings), or a preset with init_from=random."""
    optim: OptimConfig = field(
        default_factory=lambda: OptimConfig(lr=6.25e-5, warmup_fraction=0.002, schedule=Schedule.warmup_linear)
    )
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    callbacks: CallbacksConfig = field(default_factory=CallbacksConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    compile: bool = False
    """Compile the model with torch.compile (in place: checkpoints keep plain parameter names)."""


@dataclass
class EvaluateConfig:
    """``gpt1 evaluate``: a fine-tuned checkpoint's task metrics on its task's validation (and labelled test)
    splits, or a language model's token perplexity on a corpus (data.valid_files or a hub split)."""

    run_name: str = "evaluate"
    ckpt: str = MISSING
    """The gpt1 checkpoint to evaluate."""
    task: Optional[TaskConfig] = None
    """The task to score a fine-tuned checkpoint on (task=NAME; None: the task the checkpoint carries), in
    batches of data.batch_size examples. A checkpoint without a task is scored by perplexity on data."""
    perplexity: bool = False
    """Score the language model by perplexity on data even when the checkpoint carries a task (fine-tuned)."""
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
    """Text to continue; empty starts from the eod token (as a document would)."""
    max_new_tokens: int = ranged(100, ge=1)
    """Tokens to sample after the prompt (past model.n_ctx the context slides)."""
    temperature: float = ranged(1.0, ge=0, hint="0: greedy")
    """Softmax temperature; 0 decodes greedily."""
    top_k: Optional[int] = ranged(40, ge=1, hint="null: all tokens")
    """Sample among the k most likely tokens only (None: all)."""
    num_samples: int = ranged(1, ge=1)
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


@dataclass
class ZeroshotCommandConfig:
    """``gpt1 zeroshot ckpts=[A,B,...] task=NAME``: the paper's zero-shot heuristics (section 5) over checkpoints."""

    run_name: str = "zeroshot"
    """Names the run directory: outputs/<run_name>/<time> (zeroshot.yaml: zeroshot/<task>)."""
    ckpts: list[str] = MISSING
    """The gpt1 checkpoints to score, in order: paths or globs (a glob's matches sorted, e.g. every
    run/checkpoints/step*.ckpt of a pre-training run)."""
    task: TaskConfig = MISSING
    """The task: task=NAME reads conf/task/NAME.yaml; its zeroshot block picks the heuristic."""
    batch_size: int = ranged(32, ge=1)
    """Sequences per forward pass."""
    seed: int = 1234
    """Draws the training examples that fit mean_logprob's threshold (at most task.zeroshot.max_fit_examples)."""
    device: str = "auto"
    """cpu, cuda, or auto (cuda when available)."""
    paths: PathsConfig = field(default_factory=PathsConfig)


def default_sample_data() -> str:
    """``shared/data`` beside the checkout holding this package, else beside the current directory."""
    beside_checkout = Path(gpt1.__file__).resolve().parents[2] / "shared" / "data"  # gpt1/__init__.py
    return str(beside_checkout if beside_checkout.is_dir() else Path.cwd().parent / "shared" / "data")


def resolve_device(name: str, key: str = "device") -> torch.device:
    """The device setting ``key`` (gpt1 generate's and zeroshot's ``device``, gpt1 bench's ``--device``) as a torch
    device: auto is the GPU where torch sees one, else the CPU; ``ConfigError`` for a device this machine does not
    have, before any checkpoint is read or any timing taken."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name != "cpu" and not re.fullmatch(r"cuda(:\d+)?", name):
        raise ConfigError(f"{key}={name}: choose cpu, cuda, cuda:N or auto")
    device = torch.device(name)
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        seen = f"{torch.cuda.device_count()} CUDA GPUs are" if torch.cuda.is_available() else "no CUDA GPU is"
        raise ConfigError(f"{key}={name}: {seen} visible here; use {key}=cpu (or auto)")
    return device


def group_choice(group: str) -> Optional[str]:
    """The option chosen for a config group in this Hydra run (task=sentiment: "sentiment"); None outside a run
    (e.g. a config composed by ``hydra.compose``)."""
    return HydraConfig.get().runtime.choices.get(group) if HydraConfig.initialized() else None


def task_name(cfg: DictConfig) -> str:
    """The name of ``cfg.task`` in logs and metrics.json: ``task.name``, else the task group's option (task=sentiment:
    "sentiment", from the running Hydra job or the config's own hydra node), else the folder of its training files
    (a config composed in Python without Hydra's node), else its hub dataset's config or name."""
    task = cfg.task
    if task.name:
        return task.name
    chosen = group_choice("task") or OmegaConf.select(cfg, "hydra.runtime.choices.task", default=None)
    if chosen:
        return chosen
    if task.data_files:  # e.g. {train: .../tasks/sentiment/train.jsonl}: sentiment
        first = next(iter(task.data_files.values()))
        first = first if isinstance(first, str) else first[0]
        return Path(first).parent.name or Path(first).stem
    return task.dataset_config or str(task.dataset).rsplit("/", 1)[-1]


def default_output_dir(run_name: str) -> str:
    """``paths.output_dir``: Hydra's run directory in a ``gpt1 <command>`` run; outside one (a config composed in
    Python) the same layout, outputs/<run_name>/<time> (resolved once per config: the resolver is cached)."""
    running = OmegaConf.select(HydraConfig.get(), "runtime.output_dir") if HydraConfig.initialized() else None
    return running or str(Path("outputs") / run_name / time.strftime("%Y-%m-%d_%H-%M-%S"))


def _on_sample_books(root: DictConfig) -> bool:
    """Whether a pre-training config trains on the sample books (the quickstart's corpus)."""
    books = str(Path(root.paths.sample_data) / "books") + "/"
    return root.data.hf_dataset is None and all(str(g).startswith(books) for g in root.data.train_files or [None])


def corpus_name(data: Any) -> str:
    """A corpus's name for its run directory: a hub dataset's config or name, else the folder of its first training
    glob when the glob picks files in it (corpus/*.txt: corpus), else that file's name (docs.jsonl: docs)."""
    if data.hf_dataset:
        return data.hf_config or str(data.hf_dataset).rsplit("/", 1)[-1]
    globs = [data.train_files] if isinstance(data.train_files, str) else list(data.train_files or [])
    if not globs:
        return "corpus"
    path = Path(str(globs[0]))
    named = path.parent if re.search(r"[*?\[]", path.name) else path.with_suffix("")
    return named.name or "corpus"


def _pretrain_run_name(quickstart: str, *, _root_: DictConfig) -> str:
    """experiment=quickstart's run_name: ``quickstart`` on the sample books, pretrain/<corpus name> on another
    corpus (data=files ...), so that such runs do not land among the quickstart's."""
    return quickstart if _on_sample_books(_root_) else f"pretrain/{corpus_name(_root_.data)}"


def _sample_prompt(books: str, *, _root_: DictConfig) -> Optional[str]:
    """experiment=quickstart's sample prompt: ``books`` on the sample books, else None (the first words of the
    corpus's validation text)."""
    return books if _on_sample_books(_root_) else None


def _choice(group: str, *, _root_: DictConfig) -> str:
    """The option chosen for ``group``, from the config's own hydra node (which Hydra's launchers see) or the
    running job's; else (a config composed without Hydra's node) the task's name from its data (``task_name``), or
    the group's name."""
    chosen = OmegaConf.select(_root_, f"hydra.runtime.choices.{group}", default=None) or group_choice(group)
    if chosen is None and group == "task" and OmegaConf.select(_root_, "task", default=None) is not None:
        return task_name(_root_)
    return chosen or group


def register() -> None:
    """Register the schemas, the model presets and the resolvers with Hydra, and silence Hydra's note on the launcher
    schemas (idempotent). Every command calls it before Hydra composes its config; so does a Python user composing one
    (``hydra.compose``)."""
    if not OmegaConf.has_resolver("gpt1.default_sample_data"):
        OmegaConf.register_new_resolver("gpt1.default_sample_data", default_sample_data)
    if not OmegaConf.has_resolver("gpt1.choice"):  # ${gpt1.choice:task}: the group's option, else the group's name
        OmegaConf.register_new_resolver("gpt1.choice", _choice)
    if not OmegaConf.has_resolver("gpt1.output_dir"):  # ${gpt1.output_dir:${run_name}}: a run's directory
        OmegaConf.register_new_resolver("gpt1.output_dir", default_output_dir, use_cache=True)
    if not OmegaConf.has_resolver("gpt1.pretrain_run_name"):  # quickstart, or pretrain/<corpus> on another corpus
        OmegaConf.register_new_resolver("gpt1.pretrain_run_name", _pretrain_run_name)
    if not OmegaConf.has_resolver("gpt1.sample_prompt"):  # the quickstart's prompt, or None on another corpus
        OmegaConf.register_new_resolver("gpt1.sample_prompt", _sample_prompt)
    if not OmegaConf.has_resolver("gpt1.on_cpu"):  # ${gpt1.on_cpu:${trainer.accelerator},A,B} (the SLURM launcher)
        OmegaConf.register_new_resolver("gpt1.on_cpu", on_cpu)
    cs = ConfigStore.instance()
    for name, schema in [
        ("pretrain_schema", PretrainConfig),
        ("finetune_schema", FinetuneConfig),
        ("evaluate_schema", EvaluateConfig),
        ("generate_schema", GenerateConfig),
        ("convert_schema", ConvertConfig),
        ("zeroshot_schema", ZeroshotCommandConfig),
    ]:
        cs.store(name=name, node=schema)
    for name, preset in PRESETS.items():
        cs.store(group="model", name=name, node=preset)
    cs.store(group="model", name="lstm", node=LSTMConfig)  # gpt1 finetune only, as model=checkpoint
    cs.store(group="model", name="checkpoint", node=CheckpointModelConfig)
    # conf/hydra/launcher/submitit_{slurm,local}.yaml are typed by the launcher plugin's schemas of the same names, by
    # Hydra's (deprecated, still kept) automatic schema matching: a defaults list cannot name them, the plugin stores
    # them anew at every start.
    warnings.filterwarnings("ignore", message=r"\s*'hydra/launcher/submitit_\w+' is validated against ConfigStore")


_BOUNDS = {"ge": (operator.ge, ">="), "gt": (operator.gt, ">"), "lt": (operator.lt, "<"), "le": (operator.le, "<=")}


def check_ranges(cfg: DictConfig, prefix: str = "") -> None:
    """Refuse a value outside its schema field's ``ranged`` bounds, in ``cfg`` and every config below it: a
    ``ConfigError`` naming the key. Every command's entry function (``gpt1.commands.pretrain.train``, ...) calls it
    first, so that a bad value fails at start-up rather than when it is first used (after a tokenizer is trained, a
    corpus packed, a model built), from the command line and from Python alike."""
    schema = OmegaConf.get_type(cfg)
    fields = {f.name: f.metadata for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else {}
    for key in cfg:
        node = cfg._get_node(key)
        if isinstance(node, DictConfig):
            check_ranges(node, f"{prefix}{key}.")
        elif "bounds" in fields.get(key, {}) and not OmegaConf.is_missing(cfg, key) and cfg[key] is not None:
            value, bounds = cfg[key], fields[key]["bounds"]
            for v in value if isinstance(value, ListConfig) else [value]:
                if not all(_BOUNDS[op][0](v, bound) for op, bound in bounds.items()):
                    rule = " and ".join(f"{_BOUNDS[op][1]} {bound}" for op, bound in bounds.items())
                    hint = f" ({fields[key]['hint']})" if fields[key]["hint"] else ""
                    raise ConfigError(f"{prefix}{key}={value}: out of range; choose a value {rule}{hint}")
