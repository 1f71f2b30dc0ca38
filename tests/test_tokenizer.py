"""The tokenizer: trained BPEs ("gpt1" pipeline), OpenAI's vocab with the original pipeline ("openai"), special
tokens as ids after the vocabulary, save/load (including format-1 tokenizers), decoding."""

import json
import pickle
import shutil
import sys

import pytest
import tokenizers

from gpt1.core.errors import ConfigError, UserError
from gpt1.text.tokenizer import (
    BPE_PASSES,
    SPECIAL_TOKENS,
    Tokenizer,
    TokenizerConfig,
    build_tokenizer,
    load_tokenizer,
    prompt_ids,
    train_bpe,
)

GOLDEN_LINES = 215


@pytest.fixture(scope="module")
def tokenizer(sample_data):
    text = (sample_data / "books" / "train" / "northanger_abbey.txt").read_text()
    return train_bpe([text], vocab_size=1000)


@pytest.fixture(scope="module")
def openai(openai_vocab) -> Tokenizer:
    return load_tokenizer(openai_vocab)


def copy(tok: Tokenizer) -> Tokenizer:
    return Tokenizer.from_str(tok.to_str())


def test_a_trained_vocab_has_the_base_size_then_only_the_eod_token(tokenizer):
    assert tokenizer.pipeline == "gpt1"
    assert tokenizer.base_vocab_size == 1000 and tokenizer.vocab_size == 1001
    assert tokenizer.specials == {"eod": 1000}  # pre-training adds eod only; fine-tuning adds the rest later
    assert tokenizer.bpe.token_to_id("<unk>") == 0  # as in the original vocab


def test_words_end_with_the_end_of_word_suffix_and_text_is_lowercased(tokenizer):
    tokens = [tokenizer.bpe.id_to_token(i) for i in tokenizer.encode("Catherine Morland")]
    assert all(t == t.lower() for t in tokens)
    assert tokens[-1].endswith("</w>") and "catherine</w>" in tokens


def test_round_trip_gives_the_standardised_text_with_spaces_cleaned(tokenizer):
    text = "It is a truth\u2014universally acknowledged\u2026 that\u00b4s \ufb01ne, Caf\u00e9!"
    # dashes -> "-", ellipsis -> "...", acute -> "'", ligature unfolded (NFKC), accents stripped; the spaces the
    # pre-tokenizer puts around punctuation are cleaned as transformers' clean_up_tokenization does
    assert tokenizer.decode(tokenizer.encode(text)) == "it is a truth - universally acknowledged... that's fine, cafe!"
    assert tokenizer.decode(tokenizer.encode("I don't know, I hope.")) == "i don't know, i hope."


def test_text_that_reads_like_a_special_token_is_text(tokenizer):
    tok = copy(tokenizer)
    tok.add_special_tokens(["start", "delimiter", "extract"])
    ids = tok.encode("_start_ she said _delimiter_ yes _classify_")
    assert max(ids) < tok.base_vocab_size  # never a special id: only the input transformations insert those
    assert ids == tok.encode("_ start _ she said _ delimiter _ yes _ classify _")


def test_special_tokens_are_appended_in_order_and_decoding_skips_them(tokenizer):
    tok = copy(tokenizer)
    assert tok.add_special_tokens(["start", "delimiter", "extract", "eod"]) == 1004  # eod is there already
    assert tok.specials == {"eod": 1000, "start": 1001, "delimiter": 1002, "extract": 1003}
    assert tok.add_special_tokens(["start"]) == 1004  # idempotent
    ids = [tok.special_id("start"), *tok.encode("she said"), tok.special_id("extract")]
    assert tok.decode(ids) == "she said"
    with pytest.raises(ValueError, match="unknown special token role 'pad'"):
        tok.add_special_tokens(["pad"])  # padding is id 0, masked: not a token


def test_a_missing_special_token_is_named(tokenizer):
    with pytest.raises(ValueError, match="no 'start' token"):
        tokenizer.special_id("start")


