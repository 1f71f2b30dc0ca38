"""What makes a stopped and resumed run the same run: the CPU matmul kernels its weights were made with, fixed at its
start and carried by its checkpoints (``RunKernels``), and a CSV log that continues instead of starting over
(``ResumableCSVLogger``)."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

import lightning as L
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.logger import rank_zero_experiment

from gpt1.core.compat import csv_writer_keeping_its_file, logger_experiment
from gpt1.core.files import atomic_file
from gpt1.cpu import kernels, settings
from gpt1.cpu.layers import on_cpu_layers

RECORD = "cpu-matmuls.json"
"""The run directory's record of its kernels (what its checkpoints carry), for people and tools to read."""


class RunKernels(Callback):
    """Fix the kernel of each kind of CPU product (``gpt1.cpu.kernels.CPU_MATMULS``) for the whole run, since a kernel
    changes the weights' last bits: decided once, when the run starts from step 0, by global rank 0
    (``gpt1.cpu.settings.configure``'s choice in its process: ``GPT1_CPU_MATMUL``, measured or cached) and sent to every
    rank; saved in every checkpoint and in ``<run dir>/cpu-matmuls.json``; and a resumed run (resume=auto or a path, a
    requeued SLURM job) takes its checkpoint's, whatever this process's cache, load, thread count or ``GPT1_CPU_MATMUL``
    say. One line says which were used, where they came from, and whether the model runs on gpt1's CPU layers
    (``gpt1.cpu.layers``), the ones that use them."""

    def __init__(self, output_dir: Path) -> None:
        self.record = Path(output_dir) / RECORD
        self.loaded: Optional[dict[str, str]] = None
        """The kernels of the checkpoint the run resumes from (None: it starts from step 0, or the checkpoint is older
        than this record)."""

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage == "fit":  # rank 0's choice on every rank (a rank measures its own machine, at its own load)
            kernels.set_cpu_matmuls(trainer.strategy.broadcast(dict(kernels.CPU_MATMULS), src=0))

    def state_dict(self) -> dict[str, Any]:
        return {"cpu_matmuls": dict(kernels.CPU_MATMULS)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.loaded = dict(state_dict["cpu_matmuls"])

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        own = dict(kernels.CPU_MATMULS)
        if self.loaded is not None:
            kernels.set_cpu_matmuls(self.loaded)
            source = f"those of {trainer.ckpt_path}, which this run was started with"
        else:
            applied = settings.applied()
            how = applied.source if applied else "torch's, gpt1.cpu.settings.configure not called"
            source = (
                f"chosen at the run's start ({how})"
                if not trainer.global_step
                else f"this process's ({how}): {trainer.ckpt_path} records none (saved by an older gpt1)"
            )
        if not trainer.is_global_zero:
            return
        used = dict(kernels.CPU_MATMULS)
        layers = "gpt1's CPU layers" if on_cpu_layers(pl_module.model) else "torch's own layers (not on the CPU)"
        line = f"CPU matmul kernels: {_kinds(used)}; {source}; the model on {layers}"
        forced = os.environ.get("GPT1_CPU_MATMUL", "auto")
        if self.loaded is not None and forced in settings.FORCED and used != own:
            line += f" (GPT1_CPU_MATMUL={forced} applies to new runs only: a resumed run keeps its kernels)"
        print(line, file=sys.stderr, flush=True)
        with atomic_file(self.record, "w") as f:
            json.dump(used, f, indent=1, sort_keys=True)


def _kinds(matmuls: dict[str, str]) -> str:
    """The kinds grouped by kernel, in one line: "onednn for train.forward, ...; torch for decode, ..."."""
    by_kernel: dict[str, list[str]] = {}
    for kind, kernel in matmuls.items():
        by_kernel.setdefault(kernel, []).append(kind)
    return "; ".join(f"{kernel} for {', '.join(kinds)}" for kernel, kinds in by_kernel.items())


class _ContinuedWriter(csv_writer_keeping_its_file()):
    """Lightning's CSV writer, but a metrics.csv already in the directory is read, not deleted: its rows are kept, a
    new row replaces a kept one of the same step and the same columns (a step redone after the checkpoint the run
    resumed from, a validation run again), and the file is rewritten whole (atomically) at each save."""

    def __init__(self, log_dir: str) -> None:
        self.kept: list[dict[str, str]] = []
        path = Path(log_dir) / self.NAME_METRICS_FILE
        if path.is_file():
            with open(path, newline="") as f:
                self.kept = [{k: v for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]
        super().__init__(log_dir)
        self.rows = list(self.kept)
        self.replaceable = {_identity(row): i for i, row in enumerate(self.rows) if _identity(row)}
        self.logged = {_values(row) for row in self.kept if any(k.startswith("val") for k in row)}
        """The kept validation rows' values: a deterministic validation logged again has the same."""

    def forget_kept(self) -> None:
        """A run that starts from step 0 redoes everything: the kept rows go."""
        kept = {id(row) for row in self.kept}
        self.rows = [row for row in self.rows if id(row) not in kept]
        self.kept, self.replaceable, self.logged = [], {}, set()

    def save(self) -> None:
        for row in self.metrics:
            row = {k: str(v) for k, v in row.items()}
            if _values(row) in self.logged:
                continue  # the same measurement again (a finished run's final validation, at another step count)
            at = self.replaceable.pop(_identity(row), None)
            if at is None:
                self.rows.append(row)
            else:
                self.rows[at] = row
        self.metrics = []
        if not self.rows:
            return
        keys = sorted({k for row in self.rows for k in row})
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=keys)
        writer.writeheader()
        writer.writerows(self.rows)
        with atomic_file(self.metrics_file_path, "w") as f:
            f.write(text.getvalue())
        self.metrics_keys = keys


def _identity(row: dict[str, str]) -> Optional[tuple]:
    """(step, columns) of a row logged at a global step; None for rows whose "step" counts something else (the
    validation's throughput rows, validate/*: batches of one validation)."""
    if "step" not in row or any(k.startswith("validate/") for k in row):
        return None
    return str(int(float(row["step"]))), tuple(sorted(k for k in row if k != "step"))


def _values(row: dict[str, str]) -> tuple:
    return tuple(sorted((k, v) for k, v in row.items() if k not in ("step", "epoch")))


class ResumableCSVLogger(CSVLogger):
    """``<run dir>/csv/metrics.csv`` that a resumed run continues: every step of the run once, in the order logged
    (Lightning's CSVLogger deletes the file it finds)."""

    @property
    @rank_zero_experiment
    def experiment(self) -> _ContinuedWriter:
        def make() -> _ContinuedWriter:
            os.makedirs(self.root_dir, exist_ok=True)
            return _ContinuedWriter(log_dir=self.log_dir)

        return logger_experiment(self, make)


class ForgetLogsOfAFreshStart(Callback):
    """A run that starts from step 0 (no checkpoint to resume from) in a directory with an earlier CSV log starts it
    over, as it starts its weights over."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_step == 0:
            for logger in trainer.loggers:
                if isinstance(logger, ResumableCSVLogger) and trainer.is_global_zero:
                    logger.experiment.forget_kept()
