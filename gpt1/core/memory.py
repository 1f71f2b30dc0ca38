"""The peak memory of a command, for a user sizing a job: what every ``metrics.json`` holds and every command's last
line on stderr says (its keys: docs/strategies.md's "Memory"). GB are 10^9 bytes; the peaks are the process's since
it started."""

from __future__ import annotations

import resource
import sys

GB = 1e9
_RU_MAXRSS_BYTES = 1 if sys.platform == "darwin" else 1024  # macOS reports bytes, Linux KiB


def peak_memory() -> dict[str, float]:
    """The peaks so far, rounded to the MB, under the keys above (the device's only where CUDA was used)."""
    peaks = {"peak_host_memory_gb": _own_peak_bytes() / GB}
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * _RU_MAXRSS_BYTES / GB
    if children:
        peaks["peak_host_memory_children_gb"] = children
    torch = sys.modules.get("torch")  # (imported by whatever used a device: a command that did not is not made to)
    if torch is not None and torch.cuda.is_initialized():
        peaks["peak_device_memory_gb"] = torch.cuda.max_memory_allocated() / GB
        peaks["peak_device_reserved_gb"] = torch.cuda.max_memory_reserved() / GB
    return {key: round(value, 3) for key, value in peaks.items()}


def _own_peak_bytes() -> int:
    """This process's peak resident set in bytes: ``VmHWM`` of /proc/self/status (Linux), else ``ru_maxrss`` (which
    on Linux also counts what the parent held when it started this process)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))  # kB
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * _RU_MAXRSS_BYTES


def memory_line(peaks: dict[str, float]) -> str:
    """``peak_memory``'s figures in one line: "peak memory: host 1.234 GB (largest child process 0.456 GB), CUDA device
    2.345 GB (3.456 GB reserved)"."""
    line = f"peak memory: host {peaks['peak_host_memory_gb']:.3f} GB"
    if "peak_host_memory_children_gb" in peaks:
        line += f" (largest child process {peaks['peak_host_memory_children_gb']:.3f} GB)"
    if "peak_device_memory_gb" in peaks:
        line += (
            f", CUDA device {peaks['peak_device_memory_gb']:.3f} GB "
            f"({peaks['peak_device_reserved_gb']:.3f} GB reserved)"
        )
    return line
