"""The paper's zero-shot heuristics (section 5): a pre-trained LM alone, with no task head, predicts a task's examples.

Each is a ``Heuristic`` registered by its name (``register_heuristic``); a task type names those that score it
(``TaskType.heuristics``). Texts are encoded without task special tokens, after the end-of-document token when the
vocab has one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Optional

import torch
from torch import nn

from gpt1.core.errors import ConfigError
from gpt1.core.progress import bar
from gpt1.model.lm_loss import chunked_logprobs
from gpt1.tasks.examples import Examples
from gpt1.tasks.metrics import build_metric
from gpt1.tasks.registry import task_types
from gpt1.tasks.spec import TaskConfig


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
    ``model(ids)`` -> hidden states, ``model.lm_table()`` its tied head's weight, ``model.lm_head.products`` its
    products, ``model.config``'s n_ctx and vocab_size).

    Sequences longer than the context are cut (``join``); with an empty prefix the continuation's first token is
    not scored (nothing predicts it). Batches of similar lengths are right-padded; one forward per batch, and the
    LM head runs only at the positions that predict a continuation token, a chunk of them at a time
    (``gpt1.model.lm_loss.chunked_logprobs``).
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
        # (S,), S scored tokens in the batch: their logits a chunk at a time, never (S, V) at once
        table, products = model.lm_table(), model.lm_head.products
        vocab, states, targets = model.config.vocab_size, hidden[:, :-1][predicts], ids[:, 1:][predicts]
        logprobs = chunked_logprobs(states, table, vocab, targets, products)
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


def substitution_logprobs(
    model: nn.Module,
    tokenizer: Any,
    rests: Sequence[str],
    prefixes: Sequence[Sequence[str]],
    batch_size: int = 32,
) -> tuple[torch.Tensor, int]:
    """Mean token log-probability of each example's ``rests[i]`` after each of its ``prefixes[i]`` (the sentence up
    to the pronoun, a candidate in its place): (N, K), -inf where an example has fewer, and how many examples had a
    sequence cut (Winograd)."""
    start, K = _start(tokenizer), max(map(len, prefixes), default=0)
    flat = [(i, k) for i, row in enumerate(prefixes) for k in range(len(row))]
    encoded = tokenizer.encode_batch([prefixes[i][k] for i, k in flat])
    rest_ids = tokenizer.encode_batch(list(rests))
    sums, counts, cut = continuation_logprobs(
        model, [start + ids for ids in encoded], [rest_ids[i] for i, _ in flat], batch_size
    )
    scores = torch.full((len(rests), K), float("-inf"), dtype=torch.float64)
    index = torch.tensor(flat, dtype=torch.long).view(-1, 2)
    scores[index[:, 0], index[:, 1]] = _mean(sums, counts)
    cut_rows = torch.zeros(len(rests)).index_add_(0, index[:, 0], cut.float())
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


def metric_values(task: TaskConfig, num_labels: int, preds: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Each of the task's metrics of ``preds`` (N,) against ``labels`` (N,), as fine-tuning computes them."""
    values = {}
    for name in task.metrics:
        metric = build_metric(name, False, task.kind.choices, num_labels)
        metric.update(preds, labels)
        values[name] = float(metric.compute())
    return values


Fit = Optional[tuple[list[str], torch.Tensor]]
"""What a heuristic that ``fits`` fits on: training texts and their labels (n,)."""


