"""Training progress counts updates to the run's budget, in a log file and on a terminal, with or without rich; a line
printed during training (the text samples) goes above the bar, not onto its line."""

import re
from types import SimpleNamespace

import lightning as L
import pytest
from lightning.pytorch.demos.boring_classes import BoringModel

from gpt1.training.console import StepProgress, print_above_bar


def fit(max_steps: int, bar: StepProgress) -> None:
    """BoringModel's 64 batches an epoch, limited to 4: a budget of ``max_steps`` runs over several epochs."""
    trainer = L.Trainer(
        max_steps=max_steps,
        limit_train_batches=4,
        limit_val_batches=2,
        val_check_interval=4,
        callbacks=[bar],
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        accelerator="cpu",
        num_sanity_val_steps=0,
    )
    trainer.fit(BoringModel())


def test_in_a_log_file_progress_is_a_line_per_tenth_of_the_budget(capsys):
    fit(10, StepProgress())  # stderr captured: not a terminal
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("step ")]
    assert [re.match(r"step (\d+)/10 \(", line).group(1) for line in lines] == [str(i) for i in range(1, 11)]
    assert "elapsed" in lines[-1] and "left" in lines[-1]  # counts to the budget (10), not the epoch's 4 batches


def test_in_a_log_file_a_long_tenth_still_prints_every_every_s(capsys):
    fit(40, StepProgress(every_s=0))  # every update is due
    assert len([line for line in capsys.readouterr().err.splitlines() if line.startswith("step ")]) == 40


def test_on_a_terminal_a_bar_counts_to_the_budget(capsys, monkeypatch):
    monkeypatch.setattr(StepProgress, "terminal", property(lambda self: True))
    fit(10, StepProgress())
    err = capsys.readouterr().err
    assert re.search(r"train: 100%.*\| 10/10 ", err), err
    assert not re.search(r"^step \d", err, re.M)  # no log lines besides the bar


def test_a_disabled_bar_prints_nothing(capsys):
    bar = StepProgress()
    bar.disable()
    fit(3, bar)
    err = capsys.readouterr().err
    assert not re.search(r"^step \d|train: ", err, re.M), err  # no progress line nor bar (Lightning's own lines may be)


@pytest.mark.parametrize("with_bar", [True, False])
def test_a_sample_goes_above_the_bar_or_plainly(capsys, with_bar):
    bar = StepProgress() if with_bar else None
    print_above_bar(SimpleNamespace(progress_bar_callback=bar), "[sample @ step 2] [b]not markup[/b]")
    assert capsys.readouterr().out == "[sample @ step 2] [b]not markup[/b]\n"


def test_a_bar_in_a_log_is_a_line_per_tenth_and_a_last_one(capsys):
    from gpt1.core.progress import bar

    assert list(bar(range(20), desc="checkpoints", unit="ckpt")) == list(range(20))  # stderr captured: not a terminal
    inner = bar(desc="sequences", unit="seq", total=50, leave=False)  # inner: its last line only (and every 30 s)
    inner.update(30)
    inner.update(20)
    inner.close()
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    lines = err.splitlines()
    assert [line.split(",")[0] for line in lines[:2]] == [
        "checkpoints: 2/20 ckpt (10%)",
        "checkpoints: 4/20 ckpt (20%)",
    ]
    assert lines[9].startswith("checkpoints: 20/20 ckpt (100%), ") and "left" not in lines[9]
    assert lines[10:] == [lines[10]] and lines[10].startswith("sequences: 50/50 seq (100%), ")
