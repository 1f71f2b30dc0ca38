"""What a run prints is what a user needs: a progress bar that counts to the run's budget (``StepProgress``), lines
above it or from rank 0 alone, and ``quiet_library_noise``, the one place that silences library output."""

from __future__ import annotations

import logging
import math
import re
import sys
import time
import warnings
from datetime import timedelta
from typing import Any, Optional

import lightning as L
from lightning.pytorch.callbacks import ProgressBar
from tqdm import tqdm

from gpt1.core.progress import bar, write


class StepProgress(ProgressBar):
    """Training progress in updates against the run's budget: on a terminal a tqdm bar (and one per validation,
    erased when done); in a log file, where a bar would be a wall of redraws, a line at every tenth of the budget and
    at least every ``every_s`` seconds: ``step 120/300 (40%), 0:00:42 elapsed, 0:01:03 left, loss 5.012``."""

    def __init__(self, every_s: float = 30.0) -> None:
        super().__init__()
        self.every_s = every_s
        self.enabled = True
        self.train_bar: Optional[tqdm] = None
        self.eval_bar: Optional[tqdm] = None
        self.total: Optional[int] = None  # the run's updates (None: unbounded)
        self.first = 0  # the step training started (resumed) at
        self.started = self.last_line = 0.0
        self.last_tenth = 0

    def disable(self) -> None:
        self.enabled = False

    def enable(self) -> None:
        self.enabled = True

    @property
    def terminal(self) -> bool:
        return sys.stderr.isatty()

    def budget(self, trainer: L.Trainer) -> Optional[int]:
        """trainer.max_steps, else the updates of max_epochs (None: unbounded)."""
        total = trainer.max_steps if trainer.max_steps > 0 else trainer.estimated_stepping_batches
        return int(total) if math.isfinite(total) else None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self.enabled:
            return
        self.total, self.first = self.budget(trainer), trainer.global_step  # (a resumed run counts from its step)
        self.started = self.last_line = time.monotonic()
        self.last_tenth = 10 * self.first // self.total if self.total else 0
        if self.terminal:
            self.train_bar = bar(desc="train", unit="step", total=self.total, terminal=True)
            self.train_bar.update(self.first)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        if not self.enabled:
            return
        step, metrics = trainer.global_step, self.get_metrics(trainer, pl_module)
        shown = {k: v for k, v in metrics.items() if k not in ("v_num",)}
        if self.train_bar is not None:
            if step > self.train_bar.n:
                self.train_bar.update(step - self.train_bar.n)
                self.train_bar.set_postfix(shown, refresh=False)
            return
        now = time.monotonic()
        tenth = 10 * step // self.total if self.total else 0
        if tenth > self.last_tenth or now - self.last_line >= self.every_s:
            self.last_tenth, self.last_line = tenth, now
            print(self.line(step, now, shown), file=sys.stderr, flush=True)

    def line(self, step: int, now: float, metrics: dict[str, Any]) -> str:
        elapsed = now - self.started
        done = f"step {step}"
        if self.total:
            done += f"/{self.total} ({100 * step // self.total}%)"
        parts = [done, f"{timedelta(seconds=round(elapsed))} elapsed"]
        if self.total and step > self.first:
            left = elapsed / (step - self.first) * (self.total - step)
            parts.append(f"{timedelta(seconds=round(left))} left")
        parts += [f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items()]
        return ", ".join(parts)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.train_bar is not None:
            self.train_bar.close()
            self.train_bar = None

    def _eval_start(self, trainer: L.Trainer, desc: str, total: float) -> None:
        if self.enabled and self.terminal and self.eval_bar is None:
            total = int(total) if math.isfinite(total) else None
            self.eval_bar = bar(desc=desc, unit="batch", total=total, leave=False, terminal=True)

    def on_validation_batch_start(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        self._eval_start(trainer, "validate", self.total_val_batches)

    def on_test_batch_start(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        self._eval_start(trainer, "test", sum(trainer.num_test_batches))

    def on_predict_batch_start(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        self._eval_start(trainer, "predict", sum(trainer.num_predict_batches))

    def on_validation_batch_end(self, *args: Any, **kwargs: Any) -> None:
        if self.eval_bar is not None:
            self.eval_bar.update(1)

    on_test_batch_end = on_predict_batch_end = on_validation_batch_end

    def on_validation_end(self, *args: Any) -> None:
        if self.eval_bar is not None:
            self.eval_bar.close()
            self.eval_bar = None

    on_test_end = on_predict_end = on_sanity_check_end = on_validation_end

    def print(self, *args: Any, **kwargs: Any) -> None:
        """A line above the bars (the text samples), on stdout."""
        write(" ".join(map(str, args)))


_NOISE_MESSAGES = {
    # Lightning's advertisements, and the devices it finds at every Trainer's start: the command's model line names
    # the one the run is on ("on cpu", "on 8 cuda devices", ``device_words``)
    "lightning.pytorch.utilities.rank_zero": (
        r"💡 Tip: |Loading `train_dataloader` to estimate number of stepping|(GPU|TPU) available: "
    ),
    "lightning.pytorch.accelerators.cuda": r"LOCAL_RANK: \d+ - CUDA_VISIBLE_DEVICES: ",
    "lightning.fabric.utilities.rank_zero": r"💡 Tip: ",
    "lightning_utilities.core.rank_zero": r"💡 Tip: ",
    # trainer.save_checkpoint without weights_only: the default (a full checkpoint) is what we want
    "lightning.pytorch.trainer.connectors.checkpoint_connector": r"`weights_only` was not set, defaulting to `False`",
}
"""Logger -> a regex of the messages it logs that say nothing to a user."""
_NOISE_WARNINGS = [
    # Lightning 2.6 on torch >= 2.10 (lightning/pytorch/utilities/_pytree.py): its own use of a torch API
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated", FutureWarning),
    # an epoch of fewer batches than log_every_n_steps (a small corpus): Lightning counts the logging interval across
    # epochs, so the metrics are logged all the same
    (r"The number of training batches \(\d+\) is smaller than the logging interval", UserWarning),
    # GPT1Module counts a batch's real tokens in on_before_batch_transfer, for any data module, a user's too: that the
    # module's hook runs, not the data module's, is the intent
    (r"You have overridden `on_before_batch_transfer` in `LightningModule` but have passed in a", UserWarning),
    # bf16-mixed keeps fp32 weights: the summary's size at 32 bits, which this warning calls inaccurate, is right
    (r"Precision \S+ is not supported by the model summary", UserWarning),
    # debug=overfit asks for the same batches every epoch: Lightning turning the loaders' shuffling (and evaluation's
    # longest-first order) off is what was asked for
    (r"You requested to overfit but enabled \w+ dataloader shuffling", UserWarning),
    # srun on the PATH (a SLURM login node or workstation): gpt1 reaches SLURM through hydra/launcher=submitit_slurm,
    # which starts its tasks with srun itself; a run started by hand there is meant to run where it is
    (r"The `srun` command is available on your system but is not used", UserWarning),
    # a mid-epoch resume: Lightning warns that it replays the epoch's data unless the loader is stateful; gpt1's
    # training loaders continue the epoch's draws from Lightning's restored counters (PretrainDataModule's windows,
    # the fine-tuning EpochSampler), so the run resumes exactly
    (r"You're resuming from a checkpoint that ended before the epoch ended", UserWarning),
    # a run on the CPU of a machine with a GPU (trainer=cpu, as asked): Lightning's advice, `Trainer(accelerator=...)`,
    # is no gpt1 command, and the command's model line names the device the run is on
    (r"GPU available but not used", UserWarning),
]
"""(message regex, category) of the warnings that say nothing to a user."""


class _DropMessages(logging.Filter):
    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.match(record.getMessage())


def quiet_library_noise() -> None:
    """Silence the library output that says nothing to a user (``_NOISE_MESSAGES``, ``_NOISE_WARNINGS``), and only
    that: every other message and warning still shows. Idempotent."""
    for name, pattern in _NOISE_MESSAGES.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropMessages) for f in logger.filters):
            logger.addFilter(_DropMessages(pattern))
    for message, category in _NOISE_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)


def device_words(trainer: L.Trainer) -> str:
    """Where the run computes, for the command's model line: "on cpu", "on 8 cuda devices" (over every node)."""
    kind = type(trainer.accelerator).__name__.removesuffix("Accelerator").lower()  # cpu, cuda, mps, xla
    count = trainer.num_devices * trainer.num_nodes
    return f"on {kind}" if count == 1 else f"on {count} {kind} devices"


def say(trainer: L.Trainer, message: str) -> None:
    """One line on stderr, from rank 0 only."""
    if trainer.is_global_zero:
        print(message, file=sys.stderr, flush=True)


def print_above_bar(trainer: L.Trainer, text: str) -> None:
    """Print a line above the progress bar, or plainly when there is none."""
    bar = trainer.progress_bar_callback
    if bar is not None:
        bar.print(text)
    else:
        print(text, flush=True)
