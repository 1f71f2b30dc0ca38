"""The private APIs of the libraries gpt1 builds on, each behind one function here and nowhere else, so that an upgrade
that removes or changes one breaks one place, loudly: ``tests/test_compat.py`` checks that each still exists.

Each function imports its library when it is called, not when this module is imported (the model and the CPU path
import this module and only torch)."""

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
    does not expose them (``gpt1.model.layers.embedding`` then keeps ``F.embedding``'s dense gradient)."""
    return getattr(tensor, "_post_accumulate_grad_hooks", False)


# -- Hydra ------------------------------------------------------------------------------------------------------------

# -- OmegaConf --------------------------------------------------------------------------------------------------------

# -- Lightning --------------------------------------------------------------------------------------------------------

# -- submitit ---------------------------------------------------------------------------------------------------------


def slurm_watcher_base() -> type:
    """submitit's watcher of SLURM job states (``submitit.slurm.slurm.SlurmInfoWatcher``), its private hook and state
    under public names for a subclass: it gives the command that reads the states as ``command(pending)`` (submitit's
    ``_make_command``; pending: the ids of the jobs registered and not yet finished, ``_registered - _finished``),
    and reads ``registered()`` (``_registered``) and ``started()`` (``_start_time``: when the last job was
    registered). A new class per call: subclass it once."""
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


def csv_builder_logger() -> object:
    """The ``logging.Logger`` of datasets' csv builder (``datasets.packaged_modules.csv.csv.logger``), which logs
    every file it fails to read before raising."""
    import importlib

    return importlib.import_module("datasets.packaged_modules.csv.csv").logger


# -- Lightning's loops, for gpt1.data ---------------------------------------------------------------------------------


def epoch_batch_progress(trainer: object) -> object:
    """The count of the current epoch's training batches (its ``processed``: this rank's batches trained on, restored
    on resume) in Lightning's fit loop (``trainer.fit_loop.epoch_loop.batch_progress.current``, undocumented)."""
    return trainer.fit_loop.epoch_loop.batch_progress.current
