"""Zero-shot heuristics: exact log-probabilities under a model whose predictions are known, and the command."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hydra import compose, initialize_config_module
from torch import nn
from torch.nn import functional as F

import gpt1.commands.zeroshot as zeroshot_command
from gpt1.app.model_group import model_config
from gpt1.checkpoints.format import load_checkpoint
from gpt1.commands.pretrain import train
from gpt1.commands.zeroshot import zeroshot
from gpt1.core.errors import ConfigError
from gpt1.cpu.layers import on_cpu_layers
from gpt1.model.decoder import GPT, TiedHead
from gpt1.tasks.heuristics import (
    Heuristic,
    choice_logprobs,
    continuation_logprobs,
    fit_threshold,
    heuristics,
    join,
    mean_logprob,
    register_heuristic,
    verbalizer,
)
from gpt1.tasks.multiple_choice import MultipleChoice
from gpt1.tasks.registry import register
from tests.helpers import TINY_RUN, run_gpt1

WORDS = ["_eod_", "a", "b", "c", "d", "very", "good", "bad", "x", "y"]


class WordTokenizer:
    """One id per space-separated word of ``WORDS``; the end-of-document token is id 0 unless ``eod=False``."""

    def __init__(self, eod: bool = True) -> None:
        self.specials = {"eod": 0} if eod else {}

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [[WORDS.index(w) for w in text.split()] for text in texts]


class Bigram(nn.Module):
    """A decoder whose next-token log-probabilities depend on the current token only: ``table[prev]``."""

    def __init__(self, table: torch.Tensor, n_ctx: int = 16) -> None:
        super().__init__()
        self.table = nn.Parameter(table.log_softmax(-1))  # (V, V) log-probabilities
        self.config = SimpleNamespace(n_ctx=n_ctx, vocab_size=table.size(0))
        self.lm_head = TiedHead()

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return F.one_hot(idx, self.table.size(0)).float()  # (B, T, V): the "hidden state" is the token

    def lm_table(self) -> torch.Tensor:
        return self.table.t()  # (V next, V prev): the logits hidden @ table


def bigram(seed: int = 0, **likely: str) -> Bigram:
    """A random bigram LM in which each ``prev=next`` pair of ``likely`` is almost certain."""
    table = torch.randn(len(WORDS), len(WORDS), generator=torch.Generator().manual_seed(seed))
    for prev, nxt in likely.items():
        table[WORDS.index(prev), WORDS.index(nxt)] = 20.0
    return Bigram(table)


def by_hand(model: Bigram, prefix: list[int], continuation: list[int]) -> float:
    ids = prefix + continuation
    return sum(model.table[ids[t - 1], ids[t]].item() for t in range(max(len(prefix), 1), len(ids)))


def test_join() -> None:
    assert join([1, 2], [3, 4], 8) == ([1, 2, 3, 4], 2, False)
    assert join([1, 2, 3], [4, 5], 4) == ([2, 3, 4, 5], 2, True)  # the context's oldest tokens go first
    assert join([1, 2, 3], [4, 5, 6, 7, 8], 4) == ([3, 4, 5, 6], 1, True)  # then the continuation's last ones
    assert join([], [4, 5, 6], 2) == ([4, 5], 0, True)


@pytest.mark.parametrize("batch_size", [1, 2, 64])
def test_continuation_logprobs_exact(batch_size: int) -> None:
    model = bigram()
    g = torch.Generator().manual_seed(1)
    lengths = [(1, 3), (4, 1), (0, 5), (2, 0), (6, 9), (3, 3)]  # (prefix, continuation) tokens
    prefixes = [torch.randint(0, len(WORDS), (p,), generator=g).tolist() for p, _ in lengths]
    continuations = [torch.randint(0, len(WORDS), (c,), generator=g).tolist() for _, c in lengths]
    sums, counts, cut = continuation_logprobs(model, prefixes, continuations, batch_size)
    assert counts.tolist() == [3, 1, 4, 0, 9, 3] and not cut.any()
    expected = [by_hand(model, p, c) for p, c in zip(prefixes, continuations, strict=True)]
    torch.testing.assert_close(sums, torch.tensor(expected, dtype=torch.float64), atol=1e-5, rtol=0)

    model.config.n_ctx = 8
    sums, counts, cut = continuation_logprobs(model, prefixes, continuations, batch_size)
    assert cut.tolist() == [False] * 4 + [True, False]
    assert counts[4] == 7  # 6 + 9 tokens in a context of 8: one token of the prefix is left, and 7 to score
    assert sums[4].item() == pytest.approx(by_hand(model, prefixes[4][-1:], continuations[4][:7]), abs=1e-5)


def test_continuation_logprobs_gpt_batched_equals_alone() -> None:
    torch.manual_seed(0)
    model = GPT(model_config("tiny")).eval()
    g = torch.Generator().manual_seed(0)
    prefixes = [torch.randint(0, 512, (n,), generator=g).tolist() for n in (1, 7, 3, 12)]
    continuations = [torch.randint(0, 512, (n,), generator=g).tolist() for n in (5, 2, 9, 4)]
    batched, counts, _ = continuation_logprobs(model, prefixes, continuations, batch_size=4)
    for i, (p, c) in enumerate(zip(prefixes, continuations, strict=True)):
        ids = torch.tensor([p + c])
        logprobs = model.lm_logits(model(ids)).log_softmax(-1)[0, :-1].gather(-1, ids[0, 1:, None])[:, 0]  # (T-1,)
        assert counts[i] == len(c)
        assert batched[i].item() == pytest.approx(logprobs[len(p) - 1 :].sum().item(), abs=1e-4)


def test_mean_logprob() -> None:
    model = bigram(_eod_="a", a="b", b="c")
    scores, cut = mean_logprob(model, WordTokenizer(), ["a b c", "c a", ""])
    assert cut == 0 and scores[0] > scores[1] and scores[2] == float("-inf")
    assert scores[1].item() == pytest.approx(by_hand(model, [0], [3, 1]) / 2, abs=1e-5)
    scores, _ = mean_logprob(model, WordTokenizer(eod=False), ["a b c"])  # no start token: "a" is not scored
    assert scores[0].item() == pytest.approx(by_hand(model, [], [1, 2, 3]) / 2, abs=1e-5)


def test_verbalizer_picks_the_likelier_word() -> None:
    scores, _ = verbalizer(bigram(very="good"), WordTokenizer(), ["a b", "c"], ["bad", "good"], suffix="very")
    assert scores.shape == (2, 2) and scores.argmax(1).tolist() == [1, 1]
    scores, _ = verbalizer(bigram(very="bad"), WordTokenizer(), ["a b", "c"], ["bad", "good"], suffix="very")
    assert scores.argmax(1).tolist() == [0, 0]
    scores, _ = verbalizer(bigram(very="x", x="y"), WordTokenizer(), ["a"], ["good", "x y", "bad"], suffix="very")
    assert scores.argmax(1).tolist() == [1]  # a word of two likely tokens: the sum of their log-probabilities


def test_choice_logprobs_follow_the_context() -> None:
    model = bigram(b="c", c="d", y="x", x="a")  # after "b": "c d" is likely; after "y": "x a"
    contexts = ["a b", "a y", "d b"]
    choices = [["x a", "c d"], ["c d", "x a", "b"], ["c d"]]  # ragged: 2, 3 and 1 choices
    scores, _ = choice_logprobs(model, WordTokenizer(), contexts, choices, batch_size=2)
    assert scores.shape == (3, 3)
    assert scores.argmax(1).tolist() == [1, 1, 0]
    assert torch.isinf(scores[0, 2]) and torch.isinf(scores[2, 1:]).all()  # the missing choices never win
    assert scores[1, 2].item() == pytest.approx(model.table[WORDS.index("y"), WORDS.index("b")].item(), abs=1e-5)
    model.config.n_ctx = 4  # eod + context + a two-word choice: 5 tokens, cut; eod + context + "b" fits
    _, cut = choice_logprobs(model, WordTokenizer(), contexts, choices)
    assert cut == 3  # examples with a cut choice, not the 5 cut sequences


def test_fit_threshold() -> None:
    scores = torch.tensor([-5.0, -4.0, -3.0, -2.0, -1.0])
    labels = torch.tensor([0, 0, 1, 1, 1])
    accuracy = lambda preds, labels: (preds == labels).float().mean().item()  # noqa: E731
    t = fit_threshold(scores, labels, accuracy)
    assert -4.0 < t <= -3.0 and accuracy((scores >= t).long(), labels) == 1.0
    assert fit_threshold(scores, torch.zeros(5, dtype=torch.long), accuracy) == float("inf")  # all class 0
    assert fit_threshold(scores, torch.ones(5, dtype=torch.long), accuracy) == -5.0  # all class 1


# -- the command ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Path:
    """A tiny pre-training run's checkpoints directory: step0000002.ckpt, step0000004.ckpt, last.ckpt."""
    run = tmp_path_factory.mktemp("pretrain")
    overrides = [
        f"paths.output_dir={run}", f"paths.cache_dir={cache_dir}", *TINY_RUN, "trainer.max_steps=4",
        "callbacks.checkpoint.every_n_steps=2", "callbacks.checkpoint.keep_last=-1",
        "callbacks.samples.every_n_steps=0",
    ]  # fmt: skip
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        train(compose(config_name="pretrain", overrides=overrides))
    return run / "checkpoints"


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


