"""Decoding one sequence token by token without module calls, applied to a GPT from above: ``decode_in_steps(model)``.

A ``SteppedGPT`` generates a single fp32 sequence (in eval mode, on the CPU or a CUDA GPU) through ``TokenStep``: the
same math as ``GPT.forward`` with a cache (equal to the bit), each weight's product set up once per ``generate`` and
no module, dropout or kernel-choice overhead between the ops: on a small CPU a sizeable part of a token, on a GPU most
of it (experiments/results/benchmarks.md). Forward hooks of the blocks do not run in it.

Shapes as in ``gpt1.model.decoder``: C = n_embd, H = n_head, D = C // H.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from gpt1.cpu.kernels import decoding_layout, row_linear
from gpt1.model.decoder import GPT, CachedReader
from gpt1.model.kv_cache import LayerCache


class TokenStep:
    """``model(token, cache)`` for one token (1, 1) of one sequence in eval mode, for a ``GPT`` (or a module of its
    parameter names): the hidden state (1, 1, C) after the last block, the token's keys and values appended to
    ``cache``. Build it after the model's weights are final (it keeps views of them)."""

    def __init__(self, model: nn.Module) -> None:
        config = model.config
        self.C, self.eps = config.n_embd, config.layer_norm_eps
        self.act = model.h[0].mlp.act
        self.tokens, self.positions = model.tokens_embed.weight, model.positions_embed.weight
        self.blocks = [
            (
                row_linear(b.attn.c_attn.weight, b.attn.c_attn.bias),
                b.attn.self_attention,
                row_linear(b.attn.c_proj.weight, b.attn.c_proj.bias),
                row_linear(b.mlp.c_fc.weight, b.mlp.c_fc.bias),
                row_linear(b.mlp.c_proj.weight, b.mlp.c_proj.bias),
                (b.ln_1.weight, b.ln_1.bias),
                (b.ln_2.weight, b.ln_2.bias),
            )
            for b in model.h
        ]

    @staticmethod
    def applies(model: nn.Module, idx: torch.Tensor) -> bool:
        """Whether ``generate`` decodes idx (B, T) through a ``TokenStep``: one sequence, eval mode, fp32 weights on
        the CPU or a CUDA GPU, no autocast there, no graph being compiled."""
        weight = model.tokens_embed.weight
        return (
            idx.size(0) == 1
            and not model.training
            and weight.device.type in ("cpu", "cuda")
            and weight.dtype == torch.float32
            and not torch.is_autocast_enabled(weight.device.type)
            and not torch.compiler.is_compiling()
        )

    def __call__(self, token: torch.Tensor, cache: list[LayerCache]) -> torch.Tensor:
        C = self.C
        x = F.embedding(token, self.tokens) + self.positions[cache[0].length]  # (1, 1, C); no sync on a GPU
        for (qkv, attend, proj, fc, out, ln_1, ln_2), layer_cache in zip(self.blocks, cache):
            # Block.forward's math in eval mode, on plain functions (the attention is the decoder's own)
            n = F.layer_norm(x + proj(attend(qkv(x), layer_cache)), (C,), *ln_1, self.eps)
            x = F.layer_norm(n + out(self.act(fc(n))), (C,), *ln_2, self.eps)
        return x


class SteppedReader(CachedReader):
    """``CachedReader`` whose single new tokens go through a ``TokenStep``."""

    def __init__(self, model: GPT, idx: torch.Tensor) -> None:
        super().__init__(model, idx)
        self.step = TokenStep(model)

    def read(self, new: torch.Tensor) -> torch.Tensor:
        return self.step(new, self.cache) if new.size(1) == 1 else super().read(new)


class SteppedGPT(GPT):
    """A ``GPT`` whose ``generate`` reads through a ``TokenStep`` where ``TokenStep.applies``."""

    def reader(self, idx: torch.Tensor, use_cache: bool) -> Callable[[torch.Tensor], torch.Tensor]:
        if use_cache and TokenStep.applies(self, idx):
            return SteppedReader(self, idx)
        return super().reader(idx, use_cache)


def decode_in_steps(model: nn.Module) -> None:
    """Give a ``GPT`` (exactly: not a subclass) the class ``SteppedGPT`` in place, where a decode starts (``gpt1
    generate``, ``gpt1 bench``): the same parameters and function. Other models are left as they are."""
    if type(model) is GPT:
        model.__class__ = SteppedGPT


def decoded_weights(model: nn.Module) -> list[torch.Tensor]:
    """The weights that decoding a token multiplies: every linear layer's and the token table (the tied head's)."""
    weights = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]
    table = getattr(model, "tokens_embed", None)
    return weights + [table.weight] if isinstance(table, nn.Embedding) else weights


def store_for_decoding(model: nn.Module) -> None:
    """Give each parameter of model memory of its own, the weights that decoding multiplies in the layout that the CPU
    decoding kernel reads fastest (``gpt1.cpu.kernels.decoding_layout``): the same function (to rounding: column
    blocks sum in another order). For a process that only decodes, e.g. on a checkpoint's tensors mapped from its
    file (``load_checkpoint(..., decoding=True)``): this copy is then the only one, as reading would be."""
    laid_out = {id(w) for w in decoded_weights(model)}
    for p in model.parameters():
        data = p.data  # a new tensor object at each access
        stored = decoding_layout(data) if id(p) in laid_out else data
        p.data = stored.clone(memory_format=torch.contiguous_format) if stored is data else stored
