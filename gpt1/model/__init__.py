"""The networks, in pure torch: the GPT-1 decoder, the LSTM baseline, the task heads, their layers (the seam to the
CPU kernels), generation and one-token decoding."""

from gpt1.model.decoder import (  # the decoder's names: `from gpt1.model import GPT` (gpt1.model was this module)
    ACTIVATIONS,
    EMBD_DROPOUT,
    GPT,
    MLP,
    PRESETS,
    Attention,
    Block,
    GPTConfig,
    grown,
)
from gpt1.model.generation import sample_next
from gpt1.model.kv_cache import LayerCache

__all__ = [
    "ACTIVATIONS",
    "EMBD_DROPOUT",
    "GPT",
    "MLP",
    "PRESETS",
    "Attention",
    "Block",
    "GPTConfig",
    "LayerCache",
    "grown",
    "sample_next",
]
