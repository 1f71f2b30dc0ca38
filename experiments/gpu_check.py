"""Every GPU figure that issue 47 left open, in one process and one call of under 10 minutes on an H100:

    bash experiments/gpu_check.sh prepare                    # here, with pip's registry: .gpu/ (wheels, sample data)
    bash experiments/gpu_check.sh all                        # on the GPU machine, .gpu/ carried: setup, then this
    python experiments/gpu_check.py all --dry --out DIR      # the same steps on the tiny model on the CPU (a test)

Steps (``all`` runs them in this order; or name some), each guarded (a failure is one line in the results, and
the next step runs), each in this process (the device's peak memory reset before each), skipped once ``--budget``
seconds have passed:

- ``bench``: ``gpt1 bench``'s training step (``gpt1.tools.bench``: the seeded model, its batch, the fused AdamW
  step, the data sheet's peak) of GPT-1 at 64 x 512, bf16-mixed, compiled and eager, each with ``--lm-loss chunked``
  and ``whole``: step ms, tokens/s, MFU, peak GPU memory. Generation and the multiple-choice step are left out.
- ``loop``: the same model and batch in ``gpt1 pretrain``'s own loop (``experiment=paper data=books``, 64 x 512, 30
  updates, eager and ``compile=true``): the step is the median gap of Lightning's synchronised ``train/time`` after
  10 updates; tokens/s and MFU as the bench counts them (the batch's tokens x ``GPT.flops_per_token`` / the same
  data-sheet peak), beside Lightning's own ``train/device/mfu``.
- ``strategies``: 40 updates under ``trainer=ddp``, ``fsdp`` and ``deepspeed`` (one GPU each) at the setting of
  experiments/results/scale.md's table, which is the quickstart experiment's recipe at GPT-1's width and context (``gpt1
  pretrain model=gpt1 ...`` keeps ``experiment=quickstart``'s 2 blocks, no dropout, lr 2.5e-3 and 30 warm-up
  updates: its 24.8 ms step is that model's, not GPT-1's), 32 x 512, bf16; then ``ddp`` and ``deepspeed`` again
  at ``trainer.precision=32-true``: the switch for why DeepSpeed's loss differs (``DEEPSPEED_HYPOTHESIS``); and
  the DeepSpeed run's checkpoint, one file (``gpt1.training.strategies.deepspeed``): loaded, generated from, resumed.
- ``fsdp_compile``: ``trainer=fsdp compile=true`` at the same setting.
- ``decode``: batch-1 greedy decoding of GPT-1 (fp32, 256 tokens after 16), ms/token; decoding with CUDA graphs is
  not built in gpt1, and the results say so.

Results: ``--out``/gpu_check.json (every step's figures, or its error) and gpu_check.md (tables), printed at the end.
``--dry``: the tiny model, a few updates, 32-true on the CPU; compiled steps traced by dynamo but not code-generated
(``backend="eager"``), the bench's CPU ceilings not measured; DeepSpeed, which Lightning runs on CUDA GPUs only,
reported as skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gc
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import torch

STEPS = ("bench", "loop", "strategies", "fsdp_compile", "decode")

DEEPSPEED_HYPOTHESIS = (
    "Under trainer.precision=bf16-mixed Lightning runs DDP and FSDP with torch.autocast over fp32 weights (LayerNorm, "
    "the residual stream, the gradients and their clipping in fp32), but DeepSpeed with its own bf16 mode: the "
    "engine casts the model's weights to bf16 (fp32 master copies in its optimizer) and runs forward and backward "
    "in bf16, LayerNorms and residual adds included, and reduces and clips bf16 gradients. The lr schedule, clipping "
    "threshold (1.0), weight decay groups and micro-batch order are the same (Lightning steps the scheduler and "
    "hands DeepSpeed the gradient_clip_val; one micro-batch an update on one GPU). Test: at trainer.precision="
    "32-true both run in fp32; if DeepSpeed's loss then meets DDP's, the difference is its bf16 mode."
)

GPU = {
    "bench": ["--model", "gpt1", "--batch", "64", "--seq", "512", "--precision", "bf16-mixed", "--mc-batch", "0",
              "--warmup", "3", "--iters", "10"],
    "loop": ["experiment=paper", "data=books", "data.batch_size=64", "trainer.max_steps=30",
             "data.max_valid_windows=64"],
    "strategies": ["model=gpt1", "data=books", "tokenizer.vocab_size=40478", "model.pad_vocab_to_multiple=64",
                   "data.batch_size=32", "data.max_valid_windows=32", "trainer.max_steps=40"],
    "trainer": ["trainer.devices=1"],
    "decode": {"vocab": 40481, "tokens": 256},
}  # fmt: skip
"""The GPU run's settings, per step."""

