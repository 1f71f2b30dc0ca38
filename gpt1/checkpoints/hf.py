"""Import and export of Hugging Face ``openai-gpt`` checkpoints, in pure torch: conversion needs no transformers.

An HF directory, as ``save_pretrained`` writes it, holds ``config.json``, ``model.safetensors`` (or the older
``pytorch_model.bin``) and the tokenizer (``tokenizer.json`` and/or ``vocab.json`` + ``merges.txt``; see
``gpt1.text.tokenizer.load_tokenizer`` for which one is read, ``hf_tokenizer_json`` for what is written). The gpt1
model keeps HF's parameter names, so the mapping is small: strip or add the ``transformer.`` prefix, transpose the
``Conv1D`` weights (stored (in, out), ours (out, in)), drop the buffers and the tied ``lm_head``. It lives in
``from_hf_state_dict`` / ``to_hf_state_dict`` and ``config_from_hf`` / ``config_to_hf``, used by both directions.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tokenizers
import torch
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes
from tokenizers import Regex, decoders
from torch import nn

from gpt1.checkpoints.format import empty_model, load_checkpoint, read_checkpoint, save_checkpoint, state_mismatch
from gpt1.checkpoints.hub import hub_snapshot, is_hub_name
from gpt1.core.errors import CheckpointError, fields_out_of_bounds
from gpt1.core.file_kinds import describe
from gpt1.core.files import atomic_file
from gpt1.model.decoder import GPT, GPTConfig
from gpt1.model.heads import MultipleChoiceHead
from gpt1.text.openai_text import END_OF_WORD, approximate_in_tokenizers
from gpt1.text.tokenizer import (
    CLEANUP,
    HF_FILES,
    ORIGINAL_FILES,
    SPECIAL_TOKENS,
    Tokenizer,
    gpt1_pipeline,
    load_tokenizer,
)

HF_PREFIX = "transformer."
HF_LM_HEAD = "lm_head.weight"
CONV1D = re.compile(r"h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight")
"""GPT parameters that HF stores in Conv1D's (in, out) layout."""
BUFFERS = re.compile(r"h\.\d+\.attn\.bias|position_ids")
"""HF buffers (the 4-D causal mask, the position ids) that older checkpoints saved beside the weights."""
AFN_TO_ACTIVATION = {"gelu": "gelu_tanh", "gelu_new": "gelu_tanh", "relu": "relu"}  # HF's "gelu" is gelu_new
ACTIVATION_TO_AFN = {"gelu_tanh": "gelu", "relu": "relu"}
INTACT = "pass an intact HF model directory"
"""What to do about a model directory that does not read."""
HF_FIELDS = {  # GPTConfig's field -> config.json's, in both directions (afn and n_inner apart)
    "vocab_size": "vocab_size", "n_ctx": "n_positions", "n_embd": "n_embd", "n_layer": "n_layer", "n_head": "n_head",
    "resid_pdrop": "resid_pdrop", "embd_pdrop": "embd_pdrop", "attn_pdrop": "attn_pdrop",
    "layer_norm_eps": "layer_norm_epsilon", "init_std": "initializer_range",
}  # fmt: skip
HF_SAMPLING: dict[str, Any] = {"do_sample": True, "temperature": 1.0, "top_k": 40}
"""``gpt1 generate``'s sampling defaults (GenerateConfig), as generation_config.json gives them to ``generate``."""
HF_DEFAULTS: dict[str, Any] = {  # OpenAIGPTConfig's defaults, for config.json files that leave fields out
    "vocab_size": 40478, "n_positions": 512, "n_embd": 768, "n_layer": 12, "n_head": 12, "afn": "gelu",
    "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-5, "initializer_range": 0.02,
}  # fmt: skip


def config_from_hf(hf: Mapping[str, Any]) -> GPTConfig:
    """An HF ``openai-gpt`` config.json dict -> GPTConfig (HF has no n_inner: its MLP is always 4 x n_embd)."""
    if hf.get("model_type", "openai-gpt") != "openai-gpt":
        raise CheckpointError(f"config.json has model_type {hf['model_type']!r}: only 'openai-gpt' checkpoints import")
    hf = {**HF_DEFAULTS, **hf}
    if hf["afn"] not in AFN_TO_ACTIVATION:
        raise CheckpointError(
            f"config.json afn={hf['afn']!r} has no gpt1 equivalent (one of {sorted(AFN_TO_ACTIVATION)})"
        )
    return GPTConfig(
        **{ours: hf[theirs] for ours, theirs in HF_FIELDS.items()},
        n_inner=4 * hf["n_embd"],
        activation=AFN_TO_ACTIVATION[hf["afn"]],
    )


