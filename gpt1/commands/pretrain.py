"""``gpt1 pretrain``: train the GPT-1 decoder with the language-modelling objective.

gpt1 pretrain                                    # experiment=quickstart: small model, sample books, CPU
gpt1 pretrain data=files data.train_files='[corpus/*.txt]' data.valid_files='[held_out.txt]'
gpt1 pretrain experiment=paper trainer=ddp       # the paper's recipe on every GPU of the node
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L
from omegaconf import DictConfig, OmegaConf

from gpt1.app.config_checks import check_config
from gpt1.app.objective import job_value
from gpt1.app.runner import command, holds_run_dir
from gpt1.checkpoints.format import Loaded, load_checkpoint
from gpt1.core.errors import ConfigError
from gpt1.data.pretrain_data import PretrainDataModule, unigram_perplexity
from gpt1.model.registry import build_model, config_type
from gpt1.training.console import device_words
from gpt1.training.loggers import wandb_job
from gpt1.training.module import GPT1Module
from gpt1.training.resume import resolve_resume
from gpt1.training.run import TrainingRun
from gpt1.training.trainer import check_accelerator


def load_init(path: str) -> Loaded:
    """The checkpoint to start from, with the eod token added (converted OpenAI weights have none): a new
    embedding row drawn from N(0, init_std)."""
    init = load_checkpoint(path)
    init.model.resize_token_embeddings(init.tokenizer.add_special_tokens(["eod"]))
    print(f"initialised from {path}: its model and tokenizer replace the model and tokenizer groups")
    return init


def data_module(cfg: DictConfig, init: Loaded | None) -> PretrainDataModule:
    """The corpus of ``cfg`` (a ``PretrainConfig``) with its tokenizer (``init``'s, else the tokenizer group's)."""
    return PretrainDataModule(
        OmegaConf.to_object(cfg.data),
        init.tokenizer if init else OmegaConf.to_object(cfg.tokenizer),
        n_ctx=init.model.config.n_ctx if init else cfg.model.n_ctx,
        seed=cfg.seed,
        cache_dir=cfg.paths.cache_dir,
    )


def corpus_prompt(data: PretrainDataModule, words: int = 6) -> str:
    """The first ``words`` words of the validation text (callbacks.samples.prompt=null): a prompt from the corpus."""
    head = data.valid_tokens[: 4 * words].tolist()  # (4 * words,) ids: more than enough BPE pieces for the words
    eod = data.tokenizer.specials.get("eod")
    text = data.tokenizer.decode([i for i in head if i != eod])
    return " ".join(text.split()[:words])


@holds_run_dir
def train(cfg: DictConfig) -> dict[str, Any]:
    """Pre-train as ``cfg`` (a ``PretrainConfig``) says; return the final metrics, also in <run dir>/metrics.json."""
    check_config(cfg)
    start = time.perf_counter()
    output_dir = Path(cfg.paths.output_dir)
    check_accelerator(cfg.trainer)  # before Lightning's "Seed set" line: a refused trainer prints one line only
    L.seed_everything(cfg.seed, workers=True)

    # What can be checked without the data is, before the tokenizer is trained and the corpus packed.
    model_cfg = None if cfg.init_from else OmegaConf.to_object(cfg.model)  # e.g. n_embd not a multiple of n_head
    if model_cfg is not None and config_type(model_cfg) is None:
        raise ConfigError(
            f"model: a {type(model_cfg).__name__} (model=checkpoint) is gpt1 finetune's, the architecture of the "
            "checkpoint it starts from: pre-training builds a model of its own, e.g. model=small (gpt1 pretrain --help "
            "lists the model group)"
        )
    resume = resolve_resume(cfg.resume, output_dir)
    init = load_init(cfg.init_from) if cfg.init_from else None
    data = data_module(cfg, init)
    data.prepare_data()  # trains or loads the tokenizer, tokenises and packs (cached): the model needs its vocab
    data.setup("fit")
    vocab_size = data.tokenizer.vocab_size
    model = init.model if init else build_model(replace(model_cfg, vocab_size=vocab_size))
    module = GPT1Module(model, data.tokenizer, OmegaConf.to_object(cfg.optim), cfg.lm_loss)

    callbacks = OmegaConf.to_object(cfg.callbacks)
    if callbacks.samples.prompt is None:  # a corpus of one's own: samples start from its own words
        callbacks.samples.prompt = corpus_prompt(data)
    run_name = f"{cfg.run_name}-{output_dir.name}"
    with TrainingRun(cfg, module, data, run_name=run_name, callbacks=callbacks, start=start) as run:
        print(
            f"model: {model.num_params():,} parameters, vocab {vocab_size}, context {model.config.n_ctx}; "
            f"{device_words(run.trainer)}"
        )
        valid = run.fit(resume)  # the whole (capped) validation set

        train = run.train_metrics
        metrics = {
            "train/loss": train.get("train/loss"),
            "train/ppl": train.get("train/ppl"),
            "val/loss": valid["val/loss"],
            "val/ppl": valid["val/ppl"],
            "train_loss": train.get("train/loss"),  # the keys of earlier versions, kept for their readers
            "train_ppl": train.get("train/ppl"),
            "val_loss": valid["val/loss"],
            "val_ppl": valid["val/ppl"],
            "val_unigram_ppl": unigram_perplexity(data.train_tokens, data.valid_tokens, vocab_size),
            # a global batch an update
            "tokens_seen": run.trainer.global_step * cfg.data.batch_size * model.config.n_ctx,
            "params": model.num_params(),
            "sample": run.sample,
        }
        path = run.finish(metrics)  # (SampleText logs the generations)
        if path is not None:
            print(f"validation perplexity {metrics['val_ppl']:.1f} (unigram baseline {metrics['val_unigram_ppl']:.1f})")
            print(f"checkpoint: {metrics['last_checkpoint']}\nmetrics: {path}")
    return metrics


@command("pretrain")
def main(cfg: DictConfig) -> Any:
    with wandb_job():  # one W&B run per job of a multirun
        return job_value(cfg, train(cfg))


if __name__ == "__main__":
    main()
