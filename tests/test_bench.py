"""`gpt1 bench` runs end to end and reports every figure it promises (a smoke test: no timing is asserted)."""

import json
import sys

import pytest
import torch

import gpt1.tools.bench
import gpt1.ops
from gpt1.tools.bench import DENSE_PEAK_TFLOPS, device_peak, main, report

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
    assert out["cpu_matmuls"] == gpt1.ops.CPU_MATMULS and out["cpu_vendor"] == gpt1.ops.cpu_vendor()
    assert f"fp32 matmuls: {out['cpu_matmuls']}" in out["device"]
    assert "loss_type" not in caplog.text  # HF's loss is named: no warning on every run
    printed = capsys.readouterr().out
    assert "MFU" in printed and "vs HF" in printed and "vs HF DoubleHeads" in printed and "before and after HF" in printed


def test_a_cpu_peak_is_measured_in_the_steps_precision():
    """Under bf16 autocast the CPU's peak is its bf16 GEMM rate: an fp32 peak would put MFU above 100%."""
    out = main([*TINY, "--mc-batch", "0", "--device", "cpu", "--precision", "bf16-mixed"])
    assert out["peak_source"] == "measured bfloat16 GEMM on the model's shapes" and out["train"]["mfu"] > 0


@pytest.mark.parametrize("name, row", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),  # torch's name for the SXM part
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA GeForce RTX 4090", None),
])
def test_a_gpu_peak_comes_from_the_table_by_the_devices_name(monkeypatch, name, row):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    peak, source = device_peak(torch.device("cuda"), "bf16-mixed", None)
    if row is None:
        assert peak is None and "pass --peak-tflops" in source
    else:
        assert (peak, source) == (DENSE_PEAK_TFLOPS[row]["bf16"] * 1e12, f"{row} dense bf16 (data sheet)")
    assert device_peak(torch.device("cuda"), "bf16-mixed", 500.0) == (500e12, "--peak-tflops")


def test_the_report_says_when_the_peak_is_unknown():
    out = main([*TINY, "--mc-batch", "0", "--device", "cpu"])
    printed = report({**out, "peak_flops": None, "train": {**out["train"], "mfu": None}})
    assert "peak unknown" in printed and "MFU unknown" in printed


def test_the_decode_bound_is_never_looser_than_what_the_products_streamed(monkeypatch):
    monkeypatch.setattr(gpt1.tools.bench, "memory_bandwidth", lambda device: 1e6)  # a sum far slower than the products
    out = main([*TINY, "--mc-batch", "0", "--device", "cpu"])
    assert out["memory_bandwidth"] == out["gemv_bandwidth"] and out["decode_bound_ms"] == out["decode_gemv_bound_ms"]


@pytest.mark.parametrize("flags, says", [
    (["--seq", "33"], "--seq 33: the tiny preset reads at most 32 tokens"),
    (["--batch", "0"], "--batch 0: choose 1 or more"),
    (["--device", "tpu"], "--device=tpu: choose cpu, cuda"),
    (["--json", "missing/bench.json"], "no directory missing to write it in"),
])
def test_bad_flags_are_one_line_before_any_measuring(flags, says, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(gpt1.tools.bench, "bench", lambda args: pytest.fail("measured despite a bad flag"))
    with pytest.raises(SystemExit) as exit:
        main(["--model", "tiny", "--seq", "32", *flags])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and err.startswith("error: ") and says in err and len(err.splitlines()) == 1
