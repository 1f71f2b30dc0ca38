"""``gpt1 zeroshot``: the paper's zero-shot heuristics (``gpt1.tasks.heuristics``), scored over several checkpoints.

    gpt1 zeroshot ckpts="[outputs/quickstart/<run>/checkpoints/step*.ckpt]" task=sentiment     # every saved step

Writes <run dir>/metrics.json: {"task", "heuristic", "split", "examples", "checkpoints": [{"path", "step",
"<metric>": value, ..., "truncated", "threshold" (mean_logprob), "single_class_prediction" (every example
predicted as one class)}, ...], "baseline/<metric>" (the majority class of
the training labels, when the task has a train split)}.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from gpt1.app.config_checks import check_config
from gpt1.app.devices import resolve_device
from gpt1.app.objective import job_value
from gpt1.app.registration import task_name
from gpt1.app.runner import command, holds_run_dir
from gpt1.checkpoints.format import load_checkpoint
from gpt1.core.errors import CheckpointError, ConfigError, DataError
from gpt1.core.figures import write_metrics
from gpt1.core.progress import bar, write
from gpt1.cpu.layers import use_cpu_layers
from gpt1.data.sources import resolve_files
from gpt1.tasks.heuristics import get_heuristic, heuristic_of, metric_values
from gpt1.tasks.spec import TaskConfig, split_specs
from gpt1.tasks.split import TaskSplit
from gpt1.training.results import SINGLE_CLASS_NOTE


@holds_run_dir
def zeroshot(cfg: DictConfig) -> dict[str, Any]:
    """Score every checkpoint of ``cfg.ckpts`` (paths or globs) on ``cfg.task``'s first validation split with the
    task's heuristic; the metrics, also in <run dir>/metrics.json."""
    check_config(cfg)
    task: TaskConfig = OmegaConf.to_object(cfg.task)
    task.name = task_name(cfg)
    heuristic = heuristic_of(task)
    scorer = get_heuristic(heuristic)
    device = resolve_device(cfg.device)
    try:
        paths = resolve_files(list(cfg.ckpts), "ckpts")
    except FileNotFoundError as e:
        raise CheckpointError(str(e)) from e
    if not paths:
        raise ConfigError("ckpts is empty: give the checkpoints to score, e.g. ckpts='[run/checkpoints/*.ckpt]'")
    specs = {s.role: s for s in reversed(split_specs(task))}  # role -> its first split
    if "validation" not in specs:
        raise ConfigError(f"task {task.name} has no validation split (task.splits.validation) to score")
    cache_dir = Path(cfg.paths.cache_dir)
    val = TaskSplit(task, specs["validation"], cache_dir).read()
    train = TaskSplit(task, specs["train"], cache_dir).read() if "train" in specs else None
    if val.labels is None:
        raise DataError(f"task {task.name}: its validation split has no labels to score against")
    if scorer.fits and train is None:
        raise ConfigError(f"task {task.name}: {heuristic} fits its threshold on a train split (task.splits.train)")
    num_labels = scorer.num_labels(task, val)
    labels = torch.as_tensor(val.labels)
    top = max(int(labels.max()), -1 if train is None else int(train.labels.max()))
    if not task.kind.choices and top >= num_labels:
        raise DataError(
            f"task {task.name}: a label is {top} but {heuristic} predicts {num_labels} classes{scorer.classes_hint}"
        )
    fit = None
    if scorer.fits:  # a seeded sample of the training examples
        keep = torch.randperm(len(train.text), generator=torch.Generator().manual_seed(cfg.seed))
        keep = keep[: task.zeroshot.max_fit_examples].tolist()
        fit = ([train.text[i] for i in keep], torch.as_tensor(train.labels[keep]))

    main = task.metrics[0]
    results = []
    for path in bar(paths, desc="checkpoints", unit="ckpt"):
        loaded = load_checkpoint(path, map_location=device)
        model = loaded.model.to(device).eval()
        if device.type == "cpu":
            use_cpu_layers(model)
        preds, extra = scorer.predict(model, loaded.tokenizer, task, val, fit, num_labels, cfg.batch_size)
        values = metric_values(task, num_labels, preds, labels)
        single = bool((preds == preds[0]).all())  # every example one class: the score is that class's share
        results.append(
            {
                "path": str(path),
                "step": loaded.raw.get("global_step"),
                **values,
                **extra,
                "single_class_prediction": single,
            }
        )
        write(f"{path} (step {results[-1]['step']}): {main} {values[main]:.4f}{SINGLE_CLASS_NOTE if single else ''}")

    metrics = {
        "task": task.name,
        "heuristic": heuristic,
        "split": specs["validation"].id,
        "examples": len(labels),
        "checkpoints": results,
    }
    if train is not None:  # the baseline: the majority class (choice position) of the training labels
        majority = torch.as_tensor(train.labels).bincount().argmax()
        baseline = metric_values(task, num_labels, majority.expand_as(labels), labels)
        metrics.update({f"baseline/{name}": value for name, value in baseline.items()})
        print(f"baseline {main} {baseline[main]:.4f} (the majority class)")
    print(f"metrics: {write_metrics(Path(cfg.paths.output_dir), metrics)}")
    return metrics


@command("zeroshot")
def main(cfg: DictConfig) -> Any:
    return job_value(cfg, zeroshot(cfg))


if __name__ == "__main__":
    main()
