"""Each private API that gpt1.core.compat wraps still exists in the installed library: an upgrade that removes one
fails here, by name, rather than silently somewhere in a run."""

import pytest

from gpt1.core import compat

# -- torch ------------------------------------------------------------------------------------------------------------


def test_torch_ops_mkldnn_linear_pointwise_exists_and_computes_f_linear():
    """gpt1.cpu.kernels runs fp32 products on torch.ops.mkldnn._linear_pointwise (private) on x86 CPUs: if torch drops
    or changes it, this fails (gpt1 would fall back to torch's matmuls, correct but slower where oneDNN wins)."""
    import platform

    import pytest
    import torch
    import torch.nn.functional as F

    from gpt1.core import compat
    from gpt1.cpu import kernels

    if platform.machine().lower() not in ("x86_64", "amd64") or not torch.backends.mkldnn.is_available():
        pytest.skip("oneDNN's linear is used on x86 CPUs only")
    op = compat.onednn_linear()
    assert op is not None, "torch.ops.mkldnn._linear_pointwise is gone (gpt1.core.compat.onednn_linear)"
    assert kernels.onednn_available()
    x, w, b = torch.randn(3, 8), torch.randn(5, 8), torch.randn(5)
    torch.testing.assert_close(op(x, w, b, "none", [], ""), F.linear(x, w, b))
    torch.testing.assert_close(kernels.linear_forward(x, w, b, "onednn"), F.linear(x, w, b))


def test_tensor_post_accumulate_grad_hooks_exist():
    """gpt1.cpu.layers reads Tensor._post_accumulate_grad_hooks (private) to hook the sparse table gradient once:
    if torch drops it, this fails (gpt1 would fall back to F.embedding's dense gradient, correct but slower)."""
    import torch

    from gpt1.core import compat
    from gpt1.cpu import layers

    weight = torch.nn.Parameter(torch.randn(4, 3))
    hooks = compat.post_accumulate_grad_hooks(weight)
    assert hooks is not False, (
        "Tensor._post_accumulate_grad_hooks is gone (gpt1.core.compat.post_accumulate_grad_hooks)"
    )
    assert hooks is None  # no hook yet
    assert layers._densified(weight) and len(compat.post_accumulate_grad_hooks(weight)) == 1


def test_torchs_cpu_bf16_probes_exist():
    """trainer.precision=auto asks torch's private CPU probes whether to train in bf16: if torch renames them, this
    fails (gpt1 would train in fp32 on a bf16 CPU: correct, slower)."""
    import torch

    from gpt1.core import compat

    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        assert callable(getattr(torch.cpu, probe, None)), f"torch.cpu.{probe} is gone (gpt1.core.compat)"
    assert isinstance(compat.cpu_multiplies_bf16(), bool)


# -- Hydra ------------------------------------------------------------------------------------------------------------


def test_hydra_reports_its_errors_through_run_and_report():
    """``hydra_reports_through``: Hydra's private ``hydra._internal.utils.run_and_report`` runs what it reports, and
    ``hydra.main`` calls it through the module (so that replacing it there takes effect)."""
    import inspect

    import hydra.main
    from hydra._internal import utils

    assert callable(getattr(utils, "run_and_report", None)), "hydra._internal.utils.run_and_report is gone"
    assert "_run_hydra" in inspect.getsource(hydra.main), "hydra.main no longer runs hydra._internal.utils._run_hydra"
    assert "run_and_report(" in inspect.getsource(utils._run_hydra), "_run_hydra no longer calls run_and_report"
    original = utils.run_and_report
    seen = []
    with compat.hydra_reports_through(lambda func: lambda: seen.append(func()) or "wrapped"):
        assert utils.run_and_report(lambda: 1) == "wrapped" and seen == [1]
    assert utils.run_and_report is original


def test_hydra_sweepers_launch_through_the_launcher_plugins_instantiates(monkeypatch):
    """``launchers_wrapped_by``: Hydra's basic and Optuna sweepers take their launcher from
    ``Plugins.instantiate_launcher`` (and launch through it), which is replaced on the class and put back."""
    import inspect

    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.plugins import Plugins
    from hydra_plugins.hydra_optuna_sweeper._impl import OptunaSweeperImpl

    for sweeper in (BasicSweeper, OptunaSweeperImpl):
        assert "self.launcher = Plugins.instance().instantiate_launcher(" in inspect.getsource(sweeper.setup)
        assert "self.launcher.launch(" in inspect.getsource(sweeper.sweep)
    assert inspect.signature(Plugins.instantiate_launcher).parameters.keys() == {
        "self",
        "hydra_context",
        "task_function",
        "config",
    }
    made = lambda self, **kwargs: ("launcher", kwargs)  # noqa: E731  (what Hydra's would make)
    monkeypatch.setattr(Plugins, "instantiate_launcher", made)
    with compat.launchers_wrapped_by(lambda launcher: ("wrapped", launcher)):
        assert Plugins.instance().instantiate_launcher(config=1) == ("wrapped", ("launcher", {"config": 1}))
    assert Plugins.instantiate_launcher is made


