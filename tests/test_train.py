"""Pre-training end to end on the sample books (tiny model, CPU, seconds), and what a run leaves behind."""

import csv
import enum
import json
import math
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import lightning as L
import pytest
import tokenizers
import torch
from torch import nn

import gpt1.commands.evaluate as evaluate_command
import gpt1.commands.generate as generate_command
import gpt1.commands.pretrain as pretrain_command
import gpt1.cpu.kernels
from gpt1.checkpoints.format import load_checkpoint, save_checkpoint
from gpt1.commands.generate import generate
from gpt1.commands.pretrain import train
from gpt1.core.errors import CheckpointError
from gpt1.cpu.decoding import SteppedGPT, decode_in_steps
from gpt1.cpu.layers import on_cpu_layers, use_cpu_layers
from gpt1.model.decoder import GPT, GPTConfig
from gpt1.text.tokenizer import Tokenizer, train_bpe
from gpt1.training.module import lr_factor
from gpt1.training.schema import Schedule
from tests.helpers import TINY_RUN
from tests.test_experiments import EXPERIMENTS


def train_losses(run_dir: Path) -> list[float]:
    with open(run_dir / "csv" / "metrics.csv") as f:
        return [float(row["train/loss"]) for row in csv.DictReader(f) if row.get("train/loss")]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, cache_dir):
    """One tiny pre-training run shared by the tests below: 400 steps on one novel."""
    from hydra import compose, initialize_config_module

    run = tmp_path_factory.mktemp("pretrain")
    overrides = [
        f"paths.output_dir={run}",
        f"paths.cache_dir={cache_dir}",
        *TINY_RUN,
        "trainer.max_steps=400",
        "trainer.log_every_n_steps=1",
        "trainer.val_check_interval=200",
        "data.batch_size=16",
        "optim.lr=3e-3",
        "optim.warmup_steps=20",
        "callbacks.checkpoint.every_n_steps=200",
        "callbacks.samples.every_n_steps=200",
    ]
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        cfg = compose(config_name="pretrain", overrides=overrides)
    return run, pretrain_command.train(cfg)  # what the Hydra task function returns optimized_metric's value of


def test_pretraining_lowers_the_loss_below_the_unigram_baseline(trained):
    run, metrics = trained
    losses = train_losses(run)
    assert len(losses) == 400
    assert sum(losses[-20:]) / 20 < sum(losses[:5]) / 5 - 1.0  # it learns
    assert metrics["val_ppl"] < 0.8 * metrics["val_unigram_ppl"]  # it uses the context: far better than unigram
    assert metrics["val_unigram_ppl"] < 513  # and unigram beats uniform over the vocabulary
    assert math.isclose(metrics["val_ppl"], math.exp(metrics["val_loss"]), rel_tol=1e-5)
    # the keys every command writes, beside those of earlier versions
    assert (metrics["val/ppl"], metrics["val/loss"]) == (metrics["val_ppl"], metrics["val_loss"])
    assert (metrics["train/loss"], metrics["train/ppl"]) == (metrics["train_loss"], metrics["train_ppl"])


def test_the_run_writes_metrics_checkpoints_logs_and_a_sample(trained):
    run, metrics = trained
    on_disk = json.loads((run / "metrics.json").read_text())
    assert on_disk == pytest.approx(metrics)
    assert on_disk["steps"] == 400 and on_disk["tokens_seen"] == 400 * 16 * 32
    assert on_disk["params"] > 0 and on_disk["wall_time_s"] > 0 and on_disk["sample"]
    assert {p.name for p in (run / "checkpoints").glob("*.ckpt")} == {
        "step0000200.ckpt",
        "step0000400.ckpt",
        "last.ckpt",
    }
    assert not list((run / "checkpoints").glob("*.tmp"))  # atomic writes leave no temporary files
    header = (run / "csv" / "metrics.csv").read_text().splitlines()[0]
    for column in ("train/loss", "train/ppl", "val/ppl", "lr-AdamW/pg1", "train/device/items_per_sec"):
        assert column in header


