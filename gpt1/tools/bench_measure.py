"""How ``gpt1 bench`` measures: wall times, one training update as a closure, and the device's ceilings (FLOP/s,
memory bandwidth, the matrix-vector products' rate) and a process's peak memory."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

import gpt1.cpu.kernels
from gpt1.cpu.decoding import decoded_weights
from gpt1.cpu.kernels import onednn_available
from gpt1.cpu.layers import linear
from gpt1.model.decoder import GPT, GPTConfig

DENSE_PEAK_TFLOPS: dict[str, dict[str, float]] = {
    # dense tensor-core TFLOP/s from the vendors' data sheets (the sparsity figures are twice these)
    "A100": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5},
    "H100 SXM": {"bf16": 989.0, "fp16": 989.0, "tf32": 495.0, "fp32": 67.0},
    "H100 PCIe": {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.0},
    "H100 NVL": {"bf16": 835.0, "fp16": 835.0, "tf32": 418.0, "fp32": 60.0},
    "H200": {"bf16": 989.0, "fp16": 989.0, "tf32": 495.0, "fp32": 67.0},
}
"""Device name (as a substring of torch.cuda.get_device_name) -> precision -> dense peak TFLOP/s. An H100 whose name
says neither PCIe nor NVL (torch names the SXM part "NVIDIA H100 80GB HBM3") is the SXM part."""


def median_seconds(fn: Callable[[], Any], warmup: int, iters: int, device: torch.device) -> float:
    """Median wall time of ``fn()`` over ``iters`` runs after ``warmup`` runs, the device synchronised each time."""
    return statistics.median(interleaved_times({"": fn}, warmup, iters, device)[""])


def interleaved_times(
    fns: dict[str, Callable[[], Any]], warmup: int, iters: int, device: torch.device
) -> dict[str, list[float]]:
    """Wall times of ``iters`` runs of each of ``fns`` after ``warmup`` untimed ones, their runs taken in turn (a, b,
    a, b, ...): a ratio of two medians is then measured under the same conditions, even where the machine's speed
    drifts over minutes."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for i in range(warmup + iters):
        for name, fn in fns.items():
            sync()
            t = time.perf_counter()
            fn()
            sync()
            if i >= warmup:
                times[name].append(time.perf_counter() - t)
    return times


def summary(times: list[float], scale: float = 1.0) -> tuple[float, list[float]]:
    """The median of ``times`` and their range [fastest, slowest], each multiplied by ``scale``."""
    return statistics.median(times) * scale, [min(times) * scale, max(times) * scale]


def train_step(module: torch.nn.Module, loss_fn: Callable[[], torch.Tensor], autocast: Any) -> Callable[[], None]:
    """One update (forward, backward, AdamW step) as a closure; fused AdamW where this torch has it."""
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-5, fused=True)

    def step() -> None:
        with autocast:
            loss = loss_fn()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def gemm_peak(config: GPTConfig, tokens: int, device: torch.device, dtype: torch.dtype) -> float:
    """FLOP/s of plain matmuls on the products a training step multiplies: for each weight (out, in) of the model's
    shapes ((3C, C), (C, C), (4C, C), (C, 4C) and the (V, C) head), its forward x @ W.T, input gradient g @ W and
    weight gradient g.T @ x at M = ``tokens`` rows, each by the fastest of torch's matmul (on contiguous operands
    and on the layouts autograd hands it) and, in fp32 on CPUs that have it, oneDNN's (``gpt1.cpu.kernels``); the
    FLOP-weighted rate."""
    C, V = config.n_embd, config.vocab_size
    onednn = device.type == "cpu" and dtype == torch.float32 and onednn_available()
    flops = secs = 0.0
    for n, k in [(3 * C, C), (C, C), (config.n_inner, C), (C, config.n_inner), (V, C)]:
        x, w, g = (torch.randn(*shape, device=device, dtype=dtype) for shape in ((tokens, k), (n, k), (tokens, n)))
        products = _matmul_ways(x, w, g, onednn)
        with torch.no_grad():
            secs += sum(min(median_seconds(f, warmup=1, iters=3, device=device) for f in ways) for ways in products)
        flops += 3 * 2.0 * tokens * k * n
    return flops / secs


