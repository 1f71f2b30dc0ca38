"""``gpt1 zeroshot``: the paper's zero-shot heuristics (section 5), scored over several checkpoints.

    gpt1 zeroshot ckpts="[outputs/quickstart/<run>/checkpoints/step*.ckpt]" task=sentiment     # every saved step

The pre-trained LM alone, with no task head, predicts a task's validation split:
- ``verbalizer`` (SST-2): the text, then ``task.zeroshot.suffix`` ("very"); the prediction is the label word
  (``task.zeroshot.words``, one per class) the LM finds likeliest to come next. A word of several tokens scores the
  log-probability of all of them.
- ``mean_logprob`` (CoLA): the mean token log-probability of the text; at or above a threshold, fit on (at most
  ``task.zeroshot.max_fit_examples``) training examples for the task's main metric, it predicts the second class
  (CoLA's "acceptable"), below it the first.
- ``multiple_choice`` (RACE, Story Cloze): the choice with the highest mean token log-probability after the context.
Texts are encoded without task special tokens, after the end-of-document token when the vocab has one.

The heuristics are functions of (model, tokenizer, texts) that return scores; ``zeroshot`` runs them over checkpoints
and writes <run dir>/metrics.json: {"task", "heuristic", "split", "examples", "checkpoints": [{"path", "step",
"<metric>": value, ..., "truncated", "threshold" (mean_logprob)}, ...], "baseline/<metric>" (the majority class of
the training labels, when the task has a train split)}.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.nn import functional as F

from gpt1.checkpoint import load_checkpoint
from gpt1.config import group_choice, resolve_device
from gpt1.data.sources import resolve_files
from gpt1.data.tasks import Examples, TaskConfig, TaskDataModule, TaskType
from gpt1.errors import CheckpointError, ConfigError, DataError, check_ranges, command
from gpt1.module import build_metric
from gpt1.progress import bar, write
from gpt1.run import write_metrics

HEURISTICS: dict[str, str] = {
    "verbalizer": "classification",
    "mean_logprob": "classification",
    "multiple_choice": "multiple_choice",
}
"""Heuristic -> the task type it applies to."""
TYPE_DEFAULTS: dict[str, str] = {"multiple_choice": "multiple_choice"}
"""Task type -> its heuristic when ``task.zeroshot.heuristic`` is unset (a classification task names its own)."""
TEXT_ONLY = 5
"""The context given to the ``TaskDataModule`` that only reads texts (``read`` needs neither tokenizer nor context)."""


def join(prefix: Sequence[int], continuation: Sequence[int], n_ctx: int) -> tuple[list[int], int, bool]:
    """``prefix + continuation`` cut to ``n_ctx`` tokens: the prefix loses its oldest tokens first (down to one),
    then the continuation its last ones. Returns the ids, the index of the first continuation token and whether
    anything was cut."""
    keep = min(len(continuation), n_ctx - min(1, len(prefix)))
    context = min(len(prefix), n_ctx - keep)
    ids = [*prefix[len(prefix) - context :], *continuation[:keep]]
    return ids, context, context + keep < len(prefix) + len(continuation)


@torch.no_grad()
def continuation_logprobs(
    model: nn.Module,
    prefixes: Sequence[Sequence[int]],
    continuations: Sequence[Sequence[int]],
    batch_size: int = 32,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Log-probability of each continuation given its prefix, under ``model`` (a decoder in eval mode:
    ``model(ids)`` -> hidden states, ``model.lm_logits``, ``model.config.n_ctx``).

    Sequences longer than the context are cut (``join``); with an empty prefix the continuation's first token is
    not scored (nothing predicts it). Batches of similar lengths are right-padded; one forward per batch, and the
    LM head runs only at the positions that predict a continuation token.
    Returns the summed log-probabilities (N,) float64, the number of scored tokens (N,) and which sequences were
    cut (N,) bool.
    """
    joined = [join(p, c, model.config.n_ctx) for p, c in zip(prefixes, continuations, strict=True)]
    device = next(model.parameters()).device
    sums, counts = torch.zeros(len(joined), dtype=torch.float64), torch.zeros(len(joined), dtype=torch.long)
    order = sorted(range(len(joined)), key=lambda i: len(joined[i][0]), reverse=True)  # little padding per batch
    shown = bar(desc="sequences", unit="seq", total=len(order), leave=False)
    for b in range(0, len(order), batch_size):
        rows = order[b : b + batch_size]
        shown.update(len(rows))
        T = max(1, len(joined[rows[0]][0]))
        ids = torch.zeros(len(rows), T, dtype=torch.long)  # (B, T), right-padded with id 0 (never scored)
        scored = torch.zeros(len(rows), T, dtype=torch.bool)  # (B, T): ids[:, t] is a scored continuation token
        for r, i in enumerate(rows):
            seq, start, _ = joined[i]
            ids[r, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            scored[r, max(start, 1) : len(seq)] = True
        ids, scored = ids.to(device), scored.to(device)
        hidden = model(ids)  # (B, T, C)
        predicts = scored[:, 1:]  # (B, T-1): the state at t predicts token t+1
        logits = model.lm_logits(hidden[:, :-1][predicts]).float()  # (S, V), S scored tokens in the batch
        logprobs = -F.cross_entropy(logits, ids[:, 1:][predicts], reduction="none")  # (S,)
        row = predicts.nonzero()[:, 0]  # (S,) the batch row of each scored token
        batch_sums = torch.zeros(len(rows), dtype=torch.float64, device=device).index_add_(0, row, logprobs.double())
        sums[rows], counts[rows] = batch_sums.cpu(), predicts.sum(1).cpu()
    shown.close()
    return sums, counts, torch.tensor([cut for _, _, cut in joined], dtype=torch.bool)


def _start(tokenizer: Any) -> list[int]:
    """What every text follows: the end-of-document token when the vocab has one, else nothing."""
    eod = tokenizer.specials.get("eod")
    return [] if eod is None else [eod]


def _mean(sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Mean token log-probability; -inf where no token was scored (it never wins)."""
    return torch.where(counts > 0, sums / counts.clamp(min=1), float("-inf"))


def mean_logprob(
    model: nn.Module, tokenizer: Any, texts: Sequence[str], batch_size: int = 32
) -> tuple[torch.Tensor, int]:
    """Mean token log-probability of each text (N,), and how many texts were cut to the context (CoLA)."""
    prefixes = [_start(tokenizer)] * len(texts)
    sums, counts, cut = continuation_logprobs(model, prefixes, tokenizer.encode_batch(list(texts)), batch_size)
    return _mean(sums, counts), int(cut.sum())


def verbalizer(
    model: nn.Module, tokenizer: Any, texts: Sequence[str], words: Sequence[str], suffix: str, batch_size: int = 32
) -> tuple[torch.Tensor, int]:
    """Log-probability of each label word right after ``text suffix``: (N, K), and how many texts were cut (SST-2)."""
    start, K = _start(tokenizer), len(words)
    prefixes = [start + ids for ids in tokenizer.encode_batch([f"{text} {suffix}" for text in texts])]
    word_ids = tokenizer.encode_batch(list(words))
    sums, _, cut = continuation_logprobs(
        model, [p for p in prefixes for _ in range(K)], [w for _ in prefixes for w in word_ids], batch_size
    )
    return sums.view(len(texts), K), int(cut.view(len(texts), K).any(1).sum())


def choice_logprobs(
    model: nn.Module,
    tokenizer: Any,
    contexts: Sequence[str],
    choices: Sequence[Sequence[str]],
    batch_size: int = 32,
) -> tuple[torch.Tensor, int]:
    """Mean token log-probability of each choice after its context: (N, K), K the most choices of any example
    (-inf where an example has fewer), and how many examples had a sequence cut (RACE, Story Cloze)."""
    start, K = _start(tokenizer), max(map(len, choices), default=0)
    prefixes = [start + ids for ids in tokenizer.encode_batch(list(contexts))]
    flat = [(i, k) for i, row in enumerate(choices) for k in range(len(row))]
    sums, counts, cut = continuation_logprobs(
        model, [prefixes[i] for i, _ in flat], tokenizer.encode_batch([choices[i][k] for i, k in flat]), batch_size
    )
    scores = torch.full((len(contexts), K), float("-inf"), dtype=torch.float64)
    index = torch.tensor(flat, dtype=torch.long).view(-1, 2)
    scores[index[:, 0], index[:, 1]] = _mean(sums, counts)
    cut_rows = torch.zeros(len(contexts)).index_add_(0, index[:, 0], cut.float())  # (N,) cut choices per example
    return scores, int((cut_rows > 0).sum())


def fit_threshold(
    scores: torch.Tensor, labels: torch.Tensor, metric: Callable[[torch.Tensor, torch.Tensor], float]
) -> float:
    """The threshold on ``scores`` (N,) that maximises ``metric(preds, labels)`` when ``scores >= threshold``
    predicts class 1. Tried: the lowest score (all class 1), each midpoint between consecutive distinct scores,
    and +inf (all class 0); the first best wins."""
    values = scores[torch.isfinite(scores)].unique()  # sorted
    candidates = [*((values[1:] + values[:-1]) / 2).tolist(), float("inf")]
    if len(values):
        candidates.insert(0, values[0].item())
    return max(candidates, key=lambda t: metric((scores >= t).long(), labels))


# -- the command ------------------------------------------------------------------------------------------------


def heuristic_of(task: TaskConfig) -> str:
    """The heuristic ``task`` is scored with; ConfigError (naming the key) if none fits it."""
    name = task.zeroshot.heuristic or TYPE_DEFAULTS.get(str(task.type))
    if name is None and task.type == TaskType.classification:
        raise ConfigError(
            f"task {task.name}: set task.zeroshot.heuristic: verbalizer (with task.zeroshot.words, one per class) "
            "or mean_logprob"
        )
    if name is None:
        raise ConfigError(
            f"task {task.name}: there is no zero-shot heuristic for {task.type} tasks "
            f"(the paper's score {' and '.join(sorted(set(HEURISTICS.values())))} tasks)"
        )
    if HEURISTICS.get(name) != task.type:
        fits = [h for h, t in HEURISTICS.items() if t == task.type]
        raise ConfigError(f"task.zeroshot.heuristic={name!r} does not score {task.type} tasks: use one of {fits}")
    if name == "verbalizer" and not task.zeroshot.words:
        raise ConfigError("task.zeroshot.words is empty: the verbalizer needs one word per class, in class order, "
                          "e.g. task.zeroshot.words=[negative,positive]")
    return name


def metric_values(task: TaskConfig, num_labels: int, preds: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Each of the task's metrics of ``preds`` (N,) against ``labels`` (N,), as fine-tuning computes them."""
    values = {}
    for name in task.metrics:
        metric = build_metric(name, str(task.type), num_labels)
        metric.update(preds, labels)
        values[name] = float(metric.compute())
    return values


def predict(
    heuristic: str, model: nn.Module, tokenizer: Any, task: TaskConfig, val: Examples,
    fit: Optional[tuple[list[str], torch.Tensor]], num_labels: int, batch_size: int,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """The heuristic's predictions (N,) for ``val``, and what else to report (how many inputs were cut; the
    threshold). fit: mean_logprob's (texts, labels) to fit the threshold on."""
    z = task.zeroshot
    if heuristic == "verbalizer":
        scores, cut = verbalizer(model, tokenizer, val.text, z.words, z.suffix, batch_size)
        return scores.argmax(1), {"truncated": cut}
    if heuristic == "multiple_choice":
        scores, cut = choice_logprobs(model, tokenizer, val.text, val.choices, batch_size)
        return scores.argmax(1), {"truncated": cut}
    fit_scores, _ = mean_logprob(model, tokenizer, fit[0], batch_size)
    main = task.metrics[0]
    threshold = fit_threshold(fit_scores, fit[1], lambda p, y: metric_values(task, num_labels, p, y)[main])
    scores, cut = mean_logprob(model, tokenizer, val.text, batch_size)
    return (scores >= threshold).long(), {"truncated": cut, "threshold": threshold}


def zeroshot(cfg: DictConfig) -> dict[str, Any]:
    """Score every checkpoint of ``cfg.ckpts`` (paths or globs) on ``cfg.task``'s first validation split with the
    task's heuristic; the metrics, also in <run dir>/metrics.json."""
    check_ranges(cfg)
    task: TaskConfig = OmegaConf.to_object(cfg.task)
    task.name = task.name or group_choice("task")
    heuristic = heuristic_of(task)
    device = resolve_device(cfg.device)
    try:
        paths = resolve_files(list(cfg.ckpts), "ckpts")
    except FileNotFoundError as e:
        raise CheckpointError(str(e)) from e
    if not paths:
        raise ConfigError("ckpts is empty: give the checkpoints to score, e.g. ckpts='[run/checkpoints/*.ckpt]'")
    data = TaskDataModule(task, tokenizer=None, n_ctx=TEXT_ONLY, batch_size=1, seed=cfg.seed,
                          cache_dir=cfg.paths.cache_dir, roles=("train", "validation"))
    if not data.roles["validation"]:
        raise ConfigError(f"task {task.name} has no validation split (task.splits.validation) to score")
    val = data.read(data.roles["validation"][0])
    train = data.read("train") if data.roles["train"] else None
    if val.labels is None:
        raise DataError(f"task {task.name}: its validation split has no labels to score against")
    if heuristic == "mean_logprob" and train is None:
        raise ConfigError(f"task {task.name}: mean_logprob fits its threshold on a train split (task.splits.train)")
    classes = {"verbalizer": len(task.zeroshot.words), "mean_logprob": 2}
    num_labels = classes[heuristic] if heuristic in classes else max(map(len, val.choices))  # choices: K
    labels = torch.as_tensor(val.labels)
    top = max(int(labels.max()), -1 if train is None else int(train.labels.max()))
    if heuristic != "multiple_choice" and top >= num_labels:
        raise DataError(f"task {task.name}: a label is {top} but {heuristic} predicts {num_labels} classes"
                        + (" (task.zeroshot.words: one word per class)" if heuristic == "verbalizer" else ""))
    fit = None
    if heuristic == "mean_logprob":  # a seeded sample of the training examples fits the threshold
        keep = torch.randperm(len(train.text), generator=torch.Generator().manual_seed(cfg.seed))
        keep = keep[: task.zeroshot.max_fit_examples].tolist()
        fit = ([train.text[i] for i in keep], torch.as_tensor(train.labels[keep]))

    main = task.metrics[0]
    results = []
    for path in bar(paths, desc="checkpoints", unit="ckpt"):
        loaded = load_checkpoint(path, map_location=device)
        model = loaded.model.to(device).eval()
        preds, extra = predict(heuristic, model, loaded.tokenizer, task, val, fit, num_labels, cfg.batch_size)
        values = metric_values(task, num_labels, preds, labels)
        results.append({"path": str(path), "step": loaded.raw.get("global_step"), **values, **extra})
        write(f"{path} (step {results[-1]['step']}): {main} {values[main]:.4f}")

    metrics = {
        "task": task.name,
        "heuristic": heuristic,
        "split": data.roles["validation"][0],
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
def main(cfg: DictConfig) -> float:
    return zeroshot(cfg)["checkpoints"][-1][cfg.task.metrics[0]]


if __name__ == "__main__":
    main()
