"""The model types: a checkpoint's ``model_type`` -> the module, its config and the ``model=NAME`` options of the
config group. A new model type is its own file in this folder and one entry here: checkpoints save and load it,
``gpt1 finetune model=NAME`` builds it (taking the checkpoint's token embeddings, as the LSTM baseline does), the
training stack trains it and, on the CPU, gpt1's layers replace its own (``gpt1.cpu.layers``).

What a model type is: a module built from its config alone, which it keeps as ``.config`` (``vocab_size``,
``n_embd``, ``n_ctx``); ``forward(ids (B, T)) -> hidden (B, T, n_embd)``, ``lm_logits(hidden)``, its tied head as
``lm_head`` (a ``TiedHead``) and its weight as ``lm_table()`` (the LM loss in chunks), ``reader`` (for
``gpt1.model.generation.generate``), ``resize_token_embeddings``, ``num_params``, ``flops_per_token``; its token table
as ``tokens_embed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn

from gpt1.model.decoder import GPT, PRESETS, GPTConfig
from gpt1.model.lstm import LSTM, LSTMConfig


@dataclass(frozen=True)
class ModelType:
    model: type[nn.Module]
    """The module: ``model(config)``."""
    config: type
    """Its config dataclass."""
    options: Mapping[str, Any]
    """``model=NAME`` -> a config of this type (the config group's options)."""


MODEL_TYPES: dict[str, ModelType] = {
    "gpt": ModelType(GPT, GPTConfig, PRESETS),  # model=gpt1|small|tiny: for pretrain, or finetune from random
    "lstm": ModelType(LSTM, LSTMConfig, {"lstm": LSTMConfig()}),  # the paper's LSTM baseline (gpt1 finetune only)
}
"""``model_type`` (as checkpoints record it) -> the model type."""


def model_type(model: nn.Module) -> str:
    """The ``MODEL_TYPES`` name of ``model``: that of the nearest registered class among its class and bases (a model
    whose class was swapped in place, by ``fully_shard``'s FSDP<class> or ``gpt1.cpu.decoding``, is still its type)."""
    for cls in type(model).__mro__:
        for name, kind in MODEL_TYPES.items():
            if cls is kind.model:
                return name
    raise ValueError(
        f"{type(model).__name__} is not a registered model type ({list(MODEL_TYPES)}): add it to MODEL_TYPES"
    )
