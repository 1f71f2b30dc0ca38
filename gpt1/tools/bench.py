"""``gpt1 bench``: how fast gpt1 runs on this device, against the device's own ceilings and against HF's model.

    gpt1 bench                                  # full GPT-1, fp32: LM training step, generation, MC fine-tuning step
    gpt1 bench --compare hf --json bench.json   # + HF OpenAIGPTLMHeadModel / DoubleHeadsModel, identical weights
    gpt1 bench --compare nanogpt --nanogpt-model nanoGPT/model.py   # + nanoGPT's training step (your copy of its file)
    gpt1 bench --model small --batch 8 --device cuda --precision bf16-mixed

Each figure is the median of ``--iters`` timed runs after ``--warmup`` untimed ones, with its range (``*_range`` in
the JSON); a peer's runs are taken in turn with gpt1's (``bench_measure.interleaved_times``). MFU is the training
FLOP/s (``GPT.flops_per_token``) over the peak. The CPU settings (``gpt1.cpu.settings.configure``: allocator, huge
pages, matmul kernels) hold for the whole process, the peers' timings included. Each phase says on stderr when it
starts.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf
from torch.nn import functional as F

from gpt1.app.devices import resolve_device
from gpt1.app.model_group import model_config, model_options
from gpt1.app.runner import FlagParser, user_errors
from gpt1.checkpoints.format import empty_model
from gpt1.core.errors import ConfigError
from gpt1.cpu.decoding import decode_in_steps, store_for_decoding
from gpt1.cpu.kernels import onednn_available
from gpt1.cpu.layers import use_cpu_layers
from gpt1.cpu.probe import measure_matmuls
from gpt1.cpu.settings import configure, cpu_flags, cpu_model
from gpt1.model.decoder import GPT, GPTConfig
from gpt1.model.lm_loss import IGNORE_INDEX, LMLoss
from gpt1.tasks.batches import real_tokens
from gpt1.tools.bench_hf import hf_generation, hf_multiple_choice_step, hf_twin
from gpt1.tools.bench_measure import (
    device_peak,
    gemm_peak,
    gemv_bandwidth,
    interleaved_times,
    memory_bandwidth,
    peak_rss_gib,
    reset_peak_rss,
    summary,
    train_step,
)
from gpt1.tools.bench_nanogpt import NOTE, load_nanogpt, nanogpt_loss, nanogpt_twin
from gpt1.tools.bench_report import report
from gpt1.training.module import next_token_loss

PROMPT = 16
"""Tokens of the random prompt that generation continues."""
OPENAI_VOCAB = Path(__file__).resolve().parents[3] / "shared" / "reference" / "openai-vocab"
"""OpenAI's vocab, which the multiple-choice step encodes with: ../shared/reference beside the checkout."""


def progress(message: str) -> None:
    """One line on stderr as a phase starts: the bench runs for minutes."""
    print(f"gpt1 bench: {message} ...", file=sys.stderr, flush=True)


def multiple_choice_batch(
    batch_size: int, n_ctx: int, device: torch.device
) -> tuple[dict[str, torch.Tensor], Any, Any]:
    """The first training batch of the sample multiple-choice task (4 choices, real lengths, padded to the batch's
    longest), encoded with OpenAI's vocab and the original text pipeline; its task spec and tokenizer."""
    import datasets
    from hydra import compose, initialize_config_module

    from gpt1.app.registration import register
    from gpt1.tasks.spec import TASK_SPECIAL_TOKENS
    from gpt1.tasks.task_data import TaskDataModule
    from gpt1.text.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(OPENAI_VOCAB)
    tokenizer.add_special_tokens(TASK_SPECIAL_TOKENS)
    register()
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        cfg = compose("finetune", ["task=multiple_choice", "init_from=none"])
    task = OmegaConf.to_object(cfg.task)
    datasets.disable_progress_bars()
    data = TaskDataModule(task, tokenizer, n_ctx=n_ctx, batch_size=batch_size, seed=0, cache_dir=None, roles=["train"])
    data.prepare_data()
    data.setup()
    batch = next(iter(data.train_dataloader()))
    return {k: v.to(device) for k, v in batch.items()}, data.task, tokenizer


