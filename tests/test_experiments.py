"""The experiments (conf/experiment/) and the hyper-parameter search (conf/hparams_search/): each composes for its
command with the paper's values and the sweep it declares, and the sweeps run as one command, one directory per job
(.hydra/overrides.yaml and metrics.json in each, what `gpt1 report` reads)."""

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra import compose, initialize_config_module
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from gpt1.app.config import FinetuneConfig, ZeroshotCommandConfig
from gpt1.app.config_checks import check_config
from gpt1.tasks.heuristics import heuristic_of
from gpt1.training.schema import Schedule
from tests.helpers import OFFLINE_ENV, run_gpt1, sweep_jobs

CONF = Path(__file__).resolve().parents[1] / "conf"
PAPER_TASKS = ["sst2", "cola", "mnli", "snli", "scitail", "qnli", "rte", "stsb", "qqp", "mrpc", "race", "story_cloze"]
SWEEPS = {
    "ablation_aux_lm": ["aux_lm_weight", "seed"],
    "ablation_pretraining": ["init_from", "seed"],
    "ablation_lstm": ["model", "seed"],
    "layers_transferred": ["n_transfer", "seed"],
}
"""The fine-tuning sweeps and the keys each sweeps (the paper's ablated setting, over seeds)."""
EXPERIMENTS = {
    "pretrain": ["paper", "quickstart"],
    "finetune": ["finetune", *SWEEPS, *(f"finetune_{task}" for task in PAPER_TASKS)],
    "zeroshot": ["zero_shot_curve"],
}
"""Every experiment, by the command it configures (test_config.py and test_train.py run the pretrain ones)."""
OPTUNA_SPACE = {
    "optim.lr": "tag(log, interval(1e-5, 3e-4))",
    "aux_lm_weight": "interval(0.0, 1.0)",
    "head_pdrop": "interval(0.0, 0.3)",
    "trainer.max_epochs": "int(interval(2, 4))",
}
TINY_TASK = [
    "task=sentiment",
    "++task.splits.train='train[:64]'",
    "++task.splits.validation='validation[:32]'",
    "++task.splits.test='test[:32]'",
    "batch_size=8",
    "trainer.max_steps=2",
    "logger=csv",
    "trainer.enable_progress_bar=false",
    "trainer.num_sanity_val_steps=0",
]
"""Overrides for fine-tuning jobs of a second: 2 updates of 8 examples, 32 validation and 32 test examples."""
ENV = {**OFFLINE_ENV, "OMP_NUM_THREADS": "1"}
"""The sweeps' environment: a thread each (their jobs are runs of a second)."""


def hydra_cfg(config_name: str, overrides: list[str]) -> DictConfig:
    """The config of a command with its hydra node (sweeper, runtime choices), as a launched job sees it."""
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        return compose(config_name, ["paths.output_dir=run", *overrides], return_hydra_config=True)


def jobs(params: dict[str, str], command_line: list[str]) -> list[list[str]]:
    """The jobs Hydra's basic sweeper makes of a config's sweeper params and the command line's overrides."""
    overrides = OverridesParser.create().parse_overrides([*(f"{k}={v}" for k, v in params.items()), *command_line])
    return BasicSweeper.split_arguments(overrides, max_batch_size=None)[0]


def overrides(job: Path) -> dict[str, Any]:
    """A job's command-line overrides, from its .hydra/overrides.yaml: key -> value, as Hydra parses them."""
    lines = yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text())
    return {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(lines)}


def test_every_experiment_is_listed_under_its_command():
    assert sorted(e for names in EXPERIMENTS.values() for e in names) == sorted(
        p.stem for p in (CONF / "experiment").glob("*.yaml")
    )


@pytest.mark.parametrize("experiment", EXPERIMENTS["finetune"])
def test_every_finetune_experiment_composes_with_the_papers_recipe(make_cfg, experiment):
    args = [f"experiment={experiment}", "init_from=x.ckpt"]
    if not experiment.startswith("finetune_"):  # the task recipes name their task
        args.append("task=sentiment")
    cfg = make_cfg("finetune", args)
    check_config(cfg)  # every value within its field's bounds
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, FinetuneConfig)
    assert (obj.batch_size, obj.aux_lm_weight, obj.head_pdrop, obj.trainer.max_epochs) == (32, 0.5, 0.1, 3)
    assert (obj.optim.lr, obj.optim.warmup_fraction, obj.optim.schedule) == (6.25e-5, 0.002, Schedule.warmup_linear)
    assert obj.model_selection == "best"
    assert (obj.trainer.max_steps, obj.trainer.gradient_clip_val, obj.optim.weight_decay) == (-1, 1.0, 0.01)
    assert obj.callbacks.samples.every_n_steps == 0  # finetune.yaml's, kept under every experiment


