"""What a config key changes: a run's numbers or not, said of each override given beside a run's record that differs
from it (``gpt1.app.recorded``); tests/test_run_record.py checks that every key and group is classified here."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Effect:
    """What setting a key changes."""

    numbers: bool
    """Whether it changes the run's numbers (its weights, metrics or sampled text)."""
    what: str
    """What it sets, in a few words."""

    def __str__(self) -> str:
        return f"it {'changes' if self.numbers else 'does not change'} the numbers ({self.what})"


def _changes(what: str) -> Effect:
    return Effect(True, what)


def _leaves(what: str) -> Effect:
    return Effect(False, what)


EFFECTS: dict[str, Effect] = {
    # what is trained on, in which order, from what and how
    "seed": _changes("the seed: data order, dropout's masks, fresh weights"),
    "experiment": _changes("the recipe"),
    "hparams_search": _changes("the hyper-parameter search"),
    "debug": _changes("a debug recipe"),
    "model": _changes("the model"),
    "tokenizer": _changes("the tokens"),
    "tokenizer_from": _changes("the tokenizer and architecture of a random start"),
    "init_from": _changes("the starting weights"),
    "data": _changes("the data and their order"),
    "data.num_workers": _leaves("loader processes"),
    "data.num_proc": _leaves("tokenising processes"),
    "task": _changes("the task and its data"),
    "batch_size": _changes("the batch size: data order and updates"),
    "micro_batch_size": _changes("the passes per update: the order of fp32 sums"),
    "aux_lm_weight": _changes("the auxiliary LM loss"),
    "n_transfer": _changes("the blocks transferred"),
    "head_pdrop": _changes("the head's dropout"),
    "share_context": _changes("dropout's masks of multiple choice"),
    "model_selection": _changes("which weights are kept and scored"),
    "optim": _changes("the optimisation"),
    "lm_loss": _changes("the LM loss's fp32 rounding"),
    "compile": _changes("the kernels"),
    "trainer": _changes("the training loop: its length, validation, precision or devices"),
    "trainer.enable_progress_bar": _leaves("the console"),
    "trainer.log_every_n_steps": _leaves("logging"),
    "trainer.num_sanity_val_steps": _leaves("a check before training"),
    # what is scored or sampled
    "ckpt": _changes("the checkpoint"),
    "ckpts": _changes("the checkpoints"),
    "perplexity": _changes("what is scored"),
    "prompt": _changes("the text sampled"),
    "max_new_tokens": _changes("the text sampled"),
    "temperature": _changes("the text sampled"),
    "top_k": _changes("the text sampled"),
    "num_samples": _changes("the text sampled"),
    "device": _changes("the device and its kernels"),
    "direction": _changes("what is converted"),
    "src": _changes("what is converted"),
    # how a run is watched, where it writes, how it is run
    "use_cache": _leaves("decoding's speed: the same tokens"),
    "dst": _leaves("where it writes"),
    "predict": _leaves("predictions written beside"),
    "num_workers": _leaves("loader processes"),
    "resume": _leaves("where the run continues from"),
    "rerun": _leaves("the run compared with"),
    "optimized_metric": _leaves("the figure a sweeper reads"),
    "run_name": _leaves("the run directory's name"),
    "paths": _leaves("paths"),
    "logger": _leaves("logging"),
    "callbacks": _leaves("checkpoints kept and logging"),
    "callbacks.samples": _leaves("the samples printed and metrics.json's sample, not training"),
    "hydra": _leaves("Hydra's settings: directories, logging, launcher"),
}
"""A key, or the start of keys (``trainer`` for ``trainer.*``, ``hydra`` for ``hydra/launcher``), -> its effect; the
longest that matches a key holds."""
UNKNOWN = _changes("a key not classified: taken to change them")


def effect(key: str) -> Effect:
    """What setting ``key`` (``trainer.max_steps``, a config group ``model``, ``hydra/launcher``) changes."""
    parts = re.split(r"[./]", key)
    for n in range(len(parts), 0, -1):
        found = EFFECTS.get(".".join(parts[:n]))
        if found is not None:
            return found
    return UNKNOWN