def test_to_str_from_str_round_trip_keeps_pipeline_and_specials(tokenizer):
    tok = copy(tokenizer)
    tok.add_special_tokens(["start", "extract"])
    again = Tokenizer.from_str(tok.to_str())
    assert again.to_str() == tok.to_str()
    assert (again.pipeline, again.specials, again.vocab_size) == ("gpt1", tok.specials, 1003)
    text = "Catherine was fond of all boy's plays."
    assert again.encode(text) == tok.encode(text)


def test_a_format_1_tokenizer_converts(tokenizer):
    """Format-1 checkpoints hold a plain `tokenizers` JSON whose added tokens were the five special tokens; `_pad_`
    is no longer a token, so its id stays unused and the vocabulary keeps its size."""
    old = tokenizers.Tokenizer.from_str(tokenizer.bpe.to_str())
    old.add_special_tokens(["<unk>", "_start_", "_delimiter_", "_classify_", "_pad_", "_eod_"])
    assert old.get_vocab_size() == 1005
    tok = Tokenizer.from_str(old.to_str())
    assert tok.pipeline == "gpt1" and tok.vocab_size == 1005
    assert tok.specials == {"start": 1000, "delimiter": 1001, "extract": 1002, "eod": 1004}
    assert tok.encode("_start_ she _eod_") == tokenizer.encode("_start_ she _eod_")  # now text, not special ids
    assert tok.add_special_tokens(["start"]) == 1005


def test_unknown_added_tokens_are_refused(tokenizer, tmp_path):
    bpe = tokenizers.Tokenizer.from_str(tokenizer.bpe.to_str())
    bpe.add_special_tokens(["[CLS]"])
    bpe.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(ConfigError, match=r"tokenizer.json is not a tokenizer JSON file.*\[CLS\]"):
        load_tokenizer(tmp_path / "tokenizer.json")


def test_save_and_load(tokenizer, tmp_path):
    (tmp_path / "gpt1.json").write_text(tokenizer.to_str())
    assert load_tokenizer(tmp_path / "gpt1.json").to_str() == tokenizer.to_str()
    tokenizer.bpe.save(str(tmp_path / "tokenizer.json"))  # a plain tokenizer.json, in a directory
    assert load_tokenizer(tmp_path).bpe.to_str() == tokenizer.bpe.to_str()
    with pytest.raises(ConfigError, match="tokenizer.path"):
        load_tokenizer(tmp_path / "nowhere")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match="bad.json is not a tokenizer JSON"):
        load_tokenizer(tmp_path / "bad.json")


def test_vocab_files_load_with_the_openai_pipeline_and_win_over_a_tokenizer_json(tokenizer, tmp_path):
    """vocab.json + merges.txt (HF's names for OpenAI's files) select the original pipeline; a tokenizer.json beside
    them (HF's approximation, as in HF's openai-gpt snapshot) does not replace it, but gives its special tokens."""
    tokenizer.bpe.model.save(str(tmp_path))  # vocab.json + merges.txt
    imported = load_tokenizer(tmp_path)
    assert (imported.pipeline, imported.vocab_size, imported.specials) == ("openai", 1000, {})
    assert imported.encode("she was fond of all plays") == tokenizer.encode("she was fond of all plays")
    assert imported.encode("don't") != tokenizer.encode("don't")  # spaCy: do n't; BERT's pre-tokenizer: don ' t

    beside = copy(tokenizer)
    beside.add_special_tokens(["start"])
    from gpt1.checkpoints.hf import hf_tokenizer_json

    (tmp_path / "tokenizer.json").write_text(hf_tokenizer_json(beside))
    both = load_tokenizer(tmp_path)
    assert both.pipeline == "openai" and both.specials == {"eod": 1000, "start": 1001}


def test_the_original_file_names_load(openai_vocab, tmp_path):
    for name in ("encoder_bpe_40000.json", "vocab_40000.bpe"):
        shutil.copy(openai_vocab / name, tmp_path / name)
    tok = load_tokenizer(tmp_path)
    assert (tok.pipeline, tok.vocab_size, tok.specials) == ("openai", 40478, {})