def config_to_hf(config: GPTConfig) -> dict[str, Any]:
    """GPTConfig -> an HF ``openai-gpt`` config.json dict; refuses what OpenAIGPTModel cannot express."""
    if config.n_inner != 4 * config.n_embd:
        raise CheckpointError(
            f"model.n_inner={config.n_inner} is not 4 x n_embd={4 * config.n_embd}: HF's openai-gpt cannot express it"
        )
    if config.activation not in ACTIVATION_TO_AFN:
        raise CheckpointError(
            f"model.activation={config.activation!r} has no HF openai-gpt equivalent "
            f"(exportable: {sorted(ACTIVATION_TO_AFN)})"
        )
    return {
        "architectures": ["OpenAIGPTLMHeadModel"],
        "model_type": "openai-gpt",
        **{theirs: getattr(config, ours) for ours, theirs in HF_FIELDS.items()},
        "afn": ACTIVATION_TO_AFN[config.activation],
        "tie_word_embeddings": True,
    }


def _maybe_transpose(key: str, tensor: torch.Tensor) -> torch.Tensor:
    # Transposing is its own inverse, so both directions share this; contiguous because safetensors requires it.
    return tensor.t().contiguous() if CONV1D.fullmatch(key) else tensor


def from_hf_state_dict(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """HF weights (``transformer.``-prefixed or not) -> GPT parameter names and layouts; buffers and the tied
    ``lm_head`` are dropped (the latter only if it equals the token embedding: GPT-1 has no untied head)."""
    out = {}
    for key, tensor in state.items():
        name = key.removeprefix(HF_PREFIX)
        if name != HF_LM_HEAD and not BUFFERS.fullmatch(name):
            out[name] = _maybe_transpose(name, tensor)
    head = state.get(HF_LM_HEAD)
    if head is not None and not torch.equal(head, out.get("tokens_embed.weight", torch.empty(0))):
        raise CheckpointError(
            f"{HF_LM_HEAD} differs from tokens_embed.weight: GPT-1's LM head is tied to the embedding"
        )
    return out


def to_hf_state_dict(state: Mapping[str, torch.Tensor], config: GPTConfig) -> dict[str, torch.Tensor]:
    """GPT weights -> HF's LM-head-model layout as save_pretrained writes it: ``transformer.``-prefixed, Conv1D
    weights (in, out), the token embedding cut to the real vocabulary, the tied ``lm_head`` left out."""
    out = {}
    for name, tensor in state.items():
        if name == "tokens_embed.weight":
            tensor = tensor[: config.vocab_size].contiguous()  # rows added by pad_vocab_to_multiple are not tokens
        out[HF_PREFIX + name] = _maybe_transpose(name, tensor)
    return out


HF_MC_HEAD = "multiple_choice_head."
HF_MC_SUMMARY = "multiple_choice_head.summary."
MC_HEAD_LINEAR = "linear."
"""Where HF's multiple-choice projection lands in gpt1's ``MultipleChoiceHead`` (its ``linear``)."""
MC_HEAD_NAME = "multiple_choice"
"""The imported head's name among a checkpoint's heads: fine-tuning names its head by task type."""
HF_MC_SUMMARY_CONFIG: dict[str, Any] = {
    "summary_type": "cls_index", "summary_use_proj": True, "summary_proj_to_labels": True, "summary_activation": None,
}  # fmt: skip
"""The settings of HF's sequence summary under which it is gpt1's MultipleChoiceHead: the hidden state at the
extract token, a Linear(C, 1), no activation (OpenAIGPTConfig's defaults)."""


def is_double_heads(state: Mapping[str, torch.Tensor]) -> bool:
    """Whether HF weights come from an ``OpenAIGPTDoubleHeadsModel`` (they hold a multiple-choice head)."""
    return any(key.startswith(HF_MC_HEAD) for key in state)


def import_double_heads(
    state: Mapping[str, torch.Tensor], hf_config: Mapping[str, Any] | None = None
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """HF ``OpenAIGPTDoubleHeadsModel`` weights -> (decoder weights as ``from_hf_state_dict`` gives them, the
    multiple-choice head's weights under ``MultipleChoiceHead``'s names: ``linear.weight`` (1, C), ``linear.bias``
    (1,)). ``hf_config`` (its config.json), when given, is checked to describe that head.

    transformers 5 saves the DoubleHeads model's tied embedding as ``lm_head.weight`` only; it is the token
    embedding then."""
    if hf_config is not None:
        differ = {k: hf_config.get(k, v) for k, v in HF_MC_SUMMARY_CONFIG.items() if hf_config.get(k, v) != v}
        if differ:
            raise CheckpointError(
                f"config.json's multiple-choice head has {differ}: gpt1's head needs {HF_MC_SUMMARY_CONFIG}"
            )
    hf_head = {k: v for k, v in state.items() if k.startswith(HF_MC_HEAD)}
    head = {MC_HEAD_LINEAR + k.removeprefix(HF_MC_SUMMARY): v for k, v in hf_head.items()}
    if set(head) != {"linear.weight", "linear.bias"} or head["linear.weight"].size(0) != 1:
        shapes = {k: tuple(v.shape) for k, v in hf_head.items()}
        raise CheckpointError(f"the multiple-choice head is not a Linear(n_embd, 1) with a bias: it holds {shapes}")
    decoder = {k: v for k, v in state.items() if not k.startswith(HF_MC_HEAD)}
    embedding = HF_PREFIX + "tokens_embed.weight"
    if embedding not in decoder and HF_LM_HEAD in decoder:
        decoder[embedding] = decoder[HF_LM_HEAD]
    return from_hf_state_dict(decoder), head


def _read_hf_weights(src: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """The weights of the HF folder ``src``, and the file they came from."""
    if (src / "model.safetensors").is_file():
        try:
            return load_file(src / "model.safetensors"), src / "model.safetensors"
        except Exception as e:  # safetensors' own error: cut short, or another kind of file
            kind = describe(src / "model.safetensors")
            found = f"is {kind}" if kind != "a safetensors file" else f"cannot be read ({e})"
            raise CheckpointError(f"{src}/model.safetensors {found}: {INTACT}") from e
    if (src / "pytorch_model.bin").is_file():
        return read_checkpoint(src / "pytorch_model.bin"), src / "pytorch_model.bin"  # as data: one line if refused
    raise CheckpointError(
        f"{src} has neither model.safetensors nor pytorch_model.bin: pass a directory written by save_pretrained "
        "(a sharded checkpoint must be merged first)"
    )


def _read_tokenizer(src: Path, tokenizer: str | os.PathLike | None) -> Tokenizer:
    if tokenizer is not None:
        return load_tokenizer(tokenizer)
    if any((src / name).is_file() for name in ("tokenizer.json", *HF_FILES, *ORIGINAL_FILES)):
        return load_tokenizer(src)
    raise CheckpointError(
        f"{src} has no tokenizer (tokenizer.json, or vocab.json + merges.txt): pass the tokenizer's path explicitly"
    )


def hf_tokenizer_json(tokenizer: Tokenizer) -> str:
    """``tokenizer`` as a tokenizer.json that transformers' ``PreTrainedTokenizerFast`` runs as it is: the BPE with
    the "gpt1" pipeline (for an "openai" tokenizer, ``approximate_in_tokenizers``: ftfy and spaCy cannot run there),
    ``hf_decoder``, the special tokens as added tokens with their ids
    (``SPECIAL_TOKENS``' names). ``load_tokenizer`` reads it back with gpt1's own decoder."""
    bpe = tokenizers.Tokenizer.from_str(tokenizer.bpe.to_str())
    (approximate_in_tokenizers if tokenizer.pipeline == "openai" else gpt1_pipeline)(bpe)
    bpe.decoder = hf_decoder()
    spec = json.loads(bpe.to_str())
    spec["added_tokens"] = [
        {"id": i, "content": SPECIAL_TOKENS[role], "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for role, i in sorted(tokenizer.specials.items(), key=lambda item: item[1])
    ]  # fmt: skip
    return json.dumps(spec, ensure_ascii=False)


def hf_decoder() -> decoders.Decoder:
    """The exported tokenizer's decoder: the text that ids add after a word, as ``Tokenizer.decode`` spells it in
    context, so that a continuation decoded on its own joins what came before. transformers' text-generation
    pipeline (5.x) decodes the new tokens alone and appends them to the prompt as typed; with an end-of-word BPE the
    space between the prompt's last word and the next lives in that last word's ``</w>``, so a decoder that writes
    spaces only between the tokens it is given glues them ("she saidshe"). This one opens with that space, then
    cleans up as ``Tokenizer.decode`` does (``CLEANUP``, over the whole text): ["she</w>", "said</w>"] -> " she
    said", [".</w>"] -> ".", ["n", "'</w>", "t</w>"] -> " n't". Hence ``decode(ids)`` is gpt1's text of ids with
    one leading space before a word."""
    return decoders.Sequence(
        [
            decoders.Fuse(),  # one string, so that the replacements see across tokens
            decoders.Replace(Regex(r"\A"), " "),
            decoders.Replace(Regex(f"{END_OF_WORD}\\z"), ""),
            decoders.Replace(END_OF_WORD, " "),
            *(decoders.Replace(old, new) for old, new in CLEANUP),
        ]
    )


def hf_special_tokens(tokenizer: Tokenizer) -> dict[str, str]:
    """The tokenizer_config.json entries that declare a checkpoint's end-of-document token as the end-of-text
    (``eos_token``) and beginning-of-text (``bos_token``) token: pre-training puts it between documents, so it both
    ends one and opens the next (as GPT-2's <|endoftext|>), and an empty generation prompt is it. transformers'
    generation stops at eos; lm-evaluation-harness opens every context with bos (its prefix token). Empty for a
    checkpoint without one (OpenAI's weights as converted: the original has no such token)."""
    if "eod" not in tokenizer.specials:
        return {}
    return {"bos_token": SPECIAL_TOKENS["eod"], "eos_token": SPECIAL_TOKENS["eod"]}


def hf_generation_config(tokenizer: Tokenizer, config: GPTConfig) -> dict[str, Any]:
    """generation_config.json: what ``generate`` (``pipeline("text-generation")``) does when given nothing: stop
    at ``n_ctx`` tokens in all (HF's openai-gpt has no positions past them, and no sliding window) or at the end of a
    document, sampling as ``gpt1 generate`` does by default (``HF_SAMPLING``)."""
    eod = (
        {f"{role}_token_id": tokenizer.specials["eod"] for role in ("bos", "eos", "pad")}
        if hf_special_tokens(tokenizer)
        else {}
    )
    return {**eod, "max_length": config.n_ctx, **HF_SAMPLING}


def import_hf(src: str | os.PathLike, dst: str | os.PathLike, tokenizer: str | os.PathLike | None = None) -> None:
    """Convert the HF ``openai-gpt`` directory ``src``, or the hub model of that name (``openai-community/openai-gpt``:
    ``hub_snapshot``), into the gpt1 checkpoint file ``dst``.

    The tokenizer comes from ``tokenizer`` (a tokenizer JSON file, or a directory: see ``load_tokenizer``; OpenAI's
    vocab.json + merges.txt get the original "openai" pipeline) if given, else from ``src``. No special tokens are
    added: the model stays exactly the original, and consumers that need them grow the embeddings later
    (GPT.resize_token_embeddings). An ``OpenAIGPTDoubleHeadsModel``'s multiple-choice head becomes the checkpoint's
    ``MC_HEAD_NAME`` head.
    """
    src = hub_snapshot(str(src)) if is_hub_name(str(src)) else Path(src)
    if not (src / "config.json").is_file():
        raise CheckpointError(f"{src}/config.json does not exist: pass a Hugging Face openai-gpt model directory")
    try:
        hf_config = json.loads((src / "config.json").read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{src}/config.json is not valid JSON ({e}): {INTACT}") from e
    if not isinstance(hf_config, dict):
        kind = type(hf_config).__name__
        raise CheckpointError(f"{src}/config.json holds {kind}, not an object of the model's fields: {INTACT}")
    try:
        config = config_from_hf(hf_config)
    except (TypeError, ValueError, KeyError) as e:  # a field of the wrong type, or out of range
        raise CheckpointError(
            f"{src}/config.json describes no openai-gpt model ({type(e).__name__}: {e}): {INTACT}"
        ) from e
    outside = fields_out_of_bounds(config)
    if outside is not None:
        raise CheckpointError(f"{src}/config.json describes no openai-gpt model ({outside}): {INTACT}")
    weights, weights_file = _read_hf_weights(src)
    heads = None
    if is_double_heads(weights):
        state, head_state = import_double_heads(weights, hf_config)
        heads = nn.ModuleDict({MC_HEAD_NAME: MultipleChoiceHead(config.n_embd)})
        heads[MC_HEAD_NAME].load_state_dict(head_state)
    else:
        state = from_hf_state_dict(weights)
    tok = _read_tokenizer(src, tokenizer)

    model = empty_model(GPT, config)
    expected = model.state_dict().keys()
    missing, unexpected = sorted(expected - state.keys()), sorted(state.keys() - expected)
    if missing or unexpected:  # e.g. a checkpoint of another architecture, or one with other heads (not imported)
        raise CheckpointError(
            f"{weights_file} does not hold the openai-gpt model {src}/config.json describes: {len(missing)} weights "
            f"missing {missing[:5]}, {len(unexpected)} unexpected {unexpected[:5]}: {INTACT}"
        )
    rows = state["tokens_embed.weight"].size(0)
    if rows != config.vocab_size:
        raise CheckpointError(
            f"{weights_file}: tokens_embed.weight has {rows} rows but config.json vocab_size={config.vocab_size}: "
            + INTACT
        )
    if tok.vocab_size != config.vocab_size:
        raise CheckpointError(
            f"the tokenizer ({tokenizer or src}) has {tok.vocab_size} tokens but the model in {src} "
            f"{config.vocab_size}: pass the tokenizer the model was trained with"
        )
    misfit = state_mismatch(state, model.state_dict())
    if misfit:
        raise CheckpointError(
            f"{weights_file} does not hold the openai-gpt model {src}/config.json describes: {misfit}: {INTACT}"
        )
    model.load_state_dict(state, assign=True)
    save_checkpoint(dst, model, tok, heads=heads)


def export_hf(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Write the gpt1 checkpoint ``src`` as an HF ``openai-gpt`` directory ``dst`` that transformers' Auto classes and
    pipelines load with their defaults: config.json, model.safetensors, generation_config.json
    (``hf_generation_config``), tokenizer.json (``hf_tokenizer_json``) and tokenizer_config.json (a
    ``PreTrainedTokenizerFast``, the end-of-document token declared as eos and bos: ``hf_special_tokens``) and, for
    the "openai" pipeline, OpenAI's vocab.json + merges.txt, which ``load_tokenizer`` reads back with the original
    pipeline (a trained "gpt1" tokenizer gets no such files: read back, they would select the "openai" pipeline)."""
    loaded = load_checkpoint(src)
    if not isinstance(loaded.model, GPT):
        raise CheckpointError(f"{src} holds the LSTM baseline: only GPT-1 decoders have an HF openai-gpt form")
    config = loaded.model.config
    hf_config = config_to_hf(config)  # before writing anything: an unexportable config leaves no half directory
    dst = Path(dst)
    if dst.exists() and not dst.is_dir():
        raise CheckpointError(
            f"{dst} is a file: to-hf writes a directory (config.json, model.safetensors, ...): give a directory's path"
        )
    dst.mkdir(parents=True, exist_ok=True)
    tokens = hf_special_tokens(loaded.tokenizer)
    ids = {f"{role}_token_id": loaded.tokenizer.specials["eod"] for role in ("bos", "eos") if tokens}
    (dst / "config.json").write_text(json.dumps({**hf_config, **ids}, indent=2) + "\n")
    generation = hf_generation_config(loaded.tokenizer, config)
    (dst / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    weights = safetensors_bytes(to_hf_state_dict(loaded.model.state_dict(), config), metadata={"format": "pt"})
    with atomic_file(dst / "model.safetensors", needed=len(weights)) as f:  # (save_file's: 0600, torn on a full disk)
        f.write(weights)
    (dst / "tokenizer.json").write_text(hf_tokenizer_json(loaded.tokenizer), encoding="utf-8")
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",  # tokenizer.json as it is (openai-gpt's class rebuilds BERT's)
        "model_max_length": config.n_ctx,
        "clean_up_tokenization_spaces": False,  # the decoder cleans up (hf_decoder)
        **tokens,
    }
    (dst / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
    if loaded.tokenizer.pipeline == "openai":
        loaded.tokenizer.bpe.model.save(str(dst))  # vocab.json + merges.txt
