"""The model types (gpt1.model.registry): a new one is its module, one entry of MODEL_TYPES and one YAML file of the
model group, and every part of gpt1 takes it from there: the model config group, pre-training, fine-tuning's transfer,
the training stack, gpt1's CPU layers and the checkpoints."""

import math
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf
from torch import nn

from gpt1.app.model_group import model_config
from gpt1.app.registration import register
from gpt1.checkpoints.format import load_checkpoint
from gpt1.commands.finetune import finetune
from gpt1.commands.pretrain import train
from gpt1.cpu.decoding import SteppedGPT
from gpt1.model.decoder import GPT, TiedHead, grown
from gpt1.model.generation import generate
from gpt1.model.registry import MODEL_TYPES, LanguageModel, ModelType, build_model, model_type
from tests.helpers import FEW, FEW_FINETUNE

PRETRAINED = Path(__file__).parent / "fixtures" / "c96c481" / "pretrain-last.ckpt"


@dataclass
class BagConfig:
    vocab_size: int = 100
    n_ctx: int = 512
    n_embd: int = 768
    embd_pdrop: float = 0.1
    init_std: float = 0.02


class Bag(nn.Module):
    """A model type of a test's making: each position's state is a linear map of the mean of the token embeddings so
    far."""

    def __init__(self, config: BagConfig) -> None:
        super().__init__()
        self.config = config
        self.tokens_embed = nn.Embedding(config.vocab_size, config.n_embd)
        self.drop = nn.Dropout(config.embd_pdrop)
        self.proj = nn.Linear(config.n_embd, config.n_embd)
        self.lm_head = TiedHead()

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.tokens_embed(idx)).cumsum(1)  # (B, T, C)
        return self.proj(x / torch.arange(1, idx.size(1) + 1, device=idx.device)[:, None])

    def lm_table(self) -> torch.Tensor:
        return self.tokens_embed.weight

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden, self.lm_table())

    def reader(self, idx: torch.Tensor, use_cache: bool):
        return self

    def generate(self, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0, top_k=None, use_cache=True,
                 generator=None) -> torch.Tensor:  # fmt: skip
        return generate(self, idx, max_new_tokens, temperature, top_k, use_cache, generator)

    def resize_token_embeddings(self, vocab_size: int) -> None:
        old, self.config = self.config.vocab_size, replace(self.config, vocab_size=vocab_size)
        self.tokens_embed = grown(self.tokens_embed, old, vocab_size, self.config.init_std)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self, seq_len: int | None = None) -> int:
        return 6 * self.num_params()


@pytest.fixture
def bag(monkeypatch, tmp_path) -> str:
    """Bag as model type "bag": its registry line, then its YAML file, model/bag.yaml, here in a config directory of
    the test's own (as conf/model/bag.yaml would be); gives the override that adds that directory (model=bag)."""
    monkeypatch.setitem(MODEL_TYPES, "bag", ModelType(Bag, BagConfig))
    register()  # stores its schema, bag_model_schema, which its YAML file names
    conf = tmp_path / "conf"
    (conf / "model").mkdir(parents=True)
    (conf / "model" / "bag.yaml").write_text(
        "defaults:\n  - /bag_model_schema@_here_\n  - _self_\nn_ctx: 32\nn_embd: 48\n"
    )
    yield f"hydra.searchpath=[file://{conf}]"
    ConfigStore.instance().repo.pop("bag_model_schema.yaml")


def test_a_new_model_type_is_one_module_one_registry_entry_and_one_yaml(bag, make_cfg, tmp_path, capsys):
    """Registered, with its YAML: ``gpt1 pretrain model=bag`` trains a Bag of the file's sizes, checkpointed as
    model_type bag; ``gpt1 finetune model=bag`` builds a Bag from the checkpoint's token embeddings and width, trains
    it on gpt1's CPU layers, and checkpoints it as model_type bag, which loads as a Bag."""
    # (the quickstart's experiment sets a GPT's depth and dropouts; FEW says model=tiny)
    cfg = make_cfg("pretrain", [bag, "~experiment", *FEW, "model=bag", f"paths.output_dir={tmp_path / 'pretrain'}"])
    assert isinstance(OmegaConf.to_object(cfg).model, BagConfig)
    metrics = train(cfg)
    assert metrics["steps"] == 4 and math.isfinite(metrics["val/ppl"])
    pretrained = load_checkpoint(metrics["last_checkpoint"]).model
    assert type(pretrained) is Bag and (pretrained.config.n_ctx, pretrained.config.n_embd) == (32, 48)

    cfg = make_cfg("finetune", [bag, "task=sentiment", f"init_from={PRETRAINED}", "model=bag", *FEW_FINETUNE])
    metrics = finetune(cfg)
    assert metrics["model"] == "bag" and metrics["steps"] == 4 and math.isfinite(metrics["val/accuracy"])
    assert "the model on gpt1's CPU layers" in capsys.readouterr().err
    ref = load_checkpoint(PRETRAINED).model
    loaded = load_checkpoint(Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt").model
    assert type(loaded) is Bag and model_type(loaded) == "bag" and loaded.config.n_embd == ref.config.n_embd


@pytest.mark.parametrize("name", ["tiny", "lstm", "bag"])
def test_every_model_type_is_a_language_model(name):
    """The contract (``LanguageModel``): what gpt1 calls on a model; the test's Bag keeps it too."""
    small = {"vocab_size": 100, "n_ctx": 16, "n_embd": 16}
    if name == "lstm":
        small["hidden_size"] = 32
    config = BagConfig(**small) if name == "bag" else replace(model_config(name), **small)
    model = Bag(config) if name == "bag" else build_model(config)
    assert isinstance(model, LanguageModel) and isinstance(model.config.init_std, float)
    hidden = model(torch.randint(0, 100, (2, 5)))
    assert hidden.shape == (2, 5, 16) and model.lm_logits(hidden).shape == (2, 5, 100)
    model.resize_token_embeddings(103)
    assert model.config.vocab_size == 103 and model.tokens_embed.weight.size(0) >= 103


def test_a_model_whose_class_was_swapped_in_place_keeps_its_type():
    """model_type walks the class's bases: gpt1.cpu.decoding's SteppedGPT, fully_shard's FSDP<class>, are a GPT."""
    model = GPT(model_config("tiny"))
    model.__class__ = SteppedGPT
    assert model_type(model) == "gpt"
    model.__class__ = type("FSDPSteppedGPT", (type("FSDPModule", (), {}), SteppedGPT), {})
    assert model_type(model) == "gpt"
    with pytest.raises(ValueError, match="Linear is not a registered model type"):
        model_type(nn.Linear(2, 2))
