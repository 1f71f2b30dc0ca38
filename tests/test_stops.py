"""Safe stops: SIGTERM or Ctrl-C saves last.ckpt and exits 143 / 130, SIGKILL loses only what followed the last
periodic checkpoint, a NaN loss stops (or skips), and every interrupted run resumes to the uninterrupted run's
weights, bit for bit; also under 2-process DDP on CPU."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from lightning.pytorch.callbacks import Callback

import gpt1.commands.pretrain
import gpt1.training.run
from gpt1.app.runner import user_message
from gpt1.checkpoints.format import load_checkpoint
from gpt1.commands.pretrain import train
from gpt1.cpu import kernels
from gpt1.training.callbacks.safe_stop import SafeStop
from gpt1.training.module import GPT1Module, NonFiniteLoss
from tests.helpers import FEW_FINETUNE, OFFLINE_ENV, TINY_RUN

EXACT = [
    *TINY_RUN,
    "data.samples_per_epoch=48",
    "trainer.max_steps=10",
    "trainer.val_check_interval=3",
    "trainer.check_val_every_n_epoch=null",
    "callbacks.checkpoint.every_n_steps=2",
    "callbacks.checkpoint.keep_last=-1",
    "callbacks.samples.every_n_steps=0",
]
"""10 updates of 8 windows, 6 batches an epoch, validation every 3 batches, a checkpoint every 2 updates."""


@pytest.fixture(scope="module", autouse=True)
def torch_kernels():
    """This module's runs on torch's CPU kernels, in this process and in the subprocesses it starts: their weights are
    compared bit for bit, and a subprocess's measured choice (oneDNN where it won by 3% at the load of the moment) or
    an earlier test's in this worker would make two runs of one config differ in their last bits (seen failing
    beside another worker: the killed subprocess on oneDNN, the in-process reference on torch)."""
    before = dict(kernels.CPU_MATMULS)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GPT1_CPU_MATMUL", "torch")
        kernels.set_cpu_matmuls(dict.fromkeys(kernels.KINDS, "torch"))
        yield
    kernels.set_cpu_matmuls(before)


LONG = [
    *TINY_RUN,
    "data.samples_per_epoch=80",
    "trainer.max_steps=30",
    "trainer.val_check_interval=10",
    "trainer.check_val_every_n_epoch=null",
    "callbacks.checkpoint.every_n_steps=5",
    "callbacks.checkpoint.keep_last=-1",
    "callbacks.samples.every_n_steps=0",
]
"""30 updates over 3 epochs of 10 batches, a checkpoint every 5: a subprocess signalled once the first is written
is still running."""


pytestmark = pytest.mark.usefixtures("sigint_not_ignored")  # (tests/conftest.py)


def weights(run: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(run / "checkpoints" / "last.ckpt").model.state_dict()


def assert_same_weights(expected: dict[str, torch.Tensor], got: dict[str, torch.Tensor]) -> None:
    assert expected.keys() == got.keys()
    for name, tensor in expected.items():
        assert torch.equal(tensor, got[name]), name


def step_of(ckpt: Path) -> int:
    return torch.load(ckpt, map_location="cpu", weights_only=False)["global_step"]


class SignalAt(Callback):
    """Send this process real signals when the batch of update ``step`` (counted from 0) starts, once."""

    def __init__(self, step: int, *signums: int) -> None:
        self.step, self.signums, self.sent = step, signums, False

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.step and not self.sent:
            self.sent = True
            for signum in self.signums:
                os.kill(os.getpid(), signum)


class FirstStep(Callback):
    """Records the step training starts from (a resumed run's: its checkpoint's)."""

    step = None

    def on_train_start(self, trainer, pl_module) -> None:
        self.step = trainer.global_step


def with_callback(monkeypatch, callback: Callback) -> Callback:
    build = gpt1.training.run.build_callbacks  # (every training command's callbacks come from it)
    monkeypatch.setattr(gpt1.training.run, "build_callbacks", lambda *a, **k: [callback, *build(*a, **k)])
    return callback


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, cache_dir):
    """EXACT's run without interruption, without and with gradient accumulation: accumulate -> last weights."""
    from hydra import compose, initialize_config_module

    runs = {}
    for accumulate in (1, 2):
        run = tmp_path_factory.mktemp(f"whole{accumulate}")
        overrides = [
            f"paths.output_dir={run}",
            f"paths.cache_dir={cache_dir}",
            *EXACT,
            f"trainer.accumulate_grad_batches={accumulate}",
        ]
        with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
            train(compose(config_name="pretrain", overrides=overrides))
        runs[accumulate] = weights(run)
    return runs


