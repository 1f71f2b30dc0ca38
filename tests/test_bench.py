"""`gpt1 bench`: its FLOP and MFU formulas, the figures it derives from its timings (stubbed here: no timing is
asserted), the JSON, the CPU matmul choices it shows, the defaults per preset, nanoGPT's step beside gpt1's (a
stand-in of nanoGPT's model.py written here), and one end-to-end run."""

import json
import statistics
from dataclasses import replace

import pytest
import torch

import gpt1.cpu.kernels
import gpt1.cpu.settings
import gpt1.tools.bench
import gpt1.tools.bench_measure
from gpt1.app.model_group import model_config
from gpt1.cpu.decoding import SteppedGPT
from gpt1.cpu.layers import on_cpu_layers
from gpt1.model.decoder import GPT, GPTConfig
from gpt1.tools.bench import main
from gpt1.tools.bench_measure import DENSE_PEAK_TFLOPS, device_peak
from gpt1.tools.bench_report import report

pytest.importorskip("transformers", reason="--compare hf builds HF's models")

TINY = [
    "--model",
    "tiny",
    "--batch",
    "2",
    "--seq",
    "16",
    "--new-tokens",
    "2",
    "--gen-batch",
    "2",
    "--warmup",
    "0",
    "--iters",
    "1",
]
"""A bench of the test model, one timing of each figure: seconds."""

REAL_MC_NOTE = gpt1.tools.bench.mc_note

RUNS = {
    "gpt1": [0.3, 0.1, 0.2],
    "hf": [0.5, 0.6, 0.4],
    "nanogpt": [0.6, 0.4, 0.5],
    "step_s": [1.0, 3.0, 2.0],
    "shared_context_step_s": [1.0],
    "": [0.021, 0.043, 0.035],
}
"""Stubbed wall times by name (interleaved_times' keys; "" is a generation's runs)."""


NANOGPT = """
from dataclasses import dataclass
import torch
from torch import nn
from torch.nn import functional as F

@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True

class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head, self.ln_1, self.ln_2 = c.n_head, nn.LayerNorm(c.n_embd), nn.LayerNorm(c.n_embd)
        self.attn = nn.ModuleDict(dict(c_attn=nn.Linear(c.n_embd, 3 * c.n_embd), c_proj=nn.Linear(c.n_embd, c.n_embd)))
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(c.n_embd, 4 * c.n_embd), c_proj=nn.Linear(4 * c.n_embd, c.n_embd)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, -1).transpose(1, 2) for t in self.attn.c_attn(self.ln_1(x)).split(C, 2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
        x = x + self.attn.c_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x))))

class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c.vocab_size, c.n_embd), wpe=nn.Embedding(c.block_size, c.n_embd),
            h=nn.ModuleList(Block(c) for _ in range(c.n_layer)), ln_f=nn.LayerNorm(c.n_embd)))
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        print("number of parameters: a few")

    def forward(self, idx, targets=None):
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(idx.size(1)))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)
        return logits, loss
"""
"""A stand-in for nanoGPT's model.py (our own few lines, not nanoGPT's code): its interface and parameter names."""


@pytest.fixture
def nanogpt(tmp_path):
    """The stand-in's path: a user's copy of nanoGPT's model.py."""
    path = tmp_path / "nanoGPT" / "model.py"
    path.parent.mkdir()
    path.write_text(NANOGPT)
    return path


@pytest.fixture
def stubbed(monkeypatch):
    """The bench with its timings and ceilings stubbed: each call of interleaved_times gets RUNS (a generation's
    second call, after HF's, gets its runs doubled), the GEMM peak 1e9 FLOP/s, memory 1e9 B/s, HF 40 ms/token."""
    monkeypatch.setenv("GPT1_CPU_MATMUL", "torch")
    calls = []

    def times(fns, warmup, iters, device):
        calls.append(list(fns))
        scale = 2 if fns.keys() == {""} and calls.count([""]) == 3 else 1  # gpt1's batch-1 runs after HF's
        return {name: [t * scale for t in RUNS[name]] for name in fns}

    monkeypatch.setattr(gpt1.tools.bench, "interleaved_times", times)
    monkeypatch.setattr(gpt1.tools.bench, "gemm_peak", lambda *args: 1e9)
    monkeypatch.setattr(gpt1.tools.bench, "memory_bandwidth", lambda device: 1e9)
    monkeypatch.setattr(gpt1.tools.bench, "gemv_bandwidth", lambda model: 1e9)
    times = {kind: dict(zip(kernels, (1e-3, 2e-3, 3e-3, 4e-3))) for kind, kernels in gpt1.cpu.kernels.KERNELS.items()}
    monkeypatch.setattr(gpt1.tools.bench, "measure_matmuls", lambda: times)
    monkeypatch.setattr(
        gpt1.tools.bench, "hf_generation", lambda hf, prompt, new_tokens, device: {"generate_batch1_ms_per_token": 40.0}
    )
    monkeypatch.setattr(gpt1.tools.bench, "mc_note", lambda: None)
    return calls