def test_the_checkpoint_carries_its_tokenizer_and_reloads(trained, tmp_path):
    run, _ = trained
    loaded = load_checkpoint(run / "checkpoints" / "last.ckpt")
    assert loaded.tokenizer.vocab_size == loaded.model.config.vocab_size == 512 + 1  # base + eod
    assert loaded.tokenizer.specials == {"eod": 512}  # fine-tuning adds start/delimiter/extract, fresh
    assert loaded.raw["global_step"] == 400
    assert loaded.raw["gpt1"]["format"] == 2 and loaded.raw["gpt1"]["model_type"] == "gpt"
    assert loaded.task is None and loaded.heads == {}
    # save/load round trip of a standalone checkpoint keeps weights, config and tokenizer
    save_checkpoint(tmp_path / "copy.ckpt", loaded.model, loaded.tokenizer)
    again = load_checkpoint(tmp_path / "copy.ckpt")
    assert again.model.config == loaded.model.config
    assert again.tokenizer.to_str() == loaded.tokenizer.to_str()
    for (name, a), (_, b) in zip(loaded.model.state_dict().items(), again.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def tiny_gpt(vocab_size: int) -> GPT:
    return GPT(GPTConfig(vocab_size=vocab_size, n_ctx=8, n_layer=1, n_head=2, n_embd=8, n_inner=16))


@pytest.fixture(scope="module")
def small_tokenizer() -> Tokenizer:
    return train_bpe(["a tiny corpus of words, and of more words"] * 20, vocab_size=60)


class Kind(enum.Enum):
    classification = "classification"


@dataclass
class Spec:
    """Stands in for a TaskConfig: a dataclass with an enum and a list."""

    name: str = "sst2"
    type: Kind = Kind.classification
    label_names: list = field(default_factory=lambda: ["negative", "positive"])


def test_a_fine_tuned_checkpoint_carries_its_heads_task_and_special_tokens(tmp_path, small_tokenizer):
    tok = Tokenizer.from_str(small_tokenizer.to_str())
    tok.add_special_tokens(["start", "delimiter", "extract"])
    heads = nn.ModuleDict({"classification": nn.Linear(8, 2)})
    save_checkpoint(tmp_path / "ft.ckpt", tiny_gpt(tok.vocab_size), tok, heads=heads, task=Spec())
    loaded = load_checkpoint(tmp_path / "ft.ckpt")
    assert loaded.task == {"name": "sst2", "type": "classification", "label_names": ["negative", "positive"]}
    assert loaded.tokenizer.to_str() == tok.to_str() and loaded.tokenizer.specials == tok.specials
    fresh = nn.ModuleDict({"classification": nn.Linear(8, 2)})
    fresh.load_state_dict(loaded.heads)  # keys "<head name>.<parameter>"
    for a, b in zip(fresh.parameters(), heads.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_format_1_checkpoint_loads(tmp_path, small_tokenizer):
    """Format 1: no model_type (a GPT), no task; the tokenizer a plain `tokenizers` JSON with five added tokens,
    `_pad_` among them (no longer a token: its id stays unused)."""
    base = small_tokenizer.base_vocab_size
    old = tokenizers.Tokenizer.from_str(small_tokenizer.bpe.to_str())
    old.add_special_tokens(["_start_", "_delimiter_", "_classify_", "_pad_", "_eod_"])
    model = tiny_gpt(base + 5)
    state = {"model." + k: v for k, v in model.state_dict().items()}
    meta = {"format": 1, "model_config": asdict(model.config), "tokenizer": old.to_str()}
    torch.save({"state_dict": state, "gpt1": meta}, tmp_path / "old.ckpt")
    loaded = load_checkpoint(tmp_path / "old.ckpt")
    assert loaded.tokenizer.specials == {"start": base, "delimiter": base + 1, "extract": base + 2, "eod": base + 4}
    assert loaded.tokenizer.vocab_size == loaded.model.config.vocab_size == base + 5
    assert loaded.task is None and loaded.heads == {}
    assert torch.equal(loaded.model.tokens_embed.weight, model.tokens_embed.weight)


def test_unusable_checkpoints_are_refused_in_one_line_naming_the_path(tmp_path, small_tokenizer):
    good = tmp_path / "good.ckpt"
    save_checkpoint(good, tiny_gpt(small_tokenizer.vocab_size), small_tokenizer)
    raw = torch.load(good, weights_only=False)
    (tmp_path / "truncated.ckpt").write_bytes(good.read_bytes()[:1000])
    (tmp_path / "text.ckpt").write_text("not a checkpoint")
    torch.save({"state_dict": {}}, tmp_path / "foreign.ckpt")
    torch.save({**raw, "gpt1": {**raw["gpt1"], "format": 3}}, tmp_path / "future.ckpt")
    torch.save({**raw, "gpt1": {**raw["gpt1"], "model_type": "rnn"}}, tmp_path / "rnn.ckpt")
    grown = Tokenizer.from_str(small_tokenizer.to_str())
    grown.add_special_tokens(["start"])
    torch.save({**raw, "gpt1": {**raw["gpt1"], "tokenizer": grown.to_str()}}, tmp_path / "vocab.ckpt")
    for name, message in [
        ("missing.ckpt", "does not exist"),
        ("truncated.ckpt", "cannot be read as a checkpoint"),
        ("text.ckpt", r"is a text file \(its first line: 'not a checkpoint'\), not a checkpoint: pass a \.ckpt file"),
        ("foreign.ckpt", "is not a gpt1 checkpoint"),
        ("future.ckpt", "format 3 is not supported"),
        ("rnn.ckpt", "unknown model_type 'rnn'"),
        ("vocab.ckpt", f"tokenizer has {small_tokenizer.vocab_size + 1} tokens but its model"),
    ]:
        with pytest.raises(CheckpointError, match=message) as error:
            load_checkpoint(tmp_path / name)
        assert name in str(error.value) and "\n" not in str(error.value)


def test_evaluate_reproduces_the_runs_validation_perplexity(trained, make_cfg):
    run, metrics = trained
    # in the run's precision (the quickstart's auto: bf16 where the CPU has it), so that the figures are the same ones
    cfg = make_cfg(
        "evaluate",
        [
            f"ckpt={run / 'checkpoints' / 'last.ckpt'}",
            "data.max_valid_windows=32",
            "trainer.enable_progress_bar=false",
            "trainer.precision=auto",
        ],
    )
    result = evaluate_command.evaluate(cfg)  # what the Hydra task function returns optimized_metric's value of
    assert result["ppl"] == pytest.approx(metrics["val_ppl"], rel=1e-4)
    on_disk = json.loads((Path(cfg.paths.output_dir) / "metrics.json").read_text())
    assert on_disk == pytest.approx(result)
    assert on_disk["ppl"] == on_disk["val/ppl"] == pytest.approx(result["ppl"])
    assert on_disk["loss"] == on_disk["val/loss"]


def test_a_run_ending_with_a_validation_reports_it_without_validating_again(make_cfg, monkeypatch, tmp_path):
    """As for fine-tuning (gpt1.training.results.final_validation): metrics.json takes the validation that ended the
    run; a run stopped between validations validates its final weights."""
    calls = []
    validate = L.Trainer.validate
    monkeypatch.setattr(L.Trainer, "validate", lambda *args, **kwargs: calls.append(1) or validate(*args, **kwargs))
    common = [*TINY_RUN, "trainer.max_steps=4", "callbacks.samples.every_n_steps=0"]
    metrics = train(make_cfg("pretrain", [*common, "trainer.val_check_interval=4"]))
    assert calls == [] and metrics["steps"] == 4 and metrics["val/ppl"] > 1
    train(make_cfg("pretrain", [*common, "trainer.val_check_interval=3", f"paths.output_dir={tmp_path / 'b'}"]))
    assert calls == [1]


def test_generate_samples_from_the_checkpoint(trained, make_cfg):
    run, _ = trained
    ckpt = f"ckpt={run / 'checkpoints' / 'last.ckpt'}"
    greedy = make_cfg("generate", [ckpt, "prompt=it is a truth", "temperature=0", "max_new_tokens=12", "num_samples=2"])
    texts = generate(greedy)
    assert len(texts) == 2 and texts[0] == texts[1] and texts[0].startswith("it is a truth")
    no_cache = generate(
        make_cfg("generate", [ckpt, "prompt=it is a truth", "temperature=0", "max_new_tokens=12", "use_cache=false"])
    )
    assert no_cache[0] == texts[0]
    assert (Path(greedy.paths.output_dir) / "samples.txt").read_text().startswith("it is a truth")
    # An empty prompt starts a document: from the eod token, which the text leaves out.
    unprompted = generate(make_cfg("generate", [ckpt, "prompt=", "temperature=0", "max_new_tokens=12"]))
    assert unprompted[0].strip() and "_eod_" not in unprompted[0]


def test_a_checkpoint_loaded_for_decoding_holds_its_own_weights_laid_out_as_decoding_reads_them(
    trained, make_cfg, tmp_path, monkeypatch
):
    """load_checkpoint(decoding=True) (``gpt1 generate``'s, for one sequence on the CPU) copies the weights out of
    the mapped file, under column_blocks those no longer than tall stored transposed: the same values, nothing left
    mapped (overwriting the file in place changes nothing), and the same greedy text, decoded token by token on
    gpt1's CPU layers (as gpt1 generate applies them) as by the plain model."""
    monkeypatch.setitem(gpt1.cpu.kernels.CPU_MATMULS, "decode", "column_blocks")
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    ckpt = tmp_path / "copy.ckpt"
    shutil.copy(trained[0] / "checkpoints" / "last.ckpt", ckpt)
    plain, decoding = load_checkpoint(ckpt).model, load_checkpoint(ckpt, decoding=True).model
    ckpt.write_bytes(bytes(ckpt.stat().st_size))  # in place: a mapped tensor would now read zeros
    for (name, ours), theirs in zip(decoding.state_dict().items(), plain.state_dict().values()):
        assert torch.equal(ours, theirs), name
        out, inn = ours.shape if ours.dim() == 2 else (0, 0)
        transposed = name != "positions_embed.weight" and 1 < inn <= out
        assert ours.stride() == ((1, out) if transposed else theirs.stride()), name
    prompt = torch.tensor([[1, 2, 3]])
    use_cpu_layers(decoding)
    decode_in_steps(decoding)
    assert torch.equal(decoding.generate(prompt, 12, temperature=0), plain.generate(prompt, 12, temperature=0))
    ckpt = f"ckpt={trained[0] / 'checkpoints' / 'last.ckpt'}"
    applied = []  # what gpt1 generate decodes with
    monkeypatch.setattr(
        generate_command, "decode_in_steps", lambda m: decode_in_steps(m) or applied.append((on_cpu_layers(m), type(m)))
    )
    texts = generate(make_cfg("generate", [ckpt, "prompt=it is a truth", "temperature=0", "max_new_tokens=12"]))
    assert applied == [(True, SteppedGPT)]
    monkeypatch.setitem(gpt1.cpu.kernels.CPU_MATMULS, "decode", "torch")
    assert texts == generate(make_cfg("generate", [ckpt, "prompt=it is a truth", "temperature=0", "max_new_tokens=12"]))


def test_pretraining_continues_from_init_from(trained, make_cfg):
    run, _ = trained
    cfg = make_cfg(
        "pretrain",
        [
            *TINY_RUN,
            f"init_from={run / 'checkpoints' / 'last.ckpt'}",
            "trainer.max_steps=2",
            "callbacks.samples.every_n_steps=0",
            "model=small",
        ],
    )
    metrics = train(cfg)  # model=small is ignored: the checkpoint's model and tokenizer are used
    assert metrics["params"] == load_checkpoint(run / "checkpoints" / "last.ckpt").model.num_params()


@pytest.mark.parametrize("resume_step", [4, 6, 7])  # mid epoch 0, its end, mid epoch 1 (6 batches an epoch)
def test_a_resumed_run_continues_exactly(make_cfg, tmp_path, resume_step):
    """Same weights as the uninterrupted run, bit for bit: data order, dropout RNG and step counters restored."""
    common = [
        *TINY_RUN,
        "data.samples_per_epoch=48",
        "trainer.max_steps=10",
        "trainer.val_check_interval=3",
        "trainer.check_val_every_n_epoch=null",
        "callbacks.checkpoint.every_n_steps=1",
        "callbacks.checkpoint.keep_last=-1",
        "callbacks.samples.every_n_steps=0",
    ]
    whole = make_cfg("pretrain", [*common, f"paths.output_dir={tmp_path / 'whole'}"])
    train(whole)
    checkpoints = Path(whole.paths.output_dir) / "checkpoints"
    resumed = make_cfg("pretrain", [*common, f"resume={checkpoints / f'step{resume_step:07d}.ckpt'}"])
    assert train(resumed)["steps"] == 10
    expected = load_checkpoint(checkpoints / "last.ckpt").model.state_dict()
    got = load_checkpoint(Path(resumed.paths.output_dir) / "checkpoints" / "last.ckpt").model.state_dict()
    for name, tensor in expected.items():
        assert torch.equal(tensor, got[name]), name


def test_lr_schedule_warms_up_linearly_then_decays_to_zero():
    total = 1000
    assert lr_factor(0, 100, total, Schedule.cosine) == pytest.approx(0.01)
    assert lr_factor(99, 100, total, Schedule.cosine) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.099)))
    assert lr_factor(500, 100, total, Schedule.cosine) == pytest.approx(0.5)
    assert lr_factor(total, 100, total, Schedule.cosine) == pytest.approx(0.0, abs=1e-12)
    assert lr_factor(500, 100, total, Schedule.linear) == pytest.approx(0.5)
    assert lr_factor(500, 100, total, Schedule.constant) == 1.0


