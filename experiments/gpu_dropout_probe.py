"""What the paper's dropout costs the compiled GPT-1 step on a GPU: `gpt1 bench` at 64 x 512, bf16-mixed, compiled,
for the preset NAME (gpt1, or gpt1-no-dropout: every dropout 0), its JSON written to PATH
(experiments/results/benchmarks.md, "GPU"). On the GPU machine, after `bash experiments/gpu_check.sh setup`:

    PYTHONPATH=/tmp/site python experiments/gpu_dropout_probe.py NAME PATH"""

import sys
from dataclasses import replace

import gpt1.tools.bench as bench
from gpt1.app.model_group import model_config, model_options

NO_DROPOUT = "gpt1-no-dropout"


def config(name: str):
    """bench's model configs (conf/model/), and gpt1-no-dropout: the paper's model with every dropout 0."""
    if name == NO_DROPOUT:
        return replace(model_config("gpt1"), attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
    return model_config(name)


bench.model_config = config
bench.model_options = lambda of_type=None: [*model_options(of_type), NO_DROPOUT]  # its --model choices

bench.main(
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