class Heuristic:
    """A zero-shot heuristic, registered by ``name`` (``register_heuristic``): ``task.zeroshot.heuristic`` picks it
    among those the task's type lists (``TaskType.heuristics``). Subclasses set ``name`` and implement ``predict``."""

    name: ClassVar[str]
    """The value of ``task.zeroshot.heuristic`` (and of metrics.json's ``heuristic``) that picks it."""
    fits: ClassVar[bool] = False
    """Whether it fits on training examples before it predicts: ``predict`` then gets a seeded sample of the train
    split (at most ``task.zeroshot.max_fit_examples``)."""
    needs: ClassVar[str] = ""
    """The further settings it needs, said where a task must pick a heuristic."""
    classes_hint: ClassVar[str] = ""
    """What an error about a label beyond its classes (``num_labels``) adds."""

    def __str__(self) -> str:
        return self.name

    def check(self, task: TaskConfig) -> None:
        """Raise a ``ConfigError`` naming the key for what ``task`` lacks to be scored. Default: nothing."""

    def num_labels(self, task: TaskConfig, val: Examples) -> int:
        """The classes it predicts among. Default: the most choices of an example of ``val``."""
        return max(map(len, val.choices))

    def predict(
        self,
        model: nn.Module,
        tokenizer: Any,
        task: TaskConfig,
        val: Examples,
        fit: Fit,
        num_labels: int,
        batch_size: int,
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """The predictions (N,) for ``val``, and what else to report (``truncated``: how many inputs were cut; ...).
        fit: the (texts, labels (n,)) to fit on, when ``fits``."""
        raise NotImplementedError


class LabelWords(Heuristic):
    """``verbalizer``: the likeliest label word (all its tokens) after the text and the suffix (SST-2)."""

    name = "verbalizer"
    needs = " (with task.zeroshot.words, one per class)"
    classes_hint = " (task.zeroshot.words: one word per class)"

    def check(self, task: TaskConfig) -> None:
        if not task.zeroshot.words:
            raise ConfigError(
                "task.zeroshot.words is empty: the verbalizer needs one word per class, in class order, "
                "e.g. task.zeroshot.words=[negative,positive]"
            )

    def num_labels(self, task: TaskConfig, val: Examples) -> int:
        return len(task.zeroshot.words)

    def predict(
        self,
        model: nn.Module,
        tokenizer: Any,
        task: TaskConfig,
        val: Examples,
        fit: Fit,
        num_labels: int,
        batch_size: int,
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        scores, cut = verbalizer(model, tokenizer, val.text, task.zeroshot.words, task.zeroshot.suffix, batch_size)
        return scores.argmax(1), {"truncated": cut}


class Threshold(Heuristic):
    """``mean_logprob``: class 1 (CoLA's "acceptable") at or above a threshold on the mean token log-probability,
    fit on training examples for the task's main metric (CoLA)."""

    name = "mean_logprob"
    fits = True

    def num_labels(self, task: TaskConfig, val: Examples) -> int:
        return 2

    def predict(
        self,
        model: nn.Module,
        tokenizer: Any,
        task: TaskConfig,
        val: Examples,
        fit: Fit,
        num_labels: int,
        batch_size: int,
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        fit_scores, _ = mean_logprob(model, tokenizer, fit[0], batch_size)
        main = task.metrics[0]
        threshold = fit_threshold(fit_scores, fit[1], lambda p, y: metric_values(task, num_labels, p, y)[main])
        scores, cut = mean_logprob(model, tokenizer, val.text, batch_size)
        return (scores >= threshold).long(), {"truncated": cut, "threshold": threshold}


class BestChoice(Heuristic):
    """``multiple_choice``: the choice of the highest mean token log-probability after the context (RACE, Story
    Cloze)."""

    name = "multiple_choice"

    def predict(
        self,
        model: nn.Module,
        tokenizer: Any,
        task: TaskConfig,
        val: Examples,
        fit: Fit,
        num_labels: int,
        batch_size: int,
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        scores, cut = choice_logprobs(model, tokenizer, val.text, val.choices, batch_size)
        return scores.argmax(1), {"truncated": cut}


class BestSubstitution(Heuristic):
    """``winograd``: the candidate under which the rest of the sentence has the highest mean token log-probability
    (an example's choices: the sentence up to the pronoun, each candidate in its place; its text: the rest)."""

    name = "winograd"

    def predict(
        self,
        model: nn.Module,
        tokenizer: Any,
        task: TaskConfig,
        val: Examples,
        fit: Fit,
        num_labels: int,
        batch_size: int,
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        scores, cut = substitution_logprobs(model, tokenizer, val.text, val.choices, batch_size)
        return scores.argmax(1), {"truncated": cut}


_HEURISTICS: dict[str, Heuristic] = {}


def register_heuristic(heuristic: Heuristic) -> Heuristic:
    """Make ``heuristic`` the one named ``heuristic.name`` (replacing one of that name); a task type scores with it
    once its ``heuristics`` name it."""
    _HEURISTICS[heuristic.name] = heuristic
    return heuristic


def heuristics() -> dict[str, Heuristic]:
    """Every registered heuristic, by name."""
    return dict(_HEURISTICS)


def get_heuristic(name: str) -> Heuristic:
    """The heuristic registered as ``name``; a ``ConfigError`` naming ``task.zeroshot.heuristic`` otherwise."""
    if name not in _HEURISTICS:
        raise ConfigError(
            f"task.zeroshot.heuristic={name!r} is not a registered heuristic (gpt1.tasks.heuristics."
            f"register_heuristic): one of {', '.join(_HEURISTICS)}"
        )
    return _HEURISTICS[name]


def heuristic_of(task: TaskConfig) -> str:
    """The name of the heuristic ``task`` is scored with (``get_heuristic`` gives it); ConfigError (naming the key)
    if none fits it."""
    kind = task.kind
    name = task.zeroshot.heuristic or kind.default_heuristic
    if name is None and kind.heuristics:
        needs = "".join(_HEURISTICS[n].needs for n in kind.heuristics if n in _HEURISTICS)
        raise ConfigError(f"task {task.name}: set task.zeroshot.heuristic: {' or '.join(kind.heuristics)}{needs}")
    if name is None:
        scored = [n for n, t in task_types().items() if t.heuristics]
        raise ConfigError(
            f"task {task.name}: there is no zero-shot heuristic for {kind} tasks "
            f"(the paper's score {', '.join(scored[:-1])} and {scored[-1]} tasks)"
        )
    if name not in kind.heuristics:
        raise ConfigError(
            f"task.zeroshot.heuristic={name!r} does not score {kind} tasks: use one of {list(kind.heuristics)}"
        )
    get_heuristic(name).check(task)
    return name


for _builtin in (LabelWords(), Threshold(), BestChoice(), BestSubstitution()):
    register_heuristic(_builtin)
