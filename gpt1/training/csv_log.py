"""The run's CSV log (``<run dir>/csv/metrics.csv``), which a resumed run continues instead of starting over
(``ResumableCSVLogger``), and which a run that starts from step 0 starts over (``ForgetLogsOfAFreshStart``)."""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path
from typing import Optional

import lightning as L
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.logger import rank_zero_experiment

from gpt1.core.compat import csv_writer_keeping_its_file, logger_experiment
from gpt1.core.errors import DataError
from gpt1.core.files import atomic_file


class _ContinuedWriter(csv_writer_keeping_its_file()):
    """Lightning's CSV writer, but a metrics.csv already in the directory is read, not deleted: its rows are kept, a
    new row replaces a kept one of the same step and the same columns (a step redone after the checkpoint the run
    resumed from, a validation run again), and the file is rewritten whole (atomically) at each save."""

    def __init__(self, log_dir: str) -> None:
        self.kept: list[dict[str, str]] = []
        path = Path(log_dir) / self.NAME_METRICS_FILE
        if path.is_file():
            try:
                with open(path, newline="") as f:
                    rows = list(csv.DictReader(f))
            except (UnicodeDecodeError, csv.Error) as e:  # damaged: not gpt1's to mend
                rows, damage = [], str(e)
            else:
                damage = "a row with more fields than its header" if any(None in row for row in rows) else ""
            if damage:
                raise DataError(
                    f"{path} cannot be read ({damage}): restore it from a copy, or move it aside (the run then starts "
                    "a new one)"
                )
            self.kept = [{k: v for k, v in row.items() if v not in ("", None)} for row in rows]
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


THROUGHPUT = re.compile(r"train/(time|batches|samples|lengths|flops|device/.*|.*_per_sec)")
"""The columns of the training's throughput rows (Lightning's ThroughputMonitor): which of them a row has depends on
how many updates its attempt had timed (a rate needs a window of them), not on the step."""


def _identity(row: dict[str, str]) -> Optional[tuple]:
    """(step, columns) of a row logged at a global step, (step, "throughput") of a training throughput row (a redone
    update's replaces the first attempt's whatever columns each has); None for rows whose "step" counts something
    else (the validation's throughput rows, validate/*: batches of one validation)."""
    if "step" not in row or any(k.startswith("validate/") for k in row):
        return None
    step = str(int(float(row["step"])))
    columns = [k for k in row if k not in ("step", "epoch")]
    if columns and all(THROUGHPUT.fullmatch(k) for k in columns):
        return step, "throughput"
    return step, tuple(sorted(k for k in row if k != "step"))


def _values(row: dict[str, str]) -> tuple:
    return tuple(sorted((k, v) for k, v in row.items() if k not in ("step", "epoch")))


class ResumableCSVLogger(CSVLogger):
    """A CSV log that a resumed run continues (Lightning's CSVLogger deletes the file it finds)."""

    @property
    @rank_zero_experiment
    def experiment(self) -> _ContinuedWriter:
        def make() -> _ContinuedWriter:
            os.makedirs(self.root_dir, exist_ok=True)
            return _ContinuedWriter(log_dir=self.log_dir)

        return logger_experiment(self, make)


class ForgetLogsOfAFreshStart(Callback):
    """A run that starts from step 0 starts an earlier CSV log over, as it starts its weights over."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_step == 0:
            for logger in trainer.loggers:
                if isinstance(logger, ResumableCSVLogger) and trainer.is_global_zero:
                    logger.experiment.forget_kept()
