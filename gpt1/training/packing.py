"""A task batch through the decoder and its head (``task_logits``): all the sequences of an example (two orderings,
K choices) in one forward pass, flattened to (B * S, T), or packed into rows without padding (``pack_sequences``), or
for multiple choice one row per example with the context its choices share decoded once (``pack_choices``): exactly
the same states as decoding every sequence on its own.

Shapes: B examples, S sequences per example (1, 2 or K), T tokens, C = n_embd.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import nn


class Packed(NamedTuple):
    """Sequences packed into rows without padding (``pack_sequences``, ``pack_choices``)."""

    ids: torch.Tensor
    """(R, L) token ids of R rows, 0 where a row has no token."""
    positions: torch.Tensor
    """(R, L) each token's position in its own sequence."""
    attn_mask: torch.Tensor
    """(R, L, L) True where a token may attend: the earlier tokens of its own sequence (and a shared context)."""
    index: torch.Tensor
    """(..., T) where each token of each input sequence is in the flattened (B * L) rows (padding: anywhere); the
    shared context's tokens of every choice point to its one copy."""


CONTEXT = -1
"""The group of a shared context's tokens, which every sequence of its row sees."""


def _rows(
    tokens: torch.Tensor,
    at: torch.Tensor,
    positions: torch.Tensor,
    groups: torch.Tensor,
    shape: tuple[int, int],
    index: torch.Tensor,
) -> Packed:
    """Rows of ``shape`` (R, L) holding M tokens at flat places ``at``, with their positions and groups (M,): a token
    sees the earlier tokens of its own group and of ``CONTEXT``; an empty slot sees only itself."""
    R, L = shape
    flat, pos = tokens.new_zeros(R * L), tokens.new_zeros(R * L)
    flat[at], pos[at] = tokens, positions
    group = torch.arange(R * L, device=tokens.device) + groups.max().clamp(min=0) + 1  # empty slots: each its own
    group[at] = groups
    group = group.view(R, L)
    sees = (group[:, None, :] == CONTEXT) | (group[:, None, :] == group[:, :, None])  # (R, L query, L key)
    causal = torch.ones(L, L, dtype=torch.bool, device=tokens.device).tril()
    return Packed(flat.view(R, L), pos.view(R, L), sees & causal, index)


def pack_sequences(ids: torch.Tensor, lengths: torch.Tensor, row_length: int | None = None) -> Packed:
    """Pack sequences ids (N, T), right-padded to lengths (N,), into rows of row_length >= T tokens (default T)
    without padding, longest first, each into the first row with room (a host-side loop over N). A token attends to
    the earlier tokens of its own sequence, at its own position: its state is the one it gets alone."""
    N, T0 = ids.shape
    T = max(row_length or T0, T0)
    rooms: list[int] = []  # free tokens per row
    row, start = [0] * N, [0] * N
    sizes = lengths.tolist()  # (one host sync)
    for n in sorted(range(N), key=lambda n: -sizes[n]):
        r = next((r for r, room in enumerate(rooms) if room >= sizes[n]), len(rooms))
        if r == len(rooms):
            rooms.append(T)
        row[n], start[n] = r, T - rooms[r]
        rooms[r] -= sizes[n]
    t = torch.arange(T0, device=ids.device)
    real = t < lengths[:, None]  # (N, T0)
    at = torch.tensor(row, device=ids.device)[:, None] * T + torch.tensor(start, device=ids.device)[:, None] + t
    at = at.clamp(max=len(rooms) * T - 1)  # (N, T0) flat place of each token (padding: clamped, never read)
    sequence = torch.arange(N, device=ids.device)[:, None].expand(N, T0)
    return _rows(ids[real], at[real], t.expand(N, T0)[real], sequence[real], (len(rooms), T), at)


