"""Plumbing shared by the gpt1 commands: the Trainer, its loggers, resume, the metrics.json of a run, and the
scoring of a fine-tuned model on its task (``gpt1 finetune``, ``gpt1 evaluate``).

What a run prints is what a user needs: ``quiet_library_noise`` (called by ``build_trainer``) is the one place that
silences the library output that says nothing to them.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelSummary, ProgressBar, RichModelSummary, RichProgressBar
from lightning.pytorch.callbacks.progress.rich_progress import _RICH_AVAILABLE
from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger, WandbLogger
from lightning.pytorch.strategies import Strategy, StrategyRegistry
from lightning.pytorch.utilities.model_summary import get_human_readable_count
from lightning.pytorch.utilities.model_summary.model_summary import _format_summary_table
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from gpt1.callbacks import AtomicCheckpointIO
from gpt1.checkpoint import read_checkpoint, state_mismatch
from gpt1.config import LoggerConfig, WandbConfig, WandbMode, group_choice
from gpt1.data.tasks import Collate, TaskConfig, TaskDataModule
from gpt1.errors import CheckpointError, ConfigError
from gpt1.io import atomic_file
from gpt1.module import GPT1Module, TaskModule, build_metric
from gpt1.slurm import slurm_environment


def build_loggers(cfg: LoggerConfig, output_dir: Path, run_name: str) -> list[Logger]:
    """CSV and TensorBoard files under ``output_dir``, and W&B if enabled."""
    loggers: list[Logger] = []
    if cfg.csv:
        loggers.append(CSVLogger(output_dir, name="csv", version=""))
    if cfg.tensorboard:
        loggers.append(TensorBoardLogger(output_dir, name="tensorboard", version="", default_hp_metric=False))
    if cfg.wandb.enabled:
        w = cfg.wandb
        group, name = wandb_group_and_name(w, run_name)
        loggers.append(
            WandbLogger(
                project=w.project, entity=w.entity, group=group, name=name, save_dir=str(output_dir),
                mode=WandbMode(w.mode).value, tags=list(w.tags),
            )
        )
    return loggers


def wandb_group_and_name(cfg: WandbConfig, run_name: str) -> tuple[Optional[str], str]:
    """This job's W&B group and run name: in a multirun the sweep directory and the job's overrides, else no
    group and ``run_name``; ``logger.wandb.group`` and ``logger.wandb.name`` win over both."""
    group, name = None, run_name
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        hydra = HydraConfig.get()
        # The sweep directory from the job's own directory (<sweep dir>/<subdir>), as every launcher made it.
        sweep = Path(hydra.runtime.output_dir).parents[len(Path(hydra.sweep.subdir).parts) - 1]
        group = os.path.relpath(sweep, hydra.runtime.cwd) if sweep.is_relative_to(hydra.runtime.cwd) else str(sweep)
        group = group[-128:]  # W&B's limit on a group's length
        parser = OverridesParser.create()
        swept = _swept_keys(parser, hydra, sweep)
        mine = [o.input_line for o in parser.parse_overrides(list(hydra.overrides.task)) if o.key_or_group in swept]
        name = ",".join(mine) or hydra.job.override_dirname or f"job {hydra.job.num}"
    return cfg.group or group, cfg.name or name


def _swept_keys(parser: OverridesParser, hydra: DictConfig, sweep: Path) -> set[str]:
    """The keys a multirun sweeps: its sweeper's params (an experiment's) and the command line's sweeps, as the
    sweep directory's multirun.yaml records them (a job's own overrides hold one value each)."""
    keys = set((hydra.sweeper.get("params") or {}).keys())
    saved = sweep / "multirun.yaml"
    if saved.is_file():
        command_line = parser.parse_overrides(list(OmegaConf.load(saved).hydra.overrides.task))
        keys |= {o.key_or_group for o in command_line if o.is_sweep_override()}
    return keys


@contextmanager
def wandb_job() -> Iterator[None]:
    """Finish the process's W&B run when the job ends, failed (exit code 1) or not: the next job of a multirun,
    in the same process, then starts a run of its own (``WandbLogger`` reuses a run still open)."""
    try:
        yield
    except BaseException as e:
        _finish_wandb(e.code if isinstance(e, SystemExit) and isinstance(e.code, int) else 1)
        raise
    _finish_wandb(0)


def _finish_wandb(exit_code: int) -> None:
    if "wandb" in sys.modules:  # a run without logger=wandb never imports it
        import wandb

        if wandb.run is not None:
            wandb.finish(exit_code=exit_code)


def log_summary(
    loggers: Sequence[Logger], metrics: dict[str, Any], table: Optional[tuple[str, list[str], list[list[Any]]]] = None
) -> None:
    """Give the W&B run the job's final metrics (those of metrics.json) as its summary, and a table (key, columns,
    rows) such as ``sample_predictions`` returns. Call on global rank zero."""
    for logger in loggers:
        if isinstance(logger, WandbLogger):
            if table is not None:
                key, columns, rows = table
                logger.log_table(key, columns=columns, data=rows)
            logger.experiment.summary.update(metrics)


def build_trainer(
    cfg: DictConfig, output_dir: Path, loggers: list[Logger] | None = None, callbacks: list[Callback] | None = None
) -> L.Trainer:
    """A Lightning Trainer as ``cfg`` (a ``TrainerConfig`` node) says, under ``output_dir``, atomic checkpoints.

    An integer ``val_check_interval`` counts training batches across epochs (``check_val_every_n_epoch`` None), so
    an epoch shorter than the interval (a small corpus) is no error. The model summary and the progress bar are
    Lightning's, without what says nothing (a FLOPs count of 0, "Epoch 0/-2" in a run bounded by max_steps).
    """
    check_accelerator(cfg)
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
    bar = args.get("enable_progress_bar", True) and not any(isinstance(c, ProgressBar) for c in callbacks)
    if bar and _RICH_AVAILABLE:  # (without rich, Lightning's tqdm bar, which shows no max_epochs)
        callbacks.append(ProgressBarWithoutNegativeEpochs())
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
    else:  # (torch's own probes of the CPU's instruction sets)
        probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
        native = any(getattr(torch.cpu, probe, lambda: False)() for probe in probes)
    return "bf16-mixed" if native else "32-true"


def build_strategy(name: str, options: dict[str, Any]) -> str | Strategy:
    """Lightning's strategy ``name`` (ddp, fsdp, deepspeed_stage_2, ...) as is, or with ``options`` its class built
    with them as keyword arguments; a ``*_policy`` option given as a list of class paths (FSDP's auto_wrap_policy)
    becomes the set of those classes."""
    if not options:
        return name
    if name not in StrategyRegistry:
        raise ConfigError(f"trainer.strategy_options needs a strategy name Lightning knows, not trainer.strategy="
                          f"{name}: one of {', '.join(sorted(StrategyRegistry))}")
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
    if cfg.strategy != "auto" and cfg.strategy not in StrategyRegistry:
        names = sorted(name for name in StrategyRegistry if "find_unused" not in name)
        raise ConfigError(f"trainer.strategy={cfg.strategy}: not a strategy Lightning knows; choose auto or one of "
                          f"{', '.join(names)} (or trainer=ddp, fsdp, deepspeed)")
    if str(cfg.precision) not in PRECISIONS:
        raise ConfigError(f"trainer.precision={cfg.precision}: choose one of {', '.join(PRECISIONS)}")
    for key in ("max_time", "val_check_interval"):
        if isinstance(cfg[key], str) and not DURATION.fullmatch(cfg[key]):
            raise ConfigError(f"trainer.{key}={cfg[key]}: give a duration as DD:HH:MM:SS (e.g. 00:12:00:00)"
                              + (", or a number of batches (int) or a fraction of an epoch (float)"
                                 if key == "val_check_interval" else ""))
    if str(cfg.strategy).startswith("deepspeed") and importlib.util.find_spec("deepspeed") is None:
        raise ConfigError(f"trainer.strategy={cfg.strategy} needs DeepSpeed, which is not installed: "
                          "pip install 'gpt1[deepspeed]'")
    accelerator = str(cfg.accelerator).lower()
    if str(cfg.strategy).startswith(("fsdp", "deepspeed")) and accelerator == "cpu":
        raise ConfigError(f"trainer.strategy={cfg.strategy} runs on GPUs only (Lightning's), not "
                          "trainer.accelerator=cpu: use trainer=ddp trainer.accelerator=cpu on CPUs")
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
        raise ConfigError(f"trainer.devices={devices}, but {visible} CUDA GPU{'s are' if visible > 1 else ' is'} "
                          f"visible: use trainer.devices={visible} (or -1: all of them)")


class SummaryWithoutZeroFlops(ModelSummary):
    """Lightning's model summary (rich when rich is installed), without the FLOPs column and total when they are 0
    (they are unless the module has an ``example_input_array``; ours have none)."""

    @staticmethod
    def summarize(
        summary_data: list[tuple[str, list[str]]],
        total_parameters: int,
        trainable_parameters: int,
        model_size: float,
        total_training_modes: dict[str, int],
        total_flops: int,
        **summarize_kwargs: Any,
    ) -> None:
        if total_flops:
            (RichModelSummary if _RICH_AVAILABLE else ModelSummary).summarize(
                summary_data, total_parameters, trainable_parameters, model_size, total_training_modes, total_flops,
                **summarize_kwargs,
            )
            return
        columns = [(name, values) for name, values in summary_data if name != "FLOPs"]
        if not _RICH_AVAILABLE:  # Lightning's plain table, less its last line (Total Flops)
            table = _format_summary_table(
                total_parameters, trainable_parameters, model_size, total_training_modes, total_flops, *columns
            )
            logging.getLogger("lightning.pytorch.callbacks.model_summary").info("\n" + table.rsplit("\n", 1)[0])
            return
        from rich import get_console
        from rich.table import Table

        table = Table(header_style=summarize_kwargs.get("header_style", "bold magenta"))
        for name, _ in columns:
            table.add_column(name, style="dim" if name == " " else None,
                             justify="right" if name.startswith("Params") else "left", no_wrap=name == "Name")
        for row in zip(*(values for _, values in columns)):
            table.add_row(*row)
        grid = Table.grid(expand=True)
        grid.add_column()
        for label, value in [
            ("Trainable params", get_human_readable_count(int(trainable_parameters))),
            ("Non-trainable params", get_human_readable_count(int(total_parameters - trainable_parameters))),
            ("Total params", get_human_readable_count(int(total_parameters))),
            ("Total estimated model params size (MB)", f"{model_size:,.3f}"),
            ("Modules in train mode", total_training_modes["train"]),
            ("Modules in eval mode", total_training_modes["eval"]),
        ]:
            grid.add_row(f"[bold]{label}[/]: {value}")
        console = get_console()
        console.print(table)
        console.print(grid)


class ProgressBarWithoutNegativeEpochs(RichProgressBar):
    """Lightning's rich progress bar, "Epoch 3" rather than "Epoch 3/-2" when no max_epochs bounds the run."""

    def _get_train_description(self, current_epoch: int) -> str:
        description = super()._get_train_description(current_epoch)
        max_epochs = self.trainer.max_epochs
        if max_epochs is not None and max_epochs < 0:
            description = description.replace(f"Epoch {current_epoch}/{max_epochs - 1}", f"Epoch {current_epoch}")
        return description


_NOISE_MESSAGES = {
    # Lightning's advertisements
    "lightning.pytorch.utilities.rank_zero": r"💡 Tip: |Loading `train_dataloader` to estimate number of stepping",
    "lightning.fabric.utilities.rank_zero": r"💡 Tip: ",
    "lightning_utilities.core.rank_zero": r"💡 Tip: ",
    # trainer.save_checkpoint without weights_only: the default (a full checkpoint) is what we want
    "lightning.pytorch.trainer.connectors.checkpoint_connector": r"`weights_only` was not set, defaulting to `False`",
}
"""Logger -> a regex of the messages it logs that say nothing to a user."""
_NOISE_WARNINGS = [
    # Lightning 2.6 on torch >= 2.10 (lightning/pytorch/utilities/_pytree.py): its own use of a torch API
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated", FutureWarning),
    # an epoch of fewer batches than log_every_n_steps (a small corpus): Lightning counts the logging interval across
    # epochs, so the metrics are logged all the same
    (r"The number of training batches \(\d+\) is smaller than the logging interval", UserWarning),
    # GPT1Module counts a batch's real tokens in on_before_batch_transfer, for any data module, a user's too: that the
    # module's hook runs, not the data module's, is the intent
    (r"You have overridden `on_before_batch_transfer` in `LightningModule` but have passed in a", UserWarning),
    # bf16-mixed keeps fp32 weights: the summary's size at 32 bits, which this warning calls inaccurate, is right
    (r"Precision \S+ is not supported by the model summary", UserWarning),
    # debug=overfit asks for the same batches every epoch: Lightning turning the loaders' shuffling (and evaluation's
    # longest-first order) off is what was asked for
    (r"You requested to overfit but enabled \w+ dataloader shuffling", UserWarning),
]
"""(message regex, category) of the warnings that say nothing to a user."""


class _DropMessages(logging.Filter):
    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.match(record.getMessage())


def quiet_library_noise() -> None:
    """Silence the library output that says nothing to a user (``_NOISE_MESSAGES``, ``_NOISE_WARNINGS``), and only
    that: every other message and warning still shows. Idempotent."""
    for name, pattern in _NOISE_MESSAGES.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropMessages) for f in logger.filters):
            logger.addFilter(_DropMessages(pattern))
    for message, category in _NOISE_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)


