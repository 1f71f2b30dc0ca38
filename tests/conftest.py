"""Shared fixtures: the sample data, Hydra composition of gpt1's configs, and a GPU marker that skips cleanly."""

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

# Tests never reach the network: the hub libraries must fail loudly instead of downloading.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
# gpt1.cpu.settings.configure caches its kernel timings per machine: the tests' in a directory of their own, not the
# user's
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="gpt1-tests-cache-")
ENV_BEFORE_GPT1 = dict(os.environ)
"""The environment before any gpt1 module is imported (tests/test_imports.py starts processes with it)."""

from hydra import compose, initialize_config_module  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from gpt1.app.config import default_sample_data, register  # noqa: E402

register()  # the schemas, for the configs the tests compose as the commands do

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not torch.cuda.is_available():
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


@pytest.fixture(scope="session")
def sample_data() -> Path:
    """The shared sample data (env GPT1_SAMPLE_DATA, else ../shared/data beside the checkout)."""
    path = Path(os.environ.get("GPT1_SAMPLE_DATA", default_sample_data()))
    assert (path / "books").is_dir(), f"sample data not found at {path}: set GPT1_SAMPLE_DATA"
    return path


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data cache for the session, so each corpus is tokenised once across tests."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def make_cfg(tmp_path: Path, cache_dir: Path) -> Callable[..., DictConfig]:
    """Compose a command's config as the CLI would, writing under tmp_path: make_cfg("pretrain", ["k=v", ...])."""

    def _make(config_name: str = "pretrain", overrides: list[str] = ()) -> DictConfig:
        paths = [f"paths.output_dir={tmp_path / 'run'}", f"paths.cache_dir={cache_dir}"]
        with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
            return compose(config_name=config_name, overrides=[*paths, *overrides])

    return _make


TINY_RUN = [
    "model=tiny",
    "tokenizer.vocab_size=512",
    "data.train_files=[${paths.sample_data}/books/train/northanger_abbey.txt]",
    "data.batch_size=8",
    "data.max_valid_windows=32",
    "logger=csv",
    "trainer.enable_progress_bar=false",
    "trainer.num_sanity_val_steps=0",
]
"""Overrides for a pretrain run of seconds: the tiny model on one novel, validated on 32 windows of another."""

FEW = [
    *TINY_RUN,
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "trainer.check_val_every_n_epoch=null",
    "trainer.limit_val_batches=2",
    "callbacks.samples.every_n_steps=0",
]
"""4 updates of the tiny model, validated twice on 2 batches."""

FEW_FINETUNE = [
    "++task.splits.train='train[:64]'",
    "++task.splits.validation='validation[:16]'",
    "++task.splits.test='test[:16]'",
    "batch_size=8",
    "trainer.max_steps=4",
    "logger=csv",
    "trainer.enable_progress_bar=false",
    "trainer.num_sanity_val_steps=0",
]
"""4 fine-tuning updates of 8 examples (of the first 64), validated and tested on 16 examples each."""


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Path:
    """A tiny pre-trained checkpoint (2 layers, context 32; 2 updates: its weights do not matter where it is used)."""
    from gpt1.commands.pretrain import train

    run = tmp_path_factory.mktemp("pretrain")
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        train(
            compose(
                "pretrain",
                [
                    f"paths.output_dir={run}",
                    f"paths.cache_dir={cache_dir}",
                    *TINY_RUN,
                    "trainer.max_steps=2",
                    "callbacks.samples.every_n_steps=0",
                ],
            )
        )
    return run / "checkpoints" / "last.ckpt"
