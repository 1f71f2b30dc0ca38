"""A training command's run in one object: ``TrainingRun`` builds the loggers, the callbacks and the Trainer that the
config asks for, with the data module's global batch split over the Trainer's devices; ``fit`` trains and validates
the weights the run ends with (fine-tuning: the selected ones); ``finish`` writes metrics.json and the W&B summary.
``gpt1 pretrain`` and ``gpt1 finetune`` read top to bottom through it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig

from gpt1.core.compat import end_of_fit_counters
from gpt1.core.figures import say_rerun, write_metrics
from gpt1.core.provenance import update_attempt
from gpt1.data.base import DataModule
from gpt1.training.callbacks import build_callbacks
from gpt1.training.callbacks.best_weights import BestWeights, select_weights
from gpt1.training.callbacks.safe_stop import SafeStop
from gpt1.training.callbacks.sample_text import SampleText
from gpt1.training.callbacks.trained_metrics import TrainedMetrics
from gpt1.training.inputs import run_inputs
from gpt1.training.kept_results import finished_results
from gpt1.training.loggers import build_loggers, log_config, log_summary, start_wandb
from gpt1.training.module import GPT1Module
from gpt1.training.results import final_validation
from gpt1.training.resume import check_resume_fits
from gpt1.training.schema import CallbacksConfig, Selection
from gpt1.training.trainer import build_trainer, compile_model


class TrainingRun:
    """One run of ``module`` on ``data`` as ``cfg`` (a ``PretrainConfig`` or ``FinetuneConfig``) says, in
    ``cfg.paths.output_dir``: its loggers (W&B's run named ``run_name``), the callbacks of ``callbacks`` and, with
    ``selection`` (fine-tuning's model_selection), model selection by the task's main validation metric, and the
    Trainer (and ``compile=true``'s compiled model). The data module splits its global batch over the Trainer's
    devices (``DataModule.connect``) as the Trainer is built, the one place that knows how many there are; its
    passes per update start from ``accumulate`` (None: the trainer config's). The run directory is printed (the
    resolved config logged by ``fit``, once the checkpoint it resumes is checked); ``start``
    (``time.perf_counter``'s at the command's start) times the run. A command uses it in a ``with`` block: from the
    start of training to the block's end a signal stops the run (``SafeStop``), and after it the signals' handlers
    are as they were before."""

    def __init__(
        self,
        cfg: DictConfig,
        module: GPT1Module,
        data: DataModule,
        *,
        run_name: str,
        callbacks: CallbacksConfig,
        start: float,
        selection: Optional[Selection] = None,
        accumulate: Optional[int] = None,
    ) -> None:
        self.cfg, self.output_dir, self.start = cfg, Path(cfg.paths.output_dir), start
        self.module, self.data, self.selection = module, data, selection
        self.loggers = build_loggers(cfg.logger, self.output_dir, run_name)
        start_wandb(self.loggers)  # a W&B that cannot start is one line, before the trainer is built
        select_by = f"val/{module.task.metrics[0]}" if selection == Selection.best else None
        self.callbacks = build_callbacks(
            callbacks, self.output_dir, bool(self.loggers), select_by=select_by, prefixes=module.val_keys
        )
        self.trainer = build_trainer(cfg.trainer, self.output_dir, self.loggers, self.callbacks)
        compile_model(module, cfg.compile)
        passes = self.trainer.accumulate_grad_batches if accumulate is None else accumulate
        self.trainer.accumulate_grad_batches = data.connect(self.trainer.world_size, passes)
        self.train_metrics: dict[str, float] = {}
        """The training metrics (train/...) logged last in ``fit``."""
        self.finished: Optional[dict[str, Any]] = None
        """A finished run's metrics.json, when this attempt resumed it at its last step (``fit``)."""
        print(f"run directory: {self.output_dir.resolve()}")

    def __enter__(self) -> TrainingRun:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.release()  # whatever ended the run: the signals' handlers as they were before it

    @property
    def best(self) -> Optional[BestWeights]:
        """The callback that keeps the best validation's weights (model_selection=best), else None."""
        return next((c for c in self.callbacks if isinstance(c, BestWeights)), None)

    @property
    def stop(self) -> SafeStop:
        """The callback that stops the run on a signal, after training too, until ``finish`` has written the results."""
        return next(c for c in self.callbacks if isinstance(c, SafeStop))

    @property
    def sample(self) -> Optional[str]:
        """The text sampled last (callbacks.samples), or None."""
        return next((c.last_text for c in self.callbacks if isinstance(c, SampleText)), None)

    @property
    def last_checkpoint(self) -> Path:
        return self.output_dir / "checkpoints" / "last.ckpt"

    @property
    def checkpoint(self) -> Path:
        """The checkpoint of the weights the run ends with: best.ckpt when model selection kept one, else last.ckpt."""
        best = self.best
        return best.path if best is not None and best.step is not None else self.last_checkpoint

    def fit(self, resume: Optional[str]) -> dict[str, Any]:
        """Train, resuming from ``resume`` (``gpt1.training.resume.resolve_resume``'s) once it fits the module, then
        the validation metrics of the weights the run ends with: the last ones (their validation in fit, else a new
        one); with ``selection``, those it selects (loaded into the module), the last ones' as val_last/..., and
        selected_step (``gpt1.training.callbacks.best_weights.select_weights``). A run resumed at the step its
        metrics.json was written at is finished: nothing is trained or evaluated (``gpt1.training.kept_results``)."""
        resumed_at = check_resume_fits(resume, self.module, self.trainer)
        log_config(self.loggers, self.cfg)  # (after the checks: a refused resume writes nothing)
        if self.trainer.is_global_zero:  # what it reads, hashed: provenance.json
            update_attempt(self.output_dir, inputs=run_inputs(self.cfg, self.data, resume))
        self.trainer.fit(self.module, datamodule=self.data, ckpt_path=resume, weights_only=True)
        end_of_fit_counters(self.trainer)  # (a fit resumed at its last step: the evaluation's rows labelled as its)
        trained = resumed_at != self.trainer.global_step
        if not trained:  # (global rank 0 decides: a validation is collective)
            self.finished = finished_results(self.trainer, self.output_dir)
        if self.finished is not None:  # this run had finished: nothing was trained, nothing is validated again
            self.train_metrics = {k: v for k, v in self.finished.items() if k.startswith("train/")}
            return {k: v for k, v in self.finished.items() if k.startswith(self.module.val_keys)}
        logged = self.trainer.callback_metrics.items()  # (before a validation replaces them)
        self.train_metrics = {k: float(v) for k, v in logged if k.startswith("train/")}
        if not trained:  # the last update's training metrics, from its checkpoint, and its sample, drawn again (its
            # own seeded generator: the same text)
            self.train_metrics = next(c.restored for c in self.callbacks if isinstance(c, TrainedMetrics))
            for sampler in (c for c in self.callbacks if isinstance(c, SampleText) and c.cfg.every_n_steps > 0):
                sampler.sample(self.trainer, self.module)
        last = final_validation(self.trainer, self.module, self.data)
        return last if self.selection is None else select_weights(self.trainer, self.best, last)

    def finish(self, metrics: dict[str, Any], table: Optional[Callable[[], Any]] = None) -> Optional[Path]:
        """On global rank 0, write ``metrics`` to metrics.json with what every training run's holds (steps,
        skipped_batches: optim.nonfinite=skip, wall_time_s, last_checkpoint) and give them to W&B as its summary,
        with the table ``table()`` makes (``gpt1.training.results.sample_predictions``); metrics.json's path, or None
        on the other ranks. A finished run resumed keeps its metrics.json as it was, and ``metrics`` become its
        figures. A signal that came after the last update stops the run before (``SafeStop.check``); the signals'
        handlers are given back after."""
        self.stop.check(self.trainer)
        self.stop.release()
        if self.finished is not None:  # a finished run resumed: its metrics.json as it was
            metrics.clear()
            metrics.update(self.finished)
        else:
            metrics["steps"], metrics["skipped_batches"] = self.trainer.global_step, self.module.skipped_batches
            metrics["wall_time_s"] = round(time.perf_counter() - self.start, 1)
            metrics["last_checkpoint"] = str(self.last_checkpoint)
        if not self.trainer.is_global_zero:
            return None
        path = self.output_dir / "metrics.json"
        if self.finished is None:
            write_metrics(self.output_dir, metrics)
            update_attempt(self.output_dir, results=metrics)  # the copy a lost or damaged metrics.json is rebuilt from
        if self.cfg.get("rerun"):  # whether it came out as the run it repeats: said, and recorded
            original = Path(self.cfg.rerun)
            moved = say_rerun(original, self.output_dir)
            update_attempt(self.output_dir, rerun_of=str(original.absolute()), moved=moved)
        log_summary(self.trainer.loggers, metrics, table() if table is not None else None)
        return path