@pytest.mark.parametrize(
    ("signum", "accumulate", "at", "stopped_at"),
    [
        (signal.SIGTERM, 1, 3, 4),  # mid epoch 0, off the checkpoint interval
        (signal.SIGTERM, 1, 5, 6),  # the last batch of epoch 0, where validation is due
        (signal.SIGINT, 1, 6, 7),  # Ctrl-C once, in epoch 1
        (signal.SIGTERM, 2, 3, 4),  # 2 batches an update: received in the first, it waits for the update
    ],
)
def test_a_signal_saves_last_ckpt_exits_and_the_run_resumes_exactly(
    make_cfg, monkeypatch, capsys, uninterrupted, signum, accumulate, at, stopped_at
):
    overrides = [*EXACT, f"trainer.accumulate_grad_batches={accumulate}", "resume=auto"]
    cfg = make_cfg("pretrain", overrides)
    run = Path(cfg.paths.output_dir)
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with_callback(monkeypatch, SignalAt(at, signum))
    with pytest.raises(SystemExit) as stop:
        train(cfg)
    assert stop.value.code == 128 + signum  # 143, 130
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == handlers  # put back
    assert step_of(run / "checkpoints" / "last.ckpt") == stopped_at
    last = run / "checkpoints" / "last.ckpt"
    assert f"stopped by {signal.Signals(signum).name} at step {stopped_at}: saved {last}" in capsys.readouterr().err
    assert not (run / "metrics.json").exists()

    monkeypatch.undo()
    first = with_callback(monkeypatch, FirstStep())
    assert train(make_cfg("pretrain", overrides))["steps"] == 10  # resume=auto: the same run directory
    assert first.step == stopped_at
    assert_same_weights(uninterrupted[accumulate], weights(run))


def test_an_ignored_sigint_stays_ignored_and_sigterm_is_still_taken(tmp_path):
    """A background job's SIGINT starts ignored: Ctrl-C in its terminal must not stop it, so SafeStop leaves it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    term = signal.getsignal(signal.SIGTERM)
    stop, trainer = SafeStop(tmp_path / "last.ckpt"), SimpleNamespace(global_step=0)
    stop.on_train_start(trainer, None)
    try:
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == stop._handle
    finally:
        stop.release()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN and signal.getsignal(signal.SIGTERM) == term


def test_a_second_ctrl_c_stops_at_once_without_saving(make_cfg, monkeypatch, capsys):
    cfg = make_cfg("pretrain", EXACT)
    run = Path(cfg.paths.output_dir)
    with_callback(monkeypatch, SignalAt(5, signal.SIGINT, signal.SIGINT))
    with pytest.raises(SystemExit) as stop:
        train(cfg)
    assert stop.value.code == 1  # Lightning's KeyboardInterrupt exit
    assert step_of(run / "checkpoints" / "last.ckpt") == 4  # the periodic one: nothing saved mid-update
    assert "stopped by a second Ctrl-C without saving" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# -- real signals to a running `python -m gpt1.commands.pretrain`
# ---------------------------------------------------------


def start(run: Path, cache_dir: Path, *overrides: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpt1.commands.pretrain",
            *overrides,
            f"hydra.run.dir={run}",
            f"paths.cache_dir={cache_dir}",
        ],
        cwd=run.parent,
        env=OFFLINE_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: a kill reaches every process of the run
    )


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"the run ended (status {proc.returncode}) before {path.name} appeared:\n{proc.stderr.read()}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"{path.name} did not appear in {timeout}s")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def uninterrupted_long(tmp_path_factory, cache_dir):
    from hydra import compose, initialize_config_module

    run = tmp_path_factory.mktemp("long")
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        train(
            compose(
                config_name="pretrain", overrides=[f"paths.output_dir={run}", f"paths.cache_dir={cache_dir}", *LONG]
            )
        )
    return weights(run)


@pytest.mark.parametrize("signum", [pytest.param(signal.SIGTERM, marks=pytest.mark.slow), signal.SIGKILL])  # 15 s each
def test_a_killed_subprocess_resumes_exactly(tmp_path, cache_dir, make_cfg, monkeypatch, uninterrupted_long, signum):
    """SIGTERM: the run saves last.ckpt where it stops and exits 143. SIGKILL: nothing is saved; resume=auto starts
    from the last periodic checkpoint. Either way the resumed run ends with the uninterrupted run's weights."""
    run = tmp_path / "run"
    run.mkdir()
    proc = start(run, cache_dir, *LONG, "resume=auto")
    wait_for(run / "checkpoints" / "last.ckpt", proc)  # first saved with step0000005.ckpt, just after it
    if signum == signal.SIGKILL:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        os.kill(proc.pid, signum)
    _, err = proc.communicate(timeout=120)
    last = run / "checkpoints" / "last.ckpt"
    stopped_at = step_of(last)
    assert 5 <= stopped_at < 30, err
    if signum == signal.SIGTERM:
        assert proc.returncode == 143, err
        assert err.strip().splitlines()[-1] == (
            f"stopped by SIGTERM at step {stopped_at}: saved {last}; continue with gpt1 pretrain resume=auto "
            f"hydra.run.dir={run} (exit status 143)"
        )
    else:
        assert proc.returncode == -signal.SIGKILL and stopped_at % 5 == 0

    first = with_callback(monkeypatch, FirstStep())
    metrics = train(make_cfg("pretrain", [*LONG, "resume=auto", f"paths.output_dir={run}"]))
    assert metrics["steps"] == 30 and first.step == stopped_at
    assert_same_weights(uninterrupted_long, weights(run))


