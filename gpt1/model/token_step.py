"""One token of one sequence through the decoder with a KV cache, without module calls (pure torch).

``GPT.generate`` decodes a single sequence in fp32 on the CPU or a CUDA GPU through ``TokenStep``: the same math as
``GPT.forward`` with a cache in eval mode (tests check its hidden states equal to the bit on both), with each weight's
product set up once per ``generate`` (``gpt1.cpu.kernels.row_linear``) and no module, dropout or kernel-choice overhead
between the ops: on a small CPU a sizeable part of a token, on a GPU most of it (one token is a few hundred kernel
launches; experiments/results/benchmarks.md). Forward hooks of the blocks do not run in it. ``store_for_decoding``
lays a model's weights out for the CPU decoding kernel that ``gpt1.cpu.settings`` chose, for a process that only
decodes.

Shapes as in ``gpt1.model``: C = n_embd, H = n_head, D = C // H.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from gpt1.cpu.kernels import decoding_layout, row_linear
from gpt1.model.kv_cache import LayerCache
from gpt1.model.layers import self_attention


class TokenStep:
    """``model(token, cache)`` for one token (1, 1) of one sequence in eval mode, for a ``gpt1.model.GPT`` model (or
    a module of its parameter names): the hidden state (1, 1, C) after the last block, the token's keys and values
    appended to ``cache``. Build it after the model's weights are final (it keeps views of them)."""

    def __init__(self, model: nn.Module) -> None:
        config = model.config
        self.C, self.H, self.eps = config.n_embd, config.n_head, config.layer_norm_eps
        self.act = model.h[0].mlp.act
        self.tokens, self.positions = model.tokens_embed.weight, model.positions_embed.weight
        self.blocks = [
            (
                row_linear(b.attn.c_attn.weight, b.attn.c_attn.bias),
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
        C, H = self.C, self.H
        x = F.embedding(token, self.tokens) + self.positions[cache[0].length]  # (1, 1, C); no sync on a GPU
        for (qkv, proj, fc, out, ln_1, ln_2), layer_cache in zip(self.blocks, cache):
            # Block.forward's math in eval mode (no dropout), on plain functions: the attention is the decoder's own
            # function; the post-LN residuals and the MLP are its two lines (its modules' calls are what this
            # step saves)
            n = F.layer_norm(x + proj(self_attention(qkv(x), H, layer_cache)), (C,), *ln_1, self.eps)
            x = F.layer_norm(n + out(self.act(fc(n))), (C,), *ln_2, self.eps)
        return x


def decoded_weights(model: nn.Module) -> list[torch.Tensor]:
    """The weights that decoding a token multiplies, in model order: every linear layer's and, for a model with a
    token table (GPT), the table (the tied head's)."""
    weights = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]
    table = getattr(model, "tokens_embed", None)
    return weights + [table.weight] if isinstance(table, nn.Embedding) else weights


def store_for_decoding(model: nn.Module) -> None:
    """Give each parameter of model memory of its own, the weights that decoding multiplies (``decoded_weights``) in
    the layout that the CPU decoding kernel reads fastest (``gpt1.cpu.kernels.decoding_layout``): same shapes and
    values, so the model computes the same function (to rounding: column blocks sum in another order); training would
    run at other speeds. For a process that decodes, e.g. on a checkpoint's tensors mapped
    from its file (``load_checkpoint(..., decoding=True)``): this copy is then the only one, as reading would be."""
    laid_out = {id(w) for w in decoded_weights(model)}
    for p in model.parameters():
        data = p.data  # a new tensor object at each access
        stored = decoding_layout(data) if id(p) in laid_out else data
        p.data = stored.clone(memory_format=torch.contiguous_format) if stored is data else stored
