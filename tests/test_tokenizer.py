"""The GPT-1 style BPE: training, normalisation, special tokens, save/load, the original-vocab import."""

import json

import pytest

from gpt1.tokenizer import (
    SPECIAL_TOKENS,
    TokenizerConfig,
    add_special_tokens,
    build_tokenizer,
    load_tokenizer,
    special_token_ids,
    train_bpe,
)


@pytest.fixture(scope="module")
def tokenizer(sample_data):
    text = (sample_data / "books" / "train" / "northanger_abbey.txt").read_text()
    return train_bpe([text], vocab_size=1000)


def test_trained_vocab_has_the_base_size_then_the_special_tokens_appended(tokenizer):
    assert tokenizer.get_vocab_size() == 1000 + len(SPECIAL_TOKENS)
    assert tokenizer.token_to_id("<unk>") == 0  # as in the original vocab
    assert sorted(special_token_ids(tokenizer).values()) == list(range(1000, 1000 + len(SPECIAL_TOKENS)))


def test_words_end_with_the_end_of_word_suffix_and_text_is_lowercased(tokenizer):
    tokens = tokenizer.encode("Catherine Morland").tokens
    assert all(t == t.lower() for t in tokens)
    assert tokens[-1].endswith("</w>") and "catherine</w>" in tokens


def test_round_trip_gives_the_standardised_text(tokenizer):
    text = "It is a truth\u2014universally acknowledged\u2026 that\u00b4s \ufb01ne, Caf\u00e9!"
    decoded = tokenizer.decode(tokenizer.encode(text).ids)
    # dashes -> "-", ellipsis -> "...", acute -> "'", ligature unfolded (NFKC), accents stripped, punctuation split
    assert decoded.split() == "it is a truth - universally acknowledged . . . that ' s fine , cafe !".split()


def test_special_tokens_are_single_ids_never_split(tokenizer):
    ids = special_token_ids(tokenizer)
    enc = tokenizer.encode(f"{SPECIAL_TOKENS['start']} she said {SPECIAL_TOKENS['delimiter']} yes {SPECIAL_TOKENS['extract']}")
    assert enc.ids[0] == ids["start"] and enc.ids[-1] == ids["extract"] and ids["delimiter"] in enc.ids
    assert "_" not in tokenizer.decode(enc.ids, skip_special_tokens=True)


def test_save_and_load_round_trip(tokenizer, tmp_path):
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    for path in (tmp_path / "tokenizer.json", tmp_path):
        again = load_tokenizer(path)
        assert again.to_str() == tokenizer.to_str()


def test_original_vocab_import_keeps_ids_and_gets_special_tokens_appended(tokenizer, tmp_path):
    tokenizer.model.save(str(tmp_path))  # vocab.json + merges.txt, the layout of HF's openai-gpt
    base = len(json.loads((tmp_path / "vocab.json").read_text()))
    imported = load_tokenizer(tmp_path)
    assert imported.get_vocab_size() == base  # imported as is
    text = "she was fond of all boy's plays"
    assert imported.encode(text).ids == tokenizer.encode(text).ids
    assert add_special_tokens(imported) == base + len(SPECIAL_TOKENS)
    assert special_token_ids(imported)["start"] == base  # appended after the base vocab, as the original did
    assert add_special_tokens(imported) == base + len(SPECIAL_TOKENS)  # idempotent


def test_build_tokenizer_loads_or_trains(tokenizer, tmp_path):
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    assert build_tokenizer(TokenizerConfig(path=str(tmp_path / "tokenizer.json"))).to_str() == tokenizer.to_str()
    trained = build_tokenizer(TokenizerConfig(vocab_size=300), lambda: ["a tiny corpus of words"] * 50)
    assert trained.get_vocab_size() <= 300 + len(SPECIAL_TOKENS)
    with pytest.raises(ValueError, match="tokenizer.path"):
        build_tokenizer(TokenizerConfig())
    with pytest.raises(FileNotFoundError, match="tokenizer.path"):
        load_tokenizer(tmp_path / "nowhere")


def test_missing_special_tokens_are_reported(tmp_path, tokenizer):
    tokenizer.model.save(str(tmp_path))
    with pytest.raises(ValueError, match="add_special_tokens"):
        special_token_ids(load_tokenizer(tmp_path))


def test_training_is_deterministic(sample_data):
    """Same corpus, same ids: the trainer's hash-ordered alphabet is renumbered canonically."""
    text = (sample_data / "books" / "train" / "the_war_of_the_worlds.txt").read_text()
    assert train_bpe([text], vocab_size=600).to_str() == train_bpe([text], vocab_size=600).to_str()