# -- NaN and inf ------------------------------------------------------------------------------------------------


@pytest.fixture
def nan_at(monkeypatch):
    """nan_at(steps...): the training loss of the batches of those updates is NaN."""

    def _inject(*steps: int) -> None:
        lm_loss = GPT1Module.lm_loss

        def poisoned(self, batch):
            loss, n = lm_loss(self, batch)
            if self.training and self.trainer.global_step in steps:
                loss = loss * float("nan")
            return loss, n

        monkeypatch.setattr(GPT1Module, "lm_loss", poisoned)

    return _inject


def test_a_nan_loss_stops_naming_the_step_and_keeps_the_last_good_checkpoint(make_cfg, nan_at):
    nan_at(5)
    cfg = make_cfg("pretrain", EXACT)
    checkpoints = Path(cfg.paths.output_dir) / "checkpoints"
    with pytest.raises(NonFiniteLoss) as error:
        train(cfg)
    message = user_message(error.value)  # what the command prints after "error: "
    assert message.startswith("the training loss is nan at step 5, so training stopped") and "\n" not in message
    assert f"{checkpoints / 'last.ckpt'}, saved before it, is left as it was" in message
    assert "optim.nonfinite=skip" in message
    assert step_of(checkpoints / "last.ckpt") == 4 and not (checkpoints / "step0000006.ckpt").exists()
    last = load_checkpoint(checkpoints / "last.ckpt").model.state_dict()
    assert all(t.isfinite().all() for t in last.values())
    assert_same_weights(load_checkpoint(checkpoints / "step0000004.ckpt").model.state_dict(), last)


def test_a_diverging_run_stops_at_its_first_nan(make_cfg):
    """No injection: an absurd learning rate, and the loss of the second batch is NaN."""
    with pytest.raises(NonFiniteLoss, match=r"^the training loss is nan at step 1, .*; no checkpoint was saved\. "):
        train(make_cfg("pretrain", [*EXACT, "optim.lr=1e20", "optim.warmup_steps=0"]))


def test_nonfinite_skip_leaves_the_weights_of_a_nan_batch_and_counts_it(make_cfg, nan_at, capsys):
    nan_at(3, 7)
    cfg = make_cfg("pretrain", [*EXACT, "optim.nonfinite=skip", "callbacks.checkpoint.every_n_steps=1"])
    metrics = train(cfg)
    assert metrics["steps"] == 10 and metrics["skipped_batches"] == 2
    assert json.loads((Path(cfg.paths.output_dir) / "metrics.json").read_text())["skipped_batches"] == 2
    checkpoints = Path(cfg.paths.output_dir) / "checkpoints"
    step = {s: load_checkpoint(checkpoints / f"step{s:07d}.ckpt").model.state_dict() for s in (3, 4, 5)}
    assert_same_weights(step[3], step[4])  # the update made from the batch at step 3 was not applied
    assert not torch.equal(step[4]["tokens_embed.weight"], step[5]["tokens_embed.weight"])  # the next one was
    last = load_checkpoint(checkpoints / "last.ckpt")
    assert all(t.isfinite().all() for t in last.model.state_dict().values())
    adam = last.raw["optimizer_states"][0]["state"]
    assert {int(s["step"]) for s in adam.values()} == {8}  # 10 updates, 2 of them skipped: Adam took 8 steps
    assert last.raw["skipped_batches"] == 2  # a resumed run goes on counting
    err = capsys.readouterr().err
    assert "warning: the training loss is nan at step 3: its update is skipped (optim.nonfinite=skip; 1 so far)" in err
    assert "at step 7: its update is skipped (optim.nonfinite=skip; 2 so far)" in err