SENTENCES = ["she was very happy with it .", "the room was dirty and cold .", "a lovely , quiet evening .",
             "he would not say a word to her .", "it was the best of all the days ."]  # fmt: skip
CLASSIFICATION_ROWS = [{"sentence": s, "label": i % 2} for i, s in enumerate(SENTENCES * 4)]
"""20 training rows, the first 7 of them the validation split."""
VAL_TEXTS, VAL_LABELS = [r["sentence"] for r in CLASSIFICATION_ROWS[:7]], torch.tensor([i % 2 for i in range(7)])


@pytest.fixture
def classification_files(tmp_path: Path) -> list[str]:
    """Overrides of task=sentiment that point it at small files written here."""
    train = write_jsonl(tmp_path / "cls" / "train.jsonl", CLASSIFICATION_ROWS)
    val = write_jsonl(tmp_path / "cls" / "validation.jsonl", CLASSIFICATION_ROWS[:7])
    files = f"task.data_files={{train: '{train}', validation: '{val}'}}"
    return ["task=sentiment", files, "~task.data_files.test", "task.name=mine"]  # (the choice names it in a real run)


def run_zeroshot(make_cfg, overrides: list[str]) -> tuple[dict, dict]:
    cfg = make_cfg("zeroshot", ["batch_size=4", *overrides])
    metrics = zeroshot(cfg)
    return metrics, json.loads((Path(cfg.paths.output_dir) / "metrics.json").read_text())


