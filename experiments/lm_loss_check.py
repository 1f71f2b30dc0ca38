"""The chunked LM loss (``lm_loss=chunked``, gpt1.model.lm_loss) against the whole logits (``lm_loss=whole``, the
loss before it) on the CPU, before and after in the same run, each measurement a process of its own, the variants
alternating round by round (a shared machine's speed drifts):

- ``story``: the story fine-tune on a quickstart checkpoint (vocabulary 8,192 + 3), 4 updates, fp32: its peak host
  memory (metrics.json's ``peak_host_memory_gb``) without the auxiliary LM loss (``aux_lm_weight=0``) and with it
  (0.5, the paper's) by each loss; the quickstart checkpoint is trained first (2 updates) unless ``--init`` names one.
- ``head``: the LM loss alone (forward and backward) at GPT-1's size, ``--batch`` x ``--seq`` positions, by each
  loss in turn in one process: where the two differ, timed without the rest of the step.
- ``step``: one training step of GPT-1's size (117M, vocabulary 40,478) at ``--batch`` x ``--seq`` (8 x 512):
  the process's peak resident set during the first step (reset just before it, as ``gpt1 bench``), and the median
  step time of ``--iters`` steps after it.
- ``turns``: the training step at each of ``--shapes`` (``SHAPES``: the quickstart's, small with GPT-1's vocabulary,
  GPT-1's) in ``--precision``, with the whole logits and the chunked loss (gpt1's ``CHUNK_BYTES``, and each of
  ``--chunk-bytes``) in turn in one process whose threads sleep while they wait (``OMP_WAIT_POLICY=PASSIVE``): each
  variant's least CPU time of the busiest thread over ``--rounds`` rounds, as gpt1's kernel probe times
  (``gpt1.cpu.probe``), a figure that other processes' load barely moves, for a loaded machine.

    python experiments/lm_loss_check.py story step head --rounds 2 --out /tmp/lm-loss   # about 20 minutes on 2 cores
    python experiments/lm_loss_check.py turns --precision bf16-mixed --rounds 6 --chunk-bytes 33554432 --out DIR

Prints a table per measure and writes them to ``--out``/lm_loss.json. Results: experiments/results/lm_loss.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import replace
from functools import partial
from pathlib import Path

LOSSES = ("whole", "chunked")
SHAPES = {
    "quickstart": ({"n_ctx": 128, "n_layer": 2, "n_head": 4, "n_embd": 256, "n_inner": 1024, "vocab_size": 8192,
                    "embd_pdrop": 0.0, "attn_pdrop": 0.0, "resid_pdrop": 0.0}, 32, 128),
    "small": ({"n_ctx": 128, "n_layer": 4, "n_head": 4, "n_embd": 256, "n_inner": 1024, "vocab_size": 40481}, 8, 128),
    "gpt1": ({"vocab_size": 40481}, 2, 512),
}  # fmt: skip
"""``turns``' shapes: GPTConfig's fields (GPT-1's elsewhere), batch, sequence length (as experiments/bench_rows.py)."""


def gpt1_command(*args: str) -> list[str]:
    return [shutil.which("gpt1") or str(Path(sys.executable).parent / "gpt1"), *args]


def story(out: Path, init: Path | None, rounds: int) -> list[dict]:
    """Peak host memory of the story fine-tune, 4 updates: aux_lm_weight=0, then 0.5 by each loss, per round."""
    if init is None:
        qs = out / "quickstart"
        if not (qs / "checkpoints" / "last.ckpt").exists():
            subprocess.run(
                gpt1_command("pretrain", "trainer.max_steps=2", "callbacks.samples.every_n_steps=0",
                             "trainer.enable_progress_bar=false", f"hydra.run.dir={qs}"),
                check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
        init = qs / "checkpoints" / "last.ckpt"
    variants = [("0", "chunked"), *(("0.5", how) for how in LOSSES)]
    results = []
    for r in range(rounds):
        for aux, how in variants if r % 2 == 0 else variants[::-1]:
            run = out / f"story-aux{aux}-{how}-{r}"
            start = time.perf_counter()
            subprocess.run(
                gpt1_command("finetune", "task=story", f"init_from={init}", f"aux_lm_weight={aux}", f"lm_loss={how}",
                             "trainer.max_steps=4", "logger=csv", "trainer.enable_progress_bar=false",
                             f"hydra.run.dir={run}"),
                check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            m = json.loads((run / "metrics.json").read_text())
            results.append({"aux_lm_weight": float(aux), "lm_loss": how, "round": r,
                            "peak_host_memory_gb": m["peak_host_memory_gb"], "wall_s": time.perf_counter() - start,
                            "train/loss": m.get("train/loss")})  # fmt: skip
            print(json.dumps(results[-1]), flush=True)
    return results


def one_step(how: str, batch: int, seq: int, iters: int, chunk: int | None) -> dict:
    """In this process: GPT-1 (117M, vocab 40,478) fp32, fused AdamW, one step with the peak resident set reset
    before it, then ``iters`` timed steps (chunk: the chunked loss's CHUNK_BYTES, else its default)."""
    import torch
    from torch.nn import functional as F

    import gpt1.model.lm_loss
    from gpt1.app.model_group import model_config
    from gpt1.cpu.layers import use_cpu_layers
    from gpt1.cpu.settings import configure
    from gpt1.model.decoder import GPT
    from gpt1.model.lm_loss import IGNORE_INDEX
    from gpt1.tools.bench_measure import peak_rss_gib, reset_peak_rss, train_step
    from gpt1.training.module import next_token_loss

    if chunk:
        gpt1.model.lm_loss.CHUNK_BYTES = chunk
    configure()  # as every gpt1 command: the allocator, huge pages, the measured kernel per kind of product
    torch.manual_seed(0)
    model = GPT(replace(model_config("gpt1"), vocab_size=40478)).train()
    use_cpu_layers(model)  # as a run on the CPU (GPT1Module.configure_model)
    ids = torch.randint(0, 40478, (batch, seq))
    targets = F.pad(ids[:, 1:], (0, 1), value=IGNORE_INDEX)
    step = train_step(model, lambda: next_token_loss(model, ids, targets, how)[0], nullcontext())
    before = peak_rss_gib()
    reset_peak_rss()
    start = time.perf_counter()
    step()  # the first: AdamW's moments are made here too
    first = time.perf_counter() - start
    peak = peak_rss_gib()
    times, cpu = [], []  # wall and CPU seconds (every thread's): on a shared machine the CPU time says more
    for _ in range(iters):
        start, start_cpu = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return {"lm_loss": how, "chunk_bytes": gpt1.model.lm_loss.CHUNK_BYTES, "batch": batch, "seq": seq,
            "peak_before_step_gib": before, "peak_first_step_gib": peak,
            "peak_all_steps_gib": peak_rss_gib(), "first_step_s": first, "step_s": statistics.median(times),
            "step_s_all": times, "step_cpu_s": statistics.median(cpu), "threads": torch.get_num_threads()}  # fmt: skip


def step(rounds: int, batch: int, seq: int, iters: int, chunks: list[int] | None) -> list[dict]:
    """``one_step`` of the whole logits and of the chunked loss (at each of ``chunks``' CHUNK_BYTES, else its
    default), each in a process of its own, alternating."""
    variants = [("whole", None), *(("chunked", c) for c in chunks or [None])]
    results = []
    for r in range(rounds):
        for how, chunk in variants if r % 2 == 0 else variants[::-1]:
            proc = subprocess.run(
                [sys.executable, __file__, "_step", f"--how={how}", f"--batch={batch}", f"--seq={seq}",
                 f"--iters={iters}", *([f"--chunk-bytes={chunk}"] if chunk else [])],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            results.append({**json.loads(proc.stdout.splitlines()[-1]), "round": r})
            print(json.dumps(results[-1]), flush=True)
    return results


def head(rows: int, iters: int, chunks: list[int] | None) -> list[dict]:
    """The LM loss alone at GPT-1's size: hidden states (rows, 768) and the tied table (40,478, 768), fp32, forward
    and backward by each loss in turn (whole, chunked at each of ``chunks``' CHUNK_BYTES or gpt1's, whole, ...),
    ``iters`` times after one untimed: wall and CPU seconds. The rest of the step is the same for both: this is where
    they differ."""
    import torch

    import gpt1.model.lm_loss
    from gpt1.cpu.layers import CpuTiedHead, linear
    from gpt1.cpu.settings import configure
    from gpt1.model.lm_loss import chunked_lm_loss

    configure()
    torch.manual_seed(0)
    hidden = torch.randn(rows, 768, requires_grad=True)
    table = (0.02 * torch.randn(40478, 768)).requires_grad_()
    targets = torch.randint(0, 40478, (rows,))

    def whole() -> torch.Tensor:
        return torch.nn.functional.cross_entropy(linear(hidden, table).float(), targets)

    def chunked(budget: int) -> torch.Tensor:
        gpt1.model.lm_loss.CHUNK_BYTES = budget
        weights = torch.full((rows,), 1.0 / rows)
        return chunked_lm_loss(hidden, table, 40478, targets, weights, None, CpuTiedHead.products)

    variants = [("whole", None, whole)]
    for budget in chunks or [gpt1.model.lm_loss.CHUNK_BYTES]:
        variants.append(("chunked", budget, partial(chunked, budget)))
    results = []
    for i in range(iters + 1):
        for how, budget, fn in variants:
            hidden.grad = table.grad = None
            start, start_cpu = time.perf_counter(), time.process_time()
            fn().backward()
            wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
            if i:
                results.append({"lm_loss": how, "chunk_bytes": budget, "rows": rows, "wall_s": wall,
                                "cpu_s": cpu})  # fmt: skip
                print(json.dumps(results[-1]), flush=True)
    return results


def turns(shape: str, precision: str, rounds: int, budgets: list[int] | None) -> list[dict]:
    """In this process: the training step at ``shape`` by the whole logits and the chunked loss (gpt1's budget and
    each of ``budgets``) in turn, the order reversed every other round, after an untimed round: each step's CPU time
    of the busiest thread (``gpt1.cpu.probe.busiest_thread``)."""
    import torch
    from torch.nn import functional as F

    import gpt1.model.lm_loss
    from gpt1.cpu.layers import use_cpu_layers
    from gpt1.cpu.probe import busiest_thread, cpu_seconds
    from gpt1.cpu.settings import configure
    from gpt1.model.decoder import GPT, GPTConfig
    from gpt1.model.lm_loss import IGNORE_INDEX
    from gpt1.tools.bench_measure import train_step
    from gpt1.training.module import next_token_loss

    configure()
    fields, B, T = SHAPES[shape]
    torch.manual_seed(0)
    model = GPT(GPTConfig(**fields)).train()
    use_cpu_layers(model)
    ids = torch.randint(0, model.config.vocab_size, (B, T))
    targets = F.pad(ids[:, 1:], (0, 1), value=IGNORE_INDEX)  # nothing to predict after the last
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16-mixed" else nullcontext()
    gpt1s = gpt1.model.lm_loss.CHUNK_BYTES

    def loss(how: str, budget: int | None) -> torch.Tensor:
        gpt1.model.lm_loss.CHUNK_BYTES = budget or gpt1s
        return next_token_loss(model, ids, targets, how)[0]

    variants = [("whole", None), ("chunked", gpt1s), *(("chunked", b) for b in budgets or [])]
    steps = [train_step(model, partial(loss, how, budget), autocast) for how, budget in variants]
    results = []
    for i in range(rounds + 1):
        for (how, budget), step in list(zip(variants, steps))[:: 1 if i % 2 else -1]:
            start = cpu_seconds()
            step()
            if i:
                results.append({"shape": shape, "precision": precision, "lm_loss": how, "chunk_bytes": budget,
                                "cpu_s": busiest_thread(start, cpu_seconds())})  # fmt: skip
    return results


def table(results: list[dict], keys: tuple[str, ...], figures: tuple[str, ...]) -> str:
    """Each variant's figures: the median over rounds and the range."""
    rows = [" | ".join((*keys, *figures)), " | ".join("---" for _ in (*keys, *figures))]
    for variant in dict.fromkeys(tuple(r[k] for k in keys) for r in results):
        mine = [r for r in results if tuple(r[k] for k in keys) == variant]
        cells = []
        for f in figures:
            values = [r[f] for r in mine]
            cells.append(f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})")
        rows.append(" | ".join((*map(str, variant), *cells)))
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("measures", nargs="+", choices=["story", "step", "head", "turns", "_step", "_turns"])
    p.add_argument("--how", choices=LOSSES, help="(_step: the loss of this process)")
    p.add_argument("--chunk-bytes", type=int, nargs="+", default=None,
                   help="step, head: the chunked loss at each of these CHUNK_BYTES (default: gpt1's)")  # fmt: skip
    p.add_argument("--out", type=Path, default=Path("outputs/lm_loss_check"))
    p.add_argument("--init", type=Path, default=None, help="the quickstart checkpoint (default: trained first)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--iters", type=int, default=2)
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES), help="turns: the shapes")
    p.add_argument("--precision", choices=["32-true", "bf16-mixed"], default="32-true", help="turns: the precision")
    args = p.parse_args()
    if args.measures == ["_step"]:
        chunk = args.chunk_bytes[0] if args.chunk_bytes else None
        print(json.dumps(one_step(args.how, args.batch, args.seq, args.iters, chunk)))
        return
    if args.measures == ["_turns"]:
        print(json.dumps(turns(args.shapes[0], args.precision, args.rounds, args.chunk_bytes)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    if "story" in args.measures:
        results["story"] = story(args.out, args.init, args.rounds)
        print(table(results["story"], ("aux_lm_weight", "lm_loss"), ("peak_host_memory_gb", "wall_s")))
    if "step" in args.measures:
        results["step"] = step(args.rounds, args.batch, args.seq, args.iters, args.chunk_bytes)
        figures = ("peak_first_step_gib", "peak_before_step_gib", "step_s", "step_cpu_s")
        print(table(results["step"], ("lm_loss", "chunk_bytes"), figures))
    if "head" in args.measures:
        results["head"] = head(args.batch * args.seq, args.iters, args.chunk_bytes)
        print(table(results["head"], ("lm_loss", "chunk_bytes"), ("wall_s", "cpu_s")))
    if "turns" in args.measures:
        results["turns"] = []
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}  # threads that wait sleep: CPU time is work
        for shape in args.shapes:
            flags = [f"--shapes={shape}", f"--precision={args.precision}", f"--rounds={args.rounds}"]
            flags += ["--chunk-bytes", *map(str, args.chunk_bytes)] if args.chunk_bytes else []
            proc = subprocess.run([sys.executable, __file__, "_turns", *flags], env=env, check=True,
                                  capture_output=True, text=True)  # fmt: skip
            results["turns"] += json.loads(proc.stdout.splitlines()[-1])
        print(table(results["turns"], ("shape", "precision", "lm_loss", "chunk_bytes"), ("cpu_s",)))
        least: dict[tuple, float] = {}
        for r in results["turns"]:
            key = (r["shape"], r["lm_loss"], r["chunk_bytes"])
            least[key] = min(least.get(key, r["cpu_s"]), r["cpu_s"])
        for (shape, how, budget), t in least.items():
            whole = least[(shape, "whole", None)]
            print(f"{shape} {how} {budget or ''}: least {t:.3f} s, {t / whole:.3f}x the whole logits")
    (args.out / "lm_loss.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
