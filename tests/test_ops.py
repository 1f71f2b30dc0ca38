"""gpt1.ops: the CPU paths of linear, dropout, embedding and attention compute what torch's own ops compute."""

import math
import platform
import sys
from copy import deepcopy

import pytest
import torch
import torch.nn.functional as F

import gpt1.ops
from gpt1.ops import Dropout, Embedding, attention, dropout, embedding, linear


@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 7)])
@pytest.mark.parametrize(("matmuls", "slice_rows"), [("onednn", None), ("onednn", 3), ("torch+onednn", None)])
def test_linear_matches_f_linear_in_value_and_gradients(shape, matmuls, slice_rows, monkeypatch):
    """gpt1's linear (oneDNN on non-Intel x86 CPUs: forward, input and weight gradients; on Intel ones for 4 rows or
    more without autograd) computes F.linear, also the path of the tied head's large weight (here 13 rows in slices
    of 3, the last 1): the input gradient summed over slices of its rows, the weight gradient through copies made on
    every thread."""
    monkeypatch.setattr(gpt1.ops, "CPU_MATMULS", matmuls)  # whatever this CPU's vendor (the paths run on x86 only)
    if slice_rows:
        monkeypatch.setattr(gpt1.ops, "SLICE_BYTES", slice_rows * 7 * 4)
        monkeypatch.setattr(gpt1.ops, "TRANSPOSE_ROWS", 2)  # the 5 or 6 rows of x transposed 2 at a time
    out = 13
    x, w, b = torch.randn(*shape, requires_grad=True), torch.randn(out, 7, requires_grad=True), torch.randn(out, requires_grad=True)
    grad = torch.randn(*shape[:-1], out)
    grads = []
    for fn in (linear, F.linear):
        y = fn(x, w, b)
        y.backward(grad)
        grads.append((y.detach(), *(t.grad.clone() for t in (x, w, b))))
        x.grad = w.grad = b.grad = None
    for ours, ref in zip(*grads):
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        for bias in (b, torch.randn(2 * out)[::2]):  # a strided bias too (oneDNN would misread it)
            torch.testing.assert_close(linear(x, w, bias), F.linear(x, w, bias), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("out_features", [12, 13, 40481])
def test_single_row_products_split_across_threads_match_f_linear(out_features, threads, monkeypatch):
    """Batch-1 decoding's row-block bmm (one block per thread, the last blocks overlapping when the thread count
    does not divide the rows; x over each block's transposed view where rows are longer than the matrix is tall:
    12 x 24) computes F.linear for every row of the weight."""
    monkeypatch.setattr(gpt1.ops, "CPU_MATMULS", "onednn")  # the row blocks go with it (non-Intel x86 CPUs)
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)  # the blocks follow the thread count
    w, b = torch.randn(out_features, 24), torch.randn(out_features)
    rows = torch.randn(3, 24)
    for x in (torch.randn(24), torch.randn(1, 24), torch.randn(1, 1, 24), rows[2], rows[1:2]):  # views at an offset too
        with torch.no_grad():
            for bias in (b, None, torch.randn(2 * out_features)[::2]):  # a strided bias too
                y = linear(x, w, bias)
                assert y.shape == (*x.shape[:-1], out_features)
                torch.testing.assert_close(y, F.linear(x, w, bias), rtol=1e-5, atol=1e-5)
    transposed = torch.randn(24, out_features).t()  # a view: the row blocks need a row-major weight
    with torch.no_grad():
        torch.testing.assert_close(linear(x, transposed), F.linear(x, transposed), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("vendor", "choice", "expected"),
    [("AuthenticAMD", "auto", "onednn"), ("GenuineIntel", "auto", "torch+onednn"), ("", "auto", "torch+onednn"),
     ("GenuineIntel", "onednn", "onednn"), ("AuthenticAMD", "torch", "torch"), ("AuthenticAMD", "mkl", "onednn")],
)
def test_onednn_goes_to_x86_cpus_other_than_intels_unless_overridden(vendor, choice, expected, monkeypatch):
    """MKL's fast kernels are Intel's only: oneDNN takes the fp32 matmuls of other x86 CPUs, Intel's only the
    products of several rows without autograd; GPT1_CPU_MATMUL overrides (an unknown value warns and means auto)."""
    monkeypatch.setattr(gpt1.ops, "cpu_vendor", lambda: vendor)
    monkeypatch.setattr(gpt1.ops.platform, "machine", lambda: "x86_64")
    monkeypatch.setenv("GPT1_CPU_MATMUL", choice)
    if choice == "mkl":
        with pytest.warns(UserWarning, match="GPT1_CPU_MATMUL='mkl' is not auto, onednn or torch"):
            assert gpt1.ops._cpu_matmuls() == expected
    else:
        assert gpt1.ops._cpu_matmuls() == expected
    monkeypatch.setattr(gpt1.ops.platform, "machine", lambda: "aarch64")
    monkeypatch.setenv("GPT1_CPU_MATMUL", "onednn")
    assert gpt1.ops._cpu_matmuls() == "torch"  # Arm keeps torch's BLAS


