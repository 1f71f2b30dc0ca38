"""Fine-tuning end to end on the sample tasks (tiny model, CPU, seconds each): heads, losses, metrics, ablations,
checkpoints, evaluation and predictions."""

import csv
import json
import math
from collections import Counter
from pathlib import Path

import lightning as L
import pytest
import torch
from hydra import compose, initialize_config_module

from gpt1.checkpoints.format import load_checkpoint, save_checkpoint
from gpt1.commands.evaluate import evaluate
from gpt1.commands.finetune import REQUIRED, finetune, start_from
from gpt1.core.errors import CheckpointError, ConfigError
from gpt1.data.base import split_batch
from gpt1.model.lm_loss import IGNORE_INDEX
from gpt1.model.lstm import LSTM
from gpt1.tasks.metrics import build_metric
from gpt1.tasks.spec import TASK_SPECIAL_TOKENS, task_from_dict
from gpt1.tasks.task_data import TaskDataModule
from gpt1.training.packing import task_logits
from gpt1.training.schema import OptimConfig
from gpt1.training.task_module import TaskModule
from tests.helpers import CAPPED, FAST, FEW_FINETUNE, run_gpt1

SAMPLE_TASKS = ["sentiment", "entailment", "nli", "similarity", "paraphrase", "multiple_choice", "story"]


@pytest.fixture
def run_finetune(make_cfg, pretrained):
    """finetune(TASK, overrides...) -> (metrics, run dir), from the tiny checkpoint unless init_from is given."""

    def _run(task: str, *overrides: str):
        init = [] if any(o.startswith("init_from=") for o in overrides) else [f"init_from={pretrained}"]
        cfg = make_cfg("finetune", [f"task={task}", *init, *FAST, *overrides])
        return finetune(cfg), Path(cfg.paths.output_dir)

    return _run


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory, cache_dir, pretrained) -> dict[str, Path]:
    """One short fine-tuning run per sample task: task -> run directory (with metrics.json and last.ckpt)."""
    runs = {}
    for task in SAMPLE_TASKS:
        run = tmp_path_factory.mktemp(task)
        overrides = [
            f"paths.output_dir={run}",
            f"paths.cache_dir={cache_dir}",
            f"task={task}",
            f"task.name={task}",
            f"init_from={pretrained}",
            *FAST,
            "predict=true",
        ]  # (the CLI names the task after its option)
        with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
            finetune(compose(config_name="finetune", overrides=overrides))
        runs[task] = run
    return runs


def task_module(ckpt: Path, cache_dir: Path) -> tuple[TaskModule, TaskDataModule]:
    """The fine-tuned module of a checkpoint (eval mode) and its task's data."""
    loaded = load_checkpoint(ckpt)
    task = task_from_dict(loaded.task)
    data = TaskDataModule(
        task, loaded.tokenizer, n_ctx=loaded.model.config.n_ctx, batch_size=8, seed=0, cache_dir=cache_dir
    )
    data.prepare_data()
    data.setup("validate")
    module = TaskModule(loaded.model, loaded.tokenizer, OptimConfig(), task, *data.metric_prefixes)
    module.heads.load_state_dict(loaded.heads)
    return module.eval(), data


def first_val_batch(data: TaskDataModule) -> dict[str, torch.Tensor]:
    loader = data.val_dataloader()
    return next(iter(loader[0] if isinstance(loader, list) else loader))


@pytest.mark.parametrize("task", SAMPLE_TASKS)
def test_each_sample_task_finetunes_and_writes_its_metrics(finetuned, task):
    metrics = json.loads((finetuned[task] / "metrics.json").read_text())
    spec = load_checkpoint(finetuned[task] / "checkpoints" / "last.ckpt").task
    assert metrics["task"] == spec["name"] == task and metrics["steps"] == 3 and metrics["wall_time_s"] > 0
    for name in spec["metrics"]:
        for prefix in ("val", "test", "baseline"):  # every sample task's test split is labelled
            assert math.isfinite(metrics[f"{prefix}/{name}"]), (prefix, name)
    assert metrics["examples"]["train"] > 0 and set(metrics["truncated"]) == set(metrics["examples"])
    assert metrics["init_from"].endswith("last.ckpt") and metrics["model"] == "gpt"


