"""One device (``trainer=cpu``, ``gpu``, ``default``: ``trainer.strategy=auto``), as Lightning runs it: the model
whole, its gradients clipped where they are, its checkpoint one file. ``auto`` with more than one device is Lightning's
DDP (``gpt1.training.strategies.ddp``'s rules are the same)."""

from __future__ import annotations

from gpt1.training.strategies.base import TrainingStrategy


class SingleDevice(TrainingStrategy):
    names = ("auto", "single_device")


STRATEGY = SingleDevice()
