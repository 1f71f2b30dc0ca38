"""gpt1.cpu.layers and gpt1.cpu.kernels: the CPU paths of linear, dropout, embedding and attention compute what
torch's own ops compute, each product on the kernel chosen for its kind; use_cpu_layers swaps them into a model."""

import math
import os
import re
import subprocess
import sys
from copy import deepcopy
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gpt1.cpu.kernels
import gpt1.cpu.layers
from gpt1.app.model_group import model_config
from gpt1.cpu.layers import (
    CpuAttention,
    CpuDropout,
    CpuEmbedding,
    CpuLinear,
    CpuTiedHead,
    attention,
    dropout,
    embedding,
    linear,
    on_cpu_layers,
    use_cpu_layers,
)
from gpt1.model.decoder import GPT, Attention, TiedHead
from gpt1.model.heads import ClassificationHead
from gpt1.model.lstm import LSTM, LSTMConfig

ONEDNN = dict.fromkeys(gpt1.cpu.kernels.KINDS, "onednn")
BATCHED_ONLY = {**dict.fromkeys(gpt1.cpu.kernels.KINDS, "torch"), "batched": "onednn"}
FORWARD_ONLY = {**dict.fromkeys(gpt1.cpu.kernels.KINDS, "torch"), "train.forward": "onednn", "head.forward": "onednn"}
BACKWARD_ONLY = {**ONEDNN, "train.forward": "torch", "head.forward": "torch"}


@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 7)])
@pytest.mark.parametrize(
    ("matmuls", "slice_rows"),
    [(ONEDNN, None), (ONEDNN, 3), (BATCHED_ONLY, None), (FORWARD_ONLY, 3), (BACKWARD_ONLY, 3)],
)
def test_linear_matches_f_linear_in_value_and_gradients(shape, matmuls, slice_rows, monkeypatch):
    """gpt1's linear on oneDNN (forward, input and weight gradients, each on its own kernel; or only for 4 rows or
    more without autograd) computes F.linear, also the path of the tied head's large weight (here 13 rows in slices
    of 3, the last 1): the input gradient summed over slices of its rows, the weight gradient through copies made on
    every thread."""
    monkeypatch.setattr(gpt1.cpu.kernels, "CPU_MATMULS", matmuls)  # whatever this CPU would choose
    if slice_rows:
        monkeypatch.setattr(gpt1.cpu.kernels, "SLICE_BYTES", slice_rows * 7 * 4)
        monkeypatch.setattr(gpt1.cpu.kernels, "TRANSPOSE_ROWS", 2)  # the 5 or 6 rows of x transposed 2 at a time
    out = 13
    x, w, b = (
        torch.randn(*shape, requires_grad=True),
        torch.randn(out, 7, requires_grad=True),
        torch.randn(out, requires_grad=True),
    )
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