def mc_note() -> str | None:
    """Why the multiple-choice step cannot run here (the original text pipeline or OpenAI's vocab missing), or None."""
    if any(importlib.util.find_spec(m) is None for m in ("ftfy", "spacy")):
        return 'multiple-choice step skipped: it encodes with the original text pipeline (pip install "gpt1[openai]")'
    if not OPENAI_VOCAB.is_dir():
        return f"multiple-choice step skipped: it encodes with OpenAI's vocab, not at {OPENAI_VOCAB}"
    return None


@dataclass
class Run:
    """What the bench's steps share; ``out``: the figures so far, the JSON in the order the steps add to them."""

    args: argparse.Namespace
    device: torch.device
    model: GPT
    compute_dtype: torch.dtype
    autocast: Any
    ids: torch.Tensor
    out: dict[str, Any]
    hf: torch.nn.Module | None = None

    @property
    def config(self) -> GPTConfig:
        return self.model.config


def bench(args: argparse.Namespace) -> dict[str, Any]:
    """Run every measurement ``args`` asks for; return them as a dict (``main`` prints them as a table)."""
    run = setup(args)
    measure_ceilings(run)
    train_times = time_training(run)
    time_generation(run)
    time_multiple_choice(run)
    if args.compare:
        compare_training(run, train_times, args.compare)
    return run.out


def setup(args: argparse.Namespace) -> Run:
    """The seeded model and its training batch; the run's description (on CPU, the matmul kernels chosen and, where
    oneDNN is here, every kernel's time on each kind of product, measured afresh)."""
    device = resolve_device(args.device, "--device")
    settings = configure()  # as every gpt1 command does (the same choices when it already has)
    torch.manual_seed(0)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    pad_vocab = args.pad_vocab or (64 if device.type == "cuda" else 1)
    preset = model_config(args.model)
    rates = {} if args.dropout is None else dict.fromkeys(("embd_pdrop", "attn_pdrop", "resid_pdrop"), args.dropout)
    layers = preset.n_layer if args.layers is None else args.layers
    config = replace(preset, vocab_size=args.vocab, pad_vocab_to_multiple=pad_vocab, n_layer=layers, **rates)
    model = GPT(config).to(device)
    if device.type == "cpu":
        use_cpu_layers(model)  # as every gpt1 command runs a model on the CPU
    decode_in_steps(model)  # as gpt1 generate decodes one sequence
    B, T = args.batch, args.seq
    compute_dtype = {"32-true": torch.float32, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}[args.precision]
    autocast = torch.autocast(device.type, dtype=compute_dtype) if compute_dtype != torch.float32 else nullcontext()
    ids = torch.randint(0, config.vocab_size, (B, T), device=device)
    out: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else
        f"cpu ({cpu_model()}, {torch.get_num_threads()} threads)",
        "torch": torch.__version__, "model": args.model, "layers": config.n_layer, "dropout": config.resid_pdrop,
        "params": model.num_params(), "batch": B, "seq": T,
        "precision": args.precision, "compile": args.compile, "lm_loss": args.lm_loss.value,
        "pad_vocab_to_multiple": pad_vocab,
        "flops_per_token": model.flops_per_token(T),
        "date": time.strftime("%Y-%m-%d"),
    }  # fmt: skip
    if device.type == "cpu":
        isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile", "asimd", "sve") if f in cpu_flags()]
        out.update(cpu_model=cpu_model(), cpu_isa=isa, cpu_matmuls=settings.matmuls,
                   cpu_matmuls_source=settings.source)  # fmt: skip
        if onednn_available():
            progress("timing each kind of product on each of its kernels")
            out["cpu_matmul_times"] = measure_matmuls()
    return Run(args, device, model, compute_dtype, autocast, ids, out)


