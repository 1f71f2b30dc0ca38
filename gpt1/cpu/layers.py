"""gpt1's CPU layers, applied to a model from above: ``use_cpu_layers(model, *heads)`` swaps the class of each of the
model's layers for a subclass that computes the same function as torch's op, faster on the CPU in eager mode. A
subclass adds no state: the parameters, their names and hooks, and so the checkpoints, stay as they were. Off the CPU
and inside a graph being compiled each takes torch's own op. Figures: experiments/results/benchmarks.md.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from gpt1.core import compat
from gpt1.cpu.kernels import (
    CPU_MATMULS,
    cpu_linear,
    eager_cpu,
    linear_forward,
    linear_input_grad,
    linear_weight_grad,
)
from gpt1.model.decoder import Attention, TiedHead
from gpt1.model.lm_loss import HeadProducts


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear``: x (..., in) @ weight (out, in).T + bias. For fp32 in eager mode on CPU, without autocast, each
    product runs on the kernel chosen for its kind (``gpt1.cpu.kernels.cpu_linear``)."""
    if x.dtype == weight.dtype == torch.float32 and eager_cpu(x) and not torch.is_autocast_enabled("cpu"):
        return cpu_linear(x, weight, bias)
    return F.linear(x, weight, bias)


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """``F.dropout``: zero each element with probability p, scale the others by 1 / (1 - p). On CPU the mask comes
    from 16-bit integers cut from 64-bit draws (P(drop) = p to within 2^-17) where ``bernoulli_`` draws a float per
    element."""
    if not training or p == 0.0:
        return x
    if not eager_cpu(x) or p >= 1.0:
        return F.dropout(x, p, True)
    n = x.numel()
    bits = x.new_empty((n + 3) // 4, dtype=torch.int64).random_(-(2**63), None)  # uniform over all 64 bits
    # the mask 0 or 1 / (1 - p), in fp32 at least: a bf16 1 / (1 - p) would be off by up to 2^-9, as F.dropout's
    # is not. The comparison writes it as floats in one pass (torch.where or bool * float take 3-5x as long).
    mask = x.new_empty(x.shape, dtype=torch.promote_types(x.dtype, torch.float32))
    torch.ge(bits.view(torch.int16)[:n].view(x.shape), round(p * 2**16) - 2**15, out=mask)  # P(keep) = 1 - p
    y = x * mask.mul_(1.0 / (1.0 - p))  # one multiply, whose backward reuses the scaled mask
    return y.to(x.dtype)  # F.dropout's dtype (a no-op in fp32)


class _SparseGradEmbedding(torch.autograd.Function):
    """``F.embedding`` whose weight gradient is a sparse (V, C) tensor of one row per id."""

    @staticmethod
    def forward(ctx, ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(ids)
        ctx.rows = weight.size(0)
        return F.embedding(ids, weight)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor) -> tuple[None, torch.Tensor]:
        (ids,) = ctx.saved_tensors
        rows = grad.reshape(-1, grad.size(-1))  # (N, C), N = ids.numel(); repeated ids are summed where it is added
        index = ids.reshape(1, -1).long()  # (1, N)
        return None, torch.sparse_coo_tensor(index, rows, (ctx.rows, rows.size(1)), check_invariants=False)


def embedding(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``F.embedding(ids, weight)``: ids (...) -> (..., C). On CPU with autograd, for a leaf weight, the weight's
    gradient is sparse, which autograd adds to a tied head's dense one (a copy, but no zeroed (V, C) table); where
    nothing does, a hook on the weight makes its ``.grad`` dense as soon as it is accumulated. Without torch's private
    ``Tensor._post_accumulate_grad_hooks`` (``gpt1.core.compat``) the gradient is dense."""
    sparse = eager_cpu(weight) and torch.is_grad_enabled() and weight.requires_grad and weight.is_leaf
    if not (sparse and _densified(weight)):  # _densified hooks the weight, once
        return F.embedding(ids, weight)
    return _SparseGradEmbedding.apply(ids, weight)


def _dense_grad(weight: torch.Tensor) -> None:
    if weight.grad is not None and weight.grad.is_sparse:  # optimizers, clipping and DDP take dense gradients
        weight.grad = weight.grad.to_dense()


def _densified(weight: torch.Tensor) -> bool:
    """Hook ``_dense_grad`` on weight where it is not hooked yet (checked on each use: copied or unpickled tensors
    lose their hooks); False on a torch that does not expose a tensor's post-accumulate hooks (no sparse gradients)."""
    hooks = compat.post_accumulate_grad_hooks(weight)
    if hooks is False:
        return False
    if hooks is None or _dense_grad not in hooks.values():
        weight.register_post_accumulate_grad_hook(_dense_grad)
    return True


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, is_causal: bool, dropout_p: float
) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` of q (B, H, T, D), k and v (B, H, S, D) -> (B, H, T, D), scaled by
    1/sqrt(D). mask (broadcast to (B, H, T, S), True: attend) must let every query see at least one key. With dropout
    on CPU, the math path with ``dropout``'s masks: SDPA's CPU kernels take no dropout."""
    # SDPA's fused CPU kernel is fast in inference, but its bf16 backward is slow: training in bf16 takes the math too
    bf16_training = q.dtype == torch.bfloat16 and torch.is_grad_enabled() and q.requires_grad
    if not eager_cpu(q) or (dropout_p == 0.0 and not bf16_training):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, dropout_p=dropout_p)
    T, S = q.size(-2), k.size(-2)
    att = (q * (1.0 / math.sqrt(q.size(-1)))) @ k.transpose(-2, -1)  # (B, H, T, S)
    # masked scores get -inf as an added bias: its backward is free, where masked_fill's masks the gradient again
    # (softmax's backward already gives exact zeros there)
    if is_causal:
        att = att + q.new_full((T, S), -math.inf).triu(1)
    elif mask is not None:
        att = att + q.new_zeros(mask.shape).masked_fill_(~mask, -math.inf)
    return dropout(att.softmax(dim=-1), dropout_p) @ v


class CpuLinear(nn.Linear):
    """``nn.Linear`` through ``linear``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


class CpuHeadProducts(HeadProducts):
    """The tied head's products for the chunked LM loss, on the kernels chosen for "head.*" as ``linear`` runs the
    unchunked head's."""

    @staticmethod
    def _kernel(x: torch.Tensor, W: torch.Tensor, product: str) -> str:
        if x.dtype == W.dtype == torch.float32 and eager_cpu(x) and not torch.is_autocast_enabled("cpu"):
            return CPU_MATMULS[f"head.{product}"]
        return "torch"

    def logits(self, h: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        return linear_forward(h, W, None, self._kernel(h, W, "forward"))

    def input_grad(self, G: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        return linear_input_grad(G, W, self._kernel(G, W, "input_grad"))

    def weight_grad(self, G: torch.Tensor, h: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        return linear_weight_grad(G, h, W, self._kernel(G, W, "weight_grad"))

    def add_weight_grad(self, grad_w: torch.Tensor, G: torch.Tensor, h: torch.Tensor, W: torch.Tensor) -> None:
        if self._kernel(G, W, "weight_grad") == "torch":
            super().add_weight_grad(grad_w, G, h, W)
        else:
            grad_w += self.weight_grad(G, h, W)


class CpuTiedHead(TiedHead):
    """The tied LM head through ``linear``; the LM loss in chunks through ``CpuHeadProducts``."""

    products = CpuHeadProducts()

    def forward(self, hidden: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        return linear(hidden, table)


class CpuDropout(nn.Dropout):
    """``nn.Dropout`` through ``dropout``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


class CpuEmbedding(nn.Embedding):
    """``nn.Embedding`` through ``embedding``, for a table that an LM head shares: its ``.grad`` is always dense."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return embedding(ids, self.weight)


class CpuAttention(Attention):
    """The decoder's ``Attention`` with its probabilities through ``attention``."""

    attention = staticmethod(attention)


SWAPS: dict[type[nn.Module], type[nn.Module]] = {
    nn.Linear: CpuLinear,
    nn.Dropout: CpuDropout,
    TiedHead: CpuTiedHead,
    Attention: CpuAttention,
}
"""A model's layer class -> its CPU layer, for every layer of exactly that class."""


def use_cpu_layers(model: nn.Module, *heads: nn.Module) -> None:
    """Swap model's layers for gpt1's CPU layers in place (``SWAPS``, and its token table ``tokens_embed`` for a
    ``CpuEmbedding``), and the dropouts of ``heads`` (their products are too small to gain). Every gpt1 command calls
    it where a run, an evaluation or a decode starts on the CPU; a layer swapped already is left as it is."""
    for module in model.modules():
        if type(module) in SWAPS:
            module.__class__ = SWAPS[type(module)]
    table = getattr(model, "tokens_embed", None)
    if type(table) is nn.Embedding:
        table.__class__ = CpuEmbedding
    for head in heads:
        for module in head.modules():
            if type(module) is nn.Dropout:
                module.__class__ = CpuDropout


def on_cpu_layers(model: nn.Module) -> bool:
    """Whether ``use_cpu_layers`` swapped model's layers (the run's line about its kernels says so)."""
    return any(isinstance(module, CpuLinear) for module in model.modules())
