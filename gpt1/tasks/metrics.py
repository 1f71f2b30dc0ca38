"""The task metrics, one entry each: its name, how it is computed (a torchmetrics ``Metric`` fed predictions and
labels), whether it scores regression, and its value when it is undefined. Adding a metric is adding an entry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

import torch
from torchmetrics import Metric
from torchmetrics.classification import BinaryF1Score, MulticlassMatthewsCorrCoef
from torchmetrics.regression import PearsonCorrCoef, SpearmanCorrCoef

from gpt1.core.errors import ConfigError


class Accuracy(Metric):
    """Fraction of predictions equal to the label, for any number of classes or choices."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # torchmetrics' options (sync_on_compute, ...)
        self.add_state("correct", torch.tensor(0), dist_reduce_fx="sum")
        self.add_state("total", torch.tensor(0), dist_reduce_fx="sum")

    def update(self, preds: torch.Tensor, labels: torch.Tensor) -> None:
        self.correct += (preds == labels).sum()
        self.total += labels.numel()

    def compute(self) -> torch.Tensor:
        return self.correct.float() / self.total


class MatthewsCorrCoef(MulticlassMatthewsCorrCoef):
    """Matthews' correlation over the classes, 0 when it is undefined (constant predictions or labels), as
    sklearn: torchmetrics scores e.g. the constant prediction 1 on labels [1, 1, 1, 0] 0.58."""

    def compute(self) -> torch.Tensor:
        c = self.confmat.double()  # (labels, predictions)
        n, t, p = c.sum(), c.sum(1), c.sum(0)
        cov = c.trace() * n - (t * p).sum()
        den = (n * n - (p * p).sum()).sqrt() * (n * n - (t * t).sum()).sqrt()
        return (cov / den).float() if den > 0 else torch.tensor(0.0)


@dataclass(frozen=True)
class MetricSpec:
    """A metric a task may report (``task.metrics``)."""

    name: str
    build: Callable[..., Metric]
    """(num_labels, **torchmetrics options) -> the metric, fed (predictions, labels)."""
    regression: bool = False
    """Whether it scores regression (predicted scores), else class or choice ids."""
    choices: bool = False
    """Whether it scores picks among an example's choices (multiple choice)."""
    num_labels: Optional[int] = None
    """The only number of classes it is defined for (f1: binary), if any."""
    constant: Optional[float] = None
    """Its value for a constant prediction, where the formula is undefined (correlations: 0, as sklearn); None:
    computed."""


METRICS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        MetricSpec("accuracy", lambda n, **kw: Accuracy(**kw), choices=True),
        MetricSpec("f1", lambda n, **kw: BinaryF1Score(**kw), num_labels=2),  # of class 1 (GLUE's MRPC, QQP)
        MetricSpec("mcc", lambda n, **kw: MatthewsCorrCoef(num_classes=n, **kw), constant=0.0),
        MetricSpec("pearson", lambda n, **kw: PearsonCorrCoef(**kw), regression=True, constant=0.0),
        MetricSpec("spearman", lambda n, **kw: SpearmanCorrCoef(**kw), regression=True, constant=0.0),
    )
}
"""Every metric by name; ``task.metrics`` lists some of them, the first being the task's main metric."""


def check_metric(name: str, regression: bool, choices: bool, num_labels: Optional[int] = None) -> MetricSpec:
    """The metric ``name``, if it suits a task that regresses or not, predicts choices or not, of ``num_labels``
    classes (None: not known yet); a ``ConfigError`` naming ``task.metrics`` otherwise."""
    spec = METRICS.get(name)
    if spec is None:
        raise ConfigError(f"task.metrics: {name!r} is not a metric; choose among {list(METRICS)}")
    if spec.regression != regression or (choices and not spec.choices):
        kind = "multiple-choice" if choices else "regression (num_labels 1)" if regression else "classification"
        fits = [m.name for m in METRICS.values() if m.regression == regression and (m.choices or not choices)]
        raise ConfigError(f"task.metrics {[name]} do not suit a {kind} task: use {fits}")
    if spec.num_labels is not None and num_labels is not None and num_labels != spec.num_labels:
        raise ConfigError(
            f"task.metrics: {name} is defined for {spec.num_labels} classes only, but the task has {num_labels} labels"
        )
    return spec


def build_metric(name: str, regression: bool, choices: bool, num_labels: int, sync_on_compute: bool = True) -> Metric:
    """The metric ``name`` for a task (``check_metric``), gathered over the ranks when computed unless
    ``sync_on_compute`` is false."""
    return check_metric(name, regression, choices, num_labels).build(num_labels, sync_on_compute=sync_on_compute)
