"""A run directory remembers its command (issue 52, gpt1/app/recorded.py): ``gpt1 <command> resume=auto
hydra.run.dir=DIR`` alone continues the run with its recorded overrides, those given beside it named with what they
change (gpt1/app/effects.py: every key classified); a run of another command, a sweep given as a run and the
reverse are refused in one line; ``rerun=DIR`` makes a finished run again and says whether its metrics.json came out
equal to the last digit. The advice printed after a stop and by the run lock is run as printed, in a fresh shell with
a clean environment, and ends equal to the uninterrupted run."""

import json
import re
import signal
import sys
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

import gpt1.commands.pretrain
from gpt1.app.effects import UNKNOWN, effect
from gpt1.app.recorded import with_record, with_replayed
from gpt1.core.errors import ConfigError
from gpt1.core.figures import say_rerun
from gpt1.core.run_lock import NAME, RunDirectoryInUse, hold, let_go
from gpt1.core.run_record import override, resume_command
from tests.helpers import fresh_shell
from tests.test_stops import EXACT, SignalAt, assert_same_weights, torch_kernels, weights, with_callback

pytestmark = pytest.mark.usefixtures(torch_kernels.__name__)  # (tests/test_stops.py: weights compared bit for bit)

COMMANDS = {
    "pretrain": [],
    "prepare": [],
    "finetune": ["task=sentiment", "init_from=x"],
    "evaluate": ["ckpt=x"],
    "zeroshot": ["task=sentiment", "ckpts=[x]"],
    "generate": ["ckpt=x"],
    "convert": ["direction=from-hf", "src=a", "dst=b"],
}
"""Each command, with what its config needs to compose."""


def leaves(node, prefix: str = "") -> list[str]:
    if not OmegaConf.is_dict(node):
        return [prefix[:-1]]
    return [k for key in node if key != "hydra" for k in leaves(node._get_node(key), f"{prefix}{key}.")]


def test_every_key_and_config_group_of_every_command_is_classified():
    for command, needs in COMMANDS.items():
        with initialize_config_module("gpt1.conf", version_base="1.3"):
            cfg = compose(command, needs, return_hydra_config=True)
        keys = [*leaves(cfg), *cfg.hydra.runtime.choices, "hydra.job.name", "task.splits.train"]
        assert [k for k in keys if effect(k) is UNKNOWN] == [], command
    changes = ["seed", "model", "model.n_layer", "data.batch_size", "data.samples_per_epoch", "task", "optim.lr"]
    changes += ["trainer.max_steps", "trainer.devices", "trainer.precision", "micro_batch_size", "init_from"]
    changes += ["experiment", "tokenizer.vocab_size", "model_selection", "lm_loss", "temperature", "ckpt"]
    leaves_alone = ["logger", "logger.wandb.mode", "paths.cache_dir", "data.num_workers", "num_workers", "resume"]
    leaves_alone += ["trainer.enable_progress_bar", "trainer.log_every_n_steps", "callbacks.checkpoint.keep_last"]
    leaves_alone += ["callbacks.samples.every_n_steps", "hydra/launcher", "hydra.job.name", "predict", "run_name"]
    assert [k for k in changes if not effect(k).numbers] == []
    assert [k for k in leaves_alone if effect(k).numbers] == []
    assert str(effect("logger")) == "it does not change the numbers (logging)"