@pytest.mark.parametrize("task", SAMPLE_TASKS)
def test_the_checkpoint_carries_the_heads_and_task(finetuned, task):
    loaded = load_checkpoint(finetuned[task] / "checkpoints" / "last.ckpt")
    assert loaded.heads and all(k.startswith(loaded.task["type"] + ".linear.") for k in loaded.heads)
    assert loaded.task["num_labels"] >= 1 and loaded.raw["global_step"] == 3
    assert {"start", "delimiter", "extract"} <= set(loaded.tokenizer.specials)


def test_the_baseline_is_the_majority_class_or_the_mean(finetuned, sample_data):
    import pandas as pd

    train = pd.read_json(sample_data / "tasks/sentiment/train.jsonl", lines=True)["label"][:256]
    val = pd.read_json(sample_data / "tasks/sentiment/validation.jsonl", lines=True)["label"][:48]
    metrics = json.loads((finetuned["sentiment"] / "metrics.json").read_text())
    assert metrics["baseline/accuracy"] == pytest.approx((val == train.mode()[0]).mean())
    similarity = json.loads((finetuned["similarity"] / "metrics.json").read_text())
    assert (
        similarity["baseline/pearson"] == similarity["baseline/spearman"] == 0.0
    )  # a constant correlates with nothing


def test_evaluate_reproduces_the_runs_validation_metrics(finetuned, make_cfg):
    for task, given in (("nli", False), ("similarity", True)):  # the checkpoint's task, or task=NAME
        metrics = json.loads((finetuned[task] / "metrics.json").read_text())
        ckpt = finetuned[task] / "checkpoints" / "last.ckpt"
        cfg = make_cfg(
            "evaluate",
            [
                f"ckpt={ckpt}",
                "data.batch_size=16",
                "trainer.enable_progress_bar=false",
                *([f"task={task}", f"task.name={task}", *CAPPED] if given else []),
            ],
        )
        result = evaluate(cfg)
        for name in load_checkpoint(ckpt).task["metrics"]:
            assert result[f"val/{name}"] == pytest.approx(metrics[f"val/{name}"], abs=1e-6), (task, name)
        assert json.loads((Path(cfg.paths.output_dir) / "metrics.json").read_text())["task"] == metrics["task"]


def test_a_run_ending_with_a_validation_reports_it_without_validating_again(
    pretrained, make_cfg, monkeypatch, tmp_path
):
    """The last epoch's validation scored the final weights: metrics.json takes its figures (the same as a new
    validation's: ``gpt1 evaluate``). A run stopped between validations (max_steps) validates its final weights."""
    calls = []
    validate = L.Trainer.validate
    monkeypatch.setattr(L.Trainer, "validate", lambda *args, **kwargs: calls.append(1) or validate(*args, **kwargs))
    common = [
        f"init_from={pretrained}",
        "task=nli",
        "task.name=nli",
        *CAPPED,
        "++task.splits.train='train[:32]'",
        "batch_size=16",
        "logger=csv",
        "trainer.enable_progress_bar=false",
        "trainer.num_sanity_val_steps=0",
    ]
    two_splits = [
        "++task.data_files.validation_b=${paths.sample_data}/tasks/nli/validation.parquet",
        "++task.splits.validation=['validation[:48]',validation_b]",
    ]  # as MNLI's matched, mismatched
    metrics = finetune(make_cfg("finetune", [*common, *two_splits, "trainer.max_epochs=1"]))  # 2 updates, validation
    assert calls == [] and metrics["steps"] == 2
    keys = ["val/accuracy", "val/loss", "val_b/accuracy", "val_b/loss"]
    assert {*keys, "test/accuracy"} <= set(metrics)
    ckpt = Path(metrics["last_checkpoint"])
    result = evaluate(make_cfg("evaluate", [f"ckpt={ckpt}", "trainer.enable_progress_bar=false"]))
    assert calls == [1] and result["main_metric"] == "val/accuracy"  # the carried task's: a sweep's value
    for key in keys:
        assert result[key] == pytest.approx(metrics[key], abs=1e-6), key
    finetune(make_cfg("finetune", [*common, "trainer.max_steps=1", f"paths.output_dir={tmp_path / 'stopped'}"]))
    assert calls == [1, 1]


