"""HF openai-gpt import/export: logits parity against transformers' own OpenAIGPTLMHeadModel, both ways."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import string
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import tokenizers
import torch
from safetensors import safe_open
from tokenizers import models

from gpt1.app.model_group import model_config
from gpt1.checkpoints.format import load_checkpoint, save_checkpoint
from gpt1.checkpoints.hf import config_from_hf, config_to_hf, export_hf, hf_tokenizer_json, import_hf
from gpt1.core.errors import CheckpointError
from gpt1.cpu import kernels
from gpt1.cpu.layers import use_cpu_layers
from gpt1.model.decoder import GPT, GPTConfig
from gpt1.model.lstm import LSTM, LSTMConfig
from gpt1.text.openai_text import END_OF_WORD
from gpt1.text.tokenizer import UNK_TOKEN, load_tokenizer, train_bpe

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported: these tests never download
transformers = pytest.importorskip("transformers", reason="the parity tests compare against transformers")

TINY_HF = {"n_positions": 32, "n_embd": 32, "n_layer": 2, "n_head": 2}
TOL = 1e-4


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """vocab.json + merges.txt of a small GPT-1 style BPE (its base vocab only), loaded with the "openai" pipeline."""
    rng = random.Random(0)
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 7))) for _ in range(400)]
    texts = [" ".join(rng.choice(words) for _ in range(12)) + "." for _ in range(400)]
    path = tmp_path_factory.mktemp("tok")
    train_bpe(texts, vocab_size=300).bpe.model.save(str(path))
    return path


@pytest.fixture(scope="module")
def vocab_size(tok_dir: Path) -> int:
    return load_tokenizer(tok_dir).vocab_size


def scramble(model: torch.nn.Module, seed: int = 0) -> None:
    """Perturb every parameter, so biases and LayerNorms are not 0/1 and a swapped or mis-laid weight shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)


def hf_model(vocab_size: int, **overrides: object) -> transformers.OpenAIGPTLMHeadModel:
    config = transformers.OpenAIGPTConfig(vocab_size=vocab_size, **{**TINY_HF, **overrides})
    model = transformers.OpenAIGPTLMHeadModel(config)
    scramble(model)
    return model.eval()


def tokens(vocab_size: int, shape: tuple[int, int] = (2, 16)) -> torch.Tensor:
    return torch.randint(0, vocab_size, shape, generator=torch.Generator().manual_seed(1))


@torch.no_grad()
def assert_parity(model: GPT, hf: transformers.OpenAIGPTLMHeadModel, vocab_size: int) -> None:
    """model's logits are HF's: the plain model's, then (model swapped in place) on gpt1's CPU layers, every kind of
    product on oneDNN where this CPU has it, as the commands run it on the CPU."""
    x = tokens(vocab_size)
    ref = hf(x).logits
    assert ref.std() > 0.1  # the comparisons below are between non-trivial logits
    ours = model.eval().lm_logits(model(x))
    assert ours.shape == ref.shape == (*x.shape, vocab_size)
    assert (ours - ref).abs().max().item() <= TOL
    use_cpu_layers(model)
    with contextlib.ExitStack() as onednn:
        for kind in kernels.KINDS:
            onednn.enter_context(kernels.using(kind, "onednn"))
        assert (model.lm_logits(model(x)) - ref).abs().max().item() <= TOL


@torch.no_grad()
def assert_same_hf(a: transformers.OpenAIGPTLMHeadModel, b: transformers.OpenAIGPTLMHeadModel, vocab_size: int) -> None:
    x = tokens(vocab_size)
    assert torch.equal(a(x).logits, b(x).logits)


def copy_tokenizer(tok_dir: Path, dst: Path) -> None:
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(tok_dir / name, dst / name)


def hf_from_pretrained(path: Path) -> transformers.OpenAIGPTLMHeadModel:
    """Load an exported directory, insisting that every weight matched (the tied lm_head is not reported)."""
    model, info = transformers.OpenAIGPTLMHeadModel.from_pretrained(path, output_loading_info=True)
    assert not any(info.values()), info
    return model.eval()


