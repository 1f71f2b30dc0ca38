"""Each private API that gpt1.core.compat wraps still exists in the installed library: an upgrade that removes one
fails here, by name, rather than silently somewhere in a run."""

# -- torch ------------------------------------------------------------------------------------------------------------

# -- Hydra ------------------------------------------------------------------------------------------------------------

# -- OmegaConf --------------------------------------------------------------------------------------------------------

# -- Lightning --------------------------------------------------------------------------------------------------------

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


# -- Lightning's loops, for gpt1.data ---------------------------------------------------------------------------------


def test_lightning_epoch_batch_progress():
    import lightning as L

    from gpt1.core.compat import epoch_batch_progress

    trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False)
    try:
        progress = epoch_batch_progress(trainer)
    except AttributeError as e:
        raise AssertionError(f"Lightning's trainer.fit_loop.epoch_loop.batch_progress.current is gone ({e})") from e
    assert progress.processed == 0, "Lightning's batch progress has no processed count"
