"""Task rows are never dropped silently (issue 39): a row whose label field is missing is an error naming its file and
line, as an extra field is; a class of task.label_names that the training split never has is named in a warning."""

import logging

import pytest

from gpt1.core.errors import DataError
from tests.test_tasks import module, tokenizer, write  # noqa: F401  (tokenizer: the fixture)

ROWS = [{"s": f"a fine sentence number {i}", "label": ["neg", "pos"][i % 2]} for i in range(8)]


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_a_row_without_its_label_field_is_an_error_naming_its_line(tmp_path, tokenizer, suffix):  # noqa: F811
    path = write(tmp_path / f"train{suffix}", ROWS)
    lines = path.read_text().splitlines(keepends=True)
    if suffix == ".jsonl":  # the 5th record without the key
        lines[4] = lines[4].replace(', "label": "neg"', "")
    else:  # the 5th data row (line 6) without its last field, and no separator left for it
        lines[5] = lines[5].rsplit("," if suffix == ".csv" else "\t", 1)[0] + "\n"
    path.write_text("".join(lines))
    task = {"type": "classification", "data_files": {"train": str(path)}, "text": "s", "label_names": ["neg", "pos"]}
    with pytest.raises(DataError) as e:
        module(task, tokenizer, None)
    line = 5 if suffix == ".jsonl" else 6
    assert str(e.value).startswith(f"{path}:{line}: the row has no field for the label column 'label' (task.label)")


def test_an_empty_label_still_marks_a_row_without_a_gold_label(tmp_path, tokenizer):  # noqa: F811
    rows = [*ROWS, {"s": "unlabelled", "label": ""}]
    task = {
        "type": "classification",
        "data_files": {"train": str(write(tmp_path / "train.csv", rows))},
        "text": "s",
        "label_names": ["neg", "pos"],
    }
    assert module(task, tokenizer, None).stats["train"] == {"examples": 8, "truncated": 0, "dropped": 1}


def test_a_class_never_in_the_training_split_is_named(tmp_path, tokenizer, caplog):  # noqa: F811
    task = {
        "type": "classification",
        "data_files": {"train": str(write(tmp_path / "train.csv", ROWS))},
        "text": "s",
        "label_names": ["neg", "neutral", "pos"],
    }
    with caplog.at_level(logging.WARNING, logger="gpt1.tasks.task_data"):
        module(task, tokenizer, None)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"task task: 'neutral' of task.label_names never occurs in the training split ({tmp_path / 'train.csv'}): "
        "the model never learns to predict it; check the training data's labels, or task.label_names"
    ]
