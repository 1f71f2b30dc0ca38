"""Fine-tuning tasks: the YAMLs, the hub schemas (on local files written in them), the sample tasks, the paper's
transformations token by token, truncation, batches, bad inputs, the cache and the exact-resume order."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from omegaconf import OmegaConf

from gpt1.checkpoints.format import _plain
from gpt1.core.errors import ConfigError, DataError
from gpt1.data.loader import EpochSampler
from gpt1.model.lm_loss import IGNORE_INDEX
from gpt1.tasks.batches import PAD_ID, Collate, real_tokens
from gpt1.tasks.registry import get_task_type
from gpt1.tasks.spec import TASK_SPECIAL_TOKENS, TaskConfig, task_from_dict
from gpt1.tasks.task_data import TaskDataModule
from gpt1.tasks.task_type import Truncation, kept_lengths
from gpt1.text.tokenizer import Tokenizer, train_bpe

REPO = Path(__file__).resolve().parents[1]
TASK_DIR = REPO / "conf" / "task"
SAMPLE_TASKS = ["sentiment", "entailment", "nli", "similarity", "paraphrase", "multiple_choice", "story"]
PAPER_TASKS = [
    "sst2",
    "cola",
    "mnli",
    "snli",
    "scitail",
    "qnli",
    "rte",
    "stsb",
    "qqp",
    "mrpc",
    "race",
    "race_middle",
    "race_high",
    "story_cloze",
]
ZERO_SHOT_TASKS = ["winograd", "wsc273"]  # scored zero-shot only (section 5)


@pytest.fixture(scope="module")
def tokenizer(sample_data: Path) -> Tokenizer:
    """A small BPE trained on one sample novel, with the fine-tuning special tokens."""
    lines = (sample_data / "books" / "train" / "northanger_abbey.txt").read_text(encoding="utf-8").splitlines()
    tok = train_bpe(lines, vocab_size=1000)
    tok.add_special_tokens(TASK_SPECIAL_TOKENS)
    return tok


def task_yaml(name: str, sample_data: Path | str = "/nowhere", **overrides: Any) -> TaskConfig:
    """conf/task/NAME.yaml as the task group gives it (merged into the schema, ${paths.sample_data} resolved),
    with ``overrides`` on top."""
    root = OmegaConf.create({"paths": {"sample_data": str(sample_data)}})
    root.task = OmegaConf.merge(OmegaConf.structured(TaskConfig), OmegaConf.load(TASK_DIR / f"{name}.yaml"), overrides)
    return OmegaConf.to_object(root.task)


def module(
    task: TaskConfig | dict,
    tokenizer: Tokenizer,
    cache_dir: Path | None,
    n_ctx: int = 64,
    batch_size: int = 4,
    stage: str | None = None,
    **kwargs: Any,
) -> TaskDataModule:
    """A set-up data module (``stage`` "fit" also demands train and validation splits)."""
    dm = TaskDataModule(task, tokenizer, n_ctx=n_ctx, batch_size=batch_size, seed=0, cache_dir=cache_dir, **kwargs)
    dm.prepare_data()
    dm.setup(stage)
    return dm


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    """``rows`` as a file in the format of ``path``'s extension (jsonl, csv, tsv with minimal quoting, parquet)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter="\t" if path.suffix == ".tsv" else ",")
            writer.writeheader()
            writer.writerows(rows)
    return path


def local(tmp_path: Path, splits: dict[str, list[dict]], ext: str = "jsonl") -> dict[str, str]:
    return {name: str(write(tmp_path / f"{name}.{ext}", rows)) for name, rows in splits.items()}


def ids(tokenizer: Tokenizer, *parts: str | int) -> list[int]:
    """A sequence by hand: strings are encoded, ints (special ids) kept."""
    out: list[int] = []
    for p in parts:
        out += tokenizer.encode(p) if isinstance(p, str) else [p]
    return out


def sequences(dm: TaskDataModule, split: str, i: int) -> list[list[int]]:
    return [s.tolist() for s in dm.dataset(split)[i]["sequences"]]


# -- the YAMLs ------------------------------------------------------------------------------------------------


def test_every_task_yaml_is_a_valid_task_config() -> None:
    names = sorted(p.stem for p in TASK_DIR.glob("*.yaml"))
    assert names == sorted(SAMPLE_TASKS + PAPER_TASKS + ZERO_SHOT_TASKS)
    for name in names:
        task = task_yaml(name)
        assert task.name is None and task.metrics
        assert task_from_dict(_plain(task)) == task  # the checkpoint round trip
    assert task_yaml("sst2").zeroshot.heuristic == "verbalizer"
    assert task_yaml("sst2").zeroshot.words == ["negative", "positive"]
    assert task_yaml("sentiment").zeroshot.words == ["negative", "positive"]
    assert task_yaml("cola").zeroshot.heuristic == "mean_logprob" and task_yaml("cola").metrics == ["mcc"]
    assert task_yaml("race").zeroshot.heuristic is None  # the multiple-choice default
    assert task_yaml("mrpc").metrics[0] == "f1" and task_yaml("stsb").metrics == ["pearson", "spearman"]
    assert _plain(task_yaml("rte"))["type"] == "entailment"  # plain strings, not enums


def test_tasks_compose_under_finetune(make_cfg: Any) -> None:
    """The task group as gpt1 finetune composes it: sample paths, split lists, slices, list columns, scores."""
    for name in ("sentiment", "mnli", "story_cloze", "race", "stsb"):
        cfg = make_cfg("finetune", [f"task={name}"])
        task = OmegaConf.to_object(cfg.task)
        assert isinstance(task, TaskConfig) and task == task_yaml(name, cfg.paths.sample_data)