def test_evaluate_refuses_a_task_its_head_does_not_fit(finetuned, make_cfg):
    ckpt = finetuned["sentiment"] / "checkpoints" / "last.ckpt"  # 2 classes
    cfg = make_cfg("evaluate", [f"ckpt={ckpt}", "task=nli", *CAPPED])  # 3 classes
    with pytest.raises(CheckpointError, match="no entailment head"):  # (found before any data is read)
        evaluate(cfg)


def test_evaluate_scores_a_finetuned_models_perplexity_on_request(finetuned, make_cfg, cache_dir):
    """perplexity=true: the fine-tuned decoder's LM on data, as a pre-trained one's; with task= it is refused."""
    ckpt = finetuned["sentiment"] / "checkpoints" / "last.ckpt"
    base = [f"ckpt={ckpt}", "perplexity=true", "trainer.enable_progress_bar=false", f"paths.cache_dir={cache_dir}"]
    result = evaluate(make_cfg("evaluate", [*base, "data.max_valid_windows=4"]))
    assert "val/accuracy" not in result and result["tokens"] == 4 * 32 and math.isfinite(result["val/ppl"])
    assert result["main_metric"] == "val/ppl"
    with pytest.raises(ConfigError, match="perplexity=true .* task= .* give one of them"):
        evaluate(make_cfg("evaluate", [*base, "task=sentiment"]))


def test_predictions_file_has_one_row_per_test_example(finetuned):
    rows = (finetuned["sentiment"] / "predictions" / "test.tsv").read_text().splitlines()
    metrics = json.loads((finetuned["sentiment"] / "metrics.json").read_text())
    assert rows[0] == "index\tprediction" and len(rows) - 1 == metrics["examples"]["test"]
    indices = [int(r.split("\t")[0]) for r in rows[1:]]
    assert indices == sorted(indices) and len(set(indices)) == len(indices)
    spec = load_checkpoint(finetuned["sentiment"] / "checkpoints" / "last.ckpt").task
    allowed = set(spec["label_names"]) if spec["label_names"] else {"0", "1"}
    assert {r.split("\t")[1] for r in rows[1:]} <= allowed
    scores = (finetuned["similarity"] / "predictions" / "test.tsv").read_text().splitlines()[1:]
    assert all(math.isfinite(float(r.split("\t")[1])) for r in scores)  # regression: a score per pair


def test_a_similarity_prediction_is_the_same_for_both_orders(finetuned, cache_dir):
    module, data = task_module(finetuned["similarity"] / "checkpoints" / "last.ckpt", cache_dir)
    batch = first_val_batch(data)  # sequence 0 is [a; b], sequence 1 is [b; a]
    swapped = {k: v.flip(1) if k in ("input_ids", "extract", "targets") else v for k, v in batch.items()}
    with torch.no_grad():
        assert torch.equal(module(batch)[0], module(swapped)[0])


def test_multiple_choice_scores_permute_with_the_choices(finetuned, cache_dir):
    module, data = task_module(finetuned["multiple_choice"] / "checkpoints" / "last.ckpt", cache_dir)
    batch = first_val_batch(data)
    perm = torch.tensor([2, 0, 3, 1])
    permuted = {
        k: v[:, perm] if k in ("input_ids", "extract", "targets", "choice_mask") else v for k, v in batch.items()
    }
    with torch.no_grad():
        logits, permuted_logits = module(batch)[0], module(permuted)[0]
    assert logits.shape == (batch["labels"].size(0), 4)
    torch.testing.assert_close(permuted_logits, logits[:, perm], rtol=1e-5, atol=1e-6)


def test_masked_choices_score_minus_infinity(finetuned, cache_dir):
    module, data = task_module(finetuned["story"] / "checkpoints" / "last.ckpt", cache_dir)
    batch = first_val_batch(data)
    batch["choice_mask"][:, -1] = False
    with torch.no_grad():
        logits = module(batch)[0]
    assert torch.isneginf(logits[:, -1]).all() and torch.isfinite(logits[:, :-1]).all()