def measure_ceilings(run: Run) -> None:
    """The device's FLOP/s peak: on CPU measured on the model's GEMMs (again after the training steps), on a GPU
    the data sheet's."""
    if run.device.type == "cpu":
        progress("measuring the GEMM peak")
        peak = gemm_peak(run.config, run.args.batch * run.args.seq, run.device, run.compute_dtype)
        peak_src = f"measured {str(run.compute_dtype).removeprefix('torch.')} GEMM on the model's shapes"
    else:
        peak, peak_src = device_peak(run.device, run.args.precision, run.args.peak_tflops)
    run.out.update(peak_flops=peak, peak_source=peak_src)


def time_training(run: Run) -> dict[str, list[float]]:
    """The LM training step (with --compare hf, gpt1's and HF's in turn, HF's twin made here): its time, tokens/s,
    MFU and the peak memory of gpt1's first step (on Linux CPUs the process's VmHWM: all it holds, as ``top`` shows
    it). Returns every step's times by library."""
    args, device, model, out = run.args, run.device, run.model, run.out
    B, T = args.batch, args.seq
    peer = {"hf": "HF's", "nanogpt": "nanoGPT's"}.get(args.compare)
    progress(f"training steps {B}x{T}" + (f", gpt1's and {peer} in turn" if peer else ""))
    model.train()
    # --compile: the model, its tied head and the loss as one graph (as compile=true trains); generation stays eager
    loss_fn = torch.compile(next_token_loss) if args.compile else next_token_loss
    ids = run.ids
    targets = F.pad(ids[:, 1:], (0, 1), value=IGNORE_INDEX)  # (B, T): shifted as the data shifts them
    steps = {"gpt1": train_step(model, lambda: loss_fn(model, ids, targets, args.lm_loss)[0], run.autocast)}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    rss_reset = device.type == "cpu" and reset_peak_rss()
    start = time.perf_counter()
    steps["gpt1"]()  # alone, before HF's model exists: the compile time and gpt1's own peak memory
    if args.compile:
        out["compile_s"] = time.perf_counter() - start
    if device.type == "cuda":
        peak_memory = torch.cuda.max_memory_allocated(device) / 2**30
    else:
        peak_memory = peak_rss_gib() if rss_reset else None
    run.hf = hf = hf_twin(model).train() if args.compare == "hf" else None
    if hf is not None:
        steps["hf"] = train_step(hf, lambda: hf(ids, labels=ids).loss, run.autocast)  # HF users' loss
    if args.compare == "nanogpt":
        twin = nanogpt_twin(model, args.nanogpt, args.nanogpt_model).train()
        steps["nanogpt"] = train_step(twin, nanogpt_loss(twin, ids), run.autocast)
    train_times = interleaved_times(steps, args.warmup, args.iters, device)
    step_s, step_range = summary(train_times["gpt1"])
    peak = out["peak_flops"]
    if device.type == "cpu":  # measured again after the steps; the higher rate counts (a CPU's speed drifts)
        peak = out["peak_flops"] = max(peak, gemm_peak(run.config, B * T, device, run.compute_dtype))
    mfu = B * T * out["flops_per_token"] / step_s / peak if peak else None
    out["train"] = {"step_s": step_s, "step_s_range": step_range, "tokens_per_s": B * T / step_s, "mfu": mfu}
    if peak_memory is not None:
        out["train"]["peak_memory_gib"] = peak_memory
    return train_times


