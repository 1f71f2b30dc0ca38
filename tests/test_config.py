"""Hydra configuration: every command and experiment composes into its typed schema; mistakes fail at start-up."""

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError, ValidationError

from gpt1.app.config import CheckpointModelConfig, EvaluateConfig, FinetuneConfig, PretrainConfig
from gpt1.app.config_checks import check_config
from gpt1.app.model_group import model_config, model_options
from gpt1.commands.pretrain import main as pretrain_main
from gpt1.commands.pretrain import train
from gpt1.core.errors import ConfigError
from gpt1.model.decoder import GPTConfig
from gpt1.model.lstm import LSTMConfig
from gpt1.tasks.spec import TaskConfig
from gpt1.training.schema import Schedule
from tests.test_experiments import EXPERIMENTS as EXPERIMENTS_BY_COMMAND

CONF = Path(__file__).resolve().parents[1] / "conf"
EXPERIMENTS = EXPERIMENTS_BY_COMMAND["pretrain"]
"""Pre-training experiments (tests/test_experiments.py covers the others)."""
DEBUGS = sorted(p.stem for p in (CONF / "debug").glob("*.yaml"))


def test_default_pretrain_is_the_quickstart(make_cfg, sample_data):
    cfg = make_cfg("pretrain")
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, PretrainConfig) and isinstance(obj.model, GPTConfig)
    assert cfg.run_name == "quickstart" and obj.model == replace(
        model_config("small"), n_layer=2, init_std=0.05, embd_pdrop=0.0, attn_pdrop=0.0, resid_pdrop=0.0
    )
    assert obj.trainer.accelerator == "cpu"
    assert Path(obj.data.train_files[0]).parent == sample_data / "books" / "train"


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes_into_the_schema(make_cfg, experiment):
    cfg = make_cfg("pretrain", [f"experiment={experiment}"])
    check_config(cfg)  # every value within its field's bounds
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, PretrainConfig) and obj.run_name == experiment


@pytest.mark.parametrize("debug", DEBUGS)
def test_every_debug_config_composes(make_cfg, debug):
    cfg = make_cfg("pretrain", [f"debug={debug}"])
    check_config(cfg)
    assert isinstance(OmegaConf.to_object(cfg), PretrainConfig)
    cfg = make_cfg("finetune", ["task=sentiment", "init_from=x.ckpt", f"debug={debug}"])
    check_config(cfg)
    assert isinstance(OmegaConf.to_object(cfg), FinetuneConfig)


def test_paper_experiment_holds_the_papers_recipe(make_cfg):
    obj = OmegaConf.to_object(make_cfg("pretrain", ["experiment=paper"]))
    # the paper's model; its embedding padded for GPU matmuls (padded rows are never scored)
    assert obj.model == replace(model_config("gpt1"), pad_vocab_to_multiple=64)
    assert (obj.data.batch_size, obj.tokenizer.vocab_size, obj.trainer.max_epochs) == (64, 40478, 100)
    assert (obj.optim.lr, obj.optim.warmup_steps, obj.optim.weight_decay) == (2.5e-4, 2000, 0.01)
    assert obj.optim.schedule is Schedule.cosine and obj.model.n_ctx == 512


@pytest.mark.parametrize(
    "config_name, overrides",
    [
        ("evaluate", ["ckpt=x.ckpt"]),
        ("generate", ["ckpt=x.ckpt"]),
        ("convert", []),
        ("finetune", ["task=sentiment", "init_from=x.ckpt"]),
    ],
)
def test_every_command_config_composes(make_cfg, config_name, overrides):
    cfg = make_cfg(config_name, overrides)
    check_config(cfg)
    assert cfg.run_name.startswith(config_name)  # finetune/<task> in a run
    if config_name == "evaluate":
        assert isinstance(OmegaConf.to_object(cfg), EvaluateConfig)


@pytest.mark.parametrize(
    "override, error, names",
    [
        ("model.n_layr=3", ConfigCompositionException, "n_layr"),  # misspelt key
        ("model.n_layer=twelve", ConfigCompositionException, "n_layer"),  # wrong type
        ("optim.schedule=cosin", ConfigCompositionException, "schedule"),  # not one of the enum's values
        ("model=huge", ConfigCompositionException, "huge"),  # unknown preset
    ],
)
def test_mistakes_fail_at_composition_naming_the_key(make_cfg, override, error, names):
    with pytest.raises(error) as info:
        make_cfg("pretrain", [override])
    assert names in str(info.value) + str(info.value.__cause__)