def test_task_config_rejects_inconsistent_settings(tmp_path: Path) -> None:
    base = {"type": "classification", "data_files": {"train": "t.jsonl"}, "text": "sentence"}
    bad = [
        ({"dataset": "glue"}, "both set"),
        ({"data_files": None}, "no data"),
        ({"type": "entailment"}, "text_pair"),
        ({"text_pair": "b"}, "one text"),
        ({"choices": ["a", "b"]}, "no choices"),
        ({"type": "multiple_choice"}, "task.choices"),
        ({"metrics": ["acc"]}, "choose among"),
        ({"metrics": ["pearson"]}, "do not suit"),
        ({"num_labels": 1}, "do not suit"),
        ({"num_labels": 3, "label_names": ["a", "b"]}, "2 names"),
        ({"type": "regression"}, "task.type"),
        ({"truncation": "middle"}, "task.truncation"),
        ({"splits": {"dev": "train"}}, "unknown role"),
        ({"splits": {"train": "training"}}, "not a key of task.data_files"),
        ({"data_files": {"train": "t.jsonl", "valid": "v.jsonl"}}, "task.data_files.valid is not used"),
        ({"text": []}, "task.text"),
    ]
    for change, message in bad:
        with pytest.raises(ConfigError, match=message):
            TaskConfig(**{**base, **change})
    with pytest.raises(ConfigError, match="task: "):
        task_from_dict({**base, "colour": "red"})  # a misspelt key


# -- the sample tasks -----------------------------------------------------------------------------------------

SAMPLE_COUNTS = {  # split sizes and label sets, from sample_data/manifest.json
    "sentiment": ((29048, 3631, 3631), {0, 1}),
    "entailment": ((1600, 200, 200), {0, 1}),
    "nli": ((12000, 1500, 1500), {0, 1, 2}),
    "similarity": ((799, 100, 100), None),
    "paraphrase": ((12000, 1500, 1500), {0, 1}),
    "multiple_choice": ((1799, 226, 224), {0, 1, 2, 3}),
    "story": ((800, 100, 100), {0, 1, 2, 3, 4}),
}


@pytest.mark.parametrize("name", SAMPLE_TASKS)
def test_sample_task_loads(name: str, sample_data: Path, tokenizer: Tokenizer, cache_dir: Path) -> None:
    dm = module(task_yaml(name, sample_data), tokenizer, cache_dir, stage="fit")
    counts, classes = SAMPLE_COUNTS[name]
    assert tuple(dm.stats[s]["examples"] for s in ("train", "validation", "test")) == counts
    assert all(s["dropped"] == 0 for s in dm.stats.values())
    assert dm.eval_splits == {"val": "validation", "test": "test"}  # every sample split is labelled
    for split in ("train", "validation", "test"):
        labels = dm.encoded[split].labels
        if classes is None:
            assert labels.dtype == np.float32 and 0 <= labels.min() and labels.max() <= 10
        else:
            assert set(labels.tolist()) == classes
    assert dm.task.num_labels == (1 if classes is None else len(classes))
    if name in ("nli", "entailment", "sentiment", "paraphrase"):
        assert len(dm.task.label_names) == dm.task.num_labels
    batch = next(iter(dm.train_dataloader()))
    shape = {"classification": (4,), "entailment": (4,), "similarity": (4, 2)}.get(str(dm.task.type))
    shape = shape or (4, len(classes))
    assert batch["extract"].shape == shape and batch["input_ids"].shape[:-1] == shape
    assert batch["labels"].shape == (4,)


def test_transformations_token_by_token(sample_data: Path, tokenizer: Tokenizer, cache_dir: Path) -> None:
    """The first row of a sample task of each type, written out by hand from its file."""
    S, D, X = (tokenizer.special_id(r) for r in TASK_SPECIAL_TOKENS)

    dm = module(task_yaml("sentiment", sample_data), tokenizer, cache_dir, n_ctx=512)
    fries = (
        "It is indeed possible to make fries using a very small amount of fat, but they are flabby and not a bit "
        "like real fries."
    )
    assert sequences(dm, "train", 0) == [ids(tokenizer, S, fries, X)]
    assert tokenizer.decode(sequences(dm, "train", 0)[0]) == fries.lower()
    assert dm.dataset("train")[0]["label"] == 0

    dm = module(task_yaml("entailment", sample_data), tokenizer, cache_dir, n_ctx=512)
    premise = (
        "Charlotte recognizes that Isabella believes that a woman is shaving the hair off of a black and white dog."
    )
    hypothesis = (
        "Isabella believes that Charlotte recognizes that a woman is shaving the hair off of a black and white dog."
    )
    assert sequences(dm, "train", 0) == [ids(tokenizer, S, premise, D, hypothesis, X)]

    dm = module(task_yaml("similarity", sample_data), tokenizer, cache_dir, n_ctx=512)
    assert sequences(dm, "train", 0) == [
        ids(tokenizer, S, "restless", D, "young", X),
        ids(tokenizer, S, "young", D, "restless", X),
    ]
    assert dm.dataset("train")[0]["label"] == pytest.approx(1.6)

    dm = module(task_yaml("multiple_choice", sample_data), tokenizer, cache_dir, n_ctx=512)
    context = "The most reasonable step of 'Insert Elastic Into Pant Legs' is"  # and an empty question
    choices = [
        "Sew along the edge of the hem",
        "Cut two 2-inch (508 centimeters) pieces of regular, 20-gauge beading wire",
        "Gather the necessary materials",
        "Make a coil by continuing to wrap the wire around the round nosed pliers",
    ]
    assert sequences(dm, "train", 0) == [ids(tokenizer, S, context, D, c, X) for c in choices]

    dm = module(task_yaml("story", sample_data), tokenizer, cache_dir, n_ctx=512)
    story = (
        "Marcie was sick. She was coughing and had a high temperature. She wanted nothing to eat or drink. "
        "However, her grandmother brought her come chicken soup and told her it would cure her. Marcie forced "
        "the soup down and soon got over her illness. This narrative is a good illustration of the following "
        "proverb:"
    )
    first = sequences(dm, "train", 0)
    assert len(first) == 5 and first[3] == ids(tokenizer, S, story, D, "Feed a cold and starve a fever", X)
    assert dm.dataset("train")[0]["label"] == 3


