"""The value a job gives its sweeper (gpt1/app/objective.py): ``optimized_metric``, every command's key, defaulting to
the command's main validation metric; its value read from the command's result; a key the result lacks fails in one
line naming it and the metrics there are; a search's direction follows the metric; Optuna searches pre-training."""

import json

import pytest
import yaml
from hydra import compose, initialize_config_module
from omegaconf import DictConfig, OmegaConf

from gpt1.app.objective import direction, job_value
from gpt1.core.errors import ConfigError
from tests.helpers import OFFLINE_ENV, TINY_RUN, run_gpt1, sweep_jobs

ENV = {**OFFLINE_ENV, "GPT1_CPU_MATMUL": "torch"}
QUICK_PRETRAIN = [
    *TINY_RUN,
    "trainer.max_steps=2",
    "trainer.val_check_interval=2",
    "trainer.check_val_every_n_epoch=null",
    "trainer.limit_val_batches=1",
    "callbacks.samples.every_n_steps=0",
    "callbacks.checkpoint.every_n_steps=0",
]
"""A pre-training job of a second: 2 updates of the tiny model, validated once on a batch."""


def composed(command: str, *overrides: str) -> DictConfig:
    """The command's config with its hydra node, as a launched job sees it."""
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        return compose(command, ["paths.output_dir=run", *overrides], return_hydra_config=True)


@pytest.mark.parametrize(
    "command, overrides, metric",
    [
        ("pretrain", [], "val/ppl"),
        ("finetune", ["task=sentiment", "init_from=x.ckpt"], "val/accuracy"),
        ("finetune", ["task=mrpc", "init_from=x.ckpt"], "val/f1"),  # the task's first metric
        ("zeroshot", ["task=stsb", "ckpts=[x.ckpt]"], "checkpoints[-1].pearson"),  # the last checkpoint's score
        ("evaluate", ["ckpt=x.ckpt"], None),  # what it scored: metrics.json's main_metric
        ("prepare", [], None),
        ("generate", ["ckpt=x.ckpt"], None),
        ("convert", [], None),
    ],
)
def test_every_command_has_an_optimized_metric_defaulting_to_its_main_validation_metric(command, overrides, metric):
    assert composed(command, *overrides).optimized_metric == metric


def test_the_value_is_read_from_the_result_by_the_key_or_a_path():
    pretrain = {"val/ppl": 212.0, "val/loss": 5.36, "steps": 160, "sample": "she said"}
    assert job_value(OmegaConf.create({"optimized_metric": "val/ppl"}), pretrain) == 212.0
    assert job_value(OmegaConf.create({"optimized_metric": "val/loss"}), pretrain) == 5.36
    zeroshot = {"task": "sst2", "checkpoints": [{"path": "a", "accuracy": 0.6}, {"path": "b", "accuracy": 0.7}]}
    assert job_value(OmegaConf.create({"optimized_metric": "checkpoints[-1].accuracy"}), zeroshot) == 0.7
    assert job_value(OmegaConf.create({"optimized_metric": "checkpoints[0].accuracy"}), zeroshot) == 0.6
    evaluated = {"main_metric": "val/f1", "val/f1": 0.8, "val/accuracy": 0.7}  # gpt1 evaluate's: null, its main
    assert job_value(OmegaConf.create({"optimized_metric": None}), evaluated) == 0.8
    assert job_value(OmegaConf.create({"optimized_metric": None}), ["a text"]) == ["a text"]  # gpt1 generate's


@pytest.mark.parametrize("metric", ["val/acc", "sample", "checkpoints[2].accuracy", "val/ppl.x"])
def test_a_metric_the_result_lacks_is_named_with_the_ones_it_has(metric):
    result = {"val/ppl": 212.0, "sample": "she said", "single": True, "checkpoints": [{"path": "a", "accuracy": 0.5}]}
    with pytest.raises(ConfigError) as error:
        job_value(OmegaConf.create({"optimized_metric": metric}), result)
    assert str(error.value).startswith(f"optimized_metric={metric}: not a metric of this command's result")
    assert "(its metrics: val/ppl, checkpoints[-1].accuracy)" in str(error.value)


