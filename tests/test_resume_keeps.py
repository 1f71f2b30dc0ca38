"""What a stopped and resumed run keeps (issue 39): the CPU kernels its weights were made with, whatever the process
that resumes it would choose; its whole CSV log, each step once; one last.ckpt and no versioned copies."""

import csv
import json
import signal
from pathlib import Path

import pytest
import torch

import gpt1.cpu.kernels
from gpt1.commands.pretrain import train
from gpt1.cpu import settings as cpu  # (the process's choice of kernels: _MEASURED, _APPLIED)
from tests.test_stops import EXACT, SignalAt, assert_same_weights, step_of, weights, with_callback

FP32 = [*EXACT, "trainer.precision=32-true"]
"""(bf16 autocast, where the CPU has it, multiplies on torch's kernels whatever the choice)"""
needs_onednn = pytest.mark.skipif(not gpt1.cpu.kernels.onednn_available(), reason="only one kernel here (no oneDNN)")


@pytest.fixture
def kernels(monkeypatch, tmp_path):
    """kernels(name): ``gpt1.cpu.settings.configure`` puts every kind of product on ``name`` from now on, as a process
    does whose cache (a private one) says that it measured ``name`` fastest; kernels(name, forced=True): as
    GPT1_CPU_MATMUL=name makes it. Undone after the test."""
    monkeypatch.setattr(gpt1.cpu.kernels, "CPU_MATMULS", dict(gpt1.cpu.kernels.CPU_MATMULS))
    monkeypatch.setattr(cpu, "_APPLIED", None, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))

    def choose(name: str, forced: bool = False) -> None:
        monkeypatch.setattr(cpu, "_MEASURED", {})  # (the process's own memory of the cache)
        if forced:
            monkeypatch.setenv("GPT1_CPU_MATMUL", name)
        else:
            monkeypatch.delenv("GPT1_CPU_MATMUL", raising=False)
            timings = {
                kind: {k: 1e-3 if k == name else 2e-3 for k in gpt1.cpu.kernels.KERNELS[kind]}
                for kind in gpt1.cpu.kernels.KINDS
            }
            cpu.cache_path().parent.mkdir(parents=True, exist_ok=True)
            cpu.cache_path().write_text(json.dumps({cpu.machine_key(): {"timings": timings, "load": None}}))
        settings = cpu.configure()
        assert set(settings.matmuls.values()) == {name} and settings.source == (
            f"GPT1_CPU_MATMUL={name}" if forced else "cached"
        )

    return choose


def stop_and_resume(make_cfg, monkeypatch, overrides, at_steps, before_resume=lambda i: None) -> Path:
    """Run ``overrides`` (resume=auto), stopping it with SIGTERM at each of ``at_steps`` and resuming it; return the
    run directory."""
    for i, at in enumerate(at_steps):
        with_callback(monkeypatch, SignalAt(at, signal.SIGTERM))
        with pytest.raises(SystemExit):
            train(make_cfg("pretrain", overrides))
        monkeypatch.setattr("gpt1.training.run.build_callbacks", _original_build_callbacks)
        before_resume(i)
    train(make_cfg("pretrain", overrides))
    return Path(make_cfg("pretrain", overrides).paths.output_dir)


from gpt1.training.callbacks import build_callbacks as _original_build_callbacks  # noqa: E402


