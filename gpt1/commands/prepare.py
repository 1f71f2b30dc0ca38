"""``gpt1 prepare``: train or load the tokenizer and pack every split of the corpus into the cache, without training:
on a cluster's login node, or in a first job, before the training jobs (which then start at once). It takes the
config groups of ``gpt1 pretrain``, so the same overrides name the same cache entries.

    gpt1 prepare                                     # the quickstart's: the sample books, a BPE of 8,192
    gpt1 prepare experiment=paper data=files data.train_files='[books/*.txt]' data.valid_fraction=0.005
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from gpt1.app.config_checks import check_config
from gpt1.app.objective import job_value
from gpt1.app.runner import command, holds_run_dir
from gpt1.commands.pretrain import data_module, load_init
from gpt1.core.figures import write_metrics


@holds_run_dir
def prepare(cfg: DictConfig) -> dict[str, Any]:
    """Prepare the corpus of ``cfg`` (a ``PretrainConfig``) in ``paths.cache_dir``; return where everything is
    (also in <run dir>/metrics.json): the tokenizer, each split's packed stream and its tokens."""
    check_config(cfg)
    start = time.perf_counter()
    init = load_init(cfg.init_from) if cfg.init_from else None
    data = data_module(cfg, init)
    data.prepare_data()  # in one process per cache entry: others started on the same cache wait for it
    data.setup("fit")
    tokenizer = data.tokenizer_path or cfg.tokenizer.path or cfg.init_from
    metrics: dict[str, Any] = {"tokenizer": str(tokenizer), "vocab_size": data.tokenizer.vocab_size}
    for split, tokens in (("train", data.train_tokens), ("valid", data.valid_tokens)):
        metrics[f"{split}_tokens"] = 0 if tokens is None else len(tokens)
        path = data.paths.get(split, data.paths["train"])  # valid_fraction: the end of the training stream
        metrics[f"{split}_path"] = None if tokens is None else str(path)
    metrics["wall_time_s"] = round(time.perf_counter() - start, 1)
    path = write_metrics(Path(cfg.paths.output_dir), metrics)
    print(f"tokenizer: {tokenizer} ({metrics['vocab_size']} ids)")
    for split in ("train", "valid"):
        if metrics[f"{split}_path"] is not None:
            print(f"{split}: {metrics[f'{split}_tokens']:,} tokens in {metrics[f'{split}_path']}")
    print(f"metrics: {path}")
    return metrics


@command("prepare")
def main(cfg: DictConfig) -> Any:
    return job_value(cfg, prepare(cfg))


if __name__ == "__main__":
    main()