def test_special_token_text_is_text(tmp_path: Path, tokenizer: Tokenizer) -> None:
    files = local(tmp_path, {"train": [{"s": "_start_ _classify_", "label": 0}, {"s": "b", "label": 1}]})
    dm = module({"type": "classification", "data_files": files, "text": "s"}, tokenizer, None)
    inner = sequences(dm, "train", 0)[0][1:-1]
    assert inner and not set(inner) & set(tokenizer.specials.values())


# -- batches --------------------------------------------------------------------------------------------------


def test_classification_batch(tmp_path: Path, tokenizer: Tokenizer) -> None:
    files = local(tmp_path, {"train": [{"s": "the lady", "y": 1}, {"s": "a very long and tiresome walk", "y": 0}]})
    dm = module({"type": "classification", "data_files": files, "text": "s", "label": "y"}, tokenizer, None)
    batch = Collate(get_task_type("classification"), regression=False)([dm.dataset("train")[i] for i in range(2)])
    seqs = [sequences(dm, "train", i)[0] for i in range(2)]
    T = max(map(len, seqs))
    assert batch["input_ids"].shape == batch["targets"].shape == (2, T) and batch["input_ids"].dtype == torch.long
    for b, seq in enumerate(seqs):
        n = len(seq)
        assert batch["input_ids"][b, :n].tolist() == seq and (batch["input_ids"][b, n:] == PAD_ID).all()
        assert batch["targets"][b, : n - 1].tolist() == seq[1:]  # every real token after the first is predicted
        assert (batch["targets"][b, n - 1 :] == IGNORE_INDEX).all()
        assert batch["extract"][b] == n - 1 and batch["input_ids"][b, n - 1] == tokenizer.special_id("extract")
    assert batch["labels"].tolist() == [1, 0] and batch["index"].tolist() == [0, 1]


def test_similarity_batch_has_both_orderings(tmp_path: Path, tokenizer: Tokenizer) -> None:
    rows = [{"a": "the house", "b": "a large old house", "score": 3.5}, {"a": "walk", "b": "run", "score": 1.0}]
    files = local(tmp_path, {"train": rows}, "tsv")
    task = {
        "type": "similarity",
        "data_files": files,
        "text": "a",
        "text_pair": "b",
        "label": "score",
        "num_labels": 1,
        "metrics": ["pearson"],
    }
    dm = module(task, tokenizer, None, batch_size=2)
    batch = Collate(get_task_type("similarity"), regression=True)([dm.dataset("train")[i] for i in range(2)])
    S, D, X = (tokenizer.special_id(r) for r in TASK_SPECIAL_TOKENS)
    assert batch["input_ids"].shape[:2] == (2, 2) and batch["extract"].shape == (2, 2)
    assert batch["targets"].shape == batch["input_ids"].shape
    for b, row in enumerate(rows):
        forward, backward = ids(tokenizer, S, row["a"], D, row["b"], X), ids(tokenizer, S, row["b"], D, row["a"], X)
        assert batch["input_ids"][b, 0, : len(forward)].tolist() == forward
        assert batch["input_ids"][b, 1, : len(backward)].tolist() == backward
        assert batch["extract"][b].tolist() == [len(forward) - 1, len(backward) - 1]
    assert batch["labels"].dtype == torch.float32 and batch["labels"].tolist() == [3.5, 1.0]


def test_multiple_choice_rows_with_fewer_choices_are_masked(tmp_path: Path, tokenizer: Tokenizer) -> None:
    rows = [
        {"q": "pick one", "options": ["a", "b"], "answer": "B"},
        {"q": "and now", "options": ["c", "d", "e", "f"], "answer": "D"},
        {"q": "three", "options": ["g", "h", "i"], "answer": "A"},
    ]
    files = local(tmp_path, {"train": rows}, "parquet")
    task = {
        "type": "multiple_choice",
        "data_files": files,
        "text": "q",
        "choices": "options",
        "label": "answer",
        "label_names": ["A", "B", "C", "D"],
    }
    dm = module(task, tokenizer, None, batch_size=3)
    assert dm.task.num_labels == 4 and dm.train_labels().tolist() == [1, 3, 0]
    items = [dm.dataset("train")[i] for i in range(3)]
    batch = Collate(get_task_type("multiple_choice"), regression=False)(items)
    assert batch["input_ids"].shape[:2] == (3, 4) and batch["targets"].shape[:2] == (3, 4)
    assert real_tokens(batch) == sum(len(seq) for it in items for seq in it["sequences"]) < batch["input_ids"].numel()
    assert batch["choice_mask"].tolist() == [[True, True, False, False], [True] * 4, [True, True, True, False]]
    dummy = batch["input_ids"][0, 2:]
    assert (dummy == PAD_ID).all() and (batch["targets"][0, 2:] == IGNORE_INDEX).all()
    S, D, X = (tokenizer.special_id(r) for r in TASK_SPECIAL_TOKENS)
    expected = ids(tokenizer, S, "and now", D, "e", X)
    assert batch["input_ids"][1, 2, : len(expected)].tolist() == expected

    # Choices in columns: a trailing null is a missing choice; one in the middle is an error naming the row.
    cols = [
        {"ctx": "x", "c1": "a", "c2": "b", "c3": None, "label": 1},
        {"ctx": "y", "c1": "a", "c2": "b", "c3": "c", "label": 2},
    ]
    files = local(tmp_path / "cols", {"train": cols})
    task = {"type": "multiple_choice", "data_files": files, "text": "ctx", "choices": ["c1", "c2", "c3"]}
    dm = module(task, tokenizer, None)
    assert np.diff(dm.encoded["train"].choice_offsets).tolist() == [2, 3]  # choices per row
    cols[1]["c2"] = None
    files = local(tmp_path / "middle", {"train": cols})
    with pytest.raises(DataError, match=r"train.jsonl:2: choice column 'c2' is empty but a later one is not"):
        module({**task, "data_files": files}, tokenizer, None)
    cols[1]["c2"], cols[0]["label"] = "b", 2
    files = local(tmp_path / "absent", {"train": cols})
    with pytest.raises(DataError, match=r"train.jsonl:1: label 2 picks choice 2 but the row has 2 choices"):
        module({**task, "data_files": files}, tokenizer, None)


