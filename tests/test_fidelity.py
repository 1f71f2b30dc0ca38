"""Fine-tuning as the original code (openai/finetune-transformer-lm: train.py, opt.py, datasets.py) runs it:
dropout, the multiple-choice head's mask, embedding dropout on the tables, model selection by validation, the lr of
every update, Story Cloze's split; and the fourth zero-shot heuristic (Winograd)."""

import csv
import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.model_selection import train_test_split

import gpt1.commands.finetune as finetune_command
import gpt1.training.run
from gpt1.app.model_group import model_config
from gpt1.checkpoints.format import load_checkpoint, save_checkpoint
from gpt1.commands.evaluate import evaluate
from gpt1.commands.finetune import finetune, start_from
from gpt1.commands.zeroshot import zeroshot
from gpt1.core.errors import ConfigError
from gpt1.data.loader import EpochSampler
from gpt1.model.decoder import GPT, GPTConfig
from gpt1.model.heads import MultipleChoiceHead
from gpt1.tasks.registry import get_task_type
from gpt1.tasks.spec import split_specs, task_from_dict
from gpt1.tasks.split import TaskSplit
from gpt1.training.schema import OptimConfig
from tests.helpers import FAST, REPO, run_gpt1

# -- 1. dropout 0.1 whatever the checkpoint --------------------------------------------------------------------


def test_finetuning_dropout_is_the_recipes_whatever_the_checkpoint(make_cfg, pretrained, tmp_path):
    ref = load_checkpoint(pretrained)
    ref.model.config = replace(ref.model.config, embd_pdrop=0.0, attn_pdrop=0.0, resid_pdrop=0.0)
    undropped = tmp_path / "undropped.ckpt"  # as the quickstart's: pre-trained without dropout
    save_checkpoint(undropped, ref.model, ref.tokenizer)

    model, _ = start_from(make_cfg("finetune", ["task=sentiment", f"init_from={undropped}"]))
    c = model.config
    assert (c.embd_pdrop, c.attn_pdrop, c.resid_pdrop) == (0.1, 0.1, 0.1) and c.embd_dropout == "table"
    assert model.drop.p == 0.1 and model.h[0].attn.attn_pdrop == 0.1 and model.h[0].mlp.dropout.p == 0.1

    model, _ = start_from(
        make_cfg(
            "finetune",
            [
                "task=sentiment",
                f"init_from={undropped}",
                "model.attn_pdrop=0.3",
                "model.embd_pdrop=null",
                "model.embd_dropout=occurrence",
            ],
        )
    )
    c = model.config
    assert (c.embd_pdrop, c.attn_pdrop, c.resid_pdrop) == (0.0, 0.3, 0.1) and c.embd_dropout == "occurrence"


# -- 2. one dropout mask across an example's choices -------------------------------------------------------------


def test_the_multiple_choice_head_shares_one_dropout_mask_across_the_choices():
    torch.manual_seed(0)
    head = MultipleChoiceHead(64, pdrop=0.5).train()
    state = torch.randn(8, 1, 64)
    logits = head(state.expand(8, 4, 64))  # (B, K): the same state for every choice
    assert torch.equal(logits, logits[:, :1].expand(8, 4))  # the same mask, so the same score
    assert len(set(logits[:, 0].tolist())) == 8  # a mask per example
    assert torch.equal(head.eval()(state.expand(8, 4, 64)), head.linear(state.expand(8, 4, 64)).squeeze(-1))


# -- 3. embedding dropout on the tables --------------------------------------------------------------------------