def test_the_aux_lm_loss_is_the_mean_over_sequences_of_their_mean_token_loss(finetuned, cache_dir):
    module, data = task_module(finetuned["paraphrase"] / "checkpoints" / "last.ckpt", cache_dir)
    batch = first_val_batch(data)
    with torch.no_grad():
        out = module(batch)
        loss = module.sequence_lm_loss(out.hidden, out.index, batch["targets"])
        logits = module.model.lm_logits(out.hidden[out.index]).flatten(0, 1)  # (N, T, V)
    targets = batch["targets"].flatten(0, 1)  # (N, T)
    per_sequence = [
        torch.nn.functional.cross_entropy(logits[i][targets[i] != IGNORE_INDEX], targets[i][targets[i] != IGNORE_INDEX])
        for i in range(targets.size(0))
    ]
    torch.testing.assert_close(loss, torch.stack(per_sequence).mean())


def test_without_the_aux_lm_loss(run_finetune):
    """Also: a run of fewer updates (3) than trainer.log_every_n_steps (50) logs its training loss at its last."""
    metrics, run = run_finetune("entailment", "aux_lm_weight=0")
    assert metrics["steps"] == 3
    header = (run / "csv" / "metrics.csv").read_text().splitlines()[0]
    assert "train/task_loss" in header and "train/lm_loss" not in header
    with open(run / "csv" / "metrics.csv") as f:
        assert [int(r["step"]) for r in csv.DictReader(f) if r["train/loss"]] == [2]


def test_debug_fast_checks_a_finetune_end_to_end(run_finetune):
    """debug=fast, as for pre-training: 4 updates, validation every 2 batches on 2 of its batches, checkpoints."""
    metrics, run = run_finetune("sentiment", "debug=fast", "trainer.max_steps=4")
    assert metrics["steps"] == 4 and 0 <= metrics["val/accuracy"] <= 1
    assert {p.name for p in (run / "checkpoints").glob("*.ckpt")} >= {"last.ckpt", "step0000002.ckpt"}
    with open(run / "csv" / "metrics.csv") as f:
        validated = sorted({int(r["step"]) for r in csv.DictReader(f) if r["val/accuracy"]})
    assert validated == [
        1,
        3,
    ]  # after batches 2 and 4; the final scoring takes the second (gpt1.training.results.task_scores)


def test_debug_overfit_memorises_one_batch_of_a_task(run_finetune):
    """debug=overfit bounds the run by its steps, not by the recipe's 3 epochs (of one batch each)."""
    # without dropout, as the tiny checkpoint was pre-trained (fine-tuning's default is the recipe's 0.1)
    metrics, run = run_finetune(
        "sentiment",
        "debug=overfit",
        "trainer.max_steps=30",
        "trainer.log_every_n_steps=1",
        "optim.lr=3e-3",
        "model.embd_pdrop=0",
        "model.attn_pdrop=0",
        "model.resid_pdrop=0",
    )
    with open(run / "csv" / "metrics.csv") as f:
        losses = [float(r["train/task_loss"]) for r in csv.DictReader(f) if r["train/task_loss"]]
    assert metrics["steps"] == 30 and len(losses) == 30
    assert losses[-1] < 0.3 * losses[0]  # 16 examples, seen 30 times: memorised (the task's 256 would not be)


def test_n_transfer_loads_the_first_blocks_and_starts_the_others_fresh(make_cfg, pretrained, run_finetune):
    cfg = make_cfg("finetune", ["task=sentiment", f"init_from={pretrained}", "n_transfer=1"])
    model, tokenizer = start_from(cfg)
    ref = load_checkpoint(pretrained).model.state_dict()
    state = model.state_dict()
    for name, tensor in ref.items():
        if name == "tokens_embed.weight":  # the base vocabulary's rows, then fresh rows for the 3 task tokens
            assert torch.equal(state[name][: len(tensor)], tensor) and len(state[name]) == len(tensor) + 3
        else:
            assert torch.equal(state[name], tensor) == (not name.startswith("h.1.")), name
    assert tokenizer.vocab_size == model.config.vocab_size
    assert run_finetune("sentiment", "n_transfer=1")[0]["steps"] == 3
    with pytest.raises(ConfigError, match="n_transfer=3"):
        start_from(make_cfg("finetune", ["task=sentiment", f"init_from={pretrained}", "n_transfer=3"]))