def test_decay_steps_puts_the_run_on_a_longer_schedule(small_tokenizer):
    from gpt1.training.module import GPT1Module
    from gpt1.training.schema import OptimConfig

    model = GPT(GPTConfig(vocab_size=small_tokenizer.vocab_size, n_ctx=8, n_layer=1, n_head=1, n_embd=8, n_inner=8))
    for decay_steps, end in ((None, 0.0), (30, lr_factor(10, 2, 30, Schedule.cosine))):
        module = GPT1Module(model, small_tokenizer, OptimConfig(warmup_steps=2, decay_steps=decay_steps))
        module.trainer = type("T", (), {"estimated_stepping_batches": 10, "precision": "32-true"})()
        scheduler = module.configure_optimizers()["lr_scheduler"]["scheduler"]
        assert scheduler.lr_lambdas[0](10) == pytest.approx(end, abs=1e-12)
    assert end > 0.7  # a third of the way down the 30-step cosine


def test_bf16_mixed_clips_the_gradients_of_the_fused_optimizer(make_cfg, monkeypatch):
    """Lightning refuses to clip for a fused optimizer under any mixed precision; bf16 (no GradScaler) clips."""
    calls = []
    clip = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda *a, **k: calls.append(1) or clip(*a, **k))
    cfg = make_cfg(
        "pretrain",
        [*TINY_RUN, "trainer.max_steps=3", "trainer.precision=bf16-mixed", "callbacks.samples.every_n_steps=0"],
    )
    metrics = train(cfg)
    assert metrics["steps"] == 3 and math.isfinite(metrics["val_loss"]) and len(calls) == 3


