"""experiments/gpu_check.sh, the GPU checks in one call (experiments/gpu_check.py), run dry: every step on the tiny
model on the CPU, so that whoever has a GPU only has to run ``bash experiments/gpu_check.sh``."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import gpt1.tools.bench  # noqa: F401  (Lightning, which it imports, wraps torch.compile once)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "experiments" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # every step of the GPU script, on the CPU: 30 s on 2 cores
def test_every_step_runs_dry_on_the_cpu(tmp_path, cache_dir, sample_data):
    """``bash experiments/gpu_check.sh dry``: the steps that ``all`` (the script's default) runs on a GPU."""
    env = {**os.environ, "GPT1_SAMPLE_DATA": str(sample_data), "OUT": str(tmp_path)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # this Python, with gpt1 installed
    script = REPO / "experiments" / "gpu_check.sh"
    proc = subprocess.run(["bash", script, "dry", "--cache-dir", cache_dir], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "gpu_check.json").read_text())
    parts = {k: v for k, v in results.items() if isinstance(v, dict)}
    errors = {k: v["error"] for k, v in parts.items() if "error" in v}
    assert not errors, errors
    bench = [f"bench/{mode}/{how}" for mode in ("compiled", "eager") for how in ("chunked", "whole")]
    for name in bench:
        assert parts[name]["step_s"] > 0 and parts[name]["flags"][-1] == name.split("/")[-1]
    assert "32-true already" in parts["strategies/ddp/32-true"]["skipped"]
    for name in ("loop/eager", "loop/compiled", "strategies/ddp", "strategies/fsdp"):
        assert parts[name]["steps"] == 2 and parts[name]["step_s"] > 0 and parts[name]["val/loss"] > 0, name
    assert parts["fsdp_compile"]["steps"] == 2
    for name in ("strategies/deepspeed", "strategies/deepspeed/checkpoint"):
        assert "CUDA GPUs only" in parts[name]["skipped"]  # Lightning's DeepSpeed: GPUs only
    assert "32-true" in results["deepspeed_hypothesis"]  # the switch the GPU run tests
    assert parts["decode"]["eager_ms_per_token"] > 0 and parts["decode"]["cuda_graphs"].startswith("not built")
    assert results["dry"] is True
    table = (tmp_path / "gpu_check.md").read_text()
    assert all(f"| {name} |" in table for name in (*bench, "loop/compiled", "strategies/fsdp", "decode"))


def test_the_dry_runs_stand_ins_are_gone_after_it(gpu_check):
    compile_before, threads_before = torch.compile, torch.get_num_threads()
    with gpu_check.dry_run(True):
        assert torch.compile is not compile_before and torch.get_num_threads() == 1
    assert torch.compile is compile_before and torch.get_num_threads() == threads_before


def test_a_step_the_script_does_not_have_is_one_line():
    proc = subprocess.run(["bash", REPO / "experiments" / "gpu_check.sh", "nope"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error: no step 'nope'") and proc.stderr.count("\n") == 1


def test_a_step_that_fails_is_one_line_and_the_next_runs(gpu_check, tmp_path, monkeypatch):
    check = gpu_check.Check(tmp_path, dry=True, budget=float("inf"), cache=None)
    check.run("broken", lambda: 1 / 0)
    check.run("fine", lambda: {"x": 1})
    assert check.results["broken"] == {"error": "ZeroDivisionError: division by zero"}
    assert check.results["fine"]["x"] == 1
    spent = gpu_check.Check(tmp_path, dry=True, budget=0.0, cache=None)
    spent.run("late", lambda: {"x": 1})
    assert "budget" in spent.results["late"]["skipped"]
