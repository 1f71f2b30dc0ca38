"""``gpt1 pretrain`` whose updates take at least ``GPT1_TEST_STEP_S`` seconds each until it is first stopped (a sleep
after each update, which changes no number): a tiny run still training when SLURM's time-limit warning comes, on any
machine (the warning's timing has a resolution of 30 s); once resumed it runs at full speed, and, with
``GPT1_TEST_REQUEUED_MATMUL`` set, with that kernel forced (``GPT1_CPU_MATMUL``), which the run must not take: it
keeps the kernels it started with. For tests/test_slurm.py:
``python -c "from tests.slurm_app import main; main()"`` with the repository on PYTHONPATH, so that the SLURM job
unpickles this module by name."""

import os
import time
from pathlib import Path

from lightning.pytorch.callbacks import Callback

import gpt1.commands.pretrain
import gpt1.training.run
from gpt1.app.runner import command
from gpt1.cpu.settings import configure


class Throttle(Callback):
    def __init__(self, seconds: float) -> None:
        self.seconds, self.fresh = seconds, True

    def on_train_start(self, trainer, pl_module) -> None:
        self.fresh = trainer.global_step == 0  # not resumed

    def on_train_batch_end(self, *args) -> None:
        if self.fresh:
            time.sleep(self.seconds)


@command("pretrain")
def main(cfg) -> None:
    other = os.environ.get("GPT1_TEST_REQUEUED_MATMUL")
    if other and (Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt").exists():  # a requeued attempt
        os.environ["GPT1_CPU_MATMUL"] = other  # as if its machine, load or cache chose another kernel
        configure()
    build = gpt1.training.run.build_callbacks
    throttle = Throttle(float(os.environ["GPT1_TEST_STEP_S"]))
    gpt1.training.run.build_callbacks = lambda *a, **k: [throttle, *build(*a, **k)]
    gpt1.commands.pretrain.train(cfg)
