"""Scale: trainer groups (ddp, fsdp, deepspeed), global batch sizes, compile=true, 2-process DDP on CPU from the
command line, and the submitit launchers (a local sweep that runs; a SLURM job whose submission is checked)."""

import importlib.util
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import submitit
import torch
from hydra import compose, initialize_config_module
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate
from lightning.fabric.plugins.environments import SLURMEnvironment
from lightning.pytorch.callbacks import Callback

import gpt1.commands.pretrain
import gpt1.training.run
from gpt1.app.model_group import model_config
from gpt1.app.runner import user_message
from gpt1.checkpoints.format import load_checkpoint, read_checkpoint
from gpt1.commands.evaluate import evaluate
from gpt1.commands.generate import generate
from gpt1.commands.pretrain import train
from gpt1.core.errors import ConfigError
from gpt1.data.base import split_batch
from gpt1.model.decoder import GPT
from gpt1.training.module import GPT1Module
from gpt1.training.schema import OptimConfig
from gpt1.training.strategies.fsdp2 import FSDP2Strategy
from gpt1.training.strategies.registry import strategy_for
from gpt1.training.trainer import build_trainer, check_accelerator, compile_model
from tests.helpers import FEW, FEW_FINETUNE, OFFLINE_ENV, TINY_RUN, run_gpt1, run_python, sweep_jobs

ENV = OFFLINE_ENV
"""tests/test_fsdp.py's environment, by the name it imports: that file is the recipe of experiments/README.md's
fsdp-ddp row, kept as measured until the row is measured again."""
CPU_DDP = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", "trainer.precision=32-true"]
"""The issue's DDP on CPU: 2 processes."""


def composed(config_name: str, overrides: list[str], hydra: bool = False):
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        return compose(config_name=config_name, overrides=overrides, return_hydra_config=hydra)


# -- trainer groups ----------------------------------------------------------------------------------------------


def test_strategies_compose_with_every_command():
    assert composed("finetune", ["task=rte", "trainer=fsdp"]).trainer.strategy == "fsdp2"
    cfg = composed("pretrain", ["experiment=paper", "trainer=ddp", "trainer.num_nodes=4"])
    assert (cfg.trainer.strategy, cfg.trainer.num_nodes, cfg.trainer.devices, cfg.data.batch_size) == ("ddp", 4, -1, 64)
    assert composed("pretrain", ["trainer=deepspeed"]).trainer.strategy == "deepspeed_stage_2"
    cfg = composed("finetune", ["task=sentiment", "trainer=cpu", "compile=true"])
    assert cfg.compile and cfg.trainer.strategy_options == {}


def test_fsdp_is_fsdp2_over_every_process_with_consolidated_checkpoints():
    name = composed("pretrain", ["trainer=fsdp"]).trainer.strategy
    strategy = strategy_for(name).build(name, {})
    assert isinstance(strategy, FSDP2Strategy)  # FSDP2, which runs on CPUs too (tests/test_fsdp.py)
    assert strategy._tensor_parallel_size == 1 and not strategy._save_distributed_checkpoint  # one file
    assert strategy_for("ddp").build("ddp", {}) == "ddp"  # no options: Lightning's name as is
    with pytest.raises(ConfigError, match=r"^trainer.strategy=nonsense: not a strategy .* xla_debug, fsdp2 \(or"):
        strategy_for("nonsense")
    with pytest.raises(ConfigError, match="^trainer.strategy_options needs a strategy name Lightning knows, not"):
        strategy_for("auto").build("auto", {"a": 1})


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is not None, reason="DeepSpeed is installed")
def test_deepspeed_without_deepspeed_is_refused_in_one_line():
    with pytest.raises(ConfigError) as error:
        check_accelerator(composed("pretrain", ["trainer=deepspeed"]).trainer)
    assert user_message(error.value) == (
        "trainer.strategy=deepspeed_stage_2 needs DeepSpeed, which is not installed: pip install 'gpt1[deepspeed]'"
    )


