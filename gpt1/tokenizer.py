"""GPT-1 style byte-pair encoding with Hugging Face ``tokenizers``.

The original pipeline was ftfy -> punctuation/whitespace standardisation -> spaCy -> lowercase -> BPE with a
``</w>`` end-of-word suffix. Here: the same dash/ellipsis/accent standardisation, NFKC in place of ftfy, BERT's
clean-up + lowercase, BERT's whitespace-and-punctuation pre-tokenizer (as HF's openai-gpt tokenizer) and BPE
with ``</w>``. Trained tokenizers and the imported original vocab share this pipeline.

Special tokens for the paper's input transformations and for packing documents are appended *after* the base
vocabulary, as the original appended them after its 40,478 entries; a model grows its embedding to match.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

UNK_TOKEN = "<unk>"
END_OF_WORD = "</w>"
SPECIAL_TOKENS: dict[str, str] = {
    "start": "_start_",  # opens every fine-tuning input
    "delimiter": "_delimiter_",  # separates the two texts of a pair, or context and answer
    "extract": "_classify_",  # the classifier reads the hidden state at this token
    "pad": "_pad_",  # fills batches of unequal lengths; never scored
    "eod": "_eod_",  # ends each document of a packed pre-training stream
}


@dataclass
class TokenizerConfig:
    """Which tokenizer a run uses: an existing one, or a BPE trained on the run's training corpus."""

    path: Optional[str] = None
    """A tokenizer.json, a directory holding one, or a directory with vocab.json + merges.txt (the original
    openai-gpt vocab). None: train a BPE on the training corpus."""
    vocab_size: int = 8192
    """Size of the trained base vocabulary (40,478 in the paper); the special tokens are appended on top."""
    min_frequency: int = 2
    """A merge must occur at least this often in the corpus to be learned."""


def _gpt1_pipeline(tokenizer: Tokenizer) -> Tokenizer:
    """Attach the GPT-1 normaliser, pre-tokenizer and decoder to a BPE ``tokenizer``."""
    standardise = [normalizers.Replace(Regex("[\u2014\u2013\u2015]"), "-"), normalizers.Replace("\u2026", "...")]
    standardise.append(normalizers.Replace("\u00b4", "'"))
    tokenizer.normalizer = normalizers.Sequence([*standardise, normalizers.NFKC(), normalizers.BertNormalizer(lowercase=True)])
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.BPEDecoder(suffix=END_OF_WORD)
    return tokenizer


def add_special_tokens(tokenizer: Tokenizer) -> int:
    """Append the missing ``SPECIAL_TOKENS`` after the base vocabulary; return the new vocabulary size."""
    tokenizer.add_special_tokens([t for t in SPECIAL_TOKENS.values() if tokenizer.token_to_id(t) is None])
    return tokenizer.get_vocab_size()


def special_token_ids(tokenizer: Tokenizer) -> dict[str, int]:
    """Role -> id of each special token (start, delimiter, extract, pad, eod)."""
    ids = {role: tokenizer.token_to_id(token) for role, token in SPECIAL_TOKENS.items()}
    missing = [SPECIAL_TOKENS[role] for role, i in ids.items() if i is None]
    if missing:
        raise ValueError(f"tokenizer lacks the special tokens {missing}: call gpt1.tokenizer.add_special_tokens")
    return ids


def train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> Tokenizer:
    """Train a GPT-1 style BPE of ``vocab_size`` base entries on ``texts``, special tokens appended."""
    tokenizer = _gpt1_pipeline(Tokenizer(models.BPE(unk_token=UNK_TOKEN, end_of_word_suffix=END_OF_WORD)))
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[UNK_TOKEN],  # id 0, as in the original vocab
        end_of_word_suffix=END_OF_WORD,
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer = _canonical_ids(tokenizer)
    add_special_tokens(tokenizer)
    return tokenizer


def _canonical_ids(tokenizer: Tokenizer) -> Tokenizer:
    """Renumber a trained BPE: <unk>, the sorted alphabet, then each merge's result in merge order.

    The trainer numbers the alphabet in hash order, so the same corpus would otherwise give different ids per run.
    """
    model = json.loads(tokenizer.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    merged = [a + b for a, b in merges]
    alphabet = sorted(set(model["vocab"]) - set(merged) - {UNK_TOKEN})
    vocab = {token: i for i, token in enumerate(dict.fromkeys([UNK_TOKEN, *alphabet, *merged]))}
    bpe = models.BPE(vocab, merges, unk_token=UNK_TOKEN, end_of_word_suffix=END_OF_WORD)
    canonical = _gpt1_pipeline(Tokenizer(bpe))
    canonical.add_special_tokens([UNK_TOKEN])
    return canonical


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Load a tokenizer.json (file or directory), or import the original vocab.json + merges.txt as they are."""
    path = Path(path)
    if path.is_file():
        return Tokenizer.from_file(str(path))
    if (path / "tokenizer.json").is_file():
        return Tokenizer.from_file(str(path / "tokenizer.json"))
    vocab, merges = path / "vocab.json", path / "merges.txt"
    if vocab.is_file() and merges.is_file():
        bpe = models.BPE.from_file(str(vocab), str(merges), unk_token=UNK_TOKEN, end_of_word_suffix=END_OF_WORD)
        tokenizer = _gpt1_pipeline(Tokenizer(bpe))
        if tokenizer.token_to_id(UNK_TOKEN) is not None:
            tokenizer.add_special_tokens([UNK_TOKEN])  # marks the existing entry special; ids are unchanged
        return tokenizer
    raise FileNotFoundError(
        f"no tokenizer at {path}: expected a tokenizer.json file, or a directory with tokenizer.json "
        "or with vocab.json + merges.txt (set tokenizer.path)"
    )


def build_tokenizer(cfg: TokenizerConfig, texts: Callable[[], Iterable[str]] | None = None) -> Tokenizer:
    """The tokenizer ``cfg`` asks for, with the special tokens: loaded from ``cfg.path``, or trained on ``texts()``."""
    if cfg.path is not None:
        tokenizer = load_tokenizer(cfg.path)
        add_special_tokens(tokenizer)
        return tokenizer
    if texts is None:
        raise ValueError("tokenizer.path is not set and there is no corpus to train a tokenizer on")
    return train_bpe(texts(), cfg.vocab_size, cfg.min_frequency)
