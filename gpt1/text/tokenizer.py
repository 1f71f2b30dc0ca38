"""GPT-1's tokenizer: a byte-pair encoding with a ``</w>`` end-of-word suffix, two text pipelines, special tokens.

Pipelines (``Tokenizer.pipeline``):

- ``"gpt1"``: BPEs trained by gpt1. Hugging Face ``tokenizers`` end to end: the original's dash/ellipsis/accent
  standardisation, NFKC, BERT's clean-up + lowercase, BERT's whitespace-and-punctuation pre-tokenizer (as HF's
  openai-gpt fast tokenizer), BPE. Fast, no extra dependency; close to the original, not identical.
- ``"openai"``: the original pipeline (ftfy, ``text_standardize``, spaCy's English tokenizer, lowercase, BPE;
  ``gpt1.text.openai_text``), needed to feed OpenAI's weights the ids they were trained on. Used for OpenAI's vocab
  files (``encoder_bpe_40000.json`` + ``vocab_40000.bpe``, or HF's ``vocab.json`` + ``merges.txt``); needs
  ``pip install "gpt1[openai]"``.

Special tokens (``SPECIAL_TOKENS``) are not part of the BPE: they are ids appended after the base vocabulary, as
the original appended them after its 40,478 entries, and ``encode`` never produces them (text that reads
"_start_" is text). Only the code that builds model inputs inserts them: pre-training adds ``eod``, fine-tuning
``start``/``delimiter``/``extract``; a model grows its embedding to match (``GPT.resize_token_embeddings``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import tokenizers
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, trainers

from gpt1.core.errors import ConfigError, UserError, ranged
from gpt1.text.openai_text import END_OF_WORD, OpenAIText

UNK_TOKEN = "<unk>"
SPECIAL_TOKENS: dict[str, str] = {
    "start": "_start_",  # opens every fine-tuning input
    "delimiter": "_delimiter_",  # separates the two texts of a pair, or context and answer
    "extract": "_classify_",  # the classifier reads the hidden state at this token
    "eod": "_eod_",  # ends each document of a packed pre-training stream; an empty generation prompt
}
"""Role -> the token's name (in exported HF tokenizers and format-1 checkpoints)."""
RETIRED_TOKENS = ("_pad_",)
"""Special tokens of format-1 checkpoints that are no longer tokens (padding is id 0, masked): their ids stay
unused."""
PIPELINES = ("gpt1", "openai")
ORIGINAL_FILES = ("encoder_bpe_40000.json", "vocab_40000.bpe")
"""OpenAI's vocab and merges, as finetune-transformer-lm names them."""
HF_FILES = ("vocab.json", "merges.txt")
"""The same files as Hugging Face's openai-gpt names them."""
_JSON_TYPE = "gpt1-tokenizer"
CLEANUP = [(" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
            (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")]  # fmt: skip
"""transformers' ``clean_up_tokenization``, in its order."""


@dataclass
class TokenizerConfig:
    """Which tokenizer a run uses: an existing one, or a BPE trained on the run's training corpus."""

    path: Optional[str] = None
    """A tokenizer JSON file, or a directory holding OpenAI's vocab files (encoder_bpe_40000.json +
    vocab_40000.bpe, or vocab.json + merges.txt: the "openai" pipeline, which needs gpt1[openai]) or a
    tokenizer.json. None: train a BPE on the training corpus."""
    vocab_size: int = ranged(8192, ge=1)
    """Size of the trained base vocabulary (40,478 in the paper); the special tokens are appended on top."""
    min_frequency: int = ranged(2, ge=0)
    """A merge must occur at least this often in the corpus to be learned."""


class Tokenizer:
    """A BPE (a ``tokenizers.Tokenizer``), the text pipeline in front of it, and special-token ids after it.

    bpe: the base vocabulary and merges; for the "gpt1" pipeline also its normaliser and pre-tokenizer.
    specials: role (a key of ``SPECIAL_TOKENS``) -> id, each at or past the base vocabulary.
    """

    def __init__(self, bpe: tokenizers.Tokenizer, pipeline: str = "gpt1", specials: Mapping[str, int] = ()) -> None:
        if pipeline not in PIPELINES:
            raise ValueError(f"unknown tokenizer pipeline {pipeline!r}: one of {PIPELINES}")
        self.bpe, self.pipeline = bpe, pipeline
        self.specials: dict[str, int] = dict(specials)
        """Role -> id, in order of addition."""
        base = bpe.get_vocab_size()
        bad = {r: i for r, i in self.specials.items() if r not in SPECIAL_TOKENS or i < base}
        if bad or len(set(self.specials.values())) != len(self.specials):
            raise ValueError(f"invalid special tokens {self.specials} for a base vocabulary of {base}")
        self._openai: Optional[OpenAIText] = None  # the "openai" pipeline, built on first use

    @property
    def base_vocab_size(self) -> int:
        """Entries of the BPE vocabulary (ids below it are text)."""
        return self.bpe.get_vocab_size()

    @property
    def vocab_size(self) -> int:
        """Ids a model must embed: the base vocabulary, then the special tokens (among them, in tokenizers of
        format-1 checkpoints, the unused id of a ``RETIRED_TOKENS`` entry)."""
        return max(self.base_vocab_size, max(self.specials.values(), default=-1) + 1)

    def encode(self, text: str) -> list[int]:
        """The ids of ``text`` (text only: never a special token)."""
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of each text (in parallel threads for the "gpt1" pipeline)."""
        if self.pipeline == "openai":
            if self._openai is None:
                model = json.loads(self.bpe.to_str())["model"]
                merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
                self._openai = OpenAIText(model["vocab"], merges)
            return self._openai.encode_batch(texts)
        return [e.ids for e in self.bpe.encode_batch_fast(list(texts), add_special_tokens=False)]

    @property
    def encodes_piecewise(self) -> bool:
        """Whether the ids of a text are those of its pieces end to end when it is cut after a line break or a space:
        true of the "gpt1" pipeline (a normaliser that maps character by character, a pre-tokenizer that splits at
        whitespace), the one gpt1 trains; not of the "openai" one (its line-break rules look across lines)."""
        if self.pipeline != "gpt1":
            return False
        own = json.loads(self.bpe.to_str())
        ours = json.loads(gpt1_pipeline(tokenizers.Tokenizer(models.BPE())).to_str())
        return (own["normalizer"], own["pre_tokenizer"]) == (ours["normalizer"], ours["pre_tokenizer"])

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``: special tokens skipped, words joined, spaces before punctuation and contractions
        removed as transformers' ``clean_up_tokenization_spaces`` does ("i don ' t , i" -> "i don't, i")."""
        base = self.base_vocab_size
        text = self.bpe.decode([i for i in ids if i < base], skip_special_tokens=False)
        for old, new in CLEANUP:
            text = text.replace(old, new)
        return text

    def add_special_tokens(self, roles: Iterable[str]) -> int:
        """Append the missing ``roles`` (keys of ``SPECIAL_TOKENS``) after the vocabulary; return the new
        ``vocab_size``."""
        for role in roles:
            if role not in SPECIAL_TOKENS:
                raise ValueError(f"unknown special token role {role!r}: one of {list(SPECIAL_TOKENS)}")
            if role not in self.specials:
                self.specials[role] = self.vocab_size
        return self.vocab_size

    def special_id(self, role: str) -> int:
        """The id of the special token ``role``; a ValueError naming it if the tokenizer lacks it."""
        if role not in self.specials:
            raise ValueError(
                f"the tokenizer has no {role!r} token ({SPECIAL_TOKENS.get(role, '?')}); it has {list(self.specials)}: "
                "add it with Tokenizer.add_special_tokens (and grow the model's embeddings)"
            )
        return self.specials[role]

    def to_str(self) -> str:
        """This tokenizer as JSON (``from_str`` reads it back)."""
        bpe = json.loads(self.bpe.to_str())
        return json.dumps({"type": _JSON_TYPE, "pipeline": self.pipeline, "specials": self.specials, "bpe": bpe})

    @classmethod
    def from_str(cls, s: str) -> Tokenizer:
        """Read ``to_str``'s JSON, or a plain ``tokenizers`` JSON (a tokenizer.json, or the tokenizer of a format-1
        checkpoint): the "gpt1" pipeline, its added tokens named in ``SPECIAL_TOKENS`` becoming specials with their
        ids (``RETIRED_TOKENS`` dropped, their ids left unused), decoded as ``decode`` decodes."""
        obj = json.loads(s)
        if obj.get("type") == _JSON_TYPE:
            return cls(tokenizers.Tokenizer.from_str(json.dumps(obj["bpe"])), obj["pipeline"], obj["specials"])
        added = obj.get("added_tokens") or []
        bpe = tokenizers.Tokenizer.from_str(json.dumps({**obj, "added_tokens": []}))
        bpe.decoder = decoders.BPEDecoder(suffix=END_OF_WORD)  # ``decode``'s (an HF export's decoder is for HF's)
        roles = {token: role for role, token in SPECIAL_TOKENS.items()}
        vocab = bpe.get_vocab()
        specials, foreign = {}, []
        for token in sorted(added, key=lambda t: t["id"]):
            content, i = token["content"], token["id"]
            if content in roles:
                specials[roles[content]] = i
            elif content not in RETIRED_TOKENS and vocab.get(content) != i:  # e.g. <unk>: a base entry marked special
                foreign.append(content)
        if foreign:
            raise ValueError(f"the tokenizer adds tokens gpt1 does not know: {foreign} (known: {list(roles)})")
        return cls(bpe, "gpt1", specials)


def prompt_ids(tokenizer: Tokenizer, prompt: str) -> list[int]:
    """The ids a generation starts from: ``prompt``'s, or the eod token alone (a document's start) if it is empty."""
    ids = tokenizer.encode(prompt)
    if ids:
        return ids
    if "eod" not in tokenizer.specials:
        raise UserError('the prompt is empty and the vocab has no eod token to start from: give a prompt="..."')
    return [tokenizer.specials["eod"]]


def gpt1_pipeline(bpe: tokenizers.Tokenizer) -> tokenizers.Tokenizer:
    """Attach the "gpt1" pipeline's normaliser, pre-tokenizer and decoder to a BPE (in place; returned)."""
    standardise = [normalizers.Replace(Regex("[\u2014\u2013\u2015]"), "-"), normalizers.Replace("\u2026", "...")]
    standardise.append(normalizers.Replace("\u00b4", "'"))
    bpe.normalizer = normalizers.Sequence(
        [*standardise, normalizers.NFKC(), normalizers.BertNormalizer(lowercase=True)]
    )
    bpe.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    bpe.decoder = decoders.BPEDecoder(suffix=END_OF_WORD)
    return bpe


BPE_PASSES = 2
"""The times ``train_bpe`` reads its texts (a progress meter counts each pass on its own)."""


def train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> Tokenizer:
    """Train a "gpt1"-pipeline BPE of ``vocab_size`` base entries on ``texts``, with the eod token appended. The texts
    are read ``BPE_PASSES`` times (a list, or any iterable that iterates again; not an iterator).

    The same texts give the same tokenizer in every process. tokenizers' trainer numbers the end-of-word units it
    meets ("s</w>") in hash order, and between merges of equal count it picks by those numbers
    (huggingface/tokenizers#1794), so a rerun could pick another merge. A first pass collects the units; the second
    trains with them numbered in sorted order after the alphabet (as the trainer's special tokens, in the order it
    numbers the rest), which fixes every tie."""
    if isinstance(texts, Iterator):  # (asked, not tried: iter() of a _Reread begins a read)
        raise TypeError("train_bpe reads its texts twice: pass a list or a re-iterable, not an iterator")
    base = _bpe(texts, 0, min_frequency, []).get_vocab().keys() - {UNK_TOKEN}
    units = {t for t in base if t.endswith(END_OF_WORD)}
    bpe = _bpe(texts, vocab_size, min_frequency, [*sorted(base - units), *sorted(units)])
    tokenizer = Tokenizer(_canonical_ids(bpe))
    tokenizer.add_special_tokens(["eod"])
    return tokenizer


def _bpe(texts: Iterable[str], vocab_size: int, min_frequency: int, base: list[str]) -> tokenizers.Tokenizer:
    """tokenizers' BPE trained on ``texts``, numbering <unk> then ``base`` first (vocab_size 0: only the alphabet and
    the end-of-word units, no merge)."""
    bpe = gpt1_pipeline(tokenizers.Tokenizer(models.BPE(unk_token=UNK_TOKEN, end_of_word_suffix=END_OF_WORD)))
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[UNK_TOKEN, *base],  # <unk>: id 0, as in the original vocab
        end_of_word_suffix=END_OF_WORD,
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    return bpe


def _canonical_ids(bpe: tokenizers.Tokenizer) -> tokenizers.Tokenizer:
    """Renumber a trained BPE: <unk>, the sorted alphabet, then each merge's result in merge order.

    The trainer numbers the alphabet in hash order, so the same corpus would otherwise give different ids per run.
    """
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    merged = [a + b for a, b in merges]
    alphabet = sorted(set(model["vocab"]) - set(merged) - {UNK_TOKEN})
    vocab = {token: i for i, token in enumerate(dict.fromkeys([UNK_TOKEN, *alphabet, *merged]))}
    bpe = models.BPE(vocab, merges, unk_token=UNK_TOKEN, end_of_word_suffix=END_OF_WORD)
    return gpt1_pipeline(tokenizers.Tokenizer(bpe))


def openai_tokenizer(vocab: str | Path, merges: str | Path, specials: Mapping[str, int] = ()) -> Tokenizer:
    """OpenAI's vocab (``vocab``: token -> id JSON; ``merges``: one merge per line after a header line) with the
    original "openai" pipeline, and ``specials`` (role -> id) after it."""
    bpe = tokenizers.Tokenizer(
        models.BPE.from_file(str(vocab), str(merges), unk_token=UNK_TOKEN, end_of_word_suffix=END_OF_WORD)
    )
    bpe.decoder = decoders.BPEDecoder(suffix=END_OF_WORD)
    return Tokenizer(bpe, "openai", specials)


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Load a tokenizer: a JSON file (``Tokenizer.to_str``'s, or a plain ``tokenizers`` tokenizer.json), or a
    directory holding OpenAI's vocab files (``encoder_bpe_40000.json`` + ``vocab_40000.bpe``, or HF's
    ``vocab.json`` + ``merges.txt``), loaded with the original "openai" pipeline, or else a ``tokenizer.json``.

    A directory with both OpenAI's files and a tokenizer.json (HF's openai-gpt snapshot, ``gpt1 convert to-hf``'s
    output) gets the original pipeline, not the tokenizer.json's (HF's approximation of it); only the special
    tokens (added tokens named in ``SPECIAL_TOKENS``) are taken from the tokenizer.json.
    """
    path = Path(path)
    if path.is_file():
        return _read_json(path)
    for vocab, merges in (ORIGINAL_FILES, HF_FILES):
        if (path / vocab).is_file() and (path / merges).is_file():
            try:
                tokenizer = openai_tokenizer(path / vocab, path / merges)
            except Exception as e:  # tokenizers' own: a JSON that does not parse, a merge of unknown tokens
                raise ConfigError(
                    f"{path}: {vocab} + {merges} are not a BPE vocabulary ({' '.join(str(e).split())}): give the "
                    "files as OpenAI or Hugging Face wrote them"
                ) from e
            if (path / "tokenizer.json").is_file():
                beside = _read_json(path / "tokenizer.json")
                if beside.base_vocab_size != tokenizer.base_vocab_size:
                    raise ConfigError(
                        f"{path}: tokenizer.json has {beside.base_vocab_size} base tokens but {vocab} "
                        f"{tokenizer.base_vocab_size}: remove the one that does not belong"
                    )
                tokenizer = openai_tokenizer(path / vocab, path / merges, beside.specials)
            return tokenizer
    if (path / "tokenizer.json").is_file():
        return _read_json(path / "tokenizer.json")
    raise ConfigError(
        f"no tokenizer at {path}: expected a tokenizer JSON file, or a directory with "
        f"{' + '.join(ORIGINAL_FILES)}, {' + '.join(HF_FILES)} or tokenizer.json (set tokenizer.path)"
    )


def _read_json(path: Path) -> Tokenizer:
    try:
        return Tokenizer.from_str(path.read_text(encoding="utf-8"))
    except Exception as e:  # not JSON, not a tokenizer, unknown added tokens
        raise ConfigError(
            f"{path} is not a tokenizer JSON file ({type(e).__name__}: {e}): give the tokenizer.json that gpt1 or "
            "Hugging Face's tokenizers wrote"
        ) from e


def build_tokenizer(cfg: TokenizerConfig, texts: Callable[[], Iterable[str]] | None = None) -> Tokenizer:
    """The tokenizer ``cfg`` asks for, with the eod token: loaded from ``cfg.path``, or trained on ``texts()``, which is
    called once per pass over the texts (``BPE_PASSES``)."""
    if cfg.path is not None:
        tokenizer = load_tokenizer(cfg.path)
        tokenizer.add_special_tokens(["eod"])
        return tokenizer
    if texts is None:
        raise ConfigError("tokenizer.path is not set and there is no corpus to train a tokenizer on")
    return train_bpe(_Reread(texts), cfg.vocab_size, cfg.min_frequency)


@dataclass
class _Reread:
    """``texts()`` as an iterable that reads them anew each time it is iterated."""

    texts: Callable[[], Iterable[str]]

    def __iter__(self):
        return iter(self.texts())
