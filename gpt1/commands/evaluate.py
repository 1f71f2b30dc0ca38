"""``gpt1 evaluate``: a fine-tuned checkpoint's task metrics, or a language model's token perplexity on a corpus.

gpt1 evaluate ckpt=outputs/finetune/sentiment/<run>/checkpoints/last.ckpt      # the task the checkpoint carries
gpt1 evaluate ckpt=FINETUNED task=NAME                                         # another task's data, same head
gpt1 evaluate ckpt=outputs/quickstart/<run>/checkpoints/last.ckpt              # the sample books' held-out book
gpt1 evaluate ckpt=model.ckpt data.valid_files='[corpus/test/*.txt]'
gpt1 evaluate ckpt=FINETUNED perplexity=true                                   # its LM, as for a pre-trained one
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L
from omegaconf import DictConfig, OmegaConf

from gpt1.app.config_checks import check_config
from gpt1.app.objective import job_value
from gpt1.app.registration import task_name
from gpt1.app.runner import command, holds_run_dir
from gpt1.checkpoints.format import Loaded, load_checkpoint
from gpt1.core.errors import CheckpointError, ConfigError
from gpt1.core.figures import write_metrics
from gpt1.data.pretrain_data import PretrainDataModule
from gpt1.tasks.spec import task_from_dict
from gpt1.tasks.task_data import TaskDataModule
from gpt1.training.module import GPT1Module
from gpt1.training.results import SINGLE_CLASS_NOTE, task_scores
from gpt1.training.schema import OptimConfig
from gpt1.training.task_module import TaskModule
from gpt1.training.trainer import build_trainer, check_accelerator


@holds_run_dir
def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Score ``cfg.ckpt``: on a task if it carries one or ``cfg.task`` is set (unless ``cfg.perplexity``), else by
    perplexity on ``cfg.data``; the metrics are also written to <run dir>/metrics.json."""
    check_config(cfg)
    if cfg.perplexity and cfg.task is not None:
        raise ConfigError("perplexity=true scores the language model on data, task= a task's head: give one of them")
    check_accelerator(cfg.trainer)
    loaded = load_checkpoint(cfg.ckpt)  # first: a missing or unusable ckpt is the only line printed
    L.seed_everything(cfg.seed)
    if not cfg.perplexity and (cfg.task is not None or loaded.task is not None):
        return evaluate_task(cfg, loaded)
    return perplexity(cfg, loaded)


def evaluate_task(cfg: DictConfig, loaded: Loaded) -> dict[str, Any]:
    """The task metrics of a fine-tuned checkpoint (its head, for the checkpoint's task or ``cfg.task``) on the
    task's validation and labelled test splits."""
    if cfg.task is None:
        task = task_from_dict(loaded.task)
        print(f"{cfg.ckpt} carries task {task.name}: its metrics (perplexity=true: its perplexity on data instead)")
    else:
        task = OmegaConf.to_object(cfg.task)
        task.name = task_name(cfg)
    head = task.kind.name
    if not any(k.startswith(f"{head}.") for k in loaded.heads):
        raise CheckpointError(_no_head(cfg.ckpt, head, task.name, loaded))
    data = TaskDataModule(
        task,
        loaded.tokenizer,
        n_ctx=loaded.model.config.n_ctx,
        batch_size=cfg.data.batch_size,
        seed=cfg.seed,
        cache_dir=cfg.paths.cache_dir,
        roles=("validation", "test"),
    )
    data.prepare_data()
    data.setup("validate")
    task = data.task  # its labels settled by the data
    outputs = task.kind.head_outputs(task.num_labels)
    weight = loaded.heads.get(f"{head}.linear.weight")
    if weight is None or weight.size(0) != outputs:
        raise CheckpointError(_no_head(cfg.ckpt, head, task.name, loaded, outputs))
    module = TaskModule(loaded.model, loaded.tokenizer, OptimConfig(), task, *data.metric_prefixes)
    module.head.load_state_dict({k.removeprefix(f"{head}."): v for k, v in loaded.heads.items() if k.startswith(head)})
    trainer = build_trainer(cfg.trainer, Path(cfg.paths.output_dir))
    metrics = {
        "ckpt": str(cfg.ckpt),
        "task": task.name,
        "main_metric": f"val/{task.metrics[0]}",  # what a sweep of evaluations optimises (optimized_metric=null)
        **task_scores(trainer, module, data),
    }
    write_metrics(Path(cfg.paths.output_dir), metrics)
    print(
        ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if k.endswith(tuple(task.metrics)))
        + (SINGLE_CLASS_NOTE if metrics["single_class_prediction"] else "")
    )
    return metrics


def _no_head(ckpt: str, head: str, task: str, loaded: Loaded, outputs: int | None = None) -> str:
    has = sorted({k.split(".")[0] for k in loaded.heads}) or "none: a language model"
    with_outputs = f" with {outputs} outputs" if outputs is not None else ""
    for_task = f" for task {task}" if task else ""
    return (
        f"{ckpt} has no {head} head{with_outputs}{for_task} (its heads: {has}); fine-tune it on the task "
        "(gpt1 finetune), or leave task= out to score its own task or its perplexity"
    )


def perplexity(cfg: DictConfig, loaded: Loaded) -> dict[str, Any]:
    """Perplexity of a language model on the validation data of ``cfg.data``."""
    output_dir = Path(cfg.paths.output_dir)
    data_cfg = replace(OmegaConf.to_object(cfg.data), train_files=[], hf_train_split=None)  # nothing to train on
    if data_cfg.separate_documents and "eod" not in loaded.tokenizer.specials:
        data_cfg.separate_documents = False  # e.g. converted OpenAI weights: their vocab has no separator
    data = PretrainDataModule(
        data_cfg, loaded.tokenizer, n_ctx=loaded.model.config.n_ctx, seed=cfg.seed, cache_dir=cfg.paths.cache_dir
    )
    module = GPT1Module(loaded.model, loaded.tokenizer, OptimConfig(), cfg.lm_loss)
    trainer = build_trainer(cfg.trainer, output_dir)
    result = trainer.test(module, datamodule=data, verbose=False)[0]
    metrics = {
        "ckpt": str(cfg.ckpt),
        "main_metric": "val/ppl",  # what a sweep of evaluations optimises (optimized_metric=null)
        "val/loss": result["test/loss"],  # the key every command writes (a report can read any run)
        "val/ppl": result["test/ppl"],
        "loss": result["test/loss"],
        "ppl": result["test/ppl"],
        "tokens": len(data.test_dataloader().dataset) * loaded.model.config.n_ctx,  # every window scores n_ctx
    }
    write_metrics(output_dir, metrics)
    print(f"perplexity {metrics['ppl']:.2f} (loss {metrics['loss']:.4f}) over {metrics['tokens']:,} tokens")
    return metrics


@command("evaluate")
def main(cfg: DictConfig) -> Any:
    return job_value(cfg, evaluate(cfg))


if __name__ == "__main__":
    main()
