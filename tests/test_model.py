"""The GPT-1 decoder: architecture facts, plain torch layers, init, vocab growth and padding, KV-cache decoding and
its token step (gpt1.cpu.decoding); the LSTM baseline's decoding."""

from dataclasses import replace

import pytest
import torch
from torch import nn

import gpt1.cpu.kernels
import gpt1.model.generation
from gpt1.app.model_group import model_config
from gpt1.cpu.decoding import SteppedGPT, TokenStep, decode_in_steps, store_for_decoding
from gpt1.cpu.kernels import KERNELS
from gpt1.cpu.layers import CpuEmbedding, use_cpu_layers
from gpt1.model.decoder import GPT, MLP, Attention, Block, GPTConfig, TiedHead
from gpt1.model.kv_cache import LayerCache
from gpt1.model.lstm import LSTM, LSTMConfig
from gpt1.training.packing import pack_choices, pack_sequences

TINY = model_config("tiny")


def test_paper_model_has_the_papers_parameter_count_and_flops():
    model = GPT(model_config("gpt1"))
    assert model.num_params() == 116_534_784  # 12 x 7,087,872 + 40,478 x 768 + 512 x 768
    assert round(model.flops_per_token() / 1e6) == 753  # 6 N + 12 L C T at T = 512
    assert not any("ln_f" in name for name, _ in model.named_parameters())  # GPT-1 has no final LayerNorm


def test_the_decoder_is_built_of_torchs_own_layers():
    """The model reads alone: every module of a GPT is torch's own layer or one of the decoder file's, whose only
    non-module ops are F.scaled_dot_product_attention and the tied head's F.linear (gpt1.cpu swaps them from above)."""
    own = {GPT, Block, Attention, MLP, TiedHead}
    torchs = {nn.Linear, nn.Dropout, nn.Embedding, nn.LayerNorm, nn.ModuleList}
    assert {type(m) for m in GPT(TINY).modules()} == own | torchs


def test_init_is_normal_002_with_zero_biases_and_unit_gains():
    model = GPT(replace(model_config("gpt1"), n_layer=2))
    w = model.h[0].mlp.c_fc.weight
    assert abs(w.std().item() - 0.02) < 1e-3 and abs(w.mean().item()) < 1e-3
    assert abs(model.tokens_embed.weight.std().item() - 0.02) < 1e-3
    assert torch.count_nonzero(model.h[1].attn.c_attn.bias) == 0
    assert torch.all(model.h[0].ln_1.weight == 1) and torch.all(model.h[0].ln_2.bias == 0)


def test_block_is_post_ln():
    """The output of every block is LayerNorm-ed: per-position mean 0 and std 1 (gain 1, bias 0 at init)."""
    model = GPT(TINY).eval()
    h = model(torch.randint(0, TINY.vocab_size, (2, 8)))
    assert torch.allclose(h.mean(-1), torch.zeros(2, 8), atol=1e-5)
    assert torch.allclose(h.std(-1, unbiased=False), torch.ones(2, 8), atol=1e-3)


def test_lm_head_is_tied_to_the_token_embedding():
    model = GPT(TINY).eval()
    h = torch.randn(3, TINY.n_embd)
    torch.testing.assert_close(model.lm_logits(h), h @ model.tokens_embed.weight.T)
    assert sum(p.numel() for p in model.parameters()) == model.num_params()  # no separate head matrix


def test_model_is_causal():
    model = GPT(TINY).eval()
    x = torch.randint(0, TINY.vocab_size, (1, 10))
    y = x.clone()
    y[0, 7] = (x[0, 7] + 1) % TINY.vocab_size
    hx, hy = model(x), model(y)
    assert torch.allclose(hx[:, :7], hy[:, :7], atol=1e-6)
    assert not torch.allclose(hx[:, 7:], hy[:, 7:], atol=1e-3)


def test_context_longer_than_n_ctx_is_refused():
    with pytest.raises(ValueError, match="exceeds the context"):
        GPT(TINY)(torch.zeros(1, TINY.n_ctx + 1, dtype=torch.long))


def test_vocab_padding_keeps_logits_to_the_real_vocab():
    config = replace(TINY, vocab_size=500, pad_vocab_to_multiple=64)
    model = GPT(config)
    assert model.tokens_embed.weight.shape[0] == 512
    assert model.lm_logits(model(torch.zeros(1, 4, dtype=torch.long))).shape == (1, 4, 500)
    assert model.num_params() == GPT(replace(config, pad_vocab_to_multiple=1)).num_params()


