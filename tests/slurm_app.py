"""``gpt1 pretrain`` whose updates take at least ``GPT1_TEST_STEP_S`` seconds (a sleep after each, which changes no
number): a tiny run that lasts long enough for SLURM's time-limit warning, whose timing has a resolution of 30 s,
to come mid-run on any machine. For tests/test_slurm.py: ``python -c "from tests.slurm_app import main; main()"``
with the repository on PYTHONPATH, so that the SLURM job unpickles this module by name."""

import os
import time

from lightning.pytorch.callbacks import Callback

import gpt1.pretrain
from gpt1.errors import command


class Throttle(Callback):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_train_batch_end(self, *args) -> None:
        time.sleep(self.seconds)


@command("pretrain")
def main(cfg) -> None:
    build = gpt1.pretrain.build_callbacks
    throttle = Throttle(float(os.environ["GPT1_TEST_STEP_S"]))
    gpt1.pretrain.build_callbacks = lambda *a, **k: [throttle, *build(*a, **k)]
    gpt1.pretrain.train(cfg)