@pytest.mark.parametrize("kernel", ["row_blocks", "column_blocks"])
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("out_features", [12, 13, 40481])
def test_single_row_products_split_across_threads_match_f_linear(out_features, threads, kernel, monkeypatch):
    """Batch-1 decoding's block bmm computes F.linear for every row of the weight: row blocks (one block per thread,
    the last blocks overlapping when the thread count does not divide the rows; x over each block's transposed view
    where rows are longer than the matrix is tall: 12 x 24) and, for a weight that decoding_layout stores transposed
    under column_blocks (13 x 24 and 40,481 x 24; not the 12 x 24), blocks of its columns whose products are
    summed (as many as the threads where they divide the 24 columns)."""
    monkeypatch.setattr(gpt1.cpu.kernels, "CPU_MATMULS", {**ONEDNN, "decode": kernel})
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)  # the blocks follow the thread count
    w, b = gpt1.cpu.kernels.decoding_layout(torch.randn(out_features, 24)), torch.randn(out_features)
    assert w.is_contiguous() == (kernel == "row_blocks" or out_features < 24)
    rows = torch.randn(3, 24)
    for x in (torch.randn(24), torch.randn(1, 24), torch.randn(1, 1, 24), rows[2], rows[1:2]):  # views at an offset too
        with torch.no_grad():
            for bias in (b, None, torch.randn(2 * out_features)[::2]):  # a strided bias too
                for y in (
                    linear(x, w, bias),
                    gpt1.cpu.kernels.row_linear(w, bias)(x),
                ):  # decoding's, its views made once
                    assert y.shape == (*x.shape[:-1], out_features)
                    torch.testing.assert_close(y, F.linear(x, w, bias), rtol=1e-5, atol=1e-5)
    strided = torch.randn(out_features, 48)[:, ::2]  # neither layout: torch's matmul
    with torch.no_grad():
        torch.testing.assert_close(linear(x, strided), F.linear(x, strided), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(gpt1.cpu.kernels.row_linear(strided)(x), F.linear(x, strided), rtol=1e-5, atol=1e-5)


def test_decoding_layout_stores_weights_no_longer_than_tall_transposed_under_column_blocks_only(monkeypatch):
    """A copy with strides (1, out) and the same values where decoding runs on column_blocks and in <= out; the
    weight itself (no copy) for any other kernel or shape, or one already stored so."""
    tall, wide, vector = torch.randn(6, 4), torch.randn(4, 6), torch.randn(6, 1)
    for kernel in gpt1.cpu.kernels.KERNELS["decode"]:
        monkeypatch.setitem(gpt1.cpu.kernels.CPU_MATMULS, "decode", kernel)
        stored = gpt1.cpu.kernels.decoding_layout(tall)
        if kernel == "column_blocks":
            assert stored.stride() == (1, 6) and torch.equal(stored, tall)
            assert gpt1.cpu.kernels.decoding_layout(stored) is stored
        else:
            assert stored is tall
        assert gpt1.cpu.kernels.decoding_layout(wide) is wide and gpt1.cpu.kernels.decoding_layout(vector) is vector


def test_decodings_row_product_runs_on_decodings_kernel(monkeypatch):
    """``row_linear`` (a decoding step's products, set up once) runs each kernel that ``linear`` runs for one row
    without autograd, and torch's for a weight that is not fp32."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    calls = []
    monkeypatch.setattr(gpt1.cpu.kernels, "_onednn", lambda x, w, b: calls.append("onednn") or F.linear(x, w, b))
    monkeypatch.setattr(
        gpt1.cpu.kernels, "_row_blocks", lambda w, b, n: lambda x: calls.append(("rows", n)) or F.linear(x, w, b)
    )
    monkeypatch.setattr(
        gpt1.cpu.kernels, "_column_blocks", lambda w, b, n: lambda x: calls.append(("columns", n)) or F.linear(x, w, b)
    )
    transposed = torch.randn(8, 5).t()  # as decoding_layout stores a weight for column_blocks
    for weight in (torch.randn(5, 8), transposed, torch.randn(5, 8).double(), transposed.double()):
        x = torch.randn(1, 8, dtype=weight.dtype)
        for kernel in gpt1.cpu.kernels.KERNELS["decode"]:
            monkeypatch.setattr(gpt1.cpu.kernels, "CPU_MATMULS", {**ONEDNN, "decode": kernel})
            calls.clear()
            torch.testing.assert_close(gpt1.cpu.kernels.row_linear(weight)(x), F.linear(x, weight))
            blocks = [("rows", 2)] if weight.is_contiguous() else [("columns", 2)]  # the layout picks the blocks
            expected = {"torch": [], "onednn": ["onednn"], "row_blocks": blocks, "column_blocks": blocks}[kernel]
            assert calls == (expected if weight.dtype == torch.float32 else []), (kernel, weight.dtype)


def test_each_kind_of_product_runs_on_its_chosen_kernel(monkeypatch):
    """CPU_MATMULS picks per kind: with autograd each of the forward, input-gradient and weight-gradient products of
    "train" (a small weight) or "head" (more than two slices), without it "decode" (under BATCHED_MIN_ROWS rows; the
    row blocks for a single row) or "batched"; the other kinds' choices do not matter to a product, and where all
    three of a layer's are torch's, autograd runs F.linear itself."""
    monkeypatch.setattr(gpt1.cpu.kernels, "SLICE_BYTES", 3 * 8 * 4)  # a weight of 7+ rows of 8 is the "head"
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    calls = []
    for product in gpt1.cpu.kernels.PRODUCTS:
        real = getattr(gpt1.cpu.kernels, f"linear_{product}")
        monkeypatch.setattr(
            gpt1.cpu.kernels,
            f"linear_{product}",
            lambda *args, product=product, real=real: calls.append((product, args[-1])) or real(*args),
        )
    monkeypatch.setattr(gpt1.cpu.kernels, "_onednn", lambda x, w, b: calls.append("onednn") or F.linear(x, w, b))
    monkeypatch.setattr(
        gpt1.cpu.kernels, "_row_blocks", lambda w, b, n: lambda x: calls.append(("rows", n)) or F.linear(x, w, b)
    )
    small, large = torch.randn(5, 8, requires_grad=True), torch.randn(13, 8, requires_grad=True)
    for layer, w in (("train", small), ("head", large)):
        for product in gpt1.cpu.kernels.PRODUCTS:
            for kernel in ("torch", "onednn"):
                for others in ("torch", "onednn"):
                    kind = f"{layer}.{product}"
                    choices = {**dict.fromkeys(gpt1.cpu.kernels.KINDS, others), kind: kernel}
                    monkeypatch.setattr(gpt1.cpu.kernels, "CPU_MATMULS", choices)
                    calls.clear()
                    x = torch.randn(3, 8, requires_grad=True)
                    linear(x, w).sum().backward()
                    ran = dict(c for c in calls if isinstance(c, tuple) and c[0] in gpt1.cpu.kernels.PRODUCTS)
                    all_torch = kernel == others == "torch"
                    assert ran == (
                        {} if all_torch else {**dict.fromkeys(gpt1.cpu.kernels.PRODUCTS, others), product: kernel}
                    )
    for kind, rows in (("decode", 1), ("decode", 3), ("batched", 4)):
        for kernel in gpt1.cpu.kernels.KERNELS[kind]:
            for others in ("torch", "onednn"):
                monkeypatch.setattr(
                    gpt1.cpu.kernels, "CPU_MATMULS", {**dict.fromkeys(gpt1.cpu.kernels.KINDS, others), kind: kernel}
                )
                calls.clear()
                with torch.no_grad():
                    x = torch.randn(rows, 8)
                    torch.testing.assert_close(linear(x, small), F.linear(x, small))
                blocks = [("rows", 2)] if rows == 1 else []
                expected = {"torch": [], "onednn": ["onednn"], "row_blocks": blocks, "column_blocks": blocks}
                assert calls == expected[kernel], (kind, rows, kernel, others)


def test_using_runs_a_kind_on_a_kernel_inside_the_block_and_restores_the_choice(monkeypatch):
    """``using`` (how bench and the measurement try a kernel) sets one kind's kernel as set_cpu_matmuls would (torch's
    where this CPU lacks it; an unknown kernel refused) and puts back what was chosen, also when the block raises."""
    chosen = {**dict.fromkeys(gpt1.cpu.kernels.KINDS, "torch"), "batched": "onednn"}
    monkeypatch.setattr(gpt1.cpu.kernels, "CPU_MATMULS", dict(chosen))
    monkeypatch.setattr(gpt1.cpu.kernels, "onednn_available", lambda: True)
    for kernel in ("onednn", "row_blocks", "column_blocks"):
        with gpt1.cpu.kernels.using("decode", kernel):
            assert gpt1.cpu.kernels.CPU_MATMULS == {**chosen, "decode": kernel}
    assert gpt1.cpu.kernels.CPU_MATMULS == chosen
    with pytest.raises(KeyError), gpt1.cpu.kernels.using("train.forward", "onednn"):
        raise KeyError
    assert gpt1.cpu.kernels.CPU_MATMULS == chosen
    with pytest.raises(ValueError, match="decode: also row_blocks"), gpt1.cpu.kernels.using("batched", "row_blocks"):
        pass
    monkeypatch.setattr(gpt1.cpu.kernels, "onednn_available", lambda: False)
    with gpt1.cpu.kernels.using("decode", "onednn"):
        assert gpt1.cpu.kernels.CPU_MATMULS["decode"] == "torch"
    assert gpt1.cpu.kernels.CPU_MATMULS == chosen


def test_the_kernel_table_is_written_in_gpt1_cpu_kernels_only():
    """set_cpu_matmuls and using are CPU_MATMULS's only writers: no other module of gpt1 assigns to it or updates it."""
    writes = re.compile(r"CPU_MATMULS\s*(\[[^\]]*\])?\s*=(?!=)|CPU_MATMULS\.(update|setdefault|pop|clear)\(")
    package = Path(gpt1.cpu.kernels.__file__).parents[1]
    writers = [p.relative_to(package).as_posix() for p in package.rglob("*.py") if writes.search(p.read_text())]
    assert writers == ["cpu/kernels.py"]


