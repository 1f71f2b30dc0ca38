"""Peak memory: what every metrics.json holds and every command's last line says (gpt1.core.memory)."""

import json
import subprocess
import sys

import pytest
import torch

from gpt1.commands.pretrain import train
from gpt1.core.memory import memory_line, peak_memory
from tests.helpers import FEW

PROBE = """
import subprocess, sys
from gpt1.core.memory import peak_memory
held = bytearray(300 * 10**6)  # 0.3 GB, touched: resident
subprocess.run([sys.executable, "-c", "x = bytearray(600 * 10**6)"], check=True)  # 0.6 GB
print(peak_memory())
"""


def test_the_peaks_count_what_the_process_and_its_largest_child_held():
    """Not what the parent held (ru_maxrss counts it on Linux): this test's process holds gigabytes in a suite."""
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    peaks = eval(out)  # noqa: S307  (a dict literal this test's own probe printed)
    assert 0.3 < peaks["peak_host_memory_gb"] < 0.3 + 0.5  # the bytearray, plus torch and Python
    assert 0.6 < peaks["peak_host_memory_children_gb"] < 0.6 + 0.1  # the child's bytearray, plus Python
    assert "peak_device_memory_gb" not in peaks  # no CUDA used


def test_the_line_names_each_figure():
    assert memory_line({"peak_host_memory_gb": 1.5}) == "peak memory: host 1.500 GB"
    assert memory_line(
        {
            "peak_host_memory_gb": 1.5,
            "peak_host_memory_children_gb": 0.25,
            "peak_device_memory_gb": 2,
            "peak_device_reserved_gb": 3,
        }
    ) == ("peak memory: host 1.500 GB (largest child process 0.250 GB), CUDA device 2.000 GB (3.000 GB reserved)")


def test_metrics_json_holds_the_peak(make_cfg, tmp_path):
    metrics = train(make_cfg("pretrain", FEW))
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    peak = written["peak_host_memory_gb"]
    assert 0.1 < peak == metrics["peak_host_memory_gb"] <= peak_memory()["peak_host_memory_gb"]


@pytest.mark.gpu
def test_the_device_peak_is_reported_once_cuda_is_used():
    x = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")  # 0.27 GB
    peaks = peak_memory()
    del x
    assert 0.268 <= peaks["peak_device_memory_gb"] <= peaks["peak_device_reserved_gb"]
