"""The original GPT-1 text pipeline (openai/finetune-transformer-lm, ``text_utils.py``), re-implemented.

    ftfy.fix_text -> ``standardize`` (dashes, ellipses, punctuation runs, whitespace) -> spaCy's English tokenizer
    -> lowercase -> byte-pair encoding of each spaCy token with a ``</w>`` end-of-word suffix

With OpenAI's vocab (``encoder_bpe_40000.json`` + ``vocab_40000.bpe``, or HF's ``vocab.json`` + ``merges.txt``)
this gives the ids the original model was trained on. ftfy and spaCy are optional (``pip install "gpt1[openai]"``)
and imported on first use; only spaCy's rule-based tokenizer is used (``spacy.blank("en")``), no model download.

``approximate_in_tokenizers`` writes the pipeline as ``tokenizers`` rules, for an HF export, where no code of ours
runs: close to the original, not identical (the rules and what they reproduce: its docstring).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from tokenizers import Regex, normalizers, pre_tokenizers

from gpt1.core.errors import UserError

END_OF_WORD = "</w>"
NEWLINE_PIECE = "\n  " + END_OF_WORD
"""What the BPE of spaCy's newline token (``"\\n "``) joins into; the original maps it to ``"\\n</w>"``."""

_DASHES_ETC = [("\u2014", "-"), ("\u2013", "-"), ("\u2015", "-"), ("\u2026", "..."), ("\u00b4", "'")]
_PUNCTUATION_RUNS = re.compile(r"""(-+|~+|!+|"+|;+|\?+|\++|,+|\)+|\(+|\\+|/+|\*+|\[+|\]+|}+|{+|\|+|_+)""")
_NEWLINES = re.compile(r"\s*\n\s*")
_SPACES = re.compile(r"[^\S\n]+")


def standardize(text: str) -> str:
    """The original's ``text_standardize``: dashes to "-", "…" to "...", "´" to "'", runs of punctuation set apart
    by spaces, every line break (with the whitespace around it) to " \\n ", other whitespace runs to one space."""
    for old, new in _DASHES_ETC:
        text = text.replace(old, new)
    text = _PUNCTUATION_RUNS.sub(r" \1 ", text)
    text = _NEWLINES.sub(" \n ", text)
    return _SPACES.sub(" ", text).strip()


def _import(name: str) -> Any:
    try:
        return __import__(name)
    except ImportError:
        raise UserError(
            f'the "openai" tokenizer pipeline needs {name}, which is not installed: pip install "gpt1[openai]"'
        ) from None


class OpenAIText:
    """Text -> ids exactly as the original ``TextEncoder.encode``: ``vocab`` maps pieces to ids, ``merges`` are
    the BPE merges in priority order. A piece missing from ``vocab`` becomes id 0 (the original's
    ``encoder.get(t, 0)``). Pickles without its spaCy pipeline (rebuilt on first use), so it travels to workers."""

    def __init__(self, vocab: Mapping[str, int], merges: Sequence[tuple[str, str]]) -> None:
        self.vocab = dict(vocab)
        self.ranks = {tuple(m): i for i, m in enumerate(merges)}
        self._cache: dict[str, list[int]] = {}
        self._nlp: Any = None
        self._fix_text: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_nlp": None, "_fix_text": None, "_cache": {}}

    def _load(self) -> None:
        if self._nlp is None:
            self._fix_text = _import("ftfy").fix_text
            self._nlp = _import("spacy").blank("en")
            self._nlp.max_length = sys.maxsize  # the limit protects spaCy's parser; its tokenizer takes whole books

    def words(self, texts: Iterable[str]) -> Iterator[list[str]]:
        """The lowercased spaCy tokens of each text, after ftfy and ``standardize``."""
        self._load()
        cleaned = (standardize(self._fix_text(text)) for text in texts)
        for doc in self._nlp.pipe(cleaned):
            yield [token.text.lower() for token in doc]

    def bpe(self, word: str) -> list[str]:
        """The BPE pieces of one word: its characters, the last one suffixed with ``</w>``, then merged pair by
        pair (lowest rank first, every occurrence left to right) until no known pair is left."""
        pieces = [*word[:-1], word[-1] + END_OF_WORD]
        while len(pieces) > 1:
            pairs = set(zip(pieces, pieces[1:]))
            best = min(pairs, key=lambda pair: self.ranks.get(pair, float("inf")))
            if best not in self.ranks:
                break
            merged, i = [], 0
            while i < len(pieces):
                if i + 1 < len(pieces) and (pieces[i], pieces[i + 1]) == best:
                    merged.append(pieces[i] + pieces[i + 1])
                    i += 2
                else:
                    merged.append(pieces[i])
                    i += 1
            pieces = merged
        joined = " ".join(pieces)
        # As the original: join, special-case the newline token, split on spaces (a space inside a token splits).
        return ("\n" + END_OF_WORD if joined == NEWLINE_PIECE else joined).split(" ")

    def word_ids(self, word: str) -> list[int]:
        """The ids of one lowercased spaCy token (cached)."""
        ids = self._cache.get(word)
        if ids is None:
            ids = self._cache[word] = [self.vocab.get(piece, 0) for piece in self.bpe(word)]
        return ids

    def encode_batch(self, texts: Iterable[str]) -> list[list[int]]:
        """The ids of each text."""
        return [[i for word in words for i in self.word_ids(word)] for words in self.words(texts)]