def test_resize_token_embeddings_keeps_old_rows_and_draws_new_ones():
    torch.manual_seed(0)
    model = GPT(replace(TINY, vocab_size=1000))
    old = model.tokens_embed.weight.detach().clone()
    model.resize_token_embeddings(1500)
    new = model.tokens_embed.weight.detach()
    assert new.shape == (1500, TINY.n_embd) and model.config.vocab_size == 1500
    assert torch.equal(new[:1000], old)
    assert abs(new[1000:].std().item() - 0.02) < 2e-3
    with pytest.raises(ValueError, match="shrink"):
        model.resize_token_embeddings(10)
    # on gpt1's CPU layers the grown table is still theirs: hidden states alone (no head) leave it a dense gradient
    use_cpu_layers(model)
    model.resize_token_embeddings(1600)
    (model(torch.tensor([[1500, 5]])) * torch.randn(1, 2, TINY.n_embd)).sum().backward()
    assert type(model.tokens_embed) is CpuEmbedding and model.tokens_embed.weight.grad.layout == torch.strided
    assert model.tokens_embed.weight.grad[1500].abs().sum() > 0


def test_a_whole_model_pickles_and_its_table_gradient_stays_dense(tmp_path):
    """torch.save of the module itself (not a state dict) round-trips, on gpt1's CPU layers too; the loaded table lost
    its tensor hooks, and hidden states alone (no LM head) still leave it a dense gradient."""
    model = GPT(TINY)
    use_cpu_layers(model)
    torch.save(model, tmp_path / "model.pt")
    loaded = torch.load(tmp_path / "model.pt", weights_only=False)
    x = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(loaded.eval()(x), model.eval()(x))
    (loaded.train()(x) * torch.randn(1, 3, TINY.n_embd)).sum().backward()
    assert loaded.tokens_embed.weight.grad.layout == torch.strided


def test_kv_cache_gives_the_same_hidden_states_as_a_full_pass():
    model = GPT(TINY).eval()
    x = torch.randint(0, TINY.vocab_size, (2, 12))
    full = model(x)
    cache = model.new_cache()
    parts = [model(x[:, :5], cache), model(x[:, 5:9], cache), model(x[:, 9:10], cache), model(x[:, 10:], cache)]
    assert torch.allclose(torch.cat(parts, dim=1), full, atol=1e-5)
    assert isinstance(cache[0], LayerCache) and cache[0].length == 12


@pytest.mark.parametrize("stepped", [False, True], ids=["plain", "stepped"])
@pytest.mark.parametrize("batch", [3, 1])  # one sequence of a stepped GPT decodes through TokenStep
def test_greedy_generation_is_identical_with_and_without_the_cache(batch, stepped):
    torch.manual_seed(0)
    model = GPT(TINY).eval()
    if stepped:
        use_cpu_layers(model)
        decode_in_steps(model)
    prompt = torch.randint(0, TINY.vocab_size, (batch, 5))
    # 40 new tokens run past n_ctx = 32, so the cached path must also switch to a sliding window correctly
    with_cache = model.generate(prompt, 40, temperature=0, use_cache=True)
    without = model.generate(prompt, 40, temperature=0, use_cache=False)
    assert with_cache.shape == (batch, 45)
    assert torch.equal(with_cache, without)
    assert torch.equal(with_cache[:, :5], prompt)


@pytest.mark.parametrize("kernel", KERNELS["decode"])
@pytest.mark.parametrize(
    "config",
    [
        replace(TINY, vocab_size=50, pad_vocab_to_multiple=16),
        replace(TINY, activation="relu", layer_norm_eps=1e-3, n_head=2),
    ],
    ids=["padded", "relu"],
)
def test_a_token_step_gives_the_forwards_hidden_states_to_the_bit(config, kernel, monkeypatch):
    """TokenStep (one sequence's token without module calls) is GPT.forward with a cache on gpt1's CPU layers, op for
    op: the hidden states and the cache are equal to the last bit, on each of decoding's kernels, the weights stored
    for it."""
    monkeypatch.setitem(gpt1.cpu.kernels.CPU_MATMULS, "decode", kernel)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)  # the row blocks run one block per thread
    torch.manual_seed(0)
    model = GPT(config).eval()
    use_cpu_layers(model)
    store_for_decoding(model)
    assert model.h[0].mlp.c_fc.weight.is_contiguous() == (kernel != "column_blocks")
    ids = torch.randint(0, config.vocab_size, (1, 9))
    ours, theirs = model.new_cache(), model.new_cache()
    with torch.no_grad():
        model(ids[:, :4], ours), model(ids[:, :4], theirs)
        step = TokenStep(model)
        for t in range(4, 9):
            assert torch.equal(step(ids[:, t : t + 1], ours), model(ids[:, t : t + 1], theirs))
    for a, b in zip(ours, theirs):  # the buffers hold room for n_ctx tokens: compare the 9 written
        assert a.length == b.length == 9
        assert torch.equal(a.k[:, :, :9], b.k[:, :, :9]) and torch.equal(a.v[:, :, :9], b.v[:, :, :9])