def device_batch_size(batch_size: int, world_size: int, accumulate: int) -> int:
    """Windows per device per forward pass such that an update sees ``batch_size`` (data.batch_size, global) over
    all devices and accumulated batches."""
    per_window = world_size * accumulate
    if batch_size % per_window:
        raise ConfigError(
            f"data.batch_size={batch_size} (windows per update, over all devices) is not a multiple of devices x "
            f"trainer.accumulate_grad_batches = {world_size} x {accumulate}: choose a batch size that is"
        )
    return batch_size // per_window


def compile_model(module: L.LightningModule, enabled: bool) -> None:
    """``compile=true``: compile ``module.model`` in place (``nn.Module.compile``), so that its ``state_dict``, and so
    the checkpoints, keep plain parameter names (no ``_orig_mod.``) that every gpt1 command loads; and the module's
    ``next_token_loss`` as one graph with it. Left eager, the tied head's (B T, V) logits and their fp32
    cross-entropy took a third of a compiled GPT-1 step on an H100 (experiments/benchmarks.md)."""
    if enabled:
        module.model.compile()
        module.next_token_loss = torch.compile(module.next_token_loss)


def resolve_resume(resume: str | None, output_dir: Path, module: Optional[L.LightningModule] = None) -> str | None:
    """The checkpoint to resume from: a path, or "auto" for this run directory's last.ckpt when there is one.

    The checkpoint is checked before Lightning reads it: readable, a gpt1 training checkpoint (weights and training
    state), and, given the ``module`` about to train, of its parameters and shapes and its tokenizer; a
    ``CheckpointError`` that names it otherwise.
    """
    if resume is None:
        return None
    if resume == "auto":
        last = output_dir / "checkpoints" / "last.ckpt"
        if not last.is_file():
            return None
        path, resume = last, f"auto ({last})"
    else:
        path = Path(resume)
        if not path.is_file():
            raise ConfigError(f"resume={resume}: no such checkpoint (give a .ckpt path, or resume=auto)")
    raw = read_checkpoint(path, mmap=True)
    if not isinstance(raw, dict) or not isinstance(raw.get("gpt1"), dict) or "state_dict" not in raw:
        raise CheckpointError(f"resume={resume} is not a gpt1 checkpoint: give a checkpoint of a gpt1 run "
                              "(<run dir>/checkpoints/last.ckpt)")
    if "loops" not in raw or "optimizer_states" not in raw:
        raise CheckpointError(f"resume={resume} holds weights but no training state (it was not saved by a "
                              f"training run): start from its weights with init_from={path} instead")
    if module is not None:
        ours = {k: v for k, v in module.state_dict().items() if k.startswith(("model.", "heads."))}
        theirs = {k: v for k, v in raw["state_dict"].items() if k.startswith(("model.", "heads."))}
        misfit = state_mismatch(theirs, ours)
        tokenizer = getattr(module, "tokenizer", None)
        if misfit is None and tokenizer is not None and raw["gpt1"].get("tokenizer") != tokenizer.to_str():
            misfit = "its tokenizer differs from this run's"
        if misfit:
            raise CheckpointError(
                f"resume={resume} does not fit this run's model ({misfit}): resume with the settings it was "
                "saved with (model, tokenizer, data: its run directory's .hydra/config.yaml), or start a new run"
            )
    return str(path)


