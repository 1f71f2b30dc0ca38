"""Pre-training end to end on the sample books (tiny model, CPU, seconds), and what a run leaves behind."""

import csv
import json
import math
from pathlib import Path

import pytest
import torch

from gpt1.checkpoint import load_checkpoint, save_checkpoint
from gpt1.evaluate import evaluate
from gpt1.generate import generate
from gpt1.config import Schedule
from gpt1.module import lr_factor
from gpt1.pretrain import train
from tests.conftest import TINY_RUN


def train_losses(run_dir: Path) -> list[float]:
    with open(run_dir / "csv" / "metrics.csv") as f:
        return [float(row["train/loss"]) for row in csv.DictReader(f) if row.get("train/loss")]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, cache_dir):
    """One tiny pre-training run shared by the tests below: 400 steps on one novel."""
    from hydra import compose, initialize_config_module

    run = tmp_path_factory.mktemp("pretrain")
    overrides = [
        f"paths.output_dir={run}", f"paths.cache_dir={cache_dir}", *TINY_RUN,
        "trainer.max_steps=400", "trainer.log_every_n_steps=1", "trainer.val_check_interval=200", "data.batch_size=16",
        "optim.lr=3e-3", "optim.warmup_steps=20",
        "callbacks.checkpoint.every_n_steps=200", "callbacks.samples.every_n_steps=200",
    ]
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        cfg = compose(config_name="pretrain", overrides=overrides)
    return run, train(cfg)


def test_pretraining_lowers_the_loss_below_the_unigram_baseline(trained):
    run, metrics = trained
    losses = train_losses(run)
    assert len(losses) == 400
    assert sum(losses[-20:]) / 20 < sum(losses[:5]) / 5 - 1.0  # it learns
    assert metrics["val_ppl"] < 0.8 * metrics["val_unigram_ppl"]  # it uses the context: far better than unigram
    assert metrics["val_unigram_ppl"] < 517  # and unigram beats uniform over the vocabulary
    assert math.isclose(metrics["val_ppl"], math.exp(metrics["val_loss"]), rel_tol=1e-5)


def test_the_run_writes_metrics_checkpoints_logs_and_a_sample(trained):
    run, metrics = trained
    on_disk = json.loads((run / "metrics.json").read_text())
    assert on_disk == pytest.approx(metrics)
    assert on_disk["steps"] == 400 and on_disk["tokens_seen"] == 400 * 16 * 32
    assert on_disk["params"] > 0 and on_disk["wall_time_s"] > 0 and on_disk["sample"]
    assert {p.name for p in (run / "checkpoints").glob("*.ckpt")} == {"step0000200.ckpt", "step0000400.ckpt", "last.ckpt"}
    assert not list((run / "checkpoints").glob("*.tmp"))  # atomic writes leave no temporary files
    header = (run / "csv" / "metrics.csv").read_text().splitlines()[0]
    for column in ("train/loss", "train/ppl", "val/ppl", "lr-AdamW/pg1", "train/device/items_per_sec"):
        assert column in header


def test_the_checkpoint_carries_its_tokenizer_and_reloads(trained, tmp_path):
    run, _ = trained
    loaded = load_checkpoint(run / "checkpoints" / "last.ckpt")
    assert loaded.tokenizer.get_vocab_size() == loaded.model.config.vocab_size == 512 + 5  # base + special tokens
    assert loaded.raw["global_step"] == 400
    # save/load round trip of a standalone checkpoint keeps weights, config and tokenizer
    save_checkpoint(tmp_path / "copy.ckpt", loaded.model, loaded.tokenizer)
    again = load_checkpoint(tmp_path / "copy.ckpt")
    assert again.model.config == loaded.model.config
    assert again.tokenizer.to_str() == loaded.tokenizer.to_str()
    for (name, a), (_, b) in zip(loaded.model.state_dict().items(), again.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_evaluate_reproduces_the_runs_validation_perplexity(trained, make_cfg):
    run, metrics = trained
    cfg = make_cfg("evaluate", [f"ckpt={run / 'checkpoints' / 'last.ckpt'}", "data.max_valid_windows=32",
                                "trainer.enable_progress_bar=false"])
    result = evaluate(cfg)
    assert result["ppl"] == pytest.approx(metrics["val_ppl"], rel=1e-4)
    assert json.loads((Path(cfg.paths.output_dir) / "metrics.json").read_text())["ppl"] == pytest.approx(result["ppl"])


def test_generate_samples_from_the_checkpoint(trained, make_cfg):
    run, _ = trained
    ckpt = f"ckpt={run / 'checkpoints' / 'last.ckpt'}"
    greedy = make_cfg("generate", [ckpt, "prompt=it is a truth", "temperature=0", "max_new_tokens=12", "num_samples=2"])
    texts = generate(greedy)
    assert len(texts) == 2 and texts[0] == texts[1] and texts[0].startswith("it is a truth")
    no_cache = generate(make_cfg("generate", [ckpt, "prompt=it is a truth", "temperature=0", "max_new_tokens=12",
                                              "use_cache=false"]))
    assert no_cache[0] == texts[0]
    assert (Path(greedy.paths.output_dir) / "samples.txt").read_text().startswith("it is a truth")


def test_pretraining_continues_from_init_from(trained, make_cfg):
    run, _ = trained
    cfg = make_cfg("pretrain", [*TINY_RUN, f"init_from={run / 'checkpoints' / 'last.ckpt'}", "trainer.max_steps=2",
                                "callbacks.samples.every_n_steps=0", "model=small"])
    metrics = train(cfg)  # model=small is ignored: the checkpoint's model and tokenizer are used
    assert metrics["params"] == load_checkpoint(run / "checkpoints" / "last.ckpt").model.num_params()


@pytest.mark.parametrize("resume_step", [4, 6, 7])  # mid epoch 0, its end, mid epoch 1 (6 batches an epoch)
def test_a_resumed_run_continues_exactly(make_cfg, tmp_path, resume_step):
    """Same weights as the uninterrupted run, bit for bit: data order, dropout RNG and step counters restored."""
    common = [*TINY_RUN, "data.samples_per_epoch=48", "trainer.max_steps=10", "trainer.val_check_interval=3",
              "trainer.check_val_every_n_epoch=null", "callbacks.checkpoint.every_n_steps=1",
              "callbacks.checkpoint.keep_last=-1", "callbacks.samples.every_n_steps=0"]
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


def test_weight_decay_applies_to_matrices_only(trained, make_cfg):
    from gpt1.config import OptimConfig
    from gpt1.module import GPT1Module

    run, _ = trained
    loaded = load_checkpoint(run / "checkpoints" / "last.ckpt")
    module = GPT1Module(loaded.model, loaded.tokenizer, OptimConfig())
    module.trainer = type("T", (), {"estimated_stepping_batches": 10})()  # all configure_optimizers reads
    decay, no_decay = module.configure_optimizers()["optimizer"].param_groups
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim > 1 for p in decay["params"]) and all(p.ndim == 1 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(loaded.model.parameters()))


