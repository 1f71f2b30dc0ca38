"""Shared fixtures: the sample data, Hydra composition of gpt1's configs, and a GPU marker that skips cleanly."""

import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

# Tests never reach the network: the hub libraries must fail loudly instead of downloading.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
# The commands the tests start (gpt1, wandb) are this interpreter's install's, whether or not its venv is activated
# (`.venv/bin/python -m pytest` as much as the README's `python -m pytest`)
os.environ["PATH"] = os.pathsep.join(
    dict.fromkeys([str(Path(sys.executable).parent), *os.environ["PATH"].split(os.pathsep)])
)
# gpt1.cpu.settings.configure caches its kernel timings per machine: the tests' in a directory of the session's, not the
# user's, made by pytest's process; its pytest-xdist workers inherit it (the kernels measured once for all)
if not (os.environ.get("PYTEST_XDIST_WORKER") and "gpt1-tests-cache-" in os.environ.get("XDG_CACHE_HOME", "")):
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="gpt1-tests-cache-")
ENV_BEFORE_GPT1 = dict(os.environ)
"""The environment before any gpt1 module is imported (tests/test_imports.py starts processes with it)."""

from hydra import compose, initialize_config_module  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from gpt1.app.registration import register  # noqa: E402
from gpt1.data.sample import sample_data as sample_folder  # noqa: E402
from tests.helpers import REPO, TINY_RUN, built_once, shared_dir, unchanged  # noqa: E402

register()  # the schemas, for the configs the tests compose as the commands do

REFERENCE = REPO.parent / "shared" / "reference"
"""The reference files beside the checkout (OpenAI's vocab and golden encodings, the paper's facts); the tests that
need them skip without them."""

QUICK = {
    "core": [
        "test_progress.py::test_in_a_log_file_progress_is_a_line_per_tenth_of_the_budget",
        "test_progress.py::test_a_disabled_bar_prints_nothing",
        "test_progress.py::test_a_bar_in_a_log_is_a_line_per_tenth_and_a_last_one",
        "test_memory.py::test_the_line_names_each_figure",
    ],
    "cpu": [
        "test_ops.py::test_linear_matches_f_linear_in_value_and_gradients",
        "test_ops.py::test_set_cpu_matmuls_refuses_unknown_kinds_and_kernels_and_keeps_torch_without_onednn",
        "test_ops.py::test_dropout_drops_with_probability_p_and_scales_the_rest",
        "test_cpu.py::test_forced_matmuls_are_not_measured",
        "test_cpu.py::test_auto_picks_the_measured_faster_kernel_per_kind_torch_on_a_tie",
    ],
    "model": [
        "test_model.py::test_block_is_post_ln",
        "test_model.py::test_lm_head_is_tied_to_the_token_embedding",
        "test_model.py::test_model_is_causal",
        "test_model.py::test_a_token_step_gives_the_forwards_hidden_states_to_the_bit",
        "test_model.py::test_config_errors_name_the_field",
    ],
    "text": [
        "test_tokenizer.py::test_special_tokens_are_appended_in_order_and_decoding_skips_them",
        "test_tokenizer.py::test_to_str_from_str_round_trip_keeps_pipeline_and_specials",
        "test_tokenizer.py::test_training_reads_its_texts_twice_so_an_iterator_is_refused",
    ],
    "checkpoints": [
        "test_transfer.py::test_n_transfer_takes_the_embeddings_and_the_first_blocks",
        "test_transfer.py::test_the_lstm_takes_the_token_embeddings_only",
        "test_hf.py::test_config_from_hf",
    ],
    "tasks": [
        "test_tasks.py::test_classification_batch",
        "test_tasks.py::test_kept_lengths",
        "test_tasks.py::test_similarity_batch_has_both_orderings",
        "test_task_types.py::test_the_papers_four_types_are_registered",
        "test_model.py::test_pack_choices_puts_the_shared_context_once_and_each_choice_after_it",
        "test_zeroshot.py::test_join",
        "test_zeroshot.py::test_fit_threshold",
    ],
    "data": [
        "test_data.py::test_pack_joins_documents_with_eod_across_batches",
        "test_data.py::test_train_windows_are_shifted_slices_of_the_stream",
        "test_data.py::test_batches_depend_only_on_seed_and_epoch",
        "test_data.py::test_unknown_extension_lists_the_supported_ones",
        "test_loader.py::test_the_global_batch_is_split_over_devices_passes_or_micro_batches",
    ],
    "training": [
        "test_train.py::test_lr_schedule_warms_up_linearly_then_decays_to_zero",
        "test_fidelity.py::test_the_best_validation_strictly_better_keeps_its_weights",
    ],
    "app": [
        "test_config.py::test_default_pretrain_is_the_quickstart",
        "test_config.py::test_mistakes_fail_at_composition_naming_the_key",
    ],
    "cluster": ["test_scale.py::test_lightning_takes_the_ranks_of_a_slurm_job"],
    "commands": ["test_config.py::test_every_command_config_composes"],
    "tools": [
        "test_bench.py::test_flops_per_token_is_6n_plus_12_layers_width_seq_counted_by_hand",
        "test_report.py::test_rows_are_settings_with_the_median_and_spread_over_seeds",
    ],
}
"""Package -> tests that exercise it in a few seconds each: ``python -m pytest -m quick``, the inner loop's tier (under
a minute on 2 cores, collection included). tests/test_imports.py checks that every package has an entry."""