def test_every_periodic_checkpoint_is_written_on_epoch_ends_too(make_cfg):
    """With validation every N batches across epochs, Lightning deferred an epoch's last-batch save to a validation
    that did not come (step 6 here: 6 batches an epoch, validation every 4): the checkpoint was never written."""
    cfg = make_cfg("pretrain", [*EXACT, "trainer.val_check_interval=4"])
    train(cfg)
    names = {p.name for p in (Path(cfg.paths.output_dir) / "checkpoints").glob("step*.ckpt")}
    assert names == {f"step{s:07d}.ckpt" for s in (2, 4, 6, 8, 10)}


def test_an_epoch_bounded_run_with_workers_resumes_exactly(make_cfg, tmp_path):
    """max_steps=-1: Lightning sets the train loader up (for estimated_stepping_batches) before it restores the
    counters; with worker processes the loader's iterator used to take the epoch's order then, replaying it from the
    start. The loader now asks its sampler at the first batch."""
    common = [*EXACT, "trainer.max_steps=-1", "trainer.max_epochs=2", "data.num_workers=1"]
    whole = make_cfg("pretrain", [*common, f"paths.output_dir={tmp_path / 'whole'}"])
    train(whole)
    checkpoints = Path(whole.paths.output_dir) / "checkpoints"
    resumed = make_cfg("pretrain", [*common, f"resume={checkpoints / 'step0000008.ckpt'}"])  # mid epoch 1
    assert train(resumed)["steps"] == 12
    assert_same_weights(weights(Path(whole.paths.output_dir)), weights(Path(resumed.paths.output_dir)))


FINETUNE = [
    "task=sentiment",
    "++task.splits.train='train[:48]'",
    "++task.splits.validation='validation[:8]'",
    "++task.splits.test='test[:8]'",
    "batch_size=8",
    "micro_batch_size=4",
    "trainer.max_epochs=2",
    "trainer.max_steps=-1",
    "num_workers=1",
    "logger=csv",
    "trainer.enable_progress_bar=false",
    "trainer.num_sanity_val_steps=0",
    "callbacks.checkpoint.every_n_steps=2",
]
"""Fine-tuning of 2 epochs of 6 updates, each of 2 micro-batches of 4, with a loader worker."""


def test_a_stopped_finetune_resumes_exactly(make_cfg, monkeypatch, tmp_path):
    """SIGTERM mid-epoch (while accumulating), then resume=auto: the uninterrupted run's weights and head."""
    from gpt1.commands.finetune import finetune

    ckpt = tmp_path / "pre" / "checkpoints" / "last.ckpt"
    train(
        make_cfg(
            "pretrain",
            [
                *TINY_RUN,
                "trainer.max_steps=2",
                "callbacks.samples.every_n_steps=0",
                f"paths.output_dir={tmp_path / 'pre'}",
            ],
        )
    )
    common = [*FINETUNE, f"init_from={ckpt}"]
    finetune(make_cfg("finetune", [*common, f"paths.output_dir={tmp_path / 'whole'}"]))

    with_callback(monkeypatch, SignalAt(8, signal.SIGTERM))
    run = tmp_path / "stopped"
    with pytest.raises(SystemExit) as stop:
        finetune(make_cfg("finetune", [*common, f"paths.output_dir={run}", "resume=auto"]))
    assert stop.value.code == 143 and step_of(run / "checkpoints" / "last.ckpt") == 9
    monkeypatch.undo()
    assert finetune(make_cfg("finetune", [*common, f"paths.output_dir={run}", "resume=auto"]))["steps"] == 12
    expected = load_checkpoint(tmp_path / "whole" / "checkpoints" / "last.ckpt")
    got = load_checkpoint(run / "checkpoints" / "last.ckpt")
    assert_same_weights({**expected.model.state_dict(), **expected.heads}, {**got.model.state_dict(), **got.heads})


