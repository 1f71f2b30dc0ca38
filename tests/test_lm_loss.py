"""The LM loss over the tied head in chunks (gpt1.model.lm_loss): the same loss and gradients as the whole logits
within fp32 rounding, in pre-training, fine-tuning's auxiliary LM loss and zero-shot scoring, with no (tokens x vocab)
tensor at any moment, its products on the CPU kernels chosen for the tied head."""

from dataclasses import replace

import pytest
import torch
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import gpt1.cpu.kernels
import gpt1.cpu.layers
import gpt1.model.lm_loss
from gpt1 import api
from gpt1.app.model_group import model_config
from gpt1.cpu.layers import use_cpu_layers
from gpt1.model.decoder import GPT
from gpt1.model.lm_loss import IGNORE_INDEX, LMLoss, chunked_lm_loss, chunked_logprobs
from gpt1.training.module import next_token_loss

V = 500  # the tiny preset's 512 less some: the table padded to 512 (pad_vocab_to_multiple=64), 12 rows never scored


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 7 rows in fp32 (4 in bf16): a batch of a few dozen positions takes several, the last one short."""
    monkeypatch.setattr(gpt1.model.lm_loss, "CHUNK_BYTES", 7 * V * 4)


def tiny(**overrides) -> GPT:
    torch.manual_seed(0)
    return GPT(replace(model_config("tiny"), vocab_size=V, pad_vocab_to_multiple=64, **overrides))


def batch(B: int = 3, T: int = 13) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, V, (B, T), generator=g)
    targets = torch.randint(0, V, (B, T), generator=g)
    targets[0, -4:] = IGNORE_INDEX  # padding: not scored
    targets[2, 0] = IGNORE_INDEX
    return ids, targets


def loss_and_grads(model: GPT, how: LMLoss, seed: int = 5) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """next_token_loss by ``how`` and every parameter's gradient, the dropout masks drawn alike (same seed)."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    loss, _ = next_token_loss(model, *batch(), how)
    (2.5 * loss).backward()  # a loss scaled after it (aux_lm_weight, loss scaling): the gradients scale with it
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("embd_dropout", ["occurrence", "table"])
def test_the_chunked_loss_and_its_gradients_equal_the_whole_logits(small_chunks, embd_dropout):
    """Pre-training's loss: padded vocabulary, ignored positions, dropout on (embd_dropout=table: the tied head reads
    the dropped table, and the gradient reaches the embedding through it)."""
    model = tiny(embd_dropout=embd_dropout).train()
    whole, whole_grads = loss_and_grads(model, LMLoss.whole)
    chunked, chunked_grads = loss_and_grads(model, LMLoss.chunked)
    torch.testing.assert_close(chunked, whole, rtol=1e-6, atol=1e-6)
    for name, grad in whole_grads.items():  # to fp32's rounding of each tensor's largest entries
        atol = 1e-6 * grad.abs().max().item()
        torch.testing.assert_close(chunked_grads[name], grad, rtol=1e-5, atol=atol, msg=name)
    assert chunked_grads["tokens_embed.weight"][V:].abs().max() == 0  # padded rows: no gradient from the head


def test_in_float64_it_is_the_cross_entropy_to_float64s_rounding(small_chunks):
    """What fp32 shows above is the order of the sums, not an error: in float64 the two agree to 1e-12."""
    torch.manual_seed(0)
    hidden = torch.randn(39, 32, dtype=torch.float64, requires_grad=True)
    table = torch.randn(512, 32, dtype=torch.float64, requires_grad=True)
    targets = batch()[1].flatten()
    reference = F.cross_entropy(F.linear(hidden, table)[:, :V], targets, ignore_index=IGNORE_INDEX)
    weights = (targets != IGNORE_INDEX).double() / (targets != IGNORE_INDEX).sum()
    chunked = chunked_lm_loss(hidden, table, V, targets, weights)
    torch.testing.assert_close(chunked, reference, rtol=1e-12, atol=1e-12)
    for a, b in zip(torch.autograd.grad(chunked, (hidden, table)), torch.autograd.grad(reference, (hidden, table))):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


