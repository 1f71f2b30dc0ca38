"""Typed Hydra schemas of every gpt1 command (``gpt1.app.registration.register`` stores them). Each command's YAML
(``conf/<command>.yaml``) lists its schema first in its defaults, so a misspelt key or a wrong type, in a config
group or an override, fails at start-up naming the key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING

from gpt1.core.errors import ranged
from gpt1.data.data_config import DataConfig
from gpt1.model.lm_loss import LMLoss
from gpt1.tasks.spec import TaskConfig
from gpt1.text.tokenizer import TokenizerConfig
from gpt1.training.schema import (
    CallbacksConfig,
    LoggerConfig,
    OptimConfig,
    Schedule,
    Selection,
    TrainerConfig,
)


@dataclass
class PathsConfig:
    """Every path a run touches; relative paths are relative to the directory gpt1 is started from."""

    sample_data: str = MISSING
    """The sample data (novels, seven tasks): gpt1's own, unpacked once into cache_dir/sample_data
    (``gpt1.data.sample``); env GPT1_SAMPLE_DATA names a folder of your own instead."""
    output_dir: str = MISSING
    """This run's directory (Hydra's run dir): logs, checkpoints, metrics.json. Outside a ``gpt1 <command>`` run (a
    config composed in Python) the same layout, outputs/<run_name>/<time>."""
    cache_dir: str = MISSING
    """Tokenised corpora, trained tokenizers and the unpacked sample data, shared across runs (env GPT1_CACHE_DIR
    overrides)."""


@dataclass
class PretrainConfig:
    """``gpt1 pretrain``: train the GPT-1 decoder with the LM objective on a corpus."""

    run_name: str = "pretrain"
    """Names the run directory: outputs/<run_name>/<time>."""
    seed: int = 1234
    """Seeds torch, numpy, python and the data order."""
    optimized_metric: Optional[str] = "val/ppl"
    """What the job returns to a sweeper (``hparams_search=optuna`` optimises it): the number this key (or path:
    ``checkpoints[-1].accuracy``) of the command's metrics.json holds (``gpt1.app.objective``); a key the result lacks
    fails naming the ones it has. Pre-training's: the validation perplexity (minimised); gpt1 prepare's: null (no
    metric: the job returns its result)."""
    init_from: Optional[str] = None
    """Start from the weights and tokenizer of this gpt1 checkpoint (e.g. converted OpenAI weights)."""
    resume: Optional[str] = None
    """Continue an interrupted run: a checkpoint path, or "auto" for last.ckpt of this run directory (with
    hydra.run.dir=DIR and nothing else: the run in DIR, with the overrides it recorded)."""
    rerun: Optional[str] = None
    """Make the finished run in this directory again, from its record (its overrides, those given beside in their
    place), in a new run directory; then say whether its metrics.json came out equal to the last digit."""
    model: Any = MISSING
    """model=NAME (conf/model/NAME.yaml): a model type's config, GPT-1's (gpt1, small, tiny) or another's (lstm)."""
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
    lm_loss: LMLoss = LMLoss.chunked
    """How the LM loss over the tied head is computed: chunked (the logits in chunks of positions of at most 256 MiB,
    forward and backward: memory bounded whatever the batch) or whole (every position's logits at once, then torch's
    cross-entropy: the reference, equal within fp32 rounding; docs/faithfulness.md)."""


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
    """How embedding dropout draws its masks (``gpt1.model.decoder.GPTConfig.embd_dropout``): ``table``, the original's
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
    dropped (faster: experiments/results/benchmarks.md; its dropout masks are then the same for every choice). false:
    each choice decoded on its own, with its own masks, as the original. Evaluation always decodes it once (no dropout:
    the same states, so the same scores)."""
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
    optimized_metric: Optional[str] = "val/${task.metrics[0]}"
    """As ``PretrainConfig.optimized_metric``: the task's first metric on the validation split, of the selected
    weights (maximised)."""
    resume: Optional[str] = None
    """As ``PretrainConfig.resume``."""
    rerun: Optional[str] = None
    """As ``PretrainConfig.rerun``."""
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
    """As ``PretrainConfig.compile``."""
    lm_loss: LMLoss = LMLoss.chunked
    """As ``PretrainConfig.lm_loss``."""


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
    lm_loss: LMLoss = LMLoss.chunked
    """How perplexity's LM loss is computed: chunked or whole (as ``gpt1 pretrain``'s lm_loss)."""
    seed: int = 1234
    """Seeds everything (evaluation itself is deterministic)."""
    optimized_metric: Optional[str] = None
    """As ``PretrainConfig.optimized_metric``; None: the main metric of what it scored, which metrics.json's
    ``main_metric`` names (val/<the task's first metric>, or val/ppl)."""
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
    optimized_metric: Optional[str] = None
    """None: the job returns its texts (gpt1 generate has no metric)."""
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
    optimized_metric: Optional[str] = None
    """None: gpt1 convert has no metric."""
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
    optimized_metric: Optional[str] = "checkpoints[-1].${task.metrics[0]}"
    """As ``PretrainConfig.optimized_metric``: the last checkpoint's score of the task's first metric."""
    device: str = "auto"
    """cpu, cuda, or auto (cuda when available)."""
    paths: PathsConfig = field(default_factory=PathsConfig)