def test_until_configured_every_product_is_torchs_own(monkeypatch):
    """Importing gpt1.cpu.kernels chooses nothing: every kind runs torch's matmuls until gpt1.cpu.settings.configure
    sets them."""
    code = "from gpt1.cpu.kernels import CPU_MATMULS; print(sorted(set(CPU_MATMULS.values())), len(CPU_MATMULS))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "GPT1_CPU_MATMUL": "onednn"},
    ).stdout
    assert out.split() == ["['torch']", str(len(gpt1.cpu.kernels.KINDS))]


def test_set_cpu_matmuls_refuses_unknown_kinds_and_kernels_and_keeps_torch_without_onednn(monkeypatch):
    monkeypatch.setattr(gpt1.cpu.kernels, "CPU_MATMULS", dict.fromkeys(gpt1.cpu.kernels.KINDS, "torch"))
    with pytest.raises(ValueError, match="kinds are train.forward, train.input_grad, .*, decode, batched"):
        gpt1.cpu.kernels.set_cpu_matmuls({"training": "onednn"})
    with pytest.raises(ValueError, match="kernels onednn or torch"):
        gpt1.cpu.kernels.set_cpu_matmuls({"train.forward": "mkl"})
    with pytest.raises(ValueError, match=r"decode: also row_blocks"):
        gpt1.cpu.kernels.set_cpu_matmuls({"batched": "row_blocks"})  # the row blocks are decoding's only
    monkeypatch.setattr(gpt1.cpu.kernels, "onednn_available", lambda: False)
    gpt1.cpu.kernels.set_cpu_matmuls({"train.forward": "onednn", "decode": "row_blocks"})
    assert (
        gpt1.cpu.kernels.CPU_MATMULS["train.forward"] == "torch"
        and gpt1.cpu.kernels.CPU_MATMULS["decode"] == "row_blocks"
    )
    monkeypatch.undo()
    monkeypatch.setattr(gpt1.cpu.kernels.platform, "machine", lambda: "aarch64")
    assert not gpt1.cpu.kernels.onednn_available()  # Arm keeps torch's BLAS


