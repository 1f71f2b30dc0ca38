"""A pre-training corpus (configured by ``gpt1.data.config.DataConfig``): each split's raw documents (local files or
a hub split, ``CorpusSource``), and their tokenisation and packing into one flat token file per split (``pack``).

A .txt file, or a row of a table / hub dataset, is one document. Tokenisation runs with ``datasets.map`` (batched,
``num_proc`` processes), cached; packing concatenates the documents, each followed by the eod token, into a flat
uint16 array (uint32 for vocabularies past 65,536), streamed batch by batch and written under a temporary name then
renamed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Optional

import datasets
import numpy as np
import pyarrow.compute as pc

from gpt1.data.base import cache_key
from gpt1.data.config import DataConfig
from gpt1.data.sources import file_format, files_key, load_files, load_hub, read_error, resolve_files
from gpt1.errors import DataError
from gpt1.io import atomic_file
from gpt1.tokenizer import Tokenizer


class CorpusSource:
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
        ds = load_hub(name, config, split, cache_dir=self.cache_dir, where=self.where)
        if self.column not in ds.column_names:
            raise DataError(f"{self.where} has no column {self.column!r}; its columns are {ds.column_names}: set "
                            "data.text_column to the one that holds the text")
        return ds.select_columns([self.column])

    @cached_property
    def key(self) -> str:
        origin = files_key(self.files, self.quoting) if self.files is not None else self.dataset._fingerprint
        return cache_key(origin, self.column)

    def texts(self) -> Iterator[str]:
        for batch in self.dataset.iter(batch_size=256):
            yield from filter(None, batch[self.column])


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

def encode_documents(batch: dict[str, list], tokenizer: Tokenizer, column: str) -> dict[str, list]:
    """``datasets.map``'s function: a batch of documents (``column``) -> their ids (``ids``), int32."""
    ids = tokenizer.encode_batch([text or "" for text in batch[column]])
    return {"ids": [np.asarray(i, dtype=np.int32) for i in ids]}


def token_dtype(tokenizer: Tokenizer) -> str:
    """The packed streams' dtype: 16 bits per token while the vocabulary fits."""
    return "uint16" if tokenizer.vocab_size <= 1 << 16 else "uint32"



@contextmanager
def serial_tokenizers() -> Iterator[None]:
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
