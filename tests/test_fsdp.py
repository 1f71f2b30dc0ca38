"""trainer=fsdp (FSDP2, ``fully_shard`` per block) on 2 CPU processes over gloo, against 2-process DDP: each of 20
updates' loss equal within fp32 tolerance, pre-training and fine-tuning, with the same global batch; one consolidated
checkpoint that every command loads; a run resumed from the checkpoint that a kill leaves (the last periodic one) ends
as the uninterrupted run, bit for bit. And trainer=deepspeed on a CPU: one line."""

import csv
import json
import subprocess
from pathlib import Path

import pytest
import torch

from gpt1.checkpoints.format import load_checkpoint
from gpt1.commands.evaluate import evaluate
from gpt1.commands.generate import generate
from tests.helpers import TINY_RUN
from tests.test_scale import ENV

CPU = ["trainer.accelerator=cpu", "trainer.devices=2", "trainer.precision=32-true"]
STEPS = [
    "trainer.max_steps=20",
    "trainer.log_every_n_steps=1",
    "callbacks.checkpoint.every_n_steps=5",
    "callbacks.checkpoint.keep_last=-1",
    "logger=csv",
    "trainer.enable_progress_bar=false",
    "trainer.num_sanity_val_steps=0",
]
"""20 updates, each one's loss logged, a checkpoint every 5 (step0000010.ckpt: what a kill after update 10-14
leaves)."""
PRETRAIN = [
    *TINY_RUN,
    *STEPS,
    "trainer.val_check_interval=10",
    "trainer.check_val_every_n_epoch=null",
    "trainer.limit_val_batches=2",
    "callbacks.samples.every_n_steps=10",
]
"""Global batches of 8 windows (4 a process), validated at 10 and 20, a text sample at 10 and 20 (FSDP: gathered)."""
FINETUNE = [
    "task=sentiment",
    "++task.splits.train='train[:160]'",
    "++task.splits.validation='validation[:16]'",
    "++task.splits.test='test[:16]'",
    "batch_size=8",
    *STEPS,
]
"""20 updates of 8 examples (4 a process; one epoch of 160), the auxiliary LM loss on (aux_lm_weight 0.5)."""
RTOL = 1e-5
"""fp32: FSDP reduce-scatters the gradients where DDP all-reduces them, so sums differ in their last bits; measured
on 2 CPU processes: losses within 8e-8 (relative) after 20 updates, pre-training; equal, fine-tuning."""


def run(command: str, directory: Path, strategy: str, *overrides: str) -> Path:
    proc = subprocess.run(
        ["gpt1", command, f"trainer={strategy}", *CPU, *overrides, f"hydra.run.dir={directory}"],
        cwd=directory.parent,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"gpt1 {command} trainer={strategy} failed:\n{proc.stdout}\n{proc.stderr}"
    memory = [line for line in proc.stderr.splitlines() if line.startswith("peak memory: host ")]
    assert memory == proc.stderr.splitlines()[-1:]  # the last line, rank 0's only
    peak = json.loads((directory / "metrics.json").read_text())["peak_host_memory_gb"]
    assert memory[0].startswith(f"peak memory: host {peak:.3f} GB") or peak < float(memory[0].split()[3])
    return directory


def logged(directory: Path, key: str = "train/loss") -> dict[int, float]:
    """{step: value} of a per-update metric in the run's CSV log (rank 0's)."""
    with open(directory / "csv" / "metrics.csv") as f:
        return {int(row["step"]): float(row[key]) for row in csv.DictReader(f) if row.get(key)}


def state(ckpt: Path) -> dict[str, torch.Tensor]:
    """The decoder's and the heads' weights of a gpt1 checkpoint, as every command loads them."""
    loaded = load_checkpoint(ckpt)
    return {**loaded.model.state_dict(), **{f"heads.{k}": v for k, v in loaded.heads.items()}}


def assert_close(expected: dict[int, float], got: dict[int, float]) -> None:
    assert sorted(got) == sorted(expected) == list(range(20))
    assert [got[k] for k in sorted(got)] == pytest.approx([expected[k] for k in sorted(expected)], rel=RTOL, abs=0)


def assert_resumed_exactly(uninterrupted: Path, resumed: Path, keys: tuple[str, ...]) -> None:
    for key in keys:  # updates 11-20 (steps 10-19), each one's loss bit for bit
        after = logged(resumed, key)
        assert sorted(after) == list(range(10, 20)) and after == {k: logged(uninterrupted, key)[k] for k in after}, key
    expected, got = (
        torch.load(d / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
        for d in (uninterrupted, resumed)
    )
    assert expected["state_dict"].keys() == got["state_dict"].keys()
    for name, tensor in expected["state_dict"].items():
        assert torch.equal(tensor, got["state_dict"][name]), name
    for slot, moments in expected["optimizer_states"][0]["state"].items():  # Adam's moments, every parameter's
        for name, value in moments.items():
            assert torch.equal(value, got["optimizer_states"][0]["state"][slot][name]), (slot, name)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, cache_dir) -> dict[str, Path]:
    """The same 20 pre-training updates under 2-process DDP and FSDP."""
    root = tmp_path_factory.mktemp("pretrain")
    return {s: run("pretrain", root / s, s, *PRETRAIN, f"paths.cache_dir={cache_dir}") for s in ("ddp", "fsdp")}


def test_fsdp_pretrains_as_ddp_with_the_same_global_batch(pretrained):
    ddp, fsdp = pretrained["ddp"], pretrained["fsdp"]
    assert_close(logged(ddp), logged(fsdp))
    samples = logged(fsdp, "train/samples")  # rank 0's windows so far: 4 of each global batch of 8
    assert samples == logged(ddp, "train/samples") and samples[19] == 20 * 4
    metrics = json.loads((fsdp / "metrics.json").read_text())
    assert metrics["steps"] == 20 and metrics["tokens_seen"] == 20 * 8 * 32
    assert metrics["val/loss"] == pytest.approx(json.loads((ddp / "metrics.json").read_text())["val/loss"], rel=RTOL)
    assert metrics["sample"]  # decoded on rank 0 from the gathered weights
    expected, got = state(ddp / "checkpoints" / "last.ckpt"), state(fsdp / "checkpoints" / "last.ckpt")
    assert got.keys() == expected.keys()  # one tokens_embed.weight: the LM head stays tied to it
    for name, tensor in expected.items():
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=5e-5, msg=name)


