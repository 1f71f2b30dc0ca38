"""The gpt1 checkpoint: one torch file that carries the weights, the model's type and config, the tokenizer, and
for fine-tuned models the task heads and the task spec.

Lightning's checkpoints (``gpt1 pretrain``, ``gpt1 finetune``) and ``save_checkpoint``'s (``gpt1 convert from-hf``)
share the layout, so every command accepts either:

    {"state_dict": {"model.<parameter>": tensor, ..., "heads.<head name>.<parameter>": tensor, ...},
     "gpt1": {"format": 2, "model_type": "gpt" | "lstm", "model_config": {...}, "tokenizer": Tokenizer.to_str(),
              "task": {...TaskConfig...} | None},
     ...Lightning's own keys (global_step, optimizer and loop states), if any}

Format 1 (no model_type: a GPT; no task; the tokenizer a plain ``tokenizers`` JSON) still loads.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import pickle
import re
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.overrides import TorchFunctionMode

from gpt1.core.errors import CheckpointError, fields_out_of_bounds
from gpt1.core.file_kinds import describe
from gpt1.core.files import atomic_file
from gpt1.cpu.decoding import store_for_decoding
from gpt1.model.registry import MODEL_TYPES, model_type
from gpt1.text.tokenizer import Tokenizer

FORMAT = 2
READABLE_FORMATS = (1, 2)
MODEL_PREFIX = "model."
HEADS_PREFIX = "heads."


class _NoInit(TorchFunctionMode):
    """Leaves a tensor as it is where a module's init would fill it (``torch.nn.init``'s functions): on the meta device
    there is nothing to fill, and torch's meta ``normal_`` imports its compiler (1-2 s) the first time."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__module__", None) == "torch.nn.init":
            return args[0] if args else kwargs["tensor"]  # each fills its first argument, ``tensor``, and returns it
        return func(*args, **(kwargs or {}))


def empty_model(cls: type[nn.Module], config: Any) -> nn.Module:
    """``cls(config)`` with its weights on the meta device, undrawn: for a state dict to be assigned to it
    (``load_state_dict(state, assign=True)``)."""
    with torch.device("meta"), _NoInit():
        return cls(config)


def metadata(model: nn.Module, tokenizer: Tokenizer, task: Any = None) -> dict[str, Any]:
    """The "gpt1" block of a checkpoint: what rebuilds the model, its tokenizer and its task.

    task: the ``TaskConfig`` (a dataclass, DictConfig or mapping; stored as a plain dict) of a fine-tuned model.
    """
    return {
        "format": FORMAT,
        "model_type": model_type(model),
        "model_config": asdict(model.config),
        "tokenizer": tokenizer.to_str(),
        "task": None if task is None else _plain(task),
    }


def _plain(value: Any) -> Any:
    """Dataclasses, DictConfigs and mappings as dicts, enums as their values: a checkpoint holds plain data."""
    if isinstance(value, DictConfig):
        value = OmegaConf.to_container(value, resolve=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value.value if isinstance(value, enum.Enum) else value


def atomic_save(obj: Any, path: str | os.PathLike) -> None:
    """torch.save that never leaves a torn checkpoint, with the umask's mode (see ``gpt1.core.files.atomic_file``)."""
    with atomic_file(path, needed=_tensor_bytes(obj)) as f:
        torch.save(obj, f)


def _tensor_bytes(obj: Any) -> int:
    """The bytes of the tensors in ``obj`` (dicts and lists walked): about what torch.save writes of it."""
    if isinstance(obj, torch.Tensor):
        return obj.untyped_storage().nbytes()
    if isinstance(obj, Mapping):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    tokenizer: Tokenizer,
    heads: Optional[nn.Module] = None,
    task: Any = None,
) -> None:
    """Write a standalone gpt1 checkpoint of ``model`` (a ``gpt1.model.registry.MODEL_TYPES`` model), its
    ``tokenizer`` and, for a fine-tuned model, its ``heads`` (a module whose state dict is saved under "heads.", e.g.
    an ``nn.ModuleDict``) and ``task`` spec."""
    if tokenizer.vocab_size != model.config.vocab_size:
        raise ValueError(
            f"tokenizer has {tokenizer.vocab_size} tokens but the model {model.config.vocab_size}: "
            "resize the model's embeddings first (resize_token_embeddings)"
        )
    state = {MODEL_PREFIX + k: v for k, v in model.state_dict().items()}
    if heads is not None:
        state.update({HEADS_PREFIX + k: v for k, v in heads.state_dict().items()})
    atomic_save({"state_dict": state, "gpt1": metadata(model, tokenizer, task)}, path)


@dataclass
class Loaded:
    """What a gpt1 checkpoint holds."""

    model: nn.Module
    """The model (a ``gpt1.model.registry.MODEL_TYPES`` model), weights loaded, in eval mode."""
    tokenizer: Tokenizer
    raw: dict[str, Any]
    """The whole checkpoint dict, for callers that need more (Lightning's ``global_step``, loop states)."""
    task: Optional[dict[str, Any]] = None
    """The task spec of a fine-tuned model (a ``TaskConfig`` as a plain dict); None for a language model."""
    heads: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)
    """The task heads' weights ("<head name>.<parameter>", the "heads." prefix stripped): load them with
    ``module.heads.load_state_dict(loaded.heads)``. Empty for a language model."""