def test_lightnings_fsdp1_on_cpu_is_refused_in_one_line_and_fsdp2_is_not():
    with pytest.raises(ConfigError, match=r"^trainer.strategy=fsdp runs on GPUs only .* use trainer=fsdp \(FSDP2\)"):
        check_accelerator(composed("pretrain", ["trainer.strategy=fsdp", "trainer.accelerator=cpu"]).trainer)
    check_accelerator(composed("pretrain", ["trainer=fsdp", "trainer.accelerator=cpu"]).trainer)
    with pytest.raises(ConfigError, match=r"^trainer=fsdp \(FSDP2\) does not take trainer.precision=16-mixed: use"):
        check_accelerator(
            composed("pretrain", ["trainer=fsdp", "trainer.accelerator=cpu", "trainer.precision=16-mixed"]).trainer
        )


# -- global batch sizes ------------------------------------------------------------------------------------------


def test_the_batch_is_split_over_devices_and_accumulation():
    assert split_batch(64, 1, key="data.batch_size") == (64, 1)
    assert split_batch(64, 8, accumulate=2, key="data.batch_size") == (4, 2)
    with pytest.raises(
        ConfigError,
        match=r"^data.batch_size=64 .* not a multiple of devices x "
        r"trainer.accumulate_grad_batches = 3 x 1",
    ):
        split_batch(64, 3, key="data.batch_size")


class BatchSizes(Callback):
    def __init__(self) -> None:
        self.sizes = set()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.sizes.add(len(batch["input_ids"]))


def test_pretrain_batch_size_is_per_update_and_tokens_seen_count_it(make_cfg, monkeypatch):
    sizes = BatchSizes()
    build = gpt1.training.run.build_callbacks
    monkeypatch.setattr(gpt1.training.run, "build_callbacks", lambda *a, **k: [sizes, *build(*a, **k)])
    metrics = train(make_cfg("pretrain", [*FEW, "trainer.accumulate_grad_batches=2"]))  # data.batch_size=8
    assert sizes.sizes == {4}  # 2 batches of 4 an update
    assert metrics["tokens_seen"] == 4 * 8 * 32  # updates x windows x n_ctx
    with pytest.raises(ConfigError, match="data.batch_size=8"):
        train(make_cfg("pretrain", [*FEW, "trainer.accumulate_grad_batches=3"]))


# -- DDP on CPU, from the command line ---------------------------------------------------------------------------


def clone_beside(directory: Path) -> None:
    """A clone of the repository in ``directory``, a folder named gpt1 without __init__.py, as one works beside it."""
    (directory / "gpt1" / "gpt1").mkdir(parents=True)
    (directory / "gpt1" / "pyproject.toml").write_text('[project]\nname = "gpt1"\n')


def test_ddp_pretrain_on_cpu_writes_one_run_directory(tmp_path, cache_dir, make_cfg):
    """The issue's `gpt1 pretrain experiment=quickstart trainer=ddp ...`: Lightning starts rank 1 again from the
    command line (`python -m gpt1.commands.pretrain`), into rank 0's run directory; started beside a clone of the
    repository (issue 48: `python -m` put the working directory first on rank 1's path, which imported the clone's
    folder as gpt1, and failed)."""
    clone_beside(tmp_path)
    run_gpt1("pretrain", "experiment=quickstart", *CPU_DDP, *FEW, f"paths.cache_dir={cache_dir}", cwd=tmp_path)
    (run,) = (tmp_path / "outputs" / "quickstart").iterdir()
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == 4 and metrics["tokens_seen"] == 4 * 8 * 32  # batches of 8 over both ranks
    ckpt = run / "checkpoints" / "last.ckpt"
    assert load_checkpoint(ckpt).model.config.n_layer == 2
    text = generate(make_cfg("generate", [f"ckpt={ckpt}", "prompt=she said", "max_new_tokens=4", "device=cpu"]))
    assert text[0].startswith("she said")


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory, cache_dir) -> Path:
    run = tmp_path_factory.mktemp("tiny")
    train(
        composed(
            "pretrain",
            [
                f"paths.output_dir={run}",
                f"paths.cache_dir={cache_dir}",
                *TINY_RUN,
                "trainer.max_steps=2",
                "callbacks.samples.every_n_steps=0",
            ],
        )
    )
    return run / "checkpoints" / "last.ckpt"


