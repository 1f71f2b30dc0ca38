"""Pre-training data: raw documents -> BPE tokens -> one packed token stream per split -> random windows.

``PretrainDataModule.prepare_data`` (idempotent; everything cached under ``cache_dir``):

1. raw documents from ``gpt1.data.sources``: a .txt file, or a row of a table / hub dataset, is one document;
2. the tokenizer: the one given, the one at ``tokenizer.path``, or a BPE trained on the training documents and
   kept in ``tokenizers/<key>.json`` (key: the training corpus + the tokenizer config);
3. tokenisation with ``datasets.map`` (batched, ``num_proc`` processes), cached in ``datasets/``;
4. packing: the documents concatenated, each followed by the eod token, into ``tokens/<key>/<split>.bin``, a
   flat uint16 array (uint32 for vocabularies past 65,536) streamed batch by batch, written under a temporary name
   then renamed; key: the split's files (paths, sizes, mtimes) or hub fingerprint, the tokenizer's JSON and
   separate_documents.

A rerun with the same inputs finds the .bin files and neither tokenises nor loads the raw data (local files).
Training reads random contiguous windows of n_ctx + 1 tokens (the paper); validation reads the stream in
consecutive windows (every token but the first predicted once). T = n_ctx below.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import Any, Optional

import datasets
import lightning as L
import numpy as np
import pyarrow.compute as pc
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler

from gpt1.data.loader import DeferredDataLoader, warn_if_order_changed, world_size
from gpt1.data.sources import Quoting, file_format, files_key, load_files, load_hub, read_error, resolve_files
from gpt1.errors import ConfigError, DataError, ranged
from gpt1.io import atomic_file
from gpt1.tokenizer import Tokenizer, TokenizerConfig, build_tokenizer

log = logging.getLogger(__name__)

PACK_VERSION = 1  # part of every .bin key: bump when the packed layout changes
TOKENIZER_VERSION = 2  # part of every trained tokenizer's key: bump when training or the tokenizer JSON changes


@dataclass
class DataConfig:
    """The pre-training corpus (local files or a Hugging Face hub dataset) and how it is batched."""

    train_files: Any = field(default_factory=list)
    """A glob or a list of globs of training files, relative to the current directory: .txt (a document per
    file), .jsonl/.json, .csv, .tsv, .parquet (a document per row, in text_column)."""
    valid_files: Any = field(default_factory=list)
    """A glob or a list of globs of validation files, same formats; they take precedence over hf_valid_split and
    valid_fraction."""
    hf_dataset: Optional[str] = None
    """A hub dataset to train on instead of train_files (e.g. Salesforce/wikitext); downloaded once, then cached."""
    hf_config: Optional[str] = None
    """The hub dataset's configuration (e.g. wikitext-103-raw-v1)."""
    hf_train_split: Optional[str] = "train"
    """The hub split to train on (slices such as train[:10%] work); None: none (evaluation)."""
    hf_valid_split: Optional[str] = "validation"
    """The hub split to validate on when valid_files is empty; None: valid_fraction instead."""
    text_column: str = "text"
    """Column that holds the documents in tables and hub datasets (.txt files need none)."""
    quoting: Quoting = Quoting.minimal
    """.csv/.tsv files: minimal, a field that starts with a double quote is quoted (RFC 4180, as Python's csv module
    and pandas write files); none, every quote is text (tab-separated dumps whose texts may start with a quote)."""
    valid_fraction: float = 0.0
    """With no validation files nor hub split: hold out this last fraction of the packed training stream. With no
    validation data at all and 0 here, the data module refuses to start (pre-training needs a held-out loss)."""
    separate_documents: bool = True
    """Follow each document with the eod token in the packed stream (off for corpora whose rows are not whole
    documents, e.g. the lines of WikiText)."""
    batch_size: int = ranged(64, ge=1)
    """Windows per optimizer update over all devices (64 in the paper): each device's batch is batch_size / (devices
    x nodes x trainer.accumulate_grad_batches), so the recipe means the same on 1 GPU and on 64. Also the batch of
    gpt1 evaluate."""
    num_workers: int = ranged(0, ge=0)
    """DataLoader worker processes (windows are memory-mapped slices: 0 is usually fast enough)."""
    num_proc: int = ranged(2, ge=1)
    """Processes tokenising the corpus (datasets.map), capped at the number of documents."""
    samples_per_epoch: Optional[int] = ranged(None, ge=1)
    """Random training windows per epoch; None: n_train_tokens // n_ctx (each token seen about once)."""
    max_valid_windows: Optional[int] = ranged(None, ge=1)
    """Use only the first this many validation windows (quick runs); None: all."""

    def __post_init__(self) -> None:
        # One glob or many: `data.train_files=corpus/*.txt` and `data.train_files='[a/*.txt,b.txt]'` both work.
        for name in ("train_files", "valid_files"):
            value = getattr(self, name)
            globs = [value] if isinstance(value, str) else list(value or [])
            if not all(isinstance(g, str) for g in globs):
                raise ConfigError(f"data.{name}={value!r}: give a glob or a list of globs (strings)")
            setattr(self, name, globs)


