"""A line printed during training (the text samples) goes above the progress bar, not onto its line."""

import io
from types import SimpleNamespace

from lightning.pytorch.callbacks import TQDMProgressBar
from rich.console import Console

from gpt1.training.callbacks import print_above_bar


def test_a_sample_goes_through_the_rich_bars_console(capsys):
    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    trainer = SimpleNamespace(progress_bar_callback=SimpleNamespace(progress=SimpleNamespace(console=console)))
    print_above_bar(trainer, "[sample @ step 2] [b]not markup[/b]")
    assert console.file.getvalue().strip() == "[sample @ step 2] [b]not markup[/b]"  # as is, no markup
    assert capsys.readouterr().out == ""


def test_a_sample_goes_through_tqdms_write_or_plain_print(capsys, monkeypatch):
    written = []
    monkeypatch.setattr(TQDMProgressBar, "print", lambda self, *args, **kwargs: written.append(args))
    print_above_bar(SimpleNamespace(progress_bar_callback=TQDMProgressBar()), "a sample")
    assert written == [("a sample",)]
    print_above_bar(SimpleNamespace(progress_bar_callback=None), "no bar")
    assert capsys.readouterr().out == "no bar\n"