@pytest.mark.parametrize("task", PAPER_TASKS)
def test_each_papers_task_recipe_is_the_recipe_on_that_task(task):
    """experiment=finetune_<task> composes exactly what experiment=finetune task=<task> does."""
    recipe = hydra_cfg("finetune", [f"experiment=finetune_{task}", "init_from=x.ckpt"])
    assert recipe.hydra.runtime.choices.task == task and recipe.run_name == f"finetune/{task}"
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        plain = compose("finetune", ["paths.output_dir=run", "experiment=finetune", f"task={task}", "init_from=x.ckpt"])
    recipe = {k: v for k, v in OmegaConf.to_container(recipe).items() if k != "hydra"}  # its choices name it
    assert recipe == OmegaConf.to_container(plain)


@pytest.mark.parametrize("experiment, swept", SWEEPS.items())
def test_every_job_of_each_ablation_is_a_valid_run_of_the_recipe(make_cfg, experiment, swept):
    """The sweep an ablation's YAML declares (hydra.sweeper.params) varies the paper's ablated key over seeds, and every
    job it makes composes into a valid fine-tuning config that differs from the others in the swept keys only."""
    base = [f"experiment={experiment}", "task=sentiment", "init_from=x.ckpt", "tokenizer_from=t.ckpt"]
    cfg = hydra_cfg("finetune", base)
    assert cfg.run_name == experiment  # outputs/<experiment>/multirun/<time>/<job>, whichever the tasks
    assert cfg.hydra.mode.name == "MULTIRUN"  # -m or not
    assert OmegaConf.to_container(cfg.hydra.sweep)["subdir"] == "${gpt1.job_dir:}"  # named by its overrides
    params = OmegaConf.to_container(cfg.hydra.sweeper.params)
    assert set(params) == set(swept)
    configs = []
    for job in jobs(params, []):
        job_cfg = make_cfg("finetune", [*base, *job])
        check_config(job_cfg)
        assert isinstance(OmegaConf.to_object(job_cfg), FinetuneConfig)
        configs.append(OmegaConf.to_container(job_cfg, resolve=True))
    assert len(configs) == len({json.dumps(c, sort_keys=True) for c in configs}) > 1  # every job a run of its own
    varying = {k for k in configs[0] if any(c[k] != configs[0][k] for c in configs)}
    assert varying == {key.split(".")[0] for key in swept} | ({"init_from"} if "init_from" in swept else set())


def test_the_zero_shot_curve_sweeps_the_papers_heuristic_tasks():
    cfg = hydra_cfg("zeroshot", ["experiment=zero_shot_curve", "task=sst2", "ckpts=[a.ckpt]"])
    assert OmegaConf.to_container(cfg.hydra.sweeper.params) == {"task": "sst2,cola,race,winograd"}
    assert cfg.run_name == "zero_shot_curve" and cfg.hydra.mode.name == "MULTIRUN"
    expected = {"sst2": "verbalizer", "cola": "mean_logprob", "race": "multiple_choice", "winograd": "winograd"}
    for task, heuristic in expected.items():
        with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
            cfg = compose(
                "zeroshot", ["paths.output_dir=run", "experiment=zero_shot_curve", f"task={task}", "ckpts=[a.ckpt]"]
            )
        obj = OmegaConf.to_object(cfg)
        assert isinstance(obj, ZeroshotCommandConfig)
        obj.task.name = task
        assert heuristic_of(obj.task) == heuristic


def test_the_optuna_search_maximises_the_returned_metric_around_the_papers_recipe():
    cfg = hydra_cfg("finetune", ["hparams_search=optuna", "task=rte", "init_from=x.ckpt"])
    sweeper = cfg.hydra.sweeper
    assert sweeper._target_ == "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    assert (sweeper.direction, sweeper.n_jobs, sweeper.sampler._target_) == (
        "maximize",
        1,
        "optuna.samplers.TPESampler",
    )
    assert cfg.hydra.mode.name == "MULTIRUN" and cfg.run_name == "hparams_search/rte"
    assert OmegaConf.to_container(sweeper.params) == OPTUNA_SPACE
    parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in OPTUNA_SPACE.items()])
    for override in parsed:  # every searched key exists, and the paper's value lies inside its range
        interval, paper = override.value(), OmegaConf.select(cfg, override.key_or_group)
        assert interval.start <= paper <= interval.end, override.key_or_group


