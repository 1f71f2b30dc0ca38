"""Each private API that gpt1.core.compat wraps still exists in the installed library: an upgrade that removes one
fails here, by name, rather than silently somewhere in a run."""

import pytest

from gpt1.core import compat

# -- torch ------------------------------------------------------------------------------------------------------------

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


# -- OmegaConf --------------------------------------------------------------------------------------------------------


def test_omegaconf_gives_a_node_unresolved():
    """``config_node``: OmegaConf's private ``DictConfig._get_node`` gives the child node, not its value."""
    from omegaconf import DictConfig, OmegaConf

    cfg = OmegaConf.create({"a": {"b": 1}, "c": "${a.b}"})
    assert hasattr(cfg, "_get_node"), "omegaconf's DictConfig._get_node is gone"
    assert isinstance(compat.config_node(cfg, "a"), DictConfig)
    assert compat.config_node(cfg, "c")._is_interpolation()


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
    assert isinstance(compat.rich_available(), bool)
    table = compat.summary_table(10, 10, 0.04, {"train": 1, "eval": 0}, 0, (" ", ["0"]), ("Name", ["model"]))
    assert "Total params" in table, "lightning's _format_summary_table changed"
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


# -- submitit ---------------------------------------------------------------------------------------------------------
