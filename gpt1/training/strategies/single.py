"""One device (``trainer=cpu``, ``gpu``, ``default``: ``trainer.strategy=auto``), as Lightning runs it."""

from __future__ import annotations

from gpt1.training.strategies.base import TrainingStrategy


class SingleDevice(TrainingStrategy):
    names = ("auto", "single_device")


STRATEGY = SingleDevice()