def test_flops_per_token_is_6n_plus_12_layers_width_seq_counted_by_hand(stubbed):
    """The tiny preset with OpenAI's vocab + 3 (40,481 x 32 table; 2 blocks of width 32, MLP 128), at T = 16."""
    block = 2 * 32 * 2 + (32 * 96 + 96) + (32 * 32 + 32) + (32 * 128 + 128) + (128 * 32 + 32)  # 2 LNs, attn, MLP
    n = 40481 * 32 + 2 * block  # the position table (32 x 32) left out
    out = main([*TINY, "--mc-batch", "0"])
    assert out["params"] == n + 32 * 32
    assert out["flops_per_token"] == 6 * n + 12 * 2 * 32 * 16


def test_the_blocks_and_dropout_of_the_preset_can_be_set_as_the_quickstarts(stubbed, monkeypatch):
    """--layers and --dropout (every rate) change the preset the bench builds: the quickstart is small with 2 blocks
    and no dropout."""
    built = []
    monkeypatch.setattr(gpt1.tools.bench, "GPT", lambda config: built.append(config) or GPT(config))
    out = main([*TINY, "--mc-batch", "0", "--layers", "1", "--dropout", "0"])
    assert (out["layers"], out["dropout"]) == (1, 0.0)
    c = built[0]
    assert (
        c.n_layer == 1 and c.embd_pdrop == c.attn_pdrop == c.resid_pdrop == 0.0 and c.n_embd == 32  # tiny's width
    )
    assert main([*TINY, "--mc-batch", "0"])["layers"] == 2  # by default the preset's (tiny: 2 blocks)


def test_every_figure_is_the_median_of_its_runs_and_the_ratios_follow(stubbed, openai_vocab, tmp_path, capsys):
    out = main([*TINY, "--mc-batch", "2", "--compare", "hf", "--json", str(tmp_path / "b.json")])
    assert json.loads((tmp_path / "b.json").read_text()) == json.loads(json.dumps(out))
    train = out["train"]
    assert (train["step_s"], train["step_s_range"]) == (0.2, [0.1, 0.3])
    assert train["tokens_per_s"] == 2 * 16 / 0.2
    assert train["mfu"] == pytest.approx(2 * 16 * out["flops_per_token"] / 0.2 / 1e9)  # B T flops / step / peak
    assert out["hf"]["speedup_train"] == pytest.approx(0.5 / 0.2) and out["hf"]["train_step_s_range"] == [0.4, 0.6]
    # batch-1 generation: one figure, the median of gpt1's runs before and after HF's (2 new tokens a run)
    b1 = statistics.median([0.021, 0.043, 0.035, 0.042, 0.086, 0.070]) * 1e3 / 2  # 21.25
    gen = out["generate"]
    assert gen["batch1_ms_per_token"] == pytest.approx(b1)
    assert gen["batch1_ms_per_token_range"] == pytest.approx([10.5, 43])
    assert gen["batch2_ms_per_token"] == pytest.approx(17.5)
    assert out["hf"]["speedup_generate"] == pytest.approx(40.0 / b1)
    weights = sum(p.numel() * 4 for p in GPT(replace(model_config("tiny"), vocab_size=40481)).parameters())
    assert out["decode_bound_ms"] == pytest.approx(1e3 * weights / 1e9) and gen["bound_fraction"] == pytest.approx(
        out["decode_bound_ms"] / b1
    )
    mc = out["multiple_choice"]
    assert mc["step_s"] == 2.0 and mc["step_s_range"] == [1.0, 3.0] and mc["shape"][:2] == [2, 4]
    assert out["hf"]["speedup_multiple_choice"] == pytest.approx(0.5 / 2.0)
    printed = capsys.readouterr().out
    assert "train step 2x16: 200 ms (100-300)" in printed and "MFU" in printed
    assert f"batch1 {b1:.1f} (10.5-43.0)" in printed and printed.count(f"{b1:.1f}") == 1  # one figure, printed once
    vs_hf = next(line for line in printed.splitlines() if line.startswith("vs HF: "))
    assert vs_hf.count("ms/token") == 1  # HF's; gpt1's is the generation line's
    assert "-> gpt1 2.50x" in printed and f"-> gpt1 {40 / b1:.1f}x" in printed