# -- truncation -----------------------------------------------------------------------------------------------


def test_kept_lengths() -> None:
    original, longest = Truncation.original, Truncation.longest_first
    assert kept_lengths(10, 10, 512, original) == (10, 10)
    assert kept_lengths(400, 3, 512, original) == (254, 3)  # the original's n_ctx // 2 - 2, even with room to spare
    assert kept_lengths(400, 3, 512, longest) == (400, 3)  # only what does not fit is cut,
    assert kept_lengths(600, 3, 512, longest) == (506, 3)  # from the longer text,
    assert kept_lengths(400, 300, 512, longest) == (255, 254)  # until both are cut level
    assert kept_lengths(3, 600, 512, longest) == (3, 506)
    assert kept_lengths(10, 10, 10, longest) == (4, 3)  # as transformers' longest_first: ties cut the second
    a, b = np.array([1, 8, 2]), np.array([8, 1, 2])
    ka, kb = kept_lengths(a, b, 10, longest)
    assert ka.tolist() == [1, 6, 2] and kb.tolist() == [6, 1, 2]


@pytest.mark.parametrize("truncation", ["original", "longest_first"])
def test_truncation_is_counted(tmp_path: Path, tokenizer: Tokenizer, truncation: str) -> None:
    long = " ".join(["the"] * 30)
    rows = [
        {"p": "the", "h": "the", "label": 0},
        {"p": long, "h": "the", "label": 1},
        {"p": long, "h": long, "label": 0},
    ]
    files = local(tmp_path, {"train": rows, "validation": rows})
    task = {"type": "entailment", "data_files": files, "text": "p", "text_pair": "h", "truncation": truncation}
    dm = module(task, tokenizer, None, n_ctx=16)
    assert dm.stats["train"] == {"examples": 3, "truncated": 2, "dropped": 0}
    the = tokenizer.encode("the")
    assert len(the) == 1
    lengths = [len(sequences(dm, "train", i)[0]) for i in range(3)]
    assert lengths == ([5, 10, 15] if truncation == "original" else [5, 16, 16])
    S, D, X = (tokenizer.special_id(r) for r in TASK_SPECIAL_TOKENS)
    if truncation == "original":  # each text keeps its first (16 - 3) // 2 = 6 tokens
        assert sequences(dm, "train", 2)[0] == [S, *the * 6, D, *the * 6, X]
    else:
        assert sequences(dm, "train", 1)[0] == [S, *the * 12, D, *the, X]

    single = {"type": "classification", "data_files": files, "text": "p", "truncation": truncation}
    dm = module(single, tokenizer, None, n_ctx=16)
    assert dm.stats["validation"]["truncated"] == 2 and len(sequences(dm, "validation", 1)[0]) == 16


# -- the paper's tasks on local files in their hub schemas -----------------------------------------------------


def glue_rows(columns: tuple[str, ...], labels: list[Any], offset: int = 0) -> list[dict[str, Any]]:
    texts = ["a gripping, funny film", "dull and slow", "nobody said that", 'what a day, "really"']
    return [
        {**{c: f"{texts[(i + j) % 4]} {c}" for j, c in enumerate(columns)}, "label": y, "idx": offset + i}
        for i, y in enumerate(labels)
    ]


GLUE = {  # task -> text columns, (train labels, validation labels), num_labels, label names
    "sst2": (("sentence",), ([1, 0, 1], [0, 1]), 2, ["negative", "positive"]),
    "cola": (("sentence",), ([1, 1, 0], [0, 1]), 2, ["unacceptable", "acceptable"]),
    "qnli": (("question", "sentence"), ([0, 1, 1], [1, 0]), 2, ["entailment", "not_entailment"]),
    "rte": (("sentence1", "sentence2"), ([0, 1, 0], [1, 1]), 2, ["entailment", "not_entailment"]),
    "mrpc": (("sentence1", "sentence2"), ([1, 0, 0], [1, 0]), 2, ["not_equivalent", "equivalent"]),
    "qqp": (("question1", "question2"), ([0, 0, 1], [1, 0]), 2, ["not_duplicate", "duplicate"]),
    "stsb": (("sentence1", "sentence2"), ([4.75, 0.0, 2.5], [5.0, 1.25]), 1, None),
}


def hub_as_local(name: str, files: dict[str, str]) -> TaskConfig:
    """The task's YAML with its hub dataset replaced by local files holding the same splits."""
    return task_yaml(name, dataset=None, dataset_config=None, data_dir=None, data_files=files)