def time_generation(run: Run) -> None:
    """Greedy generation in eval mode with the KV cache, at batch 1 and ``--gen-batch`` (with --compare hf, HF's
    generate between two sets of gpt1's batch-1 runs), and its ceilings: a token reads every weight once, at the
    memory's bandwidth or at the rate the matrix-vector products stream them (how much of the gap is the kernel's),
    each measured right before and right after."""
    args, device, model, out, hf = run.args, run.device, run.model, run.out, run.hf
    progress(
        f"greedy generation, {args.new_tokens} tokens at batch 1 and {args.gen_batch}"
        + (", then HF's generate between gpt1's" if hf is not None else "")
    )
    model.eval()
    decoder = model  # one sequence: on CPU, weights of their own laid out as `gpt1 generate` loads them for it
    if device.type == "cpu":
        decoder = empty_model(GPT, run.config)
        decoder.load_state_dict(model.state_dict(), assign=True)
        store_for_decoding(decoder.eval())
        use_cpu_layers(decoder)
        decode_in_steps(decoder)
    bandwidth, gemv = memory_bandwidth(device), gemv_bandwidth(decoder)  # right before decoding, and right after
    prompts = {gb: torch.randint(0, run.config.vocab_size, (gb, PROMPT), device=device) for gb in (1, args.gen_batch)}
    decode = {
        gb: partial((decoder if gb == 1 else model).generate, p, args.new_tokens, temperature=0)
        for gb, p in prompts.items()
    }  # greedy
    runs = max(1, args.iters // 2)
    times = {gb: interleaved_times({"": generate}, 1, runs, device)[""] for gb, generate in decode.items()}
    if hf is not None:  # HF's between two more of gpt1's batch-1 runs, all of which make gpt1's one figure
        hf.eval()
        out["hf"] = hf_generation(hf, PROMPT, args.new_tokens, device)
        times[1] += interleaved_times({"": decode[1]}, 1, runs, device)[""]
    out["generate"] = {}
    for gb, ts in times.items():
        out["generate"][f"batch{gb}_ms_per_token"], out["generate"][f"batch{gb}_ms_per_token_range"] = summary(
            ts, 1e3 / args.new_tokens
        )
    # the bandwidths measured again after decoding, the higher counting: on CPU they vary by half from minute to
    # minute (e.g. with whether the kernel backs the summed tensor with huge pages), and a ceiling must not be low
    bandwidth, gemv = max(bandwidth, memory_bandwidth(device)), max(gemv, gemv_bandwidth(decoder))
    bandwidth = max(bandwidth, gemv)  # where the products out-stream the sum, the memory reads at least that fast
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    out.update(memory_bandwidth=bandwidth, decode_bound_ms=1e3 * weight_bytes / bandwidth,
               gemv_bandwidth=gemv, decode_gemv_bound_ms=1e3 * weight_bytes / gemv)  # fmt: skip
    b1 = out["generate"]["batch1_ms_per_token"]
    out["generate"]["bound_fraction"] = out["decode_bound_ms"] / b1
    out["generate"]["gemv_bound_fraction"] = out["decode_gemv_bound_ms"] / b1
    if hf is not None:
        out["hf"]["speedup_generate"] = out["hf"]["generate_batch1_ms_per_token"] / b1


def time_multiple_choice(run: Run) -> None:
    """The multiple-choice fine-tuning step (task loss + 0.5 x LM loss) on the sample task's real lengths, as
    finetune trains by default and with the shared context (with --compare hf, HF DoubleHeads' in turn); skipped,
    with a note, without the original text pipeline or with ``--mc-batch 0``."""
    args, device, out, hf = run.args, run.device, run.out, run.hf
    note = mc_note() if args.mc_batch else None
    if note:
        out["multiple_choice_skipped"] = note
        print(f"gpt1 bench: {note}", file=sys.stderr, flush=True)
    if note or not args.mc_batch:
        return
    from gpt1.training.schema import OptimConfig
    from gpt1.training.task_module import TaskModule

    progress(
        f"multiple-choice steps, {args.mc_batch} examples of the sample task"
        + (", gpt1's and HF DoubleHeads' in turn" if hf is not None else "")
    )
    batch, task, tokenizer = multiple_choice_batch(args.mc_batch, run.config.n_ctx, device)
    mc_model = run.model  # the same weights, unless --vocab is not OpenAI's + 3
    if tokenizer.vocab_size != run.config.vocab_size:
        mc_model = GPT(replace(run.config, vocab_size=tokenizer.vocab_size)).to(device)
    mc = TaskModule(mc_model, tokenizer, OptimConfig(), task, lm_loss=args.lm_loss).to(device).train()
    if device.type == "cpu":
        use_cpu_layers(mc.model, mc.heads)  # as a run on the CPU does (GPT1Module.configure_model)
    mc_forward = torch.compile(mc) if args.compile else mc

    def mc_loss(share_context: bool) -> torch.Tensor:
        mc.share_context = share_context
        out = mc_forward(batch)
        lm = mc.sequence_lm_loss(out.hidden, out.index, batch["targets"])
        return mc.task_loss(out.logits, batch["labels"]) + 0.5 * lm

    real = real_tokens(batch)  # tokens that are not padding
    mc_steps = {
        "step_s": train_step(mc, lambda: mc_loss(False), run.autocast),  # finetune's default
        "shared_context_step_s": train_step(mc, lambda: mc_loss(True), run.autocast),
    }
    if hf is not None:
        mc_steps["hf"] = hf_multiple_choice_step(mc_model, batch, run.autocast)
    mc_times = interleaved_times(mc_steps, max(args.warmup, args.compile), args.iters, device)
    out["multiple_choice"] = {"shape": list(batch["input_ids"].shape), "real_tokens": real}
    for k in ("step_s", "shared_context_step_s"):
        out["multiple_choice"][k], out["multiple_choice"][f"{k}_range"] = summary(mc_times[k])
    if hf is not None:
        hf_s, hf_range = summary(mc_times["hf"])
        mc = out["multiple_choice"]
        out["hf"].update(multiple_choice_step_s=hf_s, multiple_choice_step_s_range=hf_range,
                         speedup_multiple_choice=hf_s / mc["step_s"],
                         speedup_multiple_choice_shared_context=hf_s / mc["shared_context_step_s"])  # fmt: skip


def compare_training(run: Run, train_times: dict[str, list[float]], peer: str) -> None:
    """The peer's training step (timed in turn with gpt1's by ``time_training``): its time, tokens/s, speedup."""
    B, T = run.args.batch, run.args.seq
    step, spread = summary(train_times[peer])
    out = run.out.setdefault(peer, {"model": str(run.args.nanogpt_model), "note": NOTE} if peer == "nanogpt" else {})
    out.update(train_step_s=step, train_step_s_range=spread, train_tokens_per_s=B * T / step,
               speedup_train=step / run.out["train"]["step_s"])  # fmt: skip


def check_args(args: argparse.Namespace) -> None:
    """Fill in the defaults that follow the preset (``--seq``, ``--new-tokens``) and refuse, before minutes of
    measuring, what the bench cannot run: ``ConfigError`` naming the flag."""
    n_ctx = model_config(args.model).n_ctx
    args.seq = min(256, n_ctx) if args.seq is None else args.seq
    args.new_tokens = min(256, n_ctx - PROMPT) if args.new_tokens is None else args.new_tokens
    if not 1 <= args.seq <= n_ctx:
        raise ConfigError(f"--seq {args.seq}: the {args.model} preset reads at most {n_ctx} tokens; choose 1..{n_ctx}")
    if not 1 <= args.new_tokens <= n_ctx - PROMPT:
        raise ConfigError(
            f"--new-tokens {args.new_tokens}: the {args.model} preset reads at most {n_ctx} tokens, "
            f"{PROMPT} of them the prompt; choose 1..{n_ctx - PROMPT}"
        )
    for flag, value, least in [
        ("--batch", args.batch, 1),
        ("--gen-batch", args.gen_batch, 1),
        ("--iters", args.iters, 1),
        ("--vocab", args.vocab, 2),
        ("--mc-batch", args.mc_batch, 0),
        ("--warmup", args.warmup, 0),
        ("--pad-vocab", args.pad_vocab or 1, 1),
        ("--layers", 1 if args.layers is None else args.layers, 1),
    ]:  # 0: default
        if value < least:
            raise ConfigError(f"{flag} {value}: choose {least} or more")
    if args.dropout is not None and not 0 <= args.dropout < 1:
        raise ConfigError(f"--dropout {args.dropout}: choose 0 <= p < 1")
    resolve_device(args.device, "--device")
    if args.json and not args.json.parent.is_dir():
        raise ConfigError(f"--json {args.json}: no directory {args.json.parent} to write it in; create it first")
    if args.compare == "hf" and importlib.util.find_spec("transformers") is None:
        raise ConfigError("--compare hf needs transformers: pip install transformers")
    if (args.compare == "nanogpt") != (args.nanogpt_model is not None):
        raise ConfigError("--compare nanogpt and --nanogpt-model PATH (your copy of nanoGPT's model.py) go together")
    if args.nanogpt_model and not args.nanogpt_model.is_file():
        raise ConfigError(f"--nanogpt-model {args.nanogpt_model}: no such file; pass your copy of nanoGPT's model.py")
    args.nanogpt = load_nanogpt(args.nanogpt_model) if args.nanogpt_model else None  # its errors before any timing


@user_errors
def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    out = bench(args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(report(out))
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``gpt1 bench``'s flags, checked (``check_args``)."""
    p = FlagParser(prog="gpt1 bench", description=__doc__.split("\n")[0])
    p.add_argument(
        "--model", default="gpt1", choices=model_options("gpt"), help="conf/model/'s GPT-1 (default: the paper's 117M)"
    )
    p.add_argument("--vocab", type=int, default=40478 + 3, help="vocabulary (default: OpenAI's + 3 special tokens)")
    p.add_argument("--layers", type=int, default=None, help="blocks (default: the preset's; the quickstart: small, 2)")
    p.add_argument("--dropout", type=float, default=None, help="every dropout rate (default: the preset's)")
    p.add_argument("--batch", type=int, default=2, help="training batch (sequences)")
    p.add_argument(
        "--seq", type=int, default=None, help="training sequence length (default: 256, or the preset's context)"
    )
    p.add_argument("--gen-batch", type=int, default=8, help="the batched generation's batch")
    p.add_argument(
        "--new-tokens",
        type=int,
        default=None,
        help=f"tokens generated per timing after a {PROMPT}-token prompt (default: 256, or what fits)",
    )
    p.add_argument(
        "--mc-batch",
        type=int,
        default=8,
        help='examples of the multiple-choice step (0: skip it; skipped without "gpt1[openai]")',
    )
    p.add_argument("--device", default="auto", help="cpu, cuda or auto")
    p.add_argument(
        "--pad-vocab",
        type=int,
        default=None,
        help="model.pad_vocab_to_multiple (default: 64 on GPUs, where an odd vocab slows the head; 1 on CPU)",
    )
    p.add_argument("--precision", default="32-true", choices=["32-true", "bf16-mixed", "16-mixed"])
    p.add_argument("--peak-tflops", type=float, default=None, help="override the GPU's dense peak")
    p.add_argument(
        "--warmup", type=int, default=3, help="untimed runs first (a CPU process's first steps fault in memory)"
    )
    p.add_argument("--iters", type=int, default=5, help="timed runs; the median is reported")
    p.add_argument(
        "--compare",
        choices=["hf", "nanogpt"],
        default=None,
        help="also time HF's model with identical weights, or nanoGPT's training step (--nanogpt-model)",
    )
    p.add_argument(
        "--nanogpt-model",
        type=Path,
        default=None,
        help="nanoGPT's model.py, your copy (github.com/karpathy/nanoGPT): gpt1 imports and runs this file, as you "
        "ask, and times its GPT at the same shapes, with gpt1's weights where they have a place",
    )
    p.add_argument("--compile", action="store_true", help="torch.compile gpt1's model for the training steps")
    p.add_argument(
        "--lm-loss",
        type=LMLoss,
        default=LMLoss.chunked,
        choices=[k.value for k in LMLoss],
        help="gpt1's LM loss: chunked (gpt1's default: logits in chunks of at most 256 MiB) or whole (all at once)",
    )
    p.add_argument("--json", type=Path, default=None, help="write the results here as JSON")
    args = p.parse_args(argv)
    check_args(args)
    return args


if __name__ == "__main__":
    main()