def test_nanogpts_step_is_timed_in_turn_with_gpt1s_and_its_ratio_reported(stubbed, nanogpt, capsys):
    out = main([*TINY, "--mc-batch", "0", "--compare", "nanogpt", "--nanogpt-model", str(nanogpt)])
    assert ["gpt1", "nanogpt"] in stubbed  # gpt1's steps and nanoGPT's in turn, in one interleaved_times
    ng = out["nanogpt"]
    assert (ng["train_step_s"], ng["train_step_s_range"]) == (0.5, [0.4, 0.6])
    assert ng["speedup_train"] == pytest.approx(0.5 / 0.2) and ng["train_tokens_per_s"] == 2 * 16 / 0.5
    assert "hf" not in out and ng["model"] == str(nanogpt)
    captured = capsys.readouterr()
    assert "number of parameters" not in captured.out and "number of parameters" in captured.err  # its print: stderr
    line = next(line for line in captured.out.splitlines() if line.startswith("vs nanoGPT"))
    assert line == (
        f"vs nanoGPT ({nanogpt}: pre-LN, exact GELU, a final LayerNorm: a peer of the same size, not the same model): "
        "train step 500 ms (400-600), 64 tokens/s -> gpt1 2.50x"
    )


def test_nanogpts_twin_holds_gpt1s_weights_and_trains_on_the_next_tokens(nanogpt):
    """Every weight of gpt1's model in its place in nanoGPT's (the tied head too; the final LayerNorm, which gpt1 has
    not, at ones and zeros), the dropout gpt1's, and the loss nanoGPT's users compute: each position against the next
    token, the last ignored."""
    from gpt1.tools.bench_nanogpt import load_nanogpt, nanogpt_loss, nanogpt_twin

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=512, n_ctx=32, n_layer=2, n_head=2, n_embd=32, n_inner=128))  # the tiny preset
    twin = nanogpt_twin(model, load_nanogpt(nanogpt), nanogpt).eval()
    theirs, ours = twin.state_dict(), model.state_dict()
    for name, tensor in ours.items():
        place = {"tokens_embed.weight": "transformer.wte.weight", "positions_embed.weight": "transformer.wpe.weight"}
        assert torch.equal(theirs[place.get(name, f"transformer.{name}")], tensor), name
    assert torch.equal(theirs["lm_head.weight"], ours["tokens_embed.weight"])
    assert (theirs["transformer.ln_f.weight"] == 1).all() and (theirs["transformer.ln_f.bias"] == 0).all()
    ids = torch.randint(0, 512, (2, 9))
    logits = twin(ids)[0]
    expected = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
    torch.testing.assert_close(nanogpt_loss(twin, ids)(), expected)