DRY = {
    "bench": ["--model", "tiny", "--vocab", "512", "--batch", "4", "--seq", "32", "--mc-batch", "0", "--device",
              "cpu", "--warmup", "1", "--iters", "2"],
    "loop": ["model=tiny", "tokenizer.vocab_size=512", "data.train_files=[${paths.sample_data}/books/train/emma.txt]",
             "data.batch_size=4", "trainer=cpu", "trainer.precision=32-true", "trainer.max_steps=2",
             "data.max_valid_windows=4"],
    "strategies": ["model=tiny", "tokenizer.vocab_size=512",
                   "data.train_files=[${paths.sample_data}/books/train/emma.txt]", "data.batch_size=4",
                   "data.max_valid_windows=4", "trainer.max_steps=2"],
    "trainer": ["trainer.devices=1", "trainer.accelerator=cpu", "trainer.precision=32-true"],
    "decode": {"vocab": 512, "tokens": 8},
}  # fmt: skip
"""The dry run's: the same steps on the tiny model, a few updates, on the CPU."""

COMMON = [
    "trainer.val_check_interval=1000",
    "trainer.num_sanity_val_steps=0",
    "trainer.log_every_n_steps=1",
    "trainer.enable_progress_bar=false",
    "callbacks.samples.every_n_steps=0",
    "logger=csv",
]
"""Every pre-training run's: no validation nor samples during the updates, every update's time logged."""

WARMUP = 10
"""Updates of a run left out of its step time (compilation, the allocator's first growth)."""

NO_GRAPHS = "not built: gpt1 decodes without CUDA graphs (no option captures a decoding step)"


class Check:
    """The run: its mode's settings, where it writes, its results so far (written after every step), its budget."""

    def __init__(self, out: Path, dry: bool, budget: float, cache: Path | None) -> None:
        self.out, self.dry, self.budget = out, dry, budget
        self.settings = DRY if dry else GPU
        self.cache = cache or out / "cache"
        self.results: dict[str, Any] = {"dry": dry, "device": device_name(dry), "torch": torch.__version__}
        self.start = time.perf_counter()

    def save(self) -> None:
        """The results so far, as JSON and as tables: a run stopped by its time limit keeps what it measured."""
        (self.out / "gpu_check.json").write_text(json.dumps(self.results, indent=2, default=str) + "\n")
        (self.out / "gpu_check.md").write_text(summary(self.results))

    def run(self, name: str, fn: Callable[[], Any]) -> None:
        """Run one part of a step (``name``), its figures or its error recorded under its name."""
        elapsed = time.perf_counter() - self.start
        if elapsed > self.budget:
            self.results[name] = {"skipped": f"the budget of {self.budget:.0f} s was spent ({elapsed:.0f} s)"}
        else:
            print(f"gpu_check: {name} ...", file=sys.stderr, flush=True)
            t = time.perf_counter()
            try:
                self.results[name] = {**fn(), "wall_s": time.perf_counter() - t}
            except Exception as e:  # one part's failure is a result; the next part runs
                self.results[name] = {"error": f"{type(e).__name__}: {e}".splitlines()[0]}
                traceback.print_exc()
            free_device()
        print(f"gpu_check: {name}: {json.dumps(self.results[name], default=str)[:400]}", file=sys.stderr, flush=True)
        self.save()

    def pretrain(self, name: str, overrides: list[str]) -> dict[str, Any]:
        """One ``gpt1 pretrain`` run in this process (``gpt1.api``), under out/<name>: its metrics.json's figures
        and its step time from the CSV log."""
        from gpt1 import api

        run = self.out / name
        cfg = api.compose("pretrain", [*overrides, *COMMON, f"paths.output_dir={run}", f"paths.cache_dir={self.cache}"])
        metrics = api.pretrain(cfg)
        return {**{k: metrics.get(k) for k in FIGURES if k in metrics}, **step_time(run, cfg)}


