"""The layers the model is built of, the same math as torch's own ops: ``linear``, ``dropout``, ``embedding`` and
``attention`` (with ``self_attention``, the decoder's heads over it), and the modules ``Linear``, ``Dropout`` and
``Embedding`` (pure torch). The model's one seam to the CPU path: on the CPU, in eager mode, they take faster paths
than torch's ops.

- ``linear``: fp32 products without autocast run on the kernel that ``gpt1.cpu.kernels`` chose for their kind
  (oneDNN, torch's matmuls, decoding's row or column blocks).
- ``dropout``: masks from 16-bit integers cut from 64-bit draws (P(drop) = p to within 2^-17), written as floats by
  the comparison itself; ``bernoulli_`` draws a float per element.
- ``embedding``: with autograd, the token table's gradient is sparse (one row per id), which the tied LM head's dense
  gradient takes in, instead of a zeroed (V, C) table; where no head adds to it, a hook makes ``.grad`` dense.
- ``attention``: with dropout (and for bf16 training) the math path with ``dropout``'s masks and the mask as an
  added bias, where SDPA's CPU kernels take no dropout and its fused bf16 backward is slow.

Compiled graphs and other devices keep torch's own ops (and so their kernels and fusions). Measured figures:
experiments/results/benchmarks.md. The embedding's hook is found through torch's private
``Tensor._post_accumulate_grad_hooks`` (``gpt1.core.compat.post_accumulate_grad_hooks``): without it the table's
gradient is dense.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from gpt1.core import compat
from gpt1.cpu.kernels import cpu_linear, eager_cpu
from gpt1.model.kv_cache import LayerCache


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear``: x (..., in) @ weight (out, in).T + bias. For fp32 in eager mode on CPU, without autocast, each
    product runs on the kernel chosen for its kind (``gpt1.cpu.kernels.cpu_linear``)."""
    if x.dtype == weight.dtype == torch.float32 and eager_cpu(x) and not torch.is_autocast_enabled("cpu"):
        return cpu_linear(x, weight, bias)
    return F.linear(x, weight, bias)


class Linear(nn.Linear):
    """``nn.Linear`` through ``linear``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """``F.dropout``: zero each element with probability p, scale the others by 1 / (1 - p); cheap masks on CPU."""
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
    gradient is sparse, which autograd adds to a tied head's dense one (a copy, but no zeroed table); where nothing
    does (no tied head in the loss), a hook on the weight makes its ``.grad`` dense as soon as it is accumulated."""
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


class Embedding(nn.Embedding):
    """``nn.Embedding`` through ``embedding``, for a table that an LM head shares: its ``.grad`` is always dense."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return embedding(ids, self.weight)


class Dropout(nn.Dropout):
    """``nn.Dropout`` through ``dropout``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, is_causal: bool, dropout_p: float
) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` of q (B, H, T, D), k and v (B, H, S, D) -> (B, H, T, D), scaled by
    1/sqrt(D). mask (broadcast to (B, H, T, S), True: attend) must let every query see at least one key."""
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


def self_attention(
    qkv: torch.Tensor,
    n_head: int,
    cache: LayerCache | None = None,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Causal multi-head self-attention of T new tokens from their fused query, key and value projections qkv
    (B, T, 3C) -> (B, T, C), scaled by 1/sqrt(D) as OpenAI's: with a cache, their keys and values are appended to it
    and their queries see the cached ones too. attn_mask (B, T, T) (True: attend) replaces the causal mask (packed
    sequences; not with a cache). The decoder's ``Attention`` and decoding's ``TokenStep`` both attend through it."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    q, k, v = qkv.view(B, T, 3, n_head, C // n_head).permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, H, T, D)
    past = 0
    if cache is not None:
        past = cache.length
        k, v = cache.update(k, v)  # (B, H, past + T, D)
    # Causal mask: plain when nothing is cached; a single new token sees everything; T > 1 new tokens after a
    # cached prefix need the mask shifted right by the prefix (SDPA's is_causal aligns it top-left).
    mask = attn_mask[:, None] if attn_mask is not None else None  # (B, 1, T, T)
    if past and T > 1:
        mask = torch.ones(T, past + T, dtype=torch.bool, device=qkv.device).tril(diagonal=past)
    y = attention(q, k, v, mask, is_causal=past == 0 and mask is None, dropout_p=dropout_p)  # (B, H, T, D)
    # one token's heads are already in order: the transpose, an op of its own, is a share of a decoded token's time
    return y.reshape(B, T, C) if T == 1 else y.transpose(1, 2).reshape(B, T, C)
