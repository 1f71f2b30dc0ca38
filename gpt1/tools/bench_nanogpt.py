"""nanoGPT's model beside gpt1's in ``gpt1 bench --compare nanogpt --nanogpt-model PATH``: the ``GPT`` of the
user's copy of nanoGPT's model.py (never part of gpt1), imported from that path at the user's request, built at
gpt1's shapes and holding gpt1's weights where they have a place (GPT-1's parameters, but pre-LN with a final
LayerNorm left at ones and zeros, and the exact GELU: ``NOTE``), and its training step as nanoGPT's users run it."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch
from torch.nn import functional as F

from gpt1.core.errors import ConfigError
from gpt1.model.decoder import GPT

NOTE = "pre-LN, exact GELU, a final LayerNorm: a peer of the same size, not the same model"
"""What the report says of the comparison."""


def load_nanogpt(path: Path) -> ModuleType:
    """The module of the user's nanoGPT model.py at ``path`` (its code runs: the user's own file, named by them);
    ``ConfigError`` naming the file where it cannot be loaded or has no ``GPTConfig`` and ``GPT``."""
    spec = importlib.util.spec_from_file_location("nanogpt_model", path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"--nanogpt-model {path}: not a Python file; pass nanoGPT's model.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise ConfigError(f"--nanogpt-model {path}: importing it failed ({type(e).__name__}: {e})") from e
    if not all(hasattr(module, name) for name in ("GPTConfig", "GPT")):
        raise ConfigError(f"--nanogpt-model {path}: defines no GPTConfig and GPT, as nanoGPT's model.py does")
    return module


def nanogpt_twin(model: GPT, module: ModuleType, path: Path) -> torch.nn.Module:
    """The GPT of nanoGPT's ``module`` (``load_nanogpt(path)``) at ``model``'s shapes, holding its weights (each
    applied where nanoGPT applies it); one dropout rate for gpt1's three (its residual one)."""
    c = model.config
    if c.n_inner != 4 * c.n_embd:
        raise ConfigError(f"--compare nanogpt: nanoGPT's MLP is 4 x n_embd wide, the model's {c.n_inner}")
    table = model.tokens_embed.weight
    config = module.GPTConfig(block_size=c.n_ctx, vocab_size=table.size(0), n_layer=c.n_layer, n_head=c.n_head,
                              n_embd=c.n_embd, dropout=c.resid_pdrop, bias=True)  # fmt: skip
    with contextlib.redirect_stdout(sys.stderr):  # its parameter count: stdout is the bench's report
        twin = module.GPT(config)
    state = {f"transformer.{k}": v for k, v in model.state_dict().items() if k.startswith("h.")}
    state |= {
        "transformer.wte.weight": table,
        "lm_head.weight": table,
        "transformer.wpe.weight": model.positions_embed.weight,
    }
    missing, unexpected = twin.load_state_dict(state, strict=False)
    buffers = {name for name, _ in twin.named_buffers()}  # (a causal mask, where its torch has no SDPA)
    if unexpected or any(not k.startswith("transformer.ln_f.") and k not in buffers for k in missing):
        raise ConfigError(f"--nanogpt-model {path}: its GPT does not hold GPT-1's weights (missing {missing}, "
                          f"unexpected {unexpected}): pass nanoGPT's model.py")  # fmt: skip
    return twin.to(table.device)


def nanogpt_loss(twin: torch.nn.Module, ids: torch.Tensor) -> Callable[[], torch.Tensor]:
    """nanoGPT's training loss on ids (B, T), as its train.py computes it: the targets the next tokens, -1 (which its
    cross-entropy ignores) after the last."""
    targets = F.pad(ids[:, 1:], (0, 1), value=-1)  # (B, T)
    return lambda: twin(ids, targets)[1]