def log_config(trainer: L.Trainer, cfg: DictConfig) -> None:
    """Record the whole resolved config with every logger (hparams.yaml, TensorBoard, W&B)."""
    for logger in trainer.loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))


def write_metrics(output_dir: Path, metrics: dict[str, Any]) -> Path:
    """Write ``metrics.json`` (atomically) in the run directory and return its path."""
    path = output_dir / "metrics.json"
    with atomic_file(path, "w") as f:
        json.dump(metrics, f, indent=2, sort_keys=True)
    return path


def task_prefixes(data: TaskDataModule) -> tuple[list[str | None], list[str]]:
    """The metric prefix of each of a task's validation and test dataloaders, in order (None: a validation split
    without labels, which gets no metrics)."""
    prefix_of = {split: prefix for prefix, split in data.eval_splits.items()}
    val = [prefix_of.get(s) for s in data.roles["validation"]]
    return val, [prefix_of[s] for s in data.roles["test"] if data.has_labels(s)]


def final_validation(
    trainer: L.Trainer, module: GPT1Module, data: L.LightningDataModule, prefixes: list[str]
) -> dict[str, float]:
    """The validation metrics (keys starting with one of ``prefixes``) of the weights training ended with: those of
    fit's last validation when it scored them (``GPT1Module.validated_at``), else of a new validation."""
    if module.validated_at == trainer.global_step:
        logged = trainer.callback_metrics.items()
    else:
        logged = [item for out in trainer.validate(module, datamodule=data, verbose=False) for item in out.items()]
    return {k: float(v) for k, v in logged if k.startswith(tuple(prefixes))}


