"""What a user reads and what a small or untidy input does: a corpus of a few KB (fewer batches an epoch than the
validation interval, an invalid UTF-8 byte) pre-trains; the run's output is free of library noise; generated text
reads like text; a multiple-choice task whose rows have different numbers of choices, and texts longer than the
context, fine-tunes, the truncated examples counted in metrics.json. Each through the CLI, in a subprocess."""

import csv
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import run_gpt1

NOISE = [
    "💡",
    "litlogger",
    "litmodels",
    "LeafSpec",
    "_pytree",
    "FLOPs",
    "Epoch 0/-",
    "weights_only",
    "smaller than the logging interval",
    "to estimate number of stepping batches",
    "overridden `on_before_batch",
    "not supported by the model summary",
    "requested to overfit",
    "Downloading data",
    "Total params",  # Lightning's model table (plain or rich's box): the command's model line says it
    "┏",
    "GPU available",
    "TPU available",
    "exists and is not empty",
    "anonymous setting",
]
"""Library output that says nothing to a user (issue 6): none of it may appear in a run's output."""


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, sample_data) -> tuple[Path, subprocess.CompletedProcess]:
    """The quickstart recipe (the tiny model) on a corpus of 2 KB with an invalid UTF-8 byte: 3 batches an epoch,
    validation every 5 batches, 10 updates, the progress bar on."""
    d = tmp_path_factory.mktemp("small")
    text = (sample_data / "books/train/emma.txt").read_bytes()[:2000]
    (d / "small.txt").write_bytes(text[:1000] + b"\xff" + text[1000:])
    (d / "held_out.txt").write_bytes((sample_data / "books/valid/persuasion.txt").read_bytes()[:3000])
    run = d / "run"
    proc = run_gpt1(
        "pretrain",
        "experiment=quickstart",
        "model=tiny",
        "tokenizer.vocab_size=300",
        "data.train_files=small.txt",
        "data.valid_files=held_out.txt",
        "data.batch_size=8",
        "logger=csv",
        "trainer.max_steps=10",
        "trainer.val_check_interval=5",
        "callbacks.samples.every_n_steps=5",
        "callbacks.samples.max_new_tokens=8",
        "trainer.enable_progress_bar=true",
        "paths.cache_dir=cache",
        f"hydra.run.dir={run}",
        cwd=d,
    )
    return run, proc


def test_a_corpus_of_fewer_batches_than_the_validation_interval_trains(small_run):
    run, _ = small_run
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == 10 and metrics["val_ppl"] > 0
    with open(run / "csv" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert max(int(r["epoch"]) for r in rows if r["epoch"]) >= 3  # epochs of 3 batches (or fewer): 4 or more epochs
    validated = sorted({int(r["step"]) for r in rows if r.get("val/loss")})
    assert validated[:2] == [4, 9]  # after batches 5 and 10, counted across epochs (then the final validation)


def test_a_corpus_of_ones_own_prompts_its_samples_with_its_validation_texts_first_words(small_run):
    _, proc = small_run  # held_out.txt: Persuasion, which opens "Persuasion by Jane Austen (1818) Chapter 1 ..."
    assert "[sample @ step 5] persuasion by jane austen" in proc.stdout, proc.stdout
    assert "truth universally" not in proc.stdout  # not the quickstart's Austen prompt


def test_invalid_utf8_in_a_text_file_is_replaced_and_counted(small_run):
    _, proc = small_run
    warning = "small.txt: 1 invalid UTF-8 byte sequence replaced with U+FFFD (the first at byte 1000 of the file)"
    assert warning in proc.stdout


def test_a_run_prints_no_library_noise(small_run):
    _, proc = small_run
    output = proc.stdout + proc.stderr
    assert re.search(r"^model: [\d,]+ parameters, vocab \d+, context \d+; on cpu$", proc.stdout, re.M), proc.stdout
    # in a log file (stderr is not a terminal) progress is a line per tenth of the budget, counting to it
    assert re.search(r"^step 10/10 \(100%\), .* elapsed", proc.stderr, re.M), proc.stderr
    for noise in NOISE:
        assert noise not in output, noise


def test_generated_text_reads_like_text(small_run, tmp_path):
    run, _ = small_run
    proc = run_gpt1(
        "generate",
        f"ckpt={run / 'checkpoints' / 'last.ckpt'}",
        'prompt="I don\'t know, I hope."',
        "max_new_tokens=4",
        "temperature=0",
        f"hydra.run.dir={tmp_path / 'gen'}",
        cwd=tmp_path,
    )
    assert "i don't know, i hope." in proc.stdout  # not "i don ' t know , i hope ."


def test_choices_of_different_numbers_and_long_texts_finetune_counted(small_run, tmp_path):
    run, _ = small_run
    rows = []
    for i in range(24):  # 3, 4 or 5 choices; every third row's context far longer than the context window
        context = " ".join(["she said it was a very fine day for a walk"] * 20) if i % 3 == 0 else "she said"
        choices = ["yes", "no", "maybe", "never", "soon"][: 3 + i % 3]
        rows.append({"context": context, "question": "", "choices": choices, "label": i % 3})
    data = tmp_path / "mc.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "finetune"
    proc = run_gpt1(
        "finetune",
        "task=multiple_choice",
        f"task.data_files.train={data}",
        f"task.data_files.validation={data}",
        f"task.data_files.test={data}",
        f"init_from={run / 'checkpoints' / 'last.ckpt'}",
        "batch_size=8",
        "trainer.max_steps=3",
        "logger=csv",
        "trainer.enable_progress_bar=false",
        "paths.cache_dir=cache",
        f"hydra.run.dir={out}",
        cwd=tmp_path,
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["examples"] == {"train": 24, "validation": 24, "test": 24}
    assert metrics["truncated"] == {"train": 8, "validation": 8, "test": 8}  # the long contexts only
    assert 0 <= metrics["val/accuracy"] <= 1 and metrics["steps"] == 3
    for noise in NOISE:
        assert noise not in proc.stdout + proc.stderr, noise


@pytest.mark.slow  # 19 s
def test_a_debug_overfit_finetune_prints_no_library_noise(small_run, tmp_path):
    run, _ = small_run
    proc = run_gpt1(
        "finetune",
        "task=sentiment",
        f"init_from={run / 'checkpoints' / 'last.ckpt'}",
        "debug=overfit",
        "trainer.max_steps=2",
        "++task.splits.test='test[:8]'",
        "paths.cache_dir=cache",
        f"hydra.run.dir={tmp_path / 'overfit'}",
        cwd=tmp_path,
    )
    assert json.loads((tmp_path / "overfit" / "metrics.json").read_text())["steps"] == 2
    for noise in NOISE:
        assert noise not in proc.stdout + proc.stderr, noise


def test_invalid_utf8_is_counted_exactly(tmp_path):
    from gpt1.data.read_errors import invalid_sequences

    path = tmp_path / "doc.txt"
    path.write_bytes("a real \ufffd stays; ".encode() + b"bad \xff\xfe and a cut \xe2\x82 end \xef")
    assert invalid_sequences(path) == (4, len("a real \ufffd stays; bad ".encode()))  # ff, fe, e2 82 (one), ef
    for block in (1, 2, 3, 7):  # a sequence cut between blocks is still one, at its offset in the file
        assert invalid_sequences(path, block=block) == (4, len("a real \ufffd stays; bad ".encode()))
    path.write_text("caf\u00e9 \ufffd", encoding="utf-8")
    assert invalid_sequences(path) == (0, None)