_TITLES = "mr|mrs|ms|dr|st|jr|sr|prof|mt|messrs|mme|mlle|rev|gen|col|capt|lt|sgt|co|inc|ltd|vs|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"  # noqa: E501
"""Words whose final period spaCy keeps (besides single letters and dotted initials: u.s., a.m.)."""
_NOT = "do|does|did|is|are|was|were|has|have|had|could|would|should|must|need|might|ai|ca|wo|sha|dare|may|ought"
"""Words whose "n't" spaCy splits off (can't: ca n't, won't: wo n't)."""
_PRONOUNS = "i|you|he|she|it|we|they|that|there|who|what|where|when|why|how|this|here|let"
"""Words whose 'm, 'd, 'll, 're, 've spaCy splits off."""
_KEPT_AFTER_QUOTE = "em|bout|cause|til|nuff|round|n|s|m|d|ll|re|ve|'"
"""What a leading apostrophe stays on ('em, 'bout, a lone 's, '')."""
_UNITS = "km|cm|mm|m|kg|g|mg|lb|lbs|oz|ft|mph|kmh|h|hr|hrs|min|ml|l|gb|mb|kb|tb"
"""Units that spaCy splits from a number (3km: 3 km)."""


def approximate_in_tokenizers(bpe: Any) -> Any:
    """Give a ``tokenizers.Tokenizer`` (OpenAI's BPE) a normaliser and pre-tokenizer that approximate the original
    pipeline in rules that ``tokenizers`` runs (in place; returned): ftfy's quote uncurling and NFC,
    ``standardize``, lowercase, then spaCy's English rules for what it splits (runs of punctuation; "." after a
    word but not after a title or an initial; "n't" after do, ca, wo, ...; 's; 'll, 're, 'm, 'd, 've after a
    pronoun; can|not, gon|na, got|ta, y'|all; a unit after a number; quotes and brackets).

    Against the original (``OpenAIText``) it gives the same ids on every golden line of
    ``shared/reference/openai-vocab`` and on almost every text of the sample data; the rest are spaCy's exceptions
    (dialect contractions, tags, currency signs) and ftfy's repairs of broken encodings (mojibake), which no rule
    here reproduces: experiments/results/export_tokenizers.md."""
    bpe.normalizer = normalizers.Sequence(
        [
            normalizers.Replace(Regex("[\u201c\u201d\u201e\u201f\u2033\x93\x94]"), '"'),  # ftfy uncurls quotes
            normalizers.Replace(Regex("[\u2018\u2019\u201a\u201b\u2032\x91\x92]"), "'"),  # (C1 as cp1252)
            normalizers.Replace(Regex("[\x96\x97]"), "-"),
            normalizers.Replace("\x85", "..."),
            *(normalizers.Replace(old, new) for old, new in _DASHES_ETC),
            normalizers.NFC(),
            normalizers.Replace(Regex(r"\s*\n\s*"), "\n"),  # a line break (and the whitespace around it) is a token
            normalizers.Replace(Regex(r"[^\S\n]+"), " "),
            normalizers.Lowercase(),
        ]
    )
    split = [
        r"[^\S\n]+",  # removed: the spaces between words
        r"\n",
        _PUNCTUATION_RUNS.pattern,
        r"""[!?";,()\[\]{}=]|\.{2,}""",  # single characters that spaCy splits off runs too (not "--")
        r"(?<!\A')'\z",
        rf"(?<!\A(?:{_TITLES}|[a-z]|(?:[a-z]\.)+[a-z]))\.\z|\.{{2,}}\z",  # (an ellipsis stays whole)
        rf"\A[`$<]|\A'(?!(?:{_KEPT_AFTER_QUOTE})\z)|[`:%>]\z|(?<!\A')'\z",
        rf"(?<=\A(?:{_NOT}))n't\z|(?<=\A(?:{_PRONOUNS}))'(?:m|d|ll|re|ve)\z|(?<=\w)'s\z",
        rf"(?<=\Acan)not\z|(?<=\Agon)na\z|(?<=\Agot)ta\z|(?<=\Ay')all\z|(?<=\d)(?:{_UNITS})\z",
    ]  # each in turn on the pieces of the one before, isolated (the first removed), as spaCy peels a token
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(rule), "removed" if i == 0 else "isolated") for i, rule in enumerate(split)]
    )
    return bpe