def test_missing_required_value_is_named(make_cfg):
    cfg = make_cfg("evaluate")
    with pytest.raises(Exception, match="ckpt"):
        OmegaConf.to_object(cfg)


def test_the_config_tree_is_typed_against_assignment_too(make_cfg):
    cfg = make_cfg("pretrain")
    with pytest.raises(ValidationError):
        cfg.model.n_embd = "wide"
    with pytest.raises(ConfigAttributeError, match="train_filez"):
        cfg.data.train_filez = []


GROUPS = {g.name: sorted(p.stem for p in g.glob("*.yaml")) for g in CONF.iterdir() if g.is_dir()}
GROUPS["model"] = model_options("gpt")  # (a pre-training model: lstm and checkpoint are fine-tuning's)
TASKS = GROUPS.pop("task")  # fine-tuning's


@pytest.mark.parametrize(
    "group, option",
    [
        (g, o)
        for g, options in GROUPS.items()
        if g not in ("experiment", "debug", "hydra", "hparams_search")
        for o in options
    ],  # (hparams_search: tests/test_objective.py, tests/test_experiments.py)
)
def test_every_group_option_composes(make_cfg, group, option):
    cfg = make_cfg("pretrain", [f"{group}={option}"])
    check_config(cfg)
    assert OmegaConf.is_missing(cfg.tokenizer, "path") or isinstance(OmegaConf.to_object(cfg), PretrainConfig)


def test_a_logger_added_as_a_yaml_is_the_loggers_a_run_builds(make_cfg, tmp_path):
    """A choice of loggers is a YAML of the logger group: here in a config directory on the search path (as
    conf/logger/NAME.yaml would be), chosen as logger=NAME."""
    from lightning.pytorch.loggers import TensorBoardLogger

    from gpt1.training.loggers import build_loggers

    (tmp_path / "conf" / "logger").mkdir(parents=True)
    (tmp_path / "conf" / "logger" / "boards.yaml").write_text(
        "# TensorBoard's files only\ncsv: false\ntensorboard: true\n"
    )
    cfg = make_cfg("pretrain", [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "logger=boards"])
    loggers = build_loggers(cfg.logger, tmp_path / "run", "boards")
    assert [type(logger) for logger in loggers] == [TensorBoardLogger]
    assert Path(loggers[0].log_dir) == tmp_path / "run" / "tensorboard"


def test_help_lists_the_model_group(monkeypatch, capsys):
    """``gpt1 pretrain --help`` lists the model group's files (conf/model/), as any group's."""
    monkeypatch.setattr(sys, "argv", ["gpt1 pretrain", "--help"])
    monkeypatch.setenv("GPT1_CPU_MATMUL", "torch")  # (not measured: the command's CPU settings apply first)
    with pytest.raises(SystemExit) as done:
        pretrain_main()
    assert done.value.code == 0 and {"gpt1", "small", "tiny", "lstm", "checkpoint"} <= set(model_options())
    assert f"model: {', '.join(model_options())}\n" in capsys.readouterr().out


def test_a_model_of_the_group_composes_like_any_group_and_reads_the_same_outside_hydra(make_cfg):
    """model=small and an override of its keys; every file of the group as Hydra composes it is what model_config
    reads (gpt1 bench, the library, the tests)."""
    random = ["task=sentiment", "init_from=random", "tokenizer_from=x.ckpt"]
    obj = OmegaConf.to_object(make_cfg("finetune", [*random, "model=small", "model.n_layer=6"]))
    assert obj.model == replace(model_config("small"), n_layer=6) and obj.model.n_embd == 256
    for name in model_options():
        assert OmegaConf.to_object(make_cfg("finetune", [*random, f"model={name}"])).model == model_config(name)
    assert model_options("gpt") == ["gpt1", "small", "tiny"] and model_options("lstm") == ["lstm"]
    with pytest.raises(ConfigError, match="model=huge: no conf/model/huge.yaml"):
        model_config("huge")