def test_ddp_finetune_on_cpu_writes_one_run_directory(tmp_path, cache_dir, make_cfg, tiny_checkpoint):
    """Started from a directory with a package named gpt1 in it: rank 1 runs the installed gpt1 all the same. The
    evaluation's shares are uneven, 9 and 8 examples, 2 batches and 1 (the stop on a signal is agreed on only where
    every rank has a batch: a collective at rank 0's second batch waited forever on 4 processes, issue 45)."""
    (tmp_path / "gpt1").mkdir()
    (tmp_path / "gpt1" / "__init__.py").write_text("raise ImportError('the gpt1 of the working directory')\n")
    run_gpt1(
        "finetune",
        "task=sentiment",
        f"init_from={tiny_checkpoint}",
        *CPU_DDP,
        *FEW_FINETUNE,
        "++task.splits.validation='validation[:17]'",
        "++task.splits.test='test[:17]'",
        f"paths.cache_dir={cache_dir}",
        cwd=tmp_path,
    )
    (run,) = (tmp_path / "outputs" / "finetune" / "sentiment").iterdir()
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == 4 and "val/accuracy" in metrics
    ckpt = run / "checkpoints" / "last.ckpt"
    scores = evaluate(make_cfg("evaluate", [f"ckpt={ckpt}", "trainer.enable_progress_bar=false"]))
    assert scores["val/accuracy"] == pytest.approx(metrics["val/accuracy"], abs=1e-6)  # the 17 examples, once each


# -- the same data on any number of processes ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory, cache_dir):
    """runs(N, resumed_from=None) -> the directory of tests/ddp_runs.py's runs on N gloo processes (made once), and its
    stderr: each update's examples, a checkpoint at update 4, and the finished runs (``resumed_from``: a directory of
    such runs, whose update-4 checkpoints they resume)."""
    made: dict = {}

    def runs(n: int, resumed_from: Path | None = None) -> tuple[Path, str]:
        key = (n, resumed_from)
        if key not in made:
            out = tmp_path_factory.mktemp(f"ddp{n}")
            args = [str(n), str(out), str(cache_dir), *([str(resumed_from)] if resumed_from else [])]
            script = Path(__file__).parent / "ddp_runs.py"
            proc = run_python(str(script), *args, cwd=out, timeout=900)
            made[key] = out, proc.stderr
        return made[key]

    return runs


def updates(run: Path, name: str) -> dict[str, list[str]]:
    return json.loads((run / f"{name}.json").read_text())


def test_a_global_batch_holds_the_same_examples_on_1_2_and_4_processes(ddp_runs):
    """Pre-training and fine-tuning under gloo DDP: every update trains on the same examples whatever the number of
    processes and of passes they split it into (8 = 1 x 4 x 2 = 2 x 2 x 2 = 4 x 1 x 2 windows; 1 x 2 x 4 = 2 x 2 x 2 =
    4 x 2 x 1 task examples), across epoch ends whose last batch would be partial (pre-training rounds an epoch up
    to whole batches, fine-tuning drops the rest), and a validation counts each example once (7, over 2 and 4)."""
    one, _ = ddp_runs(1)
    for name, n_updates in (("pretrain", 7), ("finetune", 12)):
        recorded = updates(one, name)
        assert len(recorded["validation"]) == len(set(recorded["validation"])) == 7
        assert sorted(int(k) for k in recorded if k != "validation") == list(range(n_updates))
        assert all(len(examples) == 8 for key, examples in recorded.items() if key != "validation")
        for n in (2, 4):
            assert updates(ddp_runs(n)[0], name) == recorded, f"{name} on {n} processes"


def test_a_run_stopped_on_2_processes_resumes_on_1_and_the_reverse(ddp_runs):
    """Resumed mid-epoch from an update-4 checkpoint of the other number of processes (fine-tuning's passes per update
    change with it: 4 on one process, 2 on two): the same updates, no data-order warning, and the weights of the
    uninterrupted run within fp32 reduction noise."""
    for n, other in ((1, 2), (2, 1)):
        uninterrupted = ddp_runs(other)[0]
        resumed, err = ddp_runs(n, resumed_from=uninterrupted)
        assert "another data order" not in err
        for name in ("pretrain", "finetune"):
            done = updates(resumed, name)
            assert sorted(int(k) for k in done if k != "validation")[0] == 4
            assert all(done[k] == updates(uninterrupted, name)[k] for k in done if k != "validation")
            ours, theirs = (
                read_checkpoint(run / name / "checkpoints" / "last.ckpt") for run in (resumed, uninterrupted)
            )
            for key in (k for k in ours["state_dict"] if k.startswith(("model.", "heads."))):
                torch.testing.assert_close(
                    ours["state_dict"][key], theirs["state_dict"][key], rtol=0, atol=1e-5, msg=f"{name} {key}"
                )