@pytest.mark.slow  # 24 s; a sweep's directories: tests/test_sweeps.py
def test_an_ablation_sweep_runs_one_directory_per_job(tmp_path, tiny_ckpt, cache_dir):
    """The issue's command: gpt1 finetune -m experiment=ablation_aux_lm task=sentiment init_from=CKPT seed=1,2."""
    run_gpt1(
        "finetune",
        "-m",
        "experiment=ablation_aux_lm",
        f"init_from={tiny_ckpt}",
        "seed=1,2",
        *TINY_TASK,
        f"paths.cache_dir={cache_dir}",
        cwd=tmp_path,
        env=ENV,
    )
    (sweep,) = (tmp_path / "outputs" / "ablation_aux_lm" / "multirun").iterdir()
    done = sweep_jobs(sweep)
    assert len(done) == 4 and (sweep / "multirun.yaml").is_file()
    assert sorted(job.name.rpartition("-")[0] for job in done) == [
        f"aux_lm_weight={w},seed={s}" for w in (0, 0.5) for s in (1, 2)
    ]
    points = [overrides(job) for job in done]
    assert [(p["aux_lm_weight"], p["seed"]) for p in points] == [(0, 1), (0, 2), (0.5, 1), (0.5, 2)]
    for job, point in zip(done, points):
        metrics = json.loads((job / "metrics.json").read_text())
        assert metrics["steps"] == 2 and 0 <= metrics["val/accuracy"] <= 1
        assert OmegaConf.load(job / ".hydra" / "config.yaml").aux_lm_weight == point["aux_lm_weight"]


@pytest.mark.slow  # 16 s alone, 26 s beside the suite's other worker
def test_the_pretraining_ablation_takes_the_checkpoint_once(tmp_path, tiny_ckpt, cache_dir):
    """tokenizer_from=CKPT: one job from random weights, one from the checkpoint's (its path one value, commas and
    all); each job's overrides name it."""
    ckpt = tmp_path / "a run, n=2" / "last.ckpt"
    ckpt.parent.mkdir()
    shutil.copy(tiny_ckpt, ckpt)
    run_gpt1(
        "finetune",
        "-m",
        "experiment=ablation_pretraining",
        f"tokenizer_from='{ckpt}'",
        "seed=1",
        *TINY_TASK,
        f"paths.cache_dir={cache_dir}",
        cwd=tmp_path,
        env=ENV,
    )
    (sweep,) = (tmp_path / "outputs" / "ablation_pretraining" / "multirun").iterdir()
    done = sweep_jobs(sweep)
    assert [overrides(job)["init_from"] for job in done] == ["random", str(ckpt)]
    assert [json.loads((job / "metrics.json").read_text())["init_from"] for job in done] == ["random", str(ckpt)]


def test_an_optuna_search_runs_its_trials_and_reports_the_best(tmp_path, tiny_ckpt, cache_dir):
    search = ["hparams_search=optuna", "hydra.sweeper.n_trials=2", f"init_from={tiny_ckpt}", *TINY_TASK]
    run_gpt1("finetune", *search, f"paths.cache_dir={cache_dir}", cwd=tmp_path, env=ENV)
    (sweep,) = (tmp_path / "outputs" / "hparams_search" / "sentiment" / "multirun").iterdir()
    done = sweep_jobs(sweep)
    assert len(done) == 2
    values = [json.loads((job / "metrics.json").read_text())["val/accuracy"] for job in done]
    for job in done:
        trial = overrides(job)
        assert set(OPTUNA_SPACE) <= set(trial)
        assert 1e-5 <= trial["optim.lr"] <= 3e-4 and 0 <= trial["aux_lm_weight"] <= 1
        assert 0 <= trial["head_pdrop"] <= 0.3 and trial["trainer.max_epochs"] in {2, 3, 4}
    results = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert results["best_value"] == max(values) and set(results["best_params"]) == set(OPTUNA_SPACE)

    # resumed (its study in memory): the seeded sampler draws the same trials again, each found finished in its
    # directory and answered from its metrics.json: nothing runs, and the search ends as it did
    kept = {p: p.read_bytes() for job in done for p in job.rglob("*") if p.is_file()}
    again = run_gpt1(
        "finetune",
        *search,
        "resume=auto",
        f"hydra.sweep.dir={sweep}",
        f"paths.cache_dir={cache_dir}",
        cwd=tmp_path,
        env=ENV,
    )
    assert again.stdout.count(": finished before: not run again") == 2 and "started" not in again.stdout
    assert sweep_jobs(sweep) == done and {p: p.read_bytes() for p in kept} == kept
    assert yaml.safe_load((sweep / "optimization_results.yaml").read_text()) == results


