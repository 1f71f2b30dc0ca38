"""``gpt1 evaluate``: token perplexity of a checkpoint on a corpus.

    gpt1 evaluate ckpt=outputs/quickstart/<run>/checkpoints/last.ckpt               # the sample books' held-out book
    gpt1 evaluate ckpt=model.ckpt data.valid_files='[corpus/test/*.txt]'
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import hydra
import lightning as L
from omegaconf import DictConfig, OmegaConf

from gpt1.checkpoint import load_checkpoint
from gpt1.config import OptimConfig
from gpt1.data.pretrain import PretrainDataModule
from gpt1.module import GPT1Module
from gpt1.run import build_trainer, write_metrics
from gpt1.tokenizer import SPECIAL_TOKENS


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Perplexity of ``cfg.ckpt`` on the validation data of ``cfg.data``; also written to <run dir>/metrics.json."""
    output_dir = Path(cfg.paths.output_dir)
    L.seed_everything(cfg.seed)
    loaded = load_checkpoint(cfg.ckpt)
    data_cfg = replace(OmegaConf.to_object(cfg.data), train_files=[], hf_train_split=None)  # nothing to train on
    if data_cfg.separate_documents and loaded.tokenizer.token_to_id(SPECIAL_TOKENS["eod"]) is None:
        data_cfg.separate_documents = False  # e.g. converted OpenAI weights: their vocab has no separator
    data = PretrainDataModule(
        data_cfg, loaded.tokenizer, n_ctx=loaded.model.config.n_ctx, seed=cfg.seed, cache_dir=cfg.paths.cache_dir
    )
    module = GPT1Module(loaded.model, loaded.tokenizer, OptimConfig())
    trainer = build_trainer(cfg.trainer, output_dir)
    result = trainer.test(module, datamodule=data, verbose=False)[0]
    metrics = {
        "ckpt": str(cfg.ckpt),
        "loss": result["test/loss"],
        "ppl": result["test/ppl"],
        "tokens": len(data.test_dataloader().dataset) * loaded.model.config.n_ctx,  # every window scores n_ctx
    }
    write_metrics(output_dir, metrics)
    print(f"perplexity {metrics['ppl']:.2f} (loss {metrics['loss']:.4f}) over {metrics['tokens']:,} tokens")
    return metrics


@hydra.main(version_base="1.3", config_path="pkg://gpt1.conf", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    evaluate(cfg)


if __name__ == "__main__":
    main()
