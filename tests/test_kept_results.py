"""Results never silently redone or lost (issue 52, gpt1/training/kept_results.py): a finished run resumed with
resume=auto whose metrics.json is damaged or missing says so in one line, keeps the damaged file aside and rebuilds
it, every figure, from the copy its provenance.json holds, evaluating nothing (its CSV log as it was); with no copy,
it says that the evaluation after training is done again and why, and no figure comes back null. A pre-training
stopped after its last update writes, once resumed, the uninterrupted run's train/loss and sample."""

import json
import re
import signal
from pathlib import Path

import pytest

from gpt1.commands.finetune import finetune
from gpt1.commands.pretrain import train
from gpt1.core.figures import compare
from tests.helpers import FEW, FEW_FINETUNE
from tests.test_stops import SignalOn, torch_kernels, with_callback

pytestmark = pytest.mark.usefixtures(torch_kernels.__name__)  # (runs compared figure by figure)
SAMPLED = [*FEW, "callbacks.samples.every_n_steps=2", "resume=auto"]
"""4 updates of the tiny model, a sample every 2, resumed with resume=auto."""


def files(run: Path) -> dict[str, bytes]:
    return {name: (run / name).read_bytes() for name in ("metrics.json", "csv/metrics.csv")}


def test_a_finished_runs_damaged_or_missing_metrics_json_is_rebuilt_from_its_record_or_said_evaluated_again(
    make_cfg, capsys
):
    cfg = make_cfg("pretrain", SAMPLED)
    run, path = Path(cfg.paths.output_dir), Path(cfg.paths.output_dir) / "metrics.json"
    original = train(cfg)
    written = files(run)
    path.write_text('{"steps": 4, "val/loss": 6.2')  # cut short
    capsys.readouterr()
    again = train(make_cfg("pretrain", SAMPLED))
    out, err = capsys.readouterr()
    (aside,) = run.glob("metrics.json.damaged-*")
    (line,) = [line for line in err.splitlines() if line.startswith("note:")]
    assert line.startswith(f"note: {path} could not be read (JSONDecodeError: ") and line.endswith(
        f": kept as {aside.name}: rebuilt from the copy of its figures in provenance.json (step 4)"
    )
    assert "the run had finished at step 4: its metrics.json is rebuilt as it was written" in out
    assert files(run) == written and again == json.loads(written["metrics.json"])  # the CSV: nothing evaluated
    assert aside.read_text() == '{"steps": 4, "val/loss": 6.2'

    path.unlink()
    train(make_cfg("pretrain", SAMPLED))
    assert f"note: {path} is missing: rebuilt from the copy of its figures in provenance.json (step 4)" in (
        capsys.readouterr().err
    )
    assert files(run) == written

    # no copy (a run of an earlier gpt1, or both files damaged): the evaluation is done again, saying why
    record = json.loads((run / "provenance.json").read_text())
    for attempt in record["attempts"]:
        attempt.pop("results", None)
    (run / "provenance.json").write_text(json.dumps(record))
    aside.unlink()
    path.write_bytes(b"\x00\x17")
    train(make_cfg("pretrain", SAMPLED))
    (aside,) = run.glob("metrics.json.damaged-*")
    assert re.search(
        rf"note: {re.escape(str(path))} could not be read \(.*\): kept as {aside.name}, and provenance.json holds no "
        r"copy of figures of step 4: the evaluation after training is done again on the weights of step 4, since its "
        r"figures cannot be rebuilt \(nothing is trained\)",
        capsys.readouterr().err,
    )
    rebuilt = json.loads(path.read_text())
    assert None not in rebuilt.values() and rebuilt["sample"] and rebuilt["train/loss"]
    assert compare(original, rebuilt).moved == []  # (times and memory apart)


def test_a_pretraining_stopped_after_its_last_update_writes_the_uninterrupted_runs_figures(
    make_cfg, monkeypatch, tmp_path
):
    """Its train/loss, perplexity and sample were null: the attempt that resumed it trained nothing."""
    whole = train(make_cfg("pretrain", [*SAMPLED, f"paths.output_dir={tmp_path / 'whole'}"]))
    with_callback(monkeypatch, SignalOn("on_validation_batch_start", signal.SIGTERM, last=4))  # fit's last validation
    with pytest.raises(SystemExit):
        train(make_cfg("pretrain", SAMPLED))
    monkeypatch.undo()
    resumed = train(make_cfg("pretrain", SAMPLED))
    roots = [str(tmp_path / "whole")], [str(tmp_path / "run")]
    assert compare(whole, resumed, *roots).moved == [] and resumed["sample"] and resumed["train/loss"]


def test_a_finished_finetunes_damaged_metrics_json_is_rebuilt_evaluating_nothing(make_cfg, tiny_ckpt, capsys):
    overrides = [*FEW_FINETUNE, "task=sentiment", f"init_from={tiny_ckpt}", "resume=auto"]
    run = Path(make_cfg("finetune", overrides).paths.output_dir)
    finetune(make_cfg("finetune", overrides))
    written = files(run)
    (run / "metrics.json").write_text("[]")
    capsys.readouterr()
    finetune(make_cfg("finetune", overrides))
    (aside,) = run.glob("metrics.json.damaged-*")
    assert (
        f"note: {run / 'metrics.json'} does not hold a JSON object: kept as {aside.name}: rebuilt from the copy of "
        "its figures in provenance.json (step 4)"
    ) in capsys.readouterr().err
    assert files(run) == written  # (no validation, no test: the CSV log as it was)
