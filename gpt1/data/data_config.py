"""The data group's schema (``conf/data``: ``DataConfig``). Light on purpose: the config schema imports it, and commands
that load no data (generate, convert) should not pay for ``datasets`` or Lightning."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from gpt1.core.errors import ConfigError, ranged
from gpt1.core.quoting import Quoting


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
    num_proc: Optional[int] = ranged(None, ge=1)
    """Processes tokenising the corpus, capped at the number of documents: 1 encodes on the tokenizers library's
    threads over every core; more fork that many processes of one thread each (what the "openai" pipeline's Python
    needs). None: by the pipeline, 1 for "gpt1" and one per core for "openai" (the packed tokens are the same)."""
    samples_per_epoch: Optional[int] = ranged(None, ge=1)
    """Random training windows per epoch, rounded up to whole global batches (data.batch_size); None: n_train_tokens //
    n_ctx (each token seen about once)."""
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