def test_the_matmul_choices_and_both_kernels_times_are_shown(stubbed, monkeypatch, capsys):
    monkeypatch.setattr(gpt1.tools.bench, "onednn_available", lambda: True)
    out = main([*TINY, "--mc-batch", "0", "--device", "cpu"])
    assert out["cpu_matmuls"] == dict.fromkeys(gpt1.cpu.kernels.KINDS, "torch")
    assert out["cpu_matmuls_source"] == "GPT1_CPU_MATMUL=torch"
    decode = {"onednn": 1e-3, "row_blocks": 2e-3, "column_blocks": 3e-3, "torch": 4e-3}
    assert out["cpu_matmul_times"]["decode"] == decode
    printed = capsys.readouterr().out
    assert (
        "CPU matmuls (GPT1_CPU_MATMUL=torch): train.forward torch, train.input_grad torch, train.weight_grad "
        "torch, head.forward torch, head.input_grad torch, head.weight_grad torch, decode torch, batched "
        "torch"
    ) in printed
    assert (
        "measured now, ms (the busiest thread's CPU time, least of its rounds): train.forward onednn 1.0, torch 2.0; "
        "train.input_grad onednn 1.0, torch 2.0; train.weight_grad onednn 1.0, torch 2.0; head.forward onednn 1.0, "
        "torch 2.0; head.input_grad onednn 1.0, torch 2.0; head.weight_grad onednn 1.0, torch 2.0; decode onednn 1.0, "
        "row_blocks 2.0, column_blocks 3.0, torch 4.0; batched onednn 1.0, torch 2.0"
    ) in printed


def test_one_sequence_decodes_from_weights_laid_out_as_generate_loads_them(stubbed, monkeypatch):
    """On CPU, batch-1 generation (and the ceilings beside it) runs on a copy of the weights stored by
    store_for_decoding, as ``gpt1 generate`` loads a checkpoint for one sequence; the batch, as generate loads it
    for several samples, on the model itself, as does the multiple-choice step; all on gpt1's CPU layers."""
    monkeypatch.setitem(gpt1.cpu.kernels.CPU_MATMULS, "decode", "column_blocks")
    monkeypatch.setattr(
        gpt1.tools.bench, "configure", lambda: gpt1.cpu.settings.CpuSettings(False, False, {}, "stubbed")
    )
    decoders, ceilings = [], []
    real_times = gpt1.tools.bench.interleaved_times
    monkeypatch.setattr(
        gpt1.tools.bench,
        "interleaved_times",
        lambda fns, *args: (
            decoders.extend((fn.func.__self__, fn.args[0].size(0)) for name, fn in fns.items() if name == ""),
            real_times(fns, *args),
        )[-1],
    )
    monkeypatch.setattr(gpt1.tools.bench, "gemv_bandwidth", lambda model: ceilings.append(model) or 1e9)
    main([*TINY, "--mc-batch", "0", "--device", "cpu"])
    (one, batch1), (batched, batch2) = decoders
    assert (batch1, batch2) == (1, 2) and one is not batched and ceilings == [one, one]
    assert one.h[0].mlp.c_fc.weight.stride() == (1, 128) and batched.h[0].mlp.c_fc.weight.is_contiguous()
    for a, b in zip(one.parameters(), batched.parameters()):
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()
    # both on gpt1's CPU layers, the one sequence token by token, as gpt1 generate runs them
    assert on_cpu_layers(one) and on_cpu_layers(batched) and type(one) is SteppedGPT


@pytest.mark.parametrize("model, seq, new_tokens", [("gpt1", 256, 256), ("small", 128, 112), ("tiny", 32, 16)])
def test_sequence_and_generation_lengths_follow_the_preset(monkeypatch, model, seq, new_tokens):
    """By default the training rows are 256 tokens or the preset's context, and generation fills what the context
    holds after the prompt (at most 256)."""
    monkeypatch.setattr(gpt1.tools.bench, "bench", lambda args: {"seq": args.seq, "new_tokens": args.new_tokens})
    monkeypatch.setattr(gpt1.tools.bench, "report", lambda out: "")
    assert main(["--model", model]) == {"seq": seq, "new_tokens": new_tokens}


def test_the_multiple_choice_step_is_skipped_with_a_note_without_the_original_pipeline(stubbed, monkeypatch, capsys):
    find_spec = gpt1.tools.bench.importlib.util.find_spec
    missing_spacy = lambda name, *a: None if name == "spacy" else find_spec(name, *a)  # noqa: E731
    monkeypatch.setattr(gpt1.tools.bench.importlib.util, "find_spec", missing_spacy)
    monkeypatch.setattr(gpt1.tools.bench, "mc_note", REAL_MC_NOTE)
    out = main([*TINY, "--mc-batch", "2", "--device", "cpu"])
    assert "multiple_choice" not in out and 'pip install "gpt1[openai]"' in out["multiple_choice_skipped"]
    captured = capsys.readouterr()
    assert "multiple-choice step skipped" in captured.err and "multiple-choice step skipped" in captured.out


