"""The networks, in pure torch: the GPT-1 decoder, the LSTM baseline, the task heads and one-token decoding."""

from gpt1.model.decoder import (  # the decoder's names: `from gpt1.model import GPT` (gpt1.model was this module)
    ACTIVATIONS,
    EMBD_DROPOUT,
    GPT,
    MLP,
    PRESETS,
    Attention,
    Block,
    GPTConfig,
    LayerCache,
    grown,
    sample_next,
)

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