def test_generate_takes_the_token_step_for_one_sequence_in_fp32_inference(monkeypatch):
    """A GPT given its stepped class (decode_in_steps, where a decode starts) decodes through TokenStep only where it
    is the same math on the same kernels: one sequence, eval mode, fp32 on the CPU (or a CUDA GPU:
    tests/test_gpu.py), no autocast; the prompt itself (and any batch) goes through the model. A plain GPT never."""
    steps = []
    monkeypatch.setattr(
        TokenStep, "__call__", lambda self, token, cache: steps.append(token.shape) or GPT.forward(model, token, cache)
    )
    model = GPT(TINY).eval()
    prompt = torch.randint(0, TINY.vocab_size, (1, 5))
    model.generate(prompt, 4, temperature=0)
    assert steps == []
    decode_in_steps(model)
    assert type(model) is SteppedGPT
    model.generate(prompt, 4, temperature=0)
    assert steps == [(1, 1)] * 3  # the first token comes from the prompt's pass
    for ids, mode, autocast, dtype in (
        (prompt.repeat(2, 1), "eval", False, torch.float32),
        (prompt, "train", False, torch.float32),
        (prompt, "eval", True, torch.float32),
        (prompt, "eval", False, torch.float64),
    ):
        steps.clear()
        model = GPT(TINY).to(dtype).train(mode == "train")
        decode_in_steps(model)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            model.generate(ids, 4, temperature=0)
        assert steps == [], (ids.shape, mode, autocast, dtype)


def test_sampling_is_reproducible_with_a_seeded_generator_and_respects_top_k():
    model = GPT(TINY).eval()
    prompt = torch.zeros(4, 1, dtype=torch.long)
    a = model.generate(prompt, 10, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(1))
    b = model.generate(prompt, 10, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    top1 = model.generate(prompt, 10, temperature=1.0, top_k=1)
    assert torch.equal(top1, model.generate(prompt, 10, temperature=0))


def test_the_lstm_decodes_from_its_state_as_from_the_whole_sequence():
    """The LSTM baseline samples too (the fine-tuning's sample callback, gpt1 generate): greedy tokens carried by its
    state are those of full passes over the sequence, and each is the argmax of the full pass's last logits."""
    torch.manual_seed(0)
    model = LSTM(LSTMConfig(vocab_size=50, n_ctx=16, n_embd=8, hidden_size=16)).eval()
    prompt = torch.randint(0, 50, (2, 3))
    with_state = model.generate(prompt, 20, temperature=0)
    assert with_state.shape == (2, 23) and torch.equal(with_state[:, :3], prompt)
    assert torch.equal(with_state, model.generate(prompt, 20, temperature=0, use_cache=False))
    logits = model.lm_logits(model(with_state[:, :10]))[:, -1]  # (2, V): what the 8th new token was picked from
    assert torch.equal(logits.argmax(-1), with_state[:, 10])
    a, b = (model.generate(prompt, 5, top_k=3, generator=torch.Generator().manual_seed(1)) for _ in range(2))
    assert torch.equal(a, b)


def test_the_decoder_and_the_lstm_generate_through_one_loop(monkeypatch):
    """Both decoders' generate is gpt1.model.generation.generate: each new token is sample_next's pick from the LM
    head's logits at the last position of what the model's reader read (the whole prompt first, then the newest
    token: cached)."""
    picked, real = [], gpt1.model.generation.sample_next
    monkeypatch.setattr(
        gpt1.model.generation, "sample_next", lambda logits, *a: picked.append(logits) or real(logits, *a)
    )
    for model in (GPT(TINY).eval(), LSTM(LSTMConfig(vocab_size=50, n_ctx=16, n_embd=8, hidden_size=16)).eval()):
        prompt = torch.randint(0, 50, (2, 4))
        picked.clear()
        out = model.generate(prompt, 3, temperature=0)
        assert len(picked) == 3 and torch.equal(out[:, 4], picked[0].argmax(-1))
        read = model.reader(prompt, use_cache=True)
        with torch.no_grad():
            assert read(out[:, :4]).shape[1] == 4 and read(out[:, :5]).shape[1] == 1  # only the unread tokens
            torch.testing.assert_close(model.lm_logits(read(out[:, :6])[:, -1]), picked[2])


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="model.n_head"):
        GPTConfig(n_embd=100, n_head=12)
    with pytest.raises(ValueError, match="model.activation"):
        GPTConfig(activation="swish")