class SignalOn(Callback):
    """Send this process a real signal, once, when the hook ``hook`` is called after the run's last update (when
    ``hook`` is on_validation_batch_start: fit's last validation, after the last update)."""

    def __init__(self, hook: str, signum: int, last: int) -> None:
        self.signum, self.last, self.sent = signum, last, False
        setattr(self, hook, self.send)

    def send(self, trainer, *args) -> None:
        if trainer.global_step == self.last and not self.sent:
            self.sent = True
            os.kill(os.getpid(), self.signum)


AFTER_TRAINING = [
    "++task.splits.train='train[:32]'",
    "++task.splits.validation='validation[:8]'",
    "++task.splits.test='test[:8]'",
    "batch_size=8",
    "trainer.max_epochs=2",
    "trainer.max_steps=-1",
    "logger=csv",
    "trainer.enable_progress_bar=false",
    "trainer.num_sanity_val_steps=0",
]
"""Fine-tuning of 2 epochs of 4 updates, validated after each (the second validation after the last update), the
weights of the best kept (model_selection=best), the auxiliary LM on, then tested."""


def comparable(run: Path) -> tuple[dict, list[dict]]:
    """metrics.json and the CSV log of a fine-tuning run, without what differs between two runs of one config (times,
    memory, paths)."""
    apart = ("time", "memory", "checkpoint")
    metrics = {
        k: v for k, v in json.loads((run / "metrics.json").read_text()).items() if not any(a in k for a in apart)
    }
    with open(run / "csv" / "metrics.csv") as f:
        rows = [{k: v for k, v in r.items() if v and "time" not in k} for r in csv.DictReader(f)]
    return metrics, rows


@pytest.fixture(scope="module")
def uninterrupted_finetune(tmp_path_factory, cache_dir, tiny_ckpt):
    from hydra import compose, initialize_config_module

    from gpt1.commands.finetune import finetune

    run = tmp_path_factory.mktemp("finetune")
    overrides = [f"paths.output_dir={run}", f"paths.cache_dir={cache_dir}", "task=sentiment", f"init_from={tiny_ckpt}"]
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        finetune(compose(config_name="finetune", overrides=[*overrides, *AFTER_TRAINING]))
    return run


@pytest.mark.parametrize(
    ("hook", "signum"),
    [
        ("on_validation_batch_start", signal.SIGINT),  # fit's last validation: training stops at its end
        ("on_test_batch_start", signal.SIGTERM),  # the test, after training
        ("on_test_end", signal.SIGINT),  # the test done, metrics.json not yet written
    ],
)
def test_a_signal_after_the_last_update_stops_the_evaluation_and_resume_does_it_once(
    make_cfg, monkeypatch, capsys, tmp_path, tiny_ckpt, uninterrupted_finetune, hook, signum
):
    """Ctrl-C after a fine-tune's last update was swallowed (the run went on and exited 0); resume=auto of a finished
    fine-tune validated and tested it again, adding rows to the CSV and rewriting metrics.json."""
    from gpt1.commands.finetune import finetune

    overrides = ["task=sentiment", f"init_from={tiny_ckpt}", *AFTER_TRAINING, "resume=auto"]
    run = Path(make_cfg("finetune", overrides).paths.output_dir)
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with_callback(monkeypatch, SignalOn(hook, signum, last=8))
    with pytest.raises(SystemExit) as stop:
        finetune(make_cfg("finetune", overrides))
    assert stop.value.code == 128 + signum
    last = run / "checkpoints" / "last.ckpt"
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"stopped by {signal.Signals(signum).name} after the last update (step 8): {last} holds the trained weights; "
        "the evaluation after training (validation, test, metrics.json) was skipped; do it with resume=auto in its "
        f"config (paths.output_dir={run}) (exit status {128 + signum})"  # (a run made from Python: no command line)
    )
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == handlers  # put back
    assert step_of(last) == 8 and not (run / "metrics.json").exists()

    monkeypatch.undo()
    finetune(make_cfg("finetune", overrides))  # does the evaluation
    assert comparable(run) == comparable(uninterrupted_finetune)
    assert_same_weights(
        load_checkpoint(uninterrupted_finetune / "checkpoints" / "best.ckpt").heads,
        load_checkpoint(run / "checkpoints" / "best.ckpt").heads,
    )
    if hook == "on_validation_batch_start":
        written = (run / "metrics.json").read_bytes(), (run / "csv" / "metrics.csv").read_bytes()
        finetune(make_cfg("finetune", overrides))  # a finished fine-tune: evaluated no more
        assert "the run had finished at step 8: its metrics.json is kept as it was" in capsys.readouterr().out
        assert ((run / "metrics.json").read_bytes(), (run / "csv" / "metrics.csv").read_bytes()) == written


