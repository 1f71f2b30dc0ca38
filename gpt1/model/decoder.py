"""The GPT-1 decoder of Radford et al. (2018), in pure torch.

Faithful to the original (and to Hugging Face's ``OpenAIGPTModel``, whose parameter names it keeps so that
checkpoints map one to one): post-LN blocks ``n = ln_1(x + attn(x)); h = ln_2(n + mlp(n))``, tanh-GELU,
learned position embeddings, no final LayerNorm, an LM head tied to the token embedding, dropout on the
embeddings, the attention probabilities and both residual branches, init N(0, 0.02).

Shapes: B batch, T sequence length, C = n_embd, H = n_head, D = C // H, V = vocab_size. Plain torch throughout; on
the CPU, gpt1's commands swap its layers for faster ones computing the same function (``gpt1.cpu.layers``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import torch
from torch import nn
from torch.nn import functional as F

from gpt1.core.errors import ConfigError, ranged
from gpt1.model.generation import generate
from gpt1.model.kv_cache import LayerCache
from gpt1.model.lm_loss import TORCH_PRODUCTS, HeadProducts

ACTIVATIONS = {
    "gelu_tanh": partial(F.gelu, approximate="tanh"),  # the paper's (and HF's "gelu"); a partial pickles, a lambda not
    "gelu": F.gelu,  # exact erf GELU: an ablation, breaks parity with the original weights
    "relu": F.relu,
}

EMBD_DROPOUT = ("occurrence", "table")


@dataclass
class GPTConfig:
    """Architecture of a GPT-1 decoder; the defaults are the paper's 117M model."""

    vocab_size: int = ranged(40478, ge=1)
    """Tokens the model can read and predict, special tokens included; gpt1 commands set it from the tokenizer."""
    n_ctx: int = ranged(512, ge=1)
    """Context length: the size of the learned position table."""
    n_layer: int = ranged(12, ge=1)
    """Number of transformer blocks."""
    n_head: int = 12
    """Attention heads per block; n_embd must be a multiple of it."""
    n_embd: int = ranged(768, ge=1)
    """Width of the residual stream."""
    n_inner: int = ranged(3072, ge=1)
    """Hidden width of the position-wise MLP."""
    embd_pdrop: float = ranged(0.1, ge=0, lt=1)
    """Dropout on the embeddings (``embd_dropout`` says how)."""
    embd_dropout: str = "occurrence"
    """How embedding dropout draws its masks: ``occurrence`` (each token's token + position embedding on its own, as
    Hugging Face's; pre-training's) or ``table`` (on the token and position tables themselves, as the original
    fine-tuning code: every occurrence of a token in a batch shares its mask, and the tied LM head reads the dropped
    table; fine-tuning's default)."""
    attn_pdrop: float = ranged(0.1, ge=0, lt=1)
    """Dropout on the attention probabilities."""
    resid_pdrop: float = ranged(0.1, ge=0, lt=1)
    """Dropout on the attention and MLP outputs, before each residual add."""
    layer_norm_eps: float = ranged(1e-5, gt=0)
    """LayerNorm epsilon."""
    activation: str = "gelu_tanh"
    """MLP non-linearity: gelu_tanh (paper), gelu (exact erf) or relu."""
    init_std: float = ranged(0.02, ge=0)
    """Std of the normal init of every weight matrix and embedding (biases 0, LayerNorm 1/0)."""
    pad_vocab_to_multiple: int = ranged(1, ge=1)
    """Round the embedding table up to a multiple of this (64 helps GPU matmuls); padded rows are never scored."""

    def __post_init__(self) -> None:
        if self.n_head < 1 or self.n_embd % self.n_head:
            raise ConfigError(
                f"model.n_embd={self.n_embd} must be a multiple of model.n_head={self.n_head}: change one of them"
            )
        if self.embd_dropout not in EMBD_DROPOUT:
            raise ConfigError(f"model.embd_dropout={self.embd_dropout!r}: choose one of {list(EMBD_DROPOUT)}")
        if self.activation not in ACTIVATIONS:
            raise ConfigError(f"model.activation={self.activation!r}: choose one of {sorted(ACTIVATIONS)}")

    @property
    def padded_vocab_size(self) -> int:
        m = self.pad_vocab_to_multiple
        return -(-self.vocab_size // m) * m


class Attention(nn.Module):
    """Causal multi-head self-attention, scaled by 1/sqrt(D) as OpenAI's; with a cache, the new tokens' keys and
    values are appended to it and their queries see the cached ones too."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)  # q, k, v in one matmul
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_pdrop = config.attn_pdrop
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

    def forward(
        self, x: torch.Tensor, cache: LayerCache | None = None, attn_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.resid_dropout(self.c_proj(self.self_attention(self.c_attn(x), cache, attn_mask)))

    def self_attention(
        self, qkv: torch.Tensor, cache: LayerCache | None = None, attn_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The heads' attention of T new tokens from their fused query, key and value projections qkv (B, T, 3C) ->
        (B, T, C). attn_mask (B, T, T) (True: attend) replaces the causal mask (packed sequences; not with a cache)."""
        B, T, C3 = qkv.shape
        C = C3 // 3
        q, k, v = qkv.view(B, T, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, H, T, D)
        past = 0
        if cache is not None:
            past = cache.length
            k, v = cache.update(k, v)  # (B, H, past + T, D)
        # Causal mask: plain when nothing is cached; a single new token sees everything; T > 1 new tokens after a
        # cached prefix need the mask shifted right by the prefix (SDPA's is_causal aligns it top-left).
        mask = attn_mask[:, None] if attn_mask is not None else None  # (B, 1, T, T)
        if past and T > 1:
            mask = torch.ones(T, past + T, dtype=torch.bool, device=qkv.device).tril(diagonal=past)
        dropout_p = self.attn_pdrop if self.training else 0.0
        y = self.attention(q, k, v, mask, is_causal=past == 0 and mask is None, dropout_p=dropout_p)  # (B, H, T, D)
        # one token's heads are already in order: the transpose, an op of its own, is a share of a decoded token's time
        return y.reshape(B, T, C) if T == 1 else y.transpose(1, 2).reshape(B, T, C)

    def attention(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None,
        is_causal: bool,
        dropout_p: float,
    ) -> torch.Tensor:
        """softmax(q k^T / sqrt(D), masked) v, dropout on the probabilities: q (B, H, T, D), k and v (B, H, S, D) ->
        (B, H, T, D); mask broadcasts to (B, H, T, S) (True: attend)."""
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, dropout_p=dropout_p)


