"""``gpt1 finetune``: fine-tune a pre-trained decoder on a supervised task (paper section 3.2).

    gpt1 finetune task=sentiment init_from=outputs/quickstart/<run>/checkpoints/last.ckpt
    gpt1 finetune task=rte init_from=openai-gpt.ckpt aux_lm_weight=0 n_transfer=6     # the paper's ablations
    gpt1 finetune task=sentiment init_from=random tokenizer_from=CKPT                  # no pre-training
    gpt1 finetune task=sentiment init_from=CKPT model=lstm                             # the LSTM baseline
    gpt1 finetune --config-dir DIR task=mine init_from=CKPT predict=true               # DIR/task/mine.yaml

Validates every epoch and keeps the weights of the best validation (model_selection=best, as the original:
checkpoints/best.ckpt), which give the test metrics and predictions. Writes <run dir>/metrics.json (val/<metric> of
the selected weights, val_last/<metric> of the last, selected_step, test/<metric> when the test split has labels,
baseline/<metric>, steps, examples, truncated, wall time), checkpoints that carry the heads and the task, and with
predict=true predictions/<split>.tsv. Returns the task's main metric on the validation split to a sweeper
(optimized_metric).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from gpt1.app.config_checks import check_config
from gpt1.app.objective import job_value
from gpt1.app.registration import task_name
from gpt1.app.runner import command, holds_run_dir
from gpt1.checkpoints.format import load_checkpoint
from gpt1.checkpoints.transfer import transfer
from gpt1.core.errors import ConfigError
from gpt1.model.registry import model_type
from gpt1.tasks.spec import TASK_SPECIAL_TOKENS
from gpt1.tasks.task_data import TaskDataModule
from gpt1.text.tokenizer import Tokenizer
from gpt1.training.console import device_words
from gpt1.training.loggers import wandb_job
from gpt1.training.results import SINGLE_CLASS_NOTE, sample_predictions, task_results
from gpt1.training.resume import resolve_resume
from gpt1.training.run import TrainingRun
from gpt1.training.schema import Selection
from gpt1.training.task_module import TaskModule
from gpt1.training.trainer import check_accelerator

REQUIRED = "init_from is required: a gpt1 checkpoint, or init_from=random for the no-pre-training ablation"


def start_from(cfg: DictConfig) -> tuple[nn.Module, Tokenizer]:
    """The model and tokenizer fine-tuning starts from, the task's special tokens added (fresh embedding rows)."""
    if OmegaConf.is_missing(cfg, "init_from"):
        raise ConfigError(REQUIRED)
    pretrained = cfg.init_from != "random"
    if not pretrained and not cfg.tokenizer_from:
        raise ConfigError(
            "init_from=random needs tokenizer_from=CKPT: the checkpoint whose tokenizer (and, with the default "
            "model=checkpoint, architecture) the randomly initialised model takes"
        )
    ref = load_checkpoint(cfg.init_from if pretrained else cfg.tokenizer_from)
    model = transfer(ref.model, OmegaConf.to_object(cfg.model), pretrained, cfg.n_transfer)
    had = [ref.tokenizer.specials[role] for role in TASK_SPECIAL_TOKENS if role in ref.tokenizer.specials]
    model.resize_token_embeddings(ref.tokenizer.add_special_tokens(TASK_SPECIAL_TOKENS))
    if had and ref.task is None:  # pre-trained with them (format-1 checkpoints): fresh rows, as the original's
        with torch.no_grad():
            model.tokens_embed.weight[had] = torch.randn(len(had), model.config.n_embd) * model.config.init_std
    return model, ref.tokenizer


@holds_run_dir
def finetune(cfg: DictConfig) -> dict[str, Any]:
    """Fine-tune as ``cfg`` (a ``FinetuneConfig``) says; return the metrics, also in <run dir>/metrics.json."""
    check_config(cfg)
    start = time.perf_counter()
    output_dir = Path(cfg.paths.output_dir)
    L.seed_everything(cfg.seed, workers=True, verbose=False)  # quiet: a refused config prints one line only
    check_accelerator(cfg.trainer)  # before the checkpoint is read and the task's data encoded
    resume = resolve_resume(cfg.resume, output_dir)
    model, tokenizer = start_from(cfg)
    task = OmegaConf.to_object(cfg.task)
    task.name = task_name(cfg)
    data = TaskDataModule(
        task,
        tokenizer,
        n_ctx=model.config.n_ctx,
        batch_size=cfg.batch_size,
        micro_batch_size=cfg.micro_batch_size,
        seed=cfg.seed,
        cache_dir=cfg.paths.cache_dir,
        num_workers=cfg.num_workers,
        predict=cfg.predict,
    )
    data.prepare_data()
    data.setup("fit")  # refuses splits that cannot train (no labelled validation, fewer examples than a batch)
    task = data.task  # its labels settled by the data
    module = TaskModule(
        model,
        tokenizer,
        OmegaConf.to_object(cfg.optim),
        task,
        *data.metric_prefixes,
        aux_lm_weight=cfg.aux_lm_weight,
        head_pdrop=cfg.head_pdrop,
        share_context=cfg.share_context,
        lm_loss=cfg.lm_loss,
    )

    with TrainingRun(
        cfg,
        module,
        data,
        run_name=f"{task.name}-{output_dir.name}",
        callbacks=OmegaConf.to_object(cfg.callbacks),
        start=start,
        selection=Selection(cfg.model_selection),  # best: the weights of the best validation, as the original
        accumulate=1,  # batch_size is global: the passes per update follow from micro_batch_size and the devices
    ) as run:
        print(
            f"model: {model_type(model)}, {model.num_params():,} parameters; task {task.name} ({task.type}), "
            f"{run.trainer.accumulate_grad_batches} x {data.device_batch_size} examples per update per device; "
            f"{device_words(run.trainer)}"
        )
        selection = run.fit(resume)
        # a finished run resumed is evaluated no more: run.finish gives it its metrics.json's figures
        metrics = (
            {} if run.finished is not None else task_results(cfg, run.trainer, module, data, selection, run.checkpoint)
        )
        table = (lambda: sample_predictions(module, data)) if cfg.logger.wandb.enabled else None
        path = run.finish(metrics, table)
        if path is not None:
            main, selected = f"val/{task.metrics[0]}", Selection(cfg.model_selection).value
            print(
                f"{main} {metrics[main]:.4f} (baseline {metrics[f'baseline/{task.metrics[0]}']:.4f})"
                f"{SINGLE_CLASS_NOTE if metrics['single_class_prediction'] else ''}\n"
                f"checkpoint: {metrics['checkpoint']} (model_selection={selected})\nmetrics: {path}"
            )
    return metrics


@command("finetune")
def main(cfg: DictConfig) -> Any:
    with wandb_job():  # one W&B run per job of a multirun
        return job_value(cfg, finetune(cfg))


if __name__ == "__main__":
    main()