def read_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu", mmap: bool = False) -> Any:
    """The object saved in ``path`` (any torch file), read as data: tensors, numbers, strings and containers only
    (``torch.load(weights_only=True)``), so that nothing in the file can run code. A ``CheckpointError`` naming
    ``path`` if it is missing, cannot be read (truncated, corrupt, not a torch file) or holds any other type (named in
    the line). mmap: map the tensors instead of reading them (cheap, for a look at the metadata, or for tensors to be
    copied into another layout)."""
    path = Path(path)
    if (path / "config.json").is_file():  # e.g. OpenAI's weights as Hugging Face keeps them
        raise CheckpointError(
            f"checkpoint {path} is a Hugging Face model directory, not a gpt1 checkpoint: {hf_advice(path)}"
        )
    if path.is_dir():  # e.g. a run directory: name the checkpoints in it
        found = [*sorted(path.glob("checkpoints/*.ckpt")), *sorted(path.glob("*.ckpt"))]
        best = next((p for p in found if p.name == "last.ckpt"), found[-1] if found else None)
        names = [str(p.relative_to(path)) for p in found]
        raise CheckpointError(
            f"checkpoint {path} is a directory: pass one of its checkpoints, e.g. {best} (it holds "
            f"{', '.join(names[:8])}{', ...' if len(names) > 8 else ''})"
            if found
            else f"checkpoint {path} is a directory with no .ckpt file in it or in its checkpoints/: pass a .ckpt file"
        )
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist: pass the path of a .ckpt file")
    try:
        try:
            return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
        except Exception as e:
            if not mmap or isinstance(e, pickle.UnpicklingError):
                raise
            return torch.load(path, map_location=map_location, weights_only=True)  # e.g. a pre-zip torch file
    except Exception as e:
        refused = REFUSED.search(str(e)) if isinstance(e, pickle.UnpicklingError) else None
        if refused:
            raise CheckpointError(
                f"{path} holds a {refused.group(1)} object: refused, nothing of it was run (gpt1 reads a checkpoint "
                "as data: tensors, numbers, strings; loading other types can run code from the file): use a "
                "checkpoint written by gpt1, or, if you trust the file's source, save its tensors as plain data"
            ) from None
        kind = describe(path)
        if not kind.startswith("a torch checkpoint"):  # e.g. a CSV, an image, a pickle: named for what it is
            raise CheckpointError(
                f"{path} is {kind}, not a checkpoint: pass a .ckpt file that gpt1 wrote (gpt1 pretrain, gpt1 "
                "finetune, gpt1 convert from-hf)"
            ) from None
        detail = _one_line(e, 200).split(". ")[0].rstrip(".")  # torch's first sentence (its others are advice)
        raise CheckpointError(
            f"{path} cannot be read as a checkpoint (truncated or corrupt? {detail}): use an intact copy, e.g. "
            "another checkpoint of its run"
        ) from e


HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
"""The weights file of a Hugging Face model directory (beside its config.json), as ``gpt1.checkpoints.hf`` reads it."""


def hf_advice(src: Path) -> str:
    """What to do with the Hugging Face model directory ``src`` given where a gpt1 checkpoint goes: the conversion
    that writes one beside it, to give in its place."""
    dst = shlex.quote(str(src.parent / f"{src.resolve().name}.ckpt"))
    return f"convert it first, gpt1 convert from-hf {shlex.quote(str(src))} {dst}, then give {dst} in its place"


REFUSED = re.compile(r"GLOBAL ([\w.]+)")
"""The type that torch's weights-only unpickler refused, in its message ("Unsupported global: GLOBAL os.system ...",
"unsupported GLOBAL posix.system whose module posix is blocked")."""