@dataclass(frozen=True)
class TokenStream:
    """Tokens [start, stop) of a packed .bin file, memory-mapped on ``open`` (so it pickles into workers cheaply)."""

    path: str
    dtype: str
    start: int
    stop: int

    def __len__(self) -> int:
        return self.stop - self.start

    def open(self) -> np.ndarray:
        return np.memmap(self.path, dtype=self.dtype, mode="r")[self.start : self.stop]


class WindowDataset(Dataset):
    """Window ``i`` = tokens [i * stride, i * stride + T + 1) of a stream, as ``{"input_ids": (T,), "targets": (T,)}``
    int64 tensors, targets being the inputs shifted left by one. ``limit`` keeps only the first windows."""

    def __init__(self, stream: TokenStream, n_ctx: int, stride: int, limit: Optional[int] = None) -> None:
        self.stream, self.n_ctx, self.stride = stream, n_ctx, stride
        n = max(0, (len(stream) - 1 - n_ctx) // stride + 1)  # starts s with s + T + 1 <= len(stream)
        self.length = n if limit is None else min(n, limit)
        self._tokens: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if not 0 <= i < self.length:
            raise IndexError(f"window {i} out of range [0, {self.length})")
        if self._tokens is None:
            self._tokens = self.stream.open()
        start = i * self.stride
        window = torch.from_numpy(self._tokens[start : start + self.n_ctx + 1].astype(np.int64))  # (T + 1,)
        return {"input_ids": window[:-1], "targets": window[1:]}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokens": None}  # workers map the file themselves


class WindowSampler(DistributedSampler):
    """``num_samples`` window starts per epoch, drawn uniformly (with replacement) from [0, n_windows), a function of
    (seed, epoch) only: runs repeat exactly, and each epoch (``set_epoch``, called by Lightning) draws anew.

    Under data parallelism this rank takes draws ``rank, rank + num_replicas, ...`` of the epoch's (which are padded to
    a multiple of the ranks): ``ceil(num_samples / num_replicas)`` windows, so an epoch is ``num_samples`` windows over
    all the ranks. Being a ``DistributedSampler``, Lightning uses it as is under DDP (it wraps only other samplers).

    ``consumed()`` is how many of this rank's draws of the epoch were already trained on (a resumed run's); they are
    left out. It is called when iteration starts (at the loader's first batch: ``DeferredDataLoader``), not when the
    sampler is built: Lightning may build the train loader (e.g. for ``estimated_stepping_batches``) before it
    restores a checkpoint's counters. The length stays the whole epoch's share, so those counters stay right.
    """

    def __init__(
        self,
        n_windows: int,
        num_samples: int,
        seed: int,
        epoch: int = 0,
        consumed: Callable[[], int] = lambda: 0,
        num_replicas: int = 1,
        rank: int = 0,
    ) -> None:
        if n_windows < 1 or num_samples < 1:
            raise ValueError(f"WindowSampler needs n_windows >= 1 and num_samples >= 1, got {n_windows}, {num_samples}")
        super().__init__(range(n_windows), num_replicas=num_replicas, rank=rank, shuffle=False, seed=seed)
        self.n_windows, self.epoch, self.consumed = n_windows, epoch, consumed
        self.num_samples = math.ceil(num_samples / num_replicas)  # this rank's share (DistributedSampler's meaning)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        draws = np.random.default_rng([self.seed, self.epoch]).integers(0, self.n_windows, self.total_size)
        return iter(draws[self.rank :: self.num_replicas][self.consumed() :].tolist())


class _Source:
    """One split's raw documents (local files or a hub split), loaded on first use, and a key that changes with them."""

    def __init__(self, cfg: DataConfig, split: str, cache_dir: Path) -> None:
        files = cfg.train_files if split == "train" else cfg.valid_files
        self.hub = (cfg.hf_dataset, cfg.hf_config, cfg.hf_train_split if split == "train" else cfg.hf_valid_split)
        self.column, self.cache_dir, self.quoting = cfg.text_column, str(cache_dir / "datasets"), str(cfg.quoting)
        self.files = self._resolve(files, f"data.{split}_files") if files else None
        if self.files is not None:
            more = f" and {len(self.files) - 1} more" if len(self.files) > 1 else ""
            self.where = f"data.{split}_files ({self.files[0]}{more})"
        else:
            self.where = f"data.hf_dataset={self.hub[0]} (config {self.hub[1]}, split {self.hub[2]})"

    @staticmethod
    def _resolve(globs: list[str], key: str) -> list[Path]:
        """The files of ``globs``, checked before any work: each exists, has a known format, and not all are empty."""
        try:
            files = resolve_files(globs, key)
            for path in files:
                file_format(path)
        except (FileNotFoundError, ValueError) as e:  # a glob matching nothing, an unknown extension
            raise DataError(str(e)) from e
        if all(path.stat().st_size == 0 for path in files):
            which = files[0] if len(files) == 1 else f"every file of {globs}"
            raise DataError(f"{key}: {which} is empty: give a corpus with text in it")
        return files

    @cached_property
    def dataset(self) -> datasets.Dataset:
        """The documents, in one column: ``self.column``."""
        if self.files is not None:
            try:
                return load_files(self.files, [self.column], self.cache_dir, txt_column=self.column,
                                  quoting=self.quoting)
            except DataError as e:  # a missing column, named with the file's columns
                raise DataError(f"{e}: set data.text_column to the one that holds the text") from e
            except (datasets.exceptions.DatasetGenerationError, ValueError) as e:  # malformed JSON/CSV, bad UTF-8
                raise DataError(read_error(self.files, e, self.quoting)) from e
        name, config, split = self.hub
        try:
            return load_hub(name, config, split, [self.column], self.cache_dir)
        except DataError as e:
            raise DataError(f"{e}: set data.text_column to the one that holds the text") from e
        except (ValueError, OSError, RuntimeError, datasets.exceptions.DatasetNotFoundError) as e:  # as datasets says
            detail = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise DataError(f"cannot load {self.where}: {detail}") from e

    @cached_property
    def key(self) -> str:
        origin = files_key(self.files, self.quoting) if self.files is not None else self.dataset._fingerprint
        return _hash(origin, self.column)

    def texts(self) -> Iterator[str]:
        for batch in self.dataset.iter(batch_size=256):
            yield from filter(None, batch[self.column])


ORDER_KEYS = {
    "seed": "seed", "batch_size": "data.batch_size per device and pass", "world_size": "processes (devices x nodes)",
    "train_tokens": "training tokens", "n_ctx": "model.n_ctx", "samples_per_epoch": "data.samples_per_epoch",
}
"""The settings that fix the order of the training windows, and how a warning names them."""


class PretrainDataModule(L.LightningDataModule):
    """The pre-training corpus as packed token streams (``train_tokens``, ``valid_tokens``) and LM batches.

    tokenizer: a ``Tokenizer`` (e.g. a checkpoint's) used as is, or a ``TokenizerConfig`` to load or train one.
    cache_dir: where the datasets cache, trained tokenizers and packed streams live, shared across runs.
    With no training data (data.train_files empty and no hub train split: evaluation) only the validation stream
    is prepared, which then needs a given or loadable tokenizer and validation files or a hub split.
    """

    def __init__(
        self,
        cfg: DataConfig,
        tokenizer: TokenizerConfig | Tokenizer,
        n_ctx: int,
        seed: int,
        cache_dir: str | os.PathLike,
    ) -> None:
        super().__init__()
        if cfg.train_files and cfg.hf_dataset:
            raise ConfigError("data.train_files and data.hf_dataset are both set: train on one of them")
        if not 0.0 <= cfg.valid_fraction < 1.0:
            raise ConfigError(f"data.valid_fraction={cfg.valid_fraction} must be in [0, 1)")
        self.cfg, self.n_ctx, self.seed, self.cache_dir = cfg, n_ctx, seed, Path(cache_dir)
        self.tokenizer: Optional[Tokenizer] = tokenizer if isinstance(tokenizer, Tokenizer) else None
        self._tokenizer_cfg = None if isinstance(tokenizer, Tokenizer) else tokenizer
        self.train_tokens: Optional[np.ndarray] = None
        """The packed training stream, (N_train,) uint16/uint32 memmap; set by ``setup`` (None: no training data)."""
        self.valid_tokens: Optional[np.ndarray] = None
        """The packed validation stream, (N_valid,); set by ``setup``."""
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
        self._train_src = _Source(cfg, "train", self.cache_dir) if has_train else None
        self._valid_src = _Source(cfg, "valid", self.cache_dir) if has_valid else None

    # -- preparation ------------------------------------------------------------------------------------------

    def prepare_data(self) -> None:
        """Build (or find in the cache) the tokenizer and the packed .bin stream of every split."""
        tokenizer = self._get_tokenizer(create=True)
        for split, src in self._sources():
            path = self._bin_path(split, src, tokenizer)
            if not path.is_file():
                self._tokenise_and_pack(src, tokenizer, path)
        self.tokenizer = tokenizer

    def setup(self, stage: Optional[str] = None) -> None:
        """Map the packed streams (cheap, and a no-op the second time); ``prepare_data`` must have run."""
        if self._valid is not None:
            return
        tokenizer = self.tokenizer or self._get_tokenizer(create=False)
        streams = {}
        for split, src in self._sources():
            path = self._bin_path(split, src, tokenizer)
            if not path.is_file():
                raise FileNotFoundError(f"{path} does not exist: call prepare_data() before setup()")
            n = path.stat().st_size // np.dtype(_dtype(tokenizer)).itemsize
            streams[split] = TokenStream(str(path), _dtype(tokenizer), 0, n)
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
                if split == "train":
                    where = self._train_src.where
                elif self._valid_src is None:
                    where = f"the held-out end of {self._train_src.where}"
                else:
                    where = self._valid_src.where
                raise DataError(
                    f"{where} holds {len(stream)} tokens, fewer than one window of model.n_ctx + 1 = "
                    f"{self.n_ctx + 1}: give more text, or a smaller model.n_ctx"
                )
        self._train, self._valid = streams.get("train"), streams["valid"]
        self.train_tokens = self._train.open() if self._train is not None else None
        self.valid_tokens = self._valid.open()
        self.tokenizer = tokenizer

    def _sources(self) -> list[tuple[str, _Source]]:
        return [(s, src) for s, src in (("train", self._train_src), ("valid", self._valid_src)) if src is not None]

    def _get_tokenizer(self, create: bool) -> Tokenizer:
        """The given tokenizer, the one at tokenizer.path, or the BPE trained on the training corpus (cached)."""
        if self.tokenizer is not None:
            return self.tokenizer
        cfg = self._tokenizer_cfg
        if cfg.path is not None:
            return build_tokenizer(cfg)
        settings = {f.name: getattr(cfg, f.name) for f in fields(TokenizerConfig)}  # cfg may be an OmegaConf node
        path = self.cache_dir / "tokenizers" / f"{_hash(TOKENIZER_VERSION, self._train_src.key, settings)}.json"
        if path.is_file():
            return Tokenizer.from_str(path.read_text(encoding="utf-8"))
        if not create:
            raise FileNotFoundError(f"{path} does not exist: call prepare_data() before setup()")
        start = time.perf_counter()
        tokenizer = build_tokenizer(cfg, self._train_src.texts)
        with atomic_file(path) as f:
            f.write(tokenizer.to_str().encode())
        log.info("trained a %d-token BPE in %.1fs -> %s", tokenizer.vocab_size, time.perf_counter() - start, path)
        return tokenizer

    def _bin_path(self, split: str, src: _Source, tokenizer: Tokenizer) -> Path:
        key = _hash(PACK_VERSION, src.key, tokenizer.to_str(), self.cfg.separate_documents)
        return self.cache_dir / "tokens" / key / f"{split}.bin"

    def _tokenise_and_pack(self, src: _Source, tokenizer: Tokenizer, path: Path) -> None:
        start = time.perf_counter()
        ds = src.dataset
        fingerprint = _hash(src.key, tokenizer.to_str())
        num_proc = min(self.cfg.num_proc, len(ds))
        with _serial_tokenizers() if num_proc > 1 else nullcontext():  # forked workers: one thread each, no warning
            ids = ds.map(
                _encode,
                batched=True,
                batch_size=256,
                remove_columns=ds.column_names,
                fn_kwargs={"tokenizer": tokenizer, "column": src.column},
                features=datasets.Features({"ids": datasets.List(datasets.Value("int32"))}),
                num_proc=num_proc if num_proc > 1 else None,
                cache_file_name=str(self.cache_dir / "datasets" / f"tokens-{fingerprint}.arrow"),
                new_fingerprint=fingerprint,
                desc="tokenising",
            )
        eod = tokenizer.special_id("eod") if self.cfg.separate_documents else None
        n = pack(ids, path, _dtype(tokenizer), eod)
        log.info("packed %d documents into %d tokens in %.1fs -> %s", len(ds), n, time.perf_counter() - start, path)

    # -- loaders ----------------------------------------------------------------------------------------------

    def train_dataloader(self) -> DataLoader:
        if self._train is None:
            raise RuntimeError("no training stream: call setup() first, and give data.train_files or data.hf_dataset")
        ds = WindowDataset(self._train, self.n_ctx, stride=1)
        num_samples = self.cfg.samples_per_epoch or len(self._train) // self.n_ctx
        if self.trainer is None:
            return self._loader(ds, WindowSampler(len(ds), num_samples, self.seed))
        trainer, batch_size = self.trainer, self.cfg.batch_size
        sampler = WindowSampler(
            len(ds), num_samples, self.seed, trainer.current_epoch,
            # this rank's windows already trained on in this epoch (Lightning's counters, restored on resume)
            lambda: trainer.fit_loop.epoch_loop.batch_progress.current.processed * batch_size,
            trainer.world_size, trainer.global_rank,
        )  # fmt: skip
        return self._loader(ds, sampler)

    def state_dict(self) -> dict[str, Any]:
        """What fixes the order of the training windows, saved in checkpoints (Lightning's datamodule state):
        ``load_state_dict`` compares a resumed run's with it."""
        return {"seed": self.seed, "batch_size": self.cfg.batch_size, "world_size": world_size(self),
                "train_tokens": len(self._train) if self._train is not None else 0, "n_ctx": self.n_ctx,
                "samples_per_epoch": self.cfg.samples_per_epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """On resume: warn where this run draws its windows otherwise than the checkpoint's run did."""
        warn_if_order_changed(self, state, ORDER_KEYS)

    def val_dataloader(self) -> DataLoader:
        if self._valid is None:
            raise RuntimeError("no validation stream: call setup() first")
        return self._loader(WindowDataset(self._valid, self.n_ctx, stride=self.n_ctx, limit=self.cfg.max_valid_windows))

    def test_dataloader(self) -> DataLoader:
        """The validation windows (``gpt1 evaluate`` reports their perplexity)."""
        return self.val_dataloader()

    def _loader(self, ds: WindowDataset, sampler: Optional[Sampler] = None) -> DataLoader:
        return DeferredDataLoader(  # the sampler is asked for its order at the first batch: after a resume restores
            ds,
            batch_size=self.cfg.batch_size,
            sampler=sampler,  # None: in order
            num_workers=self.cfg.num_workers,
            persistent_workers=self.cfg.num_workers > 0,
            pin_memory=torch.cuda.is_available(),
            generator=torch.Generator().manual_seed(self.seed),  # worker seeds never draw from the global RNG
        )


def pack(ds: datasets.Dataset, path: str | os.PathLike, dtype: str, eod: Optional[int], batch_size: int = 1024) -> int:
    """Write the ``ids`` lists of ``ds`` end to end to ``path`` as one flat ``dtype`` array, each non-empty
    document followed by ``eod`` (None: nothing); return the number of tokens. Streams ``batch_size`` documents at
    a time; the file appears complete or not at all."""
    n = 0
    with atomic_file(Path(path)) as f:
        for batch in ds.with_format("arrow").iter(batch_size):
            docs = batch.column("ids").combine_chunks()
            tokens = pc.list_flatten(docs).to_numpy()  # (tokens in the batch,)
            if eod is not None:
                ends = np.cumsum(pc.list_value_length(docs).to_numpy())  # (docs,) end of each document in tokens
                nonempty = np.diff(ends, prepend=0) > 0
                tokens = np.insert(tokens, ends[nonempty], eod)  # eod right after each document
            tokens.astype(dtype).tofile(f)
            n += len(tokens)
    return n


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


def _encode(batch: dict[str, list], tokenizer: Tokenizer, column: str) -> dict[str, list]:
    ids = tokenizer.encode_batch([text or "" for text in batch[column]])
    return {"ids": [np.asarray(i, dtype=np.int32) for i in ids]}


def _dtype(tokenizer: Tokenizer) -> str:
    return "uint16" if tokenizer.vocab_size <= 1 << 16 else "uint32"


def _hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


@contextmanager
def _serial_tokenizers() -> Iterator[None]:
    """TOKENIZERS_PARALLELISM=false for the duration: processes forked meanwhile encode on one thread each (they
    would anyway, after warning that the parent's thread pool cannot survive a fork)."""
    old = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = old
