"""W&B (offline, no network): a multirun gives one W&B run per job, grouped by the sweep and named by the job's
overrides, each with its config, metrics, sample predictions and summary; then ``gpt1 report`` on the sweep."""

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from wandb.proto import wandb_internal_pb2

from tests.helpers import OFFLINE_ENV, REPO, run_gpt1, run_python


def wandb_records(path: Path) -> list[wandb_internal_pb2.Record]:
    """The records of an offline run's .wandb file: a LevelDB-style log (a 7-byte header, then 32 KiB blocks of
    chunks, each a 7-byte header: crc32c, length, type FULL/FIRST/MIDDLE/LAST), each record a protobuf."""
    data = path.read_bytes()
    assert data[:4] == b":W&B", path
    records, pending, pos = [], b"", 7
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a chunk header is padding
            pos += 32768 - pos % 32768
            continue
        length, kind = struct.unpack_from("<HB", data, pos + 4)
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def offline_run(run_dir: Path) -> dict[str, Any]:
    """What an offline run recorded: its id, group, name, config keys, history keys, summary keys and exit code."""
    found = list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(found) == 1, found
    run: dict[str, Any] = {"config": set(), "history": set(), "summary": set(), "exit": None}
    for r in wandb_records(found[0]):
        kind = r.WhichOneof("record_type")
        if kind == "run":
            run.update(id=r.run.run_id, group=r.run.run_group, name=r.run.display_name)
        elif kind in ("config", "summary", "history"):
            items = {"config": r.config.update, "summary": r.summary.update, "history": r.history.item}[kind]
            run[kind] |= {it.key or "/".join(it.nested_key) for it in items}
        elif kind == "exit":
            run["exit"] = r.exit.exit_code
    return run


@pytest.mark.slow  # a 4-job sweep: 30 s on 2 cores (a run per job: the failed-job test below, default suite)
def test_an_ablation_sweep_gives_one_wandb_run_per_job_and_a_report(tmp_path, cache_dir, tiny_ckpt):
    sweep = tmp_path / "sweep"
    env = {
        **OFFLINE_ENV,
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DISABLE_GIT": "true",
        "OMP_NUM_THREADS": "1",
    }
    experiment = "ablation_aux_lm" if (REPO / "conf/experiment/ablation_aux_lm.yaml").is_file() else None
    sweep_args = [f"experiment={experiment}"] if experiment else ["aux_lm_weight=0,0.5"]
    command = [
        "finetune",
        "-m",
        *sweep_args,
        "task=sentiment",
        f"init_from={tiny_ckpt}",
        "seed=1,2",
        "logger=wandb",
        "logger.wandb.mode=offline",
        f"hydra.sweep.dir={sweep}",
        f"paths.cache_dir={cache_dir}",
        "++task.splits.train='train[:16]'",
        "++task.splits.validation='validation[:16]'",
        "++task.splits.test='test[:8]'",
        "batch_size=8",
        "trainer.max_steps=1",
        "trainer.enable_progress_bar=false",
        "trainer.num_sanity_val_steps=0",
        "trainer.log_every_n_steps=1",
    ]
    run_gpt1(*command, cwd=tmp_path, env=env, timeout=600)

    jobs = sorted(p.parent.parent for p in sweep.glob("*/.hydra/overrides.yaml"))
    assert len(jobs) == 4 and all((j / "metrics.json").is_file() for j in jobs)
    runs = [offline_run(j) for j in jobs]
    assert len({r["id"] for r in runs}) == 4  # four runs, not one reused
    assert {r["group"] for r in runs} == {"sweep"}  # the sweep directory, relative to the working directory
    assert sorted(r["name"] for r in runs) == [f"aux_lm_weight={w},seed={s}" for w in ("0", "0.5") for s in (1, 2)]
    for run in runs:
        assert run["exit"] == 0
        assert {"aux_lm_weight", "seed", "task", "optim", "provenance"} <= run["config"]  # resolved, and what ran it
        assert {"val/accuracy", "train/loss", "val/predictions/_type"} <= run["history"]  # metrics, the table
        assert {"val/accuracy", "test/accuracy", "baseline/accuracy", "steps", "wall_time_s"} <= run["summary"]
    (table,) = jobs[0].glob("wandb/offline-run-*/files/media/table/val/predictions_*.table.json")
    predictions = json.loads(table.read_text())
    assert predictions["columns"] == ["index", "text", "gold", "predicted"] and len(predictions["data"]) == 8
    assert {row[2] for row in predictions["data"]} <= {"negative", "positive"}

    run_gpt1("report", str(sweep), cwd=tmp_path, env=env, timeout=120)
    table = (sweep / "report.md").read_text()
    assert "| aux_lm_weight | n | failed | val/accuracy" in table and "| 0.5 | 2 | 0 |" in table
    assert "Ran with (every job): gpt1 " in table  # the jobs' provenance.json, the same for all four
    assert (sweep / "report.csv").is_file() and (sweep / "ablation-val_accuracy.png").is_file()


FAILING_JOB = """
import sys, wandb
from gpt1.training.loggers import wandb_job
for job, fail in enumerate([True, False]):
    try:
        with wandb_job():
            wandb.init(mode="offline", dir=f"{sys.argv[1]}/{job}", project="gpt1-test")
            if fail:
                raise RuntimeError("the job failed")
    except RuntimeError:
        assert wandb.run is None
"""


def test_a_failed_job_finishes_its_wandb_run_and_the_next_job_gets_its_own(tmp_path):
    # In a subprocess: W&B writes a run's last records to its file when the process's W&B service closes.
    for job in ("0", "1"):
        (tmp_path / job).mkdir()
    env = {**OFFLINE_ENV, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true"}
    run_python("-c", FAILING_JOB, str(tmp_path), cwd=REPO, env=env, timeout=120)
    failed, succeeded = offline_run(tmp_path / "0"), offline_run(tmp_path / "1")
    assert (failed["exit"], succeeded["exit"]) == (1, 0) and failed["id"] != succeeded["id"]