def load_checkpoint(
    path: str | os.PathLike, map_location: str | torch.device = "cpu", decoding: bool = False
) -> Loaded:
    """Load a gpt1 checkpoint (from ``gpt1 pretrain``, ``gpt1 finetune`` or ``gpt1 convert from-hf``). decoding: for
    a process that decodes on the CPU: the model's weights are copied out of the mapped file in the layout that
    decoding's kernel reads fastest (``gpt1.cpu.decoding.store_for_decoding``), in the time that reading them takes.

    Raises ``CheckpointError`` naming ``path`` if it is missing, unreadable, not a gpt1 checkpoint, of an unknown
    format or model type, or inconsistent (tokenizer and model vocabularies differ, weights do not fit).
    """
    path = Path(path)
    if path.name in HF_WEIGHTS and (path.parent / "config.json").is_file():
        raise CheckpointError(
            f"{path} is the weights file of the Hugging Face model directory {path.parent}, not a gpt1 checkpoint: "
            f"{hf_advice(path.parent)}"
        )
    raw = read_checkpoint(path, map_location, mmap=decoding)
    meta = _gpt1_block(path, raw)
    kind = meta.get("model_type", "gpt")  # format 1: always a GPT
    if not isinstance(kind, str) or kind not in MODEL_TYPES:
        raise CheckpointError(
            f"{path}: unknown model_type {kind!r} (known: {list(MODEL_TYPES)}): update gpt1 to read it"
        )
    try:
        tokenizer = Tokenizer.from_str(meta["tokenizer"])
    except Exception as e:
        raise CheckpointError(f"{path}: its tokenizer cannot be read ({_one_line(e)}): {DAMAGED}") from e
    cls, config_cls = MODEL_TYPES[kind].model, MODEL_TYPES[kind].config
    try:
        config = config_cls(**meta.get("model_config", {}))
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: its model config is invalid ({_one_line(e)}): {DAMAGED}") from e
    outside = fields_out_of_bounds(config)
    if outside is not None:
        raise CheckpointError(f"{path}: its model config is invalid ({outside}): {DAMAGED}")
    if tokenizer.vocab_size != config.vocab_size:
        raise CheckpointError(
            f"{path}: its tokenizer has {tokenizer.vocab_size} tokens but its model a vocabulary of "
            f"{config.vocab_size}: {DAMAGED}"
        )
    state, heads = {}, {}
    for key, value in _weights(path, raw).items():
        if key.startswith(MODEL_PREFIX):
            state[key.removeprefix(MODEL_PREFIX)] = value
        elif key.startswith(HEADS_PREFIX):
            heads[key.removeprefix(HEADS_PREFIX)] = value
    model = empty_model(cls, config)
    misfit = state_mismatch(state, model.state_dict())
    if misfit:
        raise CheckpointError(f"{path}: its weights do not fit its model config: {misfit}: {DAMAGED}")
    model.load_state_dict(state, assign=True)
    if decoding:
        store_for_decoding(model)
    return Loaded(model=model.eval(), tokenizer=tokenizer, raw=raw, task=meta.get("task"), heads=heads)


def _gpt1_block(path: Path, raw: Any) -> dict[str, Any]:
    """The "gpt1" block of the checkpoint ``raw`` read from ``path``, of a format this gpt1 reads."""
    meta = raw.get("gpt1") if isinstance(raw, dict) else None
    if not isinstance(meta, dict):
        raise CheckpointError(
            f"{path} is not a gpt1 checkpoint (no 'gpt1' block); a Hugging Face openai-gpt model directory converts "
            "to one with gpt1 convert from-hf (its directory, then the checkpoint file to write)"
        )
    if meta.get("format") not in READABLE_FORMATS:
        raise CheckpointError(
            f"{path}: checkpoint format {meta.get('format')!r} is not supported (this gpt1 reads "
            f"{READABLE_FORMATS}): update gpt1 to read it"
        )
    if not isinstance(meta.get("task"), (dict, type(None))):
        raise CheckpointError(f"{path}: its task is a {type(meta['task']).__name__}, not a task spec: {DAMAGED}")
    return meta


def _weights(path: Path, raw: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The checkpoint's weights (its "state_dict": name -> tensor)."""
    state = raw.get("state_dict")
    if not isinstance(state, dict):
        what = "missing" if state is None else "not a mapping"
        raise CheckpointError(f"{path}: its weights (state_dict) are {what}: {DAMAGED}")
    wrong = next((name for name, value in state.items() if not isinstance(value, torch.Tensor)), None)
    if wrong is not None:
        raise CheckpointError(f"{path}: its weight {wrong} is a {type(state[wrong]).__name__}, not a tensor: {DAMAGED}")
    return state


def state_mismatch(saved: Mapping[str, Any], expected: Mapping[str, Any]) -> Optional[str]:
    """How the tensors ``saved`` differ from those ``expected`` (name -> tensor): the first missing, unexpected or
    differently shaped one, in words; None when they fit."""
    for name, tensor in expected.items():
        if name not in saved:
            return f"{name} is missing"
        if tuple(saved[name].shape) != tuple(tensor.shape):
            return f"{name} is {tuple(saved[name].shape)} in the checkpoint but {tuple(tensor.shape)} here"
    extra = [name for name in saved if name not in expected]
    return f"{extra[0]} is not a parameter here" if extra else None


DAMAGED = "the checkpoint is inconsistent (edited or damaged): use another checkpoint of its run"


def _one_line(error: Exception, limit: int = 400) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= limit else text[:limit] + " ..."


def missing_key(ours: dict[str, Any], theirs: Any, at: str = "fit_loop") -> str | None:
    """The first name of the nested state dict ``ours`` that ``theirs`` lacks (None: none), said as a path."""
    if not isinstance(theirs, dict):
        return at
    for key, value in ours.items():
        if key not in theirs:
            return f"{at}/{key}"
        if isinstance(value, dict) and (found := missing_key(value, theirs[key], f"{at}/{key}")):
            return found
    return None
