"""The CPU kernels of fp32 linear products and the table that picks one per kind of product (pure torch; the same
math as ``F.linear``), met through ``gpt1.cpu.layers`` and decoding's ``row_linear``.

fp32 products on x86 CPUs can run on oneDNN instead of torch's matmuls (MKL's, whose fast kernels are Intel's only),
and a single row without autograd can be split into one block of weight rows (or, for a weight stored transposed by
``decoding_layout``, of input columns) per thread, multiplied in one ``bmm``. ``CPU_MATMULS`` says which kernel each
kind of product uses: torch's until ``gpt1.cpu.settings.configure()`` sets what it measured to be faster here.
Compiled graphs and other devices keep torch's own ops (and so their kernels and fusions), as under autocast. oneDNN's
linear is torch's private ``torch.ops.mkldnn._linear_pointwise`` (``gpt1.core.compat.onednn_linear``): without it
every product is torch's. Figures: experiments/results/benchmarks.md.
"""

from __future__ import annotations

import contextlib
import platform
from collections.abc import Callable, Iterator

import torch
from torch.nn import functional as F

from gpt1.core import compat

PRODUCTS = ("forward", "input_grad", "weight_grad")
"""The three products of a linear layer in training: x @ W.T, its input gradient g @ W and its weight gradient
g.T @ x."""

KINDS = (*(f"{k}.{p}" for k in ("train", "head") for p in PRODUCTS), "decode", "batched")
"""The kinds of fp32 CPU products ``cpu_linear`` chooses a kernel for: with autograd, each of ``PRODUCTS`` of "train"
(the blocks' GEMMs) and of "head" (a weight of more than two ``SLICE_BYTES`` slices: the tied head); without
autograd, "decode" (fewer than ``BATCHED_MIN_ROWS`` rows: decoding) and "batched" (batched decoding, evaluation)."""

KERNELS: dict[str, tuple[str, ...]] = {kind: ("onednn", "torch") for kind in KINDS} | {
    "decode": ("onednn", "row_blocks", "column_blocks", "torch")
}
"""Kind -> the kernels it can run on: "onednn", "torch" and, for decoding, "row_blocks" and "column_blocks"
(``row_linear``)."""

CPU_MATMULS: dict[str, str] = dict.fromkeys(KINDS, "torch")
"""Kind -> the kernel ``cpu_linear`` runs it on. Torch's until ``set_cpu_matmuls`` (``gpt1.cpu.settings``)."""

BATCHED_MIN_ROWS = 4
"""Products without autograd of at least this many rows are of kind "batched"."""


def available_kernels(kind: str) -> tuple[str, ...]:
    """The kernels of ``kind`` that this machine runs: all of ``KERNELS[kind]`` but oneDNN where it is missing."""
    return tuple(k for k in KERNELS[kind] if k != "onednn" or onednn_available())


def set_cpu_matmuls(choices: dict[str, str]) -> None:
    """Set the kernel of each kind in ``choices`` (one of ``KERNELS[kind]``); torch's where the kernel named is not
    available here (oneDNN off x86)."""
    for kind, kernel in choices.items():
        if kind not in KINDS or kernel not in KERNELS[kind]:
            raise ValueError(
                f"{kind}={kernel}: kinds are {', '.join(KINDS)}; kernels onednn or torch (decode: also row_blocks, "
                "column_blocks)"
            )
        CPU_MATMULS[kind] = kernel if kernel in available_kernels(kind) else "torch"


@contextlib.contextmanager
def using(kind: str, kernel: str) -> Iterator[None]:
    """Run the products of ``kind`` on ``kernel`` inside the block (to time or try it), then the choice before."""
    saved = CPU_MATMULS[kind]
    set_cpu_matmuls({kind: kernel})
    try:
        yield
    finally:
        CPU_MATMULS[kind] = saved


def onednn_available() -> bool:
    """Whether this torch runs oneDNN's fp32 linear on this CPU: x86 (elsewhere torch's BLAS is the vendor's own)
    and ``torch.ops.mkldnn._linear_pointwise`` present."""
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    return x86 and torch.backends.mkldnn.is_available() and compat.onednn_linear() is not None


def eager_cpu(x: torch.Tensor) -> bool:
    """Whether x is a CPU tensor outside a graph being compiled: where gpt1's CPU paths replace torch's ops."""
    return x.is_cpu and not torch.compiler.is_compiling()


def _onednn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    # x @ weight.T + bias; a strided bias must be made contiguous: oneDNN reads it as if it were (a test checks)
    bias = bias.contiguous() if bias is not None else None
    return compat.onednn_linear()(x, weight, bias, "none", [], "")


SLICE_BYTES = 6 * 2**20
"""A weight of more than twice this many bytes (the tied head) gets its oneDNN input gradient in slices of its rows
of about this size, and its weight gradient's transposed copy made on every thread."""