def test_verbalizer_scores_every_checkpoint(
    make_cfg, checkpoints: Path, classification_files: list[str], capsys, monkeypatch
) -> None:
    ckpts = f"ckpts=['{checkpoints}/step*.ckpt','{checkpoints}/last.ckpt']"  # a glob and a path
    applied, real = [], zeroshot_command.use_cpu_layers
    monkeypatch.setattr(zeroshot_command, "use_cpu_layers", lambda m: real(m) or applied.append(on_cpu_layers(m)))
    metrics, written = run_zeroshot(make_cfg, [*classification_files, ckpts])
    assert applied == [True] * 3  # each checkpoint scored on gpt1's CPU layers
    assert written == metrics
    out, err = capsys.readouterr()  # progress on stderr: checkpoints, and sequences (7 texts x 2 words) per one
    assert "checkpoints: 3/3 ckpt (100%)" in err and "sequences:" in err and "/14 " in err  # whole lines: not a tty
    assert out.count("(step ") == 3 and "checkpoints:" not in out  # a line per checkpoint, above the bar
    assert (metrics["task"], metrics["heuristic"], metrics["examples"]) == ("mine", "verbalizer", 7)
    entries = metrics["checkpoints"]
    assert [Path(e["path"]).name for e in entries] == ["step0000002.ckpt", "step0000004.ckpt", "last.ckpt"]
    assert [e["step"] for e in entries] == [2, 4, 4]
    assert all(0.0 <= e["accuracy"] <= 1.0 and e["truncated"] == 0 for e in entries)
    assert metrics["baseline/accuracy"] == pytest.approx(4 / 7)  # class 0, the training majority, is 4 of the 7

    loaded = load_checkpoint(checkpoints / "last.ckpt")  # the entry is the heuristic's accuracy on these texts
    scores, _ = verbalizer(loaded.model, loaded.tokenizer, VAL_TEXTS, ["negative", "positive"], "very")
    assert entries[-1]["accuracy"] == pytest.approx((scores.argmax(1) == VAL_LABELS).float().mean().item())


def test_mean_logprob_fits_a_threshold(make_cfg, checkpoints: Path, classification_files: list[str]) -> None:
    overrides = [
        "task.zeroshot.heuristic=mean_logprob", "task.metrics=[mcc,accuracy]", "task.zeroshot.max_fit_examples=8"
    ]  # fmt: skip
    metrics, _ = run_zeroshot(make_cfg, [*classification_files, *overrides, f"ckpts=['{checkpoints}/last.ckpt']"])
    (entry,) = metrics["checkpoints"]
    assert -1.0 <= entry["mcc"] <= 1.0 and 0.0 <= entry["accuracy"] <= 1.0
    assert metrics["baseline/mcc"] == 0.0  # a constant prediction

    loaded = load_checkpoint(checkpoints / "last.ckpt")  # the threshold, applied to these texts, gives the entry
    scores, _ = mean_logprob(loaded.model, loaded.tokenizer, VAL_TEXTS)
    preds = (scores >= entry["threshold"]).long()
    assert entry["accuracy"] == pytest.approx((preds == VAL_LABELS).float().mean().item())


