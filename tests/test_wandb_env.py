"""W&B as its users run it (the real wandb package, offline): its variables (WANDB_MODE, WANDB_PROJECT, WANDB_ENTITY,
WANDB_DIR) count unless the config or the command line sets the value, and a W&B that cannot start (no API key, no
network) ends the command in one ``error:`` line saying what to set, exit status 2, nothing touched."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import wandb
from lightning.pytorch.loggers import WandbLogger

from gpt1.core.errors import ConfigError, UserError
from gpt1.training.loggers import start_wandb, wandb_settings
from gpt1.training.schema import WandbConfig, WandbMode
from tests.helpers import FEW_FINETUNE, OFFLINE_ENV, fresh_shell, run_gpt1
from tests.test_wandb import wandb_records

VARIABLES = ("WANDB_MODE", "WANDB_PROJECT", "WANDB_ENTITY", "WANDB_DIR")


@pytest.fixture
def no_wandb_variables(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_the_config_wins_then_the_variables_then_gpt1s_defaults(tmp_path, monkeypatch, no_wandb_variables):
    run = tmp_path / "run"
    defaults = {"project": "gpt1", "entity": None, "mode": "online", "save_dir": str(run)}
    assert wandb_settings(WandbConfig(), run) == defaults
    for name, value in zip(VARIABLES, ("offline", "theirs", "team", str(tmp_path / "w")), strict=True):
        monkeypatch.setenv(name, value)
    from_env = {"project": "theirs", "entity": "team", "mode": "offline", "save_dir": str(tmp_path / "w")}
    assert wandb_settings(WandbConfig(), run) == from_env
    mine = WandbConfig(project="mine", entity="me", mode=WandbMode.disabled, dir=str(tmp_path / "d"))
    assert wandb_settings(mine, run) == {"project": "mine", "entity": "me", "mode": "disabled", "save_dir": mine.dir}
    monkeypatch.setenv("WANDB_MODE", "dryrun")  # W&B's own alias of offline
    assert wandb_settings(WandbConfig(), run)["mode"] == "offline"
    monkeypatch.setenv("WANDB_MODE", "offlne")
    with pytest.raises(ConfigError, match="WANDB_MODE='offlne' is not a W&B mode: set it to online, offline or"):
        wandb_settings(WandbConfig(), run)
    assert wandb_settings(WandbConfig(mode=WandbMode.offline), run)["mode"] == "offline"  # the config's wins


@pytest.mark.parametrize(
    "error", [wandb.errors.CommError("Timed out while retrying"), wandb.errors.AuthenticationError("bad key")]
)
def test_a_wandb_that_cannot_start_is_one_line_saying_what_to_set(tmp_path, monkeypatch, error):
    def refuse(self):
        raise error

    monkeypatch.setattr(WandbLogger, "experiment", property(refuse))
    with pytest.raises(UserError, match=r"W&B could not start the run \(.+\): log in .*logger.wandb.mode=offline") as e:
        start_wandb([WandbLogger(save_dir=str(tmp_path), mode="online")])
    assert "\n" not in str(e.value) and str(error) in str(e.value)


def finetune_args(tmp_path: Path, tiny_ckpt: Path, cache_dir: Path) -> list[str]:
    """``gpt1 finetune task=sentiment ... logger=wandb`` with no logger.wandb.* set, in tmp_path/run."""
    overrides = [*FEW_FINETUNE, "logger=wandb", f"init_from={tiny_ckpt}", f"paths.cache_dir={cache_dir}"]
    return ["finetune", "task=sentiment", *overrides, f"hydra.run.dir={tmp_path}/run"]


def finetune(tmp_path: Path, env: dict[str, str], tiny_ckpt: Path, cache_dir: Path) -> subprocess.CompletedProcess:
    return run_gpt1(*finetune_args(tmp_path, tiny_ckpt, cache_dir), cwd=tmp_path, env=env, timeout=600, check=False)


def test_wandb_mode_offline_alone_logs_offline_where_wandb_dir_says(tmp_path, tiny_ckpt, cache_dir):
    env = {**OFFLINE_ENV, "WANDB_MODE": "offline", "WANDB_PROJECT": "from-env", "WANDB_DIR": str(tmp_path / "w")}
    env.update(WANDB_SILENT="true", WANDB_DISABLE_GIT="true")
    done = finetune(tmp_path, env, tiny_ckpt, cache_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    (log,) = (tmp_path / "w" / "wandb").glob("offline-run-*/run-*.wandb")  # WANDB_DIR, not the run directory
    (run,) = [r.run for r in wandb_records(log) if r.WhichOneof("record_type") == "run"]
    assert run.project == "from-env" and (tmp_path / "run" / "metrics.json").is_file()


def test_no_api_key_ends_in_one_error_line_and_touches_nothing_and_each_way_it_names_runs(
    tmp_path, tiny_ckpt, cache_dir
):
    """W&B online (the default) with no key: one line naming what to add to the command, exit 2; the run
    directory's files (a checkpoint of an earlier attempt here) are as they were. Each addition it names, added to
    the command as printed in a fresh shell, runs: offline (its W&B run kept, for the wandb sync it prints) and with
    local files only. Logging in (wandb login, WANDB_API_KEY) reaches W&B's servers: not run here, tests never
    reach the network."""
    home = tmp_path / "home"  # no ~/.netrc, no W&B settings
    env = {k: v for k, v in OFFLINE_ENV.items() if k not in ("WANDB_API_KEY", "WANDB_MODE")}
    env.update(HOME=str(home), WANDB_CONFIG_DIR=str(home / ".config/wandb"), WANDB_DISABLE_GIT="true")
    earlier = tmp_path / "run" / "checkpoints" / "last.ckpt"
    earlier.parent.mkdir(parents=True)
    earlier.write_bytes(tiny_ckpt.read_bytes())
    done = finetune(tmp_path, env, tiny_ckpt, cache_dir)
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: W&B could not start the run (No API key configured"), last
    assert "Traceback" not in done.stderr
    assert earlier.read_bytes() == tiny_ckpt.read_bytes() and not (tmp_path / "run" / "metrics.json").exists()

    found = re.search(r"add (\S+) to the command \(.*\), or (\S+) \(local files only\)$", last)
    assert found and found.groups() == ("logger.wandb.mode=offline", "logger=default"), last
    for n, addition in enumerate(found.groups()):
        command = shlex.join(["gpt1", *finetune_args(tmp_path / str(n), tiny_ckpt, cache_dir)]) + f" {addition}"
        added = fresh_shell(command, tmp_path)
        assert added.returncode == 0, added.stderr[-3000:]
        assert (tmp_path / str(n) / "run" / "metrics.json").is_file()
        offline = list((tmp_path / str(n) / "run" / "wandb").glob("offline-run-*/run-*.wandb"))
        assert len(offline) == (addition == "logger.wandb.mode=offline"), addition
