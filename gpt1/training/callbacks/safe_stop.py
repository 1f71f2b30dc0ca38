"""A checkpoint on SIGTERM, Ctrl-C or a SLURM job's time-limit warning, then the exit status that says which, and
submitit's requeue."""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Optional

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities.exceptions import SIGTERMException

from gpt1.core.compat import log_train_step_metrics
from gpt1.core.run_record import resume_command
from gpt1.training.console import say


class SafeStop(Callback):
    """SIGTERM (pre-emption, ``scancel``, ``kill``) or a first Ctrl-C during training: finish the current update,
    save ``last.ckpt``, and exit with status 128 + the signal's number, so that ``resume=auto`` continues exactly
    where it stopped. A second Ctrl-C stops at once without saving. Under DDP a signal to any rank stops every rank
    after the same update.

    The stop is taken at the end of a batch's callbacks, where periodic checkpoints are saved: the saved state is the
    one a periodic checkpoint of that step would hold, and resumes the same way. With gradient accumulation it waits
    for the update; a validation under way finishes first.

    After the last update the signal stops the command too, at the end of training, at the next batch of the
    evaluation that follows it, or before metrics.json is written (``check``): ``last.ckpt`` holds the trained
    weights, and ``resume=auto`` does the rest. The handlers stay until the run's results are written or an exception
    ends it (``release``), and are then those from before the run.

    In a SLURM job submitted by submitit, SLURM's warning before the time limit (USR2) stops training the same way,
    and then, as the process exits, submitit's own handler of the signal requeues the job.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, last: str | os.PathLike) -> None:
        self.last = Path(last)
        self.received: Optional[int] = None
        """The first signal received during training (set by the handler)."""
        self.stopped: Optional[int] = None
        """The signal the run stopped on."""
        self.trained = False
        """Whether the stop came after the last update (the evaluation that follows it skipped)."""
        self.armed = False
        """Whether this run trained and has not released the signals yet: a signal stops it (every rank alike)."""
        self._before = {signum: signal.getsignal(signum) for signum in (*self.SIGNALS, *_requeue_signal())}
        """The signals' handlers before the run (made before any trainer call: Lightning's come and go with each)."""
        self._taken: list[int] = []
        self._step = -1
        self._shared_batches: list[int] = []
        """Per dataloader of the evaluation under way, the batches that every rank has."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.received = self.stopped = None
        self.trained, self.armed = False, True
        self._step = trainer.global_step
        if trainer.global_step:
            say(trainer, f"resumed from {trainer.ckpt_path} at step {trainer.global_step}")
        if threading.current_thread() is threading.main_thread():  # Python handles signals there only
            # (SIGINT in a background job stays ignored)
            self._taken = [s for s, handler in self._before.items() if handler is not signal.SIG_IGN]
            for signum in self._taken:
                signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        """Note the signal (no printing here: a handler may interrupt a print, which the stream would refuse to
        reenter)."""
        if self.received is None:
            self.received = signum
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now

    def release(self) -> None:
        """Give the signals back their handlers from before the run (again after Lightning's teardown of a trainer
        call, which puts back those it found as the call began: the run's)."""
        self.armed = False
        for signum in self._taken:
            signal.signal(signum, self._before[signum])

    def _signalled(self, trainer: L.Trainer) -> bool:
        """Whether a signal asks this run to stop: this rank's, or under DDP any rank's."""
        stop = self.received is not None
        if trainer.world_size > 1:
            stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        return stop

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        stop = self._signalled(trainer)  # (every rank, every batch, so that they all stop after the same one)
        updated, self._step = trainer.global_step != self._step, trainer.global_step
        if stop and updated:  # not in the middle of an accumulation: its gradients are in no checkpoint
            self.stopped = self.received or signal.SIGTERM  # (another rank's signal: this rank had none)
            # Log this update's metrics as Lightning would after this hook (the resumed run starts after it, so
            # they would be missing from the logs otherwise); Lightning has no public call for it.
            log_train_step_metrics(trainer)
            raise SIGTERMException(128 + self.stopped)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.armed and self._signalled(trainer):  # after the last update, or in fit's last validation
            # what PeriodicCheckpoint saves at the end of training, which Lightning calls after this (last)
            trainer.save_checkpoint(self.last)
            self._stop_after_training(trainer, signalled=True)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.armed:  # Lightning gave SIGTERM back the handler it had before fit: this run's again, to its end
            for signum in self._taken:
                signal.signal(signum, self._handle)

    # The evaluation after training (a validation in training finishes first). Under DDP each rank's share of it may
    # be a batch shorter than another's (``gpt1.data.loader.EvalShard``: every example once), and the stop is agreed
    # on by a collective: at each batch that every rank has, then at the evaluation's end, which every rank reaches
    # (callbacks' epoch-end hooks run before the module's metric syncs). A collective at a batch that one rank lacks
    # would wait forever on the others' next one.
    def on_validation_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.state.fn != TrainerFn.FITTING:
            self._evaluation_starts(trainer, trainer.num_val_batches)

    def on_test_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._evaluation_starts(trainer, trainer.num_test_batches)

    def on_predict_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._evaluation_starts(trainer, trainer.num_predict_batches)

    def on_test_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if batch_idx < self._shared_batches[dataloader_idx]:
            self._stop_after_training(trainer)

    on_predict_batch_end = on_test_batch_end

    def on_validation_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if trainer.state.fn != TrainerFn.FITTING:
            self.on_test_batch_end(trainer, *args)

    def on_test_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._stop_after_training(trainer)

    on_predict_epoch_end = on_test_epoch_end

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.state.fn != TrainerFn.FITTING:
            self._stop_after_training(trainer)

    def _evaluation_starts(self, trainer: L.Trainer, batches: Sequence[int | float]) -> None:
        """Note, per dataloader, how many batches every rank has (the fewest of any rank's)."""
        self._shared_batches = [int(min(n, sys.maxsize)) for n in batches]  # (inf: a dataloader without a length)
        if trainer.world_size > 1 and self.armed:
            counts = torch.tensor(self._shared_batches, dtype=torch.long)  # (D,) this rank's
            self._shared_batches = trainer.strategy.all_gather(counts).reshape(-1, len(counts)).amin(0).tolist()

    def check(self, trainer: L.Trainer) -> None:
        """Before the run's results are written (metrics.json): stop if a signal came after the last update."""
        try:
            self._stop_after_training(trainer)
        except SIGTERMException as stop:
            self._stopped(trainer, stop.code)
            raise

    def _stop_after_training(self, trainer: L.Trainer, signalled: bool = False) -> None:
        if signalled or (self.armed and self._signalled(trainer)):
            self.stopped, self.trained = self.received or signal.SIGTERM, True
            raise SIGTERMException(128 + self.stopped)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if isinstance(exception, SIGTERMException) and self.stopped is not None:
            if not self.trained:
                trainer.save_checkpoint(self.last)  # every rank: under DDP it synchronises them
            self._stopped(trainer, exception.code)
            return
        self.release()
        if isinstance(exception, KeyboardInterrupt) and self.received == signal.SIGINT:
            say(trainer, f"stopped by a second Ctrl-C without saving; {self._resume_hint()}")
        if isinstance(exception, SIGTERMException):  # Lightning's own SIGTERM handling: before training
            exception.code = exception.code or 128 + signal.SIGTERM
            say(trainer, f"stopped by SIGTERM outside training, saving nothing; {self._resume_hint()}")

    def _stopped(self, trainer: L.Trainer, code: Any) -> None:
        """The handlers back, the stop's line, and for submitit's signal the requeue at exit."""
        requeue = {s: self._before[s] for s in self._taken if s not in self.SIGNALS}  # submitit's handler
        self.release()
        name = signal.Signals(self.stopped).name
        if self.trained:
            what = (
                f"stopped by {name} after the last update (step {trainer.global_step}): {self.last} holds the trained "
                "weights; the evaluation after training (validation, test, metrics.json) was skipped"
            )
        else:
            what = f"stopped by {name} at step {trainer.global_step}: saved {self.last}"
        if self.stopped in requeue:
            atexit.register(_requeue, requeue[self.stopped], self.stopped)
            say(
                trainer,
                what.replace(f"by {name}", f"by {name} (the job's time limit is near)", 1)
                + f"; submitit requeues the job, which {'does it' if self.trained else 'goes on from it'} with "
                f"resume=auto (exit status {code})",
            )
            return
        go_on = "do it" if self.trained else "continue"
        say(trainer, f"{what}; {go_on} with {self._resume()} (exit status {code})")

    def _resume_hint(self) -> str:
        if self.last.is_file():
            return f"{self._resume()} continues from {self.last}"
        return "no checkpoint had been saved"

    def _resume(self) -> str:
        """The command that continues the run, from its directory's record (``gpt1.core.run_record``); for a run
        made from Python, what its config needs."""
        run_dir = self.last.parent.parent
        return resume_command(run_dir) or f"resume=auto in its config (paths.output_dir={run_dir})"


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
