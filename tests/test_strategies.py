"""A training strategy is one module of gpt1/training/strategies/ and one YAML of conf/trainer/: a strategy added as
those two files (here in tmp_path) trains, the Trainer, the module and the callbacks asking it; the registry's
names and each strategy's rules as the run reaches them (DeepSpeed's shards, which resume asks about, without
DeepSpeed)."""

import sys

import pytest
import torch
from lightning.pytorch.strategies import DDPStrategy

import gpt1.training.strategies as package
from gpt1.commands.pretrain import train
from gpt1.core.errors import CheckpointError, ConfigError
from gpt1.training.resume import training_state
from gpt1.training.strategies.base import TrainingStrategy
from gpt1.training.strategies.deepspeed import shards_of
from gpt1.training.strategies.registry import strategies, strategy_for
from tests.helpers import FEW

RECORDED = '''"""trainer=recorded: one CPU process, as trainer=cpu, on a Lightning strategy of its own; it records what
the run asks of it."""

from lightning.pytorch.strategies import SingleDeviceStrategy

from gpt1.training.strategies.base import TrainingStrategy


class RecordedDevice(SingleDeviceStrategy):
    pass


class Recorded(TrainingStrategy):
    names = ("recorded",)

    def __init__(self):
        self.asked = []

    def check(self, cfg):
        self.asked.append("check")
        super().check(cfg)

    def build(self, name, options):
        self.asked.append("build")
        return RecordedDevice(device="cpu", **options)

    def configure_model(self, module):
        self.asked.append(f"configure_model under {type(module.trainer.strategy).__name__}")

    def clip_gradients(self, module, optimizer, value, algorithm):
        self.asked.append("clip_gradients")
        super().clip_gradients(module, optimizer, value, algorithm)

    def full_model(self, model):
        self.asked.append("full_model")
        return super().full_model(model)


STRATEGY = Recorded()
'''
"""A strategy's module, as it would be written in gpt1/training/strategies/recorded.py."""
YAML = "# One CPU process, its strategy recorded\naccelerator: cpu\ndevices: 1\nstrategy: recorded\nprecision: 32-true"
"""Its YAML, as it would be written in conf/trainer/recorded.yaml."""


@pytest.fixture
def added(tmp_path, monkeypatch):
    """A module written into a folder of the strategies package (its __path__ extended to tmp_path, as a file put into
    gpt1/training/strategies/ would be) and its YAML into a config folder on Hydra's search path, which it gives."""
    folder = tmp_path / "strategies"
    folder.mkdir()
    (folder / "recorded.py").write_text(RECORDED)
    conf = tmp_path / "conf"
    (conf / "trainer").mkdir(parents=True)
    (conf / "trainer" / "recorded.yaml").write_text(YAML)
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    yield conf
    sys.modules.pop(f"{package.__name__}.recorded", None)
    vars(package).pop("recorded", None)


def test_a_strategy_added_as_a_module_and_a_yaml_trains_and_is_asked(added, make_cfg):
    overrides = [*FEW, "callbacks.samples.every_n_steps=2", "trainer.gradient_clip_val=0.5"]
    metrics = train(make_cfg("pretrain", [f"hydra.searchpath=[file://{added}]", "trainer=recorded", *overrides]))
    assert metrics["steps"] == 4 and metrics["sample"]
    asked = strategy_for("recorded").asked
    assert asked[:2] == ["check", "build"]  # check_accelerator, then build_trainer
    assert "configure_model under RecordedDevice" in asked  # the module asks it, on the Lightning strategy it built
    assert asked.count("clip_gradients") == 4  # once an update
    assert asked.count("full_model") == 2  # the samples at steps 2 and 4
    with pytest.raises(ConfigError, match=r"xla_debug, fsdp2, recorded \(or"):  # the names it lists
        strategy_for("recorded2")


def test_a_name_two_modules_claim_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "strategies"
    folder.mkdir()
    (folder / "twice.py").write_text(
        "from gpt1.training.strategies.base import TrainingStrategy\n\n"
        "class Twice(TrainingStrategy):\n    names = ('ddp',)\n\nSTRATEGY = Twice()\n"
    )
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    try:
        with pytest.raises(ValueError, match="trainer.strategy=ddp is claimed by .*DDP.* and .*Twice"):
            strategies()
    finally:
        sys.modules.pop(f"{package.__name__}.twice", None)
        vars(package).pop("twice", None)


def test_every_name_of_the_trainer_groups_and_of_lightning_has_its_strategy():
    found = strategies()
    assert {n: type(found[n]).__name__ for n in ("auto", "ddp", "fsdp2", "fsdp", "deepspeed_stage_2")} == {
        "auto": "SingleDevice",
        "ddp": "DDP",
        "fsdp2": "FSDP2",
        "fsdp": "FSDP1",
        "deepspeed_stage_2": "DeepSpeed",
    }
    assert type(strategy_for("ddp_spawn")).__name__ == "DDP" and type(strategy_for("xla")) is TrainingStrategy
    built = strategy_for("ddp").build("ddp", {"find_unused_parameters": True})  # options: Lightning's class
    assert isinstance(built, DDPStrategy) and built._ddp_kwargs == {"find_unused_parameters": True}


def test_a_deepspeed_checkpoint_resumes_from_the_shards_beside_it(tmp_path):
    """Its file holds no optimizer state (the moments stay in the shards): resume takes it where the shards are."""
    path = tmp_path / "last.ckpt"
    torch.save({"gpt1": {}, "state_dict": {}, "loops": {}}, path)
    with pytest.raises(CheckpointError, match="holds weights but no training state"):
        training_state(path, str(path))
    shards_of(path).mkdir()
    assert training_state(path, str(path))["loops"] == {}