def _slice_rows(weight: torch.Tensor) -> int | None:
    """Rows per slice of ``SLICE_BYTES`` for a weight (out, in) of more than two such slices (the tied
    head), else None."""
    rows = max(1, SLICE_BYTES // (weight.size(1) * weight.element_size()))
    return rows if weight.size(0) > 2 * rows else None


def linear_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, kernel: str) -> torch.Tensor:
    """x (..., in) @ weight (out, in).T + bias -> (..., out) on ``kernel`` ("onednn" or "torch")."""
    return _onednn(x, weight, bias) if kernel == "onednn" else F.linear(x, weight, bias)


def linear_input_grad(grad: torch.Tensor, weight: torch.Tensor, kernel: str) -> torch.Tensor:
    """grad (..., out) @ weight (out, in) -> (..., in) on ``kernel``. oneDNN reorders the transposed weight on every
    call, which for the tied head's is slow from memory: summed over slices of its rows, each slice is reordered and
    used while still in cache."""
    if kernel != "onednn":
        return grad @ weight
    rows = _slice_rows(weight)
    if rows is None:
        return _onednn(grad, weight.t(), None)
    grad_x = None
    for start in range(0, weight.size(0), rows):
        n = min(rows, weight.size(0) - start)
        part = _onednn(grad.narrow(-1, start, n).contiguous(), weight.narrow(0, start, n).t(), None)
        grad_x = part if grad_x is None else grad_x.add_(part)
    return grad_x


TRANSPOSE_ROWS = 512
"""The tied head's gradient is transposed this many of its rows at a time for oneDNN's weight gradient."""


def linear_weight_grad(grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, kernel: str) -> torch.Tensor:
    """grad (M, out).T @ x (M, in) -> (out, in) on ``kernel``. oneDNN takes its source contiguous, so grad is
    transposed first, a copy torch makes on one thread for a 2-D tensor; the tied head's is copied through 3-D views
    of ``TRANSPOSE_ROWS`` rows, which torch copies on every thread."""
    if kernel != "onednn":
        return grad.t() @ x
    if _slice_rows(weight) is None:
        return _onednn(grad.t(), x.t(), None)
    M, N = grad.shape
    grad_t = grad.new_empty(N, M)
    for start in range(0, M, TRANSPOSE_ROWS):
        m = min(TRANSPOSE_ROWS, M - start)
        grad_t.narrow(1, start, m).unsqueeze(1).copy_(grad.narrow(0, start, m).t().unsqueeze(1))  # (N, 1, m)
    return _onednn(grad_t, x.t(), None)


