"""HF's openai-gpt beside gpt1's in ``gpt1 bench --compare hf``, holding the same weights, run as HF's users run it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gpt1.model.decoder import GPT
from gpt1.tools.bench_measure import median_seconds, train_step


def hf_twin(model: GPT, double_heads: bool = False) -> torch.nn.Module:
    """HF's OpenAIGPT(LMHead|DoubleHeads)Model holding exactly ``model``'s weights."""
    import transformers

    from gpt1.checkpoints.hf import config_to_hf, to_hf_state_dict

    cls = transformers.OpenAIGPTDoubleHeadsModel if double_heads else transformers.OpenAIGPTLMHeadModel
    hf = cls(transformers.OpenAIGPTConfig(**config_to_hf(model.config)))
    # the loss HF falls back to for this class, named so that it does not warn on every run
    hf.loss_type = "ForCausalLM"
    state = to_hf_state_dict(model.state_dict(), model.config)
    missing, unexpected = hf.load_state_dict(state, strict=False)
    assert not unexpected and all(k.startswith(("lm_head", "multiple_choice_head")) for k in missing), missing
    return hf.to(next(model.parameters()).device)


def hf_multiple_choice_step(mc_model: GPT, batch: dict[str, torch.Tensor], autocast: Any) -> Callable[[], None]:
    """HF's multiple-choice training step, as its users run it: OpenAIGPTDoubleHeadsModel with identical weights on
    the same padded (B, K, T) batch, mc loss + 0.5 x its LM loss (HF scores the LM head at every position, padding
    included, then masks the loss)."""
    dh = hf_twin(mc_model, double_heads=True).train()
    lm_labels = torch.where(batch["choice_mask"][..., None], batch["input_ids"], -100)
    lm_labels[..., 1:] = lm_labels[..., 1:].masked_fill(batch["targets"][..., :-1] == -100, -100)

    def dh_loss() -> torch.Tensor:
        ids, extract, labels = batch["input_ids"], batch["extract"], batch["labels"]
        out = dh(input_ids=ids, mc_token_ids=extract, labels=lm_labels, mc_labels=labels)
        return out.mc_loss + 0.5 * out.loss

    return train_step(dh, dh_loss, autocast)


def hf_generation(hf: torch.nn.Module, prompt_tokens: int, new_tokens: int, device: torch.device) -> dict[str, Any]:
    """HF ``generate``'s greedy ms/token at batch 1 after a random prompt of ``prompt_tokens`` (gpt1's), one timed run
    of ``new_tokens`` after a short untimed one: HF's openai-gpt has no KV cache, so each token re-runs the whole
    prefix and one long generation takes a minute on a CPU."""
    prompt = torch.randint(0, hf.config.vocab_size, (1, prompt_tokens), device=device)
    generate = lambda n: hf.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)  # noqa: E731
    generate(2)
    hf_s = median_seconds(lambda: generate(new_tokens), 0, 1, device)
    return {"generate_batch1_ms_per_token": 1e3 * hf_s / new_tokens}
