"""A checkpoint on SIGTERM, Ctrl-C or a SLURM job's time-limit warning, then the exit status that says which, and
submitit's requeue."""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any, Optional

import lightning as L
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities.exceptions import SIGTERMException

from gpt1.core.compat import log_train_step_metrics
from gpt1.training.console import say


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
            say(trainer, f"resumed from {trainer.ckpt_path} at step {trainer.global_step}")
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
            say(trainer, f"stopped by a second Ctrl-C without saving; {self._resume_hint()}")
        if not isinstance(exception, SIGTERMException):
            return
        if self.stopped is None:  # Lightning's own SIGTERM handling: before or after training
            exception.code = exception.code or 128 + signal.SIGTERM
            say(trainer, f"stopped by SIGTERM outside training, saving nothing; {self._resume_hint()}")
            return
        trainer.save_checkpoint(self.last)  # every rank: under DDP it synchronises them
        name = signal.Signals(self.stopped).name
        if self.stopped in requeue:
            atexit.register(_requeue, requeue[self.stopped], self.stopped)
            say(
                trainer,
                f"stopped by {name} (the job's time limit is near) at step {trainer.global_step}: saved "
                f"{self.last}; submitit requeues the job, which goes on from it with resume=auto "
                f"(exit status {exception.code})",
            )
            return
        say(
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
