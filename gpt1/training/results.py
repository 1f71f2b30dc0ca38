"""A run's results: what a fine-tune's metrics.json holds, the task metrics of a fine-tuned model (validation,
labelled test splits, the constant baseline), its predictions in GLUE's format, and a table of sample predictions for
W&B."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import torch
from omegaconf import DictConfig

from gpt1.core.files import atomic_file
from gpt1.model.registry import model_type
from gpt1.tasks.batches import Collate
from gpt1.tasks.metrics import METRICS, build_metric
from gpt1.tasks.task_data import TaskDataModule
from gpt1.training.module import GPT1Module
from gpt1.training.task_module import SINGLE_CLASS, TaskModule


def task_results(
    cfg: DictConfig, trainer: L.Trainer, module: TaskModule, data: TaskDataModule, selection: dict[str, Any], ckpt: Path
) -> dict[str, Any]:
    """What a fine-tune's metrics.json holds of the weights ``TrainingRun.fit`` selected (``selection``: their
    validation metrics and selected_step), loaded in ``module`` and saved in ``ckpt``: their test metrics (and with
    predict=true their predictions), the baseline's (``TrainingRun.finish`` adds the counts)."""
    metrics = {
        "task": module.task.name,
        "init_from": cfg.init_from,
        "model": model_type(module.model),
        "model_selection": cfg.model_selection,
        "selected_step": selection.pop("selected_step"),
        "checkpoint": str(ckpt),  # the fine-tuned checkpoint: the selected weights
        **task_scores(trainer, module, data, validation=selection),
    }
    if cfg.predict:
        write_predictions(trainer, module, data, Path(cfg.paths.output_dir) / "predictions")
    return {**metrics, **baseline_metrics(data)}


def final_validation(trainer: L.Trainer, module: GPT1Module, data: L.LightningDataModule) -> dict[str, float]:
    """The validation metrics (``module.val_keys``) of the weights training ended with: those of fit's last
    validation when it scored them (``GPT1Module.validated_at``), else of a new validation."""
    if module.validated_at == trainer.global_step:
        logged = trainer.callback_metrics.items()
    else:
        logged = [item for out in trainer.validate(module, datamodule=data, verbose=False) for item in out.items()]
    return {k: float(v) for k, v in logged if k.startswith(module.val_keys)}


def task_scores(
    trainer: L.Trainer, module: TaskModule, data: TaskDataModule, validation: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What a task command's metrics.json holds of the scores: the task's metrics (and loss) on every validation
    split and every labelled test split ({"val/accuracy": ..., "test/accuracy": ...}; the validation's are
    ``validation`` when given, fine-tuning's model selection, else ``final_validation``'s),
    ``single_class_prediction`` and the ``examples`` and ``truncated`` of every split."""
    results = dict(validation) if validation is not None else final_validation(trainer, module, data)
    if any(module.prefixes["test"]):
        for out in trainer.test(module, datamodule=data, verbose=False):
            results.update(out)
    scores: dict[str, Any] = {k: float(v) for k, v in sorted(results.items())}
    flags = {k: scores.pop(k) for k in [k for k in scores if k.endswith(f"/{SINGLE_CLASS}")]}  # per split
    scores["single_class_prediction"] = flags.get(f"val/{SINGLE_CLASS}") == 1.0  # the main validation split's
    scores["examples"] = {split: s["examples"] for split, s in data.stats.items()}
    scores["truncated"] = {split: s["truncated"] for split, s in data.stats.items()}
    return scores


SINGLE_CLASS_NOTE = "; every example was predicted as one class: the score is that class's share, not a skill"


def baseline_metrics(data: TaskDataModule) -> dict[str, float]:
    """The task's metrics on the first validation split of a constant prediction: the majority class (or choice
    position) of the training labels, their mean for regression. A metric undefined for a constant (correlations)
    takes its entry's ``constant`` value (sklearn's convention; torchmetrics' degenerate-case values are not
    meaningful)."""
    task = data.task
    train = torch.from_numpy(data.train_labels())
    constant = train.float().mean() if task.regression else train.long().bincount().argmax()
    labels = torch.from_numpy(data.encoded[data.eval_splits["val"]].labels)
    metrics = {}
    for name in task.metrics:
        if METRICS[name].constant is not None:
            metrics[f"baseline/{name}"] = METRICS[name].constant
            continue
        # every rank holds all the labels: no gather (under NCCL one of these CPU tensors fails)
        metric = build_metric(name, task.regression, task.kind.choices, task.num_labels, sync_on_compute=False)
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
    batch = {k: v.to(module.device) for k, v in Collate(module.kind, module.regression)(items).items()}
    was_training = module.training
    module.eval()
    predictions = module.predictions(module(batch)[0]).tolist()
    module.train(was_training)

    def label(value: Any) -> Any:
        return round(value, 4) if module.regression else task.label_names[value] if task.label_names else value

    encoded = dataset.split
    columns = [
        "index",
        "text",
        *(["text_pair"] if encoded.pair is not None else []),
        *(["choices"] if encoded.choices is not None else []),
        "gold",
        "predicted",
    ]
    rows = []
    for i, (item, predicted) in enumerate(zip(items, predictions)):
        row: list[Any] = [item["index"], tokenizer.decode(encoded.text[i].tolist())]
        if encoded.pair is not None:
            row.append(tokenizer.decode(encoded.pair[i].tolist()))
        if encoded.choices is not None:
            offsets = encoded.choice_offsets
            row.append(
                " | ".join(tokenizer.decode(encoded.choices[k].tolist()) for k in range(offsets[i], offsets[i + 1]))
            )
        rows.append([*row, label(item["label"]), label(predicted)])
    return "val/predictions", columns, rows
