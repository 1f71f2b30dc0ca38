"""The command-line application: the CLI, the runner that turns every failure into one line, the command configs and
their registration with Hydra, resumable sweeps, and the suggestions for a mistyped key."""

import importlib


def __getattr__(name: str):
    # `gpt1.app` was one module (now gpt1.app.runner) before the package had rooms: its names still resolve here.
    if name in ("command", "user_errors", "user_message"):
        return getattr(importlib.import_module("gpt1.app.runner"), name)
    raise AttributeError(f"module 'gpt1.app' has no attribute {name!r}")
