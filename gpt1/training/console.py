"""What a run prints is what a user needs: Lightning's model summary and progress bar without what says nothing, and
``quiet_library_noise``, the one place that silences library output that says nothing to a user."""

from __future__ import annotations

import logging
import re
import warnings
from typing import Any

from lightning.pytorch.callbacks import ModelSummary, RichModelSummary, RichProgressBar
from lightning.pytorch.callbacks.progress.rich_progress import _RICH_AVAILABLE
from lightning.pytorch.utilities.model_summary import get_human_readable_count
from lightning.pytorch.utilities.model_summary.model_summary import _format_summary_table


class SummaryWithoutZeroFlops(ModelSummary):
    """Lightning's model summary (rich when rich is installed), without the FLOPs column and total when they are 0
    (they are unless the module has an ``example_input_array``; ours have none)."""

    @staticmethod
    def summarize(
        summary_data: list[tuple[str, list[str]]],
        total_parameters: int,
        trainable_parameters: int,
        model_size: float,
        total_training_modes: dict[str, int],
        total_flops: int,
        **summarize_kwargs: Any,
    ) -> None:
        if total_flops:
            (RichModelSummary if _RICH_AVAILABLE else ModelSummary).summarize(
                summary_data, total_parameters, trainable_parameters, model_size, total_training_modes, total_flops,
                **summarize_kwargs,
            )
            return
        columns = [(name, values) for name, values in summary_data if name != "FLOPs"]
        if not _RICH_AVAILABLE:  # Lightning's plain table, less its last line (Total Flops)
            table = _format_summary_table(
                total_parameters, trainable_parameters, model_size, total_training_modes, total_flops, *columns
            )
            logging.getLogger("lightning.pytorch.callbacks.model_summary").info("\n" + table.rsplit("\n", 1)[0])
            return
        from rich import get_console
        from rich.table import Table

        table = Table(header_style=summarize_kwargs.get("header_style", "bold magenta"))
        for name, _ in columns:
            table.add_column(name, style="dim" if name == " " else None,
                             justify="right" if name.startswith("Params") else "left", no_wrap=name == "Name")
        for row in zip(*(values for _, values in columns)):
            table.add_row(*row)
        grid = Table.grid(expand=True)
        grid.add_column()
        for label, value in [
            ("Trainable params", get_human_readable_count(int(trainable_parameters))),
            ("Non-trainable params", get_human_readable_count(int(total_parameters - trainable_parameters))),
            ("Total params", get_human_readable_count(int(total_parameters))),
            ("Total estimated model params size (MB)", f"{model_size:,.3f}"),
            ("Modules in train mode", total_training_modes["train"]),
            ("Modules in eval mode", total_training_modes["eval"]),
        ]:
            grid.add_row(f"[bold]{label}[/]: {value}")
        console = get_console()
        console.print(table)
        console.print(grid)


class ProgressBarWithoutNegativeEpochs(RichProgressBar):
    """Lightning's rich progress bar, "Epoch 3" rather than "Epoch 3/-2" when no max_epochs bounds the run."""

    def _get_train_description(self, current_epoch: int) -> str:
        description = super()._get_train_description(current_epoch)
        max_epochs = self.trainer.max_epochs
        if max_epochs is not None and max_epochs < 0:
            description = description.replace(f"Epoch {current_epoch}/{max_epochs - 1}", f"Epoch {current_epoch}")
        return description


_NOISE_MESSAGES = {
    # Lightning's advertisements
    "lightning.pytorch.utilities.rank_zero": r"💡 Tip: |Loading `train_dataloader` to estimate number of stepping",
    "lightning.fabric.utilities.rank_zero": r"💡 Tip: ",
    "lightning_utilities.core.rank_zero": r"💡 Tip: ",
    # trainer.save_checkpoint without weights_only: the default (a full checkpoint) is what we want
    "lightning.pytorch.trainer.connectors.checkpoint_connector": r"`weights_only` was not set, defaulting to `False`",
}
"""Logger -> a regex of the messages it logs that say nothing to a user."""
_NOISE_WARNINGS = [
    # Lightning 2.6 on torch >= 2.10 (lightning/pytorch/utilities/_pytree.py): its own use of a torch API
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated", FutureWarning),
    # an epoch of fewer batches than log_every_n_steps (a small corpus): Lightning counts the logging interval across
    # epochs, so the metrics are logged all the same
    (r"The number of training batches \(\d+\) is smaller than the logging interval", UserWarning),
    # GPT1Module counts a batch's real tokens in on_before_batch_transfer, for any data module, a user's too: that the
    # module's hook runs, not the data module's, is the intent
    (r"You have overridden `on_before_batch_transfer` in `LightningModule` but have passed in a", UserWarning),
    # bf16-mixed keeps fp32 weights: the summary's size at 32 bits, which this warning calls inaccurate, is right
    (r"Precision \S+ is not supported by the model summary", UserWarning),
    # debug=overfit asks for the same batches every epoch: Lightning turning the loaders' shuffling (and evaluation's
    # longest-first order) off is what was asked for
    (r"You requested to overfit but enabled \w+ dataloader shuffling", UserWarning),
    # srun on the PATH (a SLURM login node or workstation): gpt1 reaches SLURM through hydra/launcher=submitit_slurm,
    # which starts its tasks with srun itself; a run started by hand there is meant to run where it is
    (r"The `srun` command is available on your system but is not used", UserWarning),
    # a mid-epoch resume: Lightning warns that it replays the epoch's data unless the loader is stateful; gpt1's
    # training loaders continue the epoch's draws from Lightning's restored counters (PretrainDataModule's windows,
    # the fine-tuning EpochSampler), so the run resumes exactly
    (r"You're resuming from a checkpoint that ended before the epoch ended", UserWarning),
]
"""(message regex, category) of the warnings that say nothing to a user."""


class _DropMessages(logging.Filter):
    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.match(record.getMessage())


def quiet_library_noise() -> None:
    """Silence the library output that says nothing to a user (``_NOISE_MESSAGES``, ``_NOISE_WARNINGS``), and only
    that: every other message and warning still shows. Idempotent."""
    for name, pattern in _NOISE_MESSAGES.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropMessages) for f in logger.filters):
            logger.addFilter(_DropMessages(pattern))
    for message, category in _NOISE_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
