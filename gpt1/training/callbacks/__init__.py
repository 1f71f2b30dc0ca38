"""The callbacks of a gpt1 run, one per module, all built by ``build_callbacks`` (and the CSV log's start over,
``gpt1.training.csv_log``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from lightning.pytorch.callbacks import Callback, LearningRateMonitor, ThroughputMonitor

from gpt1.training.callbacks.best_weights import BestWeights
from gpt1.training.callbacks.continue_epoch import ContinueEpoch
from gpt1.training.callbacks.few_updates import FewUpdates
from gpt1.training.callbacks.periodic_checkpoint import PeriodicCheckpoint
from gpt1.training.callbacks.provenance import RecordRun
from gpt1.training.callbacks.run_kernels import RunKernels
from gpt1.training.callbacks.safe_stop import SafeStop
from gpt1.training.callbacks.sample_text import SampleText
from gpt1.training.callbacks.short_runs import LogShortRuns
from gpt1.training.callbacks.trained_metrics import TrainedMetrics
from gpt1.training.csv_log import ForgetLogsOfAFreshStart
from gpt1.training.schema import CallbacksConfig


def build_callbacks(
    cfg: CallbacksConfig,
    output_dir: Path,
    with_loggers: bool,
    select_by: Optional[str] = None,
    prefixes: tuple[str, ...] = ("val/",),
) -> list[Callback]:
    """The callbacks ``cfg`` asks for; checkpoints go to ``output_dir/checkpoints``. ``select_by`` (model_selection=
    best: the task's main validation metric) adds ``BestWeights``, keeping the metrics whose keys start with one of
    ``prefixes``."""
    keep = cfg.checkpoint.keep_last
    callbacks: list[Callback] = [
        PeriodicCheckpoint(
            dirpath=output_dir / "checkpoints",
            filename="step{step:07d}",
            auto_insert_metric_name=False,
            every_n_train_steps=cfg.checkpoint.every_n_steps,
            monitor="step",  # keeps the newest `keep` checkpoints
            mode="max",
            save_top_k=keep,
            save_last=True,
            # Save every interval's checkpoint when its batch ends. Otherwise Lightning defers an epoch's last-batch
            # save to the validation it expects next, which with validation every N batches across epochs may not
            # come: that checkpoint was silently never written.
            save_on_train_epoch_end=True,
            # A file of the same name is overwritten (atomically), never kept beside as last-v1.ckpt: after a stop
            # before the first periodic save, the resumed run's checkpoint state has no last_model_path and
            # Lightning's counter moved every later save to -v1 files, leaving last.ckpt at the stop.
            enable_version_counter=False,
        ),
        SampleText(cfg.samples),
        FewUpdates(),
    ]
    if with_loggers:
        callbacks += [LearningRateMonitor(logging_interval="step"), LogShortRuns()]
        if cfg.throughput:  # train/device/items_per_sec: tokens/s per device, padding excluded (an item is a token;
            # GPT1Module.on_before_batch_transfer counts them), over 10 steps
            callbacks.append(ThroughputMonitor(lambda b: b["input_ids"].size(0), lambda b: b["tokens"], window_size=10))
    callbacks.append(RunKernels(output_dir))  # the run's CPU kernels, fixed at its start, in every checkpoint
    callbacks.append(ContinueEpoch())  # a resumed epoch's batches counted in this run's passes per update
    callbacks.append(RecordRun(output_dir))  # how this attempt runs, its kernels fixed: provenance.json and W&B
    callbacks.append(TrainedMetrics())  # train/loss of a checkpoint's update, for a run resumed at its last step
    if with_loggers:
        callbacks.append(ForgetLogsOfAFreshStart())
    callbacks.append(SafeStop(output_dir / "checkpoints" / "last.ckpt"))  # after the batch's other callbacks
    if select_by is not None:  # the weights of the best validation, as the original
        callbacks.append(BestWeights(output_dir / "checkpoints" / "best.ckpt", select_by, prefixes))
    return callbacks
