"""`gpt1 bench` runs end to end and reports every figure it promises (a smoke test: no timing is asserted)."""

import json
import sys

import pytest

from gpt1.bench import main

pytest.importorskip("transformers", reason="--compare hf builds HF's models")

TINY = ["--model", "tiny", "--batch", "2", "--seq", "16", "--new-tokens", "2", "--gen-batch", "2", "--warmup", "0",
        "--iters", "1"]
"""A bench of the test model, one timing of each figure: seconds."""


def test_bench_reports_speed_ceilings_and_the_ratios_to_hf(tmp_path, capsys, caplog):
    out = main([*TINY, "--mc-batch", "2", "--compare", "hf", "--json", str(tmp_path / "b.json")])
    assert json.loads((tmp_path / "b.json").read_text()) == json.loads(json.dumps(out))
    assert out["flops_per_token"] > 0 and out["peak_flops"] > 0 and out["memory_bandwidth"] > 0
    assert out["train"]["tokens_per_s"] > 0 and 0 < out["train"]["mfu"]
    if sys.platform.startswith("linux"):  # the process's peak resident set over gpt1's first step
        assert 0.05 < out["train"]["peak_memory_gib"] < 64
    assert {"batch1_ms_per_token", "batch2_ms_per_token", "bound_fraction"} <= out["generate"].keys()
    batch, choices, _ = out["multiple_choice"]["shape"]
    assert (batch, choices) == (2, 4) and out["multiple_choice"]["real_tokens"] > 0
    assert {"speedup_train", "speedup_generate", "speedup_multiple_choice", "speedup_multiple_choice_shared_context",
            "gpt1_generate_batch1_ms_per_token"} <= out["hf"].keys()
    assert 0 < out["multiple_choice"]["shared_context_step_s"]
    assert "loss_type" not in caplog.text  # HF's loss is named: no warning on every run
    printed = capsys.readouterr().out
    assert "MFU" in printed and "vs HF" in printed and "vs HF DoubleHeads" in printed and "before and after HF" in printed


def test_a_cpu_peak_is_measured_in_the_steps_precision():
    """Under bf16 autocast the CPU's peak is its bf16 GEMM rate: an fp32 peak would put MFU above 100%."""
    out = main([*TINY, "--mc-batch", "0", "--device", "cpu", "--precision", "bf16-mixed"])
    assert out["peak_source"] == "measured bfloat16 GEMM on the model's shapes" and out["train"]["mfu"] > 0
