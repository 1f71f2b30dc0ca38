"""A checkpoint is data: every command that reads one (and the Python API) reads it with torch's weights-only
unpickler, so a shared file whose unpickling would run a command is refused in one line and runs nothing; and the
checkpoints gpt1 wrote before still load (tests/fixtures/)."""

import json
import os
from pathlib import Path

import pytest
import torch

from gpt1 import api
from gpt1.checkpoints.format import load_checkpoint
from gpt1.core.errors import CheckpointError
from tests.helpers import FEW, FEW_FINETUNE, REPO
from tests.test_errors import PRETRAIN, gpt1, one_line_error  # noqa: F401 (gpt1: the fixture)

OLD = REPO / "tests" / "fixtures" / "c96c481"
"""Checkpoints written by the landing before this one (tests/fixtures/README.md)."""


class _RunsACommand:
    """Pickled as a call of ``os.system(command)``: what a malicious checkpoint carries."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


@pytest.fixture(scope="module")
def crafted(tmp_path_factory) -> tuple[Path, Path]:
    """A gpt1 checkpoint (an old pre-training one: weights, metadata, training state) with one more entry, whose
    unpickling would create ``marker``; returns (the checkpoint, marker)."""
    d = tmp_path_factory.mktemp("crafted")
    marker = d / "marker"
    raw = torch.load(OLD / "pretrain-last.ckpt", map_location="cpu", weights_only=True)
    raw["callbacks"]["payload"] = _RunsACommand(f"touch {marker}")
    torch.save(raw, d / "shared.ckpt")
    return d / "shared.ckpt", marker


@pytest.mark.parametrize(
    "command, args",
    [
        ("generate", ["ckpt={ckpt}", "prompt=she", "max_new_tokens=2"]),
        ("evaluate", ["ckpt={ckpt}", "trainer.enable_progress_bar=false"]),
        ("finetune", ["task=sentiment", "init_from={ckpt}", *FEW_FINETUNE]),
        ("convert", ["direction=to-hf", "src={ckpt}", "dst={tmp}/hf"]),
        ("pretrain", [*PRETRAIN, "resume={ckpt}"]),
    ],
)
def test_a_checkpoint_that_would_run_code_is_refused_by_every_command(gpt1, tmp_path, crafted, command, args):  # noqa: F811
    ckpt, marker = crafted
    proc = gpt1(command, *(a.format(ckpt=ckpt, tmp=tmp_path) for a in args), cwd=tmp_path / "cwd")
    one_line_error(proc, str(ckpt), "posix.system", "refused, nothing of it was run")
    assert not marker.exists()


def test_the_python_api_refuses_it_too(crafted):
    ckpt, marker = crafted
    with pytest.raises(CheckpointError, match="posix.system object: refused"):
        api.load_checkpoint(ckpt)
    assert not marker.exists()


def test_checkpoints_of_the_last_landing_still_load():
    pretrained = load_checkpoint(OLD / "pretrain-last.ckpt")
    assert pretrained.task is None and pretrained.raw["global_step"] == 2
    finetuned = load_checkpoint(OLD / "finetune-best.ckpt")
    assert finetuned.task["name"] == "sentiment" and finetuned.heads
    assert pretrained.tokenizer.encode("she said") == finetuned.tokenizer.encode("she said")
    ids = torch.tensor([finetuned.tokenizer.encode("she said")])
    assert pretrained.model(ids).shape == (1, ids.size(1), pretrained.model.config.n_embd)


def test_an_old_run_resumes_and_every_load_is_weights_only(make_cfg, tmp_path, monkeypatch):
    """Resuming the last landing's pre-training checkpoint trains on from its step; gpt1's reads and Lightning's own
    all go through the weights-only unpickler."""
    from gpt1.commands.pretrain import train

    loads = []
    real_load = torch.load

    def recording_load(*args, **kwargs):
        loads.append(kwargs.get("weights_only"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", recording_load)
    metrics = train(make_cfg("pretrain", [*FEW, f"resume={OLD / 'pretrain-last.ckpt'}"]))
    assert metrics["steps"] == 4
    assert loads and all(weights_only is True for weights_only in loads), loads


def test_an_hf_directory_is_read_as_data_too(gpt1, tmp_path, crafted):  # noqa: F811
    _, marker = crafted
    hf = tmp_path / "hf"
    hf.mkdir()
    config = {"model_type": "openai-gpt", "vocab_size": 60, "n_positions": 8, "n_embd": 8, "n_layer": 1, "n_head": 2}
    (hf / "config.json").write_text(json.dumps(config))
    torch.save({"transformer.tokens_embed.weight": _RunsACommand(f"touch {marker}")}, hf / "pytorch_model.bin")
    proc = gpt1("convert", "direction=from-hf", f"src={hf}", f"dst={tmp_path}/out.ckpt", cwd=tmp_path / "cwd")
    one_line_error(proc, "pytorch_model.bin", "posix.system", "refused")
    assert not marker.exists()
