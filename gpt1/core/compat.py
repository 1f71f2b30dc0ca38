"""The private APIs of the libraries gpt1 builds on, each behind one function here, so that an upgrade that changes
one breaks one place, loudly (``tests/test_compat.py``). Each imports its library when called: the model imports this
module and only torch."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# -- torch ------------------------------------------------------------------------------------------------------------


def onednn_linear():
    """torch's private oneDNN fp32 linear, ``torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")``
    (x @ weight.T + bias), or None where this torch has none (``gpt1.cpu.kernels`` then runs every product on
    torch's own matmuls)."""
    import torch

    try:
        return torch.ops.mkldnn._linear_pointwise
    except (AttributeError, RuntimeError):
        return None


def post_accumulate_grad_hooks(tensor):
    """The hooks ``Tensor.register_post_accumulate_grad_hook`` put on ``tensor`` (its private
    ``_post_accumulate_grad_hooks``: None before the first, then a dict of id -> hook), or False where this torch
    does not expose them (``gpt1.cpu.layers.embedding`` then keeps ``F.embedding``'s dense gradient)."""
    return getattr(tensor, "_post_accumulate_grad_hooks", False)


def cpu_multiplies_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX), by torch's private probes
    ``torch.cpu._is_avx512_bf16_supported`` and ``_is_amx_tile_supported``; False where this torch has neither."""
    import torch

    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, probe, lambda: False)() for probe in probes)


# -- Hydra ------------------------------------------------------------------------------------------------------------


@contextmanager
def _swapped(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name`` is ``value`` within the block, then what it was."""
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextmanager
def hydra_reports_through(wrap: Callable[[Callable[[], Any]], Callable[[], Any]]) -> Iterator[None]:
    """Within it, Hydra runs what it reports errors of (composing the config, the flags, the job) as ``wrap(func)``:
    gpt1's one-line errors. Hydra has no public hook: its private ``hydra._internal.utils.run_and_report``."""
    from hydra._internal import utils

    original = utils.run_and_report
    with _swapped(utils, "run_and_report", lambda func: original(wrap(func))):
        yield


@contextmanager
def hydra_flags_parsed_by(parser_class: type) -> Iterator[None]:
    """Within it, ``hydra.main`` parses the command line's flags with a parser of ``parser_class`` (an
    ``argparse.ArgumentParser`` subclass): gpt1's, whose errors are one line. Hydra's private
    ``hydra._internal.utils.get_args_parser``, which ``hydra.main`` imported by name, is replaced there."""
    import importlib

    hydra_main = importlib.import_module("hydra.main")  # the module (``import hydra.main`` names the function)
    original = hydra_main.get_args_parser

    def parser() -> Any:
        made = original()
        made.__class__ = type("HydraFlags", (parser_class, type(made)), {})
        return made

    with _swapped(hydra_main, "get_args_parser", parser):
        yield


@contextmanager
def hydra_config_files_checked_by(check: Callable[[str], None]) -> Iterator[None]:
    """Within it, each YAML file Hydra reads from a config directory is first given to ``check(path)``, which raises
    on one Hydra would fail to read. Hydra has no hook: its private ``FileConfigSource.load_config`` is replaced, after
    Hydra's first scan of its plugins (which executes that class's module anew)."""
    import os

    from hydra.core.plugins import Plugins

    Plugins.instance()  # (the scan of Hydra's plugins, once per process)
    from hydra._internal.core_plugins.file_config_source import FileConfigSource

    original = FileConfigSource.load_config

    def load_config(self: Any, config_path: str) -> Any:
        check(os.path.join(self.path, self._normalize_file_name(config_path)))
        return original(self, config_path)

    with _swapped(FileConfigSource, "load_config", load_config):
        yield


@contextmanager
def launchers_wrapped_by(wrap: Callable[[Any], Any]) -> Iterator[None]:
    """Within it, every launcher a Hydra sweeper instantiates (``Plugins.instantiate_launcher``) is
    ``wrap(launcher)``: gpt1's resumable sweeps. Hydra has no hook between a sweeper and its launcher: the method is
    replaced on the class (not the instance, which a submitit job's pickled state holds)."""
    from hydra.core.plugins import Plugins

    original = Plugins.instantiate_launcher
    with _swapped(Plugins, "instantiate_launcher", lambda self, **kwargs: wrap(original(self, **kwargs))):
        yield