@pytest.mark.parametrize("cpu_layers", [False, True], ids=["plain", "cpu-layers"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_the_model_compiles_whole_without_graph_breaks(training, cpu_layers):
    """torch.compile sees one graph for the forward and the tied head, dropout included (tracing only: no compiler),
    also on gpt1's CPU layers, which take torch's own ops in a graph being compiled."""
    model = GPT(model_config("tiny")).train(training)
    if cpu_layers:
        use_cpu_layers(model)
    ids = torch.randint(0, model.config.vocab_size, (2, 16))
    explained = torch._dynamo.explain(lambda x: model.lm_logits(model(x)))(ids)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


def test_the_kv_cache_is_allocated_once_and_filled_in_place():
    model = GPT(model_config("tiny")).eval()
    cache = model.new_cache()
    model(torch.randint(0, model.config.vocab_size, (1, 5)), cache)
    buffer = cache[0].k.data_ptr()
    for _ in range(3):
        model(torch.randint(0, model.config.vocab_size, (1, 1)), cache)
    assert cache[0].k.data_ptr() == buffer and cache[0].length == 8
    assert cache[0].k.shape[2] == model.config.n_ctx  # room for the whole context, allocated on the first update


def test_pack_choices_puts_the_shared_context_once_and_each_choice_after_it():
    S, D, X = 90, 91, 92  # start, delimiter, extract
    ids = torch.tensor([[[S, 5, 6, D, 7, X, 0], [S, 5, 6, D, 8, 9, X], [0] * 7]])  # (1, K=3, T=7): a dummy third
    packed = pack_choices(ids, torch.tensor([[6, 7, 1]]), torch.tensor([[True, True, False]]))
    assert packed.ids.tolist() == [[S, 5, 6, D, 7, X, 8, 9, X]]
    assert packed.positions.tolist() == [[0, 1, 2, 3, 4, 5, 4, 5, 6]]
    assert packed.index[0, 1].tolist() == [0, 1, 2, 3, 6, 7, 8] and packed.index[0, 2].tolist() == [0] * 7
    sees = packed.attn_mask[0].int()
    assert sees[6].tolist() == [1, 1, 1, 1, 0, 0, 1, 0, 0]  # choice 1's first token: the context and itself
    assert sees[5].tolist() == [1, 1, 1, 1, 1, 1, 0, 0, 0]  # choice 0's extract token: its own sequence only


def test_packed_rows_give_each_sequence_its_own_hidden_states():
    model = GPT(model_config("tiny")).eval()
    ids = torch.randint(1, 500, (2, 3, 9))
    ids[:, :, :4] = ids[:, :1, :4]  # a shared context of 4 tokens
    lengths = torch.tensor([[9, 4, 5], [3, 9, 6]])
    packed = pack_choices(ids, lengths, torch.ones(2, 3, dtype=torch.bool))
    with torch.no_grad():
        rows = model(packed.ids, positions=packed.positions, attn_mask=packed.attn_mask)  # (2, L, C)
        alone = model(ids.flatten(0, 1)).view(2, 3, 9, -1)
    for b in range(2):
        for k in range(3):
            n = lengths[b, k]
            torch.testing.assert_close(
                rows.flatten(0, 1)[packed.index[b, k, :n]], alone[b, k, :n], rtol=1e-4, atol=1e-5
            )
    whole = pack_sequences(ids.flatten(0, 1), lengths.flatten())  # 6 sequences of 3-9 tokens in rows of 9
    assert whole.ids.shape == (4, 9)  # first fit, longest first: 9 | 9 | 6 + 3 | 5 + 4
    with torch.no_grad():
        rows = model(whole.ids, positions=whole.positions, attn_mask=whole.attn_mask).flatten(0, 1)
    for n, length in enumerate(lengths.flatten().tolist()):
        torch.testing.assert_close(rows[whole.index[n, :length]], alone.flatten(0, 1)[n, :length], rtol=1e-4, atol=1e-5)