def test_without_post_accumulate_hooks_the_lookup_is_f_embeddings(monkeypatch):
    """The public fallback: where a tensor has no _post_accumulate_grad_hooks, the gradient is F.embedding's."""
    monkeypatch.setattr(gpt1.cpu.layers, "_densified", lambda weight: False)
    table = CpuEmbedding(9, 4)
    assert type(table(torch.tensor([1, 2])).grad_fn).__name__ == "EmbeddingBackward0"


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
    module = CpuDropout(0.3).eval()
    assert module(x) is x


def test_embedding_gradient_is_sparse_and_the_tied_heads_dense_one_takes_it():
    """Under a tied head (the table used again as the output matrix) the table's gradient is dense and equals
    F.embedding's; the sparse part alone (no head) is made dense as soon as it is accumulated, also across two
    backward passes (gradient accumulation); without autograd the lookup is F.embedding's own."""
    ids = torch.tensor([[3, 1, 3], [0, 7, 3]])  # repeated ids: their rows are summed
    table = CpuEmbedding(9, 4)
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


def test_use_cpu_layers_swaps_each_layer_in_place_and_the_heads_dropouts_only():
    """Every linear layer, dropout, the attention and the tied head of a GPT, its token table (not the position
    table: its gradient stays torch's dense one) and an LSTM's layers (not torch's LSTM); of the heads, the dropouts
    (their products stay torch's). The same parameter objects and names, so optimizers and checkpoints see nothing;
    a second call changes nothing."""
    model, lstm = GPT(model_config("tiny")), LSTM(LSTMConfig(vocab_size=50, n_ctx=16, n_embd=8, hidden_size=16))
    heads = nn.ModuleDict({"classification": ClassificationHead(32, 3)})
    before = [(name, id(p)) for m in (model, lstm, heads) for name, p in m.named_parameters()]
    plain = {m: [type(x) for x in m.modules()] for m in (model, lstm, heads)}
    assert not on_cpu_layers(model)
    use_cpu_layers(model, heads)
    use_cpu_layers(lstm)
    swapped = {nn.Linear: CpuLinear, nn.Dropout: CpuDropout, TiedHead: CpuTiedHead, Attention: CpuAttention}
    for m in (model, lstm):
        assert [type(x) for x in m.modules()] == [
            CpuEmbedding if x is m.tokens_embed else swapped.get(cls, cls) for x, cls in zip(m.modules(), plain[m])
        ]
    assert type(model.positions_embed) is nn.Embedding and type(lstm.lstm) is nn.LSTM
    head = heads["classification"]
    assert type(head.dropout) is CpuDropout and type(head.linear) is nn.Linear
    assert [(name, id(p)) for m in (model, lstm, heads) for name, p in m.named_parameters()] == before
    assert on_cpu_layers(model) and on_cpu_layers(lstm)
    types = [type(x) for x in model.modules()]
    use_cpu_layers(model, heads)
    assert [type(x) for x in model.modules()] == types