@pytest.mark.parametrize("name", list(GLUE))
def test_glue_mapping(name: str, tmp_path: Path, tokenizer: Tokenizer) -> None:
    columns, (train, validation), num_labels, names = GLUE[name]
    missing = -1.0 if num_labels == 1 else -1
    files = local(
        tmp_path,
        {
            "train": glue_rows(columns, train),
            "validation": glue_rows(columns, validation),
            "test": glue_rows(columns, [missing] * 2),
        },
    )  # GLUE's hidden test labels
    dm = module(hub_as_local(name, files), tokenizer, None)
    assert dm.task.num_labels == num_labels and dm.task.label_names == names
    assert dm.train_labels().tolist() == train and dm.encoded["validation"].labels.tolist() == validation
    assert not dm.has_labels("test") and dm.eval_splits == {"val": "validation"}
    assert dm.stats["test"] == {"examples": 2, "truncated": 0, "dropped": 0}
    predict = next(iter(dm.predict_dataloader()))
    assert "labels" not in predict and predict["index"].tolist() == [0, 1]
    assert dm.test_dataloader() == []  # no labelled test split: no test metrics
    shape = (3, 2) if dm.task.type == "similarity" else (3,)
    assert next(iter(dm.loader(dm.dataset("train"), 3, collate_fn=dm.collate())))["extract"].shape == shape


def test_mnli_matched_and_mismatched(tmp_path: Path, tokenizer: Tokenizer) -> None:
    cols = ("premise", "hypothesis")
    files = local(
        tmp_path,
        {
            "train": glue_rows(cols, [0, 1, 2, 1]),
            "validation_matched": glue_rows(cols, [2, 0]),
            "validation_mismatched": glue_rows(cols, [1, 1, 0]),
            "test_matched": glue_rows(cols, [-1, -1]),
            "test_mismatched": glue_rows(cols, [-1]),
        },
    )
    dm = module(hub_as_local("mnli", files), tokenizer, None)
    assert dm.roles == {
        "train": ["train"],
        "validation": ["validation_matched", "validation_mismatched"],
        "test": ["test_matched", "test_mismatched"],
    }
    assert dm.eval_splits == {"val": "validation_matched", "val_mismatched": "validation_mismatched"}
    val = dm.val_dataloader()
    assert isinstance(val, list) and [len(loader.dataset) for loader in val] == [2, 3]
    assert [len(loader.dataset) for loader in dm.predict_dataloader()] == [2, 1]
    assert dm.encoded["validation_mismatched"].labels.tolist() == [1, 1, 0]
    assert dm.task.num_labels == 3 and dm.task.label_names == ["entailment", "neutral", "contradiction"]


def test_snli_drops_pairs_without_a_gold_label(tmp_path: Path, tokenizer: Tokenizer) -> None:
    cols = ("premise", "hypothesis")
    files = local(
        tmp_path,
        {
            "train": glue_rows(cols, [0, -1, 2, 1, -1]),
            "validation": glue_rows(cols, [-1, 1]),
            "test": glue_rows(cols, [2, -1, 0]),
        },
    )
    dm = module(hub_as_local("snli", files), tokenizer, None)
    assert dm.train_labels().tolist() == [0, 2, 1] and dm.encoded["train"].index.tolist() == [0, 2, 3]
    assert {s: (v["examples"], v["dropped"]) for s, v in dm.stats.items()} == {
        "train": (3, 2),
        "validation": (1, 1),
        "test": (2, 1),
    }
    assert dm.eval_splits == {"val": "validation", "test": "test"}
    assert next(iter(dm.test_dataloader()))["index"].tolist() == [0, 2]


def test_scitail_string_labels_in_quoted_tsv(tmp_path: Path, tokenizer: Tokenizer) -> None:
    rows = [
        {"premise": 'He said "hi",\tthen left.', "hypothesis": "He left.", "label": "entails"},
        {"premise": "Cells divide.", "hypothesis": 'The "cell" grows', "label": "neutral"},
    ]
    files = local(tmp_path, {"train": rows, "validation": rows[::-1], "test": rows}, "tsv")
    assert '"He said ""hi"",\tthen left."' in Path(files["train"]).read_text()  # a quoted field with a tab
    dm = module(hub_as_local("scitail", files), tokenizer, None, n_ctx=128)
    assert dm.train_labels().tolist() == [0, 1] and dm.encoded["validation"].labels.tolist() == [1, 0]
    S, D, X = (tokenizer.special_id(r) for r in TASK_SPECIAL_TOKENS)
    assert sequences(dm, "train", 0) == [ids(tokenizer, S, 'He said "hi",\tthen left.', D, "He left.", X)]


def test_race_letters_and_option_lists(tmp_path: Path, tokenizer: Tokenizer) -> None:
    def rows(answers: str) -> list[dict[str, Any]]:
        return [
            {
                "example_id": f"high{i}.txt",
                "article": "Tom went home early.",
                "question": "Where did Tom go?",
                "options": ["home", "school", "away", "out"],
                "answer": a,
            }
            for i, a in enumerate(answers)
        ]

    files = local(tmp_path, {"train": rows("ADBC"), "validation": rows("CA"), "test": rows("B")}, "parquet")
    for name in ("race", "race_middle", "race_high"):
        dm = module(hub_as_local(name, files), tokenizer, None)
        assert dm.train_labels().tolist() == [0, 3, 1, 2] and dm.task.num_labels == 4
        assert dm.eval_splits == {"val": "validation", "test": "test"}
    S, D, X = (tokenizer.special_id(r) for r in TASK_SPECIAL_TOKENS)
    context = "Tom went home early. Where did Tom go?"
    assert sequences(dm, "train", 0) == [ids(tokenizer, S, context, D, o, X) for o in ("home", "school", "away", "out")]
    assert next(iter(dm.train_dataloader()))["input_ids"].shape[:2] == (4, 4)


