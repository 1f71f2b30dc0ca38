"""The plain flags: Hydra's own (``--cfg``, ``--info``, ``-m``, ``--config-dir``, ``--config-name``, ...) on each
command, and the argparse flags of ``gpt1 bench`` and ``gpt1 report`` and ``gpt1 convert``'s positional form: unknown
flags, missing and wrong values, choices that are none of the choices, flags split from their values, paths that are
not what the flag takes, and the valid forms (which run: ``--cfg job`` prints a config, a tiny bench measures)."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.fuzz.harness import Expect
from tests.fuzz.world import BASES, Recipe

HYDRA_VALID = [
    ["--cfg", "job"],
    ["--cfg", "hydra"],
    ["--cfg", "all"],
    ["--info", "all"],
    ["--info", "config"],
    ["--cfg", "job", "--resolve"],
    ["-p", "run_name", "--cfg", "job"],
]
"""Flags that print and exit 0 (nothing run), given with the command's overrides."""
HELP = [["--help"], ["--hydra-help"], ["-h"]]
"""Flags that print and exit 0, given alone."""

HYDRA_INVALID = [
    (["--zzflag"], ["--zzflag"]),
    (["-z"], ["-z"]),
    (["--cfg", "nope"], ["--cfg"]),
    (["--info", "nope"], ["--info"]),
    (["-m", "--cfg", "job"], ["-m (--multirun)"]),
    (["--multirun", "--info", "all"], ["-m (--multirun)"]),
    (["--info"], ["--info"]),  # (its value is optional: it takes the next argument, an override, for one)
    (["--config-name", "zznosuch"], ["zznosuch"]),
    (["--config-dir", "{in}/nowhere"], ["{in}/nowhere"]),
    (["--experimental-rerun", "{in}/nowhere.pickle"], ["{in}/nowhere.pickle"]),
]
"""Flags a command refuses, each with what its line must name."""

TINY_BENCH = [
    "--model",
    "tiny",
    "--iters",
    "1",
    "--warmup",
    "0",
    "--batch",
    "1",
    "--seq",
    "8",
    "--gen-batch",
    "1",
    "--new-tokens",
    "1",
    "--mc-batch",
    "0",
    "--device",
    "cpu",
]
"""A bench of the tiny preset that measures once (about a minute on 2 loaded cores: its ceilings first)."""

BENCH_INVALID = [
    (["--batch", "x"], "--batch"),
    (["--batch", "0"], "--batch"),
    (["--batch", "-3"], "--batch"),
    (["--model", "zznosuch"], "--model"),
    (["--precision", "17"], "--precision"),
    (["--seq", "0"], "--seq"),
    (["--seq", "99999"], "--seq"),
    (["--new-tokens", "0"], "--new-tokens"),
    (["--iters", "0"], "--iters"),
    (["--warmup", "-1"], "--warmup"),
    (["--vocab", "1"], "--vocab"),
    (["--device", "tpu"], "--device"),
    (["--json", "{in}/nowhere/bench.json"], "--json"),
    (["--compare", "nope"], "--compare"),
    (["--lm-loss", "nope"], "--lm-loss"),
    (["--peak-tflops", "abc"], "--peak-tflops"),
    (["--mc-batch", "-1"], "--mc-batch"),
    (["--zzflag"], "--zzflag"),
    (["--batch"], "--batch"),
    (["stray"], "stray"),
]
"""Bench flags refused before anything is measured, with the flag the line must name."""


def _report_cases() -> list[tuple[str, list[str], Expect, list[str]]]:
    return [
        ("no directory", ["report"], Expect.invalid, ["DIR"]),
        ("a directory that does not exist", ["report", "{in}/nowhere"], Expect.invalid, ["{in}/nowhere"]),
        ("a file for a directory", ["report", "{assets}/corpus.txt"], Expect.invalid, ["corpus.txt"]),
        ("a directory without jobs", ["report", "{in}"], Expect.invalid, ["{in}"]),
        ("--out without a value", ["report", "{finished}", "--out"], Expect.invalid, ["--out"]),
        ("an unknown flag", ["report", "{finished}", "--zzflag"], Expect.invalid, ["--zzflag"]),
        (
            "--out an existing file",
            ["report", "{finished}", "--out", "{assets}/corpus.txt"],
            Expect.invalid,
            ["corpus.txt"],
        ),
        ("the finished run, out elsewhere", ["report", "{finished}", "--out", "{run}/report"], Expect.valid, []),
        (
            "the finished run and a sweep of none",
            ["report", "{finished}", "{in}", "--out", "{run}"],
            Expect.invalid,
            ["{in}"],
        ),
    ]