def test_hydra_main_builds_its_flag_parser_by_name():
    """``hydra_flags_parsed_by``: ``hydra.main`` calls ``get_args_parser`` by the name it imported, and the parser it
    gets then is of the given class (its own class kept beneath), put back after."""
    import argparse
    import importlib
    import inspect

    hydra_main = importlib.import_module("hydra.main")
    assert "get_args_parser()" in inspect.getsource(hydra_main), "hydra.main no longer calls get_args_parser()"
    original = hydra_main.get_args_parser

    class Mine(argparse.ArgumentParser):
        pass

    with compat.hydra_flags_parsed_by(Mine):
        parser = hydra_main.get_args_parser()
        assert isinstance(parser, Mine) and parser.parse_args(["--cfg", "job"]).cfg == "job"
    assert hydra_main.get_args_parser is original


def test_hydra_reads_a_config_directorys_files_through_file_config_source(tmp_path):
    """``hydra_config_files_checked_by``: Hydra's ``FileConfigSource.load_config`` (of the module as Hydra's plugin
    scan left it, the class Hydra uses) reads a --config-dir's files, and the check sees each file's path first."""
    import importlib

    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "mine.yaml").write_text("type: classification\n")
    seen = []
    with compat.hydra_config_files_checked_by(seen.append):
        module = importlib.import_module("hydra._internal.core_plugins.file_config_source")
        source = module.FileConfigSource(provider="test", path=str(tmp_path))
        assert source.load_config("task/mine").config.type == "classification"
    assert seen == [str(tmp_path / "task" / "mine.yaml")]
    assert module.FileConfigSource.load_config.__qualname__ == "FileConfigSource.load_config"  # put back


# -- OmegaConf --------------------------------------------------------------------------------------------------------


def test_omegaconf_gives_a_node_unresolved():
    """``config_node``: OmegaConf's private ``DictConfig._get_node`` gives the child node, not its value."""
    from omegaconf import DictConfig, OmegaConf

    cfg = OmegaConf.create({"a": {"b": 1}, "c": "${a.b}"})
    assert hasattr(cfg, "_get_node"), "omegaconf's DictConfig._get_node is gone"
    assert isinstance(compat.config_node(cfg, "a"), DictConfig)
    assert compat.config_node(cfg, "c")._is_interpolation()


def test_omegaconf_keeps_a_lists_item_type():
    """``list_item_type``: a typed list field's node knows its items' type (OmegaConf's private node metadata)."""
    from dataclasses import dataclass, field

    from omegaconf import OmegaConf

    @dataclass
    class Schema:
        betas: list[float] = field(default_factory=lambda: [0.9])
        anything: list = field(default_factory=list)

    cfg = OmegaConf.structured(Schema)
    assert compat.list_item_type(compat.config_node(cfg, "betas")) is float
    assert compat.list_item_type(compat.config_node(cfg, "anything")) is not float


# -- Lightning --------------------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:The `srun` command is available")  # (a SLURM machine: the trainer's note)
def test_lightning_private_apis_exist(tmp_path):
    """Each Lightning internal that ``gpt1.core.compat`` reaches is still there, by the name it reaches."""
    import inspect

    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger
    from lightning.pytorch.strategies import ModelParallelStrategy

    assert hasattr(ModelCheckpoint(), "_last_global_step_saved"), "ModelCheckpoint._last_global_step_saved is gone"
    assert compat.last_global_step_saved(ModelCheckpoint()) == 0
    connector = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)._logger_connector
    for method in ("on_batch_end", "update_train_step_metrics"):
        assert callable(getattr(connector, method, None)), f"Trainer._logger_connector.{method} is gone"
    assert compat.attached_trainer(L.LightningModule()) is None, "LightningModule._trainer is gone"
    assert hasattr(ModelParallelStrategy(), "_data_parallel_size"), "ModelParallelStrategy._data_parallel_size is gone"
    assert "self._data_parallel_size" in inspect.getsource(ModelParallelStrategy.setup_environment)
    assert hasattr(CSVLogger(tmp_path), "_experiment"), "CSVLogger._experiment is gone"


