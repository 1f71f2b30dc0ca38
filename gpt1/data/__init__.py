"""Data pipelines: raw text sources (local files or the Hugging Face hub) and the pre-training data module."""

from gpt1.data.pretrain import (
    DataConfig,
    PretrainDataModule,
    TokenStream,
    WindowDataset,
    WindowSampler,
    pack,
    unigram_perplexity,
)
from gpt1.data.sources import FORMATS, file_columns, file_format, files_key, load_files, load_hub, resolve_files

__all__ = [
    "FORMATS",
    "DataConfig",
    "PretrainDataModule",
    "TokenStream",
    "WindowDataset",
    "WindowSampler",
    "file_columns",
    "file_format",
    "files_key",
    "load_files",
    "load_hub",
    "pack",
    "resolve_files",
    "unigram_perplexity",
]
