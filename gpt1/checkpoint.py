"""The gpt1 checkpoint: one torch file that carries the weights, the model config and the tokenizer.

Lightning's checkpoints (written by ``gpt1 pretrain``) and ``gpt1 convert from-hf``'s output share the layout,
so every command accepts either:

    {"state_dict": {"model.<GPT parameter>": tensor, ...},   # plus "heads.*" and Lightning's own keys, if any
     "gpt1": {"format": 1, "model_config": {...GPTConfig...}, "tokenizer": "<tokenizers JSON>"}}
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from gpt1.io import atomic_file
from gpt1.model import GPT, GPTConfig

FORMAT = 1
MODEL_PREFIX = "model."


def metadata(config: GPTConfig, tokenizer: Tokenizer) -> dict[str, Any]:
    """The "gpt1" block of a checkpoint: what is needed to rebuild the model and its tokenizer."""
    return {"format": FORMAT, "model_config": asdict(config), "tokenizer": tokenizer.to_str()}


def atomic_save(obj: Any, path: str | os.PathLike) -> None:
    """torch.save that never leaves a torn checkpoint (see ``gpt1.io.atomic_file``)."""
    with atomic_file(path) as f:
        torch.save(obj, f)


def save_checkpoint(path: str | os.PathLike, model: GPT, tokenizer: Tokenizer) -> None:
    """Write a standalone gpt1 checkpoint of ``model`` and its ``tokenizer``."""
    if tokenizer.get_vocab_size() != model.config.vocab_size:
        raise ValueError(
            f"tokenizer has {tokenizer.get_vocab_size()} tokens but the model {model.config.vocab_size}: "
            "resize the model's embeddings first (GPT.resize_token_embeddings)"
        )
    state = {MODEL_PREFIX + k: v for k, v in model.state_dict().items()}
    atomic_save({"state_dict": state, "gpt1": metadata(model.config, tokenizer)}, path)


@dataclass
class Loaded:
    """What a gpt1 checkpoint holds: the model (weights loaded, eval mode) and its tokenizer."""

    model: GPT
    tokenizer: Tokenizer
    raw: dict[str, Any]
    """The whole checkpoint dict, for callers that need more (heads, Lightning's loop state)."""


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> Loaded:
    """Load a gpt1 checkpoint (from ``gpt1 pretrain`` or ``gpt1 convert from-hf``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist (pass the path of a .ckpt file)")
    raw = torch.load(path, map_location=map_location, weights_only=False)
    meta = raw.get("gpt1") if isinstance(raw, dict) else None
    if meta is None:
        raise ValueError(
            f"{path} is not a gpt1 checkpoint (no 'gpt1' block); "
            "for a Hugging Face openai-gpt directory run `gpt1 convert from-hf SRC DST` first"
        )
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: checkpoint format {meta.get('format')} is not supported (expected {FORMAT})")
    with torch.device("meta"):  # no random init of weights about to be overwritten
        model = GPT(GPTConfig(**meta["model_config"]))
    state = {k[len(MODEL_PREFIX) :]: v for k, v in raw["state_dict"].items() if k.startswith(MODEL_PREFIX)}
    model.load_state_dict(state, assign=True)
    return Loaded(model=model.eval(), tokenizer=Tokenizer.from_str(meta["tokenizer"]), raw=raw)
