"""Each private API that gpt1.core.compat wraps still exists in the installed library: an upgrade that removes one
fails here, by name, rather than silently somewhere in a run."""

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
    """gpt1.model.layers reads Tensor._post_accumulate_grad_hooks (private) to hook the sparse table gradient once:
    if torch drops it, this fails (gpt1 would fall back to F.embedding's dense gradient, correct but slower)."""
    import torch

    from gpt1.core import compat
    from gpt1.model import layers

    weight = torch.nn.Parameter(torch.randn(4, 3))
    hooks = compat.post_accumulate_grad_hooks(weight)
    assert hooks is not False, (
        "Tensor._post_accumulate_grad_hooks is gone (gpt1.core.compat.post_accumulate_grad_hooks)"
    )
    assert hooks is None  # no hook yet
    assert layers._densified(weight) and len(compat.post_accumulate_grad_hooks(weight)) == 1


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
