"""Callbacks of a gpt1 run: periodic checkpoints (written atomically), a checkpoint on SIGTERM, Ctrl-C or a SLURM
job's time-limit warning, text samples, throughput."""

from __future__ import annotations

import atexit
import math
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any, Optional

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, LearningRateMonitor, ModelCheckpoint, ThroughputMonitor
from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities.exceptions import SIGTERMException

from gpt1.checkpoints.format import atomic_save
from gpt1.core.compat import last_global_step_saved, log_train_step_metrics
from gpt1.text.tokenizer import prompt_ids
from gpt1.training.fsdp import full_copy
from gpt1.training.resumable import ForgetLogsOfAFreshStart, RunKernels
from gpt1.training.schema import CallbacksConfig, SamplesConfig


class AtomicCheckpointIO(TorchCheckpointIO):
    """Write each checkpoint to a temporary file and rename it: a crash or kill mid-save leaves the last good one."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: Any = None) -> None:
        atomic_save(checkpoint, path)


class PeriodicCheckpoint(ModelCheckpoint):
    """ModelCheckpoint that also saves ``last.ckpt`` when training stops off the interval (max_steps, max_time)."""

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_step != last_global_step_saved(self):
            trainer.save_checkpoint(Path(self.dirpath) / f"{self.CHECKPOINT_NAME_LAST}{self.FILE_EXTENSION}")


class SafeStop(Callback):
    """SIGTERM (pre-emption, ``scancel``, ``kill``) or a first Ctrl-C (SIGINT) during training: finish the current
    update, save ``last.ckpt`` (atomically), and exit with status 128 + the signal's number (143 for SIGTERM, 130 for
    SIGINT), so that ``resume=auto`` (or ``resume=<last.ckpt>``) continues exactly where it stopped. A second Ctrl-C
    stops at once without saving (last.ckpt stays the last one saved). Under DDP a signal to any rank stops every rank
    after the same update.

    The stop is taken at the end of a batch's callbacks, where periodic checkpoints are saved: the saved state is the
    one a periodic checkpoint of that step would hold, and resumes the same way (a validation due at that very step
    is skipped on resume, as after a periodic checkpoint). With gradient accumulation it waits for the update.
    A SIGTERM before training starts, or after it ends (the final validation), ends the run with 143 too, saving
    nothing.

    In a SLURM job submitted by submitit (hydra/launcher=submitit_slurm), SLURM's warning before the time limit
    (USR2, ``signal_delay_s`` before it) stops training the same way (exit status 140), and then, as the process
    exits, submitit's own handler of the signal requeues the job: the requeued job, with ``resume=auto``, goes on
    from the update the warning came at.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, last: str | os.PathLike) -> None:
        self.last = Path(last)
        self.received: Optional[int] = None
        """The first signal received during training (set by the handler)."""
        self.stopped: Optional[int] = None
        """The signal training stopped on."""
        self._previous: dict[int, Any] = {}
        self._step = -1

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.received = self.stopped = None
        self._step = trainer.global_step
        if trainer.global_step:
            _say(trainer, f"resumed from {trainer.ckpt_path} at step {trainer.global_step}")
        if threading.current_thread() is threading.main_thread():  # Python handles signals there only
            for signum in (*self.SIGNALS, *_requeue_signal()):
                if signal.getsignal(signum) is not signal.SIG_IGN:  # e.g. SIGINT in a background job stays ignored
                    self._previous[signum] = signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        """Note the signal: training stops after the current update (no printing here: a handler may interrupt a
        print, and the stream would refuse the reentrant call)."""
        if self.received is None:
            self.received = signum
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now

    def _restore_handlers(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        stop = self.received is not None
        if trainer.world_size > 1:  # every rank takes part, every batch, so that they all stop after the same one
            stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        updated, self._step = trainer.global_step != self._step, trainer.global_step
        if stop and updated:  # not in the middle of an accumulation: its gradients are in no checkpoint
            self.stopped = self.received or signal.SIGTERM  # (another rank's signal: this rank had none)
            # Log this update's metrics as Lightning would after this hook (the resumed run starts after it, so
            # they would be missing from the logs otherwise); Lightning has no public call for it.
            log_train_step_metrics(trainer)
            raise SIGTERMException(128 + self.stopped)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._restore_handlers()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        requeue = {s: h for s, h in self._previous.items() if s not in self.SIGNALS}  # submitit's handler
        self._restore_handlers()
        if isinstance(exception, KeyboardInterrupt) and self.received == signal.SIGINT:
            _say(trainer, f"stopped by a second Ctrl-C without saving; {self._resume_hint()}")
        if not isinstance(exception, SIGTERMException):
            return
        if self.stopped is None:  # Lightning's own SIGTERM handling: before or after training
            exception.code = exception.code or 128 + signal.SIGTERM
            _say(trainer, f"stopped by SIGTERM outside training, saving nothing; {self._resume_hint()}")
            return
        trainer.save_checkpoint(self.last)  # every rank: under DDP it synchronises them
        name = signal.Signals(self.stopped).name
        if self.stopped in requeue:
            atexit.register(_requeue, requeue[self.stopped], self.stopped)
            _say(
                trainer,
                f"stopped by {name} (the job's time limit is near) at step {trainer.global_step}: saved "
                f"{self.last}; submitit requeues the job, which goes on from it with resume=auto "
                f"(exit status {exception.code})",
            )
            return
        _say(
            trainer,
            f"stopped by {name} at step {trainer.global_step}: saved {self.last}; continue with "
            f"resume=auto hydra.run.dir={self.last.parent.parent} (exit status {exception.code})",
        )

    def _resume_hint(self) -> str:
        if self.last.is_file():
            return f"resume=auto hydra.run.dir={self.last.parent.parent} continues from {self.last}"
        return "no checkpoint had been saved"


def _requeue_signal() -> tuple[int, ...]:
    """submitit's signal (USR2, or the one SUBMITIT_PREEMPT_SIGNAL names), when this process is a task of a SLURM job
    submitted by submitit, which handles it: SLURM sends it ``signal_delay_s`` before the job's time limit."""
    signum = getattr(signal, "SIG" + os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2"), None)
    if os.environ.get("SUBMITIT_EXECUTOR") != "slurm" or signum is None or not callable(signal.getsignal(signum)):
        return ()
    return (signum,)


def _requeue(handler: Any, signum: int) -> None:
    """At exit, training stopped and saved: submitit's handler of its signal requeues the job (task 0 does) and
    exits, which it may not do in an exit handler."""
    try:
        handler(signum, None)
    except SystemExit:
        pass
    except Exception as e:  # noqa: BLE001  (e.g. "Job not requeued because: timed-out too many times.")
        print(f"not requeued: {e}", file=sys.stderr, flush=True)


def _say(trainer: L.Trainer, message: str) -> None:
    """One line on stderr, from rank 0 only."""
    if trainer.is_global_zero:
        print(message, file=sys.stderr, flush=True)


class SampleText(Callback):
    """Every ``every_n_steps`` updates and at the end of training, continue a prompt and log the text.

    Sampling uses its own seeded generator, so it never perturbs the training RNG stream.
    """

    def __init__(self, cfg: SamplesConfig) -> None:
        self.cfg = cfg
        self.last_text: str | None = None
        self.last_step = -1

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        every, step = self.cfg.every_n_steps, trainer.global_step
        if every > 0 and step > 0 and step % every == 0 and step != self.last_step:  # once per update
            self.sample(trainer, pl_module)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.cfg.every_n_steps > 0 and self.last_step != trainer.global_step:
            self.sample(trainer, pl_module)

    def sample(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        tokenizer, model = pl_module.tokenizer, pl_module.model
        if pl_module.device_mesh is not None:  # sharded (trainer=fsdp): every rank gathers, rank 0 decodes a copy
            model = full_copy(model)
        self.last_step = trainer.global_step  # on every rank alike, so that they sample at the same steps
        if not trainer.is_global_zero:
            return
        prompt = prompt_ids(tokenizer, self.cfg.prompt)
        generator = torch.Generator(pl_module.device).manual_seed(trainer.global_step)
        was_training = model.training
        model.eval()
        ids = model.generate(
            torch.tensor([prompt], device=pl_module.device),
            self.cfg.max_new_tokens,
            temperature=self.cfg.temperature,
            top_k=self.cfg.top_k,
            generator=generator,
        )
        model.train(was_training)
        self.last_text = tokenizer.decode(ids[0].tolist())
        print_above_bar(trainer, f"[sample @ step {trainer.global_step}] {self.last_text}")
        for logger in trainer.loggers:
            if isinstance(logger, TensorBoardLogger):
                logger.experiment.add_text("samples", self.last_text, trainer.global_step)
            elif isinstance(logger, WandbLogger):
                logger.log_text("samples", columns=["step", "text"], data=[[trainer.global_step, self.last_text]])


def print_above_bar(trainer: L.Trainer, text: str) -> None:
    """Print a line without breaking the progress bar: through the bar's ``print`` (above it), or plainly when there
    is no bar."""
    bar = trainer.progress_bar_callback
    if bar is not None:
        bar.print(text)
    else:
        print(text, flush=True)


class LogShortRuns(Callback):
    """Log the training metrics at least once in a run of fewer updates than ``trainer.log_every_n_steps`` (a short
    fine-tune): the interval becomes the run's length, so that its last update is logged (Lightning logs every
    n-th update only). Longer runs keep their interval."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        updates = trainer.estimated_stepping_batches
        if math.isfinite(updates) and 0 < updates < trainer.log_every_n_steps:
            trainer.log_every_n_steps = int(updates)


def build_callbacks(cfg: CallbacksConfig, output_dir: Path, with_loggers: bool) -> list[Callback]:
    """The callbacks ``cfg`` asks for; checkpoints go to ``output_dir/checkpoints``."""
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
    ]
    if with_loggers:
        callbacks += [LearningRateMonitor(logging_interval="step"), LogShortRuns()]
        if cfg.throughput:  # train/device/items_per_sec: tokens/s per device, padding excluded (an item is a token;
            # GPT1Module.on_before_batch_transfer counts them), over 10 steps
            callbacks.append(ThroughputMonitor(lambda b: b["input_ids"].size(0), lambda b: b["tokens"], window_size=10))
    callbacks.append(RunKernels(output_dir))  # the run's CPU kernels, fixed at its start, in every checkpoint
    if with_loggers:
        callbacks.append(ForgetLogsOfAFreshStart())
    callbacks.append(SafeStop(output_dir / "checkpoints" / "last.ckpt"))  # last: after the batch's other callbacks
    return callbacks