# -- compile=true ------------------------------------------------------------------------------------------------


def test_compile_true_compiles_the_model_head_and_loss_as_one_graph():
    """The loss is compiled with the model (left eager, the head's logits and their cross-entropy took a third of a
    GPU step); tracing only, no compiler: one graph, no breaks, and the state_dict keeps plain names."""
    module = GPT1Module(GPT(model_config("tiny")), SimpleNamespace(vocab_size=512), OptimConfig())
    ids = torch.randint(0, 512, (2, 16))
    explained = torch._dynamo.explain(module.next_token_loss)(ids, ids.roll(-1, 1))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    compile_model(module, True)
    assert module.next_token_loss._torchdynamo_orig_callable.__func__ is GPT1Module.next_token_loss
    assert module.model._compiled_call_impl is not None
    assert not any("_orig_mod" in k for k in module.state_dict())


@pytest.mark.slow  # compiling the forward and backward graphs of train and eval: over a minute on one core
def test_a_compiled_run_saves_plain_parameter_names(tmp_path, cache_dir):
    run = tmp_path / "run"
    run_gpt1(
        "pretrain",
        *FEW,
        "trainer.max_steps=2",
        "data.max_valid_windows=8",
        "compile=true",
        f"hydra.run.dir={run}",
        f"paths.cache_dir={cache_dir}",
        cwd=tmp_path,
        timeout=600,
    )
    ckpt = run / "checkpoints" / "last.ckpt"
    keys = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"].keys()
    assert keys and not any("_orig_mod" in k for k in keys)
    out = run_gpt1(
        "generate",
        f"ckpt={ckpt}",
        "prompt=she said",
        "max_new_tokens=4",
        f"hydra.run.dir={tmp_path / 'g'}",
        cwd=tmp_path,
    ).stdout
    assert "she said" in out


# -- launchers ---------------------------------------------------------------------------------------------------


@pytest.mark.slow  # a process per job: 55 s on 2 cores (the SLURM stage runs submitit's SLURM sweeps)
def test_a_local_submitit_sweep_runs_each_job_in_its_directory_and_resumes(tmp_path, cache_dir):
    """Then the sweep extended by a job, with resume=auto: the two finished jobs are not launched (their directories
    byte-equal), the new one runs in its own."""
    sweep = tmp_path / "sweep"
    args = [*FEW, "trainer.max_steps=2", f"hydra.sweep.dir={sweep}", f"paths.cache_dir={cache_dir}"]
    run_gpt1("pretrain", "-m", "hydra/launcher=submitit_local", "optim.lr=1e-3,3e-3", *args, cwd=tmp_path)
    jobs = sweep_jobs(sweep)
    assert [job.name.rpartition("-")[0] for job in jobs] == ["optim.lr=0.001", "optim.lr=0.003"]
    for job in jobs:
        assert json.loads((job / "metrics.json").read_text())["steps"] == 2
    kept = {job: sorted((p, p.read_bytes()) for p in job.rglob("*") if p.is_file()) for job in jobs}
    out = run_gpt1(
        "pretrain", "-m", "hydra/launcher=submitit_local", "optim.lr=1e-3,3e-3,1e-2", "resume=auto", *args, cwd=tmp_path
    ).stdout
    lines = [line.strip() for line in out.splitlines() if line.startswith("  optim.lr=")]
    assert [line.partition(" (")[0] for line in lines] == [
        "optim.lr=0.001: finished before: not run again, its directory kept as it was",
        "optim.lr=0.003: finished before: not run again, its directory kept as it was",
        "optim.lr=0.01: started",
    ]
    assert {job: sorted((p, p.read_bytes()) for p in job.rglob("*") if p.is_file()) for job in jobs} == kept
    (new,) = set(sweep_jobs(sweep)) - set(jobs)
    assert json.loads((new / "metrics.json").read_text())["steps"] == 2


