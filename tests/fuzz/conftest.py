"""The fuzzing harness's fixtures: the sandbox (``tests.fuzz.world``), built once per session, and hypothesis's
profiles: ``quick`` (the default suite: a fixed seed, a few examples per surface) and ``campaign``
(experiments/fuzz_campaign.py: thousands of examples, its seed on the command line), chosen by $GPT1_FUZZ."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.fuzz.world import World

SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large]
"""A case runs a command (a second or a few): hypothesis's check of slow data generation would count that; a huge
file's case draws large data on purpose."""
settings.register_profile(
    "quick", derandomize=True, database=None, deadline=None, suppress_health_check=SUPPRESSED, print_blob=True
)
settings.register_profile("campaign", database=None, deadline=None, suppress_health_check=SUPPRESSED, print_blob=True)
settings.load_profile(os.environ.get("GPT1_FUZZ", "quick"))
"""deadline=None: a case's time bound is the harness's own (``Recipe.timeout_s``, a hang is a violation like the
others), not hypothesis's deadline, which on a loaded machine fails a slow but finished case; database=None: a run
draws the same cases from the same seed, whatever ran before."""


@pytest.fixture(scope="session")
def world():
    """The sandbox, in a folder of /tmp that another user may pass through (the no-read-permission cases: its data
    cache too, for the sample data); removed at the end."""
    root = Path(tempfile.mkdtemp(prefix="gpt1-fuzz-"))
    sandbox = World(root)
    sandbox.build()
    yield sandbox
    shutil.rmtree(root, ignore_errors=True)
