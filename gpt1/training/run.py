"""A training command's run in one object: ``TrainingRun`` builds the loggers, the callbacks and the Trainer that the
config asks for, with the data module's global batch split over the Trainer's devices; ``fit`` trains and validates
the weights the run ends with (fine-tuning: the selected ones); ``finish`` writes metrics.json and the W&B summary.
``gpt1 pretrain`` and ``gpt1 finetune`` read top to bottom through it."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig

from gpt1.core.compat import end_of_fit_counters
from gpt1.core.figures import compare
from gpt1.core.provenance import update_attempt
from gpt1.data.base import DataModule
from gpt1.training.callbacks import build_callbacks
from gpt1.training.callbacks.best_weights import BestWeights, select_weights
from gpt1.training.callbacks.safe_stop import SafeStop
from gpt1.training.callbacks.sample_text import SampleText
from gpt1.training.callbacks.trained_metrics import TrainedMetrics
from gpt1.training.inputs import run_inputs
from gpt1.training.kept_results import Kept, checkpoint_step, kept_results
from gpt1.training.loggers import build_loggers, log_config, log_summary, start_wandb
from gpt1.training.module import GPT1Module
from gpt1.training.results import final_validation, val_metric_prefixes, write_metrics
from gpt1.training.resume import check_resume_fits
from gpt1.training.schema import CallbacksConfig, Selection
from gpt1.training.task_module import TaskModule
from gpt1.training.trainer import build_trainer


class TrainingRun:
    """One run of ``module`` on ``data`` as ``cfg`` (a ``PretrainConfig`` or ``FinetuneConfig``) says, in
    ``cfg.paths.output_dir``: its loggers (W&B's run named ``run_name``), the callbacks of ``callbacks`` and, with
    ``selection`` (fine-tuning's model_selection), model selection by the task's main validation metric, and the
    Trainer. The data module splits its global batch over the Trainer's devices (``DataModule.connect``) as the Trainer
    is built, the one place that knows how many there are; its passes per update start from ``accumulate`` (None: the
    trainer config's). The resolved config is logged and the run directory printed. A command uses it in a ``with``
    block: from the start of training to the block's end a signal stops the run (``SafeStop``), and after it the
    signals' handlers are as they were before."""

    def __init__(
        self,
        cfg: DictConfig,
        module: GPT1Module,
        data: DataModule,
        *,
        run_name: str,
        callbacks: CallbacksConfig,
        selection: Optional[Selection] = None,
        accumulate: Optional[int] = None,
    ) -> None:
        self.cfg, self.output_dir = cfg, Path(cfg.paths.output_dir)
        self.module, self.data, self.selection = module, data, selection
        self.prefixes = val_metric_prefixes(module) if isinstance(module, TaskModule) else ["val/"]
        """The keys of the validation metrics: ["val/"], or MNLI's ["val/", "val_mismatched/"]."""
        self.loggers = build_loggers(cfg.logger, self.output_dir, run_name)
        start_wandb(self.loggers)  # a W&B that cannot start is one line, before the trainer is built
        select_by = f"val/{module.task.metrics[0]}" if selection == Selection.best else None
        self.callbacks = build_callbacks(
            callbacks, self.output_dir, bool(self.loggers), select_by=select_by, prefixes=tuple(self.prefixes)
        )
        self.trainer = build_trainer(cfg.trainer, self.output_dir, self.loggers, self.callbacks)
        passes = self.trainer.accumulate_grad_batches if accumulate is None else accumulate
        self.trainer.accumulate_grad_batches = data.connect(self.trainer.world_size, passes)
        self.train_metrics: dict[str, float] = {}
        """The training metrics (train/...) logged last in ``fit``."""
        self.finished: Optional[dict[str, Any]] = None
        """A finished run's metrics.json, when this attempt resumed it at its last step (``fit``)."""
        log_config(self.trainer, cfg)
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
        ckpt_path = check_resume_fits(resume, self.module)
        if self.trainer.is_global_zero:  # what it reads, hashed: provenance.json
            update_attempt(self.output_dir, inputs=run_inputs(self.cfg, self.data, ckpt_path))
        resumed_at = checkpoint_step(Path(ckpt_path)) if ckpt_path is not None else None
        self.trainer.fit(self.module, datamodule=self.data, ckpt_path=ckpt_path, weights_only=True)
        end_of_fit_counters(self.trainer)  # (a fit resumed at its last step: the evaluation's rows labelled as its)
        trained = resumed_at != self.trainer.global_step
        if not trained:  # (global rank 0 decides: a validation is collective)
            self.finished = self._kept()
        if self.finished is not None:  # this run had finished: nothing was trained, nothing is validated again
            self.train_metrics = {k: v for k, v in self.finished.items() if k.startswith("train/")}
            return {k: v for k, v in self.finished.items() if k.startswith(tuple(self.prefixes))}
        logged = self.trainer.callback_metrics.items()  # (before a validation replaces them)
        self.train_metrics = {k: float(v) for k, v in logged if k.startswith("train/")}
        if not trained:  # the last update's training metrics, from its checkpoint, and its sample, drawn again (its
            # own seeded generator: the same text)
            self.train_metrics = next(c.restored for c in self.callbacks if isinstance(c, TrainedMetrics))
            for sampler in (c for c in self.callbacks if isinstance(c, SampleText) and c.cfg.every_n_steps > 0):
                sampler.sample(self.trainer, self.module)
        last = final_validation(self.trainer, self.module, self.data, self.prefixes)
        return last if self.selection is None else select_weights(self.trainer, self.best, last)

    def _kept(self) -> Optional[dict[str, Any]]:
        """The results of the run resumed at its last step, if it had finished (global rank 0's reading, said there
        when its metrics.json had to be rebuilt or its evaluation is done again)."""
        kept = kept_results(self.output_dir, self.trainer.global_step) if self.trainer.is_global_zero else None
        kept = self.trainer.strategy.broadcast(kept, src=0) or Kept(None)
        if self.trainer.is_global_zero:
            if kept.note:
                print(kept.note, file=sys.stderr, flush=True)
            if kept.metrics is not None:
                how = "rebuilt as it was written" if kept.note else "kept as it was"
                print(f"the run had finished at step {self.trainer.global_step}: its metrics.json is {how}")
        return kept.metrics

    def counts(self, start: float) -> dict[str, Any]:
        """What every training run's metrics.json holds: steps, skipped_batches (optim.nonfinite=skip), wall_time_s
        since ``start`` (``time.perf_counter``'s) and last_checkpoint."""
        return {
            "steps": self.trainer.global_step,
            "skipped_batches": self.module.skipped_batches,
            "wall_time_s": round(time.perf_counter() - start, 1),
            "last_checkpoint": str(self.last_checkpoint),
        }

    def finish(self, metrics: dict[str, Any], table: Optional[Callable[[], Any]] = None) -> Optional[Path]:
        """On global rank 0, write ``metrics`` to metrics.json and give them to W&B as its summary, with the table
        ``table()`` makes (``gpt1.training.results.sample_predictions``); metrics.json's path, or None on the other
        ranks. A finished run resumed keeps its metrics.json as it was, and ``metrics`` become its figures. A signal
        that came after the last update stops the run before (``SafeStop.check``); the signals' handlers are given
        back after."""
        self.stop.check(self.trainer)
        self.stop.release()
        if self.finished is not None:  # a finished run resumed: its metrics.json as it was
            metrics.clear()
            metrics.update(self.finished)
        if not self.trainer.is_global_zero:
            return None
        path = self.output_dir / "metrics.json"
        if self.finished is None:
            write_metrics(self.output_dir, metrics)
            update_attempt(self.output_dir, results=metrics)  # the copy a lost or damaged metrics.json is rebuilt from
        log_summary(self.trainer.loggers, metrics, table() if table is not None else None)
        if self.cfg.get("rerun"):  # whether it came out as the run it repeats: said, and recorded
            original = Path(self.cfg.rerun)
            moved = say_rerun(original, self.output_dir)
            update_attempt(self.output_dir, rerun_of=str(original.absolute()), moved=moved)
        return path


def say_rerun(original: Path, rerun: Path) -> list[str]:
    """Say whether the metrics.json of ``rerun``, a rerun of the run in ``original``, came out equal to the
    original's to the last digit, and if not, which figures moved (``gpt1.core.figures``); their keys."""
    before, after = (json.loads((d / "metrics.json").read_text()) for d in (original, rerun))
    found = compare(before, after, _roots(original, before), _roots(rerun, after))
    if not found.moved:
        print(
            f"rerun of {original}: metrics.json came out equal to the last digit ({found.figures} figures; "
            "times and memory apart)"
        )
    else:
        print(f"rerun of {original}: {len(found.moved)} of the {found.figures} figures of metrics.json moved:")
        for key, was, now in found.moved:
            print(f"  {key}: {was!r} -> {now!r}")
    return [key for key, _, _ in found.moved]


def _roots(run_dir: Path, metrics: dict[str, Any]) -> list[str]:
    """The ways a run's metrics.json may spell its run directory: as given, absolute, resolved, and as its last
    checkpoint's path does."""
    roots = {str(run_dir), str(run_dir.absolute()), str(run_dir.resolve())}
    if isinstance(metrics.get("last_checkpoint"), str):
        roots.add(str(Path(metrics["last_checkpoint"]).parent.parent))
    return sorted(roots)