def test_story_cloze_reads_the_original_files_and_trains_on_the_validation_set(
    tmp_path: Path, tokenizer: Tokenizer
) -> None:
    def rows(n: int) -> list[dict[str, Any]]:
        return [
            {
                "InputStoryid": f"s{i}",
                **{f"InputSentence{k}": f"Sentence {k}." for k in range(1, 5)},
                "RandomFifthSentenceQuiz1": "A good end.",
                "RandomFifthSentenceQuiz2": "A bad end.",
                "AnswerRightEnding": 1 + i % 2,
            }
            for i in range(n)
        ]

    # the file names of the distribution (obtained by request), found through task.data_dir
    write(tmp_path / "cloze_test_val__spring2016 - cloze_test_ALL_val.csv", rows(380))
    write(tmp_path / "cloze_test_test__spring2016 - cloze_test_ALL_test.csv", rows(3))
    root = OmegaConf.create({"paths": {"sample_data": "/nowhere"}})
    yaml = OmegaConf.load(TASK_DIR / "story_cloze.yaml")
    root.task = OmegaConf.merge(OmegaConf.structured(TaskConfig), yaml, {"data_dir": str(tmp_path)})
    dm = module(OmegaConf.to_object(root.task), tokenizer, None)
    assert dm.stats["train"]["examples"] == 6 and dm.stats["validation"]["examples"] == 374  # the original's split
    held_in = np.random.RandomState(3535999445).permutation(380)[374:]  # train_test_split's (tests/test_fidelity.py)
    assert dm.encoded["train"].index.tolist() == held_in.tolist()
    assert dm.train_labels().tolist() == (held_in % 2).tolist() and dm.encoded["test"].labels.tolist() == [0, 1, 0]
    S, D, X = (tokenizer.special_id(r) for r in TASK_SPECIAL_TOKENS)
    story = "Sentence 1. Sentence 2. Sentence 3. Sentence 4."
    assert sequences(dm, "test", 0) == [
        ids(tokenizer, S, story, D, "A good end.", X),
        ids(tokenizer, S, story, D, "A bad end.", X),
    ]


# -- messy local files ------------------------------------------------------------------------------------------


def test_messy_local_files(tmp_path: Path, tokenizer: Tokenizer) -> None:
    """Other column names, string labels with gaps, a test file without labels, several files per split, slices."""
    train = [
        {"claim": "x", "verdict": "yes"},
        {"claim": "y", "verdict": ""},
        {"claim": "z", "verdict": None},
        {"claim": 1984, "verdict": "no"},
    ]
    write(tmp_path / "train" / "a.jsonl", train[:2])
    write(tmp_path / "train" / "b.jsonl", train[2:])
    write(tmp_path / "dev.csv", [{"claim": "w, quoted", "verdict": "no"}, {"claim": "v", "verdict": "yes"}])
    write(tmp_path / "test.csv", [{"claim": "u"}, {"claim": "t"}, {"claim": "s"}])
    task = {
        "type": "classification",
        "text": "claim",
        "label": "verdict",
        "label_names": ["no", "yes"],
        "data_files": {
            "train": str(tmp_path / "train" / "*.jsonl"),
            "dev": str(tmp_path / "dev.csv"),
            "test": str(tmp_path / "test.csv"),
        },
        "splits": {"train": "train", "validation": "dev", "test": "test[1:]"},
    }
    dm = module(task, tokenizer, tmp_path / "cache")
    assert dm.train_labels().tolist() == [1, 0] and dm.stats["train"] == {"examples": 2, "truncated": 0, "dropped": 2}
    assert dm.splits["train"].read().text == ["x", "1984"]
    assert not dm.has_labels("test") and dm.encoded["test"].index.tolist() == [1, 2]
    assert dm.splits["validation"].read().text == ["w, quoted", "v"]


def test_unquoted_tsv_files_read_with_quoting_none(tmp_path: Path, tokenizer: Tokenizer, caplog: Any) -> None:
    """GLUE's .tsv files are not quoted, and a sentence may start with a double quote: task.quoting=none reads every
    row, the quotes as text; the default (RFC 4180, as the sample data's .tsv) runs such a field to the next quote,
    swallowing rows, and says so."""
    first = {1: '"Hi, he said', 3: "she left"}
    second = {3: 'ok" she said', 4: '"Go" now'}
    lines = ["index\tsentence1\tsentence2\tlabel"] + [
        f"{i}\t{first.get(i, 'a man walks')}\t{second.get(i, 'he moves')}\t{'yes' if i % 2 else 'no'}" for i in range(6)
    ]
    (tmp_path / "glue.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    task = {
        "type": "entailment",
        "text": "sentence1",
        "text_pair": "sentence2",
        "label_names": ["no", "yes"],
        "data_files": {"train": str(tmp_path / "glue.tsv"), "validation": str(tmp_path / "glue.tsv")},
    }
    dm = module({**task, "quoting": "none"}, tokenizer, tmp_path / "cache")
    examples = dm.splits["train"].read()
    assert dm.train_labels().tolist() == [0, 1, 0, 1, 0, 1] and examples.text[1] == '"Hi, he said'
    assert examples.pair[3:5] == ['ok" she said', '"Go" now']
    assert "quoting" not in caplog.text
    dm = module(task, tokenizer, tmp_path / "cache")  # another cache key: the rows differ
    assert len(dm.train_labels()) < 6
    assert "rows read from 6 lines" in caplog.text and "set task.quoting=none" in caplog.text