def test_under_bf16_autocast_it_matches_the_whole_logits_within_bf16(small_chunks):
    model = tiny().train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        whole, whole_grads = loss_and_grads(model, LMLoss.whole)
        chunked, chunked_grads = loss_and_grads(model, LMLoss.chunked)
    torch.testing.assert_close(chunked, whole, rtol=1e-2, atol=1e-2)
    for name in ("tokens_embed.weight", "h.0.attn.c_attn.weight"):
        err = (chunked_grads[name] - whole_grads[name]).norm() / whole_grads[name].norm()
        assert err < 2e-2, (name, err)


def test_chunks_are_as_few_as_the_budget_allows_of_equal_rows():
    """One chunk where every position's logits fit CHUNK_BYTES (fp32 logits, and under autocast their gradient in its
    dtype: the quickstart's 32 x 128 at 8,195 tokens in bf16, GPT-1's vocabulary at 8 x 128 or 2 x 512 in fp32: as
    fast as the whole logits), else the fewest that fit, of equal rows but the last; at most MAX_CHUNKS (a compiled
    graph unrolls them), larger ones beyond."""
    from gpt1.model.lm_loss import CHUNK_BYTES, MAX_CHUNKS, chunk_rows

    bf16 = torch.bfloat16
    assert chunk_rows(32 * 128, 8195, bf16) == 32 * 128 and chunk_rows(1024, 40481) == 1024
    for rows, dtype, chunks in [(8 * 512, torch.float32, 3), (64 * 512, bf16, 30)]:  # GPT-1, the paper's batch on GPU
        size = chunk_rows(rows, 40478, dtype)
        assert -(-rows // size) == chunks and rows - (chunks - 1) * size > 0
        assert size * 40478 * (4 if dtype == torch.float32 else 6) <= CHUNK_BYTES
    assert chunk_rows(1656, 40478) == 1656 and chunk_rows(1656, 40478, torch.float64) == 828  # fp64: 8 bytes a logit
    assert -(-(10**6) // chunk_rows(10**6, 40478)) == MAX_CHUNKS
    assert chunk_rows(3, CHUNK_BYTES) == 1  # a vocabulary larger than a chunk: a row at a time


class LargestTensor(TorchDispatchMode):
    """The most elements of any tensor an op returned while it was on."""

    def __init__(self) -> None:
        super().__init__()
        self.most = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.most = max(self.most, t.numel())
        return out


@pytest.mark.parametrize("how", list(LMLoss))
def test_no_tensor_of_every_positions_logits_exists_forward_or_backward(small_chunks, how):
    """The whole logits make a (B T, V) tensor; the chunked loss none larger than the embedding table."""
    model = tiny().train()
    ids, targets = batch(B=4, T=32)
    with LargestTensor() as seen:
        next_token_loss(model, ids, targets, how)[0].backward()
    table = model.tokens_embed.weight.numel()
    assert (seen.most <= table) == (how == LMLoss.chunked), (seen.most, ids.numel() * V)


def test_the_auxiliary_lm_loss_scores_each_shared_state_once_as_the_whole_logits(small_chunks):
    """Fine-tuning's auxiliary LM loss (weights per sequence, a shared context's states scored for every choice)."""
    torch.manual_seed(0)
    hidden = torch.randn(40, 32, requires_grad=True)  # (U, C) distinct states
    table = torch.randn(512, 32, requires_grad=True)
    rows = torch.randint(0, 40, (90,))  # (M,) the state each scored token reads: states shared
    targets, weights = torch.randint(0, V, (90,)), torch.rand(90)
    log_probs = F.log_softmax(F.linear(hidden, table)[:, :V], -1)
    whole = -(log_probs[rows, targets] * weights).sum()
    whole_grads = torch.autograd.grad(whole, (hidden, table))
    chunked = chunked_lm_loss(hidden, table, V, targets, weights, rows)
    chunked_grads = torch.autograd.grad(chunked, (hidden, table))
    torch.testing.assert_close(chunked, whole)
    for a, b in zip(chunked_grads, whole_grads, strict=True):  # to fp32's rounding of the largest entries
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6 * b.abs().max().item())
    with torch.no_grad():  # evaluation: the same loss, no gradient kept
        torch.testing.assert_close(chunked_lm_loss(hidden, table, V, targets, weights, rows), whole.detach())


def test_zero_shot_log_probabilities_are_the_whole_logits_row_by_row(small_chunks):
    model = tiny().eval()
    ids, targets = batch()
    with torch.no_grad():
        hidden = model(ids).flatten(0, 1)
        whole = model.lm_logits(hidden).log_softmax(-1).gather(-1, targets.flatten().clamp(min=0)[:, None])[:, 0]
        chunked = chunked_logprobs(hidden, model.lm_table(), V, targets.flatten().clamp(min=0))
    torch.testing.assert_close(chunked, whole)


def test_a_second_backward_through_the_same_loss_fails(small_chunks):
    """The gradients computed in the forward pass are scaled in place by the backward: a second pass must fail."""
    model = tiny().train()
    loss, _ = next_token_loss(model, *batch())
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_the_heads_products_run_on_the_kernels_chosen_for_the_tied_head(small_chunks, monkeypatch):
    """fp32 on the CPU, eager: each chunk's forward, input-gradient and weight-gradient products on the kernels that
    gpt1.cpu.kernels holds for the head's kinds (as gpt1.cpu.layers.linear sends the whole head's), once the CPU
    layers are on (gpt1.cpu.layers.use_cpu_layers, as every run on the CPU); torch's before."""
    seen = []
    for name in ("linear_forward", "linear_input_grad", "linear_weight_grad"):
        real = getattr(gpt1.cpu.layers, name)
        spy = lambda *args, real=real, name=name: seen.append((name, args[-1])) or real(*args)  # noqa: E731
        monkeypatch.setattr(gpt1.cpu.layers, name, spy)
    monkeypatch.setitem(gpt1.cpu.kernels.CPU_MATMULS, "head.forward", "onednn")
    monkeypatch.setitem(gpt1.cpu.kernels.CPU_MATMULS, "head.weight_grad", "onednn")
    monkeypatch.setitem(gpt1.cpu.kernels.CPU_MATMULS, "head.input_grad", "torch")  # (whatever a run before chose)
    if not gpt1.cpu.kernels.onednn_available():  # the choice is still passed on; torch's product stands in for it
        monkeypatch.setattr(gpt1.cpu.kernels, "_onednn", lambda x, w, b, *_: F.linear(x, w, b))
    model = tiny().train()
    next_token_loss(model, *batch())[0].backward()
    assert seen == []  # plain torch: the model's own head
    use_cpu_layers(model)
    next_token_loss(model, *batch())[0].backward()
    expected = {"linear_forward": "onednn", "linear_input_grad": "torch", "linear_weight_grad": "onednn"}
    assert set(seen) == set(expected.items()) and len(seen) == 3 * 6  # 39 positions: 6 chunks of 7
    seen.clear()
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast: torch's own products, as linear's
        next_token_loss(model, *batch())[0].backward()
    assert {kernel for _, kernel in seen} == {"torch"}


@pytest.mark.parametrize(
    "command, overrides",
    [("pretrain", []), ("finetune", ["task=sentiment", "init_from=x.ckpt"]), ("evaluate", ["ckpt=x.ckpt"])],
)
def test_the_commands_compute_the_chunked_loss_unless_told_whole(command, overrides):
    """The default is the chunked loss (the same function, above); ``lm_loss=whole`` the whole logits, as before."""
    assert api.compose(command, overrides).lm_loss == LMLoss.chunked
    assert api.compose(command, [*overrides, "lm_loss=whole"]).lm_loss == LMLoss.whole
    with pytest.raises(Exception, match="lm_loss=fused"):  # a wrong value fails at start-up
        api.compose(command, [*overrides, "lm_loss=fused"])