def test_multiple_choice_with_ragged_choices(make_cfg, checkpoints: Path, tmp_path: Path) -> None:
    rows = [
        {"context": "she opened the door and", "choices": ["walked in .", "the sea .", "never ."], "label": 0},
        {"context": "it was a long", "choices": ["day .", "of the ."], "label": 0},  # two choices of three
        {"context": "he said that he", "choices": ["would come .", "red red .", "and ."], "label": 0},
    ]
    train = write_jsonl(tmp_path / "mc" / "train.jsonl", rows)
    val = write_jsonl(tmp_path / "mc" / "validation.jsonl", rows)
    overrides = [
        "task=story", "task.text=context", f"task.data_files={{train: '{train}', validation: '{val}'}}",
        "~task.data_files.test", f"ckpts=['{checkpoints}/last.ckpt']", "task.name=mine",
    ]  # fmt: skip
    metrics, _ = run_zeroshot(make_cfg, overrides)
    assert (metrics["task"], metrics["heuristic"], metrics["examples"]) == ("mine", "multiple_choice", 3)
    assert round(metrics["checkpoints"][0]["accuracy"] * 3, 4) in (0, 1, 2, 3)
    assert metrics["baseline/accuracy"] == 1.0  # every answer is the first choice


def test_a_classification_task_names_its_heuristic(make_cfg, classification_files: list[str]) -> None:
    cfg = make_cfg("zeroshot", [*classification_files, "task.zeroshot.heuristic=null", "ckpts=[x.ckpt]"])
    with pytest.raises(ConfigError, match="set task.zeroshot.heuristic"):
        zeroshot(cfg)
    cfg = make_cfg("zeroshot", [*classification_files, "task.zeroshot.words=[]", "ckpts=[x.ckpt]"])
    with pytest.raises(ConfigError, match="task.zeroshot.words is empty"):
        zeroshot(cfg)


def test_an_unsupported_task_type_is_refused_in_one_line(tmp_path: Path, make_cfg) -> None:
    message = (
        "there is no zero-shot heuristic for {} tasks (the paper's score classification, multiple_choice and winograd "
        "tasks)"
    )
    with pytest.raises(ConfigError, match=re.escape(message.format("similarity"))):
        zeroshot(make_cfg("zeroshot", ["task=similarity", "ckpts=[x.ckpt]"]))
    argv = ["zeroshot", "task=entailment", "ckpts=[x.ckpt]", f"hydra.run.dir={tmp_path}"]
    proc = run_gpt1(*argv, cwd=tmp_path, timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: task entailment: {message.format('entailment')}"]


class FirstChoice(Heuristic):
    """A heuristic of a user's: every example's first choice."""

    name = "first_choice"

    def predict(self, model, tokenizer, task, val, fit, num_labels, batch_size):  # noqa: ANN001, ANN201
        return torch.zeros(len(val.text), dtype=torch.long), {"truncated": 0}


class FirstChoiceType(MultipleChoice):
    name = "first_choice_mc"
    heuristics = ("multiple_choice", "first_choice")


def test_a_registered_heuristic_scores_the_tasks_whose_type_names_it(
    make_cfg, checkpoints: Path, tmp_path: Path, monkeypatch
) -> None:
    import gpt1.tasks.heuristics as module
    import gpt1.tasks.registry as registry

    assert set(heuristics()) == {"verbalizer", "mean_logprob", "multiple_choice", "winograd"}  # the paper's
    monkeypatch.setattr(module, "_HEURISTICS", dict(module._HEURISTICS))  # registered for this test only
    monkeypatch.setattr(registry, "_TYPES", dict(registry._TYPES))
    register_heuristic(FirstChoice())
    register(FirstChoiceType())
    rows = [{"context": "it was", "choices": ["a day .", "the sea ."], "label": label} for label in (0, 1, 1)]
    files = [write_jsonl(tmp_path / "mc" / f"{split}.jsonl", rows) for split in ("train", "validation")]
    overrides = [
        "task=story", "task.type=first_choice_mc", "task.text=context", "task.zeroshot.heuristic=first_choice",
        f"task.data_files={{train: '{files[0]}', validation: '{files[1]}'}}", "~task.data_files.test",
        f"ckpts=['{checkpoints}/last.ckpt']", "task.name=mine",
    ]  # fmt: skip
    metrics, _ = run_zeroshot(make_cfg, overrides)
    assert metrics["heuristic"] == "first_choice" and metrics["checkpoints"][0]["accuracy"] == pytest.approx(1 / 3)
    with pytest.raises(ConfigError, match="does not score multiple_choice tasks"):  # a type that does not name it
        zeroshot(make_cfg("zeroshot", [*overrides[:1], *overrides[2:]]))
    monkeypatch.delitem(module._HEURISTICS, "first_choice")
    with pytest.raises(ConfigError, match=r"'first_choice' is not a registered heuristic .*: one of verbalizer, "):
        zeroshot(make_cfg("zeroshot", overrides))