def test_each_phase_says_on_stderr_when_it_starts(stubbed, openai_vocab, monkeypatch, capsys):
    monkeypatch.setattr(gpt1.tools.bench, "onednn_available", lambda: True)
    main([*TINY, "--mc-batch", "2", "--device", "cpu", "--compare", "hf"])
    err = capsys.readouterr().err.splitlines()
    assert [line.split(",")[0].split(" ...")[0] for line in err] == [
        "gpt1 bench: timing each kind of product on each of its kernels",
        "gpt1 bench: measuring the GEMM peak",
        "gpt1 bench: training steps 2x16",
        "gpt1 bench: greedy generation",
        "gpt1 bench: multiple-choice steps",
    ]


@pytest.mark.slow  # 23 s; each phase stubbed: the tests above
def test_bench_runs_every_measurement_end_to_end(capsys, caplog):
    """Unstubbed, once: every phase runs on the tiny model and HF's twins, and the report prints each part."""
    out = main([*TINY, "--mc-batch", "2", "--compare", "hf", "--device", "cpu"])
    assert {"train", "generate", "hf", "cpu_matmuls"} <= out.keys()
    assert "multiple_choice" in out or "multiple_choice_skipped" in out
    assert "loss_type" not in caplog.text  # HF's loss is named: no warning on every run
    printed = capsys.readouterr().out
    assert "MFU" in printed and "vs HF" in printed


def test_the_matrix_vector_ceiling_tries_every_decoding_kernel_whatever_was_chosen(monkeypatch):
    """The matrix-vector rate takes the fastest of torch's F.linear and gpt1's linear on each other kernel of decoding
    that this CPU has, also where gpt1.cpu.settings chose torch's (through gpt1.cpu.kernels.using, which restores the
    choice)."""
    monkeypatch.setattr(gpt1.cpu.kernels, "CPU_MATMULS", dict.fromkeys(gpt1.cpu.kernels.KINDS, "torch"))
    monkeypatch.setattr(gpt1.cpu.kernels, "onednn_available", lambda: False)
    seen = []
    monkeypatch.setattr(
        gpt1.tools.bench_measure,
        "median_seconds",
        lambda fn, **kw: (fn(), seen.append(gpt1.cpu.kernels.CPU_MATMULS["decode"]), 1.0)[-1],
    )
    kernels_run = []
    real_linear = gpt1.tools.bench_measure.linear
    monkeypatch.setattr(
        gpt1.tools.bench_measure,
        "linear",
        lambda *a: kernels_run.append(gpt1.cpu.kernels.CPU_MATMULS["decode"]) or real_linear(*a),
    )
    model = GPT(model_config("tiny"))
    gpt1.tools.bench_measure.gemv_bandwidth(model)
    assert seen == ["torch"] * 3  # F.linear, the row blocks, the column blocks (no oneDNN here); each restored
    assert set(kernels_run) == {"row_blocks", "column_blocks"}
    assert gpt1.cpu.kernels.CPU_MATMULS == dict.fromkeys(gpt1.cpu.kernels.KINDS, "torch")


def test_a_cpu_peak_is_measured_in_the_steps_precision(monkeypatch):
    """Under bf16 autocast the CPU's peak is its bf16 GEMM rate: an fp32 peak would put MFU above 100%."""
    dtypes = []
    monkeypatch.setattr(
        gpt1.tools.bench, "gemm_peak", lambda config, tokens, device, dtype: dtypes.append(dtype) or 1e9
    )
    out = main([*TINY, "--mc-batch", "0", "--device", "cpu", "--precision", "bf16-mixed"])
    assert out["peak_source"] == "measured bfloat16 GEMM on the model's shapes" and set(dtypes) == {torch.bfloat16}