def test_an_fsdp_checkpoint_is_one_file_that_every_command_loads(pretrained, make_cfg):
    ckpt = pretrained["fsdp"] / "checkpoints" / "last.ckpt"
    assert ckpt.is_file() and load_checkpoint(ckpt).model.config.n_layer == 2
    text = generate(make_cfg("generate", [f"ckpt={ckpt}", "prompt=she said", "max_new_tokens=4", "device=cpu"]))
    assert text[0].startswith("she said")
    scores = evaluate(
        make_cfg("evaluate", [f"ckpt={ckpt}", "data.max_valid_windows=8", "trainer.enable_progress_bar=false"])
    )
    assert scores["val/ppl"] > 1  # (fine-tuning starts from it below)


def test_a_resumed_fsdp_pretraining_equals_the_uninterrupted_run(pretrained, tmp_path, cache_dir):
    fsdp = pretrained["fsdp"]
    resumed = run(
        "pretrain",
        tmp_path / "resumed",
        "fsdp",
        *PRETRAIN,
        f"paths.cache_dir={cache_dir}",
        f"resume={fsdp / 'checkpoints' / 'step0000010.ckpt'}",
    )
    assert_resumed_exactly(fsdp, resumed, ("train/loss",))


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory, cache_dir, pretrained) -> dict[str, Path]:
    """The same 20 fine-tuning updates under 2-process DDP and FSDP, from the FSDP pre-training's checkpoint."""
    root = tmp_path_factory.mktemp("finetune")
    init = pretrained["fsdp"] / "checkpoints" / "last.ckpt"
    return {
        s: run("finetune", root / s, s, *FINETUNE, f"init_from={init}", f"paths.cache_dir={cache_dir}")
        for s in ("ddp", "fsdp")
    }


@pytest.mark.slow  # two more 2-process runs (60 s on 2 cores); the default suite resumes the FSDP pre-training
def test_fsdp_finetunes_as_ddp(finetuned, make_cfg):
    ddp, fsdp = finetuned["ddp"], finetuned["fsdp"]
    for key in ("train/loss", "train/task_loss", "train/lm_loss"):
        assert_close(logged(ddp, key), logged(fsdp, key))
    assert logged(fsdp, "train/samples")[19] == 20 * 4  # 4 examples a process of each batch of 8
    metrics = json.loads((fsdp / "metrics.json").read_text())
    assert metrics["steps"] == 20
    expected, got = state(ddp / "checkpoints" / "last.ckpt"), state(fsdp / "checkpoints" / "last.ckpt")
    assert got.keys() == expected.keys() and "heads.classification.linear.weight" in got
    for name, tensor in expected.items():
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=5e-5, msg=name)
    scores = evaluate(make_cfg("evaluate", [f"ckpt={metrics['checkpoint']}", "trainer.enable_progress_bar=false"]))
    assert scores["val/accuracy"] == pytest.approx(metrics["val/accuracy"], abs=1e-6)  # the selected weights


@pytest.mark.slow  # on the two fine-tuning runs above
def test_a_resumed_fsdp_finetuning_equals_the_uninterrupted_run(finetuned, pretrained, tmp_path, cache_dir):
    """Each rank continues from its own generators (fine-tuning's packed rows make their dropout draws differ)."""
    fsdp = finetuned["fsdp"]
    init = pretrained["fsdp"] / "checkpoints" / "last.ckpt"
    resumed = run(
        "finetune",
        tmp_path / "resumed",
        "fsdp",
        *FINETUNE,
        f"init_from={init}",
        f"paths.cache_dir={cache_dir}",
        f"resume={fsdp / 'checkpoints' / 'step0000010.ckpt'}",
    )
    assert_resumed_exactly(fsdp, resumed, ("train/loss", "train/task_loss", "train/lm_loss"))


def test_deepspeed_on_a_cpu_is_refused_in_one_line(tmp_path):
    proc = subprocess.run(
        ["gpt1", "pretrain", "trainer=deepspeed", "trainer.accelerator=cpu"],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "error: trainer.strategy=deepspeed_stage_2 runs on GPUs only (Lightning's), not trainer.accelerator=cpu: use "
        "trainer=fsdp (FSDP2) or trainer=ddp with trainer.accelerator=cpu on CPUs"
    ]
