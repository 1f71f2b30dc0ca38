"""gpt1: a faithful GPT-1 reproduction and experiment framework on PyTorch Lightning and Hydra."""

__version__ = "0.1.0"