@pytest.mark.parametrize("bf16", [True, False])
def test_auto_precision_is_bf16_where_the_cpu_multiplies_bf16(monkeypatch, bf16):
    from gpt1.training.trainer import resolve_precision

    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert resolve_precision("auto", "cpu") == ("bf16-mixed" if bf16 else "32-true")
    assert resolve_precision("16-mixed", "cpu") == "16-mixed"


def test_weight_decay_applies_to_matrices_only(trained, make_cfg):
    from gpt1.training.module import GPT1Module
    from gpt1.training.schema import OptimConfig

    run, _ = trained
    loaded = load_checkpoint(run / "checkpoints" / "last.ckpt")
    module = GPT1Module(loaded.model, loaded.tokenizer, OptimConfig())
    module.trainer = type("T", (), {"estimated_stepping_batches": 10, "precision": "32-true"})()  # all it reads
    decay, no_decay = module.configure_optimizers()["optimizer"].param_groups
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim > 1 for p in decay["params"]) and all(p.ndim == 1 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(loaded.model.parameters()))


def test_last_checkpoint_holds_the_final_step_off_the_checkpoint_interval(make_cfg):
    cfg = make_cfg(
        "pretrain",
        [
            *TINY_RUN,
            "trainer.max_steps=5",
            "callbacks.checkpoint.every_n_steps=2",
            "callbacks.checkpoint.keep_last=1",
            "callbacks.samples.every_n_steps=0",
        ],
    )
    train(cfg)
    checkpoints = Path(cfg.paths.output_dir) / "checkpoints"
    assert load_checkpoint(checkpoints / "last.ckpt").raw["global_step"] == 5
    assert {p.name for p in checkpoints.glob("step*.ckpt")} == {"step0000004.ckpt"}  # keep_last=1 keeps the newest


