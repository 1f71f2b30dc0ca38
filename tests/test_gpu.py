"""On a CUDA GPU: the model's numerics in fp32 and bf16 against the CPU, and every GPU trainer group (one GPU, DDP,
FSDP; compiled, bf16) training, checkpointing and generating. Skipped cleanly without a GPU (conftest)."""

import json

import pytest
import torch

from gpt1.app.model_group import model_config
from gpt1.checkpoints.format import load_checkpoint
from gpt1.commands.finetune import finetune
from gpt1.commands.generate import generate
from gpt1.commands.pretrain import train
from gpt1.cpu.decoding import TokenStep
from gpt1.model.decoder import GPT
from gpt1.tools.bench import main as bench
from tests.helpers import FEW, FEW_FINETUNE

pytestmark = pytest.mark.gpu


def relative_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    return ((x.double().cpu() - ref.double()).norm() / ref.double().norm()).item()


def test_cuda_logits_match_the_cpu_in_fp32_and_bf16():
    torch.manual_seed(0)
    model = GPT(model_config("small")).eval()
    ids = torch.randint(0, model.config.vocab_size, (2, 64))
    with torch.no_grad():
        ref = model.lm_logits(model(ids))  # (2, 64, V) on the CPU, fp32
        gpu, ids = model.cuda(), ids.cuda()
        torch.backends.cuda.matmul.allow_tf32 = False
        fp32 = gpu.lm_logits(gpu(ids))
        with torch.autocast("cuda", dtype=torch.bfloat16):
            bf16 = gpu.lm_logits(gpu(ids))
    assert relative_error(fp32, ref) < 1e-4
    assert bf16.dtype == torch.bfloat16 and 1e-4 < relative_error(bf16, ref) < 2e-2  # bf16 for real, and close


def test_greedy_generation_on_the_gpu_is_the_argmax_of_full_passes():
    """The KV cache on the GPU: each generated token is the argmax of a full forward over the sequence so far."""
    torch.manual_seed(0)
    model = GPT(model_config("tiny")).cuda().eval()
    prompt = torch.randint(0, model.config.vocab_size, (2, 5), device="cuda")
    out = model.generate(prompt, 12, temperature=0)
    with torch.no_grad():
        for t in range(5, out.size(1)):
            assert torch.equal(model.lm_logits(model(out[:, :t]))[:, -1].argmax(-1), out[:, t])


def test_a_token_step_on_the_gpu_gives_the_forwards_hidden_states_to_the_bit():
    """TokenStep on CUDA (generate's step for one fp32 sequence there too) is GPT.forward with a cache, op for op."""
    torch.manual_seed(0)
    model = GPT(model_config("tiny")).cuda().eval()
    ids = torch.randint(0, model.config.vocab_size, (1, 9), device="cuda")
    ours, theirs = model.new_cache(), model.new_cache()
    with torch.no_grad():
        model(ids[:, :4], ours), model(ids[:, :4], theirs)
        step = TokenStep(model)
        assert TokenStep.applies(model, ids)
        for t in range(4, 9):
            assert torch.equal(step(ids[:, t : t + 1], ours), model(ids[:, t : t + 1], theirs))
    for a, b in zip(ours, theirs):
        assert torch.equal(a.k[:, :, :9], b.k[:, :, :9]) and torch.equal(a.v[:, :, :9], b.v[:, :, :9])


@pytest.mark.parametrize(
    "trainer",
    [
        ["trainer=gpu", "compile=true"],  # bf16-mixed, compiled
        ["trainer=ddp", "trainer.devices=1"],
        ["trainer=fsdp", "trainer.devices=1"],
    ],
    ids=["gpu-compiled", "ddp", "fsdp"],
)
def test_pretrain_on_the_gpu_checkpoints_plain_weights_that_generate(make_cfg, tmp_path, trainer):
    metrics = train(make_cfg("pretrain", [*FEW, *trainer]))
    assert metrics["steps"] == 4 and torch.isfinite(torch.tensor(metrics["val/loss"]))
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    keys = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"].keys()
    assert keys and not any("_orig_mod" in k or "_fsdp" in k for k in keys)  # plain names, consolidated
    assert load_checkpoint(ckpt).model.config.n_layer == 2
    text = generate(make_cfg("generate", [f"ckpt={ckpt}", "prompt=she said", "max_new_tokens=4", "device=cuda"]))
    assert text[0].startswith("she said")


@pytest.mark.parametrize(
    "task, options",
    [
        ("sentiment", []),
        ("multiple_choice", ["compile=true"]),  # packed choices (a mask per row) through the compiled model
    ],
)
def test_finetune_on_the_gpu(make_cfg, tmp_path, task, options):
    train(make_cfg("pretrain", [*FEW, "trainer=gpu"]))
    (tmp_path / "run").rename(tmp_path / "pre")  # finetune's run directory is tmp_path / "run" too
    metrics = finetune(
        make_cfg(
            "finetune",
            [
                f"task={task}",
                f"init_from={tmp_path / 'pre' / 'checkpoints' / 'last.ckpt'}",
                "trainer=gpu",
                *options,
                *FEW_FINETUNE,
            ],
        )
    )
    assert metrics["steps"] == 4 and 0 <= metrics["val/accuracy"] <= 1


def test_bench_on_the_gpu_takes_its_peak_from_the_table(tmp_path):
    out = bench(
        [
            "--model",
            "tiny",
            "--batch",
            "4",
            "--seq",
            "32",
            "--new-tokens",
            "4",
            "--gen-batch",
            "2",
            "--warmup",
            "1",
            "--iters",
            "2",
            "--mc-batch",
            "0",
            "--precision",
            "bf16-mixed",
            "--compare",
            "hf",
            "--json",
            str(tmp_path / "b.json"),
        ]
    )
    assert json.loads((tmp_path / "b.json").read_text())["device"] == torch.cuda.get_device_name()
    if any(gpu in out["device"] for gpu in ("A100", "H100", "H200")):
        assert "dense bf16 (data sheet)" in out["peak_source"] and out["peak_flops"] >= 312e12
    assert 0 < out["train"]["mfu"] < 1 and out["train"]["peak_memory_gib"] > 0
    assert out["hf"]["speedup_train"] > 0 and out["generate"]["batch1_ms_per_token"] > 0
