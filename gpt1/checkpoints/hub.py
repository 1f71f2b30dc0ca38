"""A Hugging Face model by its hub name (``openai-community/openai-gpt``): the local folder of its files, downloaded
through huggingface_hub where there is a network, else read from the local hub cache (``HF_HUB_CACHE``, which
``HF_HUB_OFFLINE=1`` keeps to)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from gpt1.core.errors import CheckpointError

HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
"""A hub repository id: ``name`` or ``owner/name``."""
WANTED = ["config.json", "model.safetensors", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json"]
"""What ``import_hf`` reads of an openai-gpt repository (not its TensorFlow, Rust or ONNX copies)."""
LOCAL_FORM = "a local folder holding config.json, model.safetensors (or pytorch_model.bin), vocab.json and merges.txt"


def is_hub_name(src: str) -> bool:
    """Whether ``src``, which is not a local path, reads as a hub repository id."""
    return not Path(src).exists() and HUB_NAME.fullmatch(src) is not None


def hub_snapshot(name: str) -> Path:
    """The folder of the hub model ``name``'s files (those ``import_hf`` reads: safetensors weights, else the
    pytorch_model.bin of an older repository): downloaded, or read from the local hub cache when the hub cannot be
    reached or HF_HUB_OFFLINE=1; a ``CheckpointError`` naming the local-folder form when neither has it."""
    import huggingface_hub
    from huggingface_hub import snapshot_download
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    quiet = not sys.stderr.isatty() and not are_progress_bars_disabled()  # a log gets lines, not bars
    if quiet:
        disable_progress_bars()
    print(f"{name}: its files from the Hugging Face hub, or from the local hub cache", file=sys.stderr, flush=True)
    try:
        folder = Path(snapshot_download(name, allow_patterns=WANTED))
        if not (folder / "model.safetensors").is_file():
            folder = Path(snapshot_download(name, allow_patterns=[*WANTED, "pytorch_model.bin"]))
    except (OSError, ValueError) as e:  # no network and no cached copy, no such repository, a malformed id
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            f"{name} is not a local folder, and the Hugging Face hub gave no copy of it ({reason}): download it "
            f"where there is a network (the same command does, into {huggingface_hub.constants.HF_HUB_CACHE}), "
            f"or pass {LOCAL_FORM}"
        ) from e
    finally:
        if quiet:
            enable_progress_bars()
    return folder
