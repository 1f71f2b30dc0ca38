"""A run directory has one writer (issue 48): a second gpt1 process on it stops at once, in one line naming the
holder, having written nothing there; a lock left by a killed process is taken over, saying so (at once on its own
host and for a requeued SLURM job's previous attempt, after its heartbeat stops from another host); DDP's other ranks
hold nothing. A save killed mid-write leaves nothing behind after the next start, and resume=auto goes on from the
newest complete checkpoint when last.ckpt is missing or unreadable."""

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import torch

import gpt1.core.run_lock
from gpt1.app.runner import user_message
from gpt1.commands.pretrain import train
from gpt1.core.errors import CheckpointError
from gpt1.core.run_lock import NAME, RunDirectoryInUse, hold, let_go, run_lock
from gpt1.training.resume import newest_complete
from tests.conftest import pretrained_run
from tests.helpers import FEW, TINY_RUN, run_gpt1, run_python
from tests.test_stops import LONG, FirstStep, start, step_of, wait_for, with_callback

ELSEWHERE = {
    "host": "node7",
    "pid": 4242,
    "start": None,
    "since": "2025-01-01 12:00:00+00:00",
    "command": "gpt1 pretrain",
    "slurm_job": None,
    "slurm_restart": 0,
}
"""A lock held from another host."""


def lock(directory: Path, age_s: float = 0.0, **holder) -> Path:
    """Write a lock of ``holder`` (ELSEWHERE's fields, changed) in ``directory``, last touched ``age_s`` ago."""
    path = directory / NAME
    path.write_text(json.dumps({**ELSEWHERE, **holder}))
    os.utime(path, (time.time() - age_s,) * 2)
    return path