def test_labels_inferred_from_the_data(tmp_path: Path, tokenizer: Tokenizer) -> None:
    files = local(
        tmp_path, {"train": [{"t": "a", "label": 2}, {"t": "b", "label": 0.0}], "validation": [{"t": "c", "label": 1}]}
    )
    dm = module({"type": "classification", "data_files": files, "text": "t"}, tokenizer, None)
    assert dm.task.num_labels == 3 and dm.task.label_names is None and dm.train_labels().tolist() == [2, 0]
    files = local(tmp_path / "cl", {"train": [{"t": "a", "label": 1}]}, "parquet")
    table = pq.read_table(files["train"])  # a parquet file written by datasets: a ClassLabel column
    features = {"t": {"dtype": "string", "_type": "Value"}, "label": {"names": ["bad", "good"], "_type": "ClassLabel"}}
    meta = {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
    pq.write_table(table.replace_schema_metadata(meta), files["train"])
    dm = module({"type": "classification", "data_files": files, "text": "t"}, tokenizer, None)
    assert dm.task.label_names == ["bad", "good"] and dm.task.num_labels == 2


# -- bad inputs: one line naming the file, row, column or key ------------------------------------------------------


def bad(tmp_path: Path, tokenizer: Tokenizer, task: dict[str, Any], message: str, error: type = DataError) -> None:
    with pytest.raises(error, match=message) as info:
        module(task, tokenizer, tmp_path / "cache", stage="fit")
    assert "\n" not in str(info.value)


def test_bad_inputs(tmp_path: Path, tokenizer: Tokenizer) -> None:
    base = {"type": "classification", "text": "sentence", "label_names": ["neg", "pos"]}
    ok = [{"sentence": "fine", "label": "pos"}, {"sentence": "bad", "label": "neg"}]

    files = local(tmp_path / "a", {"train": ok + [{"sentence": "meh", "label": "neutral"}]})
    bad(
        tmp_path,
        tokenizer,
        {**base, "data_files": files},
        r"a/train.jsonl:3: label 'neutral' in column 'label' is not one of task.label_names \['neg', 'pos'\]",
    )

    files = local(
        tmp_path / "b",
        {
            "train": [{"sentence": "x", "label": 0}, {"sentence": "y", "label": 5}],
            "validation": [{"sentence": "z", "label": 1}],
        },
    )
    bad(
        tmp_path,
        tokenizer,
        {"type": "classification", "text": "sentence", "num_labels": 2, "data_files": files},
        r"b/train.jsonl:2: label 5 is out of range for 2 classes \(task.num_labels=2\)",
    )

    files = local(tmp_path / "c", {"train": [{"sentence": "x", "label": -1}], "validation": ok})
    bad(tmp_path, tokenizer, {**base, "data_files": files}, r"c/train.jsonl: no row has a label in column 'label'")

    files = local(tmp_path / "d", {"train": ok, "validation": ok})
    Path(files["train"]).write_text("")
    bad(tmp_path, tokenizer, {**base, "data_files": files}, r"d/train.jsonl is empty")

    files = local(tmp_path / "e", {"train": [{"text": "x", "label": "pos"}]})
    bad(
        tmp_path,
        tokenizer,
        {**base, "data_files": files},
        r"e/train.jsonl: no column 'sentence' \(task.text\); its columns are \['text', 'label'\]",
    )

    files = local(tmp_path / "f", {"train": ok, "validation": [{"sentence": "x"}]}, "csv")
    bad(
        tmp_path,
        tokenizer,
        {**base, "data_files": files},
        r"f/validation.csv: no label column 'label' \(task.label\); its columns are \['sentence'\]",
    )

    files = local(tmp_path / "g", {"train": ok * 3})
    with open(files["train"], "a") as f:
        f.write('{"sentence": "broken", "label": "pos"\n{"sentence": "fine", "label": "pos"}\n')
    bad(tmp_path, tokenizer, {**base, "data_files": files}, r"g/train.jsonl:7: not valid JSON")
    Path(files["train"]).write_text('{"sentence": "x", "label": "pos"\n')  # the very first line
    bad(tmp_path, tokenizer, {**base, "data_files": files}, r"g/train.jsonl:1: not valid JSON")

    files = local(tmp_path / "h", {"train": ok}, "csv")
    with open(files["train"], "a") as f:
        f.write("one,pos,extra\n")
    bad(tmp_path, tokenizer, {**base, "data_files": files}, r"h/train.csv:4: 3 fields where the header has 2")

    bad(
        tmp_path,
        tokenizer,
        {**base, "data_files": {"train": str(tmp_path / "nowhere" / "*.jsonl")}},
        r"task.data_files.train: '.*nowhere/\*.jsonl' matches no file",
    )

    files = local(tmp_path / "i", {"train": ok}, "csv")
    os.rename(files["train"], tmp_path / "i" / "train.xlsx")
    bad(
        tmp_path,
        tokenizer,
        {**base, "data_files": {"train": str(tmp_path / "i" / "train.xlsx")}},
        r"unsupported file type '.xlsx'",
    )

    files = local(tmp_path / "j", {"train": [{"sentence": ["a", "list"], "label": "pos"}]})
    bad(tmp_path, tokenizer, {**base, "data_files": files}, r"j/train.jsonl:1: column 'sentence' holds a list")

    files = local(tmp_path / "k", {"train": [{"sentence": "x", "label": "4.5"}]})
    bad(
        tmp_path,
        tokenizer,
        {"type": "classification", "text": "sentence", "data_files": files},
        r"k/train.jsonl:1: label '4.5' in column 'label' is not a class index",
    )

    for ext in ("jsonl", "csv"):  # invalid UTF-8: the file, line and byte
        files = local(tmp_path / "l", {"train": ok * 2}, ext)
        data = Path(files["train"]).read_bytes()
        Path(files["train"]).write_bytes(data.replace(b"bad", b"b\xffd", 1))
        line = 3 if ext == "csv" else 2
        bad(
            tmp_path,
            tokenizer,
            {**base, "data_files": files},
            rf"l/train.{ext}:{line}: invalid UTF-8 \(byte {data.index(b'bad') + 1} of the file\)",
        )

    files = local(tmp_path / "m", {"train": ok})  # nothing to validate on
    bad(tmp_path, tokenizer, {**base, "data_files": files}, r"task task has no validation split", ConfigError)


# -- the cache ------------------------------------------------------------------------------------------------


def test_cache_skips_reading_and_follows_the_files(
    tmp_path: Path, tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [{"s": "the first", "label": 0}, {"s": "and the second", "label": 1}]
    files = local(tmp_path, {"train": rows})
    task = {"type": "classification", "data_files": files, "text": "s"}
    first = module(task, tokenizer, tmp_path / "cache")
    assert len(list((tmp_path / "cache" / "tasks").glob("*.npz"))) == 1

    from gpt1.tasks.split import TaskSplit

    def no_reading(self: Any) -> None:
        raise AssertionError("read although cached")

    with monkeypatch.context() as m:
        m.setattr(TaskSplit, "read", no_reading)
        again = module(task, tokenizer, tmp_path / "cache")
    assert sequences(again, "train", 1) == sequences(first, "train", 1)
    assert again.train_labels().tolist() == [0, 1] and again.stats == first.stats

    write(Path(files["train"]), rows[::-1])  # new contents: re-read
    os.utime(files["train"], ns=(1, 1))
    changed = module(task, tokenizer, tmp_path / "cache")
    assert changed.train_labels().tolist() == [1, 0]


# -- training order and exact resume ------------------------------------------------------------------------------


def test_epoch_sampler() -> None:
    full = list(EpochSampler(10, seed=3, batch_size=10, epoch=2))
    assert sorted(full) == list(range(10)) and full == list(EpochSampler(10, seed=3, batch_size=10, epoch=2))
    assert full != list(EpochSampler(10, seed=3, batch_size=10, epoch=1))
    assert full != list(EpochSampler(10, seed=4, batch_size=10, epoch=2))
    consumed = [4]
    resumed = EpochSampler(10, seed=3, batch_size=10, epoch=2, consumed=lambda: consumed[0])
    assert list(resumed) == full[4:] and len(resumed) == 10  # the epoch's length, for Lightning's counters
    consumed[0] = 0  # a new epoch (Lightning resets its counter): whole
    resumed.set_epoch(3)
    assert list(resumed) == list(EpochSampler(10, seed=3, batch_size=10, epoch=3))
    shards = [list(EpochSampler(10, seed=3, batch_size=10, epoch=2, num_replicas=2, rank=r)) for r in (0, 1)]
    assert sorted(shards[0] + shards[1]) == list(range(10)) and shards[0] == full[0::2]
    resumed = EpochSampler(10, seed=3, batch_size=10, epoch=2, consumed=lambda: 2, num_replicas=2, rank=1)
    assert list(resumed) == full[1::2][2:]
    assert isinstance(EpochSampler(4, 0, 4), torch.utils.data.DistributedSampler)  # so Lightning does not re-wrap it


def test_train_loader_resumes_mid_epoch(tmp_path: Path, tokenizer: Tokenizer) -> None:
    files = local(tmp_path, {"train": [{"s": f"row {i}", "label": i % 2} for i in range(23)]})
    dm = module({"type": "classification", "data_files": files, "text": "s"}, tokenizer, None, batch_size=4)

    def run(epoch: int, processed: int, world_size: int = 1, rank: int = 0) -> list[list[int]]:
        progress = SimpleNamespace(current=SimpleNamespace(processed=processed))
        dm.trainer = SimpleNamespace(
            current_epoch=epoch,
            world_size=world_size,
            global_rank=rank,
            fit_loop=SimpleNamespace(epoch_loop=SimpleNamespace(batch_progress=progress)),
        )
        return [b["index"].tolist() for b in dm.train_dataloader()]

    whole = run(epoch=1, processed=0)  # whole batches only: 3 of the 23 rows left out of the epoch, as the original
    assert len({i for b in whole for i in b}) == 20 and len(whole) == 5 and all(len(b) == 4 for b in whole)
    assert run(epoch=1, processed=4) == whole[4:]  # a run stopped after 4 batches continues with the 5th
    assert run(epoch=2, processed=0) != whole
    shards = [run(epoch=1, processed=0, world_size=2, rank=r) for r in (0, 1)]
    assert run(epoch=1, processed=1, world_size=2, rank=1) == shards[1][1:]


@pytest.mark.parametrize("name", ["sentiment", "multiple_choice"])
def test_evaluation_batches_come_longest_first(
    name: str, sample_data: Path, tokenizer: Tokenizer, cache_dir: Path
) -> None:
    """Every validation example once, in batches of similar lengths: far less padding than in file order."""
    dm = module(task_yaml(name, sample_data), tokenizer, cache_dir, n_ctx=512, batch_size=32, stage="validate")
    batches = list(dm.val_dataloader())
    index = torch.cat([b["index"] for b in batches])
    assert sorted(index.tolist()) == sorted(dm.encoded["validation"].index.tolist())
    longest = [int(b["extract"].max()) for b in batches]
    assert longest == sorted(longest, reverse=True)
    padded = sum(b["input_ids"].numel() for b in batches)
    in_order = sum(b["input_ids"].numel() for b in dm.loader(dm.dataset("validation"), 32, collate_fn=dm.collate()))
    assert padded < 0.8 * in_order