def test_a_search_minimises_a_loss_or_a_perplexity_and_maximises_any_other_metric():
    for metric in ("val/ppl", "val/loss", "val_ppl", "train_loss"):
        assert direction(metric) == "minimize", metric
    for metric in ("val/accuracy", "test/mcc", "checkpoints[-1].accuracy", "val_mismatched/f1"):
        assert direction(metric) == "maximize", metric
    with pytest.raises(ConfigError, match="set optimized_metric=KEY"):
        direction(None)


@pytest.mark.parametrize(
    "command, overrides, direction_",
    [
        ("pretrain", [], "minimize"),
        ("finetune", ["task=rte", "init_from=x.ckpt"], "maximize"),
        ("finetune", ["task=rte", "init_from=x.ckpt", "optimized_metric=val/loss"], "minimize"),
        ("finetune", ["task=rte", "init_from=x.ckpt", "hydra.sweeper.direction=minimize"], "minimize"),
    ],
)
def test_hparams_search_takes_its_direction_from_the_optimized_metric(command, overrides, direction_):
    cfg = composed(command, "hparams_search=optuna", *overrides)
    assert cfg.hydra.mode.name == "MULTIRUN" and cfg.hydra.sweeper.direction == direction_


def test_optuna_searches_pretraining_minimising_its_validation_perplexity(tmp_path, cache_dir):
    """``gpt1 pretrain -m hparams_search=optuna``: 2 trials of pre-training's space, each job's value its val/ppl, the
    best the smallest. Resumed with a metric its jobs lack: their values are read from their metrics.json (nothing
    runs), and the first fails in one line naming the key and the metrics there are."""
    search = ["pretrain", "-m", "hparams_search=optuna", "hydra.sweeper.n_trials=2"]
    common = [*QUICK_PRETRAIN, f"paths.cache_dir={cache_dir}"]
    run_gpt1(*search, *common, cwd=tmp_path, env=ENV, timeout=600)
    (sweep,) = (tmp_path / "outputs" / "hparams_search" / "quickstart" / "multirun").iterdir()
    jobs = sweep_jobs(sweep)
    values = [json.loads((job / "metrics.json").read_text())["val/ppl"] for job in jobs]
    results = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert len(jobs) == 2 and results["best_value"] == min(values) and values[0] != values[1]
    assert set(results["best_params"]) == {"optim.lr", "optim.weight_decay"}

    resumed = ["resume=auto", f"hydra.sweep.dir={sweep}", "optimized_metric=val/acc"]
    again = run_gpt1(*search, *common, *resumed, cwd=tmp_path, env=ENV, timeout=600, check=False)
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert again.stdout.count(": finished before: not run again") == 1 and sweep_jobs(sweep) == jobs
    assert one_error_line(again.stderr).startswith("error: optimized_metric=val/acc: not a metric of this command's")


def test_a_wrong_optimized_metric_fails_in_one_line_once_the_run_is_written(tmp_path, cache_dir):
    """gpt1 prepare has no validation metric: its result (metrics.json, written) does not hold val/ppl."""
    args = [*TINY_RUN[:3], f"paths.cache_dir={cache_dir}", "optimized_metric=val/ppl", f"hydra.run.dir={tmp_path}/r"]
    done = run_gpt1("prepare", *args, cwd=tmp_path, env=ENV, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    line = one_error_line(done.stderr)
    assert line.startswith("error: optimized_metric=val/ppl: not a metric of this command's result (its metrics: ")
    assert "train_tokens" in line and json.loads((tmp_path / "r" / "metrics.json").read_text())["train_tokens"] > 0


def one_error_line(stderr: str) -> str:
    (line,) = [line for line in stderr.splitlines() if line.startswith("error: ")]
    return line