# -- OmegaConf --------------------------------------------------------------------------------------------------------


def config_node(cfg: Any, key: str) -> Any:
    """The node under ``key`` of a ``DictConfig``, unresolved (an interpolation stays one, a missing value does not
    raise): OmegaConf's private ``DictConfig._get_node``, which its public API has no equal of."""
    return cfg._get_node(key)


def list_item_type(node: Any) -> Any:
    """The declared type of a ``ListConfig``'s items (``float`` for a ``list[float]`` field; ``Any`` when undeclared):
    OmegaConf's private node metadata, which its public API has no equal of."""
    return node._metadata.element_type


# -- Lightning --------------------------------------------------------------------------------------------------------


def last_global_step_saved(callback: Any) -> int:
    """The global step of the last checkpoint a ``ModelCheckpoint`` saved (private ``_last_global_step_saved``)."""
    return callback._last_global_step_saved


def log_train_step_metrics(trainer: Any) -> None:
    """Send the current update's training metrics to the loggers now, as Lightning does after ``on_train_batch_end``
    (private ``trainer._logger_connector``): for a run that stops inside that hook."""
    trainer._logger_connector.on_batch_end()
    trainer._logger_connector.update_train_step_metrics()


def attached_trainer(module: Any) -> Any:
    """The Trainer a LightningModule is attached to, or None (its public ``trainer`` raises when there is none):
    private ``LightningModule._trainer``."""
    return module._trainer


def set_data_parallel_size(strategy: Any, size: int) -> None:
    """Make a ``ModelParallelStrategy``'s device mesh ``size`` processes data-parallel, set in its
    ``setup_environment`` before the mesh is built (private ``_data_parallel_size``; the public argument cannot
    count processes not yet known)."""
    strategy._data_parallel_size = size


def csv_writer_keeping_its_file() -> type:
    """Lightning's CSV ``ExperimentWriter``, less its check that deletes (and warns of) the metrics.csv it finds in its
    directory (the private ``_check_log_dir_exists``, which its ``__init__`` calls): a class to subclass."""
    from lightning.pytorch.loggers.csv_logs import ExperimentWriter

    class KeepingWriter(ExperimentWriter):
        def _check_log_dir_exists(self) -> None:
            pass

    return KeepingWriter


def logger_experiment(logger: Any, make: Callable[[], Any]) -> Any:
    """A Lightning logger's experiment object, made by ``make()`` the first time (private ``logger._experiment``,
    where Lightning's loggers keep it)."""
    if logger._experiment is None:
        logger._experiment = make()
    return logger._experiment


def without_wandb_anonymous(logger: Any) -> Any:
    """Lightning's ``WandbLogger`` with no ``anonymous`` argument for ``wandb.init`` (it passes one, None when not
    asked, which W&B warns at every run "has no effect"): private ``WandbLogger._wandb_init``."""
    logger._wandb_init.pop("anonymous", None)
    return logger


def epoch_batch_progress(trainer: object) -> object:
    """The count of the current epoch's training batches (its ``processed``: this rank's batches trained on, restored
    on resume) in Lightning's fit loop (``trainer.fit_loop.epoch_loop.batch_progress.current``, undocumented)."""
    return trainer.fit_loop.epoch_loop.batch_progress.current