class MLP(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, config.n_inner)
        self.c_proj = nn.Linear(config.n_inner, config.n_embd)
        self.act = ACTIVATIONS[config.activation]
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class Block(nn.Module):
    """Post-LN transformer block, as in GPT-1 (not GPT-2's pre-LN)."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.attn = Attention(config)
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps)
        self.mlp = MLP(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps)

    def forward(
        self, x: torch.Tensor, cache: LayerCache | None = None, attn_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        n = self.ln_1(x + self.attn(x, cache, attn_mask))
        return self.ln_2(n + self.mlp(n))


class TiedHead(nn.Module):
    """The LM head tied to the token table: hidden (..., C) @ table (V, C).T -> logits (..., V). No weight of its own;
    a module so that ``gpt1.cpu.layers`` swaps it like every other layer. ``products``: its three products for the
    chunked LM loss (``gpt1.model.lm_loss``)."""

    products: HeadProducts = TORCH_PRODUCTS

    def forward(self, hidden: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, table)


class GPT(nn.Module):
    """GPT-1 decoder: ``forward`` gives the final hidden states, ``lm_logits`` the tied LM head on top of them."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.tokens_embed = nn.Embedding(config.padded_vocab_size, config.n_embd)  # shared with the LM head
        self.positions_embed = nn.Embedding(config.n_ctx, config.n_embd)
        self.drop = nn.Dropout(config.embd_pdrop)
        self._dropped_table: torch.Tensor | None = None  # embd_dropout=table: the last training forward's (V, C)
        self.h = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.lm_head = TiedHead()
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=self.config.init_std)
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.bias)

    def new_cache(self) -> list[LayerCache]:
        """An empty KV cache, one entry per block, for incremental decoding of up to n_ctx tokens."""
        return [LayerCache(self.config.n_ctx) for _ in self.h]

    def forward(
        self,
        idx: torch.Tensor,
        cache: list[LayerCache] | None = None,
        positions: torch.Tensor | None = None,
        attn_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Token ids (B, T) -> final hidden states (B, T, C). With a cache, idx holds only the new tokens.

        Several sequences packed into each row (``gpt1.training.packing``) give each token's position (B, T)
        and which tokens it may attend to, attn_mask (B, T, T) (True: attend), instead of 0..T-1 and the causal mask."""
        B, T = idx.shape
        past = cache[0].length if cache is not None else 0
        if positions is None:
            if past + T > self.config.n_ctx:
                raise ValueError(
                    f"sequence of {past + T} tokens exceeds the context of {self.config.n_ctx} (model.n_ctx)"
                )
            positions = torch.arange(past, past + T, device=idx.device)  # (T,)
        if self.training and self.config.embd_dropout == "table" and self.drop.p > 0:
            # the original's we = dropout(we): one mask per table row for the whole batch; lm_logits reads this table
            self._dropped_table = self.drop(self.tokens_embed.weight)  # (padded V, C)
            x = F.embedding(idx, self._dropped_table) + F.embedding(positions, self.drop(self.positions_embed.weight))
        else:
            self._dropped_table = None
            x = self.drop(self.tokens_embed(idx) + self.positions_embed(positions))  # (B, T, C)
        for i, block in enumerate(self.h):
            x = block(x, cache[i] if cache is not None else None, attn_mask)
        return x  # no final LayerNorm in GPT-1

    def lm_table(self) -> torch.Tensor:
        """The tied LM head's weight (padded V, C): the token embedding, or in training with ``embd_dropout=table``
        the table as the last ``forward`` dropped it (the original's tied head)."""
        return self._dropped_table if self.training and self._dropped_table is not None else self.tokens_embed.weight

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Tied LM head: hidden (..., C) -> logits (..., V) over ``lm_table``, without the padding's rows."""
        logits = self.lm_head(hidden, self.lm_table())
        # slice only when padded: even a no-op slice costs its backward a zeroed (..., V) copy
        return (
            logits[..., : self.config.vocab_size] if self.config.padded_vocab_size > self.config.vocab_size else logits
        )

    def resize_token_embeddings(self, vocab_size: int) -> None:
        """Grow the vocabulary (e.g. for new special tokens); new rows are drawn from N(0, init_std)."""
        old = self.config.vocab_size
        if vocab_size < old:
            raise ValueError(f"cannot shrink the vocabulary from {old} to {vocab_size}")
        self.config = replace(self.config, vocab_size=vocab_size)
        self.tokens_embed = grown(self.tokens_embed, old, self.config.padded_vocab_size, self.config.init_std)

    def num_params(self) -> int:
        """Parameters of the model, counting the real vocabulary rows only (116,534,784 for the paper's)."""
        padding = (self.config.padded_vocab_size - self.config.vocab_size) * self.config.n_embd
        return sum(p.numel() for p in self.parameters()) - padding

    def flops_per_token(self, seq_len: int | None = None) -> int:
        """Training FLOPs per token (PaLM appendix B): 6 N + 12 L H D T, N without the position table."""
        c, T = self.config, seq_len or self.config.n_ctx
        n = self.num_params() - c.n_ctx * c.n_embd
        return 6 * n + 12 * c.n_layer * c.n_embd * T

    generate = generate  # model.generate(idx, max_new_tokens, ...): the one sampling loop, reading through ``reader``

    def reader(self, idx: torch.Tensor, use_cache: bool) -> Callable[[torch.Tensor], torch.Tensor]:
        """How ``generate`` reads the sequence so far (``generation.Decoder``): through a KV cache, or without, the
        last n_ctx tokens each time."""
        if use_cache:
            return CachedReader(self, idx)
        return lambda idx: self(idx[:, -self.config.n_ctx :])


class CachedReader:
    """``GPT.reader`` with a KV cache: each call reads the tokens not read yet (B, t) after the cached ones
    (``read``). Past n_ctx tokens the positions no longer fit: the last n_ctx are read whole, uncached."""

    def __init__(self, model: GPT, idx: torch.Tensor) -> None:
        self.model, self.cache, self.cached = model, model.new_cache(), 0  # cached: how many tokens the cache holds

    def __call__(self, idx: torch.Tensor) -> torch.Tensor:
        n_ctx = self.model.config.n_ctx
        if idx.size(1) > n_ctx:
            self.cache = None  # positions are absolute: past the context a sliding window must be recomputed
        if self.cache is None:
            return self.model(idx[:, -n_ctx:])
        new, self.cached = idx[:, self.cached :], idx.size(1)
        return self.read(new)

    def read(self, new: torch.Tensor) -> torch.Tensor:
        """The new tokens (B, t) after the cached ones -> their hidden states (B, t, C), the cache extended."""
        return self.model(new, self.cache)


def grown(embedding: nn.Embedding, keep: int, rows: int, std: float) -> nn.Embedding:
    """A table of ``rows`` rows: the first ``keep`` rows of ``embedding``, the others drawn from N(0, std)."""
    weight = embedding.weight
    new = type(embedding)(rows, weight.size(1), device=weight.device, dtype=weight.dtype)
    nn.init.normal_(new.weight, mean=0.0, std=std)
    with torch.no_grad():
        new.weight[:keep] = weight[:keep]
    return new
