"""What the paper's dropout costs the compiled GPT-1 step on a GPU: `gpt1 bench` at 64 x 512, bf16-mixed, compiled,
for the preset NAME (gpt1, or gpt1-no-dropout: every dropout 0), its JSON written to PATH
(experiments/results/benchmarks.md, "GPU"). On the GPU machine, after `bash experiments/gpu_check.sh setup`:

    PYTHONPATH=/tmp/site python experiments/gpu_dropout_probe.py NAME PATH"""

import sys
from dataclasses import replace

from gpt1.model.decoder import PRESETS

PRESETS["gpt1-no-dropout"] = replace(PRESETS["gpt1"], attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
from gpt1.tools.bench import main  # noqa: E402  (its --model choices are read from PRESETS)

main(
    [
        "--model",
        sys.argv[1],
        "--batch",
        "64",
        "--seq",
        "512",
        "--precision",
        "bf16-mixed",
        "--mc-batch",
        "0",
        "--compile",
        "--new-tokens",
        "8",
        "--json",
        sys.argv[2],
    ]
)