def test_fine_tuning_can_pad_the_checkpoints_vocabulary(make_cfg, pretrained, run_finetune):
    """model.pad_vocab_to_multiple rounds the table up (for GPU matmuls) or back down; the model scores the same."""
    ref = load_checkpoint(pretrained).model.eval()
    base = ref.config.vocab_size
    model, tokenizer = start_from(
        make_cfg("finetune", ["task=sentiment", f"init_from={pretrained}", "model.pad_vocab_to_multiple=64"])
    )
    rows = model.tokens_embed.weight.size(0)
    assert rows % 64 == 0 and rows > model.config.vocab_size == tokenizer.vocab_size == base + 3
    assert torch.equal(model.tokens_embed.weight[:base], ref.tokens_embed.weight[:base])
    ids = torch.randint(base, (2, 16))
    with torch.no_grad():
        logits, ref_logits = (
            model.eval().lm_logits(model(ids)),
            ref.lm_logits(ref(ids)),
        )  # (2, 16, base + 3), (.., base)
    assert logits.size(-1) == base + 3  # padded rows are never scored
    torch.testing.assert_close(logits[..., :base], ref_logits)

    _, run = run_finetune("sentiment", "model.pad_vocab_to_multiple=64")
    padded = run / "checkpoints" / "last.ckpt"
    assert load_checkpoint(padded).model.tokens_embed.weight.size(0) == rows
    unpadded, _ = start_from(
        make_cfg("finetune", ["task=sentiment", f"init_from={padded}", "model.pad_vocab_to_multiple=1"])
    )
    assert unpadded.tokens_embed.weight.size(0) == base + 3


def test_no_pre_training_ablation(make_cfg, pretrained, run_finetune):
    cfg = make_cfg("finetune", ["task=sentiment", "init_from=random", f"tokenizer_from={pretrained}"])
    model, tokenizer = start_from(cfg)
    ref = load_checkpoint(pretrained)
    assert model.config.n_layer == ref.model.config.n_layer  # the checkpoint's architecture, not its weights
    assert not torch.equal(model.h[0].attn.c_attn.weight, ref.model.h[0].attn.c_attn.weight)
    metrics, _ = run_finetune("sentiment", "init_from=random", f"tokenizer_from={pretrained}")
    assert metrics["init_from"] == "random" and metrics["steps"] == 3
    with pytest.raises(ConfigError, match="tokenizer_from"):
        start_from(make_cfg("finetune", ["task=sentiment", "init_from=random"]))


def test_the_lstm_baseline_takes_the_checkpoints_embeddings(make_cfg, pretrained, run_finetune):
    cfg = make_cfg("finetune", ["task=sentiment", f"init_from={pretrained}", "model=lstm", "model.hidden_size=64"])
    model, _ = start_from(cfg)
    ref = load_checkpoint(pretrained).model
    assert isinstance(model, LSTM) and model.config.n_embd == ref.config.n_embd
    assert torch.equal(model.tokens_embed.weight[: ref.config.vocab_size], ref.tokens_embed.weight)
    # its LM samples text during training as the transformer's does (it crashed when debug=fast turned samples on)
    metrics, run = run_finetune(
        "multiple_choice", "model=lstm", "model.hidden_size=64", "callbacks.samples.every_n_steps=2"
    )
    assert metrics["model"] == "lstm" and math.isfinite(metrics["val/accuracy"])
    assert isinstance(load_checkpoint(run / "checkpoints" / "last.ckpt").model, LSTM)


