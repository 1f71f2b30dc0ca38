"""A run's own records, read again by ``gpt1 report`` and by ``resume=auto``: a copy of the sandbox's finished run
(as the case's run directory) with one record damaged: metrics.json, provenance.json, .hydra/overrides.yaml,
.hydra/config.yaml, csv/metrics.csv, the run lock, checkpoints/last.ckpt. Each is cut, flipped, replaced by text
that does not parse or by a value of the wrong shape, emptied, removed, or made a directory. Besides the usual
properties, nothing else of the run may be lost or changed (``Recipe.kept_run``)."""

from __future__ import annotations

import json
import os
import socket
import time

from hypothesis import strategies as st

from tests.fuzz import gen_overrides
from tests.fuzz.harness import Expect
from tests.fuzz.world import BASES, Cut, Flip, Recipe, Special

RECORDS = {
    "metrics.json": ["{oops", "[1, 2]", "null", '{"val/ppl": "abc", "train/loss": [1]}'],
    "provenance.json": ["{oops", "[]", '{"attempts": [1, 2]}', '{"attempts": "x"}', '{"attempts": [{"gpt1": 3}]}'],
    ".hydra/overrides.yaml": ["- a\n\t- b\n", "{model: tiny}\n", "just text\n", "- [unclosed\n"],
    ".hydra/config.yaml": ["- a list\n", "seed: [oops\n", "42\n"],
    "csv/metrics.csv": ["step,epoch\n1,2,3,4\n", "\x00\x01\x02", "only a header\n"],
    "run.lock": ["not json", "{}", '{"host": 3}'],
    "checkpoints/last.ckpt": [],
}
"""Each record, and texts that replace it (besides cuts, flips, an empty file, none, a directory)."""


def _foreign_lock(fresh: bool) -> str:
    """A lock held from another host (its heartbeat ``fresh``: held now; else stale), or by a PID of this host that
    runs nothing."""
    if fresh:
        holder = {"host": "node7", "pid": 4242, "start": None, "since": time.time(), "command": "gpt1 pretrain"}
    else:
        holder = {
            "host": socket.gethostname(),
            "pid": 4_194_000 + os.getpid() % 100,
            "start": None,
            "since": time.time() - 3600,
            "command": "gpt1 pretrain",
        }
    return json.dumps(holder)


@st.composite
def recipes(draw) -> Recipe:
    if draw(st.integers(0, 3)) == 0:
        return draw(the_finished_run())
    record = draw(st.sampled_from(sorted(RECORDS)))
    how = draw(
        st.sampled_from(
            ["text", "cut", "flip", "empty", "missing", "directory"]
            + (["lock held", "lock stale"] if record == "run.lock" else [])
        )
    )
    path = f"{{run}}/{record}"
    if how == "text" and RECORDS[record]:
        text = draw(st.sampled_from(RECORDS[record]))
        content, what = text, f"{record} {text[:30]!r}"
    elif how in ("text", "cut"):
        size = draw(st.integers(0, 400))
        content, what = Cut(size), f"{record} cut to {size} bytes"
    elif how == "flip":
        spots = tuple(draw(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), min_size=1, max_size=3)))
        content, what = Flip(spots), f"{record} bits flipped at {spots}"
    elif how == "empty":
        content, what = b"", f"{record} empty"
    elif how == "missing":
        content, what = None, f"{record} missing"
    elif how == "directory":
        content, what = Special("directory"), f"{record} a directory"
    else:
        content, what = _foreign_lock(how == "lock held"), f"{how} by another process"
    command = draw(st.sampled_from(["report", "report", "resume"]))
    if command == "report":
        argv = ["report", "{run}", "--out", "{run}/report"] if draw(st.booleans()) else ["report", "{run}"]
        expect = _report_verdict(record, how)
    else:
        argv = [*BASES["pretrain"], "resume=auto", "hydra.run.dir={run}"]
        expect = Expect.invalid if how == "lock held" else Expect.either
    names = ["{run}"] if how == "lock held" or (record == ".hydra/overrides.yaml" and how == "missing") else []
    return Recipe(
        "records",
        f"{command}: {what}",
        argv,
        expect,
        names or [record.rsplit("/", 1)[-1]],
        files={path: content},
        copy={"{run}": "{finished}"},
        kept_run="{run}",
    )


def _report_verdict(record: str, how: str) -> Expect:
    if record == ".hydra/overrides.yaml" and how == "missing":
        return Expect.invalid  # no job there
    if record in ("run.lock", "checkpoints/last.ckpt") or how == "missing":
        return Expect.valid  # not read (a job without metrics.json: failed)
    return Expect.either


@st.composite
def the_finished_run(draw) -> Recipe:
    """A command pointed at the sandbox's finished run itself (not a copy): ``gpt1 report`` on it, ``resume=auto``
    into it with its own overrides (nothing to train: nothing of it may change), or with an override the command
    refuses (refused before Hydra writes its .hydra/ record: nothing may change)."""
    kind = draw(st.sampled_from(["report", "report elsewhere", "resume", "resume refused"]))
    if kind.startswith("report"):
        argv = ["report", "{finished}", *(["--out", "{run}"] if kind == "report elsewhere" else [])]
        return Recipe("records", f"the finished run: {kind}", argv, Expect.valid)
    resume = [*BASES["pretrain"], "resume=auto", "hydra.run.dir={finished}"]
    if kind == "resume":
        return Recipe("records", "the finished run: resume=auto with its overrides", resume, Expect.valid)
    mode = draw(st.sampled_from(["wrong_type", "out_of_range", "unknown_key", "added_unknown_key", "vocabulary"]))
    override, names = gen_overrides.INVALID[mode](draw, "pretrain")
    return Recipe(
        "records", f"the finished run: resume=auto and {mode} {override}", [*resume, override], Expect.invalid, names
    )
