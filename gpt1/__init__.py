"""gpt1: a faithful GPT-1 reproduction and experiment framework on PyTorch Lightning and Hydra.

Importing it changes nothing in the process; ``gpt1.cpu.configure()`` applies the CPU speed settings (every gpt1
command calls it)."""

__version__ = "0.1.0"
