"""Device resolution: a ``device`` setting (``auto``, ``cpu``, ``cuda``, ``cuda:N``) as a torch device this machine
has, or one line that says what to choose instead."""

from __future__ import annotations

import re

import torch

from gpt1.core.errors import ConfigError


def resolve_device(name: str, key: str = "device") -> torch.device:
    """The device setting ``key`` (gpt1 generate's and zeroshot's ``device``, gpt1 bench's ``--device``) as a torch
    device: auto is the GPU where torch sees one, else the CPU; ``ConfigError`` for a device this machine does not
    have, before any checkpoint is read or any timing taken."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name != "cpu" and not re.fullmatch(r"cuda(:\d+)?", name):
        raise ConfigError(f"{key}={name}: choose cpu, cuda, cuda:N or auto")
    device = torch.device(name)
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        seen = f"{torch.cuda.device_count()} CUDA GPUs are" if torch.cuda.is_available() else "no CUDA GPU is"
        raise ConfigError(f"{key}={name}: {seen} visible here; use {key}=cpu (or auto)")
    return device