def count_batches_in_passes(trainer: object, then: int, now: int) -> bool:
    """Make Lightning's counts of training batches (undocumented), restored from a run that took ``then`` batches per
    update, those of the same updates in ``now`` batches each, each count kept at its offset from ``processed``
    (``completed`` trails it by one after a save at a batch's end). False, changing nothing, when a count of processed
    batches is not a whole number of updates."""
    progress = trainer.fit_loop.epoch_loop.batch_progress
    trackers = (progress.current, progress.total)
    if any(t.processed % then for t in trackers):
        return False
    for tracker in trackers:
        processed = tracker.processed
        for name in ("ready", "started", "processed", "completed"):
            setattr(tracker, name, processed // then * now + getattr(tracker, name) - processed)
    return True


def end_of_fit_counters(trainer: object) -> None:
    """Lightning's counters (private, undocumented) as a fit that trained to its end leaves them, also after a fit
    resumed at its last step, which keeps its checkpoint's (one update and the last epoch short): they label the rows
    the evaluation after training logs."""
    loop = trainer.fit_loop
    loop.epoch_loop._batches_that_stepped = max(loop.epoch_loop._batches_that_stepped, trainer.global_step)
    epochs = loop.epoch_progress.current
    if epochs.started > epochs.completed:
        epochs.processed = epochs.completed = epochs.started


# -- submitit ---------------------------------------------------------------------------------------------------------


def slurm_watcher_base() -> type:
    """submitit's watcher of SLURM job states (``SlurmInfoWatcher``), its private hook and state under public names
    for a subclass: ``command(pending)`` (the ids of the jobs registered and not yet finished), ``registered()``,
    ``started()`` (when the last job was registered). A new class per call: subclass it once."""
    from submitit.slurm.slurm import SlurmInfoWatcher

    class SlurmWatcher(SlurmInfoWatcher):
        def _make_command(self) -> list[str] | None:
            return self.command(self._registered - self._finished)

        def command(self, pending: set[str]) -> list[str] | None:
            """The command whose output ``read_info`` reads, None for none (nothing to watch)."""
            raise NotImplementedError

        def registered(self) -> set[str]:
            return self._registered

        def started(self) -> float:
            return self._start_time

    return SlurmWatcher


def slurm_job_watcher(replace_with: object = None) -> object:
    """The watcher every submitit SLURM job reads its state from (the class attribute ``SlurmJob.watcher``),
    replaced by ``replace_with`` when given."""
    from submitit.slurm.slurm import SlurmJob

    if replace_with is not None:
        SlurmJob.watcher = replace_with
    return SlurmJob.watcher


def submitted_arguments(path: object) -> tuple:
    """The positional arguments of the call a submitit job runs, read from its ``*_submitted.pkl`` (submitit's
    ``submitit.core.utils.DelayedSubmission``, not exported by the package)."""
    from submitit.core.utils import DelayedSubmission

    return DelayedSubmission.load(path).args


# -- datasets ---------------------------------------------------------------------------------------------------------


def dataset_fingerprint(dataset: object) -> str:
    """A ``datasets.Dataset``'s fingerprint (its private ``_fingerprint``): changes whenever its rows may."""
    return dataset._fingerprint


def prepared_split(builder: Any, split: str) -> tuple[tuple[tuple[str, int, int], ...], int, str]:
    """What ``builder.as_dataset(split)`` would map, without mapping it: the Arrow files of ``split`` (a split's name,
    or a slice of it such as "train[:10%]") in a prepared builder's cache, each with the rows to skip and to take
    (-1: the rest), their rows in all, and the fingerprint ``as_dataset`` gives the split (its private
    ``_get_dataset_fingerprint``)."""
    from datasets.arrow_reader import make_file_instructions

    found = make_file_instructions(
        builder.dataset_name, builder.info.splits.values(), split, "arrow", builder.cache_dir
    )
    if not found.file_instructions:
        raise ValueError(f'Instruction "{split}" corresponds to no data!')  # as as_dataset says
    files = tuple((f["filename"], f["skip"], f["take"]) for f in found.file_instructions)
    return files, found.num_examples, builder._get_dataset_fingerprint(split)


def set_writer_batch_size(builder: Any, rows: int) -> None:
    """Make a builder not yet prepared write ``rows`` rows per Arrow record batch (and buffer at most that many
    one-row tables): what ``load_dataset_builder(writer_batch_size=rows)`` gives (its private
    ``_writer_batch_size``), for a builder made already, whose data files its making resolved."""
    builder._writer_batch_size = rows


def csv_builder_logger() -> object:
    """The ``logging.Logger`` of datasets' csv builder (``datasets.packaged_modules.csv.csv.logger``), which logs
    every file it fails to read before raising."""
    import importlib

    return importlib.import_module("datasets.packaged_modules.csv.csv").logger