def test_torch_matmuls_are_torchs_own(monkeypatch):
    """GPT1_CPU_MATMUL=torch: every product is F.linear's, even without autograd over many rows."""
    monkeypatch.setattr(gpt1.ops, "CPU_MATMULS", "torch")
    monkeypatch.setattr(gpt1.ops, "_onednn", lambda *args: pytest.fail("oneDNN called"))
    x, w = torch.randn(64, 8), torch.randn(5, 8)
    with torch.no_grad():
        assert torch.equal(linear(x, w), F.linear(x, w))
    monkeypatch.setattr(gpt1.ops, "CPU_MATMULS", "torch+onednn")
    with pytest.raises(pytest.fail.Exception, match="oneDNN called"), torch.no_grad():
        linear(x, w)


@pytest.mark.skipif(platform.machine() != "x86_64" or not sys.platform.startswith("linux"),
                    reason="reads vendor_id from /proc/cpuinfo, which x86 Linux has")
def test_cpu_vendor_is_read_from_proc_cpuinfo():
    assert gpt1.ops.cpu_vendor() in ("GenuineIntel", "AuthenticAMD", "HygonGenuine", "CentaurHauls", "Shanghai")


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_drops_with_probability_p_and_scales_the_rest(p):
    x = torch.rand(1000, 1001) + 1.0  # no zeros of its own; a count that leaves a quarter of a 64-bit draw over
    y = dropout(x, p)
    kept = y != 0
    frac = 1.0 - kept.double().mean().item()
    assert abs(frac - p) < 5 * math.sqrt(p * (1 - p) / x.numel())  # 5 sigma
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))
    for quarter in range(4):  # each 16-bit quarter of the 64-bit draws drops uniformly
        part = kept.flatten()[quarter::4]
        assert abs((1.0 - part.double().mean().item()) - p) < 5 * math.sqrt(p * (1 - p) / part.numel())


def test_dropout_keeps_bf16_and_scales_in_fp32_as_f_dropout():
    """A bf16 input gives bf16 out, its kept values x / (1 - p) rounded once, and a bf16 gradient (the mask once
    came out in fp32 and made the output fp32; a bf16 1 / 0.9 would be 1.109375, 0.16% off)."""
    x = (torch.rand(64, 48) + 1.0).bfloat16().requires_grad_()
    y = dropout(x, 0.1)
    kept = y != 0
    assert y.dtype == torch.bfloat16 and 0 < kept.sum() < x.numel()
    assert torch.equal(y[kept], (x.detach().float()[kept] / 0.9).bfloat16())
    y.float().sum().backward()
    assert x.grad.dtype == torch.bfloat16
    assert torch.equal(x.grad, (kept.float() / 0.9).bfloat16())


def test_dropout_gradient_is_the_scaled_mask_and_seeded_masks_repeat():
    x = torch.randn(64, 33, requires_grad=True)
    torch.manual_seed(3)
    y = dropout(x, 0.3)
    y.sum().backward()
    torch.testing.assert_close(x.grad, (y != 0).float() / 0.7)
    torch.manual_seed(3)
    assert torch.equal(dropout(x, 0.3), y)  # the default generator: resumed runs draw the same masks
    assert dropout(x, 0.3, training=False) is x and dropout(x, 0.0) is x
    assert torch.count_nonzero(dropout(x, 1.0)) == 0
    module = Dropout(0.3).eval()
    assert module(x) is x