def score(trainer: L.Trainer, module: TaskModule, data: TaskDataModule) -> dict[str, float]:
    """The task's metrics (and loss) on every validation split, and on every test split that has labels:
    {"val/accuracy": ..., "val_mismatched/accuracy": ..., "test/accuracy": ..., ...}. Those of the validation that
    ended training, if one did (the last epoch's), else of a new one."""
    results = final_validation(trainer, module, data, prefixes=[f"{p}/" for p in module.prefixes["val"] if p])
    if any(module.prefixes["test"]):
        for out in trainer.test(module, datamodule=data, verbose=False):
            results.update(out)
    return {k: float(v) for k, v in sorted(results.items())}


def baseline_metrics(task: TaskConfig, data: TaskDataModule) -> dict[str, float]:
    """The task's metrics on the first validation split of a constant prediction: the majority class (or choice
    position) of the training labels, their mean for regression. A constant correlates with nothing: mcc, pearson
    and spearman are 0 (sklearn's convention; torchmetrics' degenerate-case values are not meaningful)."""
    train = torch.from_numpy(data.train_labels())
    regression = task.num_labels == 1 and task.type != "multiple_choice"
    constant = train.float().mean() if regression else train.long().bincount().argmax()
    labels = torch.from_numpy(data.encoded[data.eval_splits["val"]].labels)
    metrics = {}
    for name in task.metrics:
        if name in ("mcc", "pearson", "spearman"):
            metrics[f"baseline/{name}"] = 0.0
            continue
        # every rank holds all the labels: no gather (under NCCL, after trainer=ddp on GPUs, one of these CPU tensors
        # fails)
        metric = build_metric(name, task.type, task.num_labels, sync_on_compute=False)
        metric.update(constant.expand_as(labels), labels)
        metrics[f"baseline/{name}"] = float(metric.compute())
    return metrics