@pytest.mark.parametrize("afn", ["gelu", "relu"])
def test_import_parity_and_exact_round_trip(tmp_path: Path, tok_dir: Path, vocab_size: int, afn: str) -> None:
    hf = hf_model(vocab_size, afn=afn)
    hf.save_pretrained(tmp_path / "hf")
    copy_tokenizer(tok_dir, tmp_path / "hf")
    import_hf(tmp_path / "hf", tmp_path / "gpt1.ckpt")

    loaded = load_checkpoint(tmp_path / "gpt1.ckpt")
    assert loaded.model.config == GPTConfig(
        vocab_size=vocab_size, n_ctx=32, n_layer=2, n_head=2, n_embd=32, n_inner=128,
        activation={"gelu": "gelu_tanh", "relu": "relu"}[afn],
    )  # fmt: skip
    assert loaded.tokenizer.to_str() == load_tokenizer(tok_dir).to_str()  # no special tokens added
    assert loaded.tokenizer.pipeline == "openai" and loaded.tokenizer.specials == {}
    assert_parity(loaded.model, hf, vocab_size)

    # Exported again, the weights are bit for bit what HF wrote.
    export_hf(tmp_path / "gpt1.ckpt", tmp_path / "back")
    with (
        safe_open(tmp_path / "hf" / "model.safetensors", "pt") as a,
        safe_open(tmp_path / "back" / "model.safetensors", "pt") as b,
    ):
        assert set(a.keys()) == set(b.keys())
        for key in a.keys():
            assert torch.equal(a.get_tensor(key), b.get_tensor(key)), key


@pytest.mark.parametrize("prefixed", [True, False])
def test_import_pytorch_bin(tmp_path: Path, tok_dir: Path, vocab_size: int, prefixed: bool) -> None:
    hf = hf_model(vocab_size)
    state = dict(hf.state_dict() if prefixed else hf.transformer.state_dict())
    assert ("lm_head.weight" in state) == prefixed  # the tied head is present (and must be dropped) with the prefix
    prefix = "transformer." if prefixed else ""
    # Older checkpoints saved the causal-mask and position-id buffers beside the weights.
    state[f"{prefix}h.0.attn.bias"] = torch.ones(32, 32).tril().view(1, 1, 32, 32)
    state[f"{prefix}position_ids"] = torch.arange(32)
    src = tmp_path / "hf"
    hf.config.save_pretrained(src)
    torch.save(state, src / "pytorch_model.bin")
    copy_tokenizer(tok_dir, src)

    import_hf(src, tmp_path / "gpt1.ckpt")
    assert_parity(load_checkpoint(tmp_path / "gpt1.ckpt").model, hf, vocab_size)


def test_import_refuses_an_untied_head(tmp_path: Path, tok_dir: Path, vocab_size: int) -> None:
    hf = hf_model(vocab_size)
    state = {k: v.clone() for k, v in hf.state_dict().items()}
    state["lm_head.weight"] += 1
    hf.config.save_pretrained(tmp_path)
    torch.save(state, tmp_path / "pytorch_model.bin")
    copy_tokenizer(tok_dir, tmp_path)
    with pytest.raises(ValueError, match="tied"):
        import_hf(tmp_path, tmp_path / "gpt1.ckpt")


def test_import_tokenizer_argument(tmp_path: Path, tok_dir: Path, vocab_size: int) -> None:
    hf = hf_model(vocab_size)
    hf.save_pretrained(tmp_path / "hf")  # no tokenizer files beside the weights
    with pytest.raises(CheckpointError, match="no tokenizer"):
        import_hf(tmp_path / "hf", tmp_path / "gpt1.ckpt")

    (tmp_path / "tok.json").write_text(load_tokenizer(tok_dir).to_str())
    import_hf(tmp_path / "hf", tmp_path / "gpt1.ckpt", tokenizer=tmp_path / "tok.json")
    loaded = load_checkpoint(tmp_path / "gpt1.ckpt")
    assert loaded.tokenizer.to_str() == load_tokenizer(tmp_path / "tok.json").to_str()
    assert_parity(loaded.model, hf, vocab_size)

    # The argument overrides src's own (matching) tokenizer: one with special tokens appended no longer fits.
    copy_tokenizer(tok_dir, tmp_path / "hf")
    grown = load_tokenizer(tok_dir)
    grown.add_special_tokens(["start", "extract"])
    (tmp_path / "grown.json").write_text(grown.to_str())
    with pytest.raises(ValueError, match=f"has {vocab_size + 2} tokens but the model .* {vocab_size}"):
        import_hf(tmp_path / "hf", tmp_path / "other.ckpt", tokenizer=tmp_path / "grown.json")
    assert not (tmp_path / "other.ckpt").exists()


