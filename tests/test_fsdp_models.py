"""trainer=fsdp with the combinations tests/test_fsdp.py leaves out (issue 36): the LSTM baseline (model=lstm, one
FSDP unit: it has no blocks) fine-tuned as under DDP, and compile=true (the sharded module compiled in place) training
as without it. Each is two 2-process runs of 30-60 s on 2 cores (compiling: 2-3 minutes), so both are slow."""

import pytest
import torch

from gpt1.checkpoints.format import load_checkpoint
from tests.test_fsdp import FINETUNE, PRETRAIN, assert_close, logged, run, state

pytestmark = pytest.mark.slow


def test_fsdp_finetunes_the_lstm_baseline_as_ddp(tmp_path, cache_dir, tiny_ckpt):
    """Measured on 2 CPU processes: the three losses of the 20 updates equal to DDP's bit for bit."""
    runs = {
        s: run(
            "finetune",
            tmp_path / s,
            s,
            *FINETUNE,
            "model=lstm",
            f"init_from={tiny_ckpt}",
            f"paths.cache_dir={cache_dir}",
        )
        for s in ("ddp", "fsdp")
    }
    for key in ("train/loss", "train/task_loss", "train/lm_loss"):
        assert_close(logged(runs["ddp"], key), logged(runs["fsdp"], key))
    ckpt = runs["fsdp"] / "checkpoints" / "last.ckpt"
    assert type(load_checkpoint(ckpt).model).__name__ == "LSTM"  # one consolidated file, the plain class
    expected, got = state(runs["ddp"] / "checkpoints" / "last.ckpt"), state(ckpt)
    assert got.keys() == expected.keys() and any(k.startswith("lstm.") for k in got)
    for name, tensor in expected.items():
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=5e-5, msg=name)


def test_fsdp_with_compile_pretrains_as_without(tmp_path, cache_dir):
    """Measured on 2 CPU processes: losses within 2e-7 (relative) of the uncompiled run's (fused kernels round
    differently)."""
    plain, compiled = (
        run("pretrain", tmp_path / name, "fsdp", *PRETRAIN, f"compile={flag}", f"paths.cache_dir={cache_dir}")
        for name, flag in (("plain", "false"), ("compiled", "true"))
    )
    assert_close(logged(plain), logged(compiled))
    expected, got = state(plain / "checkpoints" / "last.ckpt"), state(compiled / "checkpoints" / "last.ckpt")
    assert got.keys() == expected.keys()  # plain parameter names: compiling in place adds no prefix
    for name, tensor in expected.items():
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=5e-5, msg=name)