def _embeddings(mode: str) -> tuple[GPT, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A tiny GPT with embedding dropout only, its position table zeroed: (model, ids, embeddings, states)."""
    torch.manual_seed(0)
    config = replace(model_config("tiny"), embd_pdrop=0.5, attn_pdrop=0.0, resid_pdrop=0.0, embd_dropout=mode)
    model = GPT(config).train()
    with torch.no_grad():
        model.positions_embed.weight.zero_()
    ids = torch.tensor([[5, 7, 5, 9], [9, 5, 3, 7]])
    seen = []
    model.h[0].register_forward_pre_hook(lambda m, args: seen.append(args[0].detach()))
    hidden = model(ids)
    return model, ids, seen[0], hidden


def test_embedding_dropout_on_the_table_shares_a_tokens_mask_and_the_lm_head_reads_it():
    model, ids, x, hidden = _embeddings("table")
    # every occurrence of token 5 (rows 0 and 1, three positions) and of 7, 9 has the same dropped embedding
    for token in (5, 7, 9):
        rows = x[ids == token]
        assert torch.equal(rows, rows[:1].expand_as(rows))
    dropped = x[ids == 5][0]
    assert (dropped == 0).any() and torch.allclose(
        dropped[dropped != 0], 2 * model.tokens_embed.weight[5][dropped != 0]
    )
    # the tied LM head reads the dropped table (the auxiliary loss of fine-tuning)
    logits = model.lm_logits(hidden)
    for token in (5, 7, 9, 3):
        assert torch.allclose(logits[..., token], hidden @ x[ids == token][0], atol=1e-5)
    model.eval()
    assert torch.allclose(model.lm_logits(hidden), hidden @ model.tokens_embed.weight.T, atol=1e-5)


def test_embedding_dropout_per_occurrence_stays_an_option_and_pretrainings_default():
    assert GPTConfig().embd_dropout == "occurrence" and model_config("small").embd_dropout == "occurrence"
    model, ids, x, hidden = _embeddings("occurrence")
    rows = x[ids == 5]
    assert not torch.equal(rows[0], rows[1])  # each occurrence its own mask
    assert torch.allclose(model.lm_logits(hidden), hidden @ model.tokens_embed.weight.T, atol=1e-5)
    with pytest.raises(ConfigError, match="model.embd_dropout=.rows."):
        GPTConfig(embd_dropout="rows")


# -- 4. model selection by validation ----------------------------------------------------------------------------


class _Trainer:
    """What ``BestWeights.offer`` reads of a trainer, and the checkpoints it would write."""

    def __init__(self) -> None:
        self.global_step, self.saved = 0, []

    def save_checkpoint(self, path, weights_only=False):
        self.saved.append((self.global_step, weights_only))


def test_the_best_validation_strictly_better_keeps_its_weights(tmp_path):
    from gpt1.training.callbacks.best_weights import BestWeights

    best, trainer = BestWeights(tmp_path / "best.ckpt", "val/accuracy", ("val/",)), _Trainer()
    for step, value in ((10, 0.5), (20, 0.7), (30, 0.7), (40, 0.6), (50, float("nan"))):
        trainer.global_step = step
        best.offer(trainer, value, {"val/accuracy": value})
    assert (best.best, best.step, best.metrics) == (0.7, 20, {"val/accuracy": 0.7})  # the first of equal ones
    assert trainer.saved == [(10, True), (20, True)]
    restored = BestWeights(tmp_path / "best.ckpt", "val/accuracy", ("val/",))
    restored.load_state_dict(best.state_dict())
    assert (restored.best, restored.step) == (0.7, 20)


def _validations(run: Path) -> list[float]:
    """val/accuracy of every validation that fit logged, in order."""
    with open(run / "csv" / "metrics.csv") as f:
        return [float(r["val/accuracy"]) for r in csv.DictReader(f) if r.get("val/accuracy")]


def test_finetuning_keeps_the_weights_of_the_best_validation(make_cfg, pretrained):
    cfg = make_cfg(
        "finetune",
        [
            "task=sentiment",
            f"init_from={pretrained}",
            *FAST,
            "trainer.max_steps=-1",
            "trainer.max_epochs=4",
            "++task.splits.train='train[:48]'",
            "optim.lr=3e-2",
            "predict=true",
        ],
    )
    metrics = finetune(cfg)
    run = Path(cfg.paths.output_dir)
    validations = _validations(run)
    assert len(validations) == 4 and metrics["steps"] == 12  # every epoch, 3 whole batches of 16 each
    epoch = int(np.argmax(validations))  # the first best
    assert metrics["selected_step"] == 3 * (epoch + 1) and metrics["val/accuracy"] == pytest.approx(validations[epoch])
    assert metrics["val_last/accuracy"] == pytest.approx(validations[-1]) and metrics["model_selection"] == "best"
    assert metrics["checkpoint"] == str(run / "checkpoints" / "best.ckpt")
    assert json.loads((run / "metrics.json").read_text())["selected_step"] == metrics["selected_step"]
    # the fine-tuned checkpoint holds the selected weights, which also give the test metrics
    scored = evaluate(make_cfg("evaluate", [f"ckpt={metrics['checkpoint']}", "trainer.enable_progress_bar=false"]))
    assert scored["val/accuracy"] == pytest.approx(metrics["val/accuracy"])
    assert scored["test/accuracy"] == pytest.approx(metrics["test/accuracy"])


def test_model_selection_last_keeps_the_last_weights(make_cfg, pretrained):
    cfg = make_cfg("finetune", ["task=sentiment", f"init_from={pretrained}", *FAST, "model_selection=last"])
    metrics = finetune(cfg)
    assert metrics["selected_step"] == metrics["steps"] == 3
    assert metrics["val/accuracy"] == metrics["val_last/accuracy"]
    assert (
        metrics["checkpoint"].endswith("last.ckpt")
        and not (Path(cfg.paths.output_dir) / "checkpoints" / "best.ckpt").exists()
    )


# -- 5. the lr of every update, and the number of updates --------------------------------------------------------


def opt_py_warmup_linear(x, warmup=0.002):
    """opt.py's warmup_linear, transcribed (tf.cast(x <= warmup) as a float)."""
    s = float(x <= warmup)
    return (s * (x / warmup) + (1 - s)) * (1 - x)


class _LearningRates(finetune_command.L.Callback):
    def __init__(self) -> None:
        self.lrs = []

    def on_before_optimizer_step(self, trainer, module, optimizer):
        self.lrs.append(optimizer.param_groups[0]["lr"])


def test_every_updates_lr_is_the_originals(make_cfg, pretrained, monkeypatch):
    recorder = _LearningRates()
    build = gpt1.training.run.build_callbacks
    monkeypatch.setattr(gpt1.training.run, "build_callbacks", lambda *a, **k: [*build(*a, **k), recorder])
    # 330 examples in batches of 32, 3 epochs: the original's 10 updates an epoch (the last 10 examples dropped)
    cfg = make_cfg(
        "finetune",
        [
            "task=sentiment",
            f"init_from={pretrained}",
            *FAST,
            "batch_size=32",
            "trainer.max_steps=-1",
            "trainer.max_epochs=3",
            "++task.splits.train='train[:330]'",
            "++task.splits.validation='validation[:8]'",
            "++task.splits.test='test[:8]'",
        ],
    )
    metrics = finetune(cfg)
    t_total = 330 // 32 * 3
    assert metrics["steps"] == t_total == 30
    expected = [6.25e-5 * opt_py_warmup_linear(t / t_total, 0.002) for t in range(t_total)]
    assert recorder.lrs == pytest.approx(expected, rel=1e-12, abs=1e-20)
    assert recorder.lrs[0] == 0.0  # the first update's t = 0


def test_a_long_run_warms_up_over_the_unrounded_fraction():
    """1,700 updates: warm-up over 3.4 of them (not round(3.4) = 3), decaying meanwhile."""
    from gpt1.training.module import warmup_linear

    for t in range(1700):
        assert warmup_linear(t / 1700, 0.002) == pytest.approx(opt_py_warmup_linear(t / 1700, 0.002), abs=1e-15)
    assert OptimConfig().schedule == "cosine"  # pre-training's schedule is not this one


def test_an_epoch_leaves_out_the_last_partial_batch_on_every_rank():
    whole = [list(EpochSampler(330, seed=1, epoch=0, batch_size=32, num_replicas=2, rank=r)) for r in (0, 1)]
    assert [len(w) for w in whole] == [160, 160] and len(set(whole[0]) | set(whole[1])) == 320


def test_fewer_training_examples_than_a_batch_are_refused(make_cfg, pretrained):
    cfg = make_cfg(
        "finetune",
        ["task=sentiment", f"init_from={pretrained}", *FAST, "batch_size=32", "++task.splits.train='train[:20]'"],
    )
    with pytest.raises(ConfigError, match="has 20 training examples, fewer than batch_size=32"):
        finetune(cfg)


# -- 6. Story Cloze's split --------------------------------------------------------------------------------------


def test_story_clozes_validation_stories_are_the_originals(make_cfg, tmp_path):
    fields = [
        "InputStoryid",
        "InputSentence1",
        "InputSentence2",
        "InputSentence3",
        "InputSentence4",
        "RandomFifthSentenceQuiz1",
        "RandomFifthSentenceQuiz2",
        "AnswerRightEnding",
    ]
    for name, n in (
        ("cloze_test_val__spring2016 - cloze_test_ALL_val.csv", 1871),
        ("cloze_test_test__spring2016 - cloze_test_ALL_test.csv", 10),
    ):
        with open(tmp_path / name, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(fields)
            w.writerows([f"id{i}", f"story {i} a.", "b.", "c.", "d.", "yes.", "no.", 1 + i % 2] for i in range(n))
    cfg = make_cfg("finetune", ["task=story_cloze", f"task.data_dir={tmp_path}", "init_from=x"])
    from omegaconf import OmegaConf

    task = OmegaConf.to_object(cfg.task)
    specs = {s.role: s for s in split_specs(task)}
    train, val = TaskSplit(task, specs["train"], None).read(), TaskSplit(task, specs["validation"], None).read()
    # datasets.py: train_test_split(storys, ..., test_size=374, random_state=3535999445): (train part, validation)
    original_train, original_val = train_test_split(np.arange(1871), test_size=374, random_state=3535999445)
    assert val.index.tolist() == original_val.tolist() and train.index.tolist() == original_train.tolist()
    assert val.text[0] == f"story {original_val[0]} a. b. c. d."


# -- 7. Winograd -------------------------------------------------------------------------------------------------


DPRD = [  # the Definite Pronoun Resolution Dataset's schema (hub: sentence, pronoun, candidates, label)
    {
        "sentence": "The trophy does not fit in the suitcase because it is too big.",
        "pronoun": "it",
        "candidates": ["The trophy", "the suitcase"],
        "label": 0,
    },
    {
        "sentence": "The trophy does not fit in the suitcase because it is too small.",
        "pronoun": "it",
        "candidates": ["The trophy", "the suitcase"],
        "label": 1,
    },
    {
        "sentence": "Anna told Mary that she had won the prize.",
        "pronoun": "she",
        "candidates": ["Anna", "Mary"],
        "label": 0,
    },
    {
        "sentence": "The dog chased the cat until it was tired.",
        "pronoun": "it",
        "candidates": ["The dog", "the cat"],
        "label": 0,
    },
]
WSC = [  # the WSC's schema (hub winograd_wsc: text, pronoun, pronoun_loc, options, label); "he" twice: the second
    {
        "text": "He said the man ate because he was hungry.",
        "pronoun": "he",
        "pronoun_loc": 28,
        "options": ["the man", "the dog"],
        "label": 0,
        "quote": "he was hungry",
        "quote_loc": 28,
        "source": "test",
    },
    {
        "text": "The city councilmen refused the demonstrators a permit because they feared violence.",
        "pronoun": "they",
        "pronoun_loc": 63,
        "options": ["The city councilmen", "The demonstrators"],
        "label": 0,
        "quote": "they feared violence",
        "quote_loc": 63,
        "source": "test",
    },
]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_winograd_substitutes_each_candidate_for_the_pronoun(tmp_path):
    from gpt1.tasks.winograd import Winograd

    task = task_from_dict(
        {
            "type": "winograd",
            "data_files": {"test": str(_jsonl(tmp_path / "d.jsonl", DPRD))},
            "splits": {"validation": "test", "train": None, "test": None},
            "text": "sentence",
            "pronoun": "pronoun",
            "choices": "candidates",
        }
    )
    (spec,) = split_specs(task)
    val = TaskSplit(task, spec, None).read()
    # the first "it" as a word (not the one in "fit"): the rest after it, the sentence up to it with each candidate
    assert val.text[0] == " is too big."
    assert val.choices[0] == [
        "The trophy does not fit in the suitcase because The trophy",
        "The trophy does not fit in the suitcase because the suitcase",
    ]
    assert val.labels.tolist() == [0, 1, 0, 0]

    task = task_from_dict(
        {
            "type": "winograd",
            "data_files": {"test": str(_jsonl(tmp_path / "w.jsonl", WSC))},
            "splits": {"validation": "test", "train": None, "test": None},
            "text": "text",
            "pronoun": "pronoun",
            "pronoun_loc": "pronoun_loc",
            "choices": "options",
        }
    )
    (spec,) = split_specs(task)
    val = TaskSplit(task, spec, None).read()
    assert val.text[0] == " was hungry." and val.choices[0][1] == "He said the man ate because the dog"
    with pytest.raises(ConfigError, match="task.pronoun: a winograd task needs it"):
        task_from_dict({"type": "winograd", "data_files": {"test": "x.jsonl"}, "text": "text", "choices": "options"})
    assert isinstance(get_task_type("winograd"), Winograd)  # a registered TaskType


def test_the_winograd_heuristic_picks_the_higher_mean_logprob_of_the_rest(pretrained):
    from gpt1.tasks.heuristics import continuation_logprobs, substitution_logprobs

    loaded = load_checkpoint(pretrained)
    model, tok = loaded.model.eval(), loaded.tokenizer
    rests = [" is too big.", " was tired."]
    prefixes = [
        [
            "the trophy does not fit in the suitcase because the trophy",
            "the trophy does not fit in the suitcase because the suitcase",
        ],
        ["the dog chased the cat until the dog", "the dog chased the cat until the cat"],
    ]
    scores, cut = substitution_logprobs(model, tok, rests, prefixes)
    eod = [tok.specials["eod"]] if "eod" in tok.specials else []
    for i, row in enumerate(prefixes):
        for k, prefix in enumerate(row):
            rest = tok.encode(rests[i])
            sums, counts, _ = continuation_logprobs(model, [eod + tok.encode(prefix)], [rest])
            # the mean over the rest's tokens only, after the substituted candidate
            assert counts.item() == len(rest) and scores[i, k].item() == pytest.approx(sums.item() / len(rest))


def test_zeroshot_scores_winograd_over_several_checkpoints(make_cfg, pretrained, tmp_path):
    sample = _jsonl(tmp_path / "dprd.jsonl", DPRD)
    again = tmp_path / "again.ckpt"  # a second checkpoint (the same weights: the same score)
    shutil.copyfile(pretrained, again)
    cfg = make_cfg("zeroshot", ["task=winograd", f"ckpts=[{pretrained},{again}]"])
    cfg.task.dataset = cfg.task.dataset_config = None  # the paper's task YAML, on a local file in the hub's schema
    cfg.task.data_files = {"train": str(sample), "test": str(sample)}
    metrics = zeroshot(cfg)
    assert metrics["heuristic"] == "winograd" and metrics["examples"] == 4 and len(metrics["checkpoints"]) == 2
    assert all(0 <= c["accuracy"] <= 1 and "truncated" in c for c in metrics["checkpoints"])
    assert metrics["checkpoints"][0]["accuracy"] == metrics["checkpoints"][1]["accuracy"]

    wsc = _jsonl(tmp_path / "wsc.jsonl", WSC)
    cfg = make_cfg("zeroshot", ["task=wsc273", f"ckpts=[{pretrained}]"])
    cfg.task.dataset = cfg.task.dataset_config = None
    cfg.task.data_files = {"test": str(wsc)}
    assert zeroshot(cfg)["examples"] == 2


def test_the_sample_winograd_task_scores_its_24_schemas_from_the_command_line(pretrained, cache_dir, tmp_path):
    """experiments/conf/task/winograd_sample.yaml, run as its comment says (from the checkout, --config-dir): the
    paper's Winograd task on the repository's sample file, twin sentences whose labels alternate."""
    rows = [json.loads(line) for line in (REPO / "experiments" / "winograd_sample.jsonl").read_text().splitlines()]
    assert len(rows) == 24 and [r["label"] for r in rows[:4]] == [0, 1, 0, 1]
    assert all(r["pronoun"] in r["sentence"].split() or r["pronoun"] + "," in r["sentence"] for r in rows)
    run_gpt1(
        "zeroshot",
        "--config-dir",
        "experiments/conf",
        "task=winograd_sample",
        f"ckpts=[{pretrained}]",
        f"paths.cache_dir={cache_dir}",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=REPO,
    )
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    (scored,) = metrics["checkpoints"]
    assert metrics["heuristic"] == "winograd" and metrics["examples"] == 24 and 0 <= scored["accuracy"] <= 1
