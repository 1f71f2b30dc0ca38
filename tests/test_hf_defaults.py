"""The HF export as transformers' users run it, with its defaults (transformers itself, offline, local files):
``AutoTokenizer`` gives gpt1's ids and text, ``pipeline("text-generation")`` generates within the model's positions
and returns the prompt as typed with the continuation, and every field of config.json says what the model is."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from gpt1.checkpoints.format import save_checkpoint
from gpt1.checkpoints.hf import HF_SAMPLING, export_hf
from gpt1.model.decoder import GPT, GPTConfig
from gpt1.text.tokenizer import Tokenizer, load_tokenizer, train_bpe

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported: these tests never download
transformers = pytest.importorskip("transformers", reason="the export is checked with transformers itself")

TEXTS = [
    "She said—quietly—that the 3.14 café was naïve… “Don’t,” he wrote; ‘it’s 1,000,000 to 1’.",
    "Ünïcödé, résumé and façade cost 10–20 euros (2nd–3rd May), 50% off!!",
    "Emoji 😀 and 日本語のテキスト sit beside ASCII: x―y´z, e-mail, U.S. Dr. Smith at 5 p.m.",
    "line one\n\nline two\twith a tab and a non\u00a0breaking space -- and 1970s' hats",
]
"""Dashes, curly quotes, accents, digits, emoji, CJK, odd whitespace."""


def export(tmp: Path, tokenizer: Tokenizer, n_ctx: int = 24) -> Path:
    """A tiny random GPT with ``tokenizer``, exported to tmp/hf."""
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, n_ctx=n_ctx, n_layer=1, n_head=2, n_embd=16, n_inner=64)
    save_checkpoint(tmp / "gpt1.ckpt", GPT(config), tokenizer)
    export_hf(tmp / "gpt1.ckpt", tmp / "hf")
    return tmp / "hf"


@pytest.fixture(scope="module")
def trained(sample_data: Path) -> Tokenizer:
    text = (sample_data / "books/train/northanger_abbey.txt").read_text(encoding="utf-8")
    return train_bpe([text], vocab_size=2000)


@pytest.fixture(scope="module")
def trained_export(trained: Tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export(tmp_path_factory.mktemp("trained"), trained)


def assert_same_ids_and_text(tokenizer: Tokenizer, hf, texts: list[str]) -> None:
    """``hf`` encodes every text to gpt1's ids, and decodes ids to the text they add after a word in gpt1's decode:
    gpt1's text behind one space (what lets transformers' pipeline append a continuation decoded on its own)."""
    ids = tokenizer.encode_batch(texts)
    assert hf(texts, add_special_tokens=False)["input_ids"] == ids
    assert [hf(t)["input_ids"] for t in texts] == ids  # its defaults add no token
    so = tokenizer.encode("so")
    for these in ids:
        in_context = tokenizer.decode(so + these)[len(tokenizer.decode(so)) :]
        assert hf.decode(these) == in_context == " " + tokenizer.decode(these)
        assert hf.decode([*these, *tokenizer.specials.values()], skip_special_tokens=True) == in_context


def test_autotokenizer_gives_the_trained_bpes_ids_and_text(trained, trained_export):
    hf = transformers.AutoTokenizer.from_pretrained(trained_export)
    assert isinstance(hf, transformers.PreTrainedTokenizerFast)
    assert_same_ids_and_text(trained, hf, TEXTS)
    assert hf.decode(trained.encode("3.14 - i don't know , do you ?")) == " 3. 14 - i don't know, do you?"
    assert hf.convert_ids_to_tokens(trained.specials["eod"]) == hf.eos_token == hf.bos_token == "_eod_"
    assert load_tokenizer(trained_export).to_str() == trained.to_str()  # read back: gpt1's decoder, not HF's


def test_autotokenizer_gives_the_original_pipelines_ids_on_the_golden_lines(openai_vocab, tmp_path):
    """OpenAI's vocab: gpt1 runs the original ftfy + spaCy pipeline, which transformers cannot; the export's rules
    (approximate_in_tokenizers) give the original's ids on every golden line and on TEXTS (measured on more text:
    experiments/results/export_tokenizers.md)."""
    pytest.importorskip("spacy", reason="the original pipeline needs gpt1[openai]")
    openai = load_tokenizer(openai_vocab)
    hf_dir = tmp_path / "hf"
    hf_dir.mkdir()
    from gpt1.checkpoints.hf import hf_tokenizer_json

    (hf_dir / "tokenizer.json").write_text(hf_tokenizer_json(openai), encoding="utf-8")
    (hf_dir / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    hf = transformers.AutoTokenizer.from_pretrained(hf_dir)
    golden = [json.loads(line) for line in (openai_vocab / "golden.jsonl").read_text().splitlines()]
    assert hf([g["text"] for g in golden], add_special_tokens=False)["input_ids"] == [g["ids"] for g in golden]
    assert_same_ids_and_text(openai, hf, TEXTS)


def test_the_pipeline_generates_with_its_defaults_within_the_positions(trained, trained_export):
    generate = transformers.pipeline("text-generation", model=str(trained_export), device="cpu")
    transformers.set_seed(0)
    for prompt in ("She said—", "the rain"):
        (out,) = generate(prompt)  # no arguments: generation_config.json's
        text = out["generated_text"]
        assert text.startswith(prompt + " ") and len(text) > len(prompt) + 1, text  # as typed, a space, more words
        (ids,) = generate(prompt, return_tensors=True)  # the same generation's ids (not the text's)
        assert len(trained.encode(prompt)) < len(ids["generated_token_ids"]) <= 24  # n_ctx: no position past it
    config = generate.model.generation_config
    assert config.eos_token_id == config.pad_token_id == trained.specials["eod"]  # it stops at a document's end
    assert (config.max_length, config.do_sample, config.top_k, config.temperature) == (24, True, 40, 1.0)


def test_the_sampling_defaults_are_gpt1_generates():
    from gpt1.app.config import GenerateConfig

    assert HF_SAMPLING == {"do_sample": True, "temperature": GenerateConfig.temperature, "top_k": GenerateConfig.top_k}


def test_every_field_of_config_json_says_what_the_model_is(trained_export):
    """Each key is one of the model's settings as HF's OpenAIGPTConfig reads it; afn "gelu" is HF's gelu_new, the
    tanh approximation, which is gpt1's gelu_tanh (the original's gelu)."""
    written = json.loads((trained_export / "config.json").read_text())
    eod = written["eos_token_id"]
    assert written == {
        "architectures": ["OpenAIGPTLMHeadModel"], "model_type": "openai-gpt", "vocab_size": 2001,
        "n_positions": 24, "n_embd": 16, "n_layer": 1, "n_head": 2, "afn": "gelu", "resid_pdrop": 0.1,
        "embd_pdrop": 0.1, "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-5, "initializer_range": 0.02,
        "tie_word_embeddings": True, "bos_token_id": eod, "eos_token_id": eod,
    }  # fmt: skip
    from transformers.models.openai import modeling_openai

    hf = transformers.AutoModelForCausalLM.from_pretrained(trained_export)
    act = hf.transformer.h[0].mlp.act
    assert act is modeling_openai.ACT_FNS["gelu"]
    x = torch.linspace(-6, 6, 101)
    torch.testing.assert_close(act(x), torch.nn.functional.gelu(x, approximate="tanh"))
    assert hf.config.n_positions == hf.transformer.positions_embed.num_embeddings == 24