def test_a_metric_built_without_sync_is_not_gathered_over_the_ranks(tmp_path, monkeypatch):
    """The baseline metrics are computed on every rank from all the labels, without a gather: under NCCL (DDP on
    GPUs) a gather of their CPU tensors fails. Here a one-rank gloo group counts the gathers."""
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'group'}", rank=0, world_size=1)
    try:
        gathers = []
        gather = torch.distributed.all_gather
        monkeypatch.setattr(torch.distributed, "all_gather", lambda *a, **k: gathers.append(1) or gather(*a, **k))
        for sync in (False, True):
            metric = build_metric("accuracy", False, False, 2, sync_on_compute=sync)
            metric.update(torch.tensor([1, 1, 0]), torch.tensor([1, 0, 0]))
            assert metric.compute() == pytest.approx(2 / 3) and bool(gathers) is sync
    finally:
        torch.distributed.destroy_process_group()


def test_mcc_is_zero_for_a_constant_prediction_and_matthews_otherwise():
    def mcc(preds, labels, classes=2):
        metric = build_metric("mcc", False, False, classes)
        metric.update(torch.tensor(preds), torch.tensor(labels))
        return float(metric.compute())

    assert mcc([1, 1, 1, 1], [1, 1, 1, 0]) == 0.0  # torchmetrics' own gives 0.58
    assert mcc([1, 0, 0, 1, 1], [1, 0, 1, 1, 0]) == pytest.approx(1 / 6)  # (TP TN - FP FN) / sqrt(...) = 1/6
    assert mcc([0, 1, 2, 0], [0, 1, 2, 0], classes=3) == pytest.approx(1.0)


def test_pretrained_task_tokens_start_fresh(make_cfg, pretrained, tmp_path):
    """A checkpoint pre-trained with the task tokens (format 1 did that) gets fresh rows for them: N(0, init_std)."""
    ref = load_checkpoint(pretrained)
    grown = ref.tokenizer.add_special_tokens(TASK_SPECIAL_TOKENS)
    ref.model.resize_token_embeddings(grown)
    with torch.no_grad():
        ref.model.tokens_embed.weight[-3:] = 100.0  # "trained" rows
    save_checkpoint(tmp_path / "with_tokens.ckpt", ref.model, ref.tokenizer)
    model, tokenizer = start_from(
        make_cfg("finetune", ["task=sentiment", f"init_from={tmp_path / 'with_tokens.ckpt'}"])
    )
    ids = [tokenizer.special_id(role) for role in TASK_SPECIAL_TOKENS]
    assert model.config.vocab_size == grown and model.tokens_embed.weight[ids].abs().max() < 1.0
    assert torch.equal(model.tokens_embed.weight[: ids[0]], ref.model.tokens_embed.weight[: ids[0]])


def test_throughput_and_mfu_count_the_batchs_real_tokens(finetuned, cache_dir):
    """The logged tokens/s and MFU count a task batch's tokens without its padding (counted on the CPU)."""
    module, data = task_module(finetuned["multiple_choice"] / "checkpoints" / "last.ckpt", cache_dir)
    batch = module.on_before_batch_transfer(first_val_batch(data), 0)
    lengths = (batch["extract"] + 1)[batch["choice_mask"]]  # every real choice up to its extract token
    assert batch["tokens"] == int(lengths.sum()) < batch["input_ids"].numel()
    module.count_flops(batch)
    assert module.flops_per_batch == module.model.flops_per_token(batch["input_ids"].size(-1)) * batch["tokens"]


def test_gradient_accumulation_makes_up_the_batch(run_finetune):
    metrics, run = run_finetune("sentiment", "batch_size=8", "micro_batch_size=4", "trainer.max_steps=2")
    assert metrics["steps"] == 2
    assert split_batch(32, world_size=2, micro_batch_size=8) == (8, 2)
    with pytest.raises(ConfigError, match="micro_batch_size"):
        split_batch(32, world_size=1, micro_batch_size=6)


def test_warmup_fraction_sets_the_warmup_from_the_number_of_updates(finetuned, cache_dir):
    module, _ = task_module(finetuned["sentiment"] / "checkpoints" / "last.ckpt", cache_dir)
    module.optim = OptimConfig(lr=1.0, warmup_fraction=0.01, schedule="linear")
    module.trainer = type("T", (), {"estimated_stepping_batches": 1000, "precision": "32-true"})()  # all it reads
    schedule = module.configure_optimizers()["lr_scheduler"]["scheduler"]
    factors = [schedule.lr_lambdas[0](step) for step in (0, 4, 9, 500)]
    # 10 warm-up steps of 1000, times the linear decay
    assert factors == pytest.approx([0.1, 0.5 * (1 - 4 / 1000), 1 - 9 / 1000, 0.5])