def recorded(directory: Path, command: str, typed: list[str], **node) -> Path:
    """A run directory with Hydra's record of a job (.hydra/hydra.yaml and overrides.yaml), as Hydra writes it."""
    (directory / ".hydra").mkdir(parents=True)
    hydra = {
        "mode": "RUN",
        "job": {"config_name": command},
        "runtime": {"cwd": str(Path.cwd()), "config_sources": [{"path": "gpt1.conf", "provider": "main"}]},
        "overrides": {"hydra": [f"hydra.run.dir={directory}", "hydra.mode=RUN"], "task": typed},
        **node,
    }
    (directory / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": hydra}))
    (directory / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(typed))
    return directory


def test_resume_auto_and_the_run_directory_alone_replay_its_overrides_those_given_beside_named(tmp_path, capsys):
    run = recorded(tmp_path / "run", "finetune", ["task=sentiment", "init_from=a.ckpt", "logger=csv", "seed=1"])
    given = ["resume=auto", f"hydra.run.dir={run}"]
    assert with_record(given, "finetune") == ["task=sentiment", "init_from=a.ckpt", "logger=csv", "seed=1", *given]
    assert capsys.readouterr().err == ""  # (the same overrides again: nothing to say)

    argv = with_record(["--cfg", "job", *given, "seed=2", "logger=wandb", "optim.lr=1e-3"], "finetune")
    assert argv[:7] == ["--cfg", "job", "task=sentiment", "init_from=a.ckpt", "logger=wandb", "seed=2", "resume=auto"]
    assert argv[7:] == ["optim.lr=1e-3", f"hydra.run.dir={run}"]
    assert capsys.readouterr().err.splitlines() == [
        "note: seed=2 differs from the run's record (seed=1): it changes the numbers (the seed: data order, "
        "dropout's masks, fresh weights)",
        "note: logger=wandb differs from the run's record (logger=csv): it does not change the numbers (logging)",
        "note: optim.lr=1e-3 is not in the run's record (it ran with the default): it changes the numbers (the "
        "optimisation)",
    ]
    fresh = ["resume=auto", f"hydra.run.dir={tmp_path / 'new'}", "task=rte"]  # no record: a first start
    assert with_record(fresh, "finetune") == fresh and with_record(["task=rte"], "finetune") == ["task=rte"]


def test_provenance_json_stands_in_for_a_damaged_hydra_record_with_the_newest_attempt_that_did_not_fail(tmp_path):
    """An empty .hydra/overrides.yaml: the run's provenance.json is replayed, and an error after it names both files.
    Its newest attempt was a resume refused at start (model.activation=zzgb): the record is the attempt before it,
    which made the run, not the command refused."""
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("")
    made, refused = ["model=tiny", "logger=csv"], ["model=tiny", "logger=csv", "resume=auto", "model.activation=zzgb"]
    attempts = [
        {"outcome": "finished", "job": {"command": "pretrain", "overrides": made}},
        {"outcome": "failed", "job": {"command": "pretrain", "overrides": refused}},
    ]
    (run / "provenance.json").write_text(json.dumps({"attempts": attempts}))
    given = ["resume=auto", f"hydra.run.dir={run}"]
    assert with_record(given, "pretrain") == [*made, *given]
    assert with_replayed("error: seed: wrong") == (
        f"error: seed: wrong (the command replayed {run / 'provenance.json'}, as {run / '.hydra' / 'overrides.yaml'} "
        "could not be read: if the record is at fault, restore it or give the command)"
    )


def test_a_record_keeps_its_config_dir_and_says_where_it_ran(tmp_path, monkeypatch, capsys):
    sources = [{"path": "gpt1.conf", "provider": "main"}, {"path": "file://tasks", "provider": "command-line"}]
    recorded(tmp_path / "run", "finetune", ["task=mine"], runtime={"cwd": "/elsewhere", "config_sources": sources})
    monkeypatch.chdir(tmp_path)
    assert with_record(["resume=auto", "hydra.run.dir=run"], "finetune") == [
        "--config-dir=tasks",
        "task=mine",
        "resume=auto",
        "hydra.run.dir=run",
    ]
    assert capsys.readouterr().err == (
        "note: the run was made in /elsewhere; its relative paths (the default cache, outputs/cache, among them) "
        f"are read from this directory, {tmp_path}: cd /elsewhere first to read its own\n"
    )


def test_a_record_of_another_command_or_kind_is_refused_naming_the_command_that_continues_it(tmp_path):
    run = recorded(tmp_path / "run", "pretrain", ["model=tiny"])
    with pytest.raises(ConfigError) as refused:
        with_record(["resume=auto", f"hydra.run.dir={run}"], "finetune")
    assert str(refused.value) == (
        f"hydra.run.dir={run}: {run} holds a run of gpt1 pretrain ({run / '.hydra'}), not of gpt1 finetune: "
        f"continue it with gpt1 pretrain resume=auto hydra.run.dir={run}"
    )
    with pytest.raises(
        ConfigError, match=r"is a run's directory, not a sweep's: continue it with gpt1 pretrain resume"
    ):
        with_record(["-m", "resume=auto", f"hydra.sweep.dir={run}"], "pretrain")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    saved = {"hydra": {"job": {"config_name": "finetune"}, "overrides": {"task": ["seed=1,2"], "hydra": []}}}
    (sweep / "multirun.yaml").write_text(yaml.safe_dump(saved))
    with pytest.raises(
        ConfigError, match=r"a sweep's directory, not a run's: continue it with gpt1 finetune -m resume"
    ):
        with_record(["resume=auto", f"hydra.run.dir={sweep}"], "finetune")
    assert with_record(["-m", "resume=auto", f"hydra.sweep.dir={sweep}", "seed=3"], "finetune") == [
        "-m",
        "seed=3",
        "resume=auto",
        f"hydra.sweep.dir={sweep}",
    ]
    with pytest.raises(ConfigError, match=r"holds no metrics\.json to compare a rerun with .*: finish it, or rebuild"):
        with_record([f"rerun={run}"], "pretrain")
    with pytest.raises(ConfigError, match=r"holds no record of a gpt1 run"):
        with_record([f"rerun={tmp_path}"], "pretrain")


def test_a_rerun_composed_from_python_takes_the_runs_record(tmp_path):
    from gpt1 import api

    task = ["model=tiny", "seed=7", "resume=auto"]
    run = recorded(tmp_path / "run", "pretrain", task, overrides={"hydra": ["hydra.verbose=true"], "task": task})
    (run / "metrics.json").write_text("{}")
    cfg = api.compose("pretrain", [f"rerun={run}", "seed=8"])
    assert (cfg.seed, cfg.model.n_layer, cfg.resume, cfg.rerun) == (8, 2, None, str(run))


def test_an_override_is_quoted_for_hydra_and_the_shell():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for path in ["/runs/plain-1.2_x@y", "/runs/a b", "/runs/a,b=c", "/runs/it's", "/runs/~me"]:
        (word,) = __import__("shlex").split(override("hydra.run.dir", path))
        assert OverridesParser.create().parse_overrides([word])[0].value() == path


# -- whole commands --------------------------------------------------------------------------------------------------


@pytest.fixture
def cli(monkeypatch, tmp_path, cache_dir):
    """cli(*argv): run ``gpt1 pretrain ARGV`` in this process, through its whole Hydra app, from tmp_path, with the
    session's data cache; its exit status."""
    import logging

    monkeypatch.chdir(tmp_path)

    def run(*argv: str) -> int:
        monkeypatch.setattr(sys, "argv", ["gpt1 pretrain", *argv])
        root = logging.getLogger()
        handlers, level = root.handlers[:], root.level
        try:
            gpt1.commands.pretrain.main()
            return 0
        except SystemExit as e:
            return e.code
        finally:
            GlobalHydra.instance().clear()
            for handler in [h for h in root.handlers if h not in handlers]:
                root.removeHandler(handler)
                handler.close()
            root.setLevel(level)

    return run


def test_the_advice_after_a_stop_and_the_run_locks_resume_as_printed_and_end_as_a_run_not_stopped(
    cli, monkeypatch, tmp_path, cache_dir, capsys
):
    """Stopped by SIGTERM, the run says how to continue it; the run lock says the same to a second process; run by a
    fresh bash with a clean environment, that command alone resumes the run to the weights and metrics.json of the
    run made again from its record without a stop (``rerun=DIR``, which says it came out equal to the last digit)."""
    run = tmp_path / "run"
    with_callback(monkeypatch, SignalAt(6, signal.SIGTERM))
    assert (
        cli(*EXACT, "callbacks.samples.every_n_steps=5", f"paths.cache_dir={cache_dir}", f"hydra.run.dir={run}") == 143
    )
    let_go(run)  # (a process's exit releases its directory: this one goes on)
    stop_line = capsys.readouterr().err.strip().splitlines()[-1]
    said = re.fullmatch(r"stopped by SIGTERM at step 7: saved .*; continue with (.*) \(exit status 143\)", stop_line)
    assert said, stop_line
    assert said.group(1) == f"gpt1 pretrain resume=auto hydra.run.dir={run}" == resume_command(run)

    (run / NAME).write_text(json.dumps({"host": "node7", "pid": 4242, "since": "2025-01-01 12:00:00+00:00"}))
    with pytest.raises(RunDirectoryInUse) as in_use:
        hold(run, "gpt1 pretrain")
    locked = re.search(r"and continue with (.*); or give this run a directory of its own", str(in_use.value))
    assert locked.group(1) == said.group(1)
    (run / NAME).unlink()  # (the holder ended)

    done = fresh_shell(said.group(1), tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resumed from" in done.stderr and "note:" not in done.stderr  # nothing given beside, the same directory
    resumed = json.loads((run / "metrics.json").read_text())
    assert resumed["sample"] and None not in resumed.values()

    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    assert cli(f"rerun={run}", f"hydra.run.dir={tmp_path / 'again'}", "trainer.log_every_n_steps=2") == 0
    out, err = capsys.readouterr()
    assert f"rerun of {run}: metrics.json came out equal to the last digit (" in out
    beside = "note: trainer.log_every_n_steps=2 is not in the record of the run it repeats (it ran with the default)"
    assert f"{beside}: it does not change the numbers (logging)" in err
    assert_same_weights(weights(tmp_path / "again"), weights(run))


def test_a_rerun_says_which_figures_moved(tmp_path, capsys):
    for name, loss in (("run", 5.25), ("again", 5.5)):
        (tmp_path / name).mkdir()
        metrics = {"val/loss": loss, "steps": 10, "wall_time_s": loss, "last_checkpoint": str(tmp_path / name / "c")}
        (tmp_path / name / "metrics.json").write_text(json.dumps(metrics))
    assert say_rerun(tmp_path / "run", tmp_path / "again") == ["val/loss"]
    assert capsys.readouterr().out == (
        f"rerun of {tmp_path / 'run'}: 1 of the 3 figures of metrics.json moved:\n  val/loss: 5.25 -> 5.5\n"
    )