def _convert_cases() -> list[tuple[str, list[str], Expect, list[str]]]:
    return [
        ("nothing", ["convert"], Expect.invalid, ["direction"]),
        ("an unknown direction", ["convert", "sideways", "{ckpt}", "{run}/x"], Expect.invalid, ["sideways"]),
        ("no source", ["convert", "to-hf"], Expect.invalid, ["src"]),
        ("no destination", ["convert", "to-hf", "{ckpt}"], Expect.invalid, ["dst"]),
        (
            "a missing checkpoint",
            ["convert", "to-hf", "{in}/nothere.ckpt", "{run}/hf"],
            Expect.invalid,
            ["nothere.ckpt"],
        ),
        ("a missing HF folder", ["convert", "from-hf", "{in}/nothere", "{run}/x.ckpt"], Expect.invalid, ["nothere"]),
        (
            "a file as the HF folder to write",
            ["convert", "to-hf", "{ckpt}", "{assets}/corpus.txt"],
            Expect.invalid,
            ["corpus.txt"],
        ),
        ("a fourth positional", ["convert", "to-hf", "{ckpt}", "{run}/hf", "extra"], Expect.invalid, ["extra"]),
        ("to-hf", ["convert", "to-hf", "{ckpt}", "{run}/hf"], Expect.valid, []),
        ("from-hf", ["convert", "from-hf", "{assets}/hf", "{run}/x.ckpt"], Expect.valid, []),
        ("direction= form", ["convert", "direction=to-hf", "src={ckpt}", "dst={run}/hf"], Expect.valid, []),
    ]


@st.composite
def recipes(draw, valid_bench: bool = False) -> Recipe:
    """A command line of flags (``valid_bench``: also a tiny bench that runs, about a minute)."""
    kind = draw(st.sampled_from(["hydra", "hydra_valid", "split", "bench", "report", "convert"]))
    if kind in ("hydra", "hydra_valid", "split"):
        command = draw(st.sampled_from(sorted(BASES)))
        base = BASES[command]
        if kind == "hydra_valid":
            flags = draw(st.sampled_from(HYDRA_VALID + HELP))
            if flags in HELP:  # (alone; Hydra composes the config it describes: finetune's and zeroshot's need a task)
                task = ["task=sentiment"] if command in ("finetune", "zeroshot") and flags != ["--hydra-help"] else []
                return Recipe("flags", f"{command} {' '.join(flags)}", [command, *flags, *task], Expect.valid)
            return Recipe("flags", f"{command} {' '.join(flags)}", _with_flags(base, flags), Expect.valid)
        if kind == "split":  # an override after a flag: Hydra takes the overrides as one run of arguments
            return Recipe(
                "flags",
                f"{command}: overrides split by --cfg job",
                [*base, "--cfg", "job", "seed=3"],
                Expect.invalid,
                ["seed=3"],
                run_dir=False,
            )
        refused = [(f, n) for f, n in HYDRA_INVALID if f[0] not in base]
        if base[1].startswith("-") or command == "convert":  # (--info takes no value from a flag that follows it,
            # nor from nothing: convert's flags come last, after its overrides, and a bare --info is Hydra's "all")
            refused = [(f, n) for f, n in refused if f != ["--info"]]
        flags, names = draw(st.sampled_from(refused))
        return Recipe("flags", f"{command} {' '.join(flags)}", _with_flags(base, flags), Expect.invalid, names)
    if kind == "bench":
        if valid_bench and draw(st.integers(0, 9)) == 0:
            return Recipe("flags", "bench: tiny", ["bench", *TINY_BENCH], Expect.valid, timeout_s=600)
        flags, name = draw(st.sampled_from(BENCH_INVALID))
        return Recipe("flags", f"bench {' '.join(flags)}", ["bench", *TINY_BENCH, *flags], Expect.invalid, [name])
    what, argv, expect, names = draw(st.sampled_from(_report_cases() if kind == "report" else _convert_cases()))
    return Recipe("flags", f"{argv[0]}: {what}", argv, expect, names)


def _with_flags(base: list[str], flags: list[str]) -> list[str]:
    """A command's line with Hydra's ``flags`` before its overrides (after gpt1 convert's positional arguments, which
    must come first)."""
    if base[0] == "convert":
        return [*base, *flags]
    return [base[0], *flags, *base[1:]]
