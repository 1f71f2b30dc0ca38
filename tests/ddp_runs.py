"""A tiny pre-training and a fine-tuning from its checkpoint, under gloo DDP on N CPU processes, each recording the
examples of every update: ``python tests/ddp_runs.py N OUT CACHE [FROM]`` writes ``OUT/pretrain.json`` and
``OUT/finetune.json``, {update: the sorted examples of all its passes on all the processes, "validation": those of
the first validation}, and the runs in ``OUT/pretrain`` and ``OUT/finetune``. The global batch of 8 is split into
passes of 8 / (2 N) windows (trainer.accumulate_grad_batches=2) and of micro_batch_size=2 task examples (8 / (2 N)
passes); each run crosses two epoch ends whose last batch would be partial, and saves a checkpoint at update 4, in
the middle of an epoch. With FROM, each run resumes from the update-4 checkpoint of FROM's (made on another number of
processes). No dropout, so that runs on any number of processes differ by fp32 rounding only. For
tests/test_scale.py; Lightning starts ranks 1.. by running this script again."""

import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path

import torch
from hydra import compose, initialize_config_module
from lightning.pytorch.callbacks import Callback

import gpt1.training.run
from gpt1.app.registration import register
from gpt1.commands.finetune import finetune
from gpt1.commands.pretrain import train
from gpt1.cpu.settings import configure


class RecordUpdates(Callback):
    """update -> the examples of its batches, and "validation" -> those of the first validation (of all its
    processes): fine-tuning's row indices, pre-training's windows (a hash of each)."""

    def __init__(self, out: Path) -> None:
        self.out, self.updates, self.validated = out, defaultdict(list), None

    @staticmethod
    def examples(batch) -> list:
        if "index" in batch:
            return batch["index"].tolist()
        return [hashlib.sha256(row.numpy().tobytes()).hexdigest()[:12] for row in batch["input_ids"]]

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.updates[trainer.global_step] += self.examples(batch)

    def on_validation_start(self, trainer, pl_module) -> None:
        self.validating = self.validated is None
        if self.validating:
            self.validated = []

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        if self.validating:
            self.validated += self.examples(batch)

    def on_train_end(self, trainer, pl_module) -> None:
        mine = {**self.updates, "validation": self.validated}
        every = [mine]
        if trainer.world_size > 1:
            every = [None] * trainer.world_size
            torch.distributed.all_gather_object(every, mine)
        if trainer.is_global_zero:
            merged = defaultdict(list)
            for recorded in every:
                for key, examples in recorded.items():
                    merged[str(key)] += examples
            self.out.write_text(json.dumps({key: sorted(map(str, ex)) for key, ex in merged.items()}, sort_keys=True))


def main() -> None:
    devices, out, cache = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    earlier = Path(sys.argv[4]) if len(sys.argv) > 4 else None

    def resume(run: str) -> list[str]:
        return [f"resume={earlier / run / 'checkpoints' / 'step0000004.ckpt'}"] if earlier else []

    configure()
    register()
    build = gpt1.training.run.build_callbacks
    recorder: list[RecordUpdates] = []
    gpt1.training.run.build_callbacks = lambda *a, **k: [*build(*a, **k), recorder[-1]]
    ddp = ["trainer=ddp", "trainer.accelerator=cpu", f"trainer.devices={devices}", "trainer.precision=32-true"]
    common = [f"paths.cache_dir={cache}", "logger=csv", "trainer.enable_progress_bar=false", *ddp]
    common += [
        "trainer.num_sanity_val_steps=0",
        "callbacks.samples.every_n_steps=0",
        "callbacks.checkpoint.every_n_steps=4",
    ]
    common += ["model.embd_pdrop=0", "model.attn_pdrop=0", "model.resid_pdrop=0"]
    with initialize_config_module(config_module="gpt1.conf", version_base="1.3"):
        pretrain = compose(
            "pretrain",
            [
                *common,
                f"paths.output_dir={out / 'pretrain'}",
                "model=tiny",
                "tokenizer.vocab_size=512",
                "data.train_files=[${paths.sample_data}/books/train/northanger_abbey.txt]",
                "data.batch_size=8",
                "data.samples_per_epoch=18",  # 2.25 batches of 8: an epoch of 3 whole updates
                "data.max_valid_windows=7",  # uneven over 2 and 4 processes
                "trainer.accumulate_grad_batches=2",
                "trainer.max_steps=7",
                "trainer.val_check_interval=null",
                *resume("pretrain"),
            ],
        )
        recorder.append(RecordUpdates(out / "pretrain.json"))
        train(pretrain)
        tune = compose(
            "finetune",
            [
                *common,
                f"paths.output_dir={out / 'finetune'}",
                "task=sentiment",
                f"init_from={(earlier or out) / 'pretrain' / 'checkpoints' / 'last.ckpt'}",
                "++task.splits.train='train[:44]'",  # 5 updates an epoch, 4 examples left out
                "++task.splits.validation='validation[:7]'",
                "++task.splits.test='test[:7]'",
                "batch_size=8",
                "micro_batch_size=2",
                "trainer.max_steps=12",
                "head_pdrop=0",
                *resume("finetune"),
            ],
        )
        recorder.append(RecordUpdates(out / "finetune.json"))
        finetune(tune)


if __name__ == "__main__":
    main()
