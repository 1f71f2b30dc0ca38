"""gpt1: a faithful GPT-1 reproduction and experiment framework on PyTorch Lightning and Hydra."""

from gpt1.allocator import request_huge_pages

request_huge_pages()  # torch reads it at its first CPU allocation: before any gpt1 module can make one

__version__ = "0.1.0"
