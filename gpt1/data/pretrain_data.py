"""Pre-training data: ``PretrainDataModule`` turns a corpus (``gpt1.data.corpus``) into packed token streams, cached
under ``cache_dir`` (a trained BPE in ``tokenizers/<key>.json``, each split in ``tokens/<key>/<split>.bin``, each file
made by one process: ``gpt1.data.cache.made_once``), and LM batches of windows (``gpt1.data.windows``). A rerun with
the same inputs neither tokenises nor loads the raw data; Lightning's repeated prepare_data and setup cost nothing.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import fields
from pathlib import Path
from typing import Any, Optional

import numpy as np
from torch.utils.data import DataLoader

from gpt1.core.errors import ConfigError, DataError
from gpt1.core.files import atomic_file
from gpt1.core.progress import Meter
from gpt1.data.base import DataModule, cache_key
from gpt1.data.cache import made_once
from gpt1.data.corpus import PIECE_CHARS, CorpusSource, pack, token_dtype
from gpt1.data.data_config import DataConfig
from gpt1.data.loader import EpochSampler
from gpt1.data.windows import TokenStream, WindowDataset
from gpt1.text.tokenizer import BPE_PASSES, Tokenizer, TokenizerConfig, build_tokenizer

log = logging.getLogger(__name__)

PACK_VERSION = 1  # part of every .bin key: bump when the packed layout changes
TOKENIZER_VERSION = 2  # part of every trained tokenizer's key: bump when training or the tokenizer JSON changes


class PretrainDataModule(DataModule):
    """The pre-training corpus as packed token streams (``train_tokens``, ``valid_tokens``) and LM batches.

    tokenizer: a ``Tokenizer`` (e.g. a checkpoint's) used as is, or a ``TokenizerConfig`` to load or train one.
    With no training data (evaluation) only the validation stream is prepared.
    """

    ORDER_KEYS = {
        "seed": "seed",
        "global_batch_size": "data.batch_size",
        "train_tokens": "training tokens",
        "n_ctx": "model.n_ctx",
        "samples_per_epoch": "data.samples_per_epoch",
    }

    def __init__(
        self,
        cfg: DataConfig,
        tokenizer: TokenizerConfig | Tokenizer,
        n_ctx: int,
        seed: int,
        cache_dir: str | os.PathLike,
    ) -> None:
        super().__init__(cfg.batch_size, seed, cfg.num_workers, batch_key="data.batch_size")
        if cfg.train_files and cfg.hf_dataset:
            raise ConfigError("data.train_files and data.hf_dataset are both set: train on one of them")
        if not 0.0 <= cfg.valid_fraction < 1.0:
            raise ConfigError(f"data.valid_fraction={cfg.valid_fraction} must be in [0, 1)")
        self.cfg, self.n_ctx, self.cache_dir = cfg, n_ctx, Path(cache_dir)
        self.tokenizer: Optional[Tokenizer] = tokenizer if isinstance(tokenizer, Tokenizer) else None
        self._tokenizer_cfg = None if isinstance(tokenizer, Tokenizer) else tokenizer
        self.train_tokens: Optional[np.ndarray] = None
        """(N_train,) uint16/uint32 memmap; set by ``setup`` (None: no training data)."""
        self.valid_tokens: Optional[np.ndarray] = None
        """(N_valid,); set by ``setup``."""
        self.tokenizer_path: Optional[Path] = None
        """The trained tokenizer's file in the cache (None: a given or loaded tokenizer); set by ``prepare_data``."""
        self.paths: dict[str, Path] = {}
        """Split -> its packed stream's file; set by ``prepare_data`` (or ``setup``: ``_stream_paths``)."""
        self._train: Optional[TokenStream] = None
        self._valid: Optional[TokenStream] = None

        has_train = bool(cfg.train_files) or bool(cfg.hf_dataset and cfg.hf_train_split)
        has_valid = bool(cfg.valid_files) or bool(cfg.hf_dataset and cfg.hf_valid_split)
        if not has_valid and cfg.valid_fraction == 0:
            raise ConfigError(
                "no validation data: set data.valid_files, data.hf_valid_split (with data.hf_dataset), "
                "or data.valid_fraction > 0 to hold out the end of the training stream"
            )
        if not has_train and not has_valid:
            raise ConfigError(
                "data.valid_fraction holds out the end of the training data, but there is none: "
                "set data.train_files or data.hf_dataset, or give data.valid_files"
            )
        if not has_train and self._tokenizer_cfg is not None and self._tokenizer_cfg.path is None:
            raise ConfigError(
                "tokenizer.path is not set, so a BPE is to be trained on the training data, but there is none: "
                "set data.train_files or data.hf_dataset, or tokenizer.path"
            )
        self._train_src = CorpusSource(cfg, "train", self.cache_dir) if has_train else None
        self._valid_src = CorpusSource(cfg, "valid", self.cache_dir) if has_valid else None

    # -- preparation ------------------------------------------------------------------------------------------

    def prepare_data(self) -> None:
        """Build (or find in the cache) the tokenizer and every split's packed stream."""
        tokenizer = self._get_tokenizer(create=True)
        paths = self._stream_paths(tokenizer)
        for split, src in self._sources():
            made_once(paths[split], lambda s=split, c=src: self._tokenise_and_pack(s, c, tokenizer, paths[s]))
        self.tokenizer = tokenizer

    def setup(self, stage: Optional[str] = None) -> None:
        """Map the packed streams (cheap, and a no-op the second time); ``prepare_data`` must have run."""
        if self._valid is not None:
            return
        tokenizer = self.tokenizer or self._get_tokenizer(create=False)
        streams = {}
        for split, path in self._stream_paths(tokenizer).items():
            if not path.is_file():
                raise FileNotFoundError(f"{path} does not exist: call prepare_data() before setup()")
            n = path.stat().st_size // np.dtype(token_dtype(tokenizer)).itemsize
            streams[split] = TokenStream(str(path), token_dtype(tokenizer), 0, n)
        if self._valid_src is None:  # hold out the end of the training stream
            whole = streams["train"]
            n_valid = int(len(whole) * self.cfg.valid_fraction)
            if n_valid < self.n_ctx + 1:
                raise DataError(
                    f"data.valid_fraction={self.cfg.valid_fraction} holds out {n_valid} of {len(whole)} tokens, "
                    f"fewer than one window of n_ctx + 1 = {self.n_ctx + 1}: raise it or give data.valid_files"
                )
            streams["train"] = TokenStream(whole.path, whole.dtype, 0, whole.stop - n_valid)
            streams["valid"] = TokenStream(whole.path, whole.dtype, whole.stop - n_valid, whole.stop)
        for split, stream in streams.items():
            if len(stream) < self.n_ctx + 1:
                src = self._train_src if split == "train" else self._valid_src
                where = src.where if src is not None else f"the held-out end of {self._train_src.where}"
                raise DataError(
                    f"{where} holds {len(stream)} tokens, fewer than one window of model.n_ctx + 1 = "
                    f"{self.n_ctx + 1}: give more text, or a smaller model.n_ctx"
                )
        self._train, self._valid = streams.get("train"), streams["valid"]
        self.train_tokens = self._train.open() if self._train is not None else None
        self.valid_tokens = self._valid.open()
        self.tokenizer = tokenizer

    def _sources(self) -> list[tuple[str, CorpusSource]]:
        return [(s, src) for s, src in (("train", self._train_src), ("valid", self._valid_src)) if src is not None]

    def _get_tokenizer(self, create: bool) -> Tokenizer:
        """The given tokenizer, the one at tokenizer.path, or the BPE trained on the training corpus (cached)."""
        if self.tokenizer is not None:
            return self.tokenizer
        cfg = self._tokenizer_cfg
        if cfg.path is not None:
            return build_tokenizer(cfg)
        settings = {f.name: getattr(cfg, f.name) for f in fields(TokenizerConfig)}  # cfg may be an OmegaConf node
        path = self.cache_dir / "tokenizers" / f"{cache_key(TOKENIZER_VERSION, self._train_src.key, settings)}.json"
        if not path.is_file() and not create:
            raise FileNotFoundError(f"{path} does not exist: call prepare_data() before setup()")
        made_once(path, lambda: self._train_tokenizer(cfg, path))
        self.tokenizer_path = path
        return Tokenizer.from_str(path.read_text(encoding="utf-8"))

    def _train_tokenizer(self, cfg: TokenizerConfig, path: Path) -> None:
        start = time.perf_counter()
        meter = Meter("training the BPE", "characters", total=self._train_src.num_documents, passes=BPE_PASSES)
        tokenizer = build_tokenizer(cfg, lambda: self._train_src.texts(meter.next_pass()))
        meter.close()
        with atomic_file(path) as f:
            f.write(tokenizer.to_str().encode())
        log.info("trained a %d-token BPE in %.1fs -> %s", tokenizer.vocab_size, time.perf_counter() - start, path)

    def _stream_paths(self, tokenizer: Tokenizer) -> dict[str, Path]:
        """Split -> its packed stream's file in the cache (``paths``), keyed by the split's documents, the tokenizer and
        separate_documents; worked out once."""
        if not self.paths:
            tokenizer_json = tokenizer.to_str()
            for split, src in self._sources():
                key = cache_key(PACK_VERSION, src.key, tokenizer_json, self.cfg.separate_documents)
                self.paths[split] = self.cache_dir / "tokens" / key / f"{split}.bin"
        return self.paths

    def _num_proc(self, tokenizer: Tokenizer) -> int:
        """data.num_proc, or by the pipeline: tokenizers' own threads take every core for "gpt1", while the "openai"
        pipeline's Python needs a process per core."""
        if self.cfg.num_proc is not None:
            return self.cfg.num_proc
        return 1 if tokenizer.pipeline == "gpt1" else len(os.sched_getaffinity(0))

    def _tokenise_and_pack(self, split: str, src: CorpusSource, tokenizer: Tokenizer, path: Path) -> None:
        start = time.perf_counter()
        eod = tokenizer.special_id("eod") if self.cfg.separate_documents else None
        meter = Meter(f"tokenising {split}", "tokens", total=src.num_documents)
        size = PIECE_CHARS if tokenizer.encodes_piecewise else None  # else whole documents (module docstring)
        n = pack(src.pieces(size), path, tokenizer, eod, min(self._num_proc(tokenizer), src.num_documents), meter)
        meter.close()
        log.info(
            "packed %d documents into %d tokens in %.1fs -> %s", src.num_documents, n, time.perf_counter() - start, path
        )

    # -- loaders ----------------------------------------------------------------------------------------------

    def train_dataloader(self) -> DataLoader:
        if self._train is None:
            raise RuntimeError("no training stream: call setup() first, and give data.train_files or data.hf_dataset")
        ds = WindowDataset(self._train, self.n_ctx, stride=1)
        num_samples = self.cfg.samples_per_epoch or len(self._train) // self.n_ctx
        epoch, consumed, replicas, rank = self.resume_point()
        sampler = EpochSampler(len(ds), self.seed, self.batch_size, epoch, consumed, replicas, rank, num_samples)
        return self.loader(ds, self.device_batch_size, sampler)

    def order_state(self) -> dict[str, Any]:
        """What fixes the order of the training windows (``ORDER_KEYS``)."""
        return {
            "seed": self.seed,
            "global_batch_size": self.batch_size,
            "train_tokens": len(self._train) if self._train is not None else 0,
            "n_ctx": self.n_ctx,
            "samples_per_epoch": self.cfg.samples_per_epoch,
        }

    def val_dataloader(self) -> DataLoader:
        if self._valid is None:
            raise RuntimeError("no validation stream: call setup() first")
        valid = WindowDataset(self._valid, self.n_ctx, stride=self.n_ctx, limit=self.cfg.max_valid_windows)
        return self.eval_loader(valid, self.device_batch_size)

    def test_dataloader(self) -> DataLoader:
        """The validation windows (``gpt1 evaluate`` reports their perplexity)."""
        return self.val_dataloader()


def unigram_perplexity(train_tokens: np.ndarray, valid_tokens: np.ndarray, vocab_size: int) -> float:
    """Perplexity on ``valid_tokens`` of the add-one smoothed unigram model of ``train_tokens``: the baseline any
    language model must beat (the best that ignores context)."""
    if len(valid_tokens) == 0:
        raise ValueError("unigram_perplexity: valid_tokens is empty")
    counts = _bincount(train_tokens, vocab_size) + 1
    log_p = np.log(counts) - np.log(counts.sum())  # (V,)
    return float(np.exp(-(_bincount(valid_tokens, vocab_size) * log_p).sum() / len(valid_tokens)))


def _bincount(tokens: np.ndarray, vocab_size: int, chunk: int = 1 << 24) -> np.ndarray:
    """Occurrences of each id, counted in chunks (a memmap is never copied whole into int64)."""
    counts = np.zeros(vocab_size, dtype=np.int64)
    for i in range(0, len(tokens), chunk):
        c = np.bincount(tokens[i : i + chunk], minlength=vocab_size)
        if len(c) > vocab_size:
            raise ValueError(f"token id {len(c) - 1} is out of the vocabulary of {vocab_size}")
        counts += c
    return counts