def test_an_optuna_search_in_a_storage_continues_its_study(tmp_path, tiny_ckpt, cache_dir):
    """hydra.sweeper.storage: a search of 2 trials stopped after the first, with the second running (asked, never
    told); resume=auto continues the study: the finished trial counts, the stopped one's parameters run again."""
    import optuna
    from optuna.distributions import IntUniformDistribution, LogUniformDistribution, UniformDistribution

    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    search = ["hparams_search=optuna", f"hydra.sweeper.storage={storage}", "hydra.sweeper.study_name=s"]
    args = [
        *search,
        f"init_from={tiny_ckpt}",
        *TINY_TASK,
        f"paths.cache_dir={cache_dir}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ]
    run_gpt1("finetune", "hydra.sweeper.n_trials=1", *args, cwd=tmp_path, env=ENV)
    study = optuna.load_study(study_name="s", storage=storage)
    stopped = study.ask(
        {
            "optim.lr": LogUniformDistribution(1e-5, 3e-4),
            "aux_lm_weight": UniformDistribution(0.0, 1.0),
            "head_pdrop": UniformDistribution(0.0, 0.3),
            "trainer.max_epochs": IntUniformDistribution(2, 4),
        }
    )
    out = run_gpt1("finetune", "hydra.sweeper.n_trials=2", "resume=auto", *args, cwd=tmp_path, env=ENV).stdout
    assert "trial 0 (" in out and "): finished before, value " in out
    params = " ".join(f"{k}={v}" for k, v in sorted(stopped.params.items()))  # (the line sorts them)
    assert f"trial 1 ({params}): did not finish: run again" in out
    states = [t.state.name for t in optuna.load_study(study_name="s", storage=storage).get_trials()]
    assert states == ["COMPLETE", "FAIL", "COMPLETE"]  # the stopped trial, failed, then its parameters again
    jobs = sweep_jobs(tmp_path / "sweep")
    assert len(jobs) == 2 and any({k: overrides(job)[k] for k in stopped.params} == stopped.params for job in jobs)


@pytest.mark.slow
@pytest.mark.parametrize(
    "experiment, args, swept",
    [("ablation_lstm", [], ["checkpoint", "lstm"]), ("layers_transferred", ["n_transfer=range(0,3)"], [0, 1, 2])],
)
def test_the_other_ablations_run(tmp_path, tiny_ckpt, cache_dir, experiment, args, swept):
    run_gpt1(
        "finetune",
        "-m",
        f"experiment={experiment}",
        f"init_from={tiny_ckpt}",
        "seed=1",
        *args,
        *TINY_TASK,
        f"paths.cache_dir={cache_dir}",
        cwd=tmp_path,
        env=ENV,
    )
    (sweep,) = (tmp_path / "outputs" / experiment / "multirun").iterdir()
    done = sweep_jobs(sweep)
    assert [next(iter(overrides(job).values())) for job in done] == swept
    assert all((job / "metrics.json").is_file() for job in done)


@pytest.mark.slow
def test_the_zero_shot_curve_runs_one_job_per_task(tmp_path, tiny_ckpt, cache_dir):
    run_gpt1(
        "zeroshot",
        "-m",
        "experiment=zero_shot_curve",
        f"ckpts=[{tiny_ckpt}]",
        "task=multiple_choice,story",
        f"paths.cache_dir={cache_dir}",
        cwd=tmp_path,
        env=ENV,
    )
    (sweep,) = (tmp_path / "outputs" / "zero_shot_curve" / "multirun").iterdir()
    done = sweep_jobs(sweep)
    assert [overrides(job)["task"] for job in done] == ["multiple_choice", "story"]
    for job in done:
        metrics = json.loads((job / "metrics.json").read_text())
        assert metrics["heuristic"] == "multiple_choice" and len(metrics["checkpoints"]) == 1