class _Linear(torch.autograd.Function):
    """A linear layer whose three products (``PRODUCTS``) each run on their own kernel."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, kernels: tuple[str, ...]):
        ctx.save_for_backward(x, weight)
        ctx.has_bias, ctx.kernels = bias is not None, kernels
        return linear_forward(x, weight, bias, kernels[0])

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        grad_x = linear_input_grad(grad, weight, ctx.kernels[1]) if ctx.needs_input_grad[0] else None
        grad_2d = grad.reshape(-1, grad.size(-1))  # (M, out)
        x_2d = x.reshape(-1, x.size(-1))  # (M, in)
        grad_w = linear_weight_grad(grad_2d, x_2d, weight, ctx.kernels[2]) if ctx.needs_input_grad[1] else None
        grad_b = grad_2d.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b, None


def _row_blocks(weight: torch.Tensor, bias: torch.Tensor | None, blocks: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """A function of one contiguous row x (..., in) -> x @ weight (out, in).T + bias, as a bmm of ``blocks`` row blocks
    of weight (views, no copy, made here once), which torch's CPU bmm runs one block per thread. Decoding calls each
    product once a token: every op saved here is saved 49 times a token."""
    N, K = weight.shape
    step = N // blocks
    rows = N - (blocks - 1) * step  # block i: rows i*step .. i*step+rows-1 (rows > step where blocks don't divide N)
    if K > N and rows == step:
        # rows longer than the matrix is tall (the MLP's output projection, 768 x 3072) stream faster as
        # x (1, K) @ each block's transposed view (K, rows)
        w = weight.as_strided((blocks, K, rows), (step * K, 1, K))  # (blocks, K, rows)
        b = bias.view(blocks, 1, rows) if bias is not None else None

        def over_columns(x: torch.Tensor) -> torch.Tensor:
            xs = x.as_strided((blocks, 1, K), (0, K, 1))
            return (torch.bmm(xs, w) if b is None else torch.baddbmm(b, xs, w)).view(*x.shape[:-1], N)

        return over_columns
    w = weight.as_strided((blocks, rows, K), (step * K, K, 1))  # (blocks, rows, K)
    if rows == step:  # (blocks, rows, 1) is (N,) in order
        b = bias.reshape(blocks, rows, 1) if bias is not None else None

        def over_rows(x: torch.Tensor) -> torch.Tensor:
            xs = x.as_strided((blocks, K, 1), (0, 1, K))  # x in every block, strides (0, 1, K): bmm streams it fastest
            return (torch.bmm(w, xs) if b is None else torch.baddbmm(b, w, xs)).view(*x.shape[:-1], N)

        return over_rows

    def overlapping(x: torch.Tensor) -> torch.Tensor:
        y = torch.bmm(w, x.as_strided((blocks, K, 1), (0, 1, K)))  # the first step rows of each block, all of the last
        y = torch.cat([y[:-1, :step].reshape(-1), y[-1].view(-1)]).view(*x.shape[:-1], N)
        return y + bias if bias is not None else y

    return overlapping


def _column_blocks(
    weight: torch.Tensor, bias: torch.Tensor | None, blocks: int
) -> Callable[[torch.Tensor], torch.Tensor]:
    """x (..., in) -> x @ weight (out, in).T + bias for a weight stored transposed (strides (1, out)): thread i
    multiplies x's i-th block of in / ``blocks`` columns by the matching contiguous (in / blocks, out) block of
    weight.T, in one ``bmm``, and the blocks' partial rows are summed (the bias rides in the first block's)."""
    N, K = weight.shape
    w = weight.t().view(blocks, K // blocks, N)  # (blocks, K / blocks, N), each block one stream
    if bias is None:
        return lambda x: torch.bmm(x.view(blocks, 1, K // blocks), w).sum(0).view(*x.shape[:-1], N)
    b = torch.zeros(blocks, 1, N, dtype=weight.dtype)  # (blocks, 1, N)
    b[0, 0] = bias
    return lambda x: torch.baddbmm(b, x.view(blocks, 1, K // blocks), w).sum(0).view(*x.shape[:-1], N)


def _transposed(weight: torch.Tensor) -> bool:
    return weight.dim() == 2 and weight.size(0) > 1 and weight.stride() == (1, weight.size(0))


def decoding_layout(weight: torch.Tensor) -> torch.Tensor:
    """weight (out, in) in the memory layout that decoding's kernel reads fastest (decoding streams each weight once
    a token): under "column_blocks", for a CPU weight no longer than it is tall (all of GPT-1's but the MLP's output
    projection, whose row blocks are already one stream per thread), a copy stored as its transpose (strides
    (1, out); same shape and values); otherwise weight itself."""
    column_blocks = CPU_MATMULS["decode"] == "column_blocks" and weight.is_cpu
    if column_blocks and weight.dim() == 2 and 1 < weight.size(1) <= weight.size(0) and not _transposed(weight):
        stored = torch.empty_strided(weight.shape, (1, weight.size(0)), dtype=weight.dtype, device=weight.device)
        stored.t().copy_(weight.t())  # into a contiguous (in, out): torch's blocked transpose, 2-4x a strided copy
        return stored
    return weight


def row_linear(weight: torch.Tensor, bias: torch.Tensor | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """``cpu_linear`` for one contiguous row without autograd (decoding's kind) as a function of x (..., in), what
    depends on the weight alone made once. On the block kernels the weight's layout picks its blocks: rows of a
    row-major weight, else input columns (as many as the threads, or the largest divisor of in below that)."""
    kernel = CPU_MATMULS["decode"] if weight.dtype == torch.float32 and eager_cpu(weight) else "torch"
    threads = torch.get_num_threads() if kernel in ("row_blocks", "column_blocks") else 1
    if threads > 1 and _transposed(weight):
        blocks = max(d for d in range(1, threads + 1) if weight.size(1) % d == 0)
        if blocks > 1:
            return _column_blocks(weight, bias, blocks)
    if 1 < threads <= weight.size(0) and weight.is_contiguous():
        return _row_blocks(weight, bias, threads)
    if kernel == "onednn":
        return lambda x: _onednn(x, weight, bias)
    return lambda x: F.linear(x, weight, bias)


def cpu_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x (..., in) @ weight (out, in).T + bias for fp32 CPU tensors in eager mode without autocast (the caller checks:
    ``gpt1.cpu.layers.linear``), each product on the kernel ``CPU_MATMULS`` names for its kind (``KINDS``)."""
    if torch.is_grad_enabled():
        kind = "head" if _slice_rows(weight) else "train"
        kernels = tuple(CPU_MATMULS[f"{kind}.{product}"] for product in PRODUCTS)
        if kernels != ("torch",) * len(PRODUCTS):
            return _Linear.apply(x, weight, bias, kernels)
    elif x.numel() == x.size(-1) and x.is_contiguous():  # one row
        return row_linear(weight, bias)(x)
    elif x.numel() // x.size(-1) < BATCHED_MIN_ROWS:
        if CPU_MATMULS["decode"] == "onednn":
            return _onednn(x, weight, bias)
    elif CPU_MATMULS["batched"] == "onednn":
        return _onednn(x, weight, bias)
    return F.linear(x, weight, bias)