def test_the_evaluation_of_a_run_stopped_at_its_last_update_is_logged_at_its_last_step(
    make_cfg, monkeypatch, tiny_ckpt
):
    """Stopped as its last update ended, mid-epoch (saved there, before Lightning counted the update and the epoch),
    the run resumed trains nothing: its validation and test rows were labelled step 3 and epoch 0, not step 4 and
    epoch 1 as the uninterrupted run's (Lightning labels an evaluation after training with the updates done and the
    epochs begun)."""
    from gpt1.commands.finetune import finetune

    common = [*FEW_FINETUNE, "task=sentiment", f"init_from={tiny_ckpt}"]  # 4 updates of the 8 of an epoch
    with_callback(monkeypatch, SignalAt(3, signal.SIGTERM))
    with pytest.raises(SystemExit):
        finetune(make_cfg("finetune", [*common, "resume=auto"]))
    monkeypatch.undo()
    finetune(make_cfg("finetune", [*common, "resume=auto"]))

    def evaluations(run: Path) -> list[dict]:
        return [row for row in comparable(run)[1] if "val/loss" in row or "test/loss" in row]

    got = evaluations(Path(make_cfg("finetune", common).paths.output_dir))
    assert len(got) == 2 and {(r["step"], r["epoch"]) for r in got} == {("4", "1")}  # its validation and test


# -- DDP: 2 processes on CPU (gloo) -------------------------------------------------------------------------------

DDP = [
    *TINY_RUN,
    "trainer.strategy=ddp",
    "trainer.accelerator=cpu",
    "trainer.devices=2",
    "data.samples_per_epoch=64",
    "trainer.max_steps=40",
    "trainer.val_check_interval=6",
    "trainer.check_val_every_n_epoch=null",
    "callbacks.checkpoint.every_n_steps=3",
    "callbacks.checkpoint.keep_last=-1",
    "callbacks.samples.every_n_steps=0",
]
"""2 ranks of 8 windows a batch, 4 batches an epoch per rank, 40 updates, a checkpoint every 3 (mid-epoch at 3, 6, 9:
a resume there needs the per-rank skip that used to raise IndexError)."""


def finish(proc: subprocess.Popen, timeout: float = 400) -> str:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return err


@pytest.fixture(scope="module")
def uninterrupted_ddp(tmp_path_factory, cache_dir):
    run = tmp_path_factory.mktemp("ddp") / "run"
    run.mkdir()
    proc = start(run, cache_dir, *DDP)
    err = finish(proc)
    assert proc.returncode == 0, err
    return weights(run)


@pytest.mark.slow  # three 2-process runs: about 1.5 minutes on 2 busy cores
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_a_ddp_run_killed_mid_run_resumes_exactly(tmp_path, cache_dir, uninterrupted_ddp, signum):
    """SIGKILL to every process (a lost node), or SIGTERM to rank 0 only (the ranks agree to stop after the same
    update); then resume=auto with 2 processes again ends with the uninterrupted 2-process run's weights."""
    run = tmp_path / "run"
    run.mkdir()
    proc = start(run, cache_dir, *DDP, "resume=auto")
    last = run / "checkpoints" / "last.ckpt"
    wait_for(last, proc)
    if signum == signal.SIGKILL:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        os.kill(proc.pid, signal.SIGTERM)
    err = finish(proc)
    assert proc.returncode == (-signal.SIGKILL if signum == signal.SIGKILL else 143), err
    stopped_at = step_of(last)
    assert 3 <= stopped_at < 40, err

    proc = start(run, cache_dir, *DDP, "resume=auto")
    err = finish(proc)
    assert proc.returncode == 0, err
    assert json.loads((run / "metrics.json").read_text())["steps"] == 40
    assert_same_weights(uninterrupted_ddp, weights(run))