def test_lightning_csv_writer_keeps_the_file_it_finds(tmp_path):
    """``csv_writer_keeping_its_file``: the private ``_check_log_dir_exists`` that Lightning's CSV writer calls, and
    which deletes a metrics.csv, is the one it replaces."""
    from lightning.pytorch.loggers.csv_logs import ExperimentWriter

    (tmp_path / ExperimentWriter.NAME_METRICS_FILE).write_text("step,loss\n1,2.0\n")
    compat.csv_writer_keeping_its_file()(str(tmp_path))
    assert (tmp_path / ExperimentWriter.NAME_METRICS_FILE).is_file(), "Lightning's CSV writer deleted metrics.csv"
    with pytest.warns(
        UserWarning, match="will be deleted"
    ):  # Lightning's own deletes it: the method replaced is the one
        ExperimentWriter(str(tmp_path))
    assert not (tmp_path / ExperimentWriter.NAME_METRICS_FILE).is_file(), "ExperimentWriter no longer deletes it"


def test_lightning_epoch_batch_progress():
    import lightning as L

    from gpt1.core.compat import epoch_batch_progress

    trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False)
    try:
        progress = epoch_batch_progress(trainer)
    except AttributeError as e:
        raise AssertionError(f"Lightning's trainer.fit_loop.epoch_loop.batch_progress.current is gone ({e})") from e
    assert progress.processed == 0, "Lightning's batch progress has no processed count"


def test_lightning_batch_counts_in_other_passes():
    """``count_batches_in_passes``: the four counts of the epoch loop's current and total batch progress, moved to
    another number of passes per update at their offsets (a checkpoint saved at a batch's end: completed trails)."""
    import lightning as L

    trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False)
    progress = trainer.fit_loop.epoch_loop.batch_progress
    for tracker, n in ((progress.current, 6), (progress.total, 14)):
        tracker.ready = tracker.started = tracker.processed = n
        tracker.completed = n - 1
    assert compat.count_batches_in_passes(trainer, 2, 1)  # 3 and 7 updates of 2 passes: 3 and 7 of 1
    assert [(t.ready, t.started, t.processed, t.completed) for t in (progress.current, progress.total)] == [
        (3, 3, 3, 2),
        (7, 7, 7, 6),
    ]
    assert not compat.count_batches_in_passes(trainer, 2, 4) and progress.current.processed == 3  # not whole: kept


def test_lightning_counters_as_a_fit_to_its_end_leaves_them():
    """``end_of_fit_counters``: the loggers' count of updates (one short in a checkpoint saved at a batch's end) and
    the epochs done (the last one's not counted), both private or undocumented."""
    import lightning as L

    trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit_loop.epoch_loop.manual_optimization.optim_step_progress.total.completed = 8  # (global_step's)
    trainer.fit_loop.epoch_loop.automatic_optimization.optim_progress.optimizer.step.total.completed = 8
    trainer.fit_loop.epoch_loop._batches_that_stepped = 7
    epochs = trainer.fit_loop.epoch_progress.current
    epochs.ready = epochs.started = 1
    compat.end_of_fit_counters(trainer)
    assert trainer.global_step == 8 and trainer.fit_loop.epoch_loop._batches_that_stepped == 8
    assert trainer.current_epoch == 1 and (epochs.processed, epochs.completed) == (1, 1)
    compat.end_of_fit_counters(trainer)  # (as a fit that ran to its end leaves them: nothing to do)
    assert trainer.fit_loop.epoch_loop._batches_that_stepped == 8 and trainer.current_epoch == 1


# -- submitit ---------------------------------------------------------------------------------------------------------


def test_submitit_watcher_hook_and_state():
    import time

    import pytest

    from gpt1.core.compat import slurm_watcher_base

    submitit_slurm = pytest.importorskip("submitit.slurm.slurm")
    watcher = submitit_slurm.SlurmInfoWatcher(delay_s=1)
    for name in ("_make_command", "_registered", "_finished", "_start_time"):
        assert hasattr(watcher, name), f"submitit's SlurmInfoWatcher.{name} is gone: update slurm_watcher_base"

    class Recorder(slurm_watcher_base()):
        def command(self, pending):
            self.asked = set(pending)
            return None  # nothing to run

    recorder = Recorder(delay_s=1)
    recorder.register_job("7")
    recorder.update()  # submitit asks its _make_command for the command: ours, with the jobs still to watch
    assert recorder.asked == {"7"}, "submitit's InfoWatcher.update no longer calls _make_command"
    assert recorder.registered() == {"7"} and 0 < recorder.started() <= time.time()