def _matmul_ways(x: torch.Tensor, w: torch.Tensor, g: torch.Tensor, onednn: bool) -> list[list[Callable]]:
    """Forward, input gradient and weight gradient of one layer shape: the ways to compute each."""
    w_t, g_t = w.t().contiguous(), g.t().contiguous()
    ways = [
        [lambda: torch.mm(x, w_t), lambda: F.linear(x, w)],
        [lambda: torch.mm(g, w)],
        [lambda: torch.mm(g_t, x), lambda: torch.mm(g.t(), x)],
    ]
    if onednn:
        ways[0].append(lambda: gpt1.cpu.kernels.linear_forward(x, w, None, "onednn"))
        ways[1].append(lambda: gpt1.cpu.kernels.linear_input_grad(g, w, "onednn"))
        ways[2].append(lambda: gpt1.cpu.kernels.linear_weight_grad(g, x, w, "onednn"))
    return ways


def gemv_bandwidth(model: GPT) -> float:
    """Bytes/s of the matrix-vector products of one decoded token, without the rest of the model: every block's four
    weight matrices and the tied head, multiplied by a (1, in) vector in model order (so they stream from memory as
    in decoding, not from cache), by the fastest of ``F.linear`` and gpt1's ``linear`` on each of decoding's other
    kernels this CPU has (oneDNN, the row or column blocks)."""
    matrices = decoded_weights(model)
    inputs = {w.size(1): torch.randn(1, w.size(1), device=w.device, dtype=w.dtype) for w in matrices}

    def products(fn: Callable[..., torch.Tensor]) -> Callable[[], None]:
        return lambda: [fn(inputs[w.size(1)], w) for w in matrices]

    def on(kernel: str) -> Callable[[], None]:  # gpt1's products on ``kernel``, whatever gpt1.cpu.settings chose
        def run() -> None:
            with gpt1.cpu.kernels.using("decode", kernel):
                products(linear)()

        return run

    nbytes = sum(w.numel() * w.element_size() for w in matrices)
    others = [on(k) for k in gpt1.cpu.kernels.available_kernels("decode") if k != "torch"]
    with torch.no_grad():
        secs = min(median_seconds(f, warmup=2, iters=7, device=matrices[0].device)
                   for f in (products(F.linear), *others))  # fmt: skip
    return nbytes / secs


def memory_bandwidth(device: torch.device, mib: int = 512) -> float:
    """Bytes/s read by summing a ``mib`` MiB fp32 tensor (a read-only sweep, as decoding reads the weights)."""
    x = torch.ones(mib * 2**20 // 4, device=device)
    return x.numel() * 4 / median_seconds(lambda: x.sum(), warmup=2, iters=7, device=device)


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set (Linux: ``VmHWM``); False where the kernel offers no reset."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_gib() -> float | None:
    """This process's peak resident set since its start or the last ``reset_peak_rss``, in GiB (Linux; None where
    the kernel does not say)."""
    status = Path("/proc/self/status").read_text()
    kib = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")]
    return kib[0] / 2**20 if kib else None


def device_peak(device: torch.device, precision: str, override: float | None) -> tuple[float | None, str]:
    """Dense peak FLOP/s of a GPU from the table (or ``override`` TFLOP/s) and where it came from."""
    if override:
        return override * 1e12, "--peak-tflops"
    name = torch.cuda.get_device_name(device)
    kind = {"bf16-mixed": "bf16", "16-mixed": "fp16", "32-true": "tf32"}[precision]
    gpu = next((gpu for gpu in DENSE_PEAK_TFLOPS if gpu in name), "H100 SXM" if "H100" in name else None)
    if gpu is None:
        return None, f"unknown GPU {name!r}: pass --peak-tflops"
    return DENSE_PEAK_TFLOPS[gpu][kind] * 1e12, f"{gpu} dense {kind} (data sheet)"