def test_embedding_gradient_is_sparse_and_the_tied_heads_dense_one_takes_it():
    """Under a tied head (the table used again as the output matrix) the table's gradient is dense and equals
    F.embedding's; the sparse part alone (no head) is made dense as soon as it is accumulated, also across two
    backward passes (gradient accumulation); without autograd the lookup is F.embedding's own."""
    ids = torch.tensor([[3, 1, 3], [0, 7, 3]])  # repeated ids: their rows are summed
    table = Embedding(9, 4)
    reference = torch.nn.Parameter(table.weight.detach().clone())
    head = torch.randn(2, 3, 9)

    def loss(lookup, weight):
        hidden = lookup(ids, weight).tanh()  # (2, 3, 4)
        return (F.linear(hidden, weight) * head).sum() + hidden.sum()

    loss(embedding, table.weight).backward()
    loss(F.embedding, reference).backward()
    assert table.weight.grad.layout == torch.strided
    torch.testing.assert_close(table.weight.grad, reference.grad)
    table.weight.grad = reference.grad = None
    for _ in range(2):  # no head: only the sparse gradient, accumulated twice
        table(ids).pow(2).sum().backward()
        F.embedding(ids, reference).pow(2).sum().backward()
        assert table.weight.grad.layout == torch.strided
        torch.testing.assert_close(table.weight.grad, reference.grad)
    with torch.no_grad():
        assert table(ids).grad_fn is None
    assert type(table(ids).grad_fn).__name__.startswith("_SparseGradEmbedding")
    copy = deepcopy(table)  # a copied parameter loses its hooks: the lookup hooks it again, once
    for _ in range(2):
        copy(ids).pow(2).sum().backward()
    assert copy.weight.grad.layout == torch.strided
    torch.testing.assert_close(copy.weight.grad, table.weight.grad)
    assert len(copy.weight._post_accumulate_grad_hooks) == 1


def _probs(q, k, mask):
    """Attention probabilities (B, H, T, S) from SDPA itself: attending over the identity returns them."""
    eye = torch.eye(k.size(-2)).expand(*k.shape[:-1], k.size(-2))  # (B, H, S, S)
    return F.scaled_dot_product_attention(q, k, eye, attn_mask=mask)


@pytest.mark.parametrize("masked", ["causal", "packed"])
def test_attention_with_dropout_is_sdpa_with_dropouts_mask_in_value_and_gradients(masked):
    B, H, T, D = 2, 3, 6, 4
    q, k, v = (torch.randn(B, H, T, D, requires_grad=True) for _ in range(3))
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    mask = causal if masked == "causal" else causal & (torch.rand(B, 1, T, T) < 0.6) | torch.eye(T, dtype=torch.bool)
    torch.manual_seed(0)
    y = attention(q, k, v, None if masked == "causal" else mask, is_causal=masked == "causal", dropout_p=0.2)
    torch.manual_seed(0)
    keep = dropout(torch.ones(B, H, T, T), 0.2)  # the same draws, as a scaled mask
    ref = (_probs(q, k, mask) * keep) @ v
    torch.testing.assert_close(y, ref)
    grad = torch.randn_like(y)
    grads = [torch.autograd.grad(out, (q, k, v), grad) for out in (y, ref)]
    for ours, theirs in zip(*grads):
        torch.testing.assert_close(ours, theirs)
    assert torch.equal(attention(q, k, v, None, True, 0.0), F.scaled_dot_product_attention(q, k, v, is_causal=True))


@pytest.mark.parametrize("masked", ["causal", "packed"])
def test_bf16_training_attention_matches_sdpa_in_value_and_gradients(masked, monkeypatch):
    """Training in bf16 runs the math path (SDPA's fused bf16 backward is slow on CPU): SDPA's values and gradients
    to bf16's precision; without gradients SDPA itself."""
    B, H, T, D = 2, 3, 8, 16
    q, k, v = (torch.randn(B, H, T, D, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    mask = None if masked == "causal" else causal & (torch.rand(B, 1, T, T) < 0.6) | torch.eye(T, dtype=torch.bool)
    sdpa = F.scaled_dot_product_attention
    calls = []
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **kw: calls.append(1) or sdpa(*a, **kw))
    y = attention(q, k, v, mask, is_causal=mask is None, dropout_p=0.0)
    assert calls == []  # the math path
    ref = sdpa(q, k, v, attn_mask=mask, is_causal=mask is None)
    torch.testing.assert_close(y, ref, rtol=2e-2, atol=2e-2)
    grad = torch.randn_like(y)
    for ours, theirs in zip(torch.autograd.grad(y, (q, k, v), grad), torch.autograd.grad(ref, (q, k, v), grad)):
        torch.testing.assert_close(ours, theirs, rtol=5e-2, atol=5e-2)
    with torch.no_grad():
        attention(q, k, v, mask, is_causal=mask is None, dropout_p=0.0)
    assert calls == [1]  # inference keeps SDPA's fused kernel
