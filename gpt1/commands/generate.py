"""``gpt1 generate``: sample text from a checkpoint.

gpt1 generate ckpt=PATH prompt="it is a truth universally acknowledged" temperature=0.8 top_k=40
gpt1 generate ckpt=PATH prompt="..." temperature=0 max_new_tokens=50     # greedy
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from gpt1.app.config_checks import check_config
from gpt1.app.devices import resolve_device
from gpt1.app.objective import job_value
from gpt1.app.runner import command, holds_run_dir
from gpt1.checkpoints.format import load_checkpoint
from gpt1.cpu.decoding import decode_in_steps
from gpt1.cpu.layers import use_cpu_layers
from gpt1.text.tokenizer import prompt_ids


@holds_run_dir
def generate(cfg: DictConfig) -> list[str]:
    """``cfg.num_samples`` continuations of ``cfg.prompt``, printed and written to <run dir>/samples.txt."""
    check_config(cfg)
    device = resolve_device(cfg.device)
    # one sequence with the cache decodes token by token: its weights stored as CPU decoding reads them fastest
    decoding = device.type == "cpu" and cfg.num_samples == 1 and cfg.use_cache
    loaded = load_checkpoint(cfg.ckpt, map_location=device, decoding=decoding)
    tokenizer, model = loaded.tokenizer, loaded.model.to(device)
    if device.type == "cpu":
        use_cpu_layers(model)
    decode_in_steps(model)  # one fp32 sequence token by token, without module calls
    prompt = prompt_ids(tokenizer, cfg.prompt)  # an empty prompt: the eod token, as at a document's start
    generator = torch.Generator(device).manual_seed(cfg.seed)
    idx = torch.tensor([prompt] * cfg.num_samples, device=device)  # (num_samples, T)
    out = model.generate(idx, cfg.max_new_tokens, cfg.temperature, cfg.top_k, cfg.use_cache, generator)
    texts = [tokenizer.decode(row.tolist()) for row in out]
    for i, text in enumerate(texts):
        print(f"--- sample {i} ---\n{text}")
    Path(cfg.paths.output_dir).mkdir(parents=True, exist_ok=True)
    (Path(cfg.paths.output_dir) / "samples.txt").write_text("\n\n".join(texts) + "\n")
    return texts


@command("generate")
def main(cfg: DictConfig) -> Any:
    return job_value(cfg, generate(cfg))


if __name__ == "__main__":
    main()