FIGURES = ("train/loss", "val/loss", "steps", "peak_device_memory_gb", "peak_device_reserved_gb",
           "peak_host_memory_gb")  # fmt: skip
"""The figures of a run's metrics.json kept in the results."""


def device_name(dry: bool) -> str:
    if dry or not torch.cuda.is_available():
        return "cpu"
    return torch.cuda.get_device_name()


def free_device() -> None:
    """Drop what a step left (its models, compiled graphs' buffers) and reset the device's peak memory."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def step_time(run: Path, cfg: Any) -> dict[str, Any]:
    """The median gap of ``train/time`` (Lightning's ThroughputMonitor, the device synchronised) after ``WARMUP``
    updates; tokens/s and MFU as the bench counts them: the batch's tokens, the model's FLOPs per token (the module's
    own count, which Lightning's monitor reads: its flops_per_sec / items_per_sec, items being tokens) and the data
    sheet's peak (``gpt1.tools.bench.device_peak``); and Lightning's own last ``train/device/mfu``."""
    from gpt1.tools.bench_measure import device_peak

    rows = list(csv.DictReader(open(run / "csv" / "metrics.csv")))
    times = [float(r["train/time"]) for r in rows if r.get("train/time")]
    gaps = [b - a for a, b in zip(times, times[1:])]
    gaps = gaps[WARMUP:] or gaps  # (a dry run's few updates: all of them)
    if not gaps:
        return {}
    step = statistics.median(gaps)
    tokens = cfg.data.batch_size * cfg.model.n_ctx
    out = {"step_s": step, "step_s_range": [min(gaps), max(gaps)], "tokens_per_s": tokens / step,
           "n_layer": cfg.model.n_layer}  # fmt: skip
    rates = [r for r in rows if r.get("train/device/flops_per_sec") and r.get("train/device/items_per_sec")]
    if rates:
        flops, items = (float(rates[-1][f"train/device/{k}_per_sec"]) for k in ("flops", "items"))
        out["flops_per_token"] = flops / items
        if cfg.trainer.accelerator != "cpu":
            peak, _ = device_peak(torch.device("cuda"), "bf16-mixed", None)
            out["mfu"] = out["tokens_per_s"] * out["flops_per_token"] / peak if peak else None
    lightning_mfu = [float(r["train/device/mfu"]) for r in rows if r.get("train/device/mfu")]
    if lightning_mfu:
        out["lightning_mfu"] = lightning_mfu[-1]
    return out


@contextlib.contextmanager
def dry_run(dry: bool) -> Iterator[None]:
    """In a dry run: ``torch.compile`` traces with dynamo but generates no code (``backend="eager"``: the compiled
    steps' graphs captured in seconds on a CPU), and the bench's CPU ceilings (its kernel timings, its GEMM peak),
    which a GPU run does not measure, are not measured either (a stand-in peak of 1 TFLOP/s); one thread (the tiny
    model gains nothing from more, and a busy machine's threads wait on each other). Restored on the way out."""
    if not dry:
        yield
        return
    from gpt1.tools import bench as bench_module

    saved = torch.compile, bench_module.measure_matmuls, bench_module.gemm_peak, torch.get_num_threads()
    torch.compile = partial(saved[0], backend="eager")
    bench_module.measure_matmuls = lambda: {}
    bench_module.gemm_peak = lambda *args: 1e12
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.compile, bench_module.measure_matmuls, bench_module.gemm_peak = saved[:3]
        torch.set_num_threads(saved[3])


def bench(check: Check) -> None:
    """gpt1 bench's training step, compiled and eager, each with the chunked and the whole LM loss."""
    from gpt1.tools.bench import measure_ceilings, parse_args, setup, time_training

    def one(flags: list[str]) -> dict[str, Any]:
        run = setup(parse_args([*check.settings["bench"], *flags]))
        measure_ceilings(run)
        time_training(run)  # (its peak memory: the first step's, as gpt1 bench reports it)
        return {"flags": flags, **run.out["train"], "flops_per_token": run.out["flops_per_token"],
                "compile_s": run.out.get("compile_s")}  # fmt: skip

    for compiled in (True, False):
        for how in ("chunked", "whole"):
            flags = [*(["--compile"] if compiled else []), "--lm-loss", how]
            check.run(f"bench/{'compiled' if compiled else 'eager'}/{how}", partial(one, flags))


def loop(check: Check) -> None:
    """The bench's model and batch in gpt1 pretrain's loop, eager and compiled."""
    for compiled in (False, True):
        name = f"loop/{'compiled' if compiled else 'eager'}"
        extra = ["compile=true"] if compiled else []
        check.run(name, lambda extra=extra, name=name: check.pretrain(name, [*check.settings["loop"], *extra]))


def strategies(check: Check) -> None:
    """40 updates under DDP, FSDP2 and DeepSpeed; then DDP and DeepSpeed in fp32 (the hypothesis's switch)."""
    base = [*check.settings["strategies"], *check.settings["trainer"]]
    runs = [(s, []) for s in ("ddp", "fsdp", "deepspeed")]
    runs += [(s, ["trainer.precision=32-true"]) for s in ("ddp", "deepspeed")]
    for strategy, extra in runs:
        name = f"strategies/{strategy}" + ("/32-true" if extra else "")
        check.run(name, lambda s=strategy, extra=extra, name=name: strategy_run(check, name, s, [*base, *extra]))
    check.results["deepspeed_hypothesis"] = DEEPSPEED_HYPOTHESIS
    check.run("strategies/deepspeed/checkpoint", partial(deepspeed_checkpoint, check, base))


def deepspeed_checkpoint(check: Check, overrides: list[str]) -> dict[str, Any]:
    """The DeepSpeed run's last.ckpt: one file (``gpt1.training.strategies.deepspeed``) that gpt1's loader reads and
    that generates, its shards beside it; then the run resumed from it (resume=auto) for 4 more updates."""
    if check.dry:
        return {"skipped": "Lightning runs DeepSpeed on CUDA GPUs only"}
    from gpt1 import api
    from gpt1.training.strategies.deepspeed import shards_of

    name = "strategies-deepspeed"
    last = check.out / name / "checkpoints" / "last.ckpt"
    loaded = api.load_checkpoint(last)
    cfg = api.compose("generate", [f"ckpt={last}", "prompt=she said", "max_new_tokens=8", "temperature=0",
                                   f"paths.output_dir={check.out / 'generate'}"])  # fmt: skip
    text = api.generate(cfg)[0]
    steps = int(next(o for o in overrides if o.startswith("trainer.max_steps=")).split("=")[1])
    resumed = check.pretrain(name, ["trainer=deepspeed", *overrides, f"trainer.max_steps={steps + 4}", "resume=auto"])
    return {"file": last.is_file(), "shards_beside": shards_of(last).is_dir(), "n_layer": loaded.model.config.n_layer,
            "sample": text, "resumed": resumed}  # fmt: skip


def strategy_run(check: Check, name: str, strategy: str, overrides: list[str]) -> dict[str, Any]:
    if strategy == "deepspeed" and check.dry:
        return {"skipped": "Lightning runs DeepSpeed on CUDA GPUs only"}
    if name.endswith("32-true") and check.dry:
        return {"skipped": "a dry run trains in 32-true already: the run above"}
    return check.pretrain(name.replace("/", "-"), [f"trainer={strategy}", *overrides])


def fsdp_compile(check: Check) -> None:
    overrides = [*check.settings["strategies"], *check.settings["trainer"], "trainer=fsdp", "compile=true"]
    check.run("fsdp_compile", lambda: check.pretrain("fsdp-compile", overrides))


def decode(check: Check) -> None:
    """Batch-1 greedy decoding of GPT-1, fp32, as gpt1 bench times it; CUDA graphs: not built."""
    from dataclasses import replace

    from gpt1.app.model_group import model_config
    from gpt1.model.decoder import GPT

    def one() -> dict[str, Any]:
        settings = check.settings["decode"]
        device = "cpu" if check.dry else "cuda"
        preset = "tiny" if check.dry else "gpt1"
        torch.manual_seed(0)
        model = GPT(replace(model_config(preset), vocab_size=settings["vocab"], pad_vocab_to_multiple=64))
        model = model.to(device).eval()
        prompt = torch.randint(0, settings["vocab"], (1, 16), device=device)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        model.generate(prompt, 8, temperature=0)  # warm-up
        ms = []
        for _ in range(3):
            sync()
            t = time.perf_counter()
            model.generate(prompt, settings["tokens"], temperature=0)
            sync()
            ms.append((time.perf_counter() - t) / settings["tokens"] * 1e3)
        return {"eager_ms_per_token": statistics.median(ms), "eager_ms_per_token_all": ms, "cuda_graphs": NO_GRAPHS}

    check.run("decode", one)


def summary(results: dict[str, Any]) -> str:
    """The results as markdown tables."""

    def fmt(value: Any, scale: float = 1.0, digits: int = 1) -> str:
        return "-" if value is None else f"{value * scale:,.{digits}f}"

    lines = [f"# gpu_check: {results['device']}, torch {results['torch']}" + (" (dry run)" if results["dry"] else "")]
    lines += [
        "",
        "| run | step ms | tokens/s | MFU % | Lightning MFU % | peak GPU GB | loss | note |",
        "|---" * 8 + "|",
    ]
    for name, r in results.items():
        if not isinstance(r, dict) or name in ("dry",):
            continue
        note = r.get("error") or r.get("skipped") or r.get("cuda_graphs") or ""
        peak = r.get("peak_memory_gib", r.get("peak_device_memory_gb"))
        loss = r.get("val/loss", r.get("train/loss"))
        lines.append(
            f"| {name} | {fmt(r.get('step_s'), 1e3)} | {fmt(r.get('tokens_per_s'), digits=0)} | "
            f"{fmt(r.get('mfu'), 100)} | {fmt(r.get('lightning_mfu'), 100)} | {fmt(peak, digits=2)} | "
            f"{fmt(loss, digits=3)} | {note or ''}"
            + (f" {r['eager_ms_per_token']:.2f} ms/token eager" if "eager_ms_per_token" in r else "")
            + " |"
        )
    if "deepspeed_hypothesis" in results:
        lines += ["", "DeepSpeed's loss, the hypothesis: " + results["deepspeed_hypothesis"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("steps", nargs="+", choices=["all", *STEPS])
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "outputs/gpu_check")))
    p.add_argument("--dry", action="store_true", help="the tiny model on the CPU, compiled steps traced only")
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds after which the parts left are skipped (GPU: 450; dry: none)",
    )
    p.add_argument("--cache-dir", type=Path, default=None, help="paths.cache_dir of the runs (default: OUT/cache)")
    args = p.parse_args(argv)
    if not args.dry and not torch.cuda.is_available():
        p.error("no CUDA GPU here: run it on one, or with --dry")
    args.out.mkdir(parents=True, exist_ok=True)
    budget = args.budget if args.budget is not None else (float("inf") if args.dry else 450.0)
    check = Check(args.out, args.dry, budget, args.cache_dir)
    steps = STEPS if "all" in args.steps else [s for s in STEPS if s in args.steps]
    with dry_run(args.dry):
        for step in steps:
            globals()[step](check)
    check.save()
    print(summary(check.results))
    return check.results


if __name__ == "__main__":
    main()