def holder(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.fixture(autouse=True)
def first_process(monkeypatch):
    """This process is a run's only process (as the tests' runs are), not a rank of another job."""
    for name in ("RANK", "SLURM_PROCID", "NODE_RANK", "GROUP_RANK", "LOCAL_RANK", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)


def test_a_lock_held_from_another_host_is_refused_naming_its_holder_until_its_heartbeat_stops(tmp_path, capsys):
    path = lock(tmp_path)
    with pytest.raises(RunDirectoryInUse) as refused:
        hold(tmp_path, "gpt1 pretrain")
    message = user_message(refused.value)
    assert message.startswith(
        f"{tmp_path} is in use by another gpt1 process, PID 4242 on node7 (gpt1 pretrain), since "
        "2025-01-01 12:00:00+00:00: two processes in one run directory would mix their checkpoints and logs. "
    )
    assert "kill 4242 on node7" in message and f"resume=auto hydra.run.dir={tmp_path}" in message
    assert message.endswith(f"its lock is taken over 3 minutes after its last heartbeat (0 s ago), or delete {path}")
    assert holder(path) == ELSEWHERE  # left as it was

    os.utime(path, (time.time() - 600,) * 2)  # its heartbeat stopped 10 minutes ago: a lost node
    with run_lock(tmp_path, "gpt1 pretrain"):
        assert holder(path)["pid"] == os.getpid() and holder(path)["host"] == socket.gethostname()
    assert capsys.readouterr().err == (
        f"note: {path}: took over the lock of PID 4242 on node7 (gpt1 pretrain), since 2025-01-01 12:00:00+00:00, "
        "whose heartbeat stopped 10 minutes ago (its host lost, or the process killed)\n"
    )
    assert not path.exists()  # released


def test_a_lock_of_a_process_gone_from_this_host_is_taken_over_at_once_and_a_live_ones_is_not(tmp_path, capsys):
    here = socket.gethostname()
    sleeper = subprocess.Popen(["sleep", "60"])
    alive = gpt1.core.run_lock._process_start(sleeper.pid)
    lock(tmp_path, host=here, pid=sleeper.pid, start=alive)
    with pytest.raises(RunDirectoryInUse, match=rf"PID {sleeper.pid} on {here} \(gpt1 pretrain\)") as refused:
        hold(tmp_path, "gpt1 finetune")
    assert "heartbeat" not in str(refused.value)  # on this host its PID is checked: no waiting for a heartbeat

    sleeper.kill()
    sleeper.wait()
    with run_lock(tmp_path, "gpt1 finetune"):
        pass
    assert (
        f"took over the lock of PID {sleeper.pid} on {here} (gpt1 pretrain), since 2025-01-01 12:00:00+00:00, "
        "which is no longer running (killed, or crashed)"
    ) in capsys.readouterr().err

    lock(tmp_path, host=here, pid=os.getppid(), start="another-boot:1")  # a live PID, but another process's now
    with run_lock(tmp_path, "gpt1 finetune"):
        pass
    assert "which is no longer running" in capsys.readouterr().err


def test_a_requeued_slurm_job_takes_its_previous_attempts_lock_at_once(tmp_path, monkeypatch, capsys):
    """SLURM ends a job's processes before it requeues it: the new attempt need not wait for the old one's heartbeat
    to stop (another node's PID cannot be checked from here). Another task of the same attempt is a live holder."""
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    path = lock(tmp_path, host="n1", slurm_job="77", slurm_restart=0)
    with run_lock(tmp_path, "gpt1 pretrain"):
        assert holder(path)["slurm_job"] == "77" and holder(path)["slurm_restart"] == 1
    assert capsys.readouterr().err.endswith(
        "SLURM job 77), since 2025-01-01 12:00:00+00:00, this SLURM job's attempt 0, which SLURM ended before "
        "requeueing the job (this is attempt 1)\n"
    )
    lock(tmp_path, host="n1", slurm_job="77", slurm_restart=1)
    with pytest.raises(RunDirectoryInUse, match=r"PID 4242 on n1 \(gpt1 pretrain, SLURM job 77\)"):
        hold(tmp_path, "gpt1 pretrain")


def test_the_other_ranks_of_a_run_hold_nothing(tmp_path, monkeypatch):
    path = lock(tmp_path)
    for env in ({"LOCAL_RANK": "1"}, {"NODE_RANK": "1"}, {"SLURM_PROCID": "3"}, {"RANK": "1", "SLURM_PROCID": "0"}):
        with monkeypatch.context() as m:
            for name, value in env.items():
                m.setenv(name, value)
            with run_lock(tmp_path, "gpt1 pretrain"):  # another's lock, and no word: rank 0 holds the run
                pass
    assert holder(path) == ELSEWHERE
    monkeypatch.setenv("SLURM_PROCID", "0")
    with pytest.raises(RunDirectoryInUse):
        hold(tmp_path, "gpt1 pretrain")


def test_holds_nest_in_a_process_and_the_holder_beats(tmp_path, monkeypatch):
    monkeypatch.setattr(gpt1.core.run_lock, "HEARTBEAT_S", 0.05)
    path = tmp_path / NAME
    hold(tmp_path, "gpt1 pretrain")
    hold(tmp_path, "gpt1 pretrain")  # e.g. the Hydra app's hold, then the command function's
    os.utime(path, (time.time() - 600,) * 2)
    time.sleep(0.5)
    assert time.time() - path.stat().st_mtime < 5  # touched again
    let_go(tmp_path)
    assert path.exists()
    let_go(tmp_path)
    assert not path.exists()


# -- whole commands ------------------------------------------------------------------------------------------------


def test_a_second_process_on_a_training_run_directory_stops_at_once_having_written_nothing(tmp_path, cache_dir):
    """The first run goes on, and a signal stops it as ever (releasing the directory)."""
    run = tmp_path / "run"
    run.mkdir()
    first = start(run, cache_dir, *LONG, "trainer.max_steps=100000")  # (until stopped)
    wait_for(run / "checkpoints" / "last.ckpt", first)  # training
    held = holder(run / NAME)
    written = {p: p.read_bytes() for p in (run / ".hydra").iterdir()}
    second = run_gpt1("pretrain", *LONG, "seed=7", "resume=auto", f"hydra.run.dir={run}", cwd=tmp_path, check=False)
    assert second.returncode == 2, second.stderr
    assert second.stderr.splitlines()[-1].startswith(
        f"error: {run} is in use by another gpt1 process, PID {first.pid} on {socket.gethostname()} (gpt1 pretrain), "
        f"since {held['since']}: two processes in one run directory would mix their checkpoints and logs. "
    )
    assert {p: p.read_bytes() for p in (run / ".hydra").iterdir()} == written  # its config record, as it was
    assert holder(run / NAME) == held

    os.kill(first.pid, signal.SIGTERM)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 143, err
    assert not (run / NAME).exists()  # released as it stopped


KILLED_WRITING_LAST = """
import os, signal, sys
from pathlib import Path
import gpt1.training.callbacks.atomic_io as io
from gpt1.core.files import atomic_file

save = io.atomic_save

def killed_writing_last(checkpoint, path):
    if Path(path).name == "last.ckpt":  # its first write: the kill lands in it, a partial file written
        with atomic_file(path) as f:
            f.write(b"PK" + bytes(4096))
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
    save(checkpoint, path)

io.atomic_save = killed_writing_last
from gpt1.commands.pretrain import main
main()
"""
"""``gpt1 pretrain`` killed by SIGKILL while it writes last.ckpt the first time (after step0000002.ckpt)."""


def test_a_save_killed_mid_write_leaves_nothing_and_the_run_resumes_from_its_newest_complete_checkpoint(
    tmp_path, cache_dir, make_cfg, monkeypatch, capsys
):
    run = tmp_path / "run"
    overrides = [*FEW, "callbacks.checkpoint.every_n_steps=2"]
    paths = [f"hydra.run.dir={run}", f"paths.cache_dir={cache_dir}"]
    killed = run_python("-c", KILLED_WRITING_LAST, *overrides, *paths, cwd=tmp_path, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    checkpoints = run / "checkpoints"
    (partial,) = checkpoints.glob(".last.ckpt.*.tmp")
    assert sorted(p.name for p in checkpoints.glob("*.ckpt")) == ["step0000002.ckpt"]
    assert (run / NAME).exists()  # the killed process's lock, left

    first = with_callback(monkeypatch, FirstStep())
    assert train(make_cfg("pretrain", [*overrides, "resume=auto", f"paths.output_dir={run}"]))["steps"] == 4
    assert first.step == 2
    err = capsys.readouterr().err
    assert f"note: {run / NAME}: took over the lock of PID " in err and "which is no longer running" in err
    assert f"removed 1 partial file of a write that was killed: checkpoints/{partial.name} (in {run})" in err
    assert (
        f"resume=auto: {checkpoints / 'last.ckpt'} is missing: resuming from {checkpoints / 'step0000002.ckpt'}, "
        "the newest complete checkpoint of the run (step 2)"
    ) in err
    assert not partial.exists() and not (run / NAME).exists() and step_of(checkpoints / "last.ckpt") == 4


def test_resume_auto_of_a_finished_run_whose_last_ckpt_is_lost_changes_nothing_and_says_how_to_train_again(
    tmp_path, cache_dir, make_cfg
):
    """A finished run (metrics.json written) whose last.ckpt is missing, or a directory: resuming from an earlier
    checkpoint (or from nothing) trained again and wrote its results again. Refused in one line naming the file,
    nothing of the run changed; the line's resume= typed in place of resume=auto trains again from that step, to the
    same figures."""
    run = tmp_path / "run"
    steps = ["callbacks.samples.every_n_steps=0", "trainer.max_steps=2", "callbacks.checkpoint.every_n_steps=1"]
    pretrained_run(run, cache_dir, *steps)
    overrides = [*TINY_RUN, *steps]
    checkpoints = run / "checkpoints"
    (checkpoints / "last.ckpt").unlink()
    (checkpoints / "step0000002.ckpt").unlink()
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    with pytest.raises(CheckpointError) as refused:
        train(make_cfg("pretrain", [*overrides, "resume=auto"]))
    line = user_message(refused.value)
    assert line.startswith(f"resume=auto: {checkpoints / 'last.ckpt'} is missing, and the run had finished: "), line
    assert line.endswith(f"type resume={checkpoints / 'step0000001.ckpt'} in place of resume=auto"), line
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    (checkpoints / "last.ckpt").mkdir()
    with pytest.raises(CheckpointError, match=r"last\.ckpt is not a file: put the run's last checkpoint there"):
        train(make_cfg("pretrain", [*overrides, "resume=auto"]))
    (checkpoints / "last.ckpt").rmdir()
    typed = line.rsplit("type ", 1)[1].split()[0]
    again = train(make_cfg("pretrain", [*overrides, typed]))
    assert step_of(checkpoints / "last.ckpt") == 2
    assert again["val/loss"] == json.loads(before[run / "metrics.json"])["val/loss"]
    (checkpoints / "last.ckpt").unlink()  # a periodic checkpoint of the step it finished at: resumed, nothing redone
    kept = (run / "metrics.json").read_bytes()
    assert train(make_cfg("pretrain", [*overrides, "resume=auto"]))["val/loss"] == again["val/loss"]
    assert (run / "metrics.json").read_bytes() == kept


def test_resume_from_a_checkpoint_whose_loop_counters_are_damaged_is_refused_in_one_line(tmp_path, tiny_ckpt, make_cfg):
    """A bit flipped in the name of one of Lightning's loop counters ('total' read as 'tntal') ended in Lightning's
    KeyError: 'total' as it restored them. Refused in one line before anything of the run is written (but its
    provenance.json's record of the attempt)."""
    run = tmp_path / "run"
    shutil.copytree(tiny_ckpt.parents[1], run)
    last = run / "checkpoints" / "last.ckpt"
    raw = torch.load(last, weights_only=True)
    progress = raw["loops"]["fit_loop"]["epoch_loop.batch_progress"]
    progress["tntal"] = progress.pop("total")
    torch.save(raw, last)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != "provenance.json"}
    overrides = [*TINY_RUN, "callbacks.samples.every_n_steps=0", "trainer.max_steps=2", "resume=auto"]
    with pytest.raises(CheckpointError) as refused:
        train(make_cfg("pretrain", overrides))
    after = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != "provenance.json"}
    assert after == before  # (its csv/hparams.yaml was written again before the checkpoint was read)
    assert user_message(refused.value) == (
        f"resume={last}: its training loop's counters are damaged (fit_loop/epoch_loop.batch_progress/total is "
        f"missing): resume from another checkpoint of the run, or start from its weights with init_from={last}"
    )
    typed = user_message(refused.value).rsplit(" ", 1)[1]  # the init_from= it names, typed in a new run
    fresh = [*TINY_RUN, "callbacks.samples.every_n_steps=0", "trainer.max_steps=1", typed, f"paths.output_dir={run}2"]
    assert train(make_cfg("pretrain", fresh))["steps"] == 1


def test_resume_auto_reads_past_an_unreadable_last_ckpt_and_stops_if_none_is_readable(tmp_path, tiny_ckpt, capsys):
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    shutil.copy(tiny_ckpt, checkpoints / "step0000002.ckpt")
    (checkpoints / "step0000001.ckpt").write_bytes(b"torn")  # older, and unreadable too: not a candidate
    (checkpoints / "last.ckpt").write_bytes(tiny_ckpt.read_bytes()[:1000])  # torn
    assert newest_complete(checkpoints) == checkpoints / "step0000002.ckpt"
    said = capsys.readouterr().err
    assert said.startswith(f"resume=auto: {checkpoints / 'last.ckpt'} cannot be read (") and said.endswith(
        f": resuming from {checkpoints / 'step0000002.ckpt'}, the newest complete checkpoint of the run (step 2)\n"
    )
    (checkpoints / "step0000002.ckpt").unlink()
    with pytest.raises(CheckpointError, match=r"last\.ckpt cannot be read as a checkpoint \(truncated or corrupt"):
        newest_complete(checkpoints)
