"""The input surface fuzzed (docs/development.md, "The input surface"): for each surface, cases drawn by its
generator (``tests.fuzz.gen_*``) run through the real entry point in this process, a sample of them as the ``gpt1``
console script in a process of its own, and the files no read permission can stop root from reading as another
user; every case keeps the properties of ``tests.fuzz.harness``. The regression cases (``@example``) are failures
the harness found, fixed.

The default suite runs the ``quick`` profile (a fixed seed, a few cases per surface); experiments/fuzz_campaign.py
runs the ``campaign`` one ($GPT1_FUZZ=campaign: thousands of cases, its seed recorded)."""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.fuzz import (
    gen_checkpoints,
    gen_corpus,
    gen_flags,
    gen_hf,
    gen_overrides,
    gen_records,
    gen_task_data,
    gen_tokenizer,
    gen_yaml,
    regressions,
)
from tests.fuzz.world import Recipe, World

CAMPAIGN = os.environ.get("GPT1_FUZZ") == "campaign"
NOBODY = 65534
"""The unprivileged user the no-read-permission cases run as (setpriv)."""


def regressions_of(cases: list[Recipe]):
    """``@example`` of each regression case (``tests.fuzz.regressions``): a failure found, fixed, and run every
    time."""

    def decorate(test):
        for case in reversed(cases):
            test = example(recipe=case)(test)
        return test

    return decorate


def budget(quick: int, campaign: int) -> int:
    """The cases of a surface: ``quick`` in the default suite, ``campaign`` in the campaign ($GPT1_FUZZ_EXAMPLES:
    that many for every surface, e.g. to try a change on a few hundred)."""
    if os.environ.get("GPT1_FUZZ_EXAMPLES"):
        return int(os.environ["GPT1_FUZZ_EXAMPLES"])
    return campaign if CAMPAIGN else quick


def judge(world: World, recipe: Recipe, **how) -> None:
    """Run ``recipe`` in ``world``; fail with the properties it broke (in the campaign, $GPT1_FUZZ_KEEP_GOING=1:
    record them and go on, so that every surface gets its count of cases)."""
    case, outcome, found = world.run(recipe, **how)
    if found and os.environ.get("GPT1_FUZZ_KEEP_GOING") != "1":
        raise AssertionError(
            f"gpt1 {' '.join(case.argv)}\n  ({case.what}; expected: {case.expect.value})\n  "
            + "\n  ".join(found)
            + f"\n--- stdout\n{outcome.stdout[-2000:]}\n--- stderr\n{outcome.stderr[-3000:]}"
        )


@regressions_of(regressions.OVERRIDES)
@settings(max_examples=budget(6, 2400))
@given(recipe=gen_overrides.recipes())
def test_overrides(world, recipe):
    judge(world, recipe)


@regressions_of(regressions.FLAGS)
@settings(max_examples=budget(5, 600))
@given(recipe=gen_flags.recipes(valid_bench=CAMPAIGN))
def test_flags(world, recipe):
    judge(world, recipe)


@regressions_of(regressions.YAML)
@settings(max_examples=budget(3, 700))
@given(recipe=gen_yaml.recipes())
def test_config_yaml(world, recipe):
    judge(world, recipe)


@regressions_of(regressions.RECORDS)
@settings(max_examples=budget(3, 500))
@given(recipe=gen_records.recipes())
def test_run_records(world, recipe):
    judge(world, recipe)


@regressions_of(regressions.CHECKPOINTS)
@settings(max_examples=budget(3, 400))
@given(recipe=gen_checkpoints.recipes())
def test_checkpoints(world, recipe):
    judge(world, recipe)


@regressions_of(regressions.HF)
@settings(max_examples=budget(2, 200))
@given(recipe=gen_hf.recipes())
def test_hf_folders(world, recipe):
    judge(world, recipe)


@regressions_of(regressions.TASK_DATA)
@settings(max_examples=budget(2, 250))
@given(recipe=gen_task_data.recipes())
def test_task_data(world, recipe):
    judge(world, recipe)


@regressions_of(regressions.CORPORA)
@settings(max_examples=budget(2, 250))
@given(recipe=gen_corpus.recipes())
def test_corpora(world, recipe):
    judge(world, recipe)


@regressions_of(regressions.TOKENIZER_FILES)
@settings(max_examples=budget(2, 200))
@given(recipe=gen_tokenizer.recipes())
def test_tokenizer_files(world, recipe):
    judge(world, recipe)


ANY_SURFACE = st.one_of(
    gen_overrides.recipes(),
    gen_flags.recipes(),
    gen_yaml.recipes(),
    gen_records.recipes(),
    gen_checkpoints.recipes(),
    gen_hf.recipes(),
    gen_task_data.recipes(),
    gen_corpus.recipes(),
    gen_tokenizer.recipes(),
)


@regressions_of(regressions.CONSOLE_SCRIPT)
@settings(max_examples=budget(1, 40))
@given(recipe=ANY_SURFACE)
def test_the_console_script(world, recipe):
    """A sample of every surface as the ``gpt1`` console script, in a process of its own: what a process prints past
    Python's streams (a library's logging to the stderr it found at import) and its exit status are its own, and so
    is the state of its libraries (Hydra's first scan of its plugins)."""
    judge(world, dataclasses.replace(recipe, surface=f"{recipe.surface}, console script"), subprocess=True)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
@settings(max_examples=budget(1, 20))
@given(
    recipe=st.one_of(
        gen_task_data.unreadable(),
        gen_corpus.unreadable(),
        gen_checkpoints.unreadable(),
        gen_yaml.unreadable(),
        gen_tokenizer.unreadable(),
    )
)
def test_files_without_read_permission(world, recipe):
    """A file of mode 000, read by the console script run as an unprivileged user (root reads any file)."""
    judge(world, dataclasses.replace(recipe, surface=f"{recipe.surface}, no read permission"), user=NOBODY)