@needs_onednn
def test_a_resumed_run_multiplies_on_the_kernels_it_started_with(make_cfg, monkeypatch, tmp_path, kernels, capsys):
    """The SLURM failure's cause: the first attempt chose oneDNN, a requeued one (another load, another cache, or
    GPT1_CPU_MATMUL) torch's. Stopped twice, resumed once with torch's kernels cached and once with them forced, the
    run takes its checkpoint's kernels and ends with the uninterrupted run's weights."""
    kernels("onednn")
    whole = make_cfg("pretrain", [*FP32, f"paths.output_dir={tmp_path / 'whole'}"])
    train(whole)
    expected = weights(tmp_path / "whole")

    run = stop_and_resume(
        make_cfg,
        monkeypatch,
        [*FP32, "resume=auto"],
        [3, 6],  # the cache, then the variable
        before_resume=lambda i: kernels("torch", forced=i == 1),
    )  # what this process would choose
    assert_same_weights(expected, weights(run))
    err = capsys.readouterr().err
    assert "CPU matmul kernels: onednn for train.forward" in err
    assert (
        f"those of {run / 'checkpoints' / 'last.ckpt'}, which this run was started with (GPT1_CPU_MATMUL=torch "
        "applies to new runs only" in err
    )
    assert set(json.loads((run / "cpu-matmuls.json").read_text()).values()) == {"onednn"}
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False, map_location="cpu")
    assert set(ckpt["callbacks"]["RunKernels"]["cpu_matmuls"].values()) == {"onednn"}


@pytest.mark.slow  # two runs: 19 s beside the suite's other worker
@needs_onednn
def test_the_same_command_with_other_kernels_is_another_run(make_cfg, tmp_path, kernels):
    """Two runs of one command whose processes' caches chose different kernels (measured on another CPU, thread
    count or load) read the same data in the same order and draw the same dropout, so their step counts and
    tokens agree and their losses nearly so; but a kernel sums its products in its own order, so their weights and
    metrics may differ in the last bits (and more as training amplifies them). Each run says which it used."""
    metrics, records = {}, {}
    for name in ("torch", "onednn"):
        kernels(name)
        out = tmp_path / name
        metrics[name] = train(make_cfg("pretrain", [*FP32, f"paths.output_dir={out}"]))
        records[name] = json.loads((out / "cpu-matmuls.json").read_text())
    assert set(records["torch"].values()) == {"torch"} and set(records["onednn"].values()) == {"onednn"}
    assert metrics["torch"]["steps"] == metrics["onednn"]["steps"] == 10
    assert metrics["torch"]["tokens_seen"] == metrics["onednn"]["tokens_seen"]
    assert metrics["torch"]["val_loss"] == pytest.approx(metrics["onednn"]["val_loss"], rel=1e-3)
    differ = [k for k, v in weights(tmp_path / "torch").items() if not torch.equal(v, weights(tmp_path / "onednn")[k])]
    print(f"\n{len(differ)} tensors differ in their bits between the torch and oneDNN runs")