@pytest.mark.parametrize("matmuls", ["torch", "onednn"])
def test_a_model_on_cpu_layers_computes_the_plain_models_function(matmuls, monkeypatch):
    """Swapped in, gpt1's CPU layers compute what the plain model computes: in eval on torch's kernels the very same
    logits; on oneDNN the same to fp32 rounding, in training too (no dropout: the masks are drawn otherwise), loss
    and every gradient."""
    if matmuls == "onednn" and not gpt1.cpu.kernels.onednn_available():
        pytest.skip("no oneDNN on this CPU")
    monkeypatch.setattr(gpt1.cpu.kernels, "CPU_MATMULS", dict.fromkeys(gpt1.cpu.kernels.KINDS, matmuls))
    config = replace(model_config("tiny"), embd_pdrop=0.0, attn_pdrop=0.0, resid_pdrop=0.0)
    torch.manual_seed(0)
    plain = GPT(config)
    fast = deepcopy(plain)
    use_cpu_layers(fast)
    ids = torch.randint(0, config.vocab_size, (2, 12))
    with torch.no_grad():
        ours, theirs = fast.eval().lm_logits(fast(ids)), plain.eval().lm_logits(plain(ids))
    if matmuls == "torch":
        assert torch.equal(ours, theirs)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    for model in (fast.train(), plain.train()):
        F.cross_entropy(model.lm_logits(model(ids)).flatten(0, 1), ids.roll(-1, 1).flatten()).backward()
    for (name, a), b in zip(fast.named_parameters(), plain.parameters()):
        assert a.grad.layout == torch.strided, name
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-6, msg=name)
