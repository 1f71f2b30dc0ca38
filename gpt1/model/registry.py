"""The model types: a checkpoint's ``model_type`` -> the module, its config and what fine-tuning may do with it. A new
model type is its own file in this folder (a ``LanguageModel``), one entry here and one YAML file per size in
conf/model/ (``defaults: [/<type>_model_schema@_here_]``); pre-train it under an experiment that sets none of GPT-1's
keys (``~experiment``: the quickstart's sets its depth and dropouts)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional, Protocol, runtime_checkable

import torch
from torch import nn

from gpt1.model.decoder import GPT, GPTConfig
from gpt1.model.lstm import LSTM, LSTMConfig


class ModelConfig(Protocol):
    """What gpt1 reads of a model type's config (a dataclass, built from keywords alone: checkpoints store it as a
    dict)."""

    vocab_size: int
    """Tokens the model reads and predicts; the commands set it from the tokenizer."""
    n_ctx: int
    """The longest sequence it reads (tasks truncate to it)."""
    n_embd: int
    """The width of its token embeddings and hidden states (what the heads read)."""
    init_std: float
    """The std of the normal draw of new embedding rows (special tokens added)."""


@runtime_checkable
class LanguageModel(Protocol):
    """What gpt1 needs of a model (besides being an ``nn.Module`` built from its config alone). Shapes: B batch, T
    sequence length, C = n_embd, V = vocab_size."""

    config: ModelConfig
    tokens_embed: nn.Embedding
    """The token table (V, C): fine-tuning grows it and transfers it to other model types."""
    lm_head: nn.Module
    """The LM head (a ``gpt1.model.decoder.TiedHead``, whose ``products`` the chunked LM loss uses)."""

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Token ids (B, T) -> hidden states (B, T, C); position t sees tokens 0..t only."""
        ...

    def lm_table(self) -> torch.Tensor:
        """The LM head's weight (V', C), V' >= V: the chunked LM loss multiplies hidden states by it."""
        ...

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor: ...

    def reader(self, idx: torch.Tensor, use_cache: bool) -> Callable[[torch.Tensor], torch.Tensor]:
        """How ``gpt1.model.generation.generate`` reads the sequence so far (``generation.Decoder``)."""
        ...

    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: Optional[int] = None,
        use_cache: bool = True,
        generator: Optional[torch.Generator] = None,
    ) -> torch.Tensor:
        """idx (B, T) continued by max_new_tokens sampled tokens -> (B, T + max_new_tokens)."""
        ...

    def resize_token_embeddings(self, vocab_size: int) -> None:
        """Grow the vocabulary to vocab_size (new rows drawn from N(0, init_std)) and the config with it."""
        ...

    def num_params(self) -> int: ...

    def flops_per_token(self, seq_len: Optional[int] = None) -> int:
        """Training FLOPs per token (throughput and MFU)."""
        ...


@dataclass(frozen=True)
class ModelType:
    model: type[nn.Module]
    """The module (a ``LanguageModel``): ``model(config)``."""
    config: type
    """Its config dataclass (a ``ModelConfig``): the schema of its conf/model/ files, stored in Hydra's ConfigStore as
    ``<type>_model_schema``."""
    blocks: Optional[str] = None
    """The name of its ``nn.ModuleList`` of blocks (GPT-1's ``h``), whose first ``n_transfer`` fine-tuning transfers
    from a checkpoint (the rest start fresh); None: no blocks (``n_transfer`` must stay -1)."""
    packs: bool = False
    """Whether ``forward`` also reads packed rows, ``forward(ids, positions=(B, T), attn_mask=(B, T, T))``: fine-tuning
    then drops the padding of its batches (``gpt1.training.packing``); else each sequence is padded to the batch's
    longest."""


MODEL_TYPES: dict[str, ModelType] = {
    "gpt": ModelType(GPT, GPTConfig, blocks="h", packs=True),  # conf/model/gpt1.yaml, small.yaml, tiny.yaml
    "lstm": ModelType(LSTM, LSTMConfig),  # the paper's LSTM baseline (conf/model/lstm.yaml)
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


def config_type(config: Any) -> Optional[str]:
    """The ``MODEL_TYPES`` name of the type whose config ``config`` is, None for another object."""
    return next((name for name, kind in MODEL_TYPES.items() if type(config) is kind.config), None)


def build_model(config: Any) -> nn.Module:
    """A fresh model (new weights) of ``config``'s model type."""
    name = config_type(config)
    if name is None:
        raise ValueError(f"{type(config).__name__} is the config of no registered model type ({list(MODEL_TYPES)})")
    return MODEL_TYPES[name].model(config)