@pytest.mark.parametrize("onednn", [False, True])
def test_the_cpu_peak_counts_each_weights_three_products_by_their_fastest_way(monkeypatch, onednn):
    """gemm_peak times every weight's forward, input-gradient and weight-gradient products (3 x 2 M k n FLOPs), each
    by the fastest of its ways: torch's matmul on two layouts (one for the input gradient), and oneDNN's in fp32."""
    monkeypatch.setattr(gpt1.tools.bench_measure, "onednn_available", lambda: onednn)
    ways = []

    def seconds(fn, warmup, iters, device):
        fn()
        ways.append(fn)
        return float(len(ways))  # each way slower than the one before: a product's first way is its fastest

    monkeypatch.setattr(gpt1.tools.bench_measure, "median_seconds", seconds)
    config = model_config("tiny")
    C, V, M = config.n_embd, config.vocab_size, 8
    peak = gpt1.tools.bench_measure.gemm_peak(config, M, torch.device("cpu"), torch.float32)
    flops = sum(3 * 2 * M * C * n for n in (3 * C, C, config.n_inner, config.n_inner, V))
    f, i, w = (3, 2, 3) if onednn else (2, 1, 2)  # the ways of the forward, the input and the weight gradient
    assert len(ways) == 5 * (f + i + w)
    firsts = sum(s * (f + i + w) * 3 + 3 + f + (f + i) for s in range(5))  # the first way's call number, per product
    assert peak == pytest.approx(flops / firsts)


@pytest.mark.parametrize(
    "name, row",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),  # torch's name for the SXM part
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_a_gpu_peak_comes_from_the_table_by_the_devices_name(monkeypatch, name, row):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    peak, source = device_peak(torch.device("cuda"), "bf16-mixed", None)
    if row is None:
        assert peak is None and "pass --peak-tflops" in source
    else:
        assert (peak, source) == (DENSE_PEAK_TFLOPS[row]["bf16"] * 1e12, f"{row} dense bf16 (data sheet)")
    assert device_peak(torch.device("cuda"), "bf16-mixed", 500.0) == (500e12, "--peak-tflops")


def test_the_report_says_when_the_peak_is_unknown(stubbed):
    out = main([*TINY, "--mc-batch", "0", "--device", "cpu"])
    printed = report({**out, "peak_flops": None, "train": {**out["train"], "mfu": None}})
    assert "peak unknown" in printed and "MFU unknown" in printed


def test_the_decode_bound_is_never_looser_than_what_the_products_streamed(stubbed, monkeypatch):
    monkeypatch.setattr(gpt1.tools.bench, "memory_bandwidth", lambda device: 1e6)  # a sum far slower than the products
    out = main([*TINY, "--mc-batch", "0", "--device", "cpu"])
    assert out["memory_bandwidth"] == out["gemv_bandwidth"] == 1e9
    assert out["decode_bound_ms"] == out["decode_gemv_bound_ms"]


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--seq", "33"], "--seq 33: the tiny preset reads at most 32 tokens"),
        (["--new-tokens", "17"], "--new-tokens 17: the tiny preset reads at most 32 tokens, 16 of them the prompt"),
        (["--batch", "0"], "--batch 0: choose 1 or more"),
        (["--device", "tpu"], "--device=tpu: choose cpu, cuda"),
        (["--json", "missing/bench.json"], "no directory missing to write it in"),
        (["--layers", "0"], "--layers 0: choose 1 or more"),
        (["--dropout", "1"], "--dropout 1.0: choose 0 <= p < 1"),
        (["--compare", "nanogpt"], "--compare nanogpt and --nanogpt-model PATH (your copy of nanoGPT's model.py)"),
        (["--nanogpt-model", "model.py"], "--compare nanogpt and --nanogpt-model PATH"),
        (["--compare", "nanogpt", "--nanogpt-model", "missing.py"], "--nanogpt-model missing.py: no such file"),
        (["--compare", "nanogpt", "--nanogpt-model", "broken.py"], "broken.py: importing it failed (NameError: "),
        (["--compare", "nanogpt", "--nanogpt-model", "empty.py"], "empty.py: defines no GPTConfig and GPT, as"),
    ],
)
def test_bad_flags_are_one_line_before_any_measuring(flags, says, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text("")
    (tmp_path / "broken.py").write_text("GPT = undefined_name\n")
    (tmp_path / "empty.py").write_text("x = 1\n")
    monkeypatch.setattr(gpt1.tools.bench, "bench", lambda args: pytest.fail("measured despite a bad flag"))
    with pytest.raises(SystemExit) as exit:
        main(["--model", "tiny", "--seq", "32", *flags])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and err.startswith("error: ") and says in err and len(err.splitlines()) == 1
