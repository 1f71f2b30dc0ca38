"""The LM loss over the tied head in chunks of rows: (tokens x vocab) logits of more than ``CHUNK_BYTES`` never exist
whole, in the forward pass or the backward.

For each chunk of rows of hidden, ``chunked_lm_loss`` computes the chunk's logits (r, V), their log-sum-exp in fp32
and the loss's gradient wrt those logits, ``G = s * softmax - (the weights at the targets)`` (``s``: a row's summed
weights), and from it at once the hidden chunk's gradient ``G @ table`` and the table's share ``G.T @ hidden``: the
unchunked loss's three products, nothing recomputed; the backward pass only scales them. ``chunked_logprobs`` is the
same chunking without autograd (zero-shot scoring).

Against the whole logits (``lm_loss=whole``: ``gpt1.training.module.next_token_loss``) only the order of the sums
changes (the table's gradient summed chunk by chunk, under bf16 autocast each chunk's share rounded to bf16 first;
max + log(sum(exp(logits - max))); a mean as a sum weighted 1/n): equal within fp32 rounding, not bit for bit
(docs/faithfulness.md). The products are the tied head's (``TiedHead.products``; on the CPU ``gpt1.cpu.layers``
swaps them for the chosen kernels). The gradients reach the table that was passed in, so DDP's hooks and FSDP's
reduce-scatter see them as they see the unchunked head's.

Shapes: U rows of hidden states, M scored entries (targets), C = n_embd, V = vocab_size, V' >= V the table's rows.
"""

from __future__ import annotations

from enum import Enum

import torch
from torch.nn import functional as F

IGNORE_INDEX = -100
"""Target of positions that are not scored (cross-entropy's ignore_index): a task batch's padding
(``gpt1.tasks.batches.Collate``)."""


class LMLoss(str, Enum):
    """How the LM loss over the tied head is computed (the ``lm_loss`` key of the training and evaluation
    commands)."""

    chunked = "chunked"  # chunked_lm_loss below: the logits a chunk of rows at a time
    whole = "whole"  # the (tokens x vocab) logits at once, then torch's cross-entropy (the reference)


CHUNK_BYTES = 2**28
"""A chunk's logits take at most this many bytes (256 MiB): in fp32 (4 bytes a logit), and under autocast their
gradient in its dtype too (6 bytes a logit in bf16): 1,657 rows of GPT-1's 40,478-token vocabulary in fp32, 5,458 of
the quickstart's 8,195 in bf16. Each chunk reads the table twice and adds to its gradient once, so more, smaller
chunks cost more: at 32 MiB of fp32 logits, the small preset's step with GPT-1's vocabulary at 8 x 128 (five chunks)
measured 1.01-1.06x the whole logits' CPU time, with its one chunk 0.95-0.99x (loaded;
experiments/results/lm_loss.md)."""
MAX_CHUNKS = 32
"""At most this many chunks, larger ones where the rows are many: a compiled graph unrolls the chunks' loop."""