def test_pretraining_refuses_the_checkpoints_architecture_before_reading_data(make_cfg, tmp_path):
    with pytest.raises(ConfigError, match=r"model=checkpoint\) is gpt1 finetune's"):
        overrides = ["experiment=paper", "trainer=cpu", "model=checkpoint", f"paths.cache_dir={tmp_path / 'cache'}"]
        train(make_cfg("pretrain", overrides))
    assert {p.name for p in (tmp_path / "cache").glob("*")} <= {"sample_data"}  # no tokenizer trained, no data read


@pytest.mark.parametrize("task", TASKS)
def test_every_task_composes_into_the_finetune_schema(make_cfg, task):
    cfg = make_cfg("finetune", [f"task={task}", "init_from=x.ckpt"])
    check_config(cfg)
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, FinetuneConfig) and isinstance(obj.task, TaskConfig)
    assert isinstance(obj.model, CheckpointModelConfig)  # the checkpoint's architecture


def test_finetune_defaults_to_the_papers_recipe(make_cfg):
    obj = OmegaConf.to_object(make_cfg("finetune", ["task=sentiment", "init_from=x.ckpt"]))
    assert (obj.optim.lr, obj.optim.warmup_fraction, obj.optim.schedule) == (6.25e-5, 0.002, Schedule.warmup_linear)
    assert (obj.batch_size, obj.trainer.max_epochs, obj.trainer.gradient_clip_val) == (32, 3, 1.0)
    assert (obj.aux_lm_weight, obj.head_pdrop, obj.optim.weight_decay, obj.n_transfer) == (0.5, 0.1, 0.01, -1)


def test_finetune_model_options_are_typed(make_cfg):
    lstm = OmegaConf.to_object(make_cfg("finetune", ["task=sentiment", "init_from=x", "model=lstm"])).model
    assert isinstance(lstm, LSTMConfig) and (lstm.n_layer, lstm.hidden_size) == (1, 2048)  # the paper's baseline
    dropout = OmegaConf.to_object(make_cfg("finetune", ["task=sentiment", "init_from=x", "model.resid_pdrop=0.2"]))
    assert dropout.model == CheckpointModelConfig(resid_pdrop=0.2)
    with pytest.raises(ConfigCompositionException, match="n_layer"):
        make_cfg("finetune", ["task=sentiment", "init_from=x", "model.n_layer=3"])  # the checkpoint's architecture
    with pytest.raises(ConfigCompositionException, match="task"):
        make_cfg("finetune", ["init_from=x"])  # a task is required


def test_a_users_task_yaml_is_typed(tmp_path, cache_dir):
    """--config-dir DIR task=NAME: DIR/task/NAME.yaml merges into TaskConfig, so a misspelt key fails naming it."""
    from hydra import compose, initialize_config_module

    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "mine.yaml").write_text("type: classification\ndata_files: {train: t.csv}\ntxt: a\n")
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        with pytest.raises(ConfigCompositionException) as info:
            compose("finetune", [f"hydra.searchpath=[file://{tmp_path}]", "task=mine", "init_from=x"])
    assert "txt" in str(info.value) + str(info.value.__cause__)


@pytest.mark.parametrize(
    "override",
    [
        "trainer.gradient_clip_val=0",
        "trainer.gradient_clip_val=null",
        "trainer.max_steps=-1",
        "trainer.max_epochs=-1",
        "callbacks.checkpoint.keep_last=-1",
        "callbacks.samples.top_k=null",
        "callbacks.samples.temperature=0",
        "optim.warmup_fraction=1",
        "trainer.num_sanity_val_steps=-1",
    ],
)
def test_the_special_values_the_schema_documents_are_in_range(make_cfg, override):
    check_config(make_cfg("pretrain", [override]))


def test_a_python_caller_of_train_gets_the_range_check_too(make_cfg, tmp_path):
    with pytest.raises(ConfigError, match=r"optim\.lr=-1\.0: out of range"):
        train(make_cfg("pretrain", ["optim.lr=-1", f"paths.cache_dir={tmp_path / 'cache'}"]))
    # refused before a tokenizer is trained: the cache holds at most the sample data (a clone unpacks its own there)
    assert {p.name for p in (tmp_path / "cache").glob("*")} <= {"sample_data"}