def test_import_errors(tmp_path: Path, tok_dir: Path, vocab_size: int) -> None:
    with pytest.raises(CheckpointError, match="config.json does not exist"):
        import_hf(tmp_path, tmp_path / "gpt1.ckpt")
    hf_model(vocab_size).config.save_pretrained(tmp_path)
    copy_tokenizer(tok_dir, tmp_path)
    with pytest.raises(CheckpointError, match="neither model.safetensors nor pytorch_model.bin"):
        import_hf(tmp_path, tmp_path / "gpt1.ckpt")
    hf_model(vocab_size + 3).save_pretrained(tmp_path)  # weights and config.json of a bigger vocab than vocab.json
    with pytest.raises(ValueError, match=f"has {vocab_size} tokens but the model .* {vocab_size + 3}"):
        import_hf(tmp_path, tmp_path / "gpt1.ckpt")


def test_config_from_hf() -> None:
    assert config_from_hf({"model_type": "openai-gpt"}) == model_config("gpt1")  # HF's defaults are the paper's model
    assert config_from_hf({"afn": "gelu_new", "n_embd": 64, "n_head": 4}).n_inner == 256
    assert config_from_hf({"afn": "relu"}).activation == "relu"
    with pytest.raises(ValueError, match="model_type 'gpt2'"):
        config_from_hf({"model_type": "gpt2"})
    with pytest.raises(ValueError, match="afn='silu'"):
        config_from_hf({"afn": "silu"})


@pytest.mark.parametrize(("activation", "pad"), [("gelu_tanh", 1), ("gelu_tanh", 64), ("relu", 1)])
def test_export_parity(tmp_path: Path, tok_dir: Path, activation: str, pad: int) -> None:
    tok = load_tokenizer(tok_dir)
    tok.add_special_tokens(["start", "delimiter", "extract"])  # as fine-tuning grows the vocab
    vocab_size = tok.vocab_size
    config = GPTConfig(
        vocab_size=vocab_size, n_ctx=32, n_layer=2, n_head=2, n_embd=32, n_inner=128, activation=activation,
        pad_vocab_to_multiple=pad,
    )  # fmt: skip
    torch.manual_seed(0)
    model = GPT(config)
    scramble(model)
    assert (model.tokens_embed.weight.size(0) > vocab_size) == (pad > 1)  # padded rows that export must drop
    save_checkpoint(tmp_path / "gpt1.ckpt", model, tok)
    export_hf(tmp_path / "gpt1.ckpt", tmp_path / "hf")

    dst = tmp_path / "hf"
    assert sorted(p.name for p in dst.iterdir()) == [
        "config.json", "generation_config.json", "merges.txt", "model.safetensors", "tokenizer.json",
        "tokenizer_config.json", "vocab.json"
    ]  # fmt: skip
    assert json.loads((dst / "config.json").read_text())["afn"] == {"gelu_tanh": "gelu", "relu": "relu"}[activation]
    with safe_open(dst / "model.safetensors", "pt") as f:
        assert f.metadata() == {"format": "pt"}
        assert all(k.startswith("transformer.") for k in f.keys()) and "lm_head.weight" not in f.keys()
        assert f.get_slice("transformer.tokens_embed.weight").get_shape() == [vocab_size, 32]
        assert f.get_slice("transformer.h.0.mlp.c_fc.weight").get_shape() == [32, 128]  # Conv1D: (in, out)
    assert_parity(model, hf_from_pretrained(dst), vocab_size)

    hf_tok = transformers.AutoTokenizer.from_pretrained(dst)
    text = "some text"  # the export's tokenizer.json approximates the original pipeline (tests/test_hf_defaults.py)
    assert hf_tok(text)["input_ids"] == tok.encode(text)
    assert hf_tok.convert_tokens_to_ids("_classify_") == tok.special_id("extract")
    # Read back, the directory keeps the original pipeline (vocab.json + merges.txt win over tokenizer.json) and
    # takes the special tokens from tokenizer.json.
    assert load_tokenizer(dst).to_str() == tok.to_str()


