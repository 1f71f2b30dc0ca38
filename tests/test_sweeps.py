"""Resuming a sweep (gpt1/app/sweep.py): each job in a directory named by its overrides, not its position; the same
``-m`` command with ``resume=auto`` launches only the jobs that have not finished, each resuming from its own
last.ckpt, and says in a line per job what becomes of it; an extended or reordered sweep finds every earlier job's
own directory. The submitit launchers: tests/test_scale.py (local) and tests/test_slurm.py (SLURM); the Optuna
sweeper: tests/test_experiments.py."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
import yaml
from omegaconf import OmegaConf

from gpt1.app.effects import effect
from gpt1.app.sweep import READABLE, Job, _earlier, job_dir, job_dir_of
from gpt1.checkpoints.format import read_checkpoint
from gpt1.core import provenance
from gpt1.core.run_record import override

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "GPT1_CPU_MATMUL": "torch"}
JOBS = [
    "task=sentiment",
    "++task.splits.train='train[:64]'",
    "++task.splits.validation='validation[:16]'",
    "++task.splits.test='test[:16]'",
    "batch_size=8",
    "trainer.max_steps=6",
    "callbacks.checkpoint.every_n_steps=1",
    "logger=csv",
    "trainer.enable_progress_bar=false",
    "trainer.num_sanity_val_steps=0",
]
"""Fine-tuning jobs of 6 updates, a checkpoint after each."""


def test_a_job_directory_is_named_by_its_overrides_not_their_order():
    name = job_dir(["seed=1", "task=rte", "aux_lm_weight=0.5"], swept={"seed", "aux_lm_weight"})
    assert re.fullmatch(r"aux_lm_weight=0\.5,seed=1-[0-9a-f]{8}", name)
    digest = name[-8:]
    assert job_dir(["aux_lm_weight=0.5", "task=rte", "seed=1"], swept={"seed", "aux_lm_weight"}) == name
    assert job_dir(["resume=auto", "seed=1", "task=rte", "aux_lm_weight=0.5"], swept={"seed"}).endswith(digest)
    assert job_dir(["seed=1", "task=rte", "aux_lm_weight=0.5"]) == f"aux_lm_weight=0.5,seed=1,task=rte-{digest}"
    assert not job_dir(["seed=2", "task=rte", "aux_lm_weight=0.5"]).endswith(digest)  # another job
    with_path = job_dir(["seed=1", "init_from=/runs/a/last.ckpt"])  # a path: in the hash only
    assert with_path.startswith("seed=1-") and with_path != job_dir(["seed=1", "init_from=/runs/b/last.ckpt"])
    odd = job_dir(["++task.splits.train='train[:64]'", *(f"k{i}=value{i}" for i in range(20))])
    assert odd.startswith("++task.splits.train=_train__64__,k0=value0,") and len(odd) <= READABLE + 9


def test_a_sweep_extended_by_values_of_a_key_finds_its_earlier_jobs(tmp_path):
    """head_pdrop=0.1 was one value (not in the names); swept now, it names the jobs: an earlier job keeps its own
    directory, found by its hash."""
    sweep = tmp_path / "sweep"
    old = job_dir(["seed=1", "head_pdrop=0.1"], swept={"seed"})
    (sweep / old).mkdir(parents=True)
    OmegaConf.save({"hydra": {"overrides": {"task": ["seed=1,2", "head_pdrop=0.1,0.2"]}}}, sweep / "multirun.yaml")

    def subdir(*overrides: str) -> str:
        hydra = {"overrides": {"task": list(overrides)}, "sweep": {"dir": str(sweep)}, "sweeper": {"params": None}}
        return job_dir_of(_root_=OmegaConf.create({"hydra": hydra}))

    assert old.startswith("seed=1-") and subdir("seed=1", "head_pdrop=0.1") == old
    assert subdir("seed=1", "head_pdrop=0.2") == job_dir(["seed=1", "head_pdrop=0.2"], swept={"seed", "head_pdrop"})


def test_a_jobs_directory_says_what_becomes_of_it(tmp_path):
    def made(name: str, step: int | None = None, steps: int | None = None, failed: str | None = None) -> Job:
        directory = tmp_path / name
        (directory / ".hydra").mkdir(parents=True)
        if step is not None:
            (directory / "checkpoints").mkdir()
            torch.save({"global_step": step}, directory / "checkpoints" / "last.ckpt")
        if steps is not None:
            (directory / "metrics.json").write_text(json.dumps({"steps": steps, "val/accuracy": 0.5}))
        if failed:
            attempt = {"outcome": "failed", "error": failed}
            (directory / "provenance.json").write_text(json.dumps({"attempts": [attempt]}))
        return Job.read(["seed=1"], directory)

    assert made("done", step=6, steps=6).line(["seed=1"]).startswith("seed=1: finished before: not run again")
    assert made("stale", step=4, steps=6).line(["seed=1"]).startswith("seed=1: resumed at step 4 (")  # run again
    assert made("killed", step=3).line(["seed=1"]).startswith("seed=1: resumed at step 3 (")
    failed = made("failed", step=3, failed="error: disk full").line(["seed=1"])
    assert failed.startswith("seed=1: failed before (error: disk full), resumed at step 3 (")
    assert (
        made("early", failed="error: bad row")
        .line(["seed=1"])
        .startswith("seed=1: failed before (error: bad row), started again (")
    )
    assert made("nothing").line(["seed=1"]).startswith("seed=1: started again (")  # killed before a checkpoint
    assert Job.read(["seed=1"], tmp_path / "new").line(["seed=1"]) == f"seed=1: started ({tmp_path / 'new'})"

    # a finished job's damaged metrics.json: rebuilt from the copy in its provenance.json (the sweep said "resumed at
    # step 6" and the job evaluated it again), or, with no copy, its evaluation done again, saying so
    figures = {"steps": 6, "val/accuracy": 0.5}
    for name, attempt in (("copied", {"outcome": "finished", "results": figures}), ("lost", {"outcome": "finished"})):
        made(name, step=6)
        (tmp_path / name / "metrics.json").write_text("{")
        (tmp_path / name / "provenance.json").write_text(json.dumps({"attempts": [attempt]}))
    job = Job.read(["seed=1"], tmp_path / "copied")
    (aside,) = (tmp_path / "copied").glob("metrics.json.damaged-*")
    assert job.metrics == figures == json.loads((tmp_path / "copied" / "metrics.json").read_text())
    assert job.line(["seed=1"]) == (
        f"seed=1: finished before: not run again; {tmp_path / 'copied' / 'metrics.json'} could not be read "
        f"(JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)): kept as "
        f"{aside.name}: rebuilt from the copy of its figures in provenance.json (step 6) ({tmp_path / 'copied'})"
    )
    job = Job.read(["seed=1"], tmp_path / "lost")
    assert job.metrics is None and job.line(["seed=1"]).startswith("seed=1: finished before at step 6; ")
    assert "the evaluation after training is done again on the weights of step 6" in job.line(["seed=1"])


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory``: relative path -> bytes."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def jobs_by_seed(sweep: Path) -> dict[int, Path]:
    found = {}
    for overrides in sweep.glob("*/.hydra/overrides.yaml"):
        seed = next(o for o in yaml.safe_load(overrides.read_text()) if o.startswith("seed="))
        found[int(seed.partition("=")[2])] = overrides.parent.parent
    return found


def test_a_sweep_killed_during_a_job_resumes_and_then_extends_and_reorders(tmp_path, tiny_ckpt, cache_dir):
    """The issue's sweep of seeds 1, 2, 3, its launcher SIGKILLed during the job of seed 2, then the same command with
    resume=auto: seed 1's directory byte-equal, seed 2 resumed from its last.ckpt to the weights of an uninterrupted
    run bit for bit, seed 3 run; then seeds 3, 2, 1, 4: the three kept, seed 4 in a directory of its own."""
    sweep = tmp_path / "sweep"
    common = [f"init_from={tiny_ckpt}", *JOBS, f"paths.cache_dir={cache_dir}", f"hydra.sweep.dir={sweep}"]
    app = [sys.executable, str(REPO / "tests" / "sweep_app.py"), "-m", "hydra.job.name=finetune"]
    slow = {**ENV, "GPT1_TEST_STEP_S": "1"}
    killed = subprocess.Popen([*app, "seed=1,2,3", *common], cwd=tmp_path, env=slow, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while not list(sweep.glob("seed=2-*/checkpoints/step0000002.ckpt")):
            assert killed.poll() is None and time.monotonic() < deadline, "the sweep ended before seed 2's step 2"
            time.sleep(0.2)
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    first = jobs_by_seed(sweep)
    assert sorted(first) == [1, 2] and (first[1] / "metrics.json").is_file()
    assert not (first[2] / "metrics.json").exists()
    kept = snapshot(first[1])

    said = []

    def resume(*seeds: int) -> list[str]:  # the sweep's directory and the seeds: the rest from its record
        command = ["gpt1", "finetune", "-m", f"seed={','.join(map(str, seeds))}", "resume=auto", common[-1]]
        done = subprocess.run(command, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        said.append([line for line in done.stderr.splitlines() if line.startswith("note:") and "record" in line])
        return [line.strip() for line in done.stdout.splitlines() if line.startswith("  seed=")]

    lines = resume(1, 2, 3)
    jobs = jobs_by_seed(sweep)
    assert lines[0] == f"seed=1: finished before: not run again, its directory kept as it was ({jobs[1]})"
    assert re.fullmatch(rf"seed=2: resumed at step [1-5] \({re.escape(str(jobs[2]))}\)", lines[1]), lines[1]
    assert lines[2] == f"seed=3: started ({jobs[3]})" and len(lines) == 3
    assert snapshot(jobs[1]) == kept and jobs[2] == first[2]

    whole = tmp_path / "uninterrupted"
    single = ["gpt1", "finetune", "seed=2", *common[:-1], f"hydra.run.dir={whole}"]
    done = subprocess.run(single, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ours, theirs = (read_checkpoint(run / "checkpoints" / "last.ckpt") for run in (jobs[2], whole))
    assert ours["global_step"] == theirs["global_step"] == 6
    for key, weights in theirs["state_dict"].items():
        assert torch.equal(ours["state_dict"][key], weights), key
    assert (
        json.loads((jobs[2] / "metrics.json").read_text())["val/accuracy"]
        == (json.loads((whole / "metrics.json").read_text())["val/accuracy"])
    )

    kept = {seed: snapshot(job) for seed, job in jobs.items()}
    lines = resume(3, 2, 1, 4)  # reordered and extended
    assert [line.split(":")[0] for line in lines] == ["seed=3", "seed=2", "seed=1", "seed=4"]
    assert all(": finished before: " in line for line in lines[:3]) and lines[3].startswith("seed=4: started (")
    after = jobs_by_seed(sweep)
    assert {seed: snapshot(after[seed]) for seed in kept} == kept and (after[4] / "metrics.json").is_file()
    assert said == [[], [f"note: seed=3,2,1,4 differs from the sweep's record (seed=1,2,3): {effect('seed')}"]]

    # each job records its own command (the sweep's beside it): the one that runs it alone
    (attempt,) = provenance.attempts(after[4])
    assert attempt["command"].startswith("gpt1 finetune ")
    assert attempt["command"].endswith(f" {override('hydra.run.dir', after[4])}")  # (its name has a =: quoted)
    assert " seed=4 " in f"{attempt['command']} " and "seed=3,2,1,4" in attempt["sweep_command"]

    # resume=auto in a new sweep directory names the sweep beside it, in a command that resumes it as printed
    note = _earlier(tmp_path / "elsewhere" / "new", "finetune")
    beside = f"{tmp_path / 'elsewhere'} holds no earlier sweep of gpt1 finetune (give one's directory: hydra.sweep.dir)"
    assert note == f"; {beside}"
    advice = _earlier(tmp_path / "new", "finetune").partition(" resumes with ")[2]
    assert advice == f"gpt1 finetune -m resume=auto hydra.sweep.dir={sweep}"
    clean = {"PATH": ENV["PATH"], "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": ENV["XDG_CACHE_HOME"]}
    done = subprocess.run(["bash", "-c", advice], cwd=tmp_path, env=clean, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count(": finished before: not run again, its directory kept as it was") == 4