def test_submitit_job_watcher_is_a_class_attribute():
    import pytest

    from gpt1.core.compat import slurm_job_watcher

    submitit_slurm = pytest.importorskip("submitit.slurm.slurm")
    assert isinstance(getattr(submitit_slurm.SlurmJob, "watcher", None), submitit_slurm.SlurmInfoWatcher), (
        "submitit's SlurmJob.watcher (the watcher every SLURM job shares) is gone: update slurm_job_watcher"
    )
    before = slurm_job_watcher()
    try:
        replacement = submitit_slurm.SlurmInfoWatcher(delay_s=1)
        assert slurm_job_watcher(replace_with=replacement) is replacement is submitit_slurm.SlurmJob.watcher
    finally:
        slurm_job_watcher(replace_with=before)


def test_submitit_submitted_pickle(tmp_path):
    import pytest

    from gpt1.core.compat import submitted_arguments

    utils = pytest.importorskip("submitit.core.utils")
    assert hasattr(utils, "DelayedSubmission"), "submitit.core.utils.DelayedSubmission is gone"
    utils.DelayedSubmission(print, ["a=1"], "task", 3).dump(tmp_path / "0_submitted.pkl")
    assert submitted_arguments(tmp_path / "0_submitted.pkl") == (["a=1"], "task", 3)


# -- datasets ---------------------------------------------------------------------------------------------------------


def test_datasets_fingerprint():
    import datasets

    from gpt1.core.compat import dataset_fingerprint

    one, two = datasets.Dataset.from_dict({"text": ["a"]}), datasets.Dataset.from_dict({"text": ["b"]})
    assert isinstance(getattr(one, "_fingerprint", None), str), "datasets.Dataset._fingerprint is gone"
    assert dataset_fingerprint(one) != dataset_fingerprint(two)


def test_datasets_csv_builder_logs_through_its_module_logger():
    import logging

    from gpt1.core.compat import csv_builder_logger

    try:
        logger = csv_builder_logger()
    except (ImportError, AttributeError) as e:
        raise AssertionError(
            f"datasets.packaged_modules.csv.csv.logger is gone: update csv_builder_logger ({e})"
        ) from e
    assert isinstance(logger, logging.Logger) and logger.name == "datasets.packaged_modules.csv.csv"


def test_a_prepared_split_names_the_files_and_fingerprint_as_dataset_would(tmp_path):
    import datasets

    from gpt1.core.compat import prepared_split

    (tmp_path / "rows.jsonl").write_text("".join(f'{{"text": "row {i}"}}\n' for i in range(10)))
    builder = datasets.load_dataset_builder("json", data_files=[str(tmp_path / "rows.jsonl")], cache_dir=str(tmp_path))
    builder.download_and_prepare()
    for split, want in (("train", [f"row {i}" for i in range(10)]), ("train[2:5]", ["row 2", "row 3", "row 4"])):
        files, num_rows, fingerprint = prepared_split(builder, split)
        ds = builder.as_dataset(split=split)
        assert [name for name, _, _ in files] == [f["filename"] for f in ds.cache_files]
        assert num_rows == len(ds) == len(want) and ds["text"] == want
        assert fingerprint == ds._fingerprint, "datasets' split fingerprint moved: update prepared_split"


def test_a_builders_writer_batch_size_sets_its_rows_per_record_batch(tmp_path):
    """``set_writer_batch_size``: datasets' private ``_writer_batch_size``, set on a builder already made, is what
    its conversion writes per record batch."""
    import datasets
    import pyarrow as pa

    from gpt1.core.compat import prepared_split, set_writer_batch_size

    (tmp_path / "rows.jsonl").write_text("".join(f'{{"text": "row {i}"}}\n' for i in range(5)))
    builder = datasets.load_dataset_builder("json", data_files=[str(tmp_path / "rows.jsonl")], cache_dir=str(tmp_path))
    set_writer_batch_size(builder, 2)
    builder.download_and_prepare()
    (path, _, _), *_ = prepared_split(builder, "train")[0]
    with pa.memory_map(path) as source:
        assert [b.num_rows for b in pa.ipc.open_stream(source)] == [2, 2, 1], "update set_writer_batch_size"
