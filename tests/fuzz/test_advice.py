"""The commands that the harness's new error lines tell the user to run, run exactly as printed: ``gpt1 <command>
--help`` after a flag a command does not take, and ``chmod a+r FILE`` after a file the user may not read (then the
same command succeeds)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess

import pytest

from tests.fuzz import harness
from tests.fuzz.gen_task_data import ARGV, _task, serialize
from tests.fuzz.harness import Expect
from tests.fuzz.world import Recipe, Special

NOBODY = 65534


@pytest.mark.parametrize(
    "argv, listing",
    [
        (["generate", "--zzflag", "ckpt=x"], "--hydra-help"),  # (a Hydra app's --help describes its config)
        (["bench", "--zzflag"], "--help"),
        (["report", "{finished}", "--zzflag"], "--help"),
    ],
)
def test_the_help_a_flag_error_points_at_runs_as_printed_and_lists_the_flags(world, argv, listing):
    _, outcome, found = world.run(Recipe("flags", "an unknown flag", argv, Expect.invalid, ["--zzflag"]))
    assert not found, found
    printed = re.search(r"see `(gpt1 [^`]+)`", outcome.error_lines[0]).group(1)
    assert printed == f"gpt1 {argv[0]} {listing}"
    helped = harness.run_in_process(shlex.split(printed)[1:], world.env(), world.cwd, timeout_s=120)
    assert helped.status == 0, helped.stderr
    flag = {"generate": "--cfg", "bench": "--json", "report": "--out"}[argv[0]]
    assert flag in helped.stdout, helped.stdout  # the flags listed


@pytest.mark.slow  # two processes of the console script as another user (about 40 s loaded)
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_the_chmod_a_read_permission_error_prints_runs_as_printed_and_the_command_then_succeeds(world):
    rows = [(f"a {'fine' if i % 2 else 'dull'} film", "pos" if i % 2 else "neg") for i in range(16)]
    files = {**_task("csv"), "{in}/train.csv": Special("unreadable", serialize("csv", rows))}
    recipe = Recipe("task_data", "no read permission", ARGV, Expect.invalid, ["train.csv"], files=files)
    case, outcome, found = world.run(recipe, user=NOBODY, keep=True)
    assert not found, found
    printed = re.search(r"\((chmod a\+r [^)]+)\)", outcome.error_lines[0]).group(1)
    subprocess.run(["bash", "-c", printed], check=True)  # as printed, by the file's owner
    again = harness.run_subprocess(case.argv, {**world.env(), **_user_env(world, case)}, world.cwd, 600, user=NOBODY)
    assert again.status == 0, again.stderr[-2000:]


def _user_env(world, case) -> dict[str, str]:
    """The variables ``World.run`` gave the case's run as another user (its own home and caches)."""
    run = next(a.split("=", 1)[1] for a in case.argv if a.startswith("hydra.run.dir="))
    return {
        "HOME": f"{run}/home",
        "GPT1_CACHE_DIR": f"{run}/cache",
        "XDG_CACHE_HOME": f"{run}/xdg",
        "GPT1_SAMPLE_DATA": world.sample_data,
    }