@pytest.fixture
def slurm_submission(tmp_path, monkeypatch):
    """submission(overrides) -> (the sbatch script the SLURM launcher would submit, its executor): the launcher as
    Hydra instantiates it, stopped at submission (a fake srun makes submitit believe it is on a cluster)."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "srun").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "bin" / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    submitted = []
    monkeypatch.setattr(submitit.AutoExecutor, "map_array", lambda self, fn, *args: submitted.append(self) or [])

    def _submission(overrides: list[str]):
        cfg = composed(
            "pretrain",
            ["hydra/launcher=submitit_slurm", f"hydra.sweep.dir={tmp_path / 'sweep'}", *overrides],
            hydra=True,
        )
        launcher = instantiate(cfg.hydra.launcher)
        launcher.config = cfg
        launcher.launch([["seed=1"]], initial_job_idx=0)
        executor = submitted[-1]._executor
        return executor._make_submission_file_text("COMMAND", "0"), executor

    return _submission


def test_the_slurm_launcher_submits_what_the_yaml_says(slurm_submission):
    sbatch, executor = slurm_submission(["experiment=paper", "trainer=ddp"])
    for line in [
        "--nodes=1",
        "--gpus-per-node=8",
        "--ntasks-per-node=8",
        "--cpus-per-task=8",
        "--time=1440",
        "--signal=USR2@120",
    ]:
        assert f"#SBATCH {line}\n" in sbatch
    assert "--partition" not in sbatch and executor.max_num_timeout == 30  # requeued on timeout
    assert "\nsrun " in sbatch  # every task (rank) started by srun


def test_the_slurm_launcher_takes_its_nodes_from_the_trainer_and_overrides(slurm_submission):
    sbatch, executor = slurm_submission(
        [
            "experiment=paper",
            "trainer=ddp",
            "trainer.num_nodes=4",
            "hydra.launcher.gpus_per_node=4",
            "hydra.launcher.partition=gpu",
            "hydra.launcher.timeout_min=120",
            "hydra.launcher.max_num_timeout=3",
        ]
    )
    for line in ["--nodes=4", "--gpus-per-node=4", "--ntasks-per-node=4", "--partition=gpu", "--time=120"]:
        assert f"#SBATCH {line}\n" in sbatch
    assert executor.max_num_timeout == 3


def test_a_misspelt_slurm_launcher_key_fails_at_start_up():
    with pytest.raises(ConfigCompositionException) as error:  # the launcher's keys are typed by the plugin's schema
        composed("pretrain", ["hydra/launcher=submitit_slurm", "hydra.launcher.gpu_per_node=8"], hydra=True)
    assert "Key 'gpu_per_node' not in 'SlurmQueueConf'" in user_message(error.value)


def test_lightning_takes_the_ranks_of_a_slurm_job(monkeypatch, tmp_path):
    """What srun gives each task of a 2-node x 4-task job: Lightning's SLURM environment, rank 5 of 8, and the
    global batch of 64 becomes 8 windows a device."""
    from lightning_utilities.core.rank_zero import rank_zero_only

    monkeypatch.setattr(rank_zero_only, "rank", rank_zero_only.rank)  # the trainer sets it to 5 for the whole process
    for key, value in {
        "SLURM_NTASKS": "8",
        "SLURM_NTASKS_PER_NODE": "4",
        "SLURM_NNODES": "2",
        "SLURM_PROCID": "5",
        "SLURM_LOCALID": "1",
        "SLURM_NODEID": "1",
        "SLURM_JOB_ID": "1",
        "SLURM_JOB_NAME": "pretrain",
        "SLURM_NODELIST": "node[1-2]",
    }.items():
        monkeypatch.setenv(key, value)
    cfg = composed(
        "pretrain",
        [
            "trainer=ddp",
            "trainer.accelerator=cpu",
            "trainer.devices=4",
            "trainer.num_nodes=2",
            "trainer.precision=32-true",
            "logger=csv",
        ],
    )
    trainer = build_trainer(cfg.trainer, tmp_path)
    assert isinstance(trainer._accelerator_connector.cluster_environment, SLURMEnvironment)
    assert (trainer.world_size, trainer.global_rank, trainer.local_rank, trainer.node_rank) == (8, 5, 1, 1)
    assert split_batch(64, trainer.world_size, accumulate=trainer.accumulate_grad_batches)[0] == 8
