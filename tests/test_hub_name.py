"""OpenAI's weights by their hub name: ``gpt1 convert from-hf openai-community/openai-gpt out.ckpt`` reads the local
hub cache when it holds the snapshot (offline here: a cache laid out as huggingface_hub lays it out, built in the
test), and without one ends in one line naming the local-folder form."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from gpt1.checkpoints.format import load_checkpoint, save_checkpoint
from gpt1.checkpoints.hf import export_hf
from gpt1.checkpoints.hub import is_hub_name
from gpt1.model.decoder import GPT, GPTConfig
from gpt1.text.tokenizer import train_bpe
from tests.helpers import OFFLINE_ENV, run_gpt1

NAME = "openai-community/openai-gpt"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def convert(src: str, dst: Path, hub_cache: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**OFFLINE_ENV, "HF_HUB_CACHE": str(hub_cache)}
    return run_gpt1("convert", "from-hf", src, str(dst), cwd=cwd, env=env, timeout=900, check=False)


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> Path:
    """An openai-gpt directory: a tiny GPT and its BPE, as OpenAI's repository holds them (vocab.json + merges.txt)."""
    d = tmp_path_factory.mktemp("model")
    tok = train_bpe(["she said that the weights were on the hub, and they were"] * 8, vocab_size=60)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, n_ctx=16, n_layer=1, n_head=2, n_embd=16, n_inner=64))
    save_checkpoint(d / "gpt1.ckpt", model, tok)
    export_hf(d / "gpt1.ckpt", d / "hf")
    tok.bpe.model.save(str(d / "hf"))  # vocab.json + merges.txt beside tokenizer.json, as on the hub
    return d / "hf"


def test_a_hub_name_is_read_from_the_local_hub_cache(tmp_path, hf_dir):
    repo = tmp_path / "hub" / f"models--{NAME.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    shutil.copytree(hf_dir, repo / "snapshots" / COMMIT)
    done = convert(NAME, tmp_path / "openai-gpt.ckpt", tmp_path / "hub", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == f"wrote {tmp_path / 'openai-gpt.ckpt'}"
    assert "\r" not in done.stderr and "\x1b" not in done.stderr  # no download bars in a log
    got, want = load_checkpoint(tmp_path / "openai-gpt.ckpt"), load_checkpoint(hf_dir.parent / "gpt1.ckpt")
    assert all(torch.equal(v, got.model.state_dict()[k]) for k, v in want.model.state_dict().items())
    assert got.tokenizer.pipeline == "openai"  # OpenAI's files select the original pipeline, as for a local folder


def test_without_network_or_cached_copy_one_line_names_the_local_folder_form(tmp_path):
    done = convert(NAME, tmp_path / "out.ckpt", tmp_path / "empty-hub", tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {NAME} is not a local folder, and the Hugging Face hub gave no copy of it ("), last
    assert last.endswith("or pass a local folder holding config.json, model.safetensors (or pytorch_model.bin), "
                         "vocab.json and merges.txt")  # fmt: skip
    assert "Traceback" not in done.stderr and not (tmp_path / "out.ckpt").exists()


def test_what_reads_as_a_hub_name(tmp_path):
    assert is_hub_name(NAME) and is_hub_name("openai-gpt")
    assert not any(is_hub_name(p) for p in ("./model", "/abs/model", "a/b/c", "~/model", str(tmp_path)))