def curve(run: Path) -> list[dict[str, str]]:
    with open(run / "csv" / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_a_twice_resumed_run_keeps_its_whole_csv_log_each_step_once(make_cfg, monkeypatch, tmp_path, capsys):
    logged = [*EXACT, "trainer.log_every_n_steps=1"]
    train(make_cfg("pretrain", [*logged, f"paths.output_dir={tmp_path / 'whole'}"]))
    whole = curve(tmp_path / "whole")
    run = stop_and_resume(make_cfg, monkeypatch, [*logged, "resume=auto"], [2, 6])
    got = curve(run)

    def losses(rows):
        return [(r["step"], r["train/loss"]) for r in rows if r.get("train/loss")]

    def validations(rows):
        return [(r["step"], r["val/loss"]) for r in rows if r.get("val/loss")]

    assert [s for s, _ in losses(got)] == [str(s) for s in range(10)]  # every update once, in order
    assert losses(got) == losses(whole)  # (exact resume: the same numbers)
    # (but the validation due at the update a stop came at: a stop skips it, as a periodic checkpoint's resume does)
    assert validations(got) == [v for v in validations(whole) if v[0] != "2"]
    finished = json.loads((run / "metrics.json").read_text())
    again = train(make_cfg("pretrain", [*logged, "resume=auto"]))  # a finished run: nothing trained or logged twice
    assert "the run had finished at step 10: its metrics.json is kept as it was" in capsys.readouterr().out
    assert curve(run) == got  # (no validation either: its throughput rows were logged again)
    assert again == finished == json.loads((run / "metrics.json").read_text())  # (its train/loss and sample were lost)


@pytest.mark.usefixtures("sigint_not_ignored")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_one_last_ckpt_whatever_stopped_the_run(make_cfg, monkeypatch, capsys, signum):
    """Stopped before its first periodic checkpoint (Ctrl-C at step 1 of a checkpoint every 2): Lightning's
    version counter then wrote every later save beside the old files (last-v1.ckpt, step...-v1.ckpt), and
    last.ckpt, which metrics.json and the printed path name, kept step 1."""
    overrides = [*EXACT, "resume=auto"]
    with_callback(monkeypatch, SignalAt(0, signum))
    with pytest.raises(SystemExit):
        train(make_cfg("pretrain", overrides))
    monkeypatch.undo()
    metrics = train(make_cfg("pretrain", overrides))
    run = Path(make_cfg("pretrain", overrides).paths.output_dir)
    names = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert names == ["last.ckpt", *(f"step{s:07d}.ckpt" for s in (2, 4, 6, 8, 10))]
    last = run / "checkpoints" / "last.ckpt"
    assert step_of(last) == 10 and metrics["last_checkpoint"] == str(last)
    assert f"checkpoint: {last}" in capsys.readouterr().out
    again = train(make_cfg("pretrain", overrides))  # resume=auto of the finished run: trains nothing
    assert again["steps"] == 10 and sorted(p.name for p in (run / "checkpoints").iterdir()) == names


@pytest.mark.slow  # 35 s (two runs with W&B offline)
def test_a_resumed_run_continues_its_wandb_run(tmp_path, cache_dir):
    """Stopped by SIGTERM and resumed: W&B (offline) records both attempts under one run id."""
    from tests.test_stops import LONG, start, wait_for
    from tests.test_wandb import offline_run

    run = tmp_path / "run"
    run.mkdir()
    overrides = [*LONG, "logger=wandb", "logger.wandb.mode=offline", "resume=auto"]
    proc = start(run, cache_dir, *overrides)
    wait_for(run / "checkpoints" / "last.ckpt", proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 143, proc.stderr.read()
    resumed = start(run, cache_dir, *overrides)
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read()
    attempts = sorted((run / "wandb").glob("offline-run-*"))
    assert len(attempts) == 2
    ids = set()
    for attempt in attempts:
        (single := tmp_path / attempt.name / "wandb").mkdir(parents=True)
        (single / attempt.name).symlink_to(attempt)
        ids.add(offline_run(tmp_path / attempt.name)["id"])
    assert len(ids) == 1 and ids == {(run / "wandb" / "run-id").read_text().strip()}


def test_the_throughput_rows_of_redone_updates_replace_the_first_attempts(tmp_path):
    """After a SIGKILL the updates since the last checkpoint are done again: their loss rows replaced the first
    attempt's, but their throughput rows (whose columns depend on how many updates an attempt had timed: a rate needs
    a window of them) were logged twice."""
    from gpt1.training.csv_log import _ContinuedWriter

    def throughput(batches: int, rates: bool) -> dict[str, float]:
        row = {"train/batches": batches, "train/samples": 8 * batches, "train/time": 0.1 * batches, "epoch": 0}
        return {**row, **({"train/device/items_per_sec": 100.0} if rates else {})}

    first = _ContinuedWriter(str(tmp_path))
    for step in range(6):  # killed after step 5, its last checkpoint at step 3
        first.log_metrics({"train/loss": 6.0 - step / 10, "epoch": 0}, step)
        first.log_metrics(throughput(step + 1, rates=step >= 2), step)
    first.save()
    again = _ContinuedWriter(str(tmp_path))
    for step in range(3, 6):
        again.log_metrics({"train/loss": 6.0 - step / 10, "epoch": 0}, step)
        again.log_metrics(throughput(step - 2, rates=False), step)  # (a fresh monitor: no rates yet)
    again.save()
    rows = _rows(tmp_path / "metrics.csv")
    assert [r["step"] for r in rows if r.get("train/batches")] == [str(s) for s in range(6)]
    assert [r["train/batches"] for r in rows if r.get("train/batches")] == ["1", "2", "3", "1", "2", "3"]
    assert [r["step"] for r in rows if r.get("train/loss")] == [str(s) for s in range(6)]


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))
