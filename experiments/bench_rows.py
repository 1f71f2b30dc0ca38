"""The bench rows of issue 54: gpt1's training step against nanoGPT's and against its own whole logits, at the
quickstart's shape, the small preset with GPT-1's vocabulary and GPT-1's, in fp32 and bf16 (where the CPU multiplies
it natively), on the CPU.

For each shape and precision, ``--rounds`` rounds of two ``gpt1 bench --compare nanogpt`` processes in turn, one with
``--lm-loss chunked`` (gpt1's default) and one with ``--lm-loss whole`` (the order reversed every other round): each
times gpt1's step and nanoGPT's in turn (``--iters`` each after ``--warmup``), so each process gives gpt1's speed-up
over nanoGPT under that process's conditions, and chunked against whole is the ratio of the two speed-ups (nanoGPT's
step the yardstick between processes on a machine whose speed drifts). Shapes (``SHAPES``):

- quickstart: the small preset with 2 blocks, no dropout, an 8,192-token vocabulary, 32 x 128 (``gpt1 pretrain``);
- small: the small preset (4 blocks, dropout 0.1) with GPT-1's vocabulary (40,478 + 3), 8 x 128;
- gpt1: GPT-1 (12 blocks of 768, dropout 0.1, 40,478 + 3), 2 x 512.

    python experiments/bench_rows.py --nanogpt-model ../nanoGPT/model.py --out DIR  # 20-25 min on 2 quiet cores (guess)

``--nanogpt-model``: your copy of nanoGPT's model.py (github.com/karpathy/nanoGPT), which ``gpt1 bench`` imports and
runs. Prints a table and writes DIR/bench_rows.json (each process's JSON in DIR too). Results:
experiments/results/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

SHAPES = {
    "quickstart": ["--model", "small", "--layers", "2", "--dropout", "0", "--vocab", "8192", "--batch", "32"],
    "small": ["--model", "small", "--batch", "8"],
    "gpt1": ["--model", "gpt1", "--batch", "2", "--seq", "512"],
}
"""Each shape's flags of ``gpt1 bench`` (the sequence length the preset's context where not given)."""
PRECISIONS = ("32-true", "bf16-mixed")


def gpt1_bench(*flags: str) -> list[str]:
    return [shutil.which("gpt1") or str(Path(sys.executable).parent / "gpt1"), "bench", *flags]


def bf16_native() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX), as gpt1's trainer.precision=auto asks."""
    from gpt1.core.compat import cpu_multiplies_bf16

    return cpu_multiplies_bf16()


def run(out: Path, shape: str, precision: str, loss: str, r: int, args: argparse.Namespace) -> dict:
    """One ``gpt1 bench`` process (its generation cut to one token, no multiple-choice step): its JSON."""
    path = out / f"{shape}-{precision}-{loss}-{r}.json"
    flags = [*SHAPES[shape], "--precision", precision, "--lm-loss", loss, "--compare", "nanogpt",
             "--nanogpt-model", str(args.nanogpt_model), "--warmup", str(args.warmup), "--iters", str(args.iters),
             "--mc-batch", "0", "--new-tokens", "1", "--gen-batch", "1", "--json", str(path)]  # fmt: skip
    subprocess.run(gpt1_bench(*flags), check=True, stdout=subprocess.DEVNULL)
    return json.loads(path.read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nanogpt-model", type=Path, required=True, help="your copy of nanoGPT's model.py")
    p.add_argument("--out", type=Path, default=Path("outputs/bench_rows"))
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    p.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=None,
                   help="default: fp32, and bf16 where the CPU multiplies it natively")  # fmt: skip
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    precisions = args.precisions or [p for p in PRECISIONS if p == "32-true" or bf16_native()]
    rows = []
    for shape in args.shapes:
        for precision in precisions:
            speedups: dict[str, list[float]] = {"chunked": [], "whole": []}
            steps: dict[str, list[float]] = {"chunked": [], "whole": []}
            for r in range(args.rounds):
                for loss in ("chunked", "whole") if r % 2 == 0 else ("whole", "chunked"):
                    result = run(args.out, shape, precision, loss, r, args)
                    speedups[loss].append(result["nanogpt"]["speedup_train"])
                    steps[loss].append(result["train"]["step_s"])
                    print(f"{shape} {precision} {loss} round {r}: gpt1 {result['train']['step_s'] * 1e3:,.0f} ms, "
                          f"{result['nanogpt']['speedup_train']:.3f}x nanoGPT", flush=True)  # fmt: skip
            chunked, whole = (statistics.median(speedups[k]) for k in ("chunked", "whole"))
            rows.append({"shape": shape, "precision": precision, "flags": SHAPES[shape],
                         "vs_nanogpt": chunked, "whole_vs_nanogpt": whole, "chunked_vs_whole": chunked / whole,
                         "step_ms": 1e3 * statistics.median(steps["chunked"]), "speedups": speedups})  # fmt: skip
    (args.out / "bench_rows.json").write_text(json.dumps(rows, indent=1) + "\n")
    print("shape | precision | gpt1's step, ms | vs nanoGPT | whole logits vs nanoGPT | chunked vs whole")
    print("--- | --- | --- | --- | --- | ---")
    for row in rows:
        print(f"{row['shape']} | {row['precision']} | {row['step_ms']:,.0f} | {row['vs_nanogpt']:.3f}x | "
              f"{row['whole_vs_nanogpt']:.3f}x | {row['chunked_vs_whole']:.3f}x")  # fmt: skip


if __name__ == "__main__":
    main()
