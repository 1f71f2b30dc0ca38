"""Task types are objects behind one interface, found through one registry: a new type defined here, registered,
fine-tunes, evaluates and predicts end to end without touching gpt1/; so does one named by its import path in a
task's YAML. A new metric is one entry of gpt1.tasks.metrics."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import gpt1.tasks.metrics
from gpt1.checkpoints.format import load_checkpoint
from gpt1.commands.evaluate import evaluate
from gpt1.commands.finetune import finetune
from gpt1.core.errors import ConfigError
from gpt1.model.heads import ClassificationHead
from gpt1.tasks.metrics import MetricSpec, build_metric
from gpt1.tasks.registry import get_task_type, register, task_types
from gpt1.tasks.spec import task_from_dict
from gpt1.tasks.task_type import TaskType, Transform, Truncation, kept_lengths
from tests.helpers import FEW_FINETUNE


class HypothesisFirst(TaskType):
    """A two-text classification with a fixed template: ``S hypothesis D premise X`` (the pair in reverse)."""

    name = "hypothesis_first"
    text_pair = True

    def sequences(self, texts, i: int, transform: Transform) -> list[np.ndarray]:
        return [transform.pair(texts.pair[i], texts.text[i])]

    def truncated(self, texts, transform: Transform) -> np.ndarray:
        return texts.text.lengths + texts.pair.lengths > transform.n_ctx - 3

    def batch(self, input_ids, extract, targets, mask):
        return {"input_ids": input_ids[:, 0], "extract": extract[:, 0], "targets": targets[:, 0]}

    def head(self, n_embd: int, num_labels: int, pdrop: float) -> nn.Module:
        return ClassificationHead(n_embd, num_labels, pdrop)


def test_the_papers_four_types_are_registered():
    assert list(task_types()) == ["classification", "entailment", "similarity", "multiple_choice", "winograd"]
    with pytest.raises(ConfigError, match="task.type='ranking': one of classification, entailment"):
        get_task_type("ranking")


def test_a_new_task_type_fine_tunes_evaluates_and_predicts(make_cfg, tiny_ckpt, tmp_path):
    register(HypothesisFirst())
    cfg = make_cfg(
        "finetune",
        [
            "task=entailment",
            "task.name=entailment",
            "task.type=hypothesis_first",
            f"init_from={tiny_ckpt}",
            "predict=true",
            *FEW_FINETUNE,
        ],
    )
    metrics = finetune(cfg)
    run = Path(cfg.paths.output_dir)
    assert 0 <= metrics["val/accuracy"] <= 1 and metrics["steps"] == 4
    assert "baseline/accuracy" in metrics and metrics["truncated"]["train"] >= 0

    loaded = load_checkpoint(run / "checkpoints" / "last.ckpt")
    assert loaded.task["type"] == "hypothesis_first" and set(loaded.heads) == {
        "hypothesis_first.linear.weight",
        "hypothesis_first.linear.bias",
    }
    assert (run / "predictions" / "test.tsv").read_text().splitlines()[0] == "index\tprediction"

    # the transformation is the type's: the hypothesis first
    from gpt1.tasks.task_data import TaskDataModule

    data = TaskDataModule(
        loaded.task,
        loaded.tokenizer,
        n_ctx=loaded.model.config.n_ctx,
        batch_size=4,
        seed=0,
        cache_dir=cfg.paths.cache_dir,
        roles=["validation"],
    )
    data.setup()
    split, (sequence,) = data.encoded["validation"], data.dataset("validation")[0]["sequences"]
    tok = loaded.tokenizer
    kept, _ = kept_lengths(len(split.pair[0]), len(split.text[0]), loaded.model.config.n_ctx, Truncation.original)
    hypothesis = split.pair[0][:kept]
    assert sequence[0] == tok.special_id("start") and sequence[-1] == tok.special_id("extract")
    assert sequence[1 : 2 + kept].tolist() == [*hypothesis.tolist(), tok.special_id("delimiter")]

    scored = evaluate(
        make_cfg("evaluate", [f"ckpt={run / 'checkpoints' / 'last.ckpt'}", "trainer.enable_progress_bar=false"])
    )
    assert scored["task"] == "entailment" and scored["val/accuracy"] == pytest.approx(metrics["val/accuracy"])


def test_a_task_yaml_names_a_type_by_its_import_path():
    kind = get_task_type("tests.test_task_types.HypothesisFirst")
    assert isinstance(kind, HypothesisFirst) and kind.name == "tests.test_task_types.HypothesisFirst"
    task = task_from_dict(
        {
            "type": "tests.test_task_types.HypothesisFirst",
            "data_files": {"train": "x.csv"},
            "text": "a",
            "text_pair": "b",
        }
    )
    assert task.kind is kind
    with pytest.raises(ConfigError, match="task.type=tests.nothere.Type: cannot import it"):
        get_task_type("tests.nothere.Type")
    with pytest.raises(ConfigError, match="is not a gpt1.tasks.task_type.TaskType subclass"):
        get_task_type("tests.test_task_types.ClassificationHead")


def test_a_type_says_what_a_spec_needs():
    spec = {"data_files": {"train": "x.csv"}, "text": "a"}
    with pytest.raises(ConfigError, match="task.text_pair: a hypothesis_first task needs it"):
        register(HypothesisFirst())
        task_from_dict({**spec, "type": "hypothesis_first"})
    with pytest.raises(ConfigError, match="num_labels=1 \\(regression\\) suits classification, entailment, similarity"):
        task_from_dict({**spec, "type": "multiple_choice", "choices": ["b", "c"], "num_labels": 1})


def test_a_new_metric_is_one_entry(monkeypatch):
    error_rate = MetricSpec("error_rate", lambda n, **kw: _ErrorRate(**kw))
    monkeypatch.setitem(gpt1.tasks.metrics.METRICS, "error_rate", error_rate)
    task = task_from_dict(
        {"type": "classification", "data_files": {"train": "x.csv"}, "text": "a", "metrics": ["error_rate", "accuracy"]}
    )
    assert task.metrics == ["error_rate", "accuracy"]
    metric = build_metric("error_rate", regression=False, choices=False, num_labels=2)
    metric.update(torch.tensor([0, 1, 1, 1]), torch.tensor([0, 1, 0, 0]))
    assert metric.compute().item() == pytest.approx(0.5)
    with pytest.raises(ConfigError, match="do not suit a regression"):
        task_from_dict(
            {
                "type": "classification",
                "data_files": {"train": "x.csv"},
                "text": "a",
                "num_labels": 1,
                "metrics": ["error_rate"],
            }
        )


class _ErrorRate(gpt1.tasks.metrics.Accuracy):
    def compute(self) -> torch.Tensor:
        return 1 - super().compute()


def test_metrics_json_of_a_regression_task_takes_each_metrics_constant(make_cfg, tiny_ckpt):
    """pearson and spearman are undefined for a constant prediction: the baseline takes their entries' value."""
    metrics = finetune(make_cfg("finetune", ["task=similarity", f"init_from={tiny_ckpt}", *FEW_FINETUNE]))
    assert metrics["baseline/pearson"] == gpt1.tasks.metrics.METRICS["pearson"].constant == 0.0
    assert json.loads(json.dumps(metrics))["baseline/spearman"] == 0.0
