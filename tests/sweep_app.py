"""``gpt1 finetune`` whose updates take at least ``GPT1_TEST_STEP_S`` seconds each in a job that starts from step 0
(a sleep after each update, which changes no number), so that a test can kill a sweep in the middle of a job:
``python tests/sweep_app.py -m ... hydra.job.name=finetune`` (the job's name, as gpt1 finetune's). For
tests/test_sweeps.py."""

import os
import time

from lightning.pytorch.callbacks import Callback

import gpt1.training.run
from gpt1.app.objective import job_value
from gpt1.app.runner import command
from gpt1.commands.finetune import finetune


class Throttle(Callback):
    def __init__(self, seconds: float) -> None:
        self.seconds, self.fresh = seconds, True

    def on_train_start(self, trainer, pl_module) -> None:
        self.fresh = trainer.global_step == 0  # not resumed

    def on_train_batch_end(self, *args) -> None:
        if self.fresh:
            time.sleep(self.seconds)


@command("finetune")
def main(cfg):
    build = gpt1.training.run.build_callbacks
    throttle = Throttle(float(os.environ["GPT1_TEST_STEP_S"]))
    gpt1.training.run.build_callbacks = lambda *a, **k: [throttle, *build(*a, **k)]
    try:
        return job_value(cfg, finetune(cfg))
    finally:
        gpt1.training.run.build_callbacks = build


if __name__ == "__main__":
    main()