def chunk_rows(rows: int, vocab_size: int, dtype: torch.dtype = torch.float32) -> int:
    """Rows of hidden states per chunk, of ``rows`` in all, for a vocabulary of ``vocab_size`` and products in
    ``dtype``: as few chunks as ``CHUNK_BYTES`` allows (at most ``MAX_CHUNKS``), of equal rows but the last."""
    logit = torch.promote_types(dtype, torch.float32).itemsize  # the logits' bytes (``_fp32``)
    logit += dtype.itemsize if logit != dtype.itemsize else 0  # the gradient's copy in the products' dtype
    fit = max(1, CHUNK_BYTES // (vocab_size * logit))  # rows whose logits fit a chunk
    chunks = max(1, min(MAX_CHUNKS, -(-rows // fit)))
    return max(1, -(-rows // chunks))


class HeadProducts:
    """The tied head's three products, in torch's ops: logits h (r, C) @ W (V, C).T, the hidden states' gradient
    G (r, V) @ W and the table's, G.T @ h (V, C), or added to grad_w (in place where the dtypes agree: no (V, C)
    temporary per chunk)."""

    def logits(self, h: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        return F.linear(h, W)

    def input_grad(self, G: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        return G @ W

    def weight_grad(self, G: torch.Tensor, h: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        return G.t() @ h

    def add_weight_grad(self, grad_w: torch.Tensor, G: torch.Tensor, h: torch.Tensor, W: torch.Tensor) -> None:
        if G.dtype == grad_w.dtype:
            grad_w.addmm_(G.t(), h)
        else:
            grad_w += self.weight_grad(G, h, W)


TORCH_PRODUCTS = HeadProducts()


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The products' dtype: autocast's where it is on (as F.linear under autocast), else the hidden states'."""
    device = x.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype


def _fp32(logits: torch.Tensor) -> torch.Tensor:
    """The logits in fp32 at least: a 40k-way softmax loses too much in bf16 (the unchunked loss's ``.float()``)."""
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


def _chunks(
    hidden: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor, rows: torch.Tensor | None, size: int
) -> list[tuple[int, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Each chunk of hidden's rows: (start, hidden chunk (r, C), local rows (n,), targets (n,), weights (n,)), the
    entries of that chunk (rows None: one entry per row, the chunk's slice of them; else every entry, weighted 0 where
    its row is in another chunk, so that every chunk has the same shapes: no host sync, one compiled graph). A list,
    not a generator: views, made at once, which every torch.compile traces."""
    chunks = []
    for start in range(0, hidden.size(0), size):
        h = hidden[start : start + size]
        r = h.size(0)
        if rows is None:
            local = torch.arange(r, device=hidden.device)
            chunks.append((start, h, local, targets[start : start + r], weights[start : start + r]))
        else:
            inside = (rows >= start) & (rows < start + r)
            chunks.append((start, h, (rows - start).clamp(0, r - 1), targets, weights * inside))
    return chunks


def _chunk(
    logits: torch.Tensor, local: torch.Tensor, t: torch.Tensor, w: torch.Tensor, s: torch.Tensor, grad: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A chunk's share of the loss from its logits (r, V) in the products' dtype, and with ``grad`` its gradient wrt
    them in that dtype (r, V), written over the logits in fp32 (``_chunks`` gives local, t, w; s (r,) its rows'
    summed weights)."""
    dtype = logits.dtype
    logits = _fp32(logits)  # (r, V)
    picked = logits[local, t]  # (n,) the targets' logits
    top = logits.amax(-1, keepdim=True)  # (r, 1)
    e = logits.sub_(top).exp_()  # (r, V) exp(logits - max), over the logits: no other (r, V) tensor
    total = e.sum(-1)  # (r,)
    loss = (s * (top[:, 0] + total.log())).sum() - (w * picked).sum()  # log-sum-exp - target
    if not grad:
        return loss, None
    # d loss / d logits = s * softmax - the weights at the targets, written over e
    return loss, e.mul_((s / total)[:, None]).index_put_((local, t), -w, accumulate=True).to(dtype)


def _chunked(
    hidden: torch.Tensor,
    table: torch.Tensor,
    vocab_size: int,
    targets: torch.Tensor,
    weights: torch.Tensor,
    rows: torch.Tensor | None,
    products: HeadProducts,
    grads: tuple[bool, bool],
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """The loss (a scalar, fp32 at least) and, as ``grads`` asks, its gradients wrt hidden (U, C) and table (V', C),
    a chunk of rows at a time."""
    dtype = _compute_dtype(hidden)
    W = table[:vocab_size].to(dtype)  # (V, C): a view where no cast is needed
    # s (U,): each row's summed entry weights, the weight of its log-sum-exp
    s = weights if rows is None else weights.new_zeros(hidden.size(0)).index_add_(0, rows, weights)
    grad_h = torch.empty_like(hidden) if grads[0] else None
    size = chunk_rows(hidden.size(0), vocab_size, dtype)
    acc = torch.promote_types(table.dtype, torch.float32)  # the table's gradient's dtype
    # one chunk: its share of the table's gradient is the whole, cast once (no zeroed (V', C) sum to add it to)
    one = size >= hidden.size(0)
    grad_w = torch.zeros_like(table, dtype=acc) if grads[1] and not one else None
    loss = weights.new_zeros(())
    for start, h, local, t, w in _chunks(hidden, targets, weights, rows, size):
        h = h.to(dtype)
        chunk_loss, G = _chunk(products.logits(h, W), local, t, w, s[start : start + h.size(0)], any(grads))
        loss = loss + chunk_loss
        if grad_h is not None:
            grad_h[start : start + h.size(0)] = products.input_grad(G, W)
        if grad_w is not None:
            products.add_weight_grad(grad_w[:vocab_size], G, h, W)
        elif grads[1]:
            grad_w = products.weight_grad(G, h, W).to(acc)
            pad = table.size(0) - vocab_size
            grad_w = F.pad(grad_w, (0, 0, 0, pad)) if pad else grad_w
        del G  # before the next chunk's logits: one chunk's (r, V) tensors at a time (``CHUNK_BYTES``)
    return loss, grad_h, grad_w


class _ChunkedLMLoss(torch.autograd.Function):
    """``chunked_lm_loss`` with autograd: the gradients computed in the forward pass, scaled in the backward."""

    @staticmethod
    def forward(ctx, hidden, table, vocab_size, targets, weights, rows, products):
        grads = ctx.needs_input_grad[:2]
        loss, grad_h, grad_w = _chunked(hidden, table, vocab_size, targets, weights, rows, products, grads)
        ctx.save_for_backward(grad_h, grad_w)
        ctx.table_dtype = table.dtype
        return loss

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss):
        grad_h, grad_w = ctx.saved_tensors  # scaled in place: a second backward through them fails, as it must
        grad_h = grad_h.mul_(grad_loss) if grad_h is not None else None
        grad_w = grad_w.mul_(grad_loss).to(ctx.table_dtype) if grad_w is not None else None
        return grad_h, grad_w, None, None, None, None, None


def chunked_lm_loss(
    hidden: torch.Tensor,
    table: torch.Tensor,
    vocab_size: int,
    targets: torch.Tensor,
    weights: torch.Tensor,
    rows: torch.Tensor | None = None,
    products: HeadProducts = TORCH_PRODUCTS,
) -> torch.Tensor:
    """sum_m weights[m] * -log softmax(hidden[rows[m]] @ table[:vocab_size].T)[targets[m]], an fp32 scalar, a chunk
    of rows of hidden at a time (``chunk_rows``). hidden (U, C); table (V', C); targets (M,) ids (any value where the
    weight is 0, e.g. IGNORE_INDEX); weights (M,); rows (M,) the row of hidden of each entry (None: M = U, entry m is
    row m); products: the head's (``TiedHead.products``)."""
    targets = targets.clamp(min=0)  # an ignored target (weight 0) reads any id
    weights = weights.to(torch.promote_types(hidden.dtype, torch.float32))  # fp32 (fp64 for fp64 states)
    if torch.is_grad_enabled() and (hidden.requires_grad or table.requires_grad):
        return _ChunkedLMLoss.apply(hidden, table, vocab_size, targets, weights, rows, products)
    return _chunked(hidden, table, vocab_size, targets, weights, rows, products, (False, False))[0]


@torch.no_grad()
def chunked_logprobs(
    hidden: torch.Tensor,
    table: torch.Tensor,
    vocab_size: int,
    targets: torch.Tensor,
    products: HeadProducts = TORCH_PRODUCTS,
) -> torch.Tensor:
    """log softmax(hidden @ table[:vocab_size].T)[targets], fp32 (N,), for hidden (N, C) and targets (N,): a chunk of
    rows at a time (``chunk_rows``), each row's as the whole logits' ``F.cross_entropy`` gives it."""
    dtype = _compute_dtype(hidden)
    W = table[:vocab_size].to(dtype)
    size = chunk_rows(hidden.size(0), vocab_size, dtype)
    return torch.cat([
        -F.cross_entropy(_fp32(products.logits(h.to(dtype), W)), t, reduction="none")
        for h, t in zip(hidden.split(size), targets.split(size), strict=True)
    ])  # fmt: skip