def test_openai_pipeline_matches_the_original_on_golden_lines(openai, openai_vocab):
    """Every line of golden.jsonl (encoded by the original finetune-transformer-lm code) gets the same ids."""
    golden = [json.loads(line) for line in (openai_vocab / "golden.jsonl").read_text().splitlines()]
    assert len(golden) == GOLDEN_LINES
    ours = openai.encode_batch([g["text"] for g in golden])
    mismatched = [g["text"][:60] for g, ids in zip(golden, ours, strict=True) if ids != g["ids"]]
    assert not mismatched, f"{len(mismatched)}/{len(golden)} lines differ, e.g. {mismatched[:3]}"


def test_openai_pipeline_details(openai):
    newline = openai.bpe.token_to_id("\n</w>")
    assert openai.encode("one\n\n  two") == [*openai.encode("one"), newline, *openai.encode("two")]
    assert openai.encode("don't") == [openai.bpe.token_to_id("do</w>"), openai.bpe.token_to_id("n't</w>")]
    assert openai.encode("\u2603") == [0]  # a piece outside the vocab: id 0, as the original's encoder.get(t, 0)
    assert openai.decode(openai.encode("\u201cI don\u2019t know,\u201d she said.")) == '" i don\'t know, " she said.'
    again = pickle.loads(pickle.dumps(openai))  # travels to data-loading workers
    assert again.encode("the end.") == openai.encode("the end.")


def test_openai_pipeline_without_its_extra_says_what_to_install(openai_vocab, monkeypatch):
    monkeypatch.setitem(sys.modules, "spacy", None)  # as if not installed
    tok = load_tokenizer(openai_vocab)  # loading needs neither; encoding does
    with pytest.raises(UserError, match=r'pip install "gpt1\[openai\]"'):
        tok.encode("text")


def test_build_tokenizer_loads_or_trains_with_the_eod_token(tokenizer, tmp_path):
    tokenizer.bpe.save(str(tmp_path / "tokenizer.json"))
    loaded = build_tokenizer(TokenizerConfig(path=str(tmp_path / "tokenizer.json")))
    assert loaded.specials == {"eod": 1000} and loaded.to_str() == tokenizer.to_str()
    trained = build_tokenizer(TokenizerConfig(vocab_size=300), lambda: ["a tiny corpus of words"] * 50)
    assert list(trained.specials) == ["eod"] and trained.vocab_size <= 300 + 1
    with pytest.raises(ConfigError, match="tokenizer.path"):
        build_tokenizer(TokenizerConfig())


def test_an_empty_prompt_starts_from_the_eod_token(tokenizer):
    assert prompt_ids(tokenizer, "") == [tokenizer.special_id("eod")]
    assert prompt_ids(tokenizer, "she") == tokenizer.encode("she")
    without = Tokenizer(tokenizer.bpe)
    with pytest.raises(UserError, match="no eod token"):
        prompt_ids(without, "")


def test_training_is_deterministic(sample_data):
    """Same corpus, same merges and ids. tokenizers' trainer breaks ties between merges by ids it gives in hash order,
    different in each trainer: on this novel at 512 it picked "it"+"s</w>" before "it"+"e</w>" in about half the
    trainings before gpt1 numbered its units (8 trainings then gave 2 tokenizers, but with odds of 1 in 128)."""
    text = (sample_data / "books" / "train" / "northanger_abbey.txt").read_text()
    assert len({train_bpe([text], vocab_size=512).to_str() for _ in range(8)}) == 1


def test_training_reads_its_texts_twice_so_an_iterator_is_refused():
    with pytest.raises(TypeError, match="not an iterator"):
        train_bpe(iter(["a few words"]), vocab_size=60)
    reads = []

    def texts():  # what build_tokenizer is given: called at the start of each read (a progress meter's pass)
        reads.append(1)
        return ["a few words"]

    build_tokenizer(TokenizerConfig(vocab_size=60), texts)
    assert len(reads) == BPE_PASSES == 2


def test_special_token_names_are_the_original_ones():
    assert list(SPECIAL_TOKENS.values()) == ["_start_", "_delimiter_", "_classify_", "_eod_"]