def test_wandb_logs_offline_without_an_account(make_cfg, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    cfg = make_cfg(
        "pretrain",
        [*TINY_RUN, "debug=fast", "logger=wandb", "logger.wandb.mode=offline", "callbacks.samples.every_n_steps=0"],
    )
    train(cfg)
    runs = list((Path(cfg.paths.output_dir) / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))


@pytest.mark.parametrize("experiment", EXPERIMENTS["pretrain"])
def test_every_experiment_runs_a_few_steps(make_cfg, experiment):
    """Each recipe's optimiser, schedule, trainer and callbacks, at toy scale on CPU with local data."""
    cfg = make_cfg(
        "pretrain",
        [
            f"experiment={experiment}",
            "data=books",
            "trainer=cpu",
            *TINY_RUN,
            "debug=fast",
            "data.num_workers=0",
            "tokenizer.vocab_size=512",
        ],
    )
    metrics = train(cfg)
    assert metrics["steps"] == 4 and math.isfinite(metrics["val_loss"])


def test_resume_auto_continues_from_the_run_directorys_last_checkpoint(make_cfg):
    base = [*TINY_RUN, "debug=fast", "callbacks.samples.every_n_steps=0", "resume=auto"]
    assert train(make_cfg("pretrain", base))["steps"] == 4  # nothing to resume yet: starts fresh
    assert train(make_cfg("pretrain", [*base, "trainer.max_steps=6"]))["steps"] == 6  # same run dir: continues


def test_pretraining_with_a_given_vocab_appends_the_eod_token(make_cfg, tmp_path, sample_data):
    """tokenizer=openai: a vocab.json + merges.txt directory (the original vocab's layout) is used as is, with the
    original text pipeline, plus the eod token after it."""
    from gpt1.text.tokenizer import train_bpe

    vocab_dir = tmp_path / "vocab"
    vocab_dir.mkdir()
    text = (sample_data / "books" / "train" / "the_war_of_the_worlds.txt").read_text()
    train_bpe([text], vocab_size=700).bpe.model.save(str(vocab_dir))  # vocab.json + merges.txt, no special tokens
    base = len(json.loads((vocab_dir / "vocab.json").read_text()))
    cfg = make_cfg(
        "pretrain",
        [
            *TINY_RUN,
            "debug=fast",
            "tokenizer=openai",
            f"tokenizer.path={vocab_dir}",
            "callbacks.samples.every_n_steps=0",
        ],
    )
    train(cfg)
    loaded = load_checkpoint(Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt")
    assert loaded.model.config.vocab_size == base + 1
    assert loaded.tokenizer.pipeline == "openai" and loaded.tokenizer.specials == {"eod": base}


def test_debug_overfit_trains_on_one_batch_until_it_is_memorised(make_cfg):
    """debug=overfit: `overfit_batches: 1` means one batch (an int; under a float schema it became 1.0, every batch),
    repeated until the model has learnt it: the loss falls far below where it started."""
    cfg = make_cfg(
        "pretrain",
        [
            *TINY_RUN,
            "debug=overfit",
            "trainer.max_steps=60",
            "trainer.log_every_n_steps=1",
            "optim.lr=1e-2",
            "optim.warmup_steps=5",
            "callbacks.samples.every_n_steps=0",
        ],
    )
    assert cfg.trainer.overfit_batches == 1 and isinstance(cfg.trainer.overfit_batches, int)
    metrics = train(cfg)
    losses = train_losses(Path(cfg.paths.output_dir))
    assert metrics["steps"] == 60 and len(losses) == 60
    assert losses[-1] < 0.35 * losses[0]  # one batch, seen 60 times: memorised (many batches would not be)


def test_resuming_with_another_data_order_says_so(make_cfg, capsys):
    base = [*TINY_RUN, "debug=fast", "callbacks.samples.every_n_steps=0", "resume=auto", "trainer.max_steps=2"]
    train(make_cfg("pretrain", base))
    train(make_cfg("pretrain", [*base, "trainer.max_steps=3"]))  # the same settings: silent
    assert "another data order" not in capsys.readouterr().err
    assert train(make_cfg("pretrain", [*base, "trainer.max_steps=4", "data.batch_size=4", "seed=7"]))["steps"] == 4
    err = capsys.readouterr().err
    assert "another data order" in err and "seed: 1234 -> 7" in err and "data.batch_size" in err


def test_every_callback_comes_from_build_callbacks(tmp_path):
    """Fine-tuning's model selection (BestWeights) too: last, after SafeStop, only when asked for."""
    from gpt1.training.callbacks import build_callbacks
    from gpt1.training.callbacks.best_weights import BestWeights
    from gpt1.training.callbacks.safe_stop import SafeStop
    from gpt1.training.schema import CallbacksConfig

    plain = build_callbacks(CallbacksConfig(), tmp_path, with_loggers=True)
    assert not any(isinstance(c, BestWeights) for c in plain) and isinstance(plain[-1], SafeStop)
    *others, best = build_callbacks(
        CallbacksConfig(), tmp_path, with_loggers=False, select_by="val/accuracy", prefixes=("val/", "val_mm/")
    )
    assert isinstance(others[-1], SafeStop) and isinstance(best, BestWeights)
    assert (best.path, best.monitor, best.prefixes) == (
        tmp_path / "checkpoints" / "best.ckpt",
        "val/accuracy",
        ("val/", "val_mm/"),
    )