def test_a_missing_init_from_is_refused_in_one_line(tmp_path):
    proc = run_gpt1("finetune", "task=sentiment", f"hydra.run.dir={tmp_path}", cwd=tmp_path, timeout=120, check=False)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [f"error: {REQUIRED}"]


@pytest.mark.parametrize("resume_step", [3, 5])  # mid epoch 0, mid epoch 1 (4 batches an epoch)
def test_a_resumed_finetune_continues_exactly(run_finetune, tmp_path, resume_step, recwarn):
    """Same weights and head as the uninterrupted run, bit for bit: data order, dropout RNG and counters restored;
    so without Lightning's warning that a mid-epoch resume replays the epoch's data."""
    common = [
        "batch_size=64",
        "trainer.max_steps=6",
        "callbacks.checkpoint.every_n_steps=1",
        "callbacks.checkpoint.keep_last=-1",
    ]
    _, whole = run_finetune("sentiment", *common)
    ckpt = whole / "checkpoints" / f"step{resume_step:07d}.ckpt"
    metrics, resumed = run_finetune("sentiment", *common, f"resume={ckpt}", f"paths.output_dir={tmp_path / 'resumed'}")
    assert metrics["steps"] == 6
    assert not [w for w in recwarn if "ended before the epoch ended" in str(w.message)]
    expected = load_checkpoint(whole / "checkpoints" / "last.ckpt")
    got = load_checkpoint(resumed / "checkpoints" / "last.ckpt")
    for name, tensor in {**expected.model.state_dict(), **expected.heads}.items():
        assert torch.equal(tensor, {**got.model.state_dict(), **got.heads}[name]), name


def test_finetune_from_the_command_line_with_a_users_task(tmp_path, pretrained, sample_data, cache_dir):
    """gpt1 finetune --config-dir DIR task=NAME: a task of the user's, its run directory named after it."""
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "reviews.yaml").write_text(
        "type: classification\n"
        f"data_files: {{train: {sample_data}/tasks/sentiment/train.jsonl, "
        f"validation: {sample_data}/tasks/sentiment/validation.jsonl}}\n"
        "splits: {train: 'train[:64]', validation: 'validation[:32]'}\n"
        "text: sentence\nlabel_names: [negative, positive]\nmetrics: [accuracy, f1]\n"
    )
    run_gpt1(
        "finetune",
        "--config-dir",
        str(tmp_path),
        "task=reviews",
        f"init_from={pretrained}",
        "batch_size=16",
        "trainer.max_steps=2",
        "logger=csv",
        "trainer.enable_progress_bar=false",
        f"paths.cache_dir={cache_dir}",
        cwd=tmp_path,
    )
    (run,) = (tmp_path / "outputs" / "finetune" / "reviews").iterdir()
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["task"] == "reviews" and metrics["steps"] == 2 and metrics["examples"]["validation"] == 32
    assert {"val/accuracy", "val/f1", "baseline/accuracy", "baseline/f1"} <= set(metrics)
    assert "test/accuracy" not in metrics  # no test split


