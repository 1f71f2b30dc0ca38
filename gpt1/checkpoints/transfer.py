"""What a fine-tuned model takes from the checkpoint it starts from (the paper's transfer and its ablations).

- ``model=checkpoint`` (the default): the checkpoint's architecture and weights; its token and position embeddings
  always, its first ``n_transfer`` blocks (-1: all), the later blocks fresh from N(0, init_std), as the original's
  ``n_transfer``. Only the dropouts (the recipe's 0.1 by default, not the checkpoint's) and the vocabulary's padding
  (``pad_vocab_to_multiple``) can be changed.
- ``model=lstm`` (the LSTM baseline; any model type of ``gpt1.model.registry.MODEL_TYPES`` other than the
  checkpoint's): a fresh model of that type with the checkpoint's token embeddings ("same embeddings"), width and
  context.
- ``init_from=random``: no weights at all; the checkpoint (``tokenizer_from``) only supplies the vocabulary and,
  with ``model=checkpoint``, the architecture; a model of the group (``model=small``) sets another.
"""

from __future__ import annotations

import re
from dataclasses import asdict, replace
from typing import Any

import torch
from torch import nn

from gpt1.core.errors import ConfigError
from gpt1.model.registry import MODEL_TYPES, build_model, config_type, model_type


def transfer(ref: nn.Module, model_cfg: Any, pretrained: bool, n_transfer: int = -1) -> nn.Module:
    """The model to fine-tune, built from the checkpoint's model ``ref`` (any model type).

    model_cfg: a ``CheckpointModelConfig`` (ref's architecture, dropouts overridden) or the config of a model type
    (``model=NAME``: of ref's own type for init_from=random only; of another, e.g. an ``LSTMConfig``, taking ref's
    token embeddings). pretrained: take ref's weights (False: fresh ones, ref gives the vocab).
    """
    vocab = ref.config.vocab_size
    kind = config_type(model_cfg)
    if kind is not None:
        if pretrained and kind == model_type(ref):
            raise ConfigError(
                f"a model preset (model=NAME) of the checkpoint's own type ({kind}) is for init_from=random; "
                "fine-tuning a checkpoint keeps its architecture (leave model= out; model.<dropout>=... changes its "
                "dropouts)"
            )
        if pretrained:  # another type: the checkpoint's embeddings, so its width and context
            model_cfg = replace(model_cfg, n_embd=ref.config.n_embd, n_ctx=ref.config.n_ctx)
        model = build_model(replace(model_cfg, vocab_size=vocab))
        if pretrained:
            with torch.no_grad():
                model.tokens_embed.weight.copy_(ref.tokens_embed.weight[:vocab])
        return model
    recipe = asdict(type(model_cfg)())  # the recipe's defaults (dropout 0.1) apply where the decoder has the setting
    overrides = {k: v for k, v in asdict(model_cfg).items() if v is not None}
    for key in list(overrides):
        if not hasattr(ref.config, key):
            if overrides[key] != recipe[key]:
                raise ConfigError(f"model.{key}: the checkpoint's {type(ref).__name__} has no such setting")
            del overrides[key]
    model = type(ref)(replace(ref.config, **overrides))  # fresh weights
    if pretrained:
        state = transferred_state(ref, n_transfer)
        table = model.tokens_embed.weight  # (padded V, C): its padding may differ from ref's
        state["tokens_embed.weight"] = torch.cat([state["tokens_embed.weight"][:vocab], table[vocab:].detach()])
        model.load_state_dict(state, strict=False)
    return model


def transferred_state(ref: nn.Module, n_transfer: int) -> dict[str, torch.Tensor]:
    """ref's weights but those of blocks ``n_transfer`` and later (-1: all of them; its model type's ``blocks``)."""
    blocks = MODEL_TYPES[model_type(ref)].blocks
    n_layer = len(getattr(ref, blocks)) if blocks else 0
    if n_transfer != -1 and not (blocks and 0 <= n_transfer <= n_layer):
        what = (
            f"0..{n_layer} (the checkpoint has {n_layer} blocks)"
            if blocks
            else f"-1 (its {type(ref).__name__} has no blocks)"
        )
        raise ConfigError(f"n_transfer={n_transfer}: choose -1 (all blocks) or {what}")
    if n_transfer == -1:
        return ref.state_dict()
    block = re.compile(rf"{re.escape(blocks)}\.(\d+)\.")  # e.g. h.3.attn.c_attn.weight: block 3
    return {k: v for k, v in ref.state_dict().items() if not (m := block.match(k)) or int(m.group(1)) < n_transfer}
