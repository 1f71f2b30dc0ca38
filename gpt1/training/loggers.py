"""A run's loggers: CSV and TensorBoard files in the run directory, and W&B (one run per job of a sweep, named by
its swept overrides, with the job's final metrics as its summary)."""

from __future__ import annotations

import os
import secrets
import shlex
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode
from lightning.pytorch.loggers import Logger, TensorBoardLogger, WandbLogger
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf

from gpt1.core.compat import without_wandb_anonymous
from gpt1.core.errors import ConfigError, UserError
from gpt1.core.files import atomic_file
from gpt1.training.csv_log import ResumableCSVLogger
from gpt1.training.hydra_job import swept_keys
from gpt1.training.schema import LoggerConfig, WandbConfig, WandbMode


def build_loggers(cfg: LoggerConfig, output_dir: Path, run_name: str) -> list[Logger]:
    """CSV and TensorBoard files under ``output_dir``, and W&B if enabled."""
    loggers: list[Logger] = []
    if cfg.csv:
        loggers.append(ResumableCSVLogger(output_dir, name="csv", version=""))  # continued on resume
    if cfg.tensorboard:
        loggers.append(TensorBoardLogger(output_dir, name="tensorboard", version="", default_hp_metric=False))
    if cfg.wandb.enabled:
        import wandb

        w = cfg.wandb
        group, name = wandb_group_and_name(w, run_name)
        settings = wandb_settings(w, output_dir)
        # W&B's own lines: online, the run's page (quiet: not its advice to type `wandb offline`, which gpt1's
        # explicit mode overrides); offline, none (its `wandb online` would not apply either): start_wandb says where
        # the run is and how to sync it
        quiet = {"quiet": True} if settings["mode"] == "online" else {"silent": True}
        logger = WandbLogger(
            **settings,
            group=group,
            name=name,
            tags=list(w.tags),
            id=wandb_run_id(output_dir),
            resume="allow",
            settings=wandb.Settings(**quiet),
        )
        loggers.append(without_wandb_anonymous(logger))
    return loggers


WANDB_MODES = {"online": "online", "offline": "offline", "disabled": "disabled", "run": "online", "dryrun": "offline"}
"""The values of WANDB_MODE that gpt1 takes (W&B's own, its aliases included) -> ``WandbMode``."""


def wandb_settings(cfg: WandbConfig, output_dir: Path) -> dict[str, Any]:
    """The W&B run's project, entity, mode and directory: each the config's where set, else W&B's own variable, else
    gpt1's default."""
    mode = os.environ.get("WANDB_MODE") if cfg.mode is None else WandbMode(cfg.mode).value
    if mode is not None and mode.lower() not in WANDB_MODES:
        raise ConfigError(f"WANDB_MODE={mode!r} is not a W&B mode: set it to online, offline or disabled")
    return {
        "project": cfg.project or os.environ.get("WANDB_PROJECT") or "gpt1",
        "entity": cfg.entity or os.environ.get("WANDB_ENTITY") or None,
        "mode": WANDB_MODES[(mode or "online").lower()],
        "save_dir": cfg.dir or os.environ.get("WANDB_DIR") or str(output_dir),
    }


def start_wandb(loggers: Sequence[Logger]) -> None:
    """Start the W&B run now (W&B's logger starts it lazily), so that a failure to start, such as no API key or no
    network, ends the command in one line before anything has run; an offline run says how to sync it."""
    for logger in loggers:
        if isinstance(logger, WandbLogger):
            import wandb

            try:
                run = logger.experiment  # (the property starts the run)
            except wandb.errors.Error as e:
                reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise UserError(
                    f"W&B could not start the run ({reason}): log in first (wandb login, or set WANDB_API_KEY), or "
                    "add logger.wandb.mode=offline to the command (no account: the run is kept for wandb sync "
                    "later), or logger=default (local files only)"
                ) from e
            if rank_zero_only.rank == 0 and run.offline:
                where = shlex.quote(run.settings.sync_dir)
                print(f"W&B offline: the run is saved in {where}; to send it to W&B (logged in): wandb sync {where}")


def wandb_run_id(output_dir: Path) -> Optional[str]:
    """The W&B run id of the run directory (``wandb/run-id``), made once so that every resumed attempt continues the
    same W&B run. None on ranks other than 0 (which log nothing)."""
    if rank_zero_only.rank != 0:
        return None
    path = output_dir / "wandb" / "run-id"
    if path.is_file():
        return path.read_text().strip()
    run_id = secrets.token_hex(4)  # (8 characters of [0-9a-f], as W&B's own ids)
    with atomic_file(path, "w") as f:
        f.write(run_id + "\n")
    return run_id


def wandb_group_and_name(cfg: WandbConfig, run_name: str) -> tuple[Optional[str], str]:
    """This job's W&B group and run name: in a multirun the sweep directory and the job's overrides, else no
    group and ``run_name``; ``logger.wandb.group`` and ``logger.wandb.name`` win over both."""
    group, name = None, run_name
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        hydra = HydraConfig.get()
        # The sweep directory from the job's own directory (<sweep dir>/<subdir>), as every launcher made it.
        sweep = Path(hydra.runtime.output_dir).parents[len(Path(hydra.sweep.subdir).parts) - 1]
        group = os.path.relpath(sweep, hydra.runtime.cwd) if sweep.is_relative_to(hydra.runtime.cwd) else str(sweep)
        group = group[-128:]  # W&B's limit on a group's length
        parser = OverridesParser.create()
        swept = swept_keys(hydra, sweep)
        mine = [o.input_line for o in parser.parse_overrides(list(hydra.overrides.task)) if o.key_or_group in swept]
        name = ",".join(mine) or hydra.job.override_dirname or f"job {hydra.job.num}"
    return cfg.group or group, cfg.name or name


@contextmanager
def wandb_job() -> Iterator[None]:
    """Finish the process's W&B run when the job ends, failed (exit code 1) or not: the next job of a multirun,
    in the same process, then starts a run of its own (``WandbLogger`` reuses a run still open)."""
    try:
        yield
    except BaseException as e:
        _finish_wandb(e.code if isinstance(e, SystemExit) and isinstance(e.code, int) else 1)
        raise
    _finish_wandb(0)


def _finish_wandb(exit_code: int) -> None:
    if "wandb" in sys.modules:  # a run without logger=wandb never imports it
        import wandb

        if wandb.run is not None:
            wandb.finish(exit_code=exit_code)


def log_summary(
    loggers: Sequence[Logger], metrics: dict[str, Any], table: Optional[tuple[str, list[str], list[list[Any]]]] = None
) -> None:
    """Give the W&B run the job's final metrics as its summary, and a table (key, columns, rows). On rank zero."""
    for logger in loggers:
        if isinstance(logger, WandbLogger):
            if table is not None:
                key, columns, rows = table
                logger.log_table(key, columns=columns, data=rows)
            logger.experiment.summary.update(metrics)


def log_config(loggers: Sequence[Logger], cfg: DictConfig) -> None:
    """Record the whole resolved config with every logger (hparams.yaml, TensorBoard, W&B)."""
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
