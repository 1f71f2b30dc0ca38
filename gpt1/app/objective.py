"""What a command's job gives its sweeper: the number ``optimized_metric`` (lightning-hydra-template's key; each
command's default: ``gpt1.app.config``) addresses in the command's result, a key (``val/ppl``) or a path
(``checkpoints[-1].accuracy``); null: the metric the result names as its own (``main_metric``), else the whole
result. And which way a search goes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Optional

from gpt1.core.errors import ConfigError

STEP = re.compile(r"\[(-?\d+)\]|([^.\[\]]+)")
"""One step of a path into a result: ``[index]`` into a list, or a key."""
LOWER_IS_BETTER = ("loss", "ppl")
"""The last names of the metrics a search minimises (val/loss, val/ppl, val_ppl, ...); every other one it maximises
(the task metrics: accuracy, f1, mcc, pearson, ...)."""


def job_value(cfg: Any, result: Any) -> Any:
    """What the job of ``cfg`` (its command's config) returns to a sweeper, from ``result`` (the command's, or its
    metrics.json's: a finished job of a resumed sweep, ``gpt1.app.sweep``): the number ``cfg.optimized_metric``
    addresses; a ``ConfigError`` naming the key and the metrics the result holds where it addresses none."""
    metric = cfg.get("optimized_metric")
    if metric is None and isinstance(result, Mapping):
        metric = result.get("main_metric")
    return result if metric is None else metric_value(result, str(metric))


def metric_value(result: Any, metric: str) -> float:
    """The number ``metric`` addresses in ``result`` (a key, or a path: ``checkpoints[-1].accuracy``)."""
    node = _lookup(result, metric)
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        available = ", ".join(metric_paths(result)) or "none"
        raise ConfigError(
            f"optimized_metric={metric}: not a metric of this command's result (its metrics: {available}); set "
            "optimized_metric=<one of them>, or leave it out for the command's main validation metric"
        )
    return float(node)


def _lookup(result: Any, metric: str) -> Any:
    """``result[metric]``, else the end of ``metric``'s path through ``result``; None where it leads nowhere."""
    try:
        return result[metric]
    except (KeyError, IndexError, TypeError):
        pass
    node = result
    try:
        for index, key in STEP.findall(metric):
            node = node[int(index)] if index else node[key]
    except (KeyError, IndexError, TypeError):
        return None
    return node


def metric_paths(result: Any, prefix: str = "") -> list[str]:
    """The paths of the numbers in ``result``: its numeric keys, and those of the last entry of a list of results
    (``checkpoints[-1].accuracy``)."""
    paths: list[str] = []
    for key, value in result.items() if isinstance(result, Mapping) else []:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            paths.append(f"{prefix}{key}")
        elif isinstance(value, list) and value and isinstance(value[-1], Mapping):
            paths.extend(metric_paths(value[-1], f"{prefix}{key}[-1]."))
    return paths


def direction(metric: Optional[str]) -> str:
    """Which way a search of ``metric`` goes (``hydra.sweeper.direction``: conf/hparams_search/optuna.yaml's
    ``${gpt1.direction:${optimized_metric}}``): minimize a loss or a perplexity, maximize any other metric."""
    if not metric:
        raise ConfigError(
            "hparams_search needs the metric to optimise: set optimized_metric=KEY (e.g. val/ppl), a key of the "
            "command's metrics.json"
        )
    last = re.split(r"[/.\]_]", str(metric))[-1]
    return "minimize" if last in LOWER_IS_BETTER else "maximize"