def test_export_of_a_trained_tokenizer_round_trips(tmp_path: Path) -> None:
    """A "gpt1"-pipeline tokenizer is exported as tokenizer.json only (vocab.json + merges.txt would read back as
    the "openai" pipeline), which HF's fast tokenizer and load_tokenizer both read as it is."""
    tok = train_bpe(["the quick brown fox jumps over the lazy dog, didn't it?"] * 20, vocab_size=80)
    tok.add_special_tokens(["start", "delimiter", "extract"])
    config = GPTConfig(vocab_size=tok.vocab_size, n_ctx=16, n_layer=1, n_head=2, n_embd=16, n_inner=64)
    save_checkpoint(tmp_path / "gpt1.ckpt", GPT(config), tok)
    export_hf(tmp_path / "gpt1.ckpt", tmp_path / "hf")
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == [
        "config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"
    ]  # fmt: skip
    assert load_tokenizer(tmp_path / "hf").to_str() == tok.to_str()
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    text = "The lazy fox didn't jump."
    assert hf_tok(text)["input_ids"] == tok.encode(text)
    assert hf_tok.convert_tokens_to_ids("_delimiter_") == tok.special_id("delimiter")
    assert json.loads(hf_tokenizer_json(tok))["added_tokens"][0]["content"] == "_eod_"


def test_export_refuses_what_hf_cannot_express(tmp_path: Path, tok_dir: Path, vocab_size: int) -> None:
    tok = load_tokenizer(tok_dir)
    base = GPTConfig(vocab_size=vocab_size, n_ctx=32, n_layer=1, n_head=2, n_embd=32, n_inner=128)
    for bad, match in [(replace(base, n_inner=64), "n_inner=64"), (replace(base, activation="gelu"), "'gelu'")]:
        save_checkpoint(tmp_path / "gpt1.ckpt", GPT(bad), tok)
        with pytest.raises(ValueError, match=match):
            export_hf(tmp_path / "gpt1.ckpt", tmp_path / "hf")
        assert not (tmp_path / "hf").exists()
    save_checkpoint(tmp_path / "lstm.ckpt", LSTM(LSTMConfig(vocab_size=vocab_size, n_embd=32, hidden_size=16)), tok)
    with pytest.raises(CheckpointError, match="lstm.ckpt holds the LSTM baseline"):
        export_hf(tmp_path / "lstm.ckpt", tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_conversion_does_not_need_transformers() -> None:
    code = "import sys, gpt1.checkpoints.hf; assert 'transformers' not in sys.modules, 'it imported transformers'"
    subprocess.run([sys.executable, "-c", code], check=True)


def full_size_tokenizer(vocab_size: int) -> tokenizers.Tokenizer:
    """A BPE with exactly the original's 40,478 entries (letters, then filler words), without merges."""
    vocab = [UNK_TOKEN, *string.ascii_lowercase, *(c + END_OF_WORD for c in string.ascii_lowercase)]
    vocab += [f"w{i}{END_OF_WORD}" for i in range(vocab_size - len(vocab))]
    bpe = models.BPE({t: i for i, t in enumerate(vocab)}, [], unk_token=UNK_TOKEN, end_of_word_suffix=END_OF_WORD)
    return tokenizers.Tokenizer(bpe)


def test_full_size_both_ways(tmp_path: Path) -> None:
    """The paper's 117M model: HF -> gpt1 -> HF, logits equal at every step."""
    config = model_config("gpt1")
    torch.manual_seed(0)
    hf = transformers.OpenAIGPTLMHeadModel(transformers.OpenAIGPTConfig.from_dict(config_to_hf(config))).eval()
    hf.save_pretrained(tmp_path / "hf")
    full_size_tokenizer(config.vocab_size).model.save(str(tmp_path / "hf"))

    import_hf(tmp_path / "hf", tmp_path / "gpt1.ckpt")
    model = load_checkpoint(tmp_path / "gpt1.ckpt").model
    assert model.config == config
    assert model.num_params() == 116_534_784
    assert_parity(model, hf, config.vocab_size)
    del model

    export_hf(tmp_path / "gpt1.ckpt", tmp_path / "back")
    assert_same_hf(hf_from_pretrained(tmp_path / "back"), hf, config.vocab_size)