@pytest.mark.parametrize("task", ["multiple_choice", "story", "sentiment", "similarity"])
def test_packed_rows_give_the_same_logits_losses_and_gradients(finetuned, cache_dir, task):
    """Sequences packed into rows without padding, and multiple choice's shared context decoded once: in eval mode
    every logit, the aux LM loss and the gradients are those of decoding each sequence on its own."""
    module, data = task_module(finetuned[task] / "checkpoints" / "last.ckpt", cache_dir)
    batch = first_val_batch(data)
    packings = ["none", "sequences"]
    if "choice_mask" in batch:  # an example with one choice, then dummy ones (as Collate pads them)
        batch["choice_mask"][0, 1:], batch["extract"][0, 1:] = False, 0
        batch["input_ids"][0, 1:], batch["targets"][0, 1:] = 0, IGNORE_INDEX
        packings.append("context")
    results = []
    for pack in packings:
        module.zero_grad()
        out = task_logits(module.model, module.head, batch, pack=pack)
        loss = module.task_loss(out.logits, batch["labels"]) + module.sequence_lm_loss(
            out.hidden, out.index, batch["targets"]
        )
        loss.backward()
        results.append((out.logits.detach(), loss.detach(), [p.grad.clone() for p in module.model.parameters()]))
    (logits, loss, grads), *packed = results
    assert "choice_mask" not in batch or torch.isneginf(logits[0, 1:]).all()
    for packed_logits, packed_loss, packed_grads in packed:
        torch.testing.assert_close(packed_logits, logits, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(packed_loss, loss, rtol=1e-5, atol=1e-6)
        for g, pg in zip(grads, packed_grads):
            torch.testing.assert_close(pg, g, rtol=1e-3, atol=1e-5)


def test_resuming_a_finetune_with_another_data_order_says_so(run_finetune, tmp_path, capsys):
    _, whole = run_finetune("sentiment", f"paths.output_dir={tmp_path / 'whole'}")
    ckpt = whole / "checkpoints" / "last.ckpt"
    run_finetune("sentiment", f"resume={ckpt}", f"paths.output_dir={tmp_path / 'same'}", "trainer.max_steps=4")
    assert "another data order" not in capsys.readouterr().err
    run_finetune(
        "sentiment", f"resume={ckpt}", f"paths.output_dir={tmp_path / 'other'}", "trainer.max_steps=4", "seed=7"
    )
    err = capsys.readouterr().err
    assert "another data order" in err and "seed: 1234 -> 7" in err


def test_each_split_is_read_once_a_run_however_often_lightning_prepares_it(
    tmp_path, tiny_ckpt, sample_data, monkeypatch
):
    """A split is resolved once a run (issue 53): its files globbed and their headers read once, its rows read and
    encoded once into the cache and kept (not loaded back); a rerun loads each from the cache once and reads no row,
    though fit, validate, test and predict each call prepare_data and setup again."""
    import gpt1.data.sources as sources
    from gpt1.tasks.encoding import EncodedSplit
    from gpt1.tasks.split import TaskSplit

    calls: Counter = Counter()

    def spy(owner: object, name: str, what) -> None:
        real = getattr(owner, name)

        def counted(*args, **kwargs):
            calls[what(*args, **kwargs)] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)

    spy(sources, "resolve_files", lambda patterns, field: ("glob", field.rpartition(".")[2]))
    spy(sources.FileSource, "columns", lambda source, path: ("header", Path(path).stem))
    spy(TaskSplit, "read", lambda split: ("read", split.id))
    spy(EncodedSplit, "encode", lambda examples, tokenizer: ("encode",))
    spy(EncodedSplit, "load", lambda path: ("load",))
    spy(TaskDataModule, "prepare_data", lambda data: ("prepare_data",))
    spy(TaskDataModule, "setup", lambda data, stage=None: ("setup", stage))

    for run in ("first", "again"):
        overrides = [
            f"paths.output_dir={tmp_path / run}",
            f"paths.cache_dir={tmp_path / 'cache'}",  # its own: the first run finds nothing encoded
            f"paths.sample_data={sample_data}",
            "task=sentiment",
            f"init_from={tiny_ckpt}",
            *FEW_FINETUNE,
            "predict=true",
        ]
        calls.clear()
        with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
            metrics = finetune(compose(config_name="finetune", overrides=overrides))
        predictions = tmp_path / run / "predictions" / "test.tsv"
        assert {"val/accuracy", "test/accuracy"} <= set(metrics) and predictions.is_file()
        stages = {key[1]: calls.pop(key) for key in list(calls) if key[0] == "setup"}
        assert stages == {"fit": 2, "validate": 1, "test": 1, "predict": 1}  # the command's, then Lightning's
        assert calls.pop(("prepare_data",)) == 5
        once = {(what, split): 1 for split in ("train", "validation", "test") for what in ("glob", "header")}
        if run == "first":
            assert calls == {
                **once,
                **{("read", split): 1 for split in ("train", "validation", "test")},
                ("encode",): 3,
            }
        else:
            assert calls == {**once, ("load",): 3}