def test_last_checkpoint_holds_the_final_step_off_the_checkpoint_interval(make_cfg):
    cfg = make_cfg("pretrain", [*TINY_RUN, "trainer.max_steps=5", "callbacks.checkpoint.every_n_steps=2",
                                "callbacks.checkpoint.keep_last=1", "callbacks.samples.every_n_steps=0"])
    train(cfg)
    checkpoints = Path(cfg.paths.output_dir) / "checkpoints"
    assert load_checkpoint(checkpoints / "last.ckpt").raw["global_step"] == 5
    assert {p.name for p in checkpoints.glob("step*.ckpt")} == {"step0000004.ckpt"}  # keep_last=1 keeps the newest


def test_wandb_logs_offline_without_an_account(make_cfg, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    cfg = make_cfg("pretrain", [*TINY_RUN, "debug=fast", "logger=wandb", "logger.wandb.mode=offline",
                                "callbacks.samples.every_n_steps=0"])
    train(cfg)
    runs = list((Path(cfg.paths.output_dir) / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))


@pytest.mark.parametrize("experiment", sorted(p.stem for p in (Path(__file__).parents[1] / "conf/experiment").glob("*.yaml")))
def test_every_experiment_runs_a_few_steps(make_cfg, experiment):
    """Each recipe's optimiser, schedule, trainer and callbacks, at toy scale on CPU with local data."""
    cfg = make_cfg("pretrain", [f"experiment={experiment}", "data=books", "trainer=cpu", *TINY_RUN, "debug=fast",
                                "data.num_workers=0", "tokenizer.vocab_size=512"])
    metrics = train(cfg)
    assert metrics["steps"] == 4 and math.isfinite(metrics["val_loss"])


def test_resume_auto_continues_from_the_run_directorys_last_checkpoint(make_cfg):
    base = [*TINY_RUN, "debug=fast", "callbacks.samples.every_n_steps=0", "resume=auto"]
    assert train(make_cfg("pretrain", base))["steps"] == 4  # nothing to resume yet: starts fresh
    assert train(make_cfg("pretrain", [*base, "trainer.max_steps=6"]))["steps"] == 6  # same run dir: continues


def test_pretraining_with_a_given_vocab_appends_the_special_tokens(make_cfg, tmp_path, sample_data):
    """tokenizer=openai: a vocab.json + merges.txt directory (the original vocab's layout) is used as is, plus
    the five special tokens after it."""
    from gpt1.tokenizer import SPECIAL_TOKENS, train_bpe

    vocab_dir = tmp_path / "vocab"
    vocab_dir.mkdir()
    text = (sample_data / "books" / "train" / "the_war_of_the_worlds.txt").read_text()
    train_bpe([text], vocab_size=700).model.save(str(vocab_dir))  # vocab.json + merges.txt, no special tokens
    base = len(json.loads((vocab_dir / "vocab.json").read_text()))
    cfg = make_cfg("pretrain", [*TINY_RUN, "debug=fast", "tokenizer=openai", f"tokenizer.path={vocab_dir}",
                                "callbacks.samples.every_n_steps=0"])
    train(cfg)
    loaded = load_checkpoint(Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt")
    assert loaded.model.config.vocab_size == base + len(SPECIAL_TOKENS)
    assert loaded.tokenizer.token_to_id(SPECIAL_TOKENS["start"]) == base