SLOWEST_FIRST = ["test_scale.py", "test_errors.py", "test_experiments.py", "test_readme.py", "test_sweeps.py"]
SLOWEST_FIRST += ["test_fsdp.py", "test_cli.py", "test_prepare.py", "test_stops.py", "test_finetune.py"]
SLOWEST_FIRST += ["test_console.py", "test_wandb_env.py", "test_advice.py", "test_fuzz.py"]
"""The files whose tests take a minute or more (on 2 cores), first: pytest-xdist runs a file's tests on one worker
(``--dist loadfile``, pyproject.toml) in this order, so that no long file is left to run alone at the end."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: SLOWEST_FIRST.index(item.path.name) if item.path.name in SLOWEST_FIRST else 99)
    if not torch.cuda.is_available():
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
    quick = {f"tests/{test}" for tests in QUICK.values() for test in tests}
    for item in items:
        if item.nodeid.split("[")[0] in quick:
            item.add_marker(pytest.mark.quick)
    collected = {item.nodeid.split("[")[0] for item in items}
    files = {item.nodeid.split("::")[0] for item in items}
    missing = sorted(test for test in quick if test.split("::")[0] in files and test not in collected)
    if missing and not config.getoption("keyword"):  # a renamed or removed test must leave QUICK too
        raise pytest.UsageError(f"tests/conftest.py QUICK names tests that do not exist: {', '.join(missing)}")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data cache for the session, its pytest-xdist workers included, so that each corpus is tokenised and each
    task encoded once across tests (gpt1's cache entries are made once however many processes start on them)."""
    return shared_dir(tmp_path_factory, "cache")


@pytest.fixture(scope="session")
def sample_data(cache_dir: Path) -> Path:
    """The sample data as ``paths.sample_data`` gives it to the configs of ``make_cfg``: gpt1's own, unpacked into the
    session's cache (or env GPT1_SAMPLE_DATA)."""
    return Path(sample_folder(cache_dir))


@pytest.fixture(scope="session")
def openai_vocab() -> Path:
    """OpenAI's vocab files and golden.jsonl: ``../shared/reference/openai-vocab`` beside the checkout."""
    path = REFERENCE / "openai-vocab"
    if not (path / "golden.jsonl").is_file():
        pytest.skip(f"OpenAI's vocab and golden.jsonl are not at {path} (shared/reference beside the checkout)")
    return path


@pytest.fixture
def sigint_not_ignored() -> Iterator[None]:
    """A shell's background job (a CI script's ``&``, ``nohup``) starts with SIGINT ignored, and gpt1 leaves an
    ignored signal alone: give a test that sends Ctrl-C Python's own handler, as in a terminal, and put back what was
    there."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def make_cfg(tmp_path: Path, cache_dir: Path) -> Callable[..., DictConfig]:
    """Compose a command's config as the CLI would, writing under tmp_path: make_cfg("pretrain", ["k=v", ...])."""

    def _make(config_name: str = "pretrain", overrides: list[str] = ()) -> DictConfig:
        paths = [f"paths.output_dir={tmp_path / 'run'}", f"paths.cache_dir={cache_dir}"]
        with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
            return compose(config_name=config_name, overrides=[*paths, *overrides])

    return _make


def pretrained_run(directory: Path, cache_dir: Path, *overrides: str) -> None:
    """A tiny pre-training (``TINY_RUN``) into ``directory``."""
    from gpt1.commands.pretrain import train

    paths = [f"paths.output_dir={directory}", f"paths.cache_dir={cache_dir}"]
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        train(compose("pretrain", [*paths, *TINY_RUN, "callbacks.samples.every_n_steps=0", *overrides]))


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Path]:
    """A tiny pre-trained checkpoint (2 layers, context 32; 2 updates: its weights do not matter where it is used),
    built once for the session (``built_once``: read-only)."""
    run = built_once(tmp_path_factory, "tiny_ckpt", lambda d: pretrained_run(d, cache_dir, "trainer.max_steps=2"))
    yield run / "checkpoints" / "last.ckpt"
    unchanged(run)


@pytest.fixture(scope="session")
def pretrained(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Path]:
    """A tiny pre-trained checkpoint that has learnt something (20 updates on one novel; context 32), built once for
    the session (``built_once``: read-only)."""
    steps = ["trainer.max_steps=20", "optim.lr=3e-3", "optim.warmup_steps=5"]
    run = built_once(tmp_path_factory, "pretrained", lambda d: pretrained_run(d, cache_dir, *steps))
    yield run / "checkpoints" / "last.ckpt"
    unchanged(run)