def pack_choices(ids: torch.Tensor, lengths: torch.Tensor, choice_mask: torch.Tensor) -> Packed:
    """Pack multiple-choice sequences ids (B, K, T), right-padded to lengths (B, K), choice_mask (B, K) False for
    dummy choices, so that the context they share is decoded once: a row holds the longest prefix that all of an
    example's choices share (at most all but each choice's last token), then every choice's other tokens.

    Attention within a row sees the context and the choice's own earlier tokens, and positions restart per
    sequence, so each token's state is the one it gets in its own (B, K, T) sequence."""
    B, K, T = ids.shape
    t = torch.arange(T, device=ids.device)
    k = torch.arange(K, device=ids.device)
    lengths = lengths.masked_fill(~choice_mask, 0)
    real = t < lengths[..., None]  # (B, K, T): tokens, not padding
    shortest = lengths.masked_fill(~choice_mask, T).min(1).values  # (B,)
    agree = ((ids == ids[:, :1]) | ~choice_mask[..., None]).all(1) & (t < shortest[:, None] - 1)  # (B, T)
    in_context = agree.long().cumprod(1).bool()  # (B, T): the shared prefix
    keep = real & (~in_context[:, None] | (k == 0)[:, None])  # (B, K, T): choice 0 keeps the context's one copy
    slot = keep.flatten(1).cumsum(1).view(B, K, T) - 1  # place of each kept token in its example's row
    L = int(keep.sum((1, 2)).max())  # the longest row (one host sync)
    first = L * torch.arange(B, device=ids.device)[:, None, None]  # (B, 1, 1) each row's flat start
    at = slot + first  # (B, K, T)
    index = torch.where(in_context[:, None], t, slot) * real + first  # the context's tokens: choice 0's copy
    groups = torch.where(in_context[:, None], CONTEXT, k[:, None]).expand(B, K, T)
    return _rows(ids[keep], at[keep], t.expand(B, K, T)[keep], groups[keep], (B, L), index)


class TaskOutput(NamedTuple):
    """What ``task_logits`` computes for a batch of B examples of S sequences of T tokens."""

    logits: torch.Tensor
    """(B, num_labels), or (B, K) for multiple choice."""
    hidden: torch.Tensor
    """(R, C) the decoder's final states, one row per position decoded."""
    index: torch.Tensor
    """(B, T) or (B, S, T): the row of ``hidden`` of each token of each sequence (for the auxiliary LM loss)."""


def task_logits(
    decoder: Callable[..., torch.Tensor], head: nn.Module, batch: dict[str, torch.Tensor], pack: str = "none"
) -> TaskOutput:
    """Run a task batch through ``decoder`` (ids (N, T) -> hidden (N, T, C); a ``GPT`` to pack) and ``head``.

    batch: ``input_ids`` (B, T) or (B, S, T), ``extract`` (B,) or (B, S), and ``choice_mask`` (B, K) where some
    sequences are padding (multiple choice: it goes to the head too). pack: "none" (every sequence padded to T),
    "sequences" (``pack_sequences``) or "context" (``pack_choices``).
    """
    ids, extract = batch["input_ids"], batch["extract"]
    choice_mask = batch.get("choice_mask")
    flat = ids.reshape(-1, ids.size(-1))  # (N, T), N = B * S: every sequence in one pass
    if pack == "none":
        hidden = decoder(flat)  # (N, T, C)
        index = torch.arange(flat.numel(), device=ids.device).view(ids.shape)
    else:
        if pack == "context":
            mask = choice_mask if choice_mask is not None else torch.ones_like(extract, dtype=torch.bool)
            packed = pack_choices(ids, extract + 1, mask)
        else:  # dummy choices take no room
            lengths = extract + 1 if choice_mask is None else (extract + 1).masked_fill(~choice_mask, 0)
            # short sequences pair up in rows of up to 128 tokens; longer rows would cost attention more than the
            # padding they save (the (rows, H, L, L) scores grow with L squared)
            packed = pack_sequences(flat, lengths.reshape(-1), row_length=min(2 * flat.size(1), 128))
        hidden = decoder(packed.ids, positions=packed.positions, attn_mask=packed.attn_mask)  # (R, L, C)
        index = packed.index.view(ids.shape)
    hidden = hidden.flatten(0, 1)  # (R, C)
    states = hidden[index.gather(-1, extract.unsqueeze(-1)).squeeze(-1)]  # (B, C) or (B, S, C): extract tokens
    logits = head(states) if choice_mask is None else head(states, choice_mask)
    return TaskOutput(logits, hidden, index)