def write_predictions(trainer: L.Trainer, module: TaskModule, data: TaskDataModule, directory: Path) -> list[Path]:
    """Predict every test split, labelled or not, into ``directory/<split id>.tsv`` (test.tsv; MNLI's
    test_matched.tsv, test_mismatched.tsv): a header, then ``index<TAB>prediction`` per example in index order
    (GLUE's submission format); label names when the task has them, else class or choice ids, or scores."""
    outputs = trainer.predict(module, datamodule=data)
    per_split = outputs if outputs and isinstance(outputs[0], list) else [outputs]  # a list per dataloader
    names = module.task.label_names
    paths = []
    for split, batches in zip(data.roles["test"], per_split, strict=True):
        index = torch.cat([b["index"] for b in batches]).tolist()
        preds = torch.cat([b["prediction"] for b in batches]).tolist()
        path = directory / f"{split}.tsv"
        lines = ["index\tprediction"]
        for i, p in sorted(zip(index, preds, strict=True)):
            lines.append(f"{i}\t{f'{p:.6g}' if isinstance(p, float) else names[p] if names else p}")
        if trainer.is_global_zero:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(path, "w") as f:
                f.write("\n".join(lines) + "\n")
        paths.append(path)
    return paths


@torch.no_grad()
def sample_predictions(module: TaskModule, data: TaskDataModule, n: int = 8) -> tuple[str, list[str], list[list[Any]]]:
    """The first ``n`` examples of the first validation split, as the model saw them (decoded), with their gold
    label and the model's prediction: ("val/predictions", columns, rows), a table for ``log_summary``."""
    split = data.eval_splits["val"]
    dataset, task, tokenizer = data.dataset(split), module.task, module.tokenizer
    items = [dataset[i] for i in range(min(n, len(dataset)))]
    batch = {k: v.to(module.device) for k, v in Collate(task.type, module.regression)(items).items()}
    was_training = module.training
    module.eval()
    predictions = module.predictions(module(batch)[0]).tolist()
    module.train(was_training)

    def label(value: Any) -> Any:
        return round(value, 4) if module.regression else task.label_names[value] if task.label_names else value

    encoded = dataset.split
    columns = ["index", "text", *(["text_pair"] if encoded.pair is not None else []),
               *(["choices"] if encoded.choices is not None else []), "gold", "predicted"]
    rows = []
    for i, (item, predicted) in enumerate(zip(items, predictions)):
        row: list[Any] = [item["index"], tokenizer.decode(encoded.text[i].tolist())]
        if encoded.pair is not None:
            row.append(tokenizer.decode(encoded.pair[i].tolist()))
        if encoded.choices is not None:
            offsets = encoded.choice_offsets
            row.append(" | ".join(tokenizer.decode(encoded.choices[k].tolist())
                                  for k in range(offsets[i], offsets[i + 1])))
        rows.append([*row, label(item["label"]), label(predicted)])
    return "val/predictions", columns, rows
