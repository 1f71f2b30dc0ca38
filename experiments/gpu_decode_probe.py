"""Batch-1 greedy decoding of the full GPT-1 as `gpt1 bench` times it (eager, fp32, 256 tokens after a 16-token
prompt, five runs): ms/token, and torch's ops per token counted by its profiler. To compare two trees op for op, run
it once per tree, alternating (experiments/results/benchmarks.md, "GPU"):

    PYTHONPATH=<tree> python experiments/gpu_decode_probe.py NAME [--configure] [--datasets]

--configure applies the tree's CPU settings first and --datasets imports datasets, as its bench's process does (a
tree of another layout: its modules' paths in the two imports).
N=<tokens> in the environment changes the tokens timed (a quick run on a CPU)."""

import os
import statistics
import sys
import time
from dataclasses import replace

import torch

from gpt1.app.model_group import model_config
from gpt1.model.decoder import GPT

if "--configure" in sys.argv:
    from gpt1.cpu.settings import configure

    configure()
if "--datasets" in sys.argv:
    import datasets  # noqa: F401

name, tokens = sys.argv[1], int(os.environ.get("N", 256))
device = "cuda" if torch.cuda.is_available() else "cpu"
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = True  # as the bench
model = GPT(replace(model_config("gpt1"), vocab_size=40481, pad_vocab_to_multiple=64)).to(device).eval()
try:  # trees whose model is plain: the fast paths applied as gpt1 generate applies them
    from gpt1.cpu.decoding import decode_in_steps
    from gpt1.cpu.layers import use_cpu_layers

    if device == "cpu":
        use_cpu_layers(model)
    decode_in_steps(model)
except ImportError:  # trees whose model takes them by itself
    pass
prompt = torch.randint(0, 40481, (1, 16), device=device)
model.generate(prompt, 32, temperature=0)  # warm-up
ms = []
for _ in range(5):
    sync()
    t = time.perf_counter()
    model.generate(prompt, tokens, temperature=0)
    sync()
    ms.append((time.perf_counter() - t) / tokens * 1e3)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    model.generate(prompt, 32, temperature=0)
ops = {e.key: e.count / 32 for e in prof.key_averages() if e.key.startswith("aten::")}
print(
    f"RESULT {name} ms/token median {statistics.median(ms):.3f} all {' '.join(f'{t:.3f}' for t in ms)}; "
    f"aten ops/token {sum(ops.values()):.1f}"
)
print("OPS", name, " ".join(f"{k}={v:.1f}" for k, v in sorted(ops.items())))
