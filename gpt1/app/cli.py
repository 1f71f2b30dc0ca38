"""The ``gpt1`` console script: ``gpt1 <command> [hydra overrides]``, each command a Hydra app of its own."""

from __future__ import annotations

import importlib
import importlib.util
import os
import shlex
import sys

from gpt1.core.provenance import COMMAND_LINE

COMMANDS = {
    "pretrain": "pre-train GPT-1 on a corpus (default: the quickstart on the sample books)",
    "prepare": "train or load the tokenizer and pack the corpus into the cache, without training",
    "finetune": "fine-tune a checkpoint on a task (task=NAME init_from=CKPT)",
    "zeroshot": "zero-shot task heuristics over checkpoints (ckpts=[...] task=NAME)",
    "evaluate": "a fine-tuned checkpoint's task metrics, or a checkpoint's perplexity on a corpus",
    "generate": "sample text from a checkpoint",
    "convert": "import/export Hugging Face openai-gpt checkpoints (from-hf SRC DST | to-hf SRC DST)",
    "bench": "speed on this device vs its own ceilings and vs HF's or nanoGPT's model (--compare; flags, not Hydra)",
    "report": "tables and plots of sweeps: median and spread over seeds (DIR... [--out DIR]; flags, not Hydra)",
}

TOOLS = ("bench", "report")
"""The commands that are tools (plain flags, ``gpt1.tools``), not Hydra apps (``gpt1.commands``)."""


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        lines = [f"  {name:<10} {text}" for name, text in COMMANDS.items()]
        print("usage: gpt1 <command> [key=value ...] [-m] [--cfg job] [--help]\n\ncommands:\n" + "\n".join(lines))
        sys.exit(0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2)
    os.environ[COMMAND_LINE] = shlex.join(["gpt1", *sys.argv[1:]])  # as typed, for the run's record and its ranks
    command = sys.argv.pop(1)
    sys.argv[0] = f"gpt1 {command}"
    module = f"gpt1.{'tools' if command in TOOLS else 'commands'}.{command}"
    # Lightning's DDP launcher starts the other ranks as `python -m <__main__.__spec__.name> ARGS` (or as `python
    # <argv[0]>`, no file here): they run `python -m gpt1.commands.<command>`, which is this command.
    sys.modules["__main__"].__spec__ = importlib.util.find_spec(module)
    try:
        # the CPU settings before the command's imports can allocate (torch reads THP once)
        importlib.import_module("gpt1.cpu.settings").configure()
        importlib.import_module(module).main()
    except KeyboardInterrupt:  # a Ctrl-C where no run takes it (its imports, its data): one line, not a traceback
        print(f"stopped by Ctrl-C before gpt1 {command} had anything to save (exit status 130)", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
