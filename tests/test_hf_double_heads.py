"""HF ``OpenAIGPTDoubleHeadsModel`` import: gpt1's decoder + MultipleChoiceHead give transformers' logits."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from gpt1.checkpoints.format import load_checkpoint
from gpt1.checkpoints.hf import (
    MC_HEAD_NAME,
    config_from_hf,
    hf_tokenizer_json,
    import_double_heads,
    import_hf,
    is_double_heads,
)
from gpt1.model.decoder import GPT
from gpt1.model.heads import MultipleChoiceHead
from gpt1.tasks.spec import TASK_SPECIAL_TOKENS
from gpt1.text.tokenizer import train_bpe
from gpt1.training.packing import task_logits

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported: these tests never download
transformers = pytest.importorskip("transformers", reason="the parity test compares against transformers")

VOCAB = 100 + 3  # a base vocab and the start, delimiter and extract tokens
TINY_HF = {"vocab_size": VOCAB, "n_positions": 32, "n_embd": 32, "n_layer": 2, "n_head": 2}
TOL = 1e-5


def double_heads(**overrides: object) -> transformers.OpenAIGPTDoubleHeadsModel:
    """A random tiny DoubleHeads model, every parameter perturbed so that no weight is a trivial 0 or 1."""
    torch.manual_seed(0)
    model = transformers.OpenAIGPTDoubleHeadsModel(transformers.OpenAIGPTConfig(**{**TINY_HF, **overrides}))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)
    return model.eval()


def import_into_gpt1(state: dict[str, torch.Tensor], hf_config: dict) -> tuple[GPT, MultipleChoiceHead]:
    decoder_state, head_state = import_double_heads(state, hf_config)
    model = GPT(config_from_hf(hf_config))
    model.load_state_dict(decoder_state)  # strict: every decoder weight mapped, nothing left over
    head = MultipleChoiceHead(model.config.n_embd)
    head.load_state_dict(head_state)
    return model.eval(), head.eval()


@pytest.mark.parametrize("source", ["save_pretrained", "state_dict"])
@torch.no_grad()
def test_double_heads_parity(tmp_path: Path, source: str) -> None:
    hf = double_heads()
    if source == "save_pretrained":  # transformers 5 writes the tied embedding as lm_head.weight only
        hf.save_pretrained(tmp_path)
        state = load_file(tmp_path / "model.safetensors")
        hf_config = json.loads((tmp_path / "config.json").read_text())
        assert "transformer.tokens_embed.weight" not in state
    else:  # what older checkpoints (pytorch_model.bin) hold: both names of the tied embedding
        state, hf_config = hf.state_dict(), hf.config.to_dict()
    assert is_double_heads(state)
    model, head = import_into_gpt1(dict(state), hf_config)

    B, K, T = 3, 4, 12
    g = torch.Generator().manual_seed(1)
    input_ids = torch.randint(0, VOCAB, (B, K, T), generator=g)
    mc_token_ids = torch.randint(T // 2, T, (B, K), generator=g)  # the extract token of each choice
    ref = hf(input_ids, mc_token_ids=mc_token_ids)

    out = task_logits(model, head, {"input_ids": input_ids, "extract": mc_token_ids})
    mc_logits, lm_logits = out.logits, model.lm_logits(out.hidden[out.index])  # (B, K), (B, K, T, V)
    assert mc_logits.shape == ref.mc_logits.shape == (B, K)
    assert ref.mc_logits.std() > 0.1 and ref.logits.std() > 0.1  # non-trivial logits are compared
    assert (mc_logits - ref.mc_logits).abs().max().item() <= TOL
    assert (lm_logits - ref.logits).abs().max().item() <= TOL


def test_double_heads_refuses_other_heads() -> None:
    hf = double_heads(summary_activation="tanh")  # a tanh after the projection: not gpt1's head
    with pytest.raises(ValueError, match="summary_activation"):
        import_double_heads(hf.state_dict(), hf.config.to_dict())
    hf = double_heads(summary_proj_to_labels=False)  # a projection to n_embd, not to one score
    with pytest.raises(ValueError, match=r"not a Linear\(n_embd, 1\).*\(32, 32\)"):
        import_double_heads(hf.state_dict())


@torch.no_grad()
def test_convert_from_hf_keeps_the_multiple_choice_head(tmp_path: Path) -> None:
    """``gpt1 convert from-hf`` of a DoubleHeads directory: the head lands in the checkpoint's heads, and the
    loaded checkpoint scores the choices as transformers does, special tokens included."""
    texts = [f"the {w} sat on the {v} ." for w in ("cat", "dog", "bird", "man") for v in ("mat", "log", "hill")] * 5
    tok = train_bpe(texts, vocab_size=60)
    tok.add_special_tokens(TASK_SPECIAL_TOKENS)  # as the original fine-tuned model's vocab: base + specials
    hf = double_heads(vocab_size=tok.vocab_size)
    hf.save_pretrained(tmp_path / "hf")
    (tmp_path / "hf" / "tokenizer.json").write_text(hf_tokenizer_json(tok))
    import_hf(tmp_path / "hf", tmp_path / "gpt1.ckpt")

    loaded = load_checkpoint(tmp_path / "gpt1.ckpt")
    assert loaded.tokenizer.specials == tok.specials
    assert sorted(loaded.heads) == [f"{MC_HEAD_NAME}.linear.bias", f"{MC_HEAD_NAME}.linear.weight"]
    head = MultipleChoiceHead(loaded.model.config.n_embd).eval()
    head.load_state_dict({k.removeprefix(f"{MC_HEAD_NAME}."): v for k, v in loaded.heads.items()})

    start, delim, extract = (tok.special_id(role) for role in ("start", "delimiter", "extract"))
    context, choices = tok.encode("the cat sat on the"), [tok.encode(c) for c in ("mat .", "dog .", "hill .")]
    rows = [[start, *context, delim, *c, extract] for c in choices]
    T = max(map(len, rows))
    input_ids = torch.tensor([[row + [0] * (T - len(row)) for row in rows]])  # (1, K, T), right-padded
    mc_token_ids = torch.tensor([[len(row) - 1 for row in rows]])  # (1, K)
    ref = hf(input_ids, mc_token_ids=mc_token_ids).mc_logits
    for pack in ("none", "sequences", "context"):  # padded, packed, the shared context once
        ours = task_logits(loaded.model, head, {"input_ids": input_ids, "extract": mc_token_ids}, pack=pack).logits
        assert (ours - ref).abs().max().item() <= TOL
