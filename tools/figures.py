"""Today's figures (the tables of experiments/README.md) and the recipes they were measured on.

    python tools/figures.py check                 # the rows whose recipe changed since they were measured
    python tools/figures.py recipe ROW            # what a row's fingerprint is a hash of, and the fingerprint
    python tools/figures.py measure ROW           # run the row's commands as written, in a new directory
    python tools/figures.py record ROW "VALUE" [--machine "..."]   # the new value, this commit and its recipe

A row is named by the ``<a id="ROW"></a>`` its first cell starts with (README.md and docs/ link to it:
``experiments/README.md#ROW``), and its commit cell ends with ``recipe XXXXXXXX``: the fingerprint of what
determines the figure, as it was when the figure was measured. The fingerprint hashes the row's commands (the spans
of its command cell that run something; ``the same``: the row above's):

- ``gpt1 <command> ...`` (a Hydra app): the config it composes (in this process, as ``gpt1.api.compose``), less what
  cannot change a figure (the keys ``gpt1.app.effects`` says change no numbers: paths, loggers, callbacks, the
  progress bar, what a sweeper reads); a checkpoint under ``outputs/quickstart/`` brings the quickstart's config
  (``gpt1 pretrain``) in too;
- ``gpt1 bench ...``: its parsed flags (not ``--json``) and the model preset it builds;
- ``python SCRIPT ...``, ``bash SCRIPT ...``: the script's code (comments, docstrings and the modules its names are
  imported from aside) and its arguments;
  ``python -m pytest FILES ...``: the test files' code and the arguments (no files: pyproject.toml's pytest options,
  which pick the tests);
- ``pip install ...``: pyproject.toml's dependencies and those of the extras it names;
- anything else: its words.

So a change to a recipe (conf/experiment/quickstart.yaml, a preset, a script) changes the fingerprint of the rows
measured on it, and tests/test_figures.py fails them until they are measured again; a change to the code under
measurement (a faster kernel) does not: speed figures are re-measured on a quiet machine when the code they time
changes, by whoever changes it.

Exit status: 0; ``check``: 1 when a row is stale; 2 for a row that is not there, or ``record`` in a tree with
uncommitted changes.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import functools
import hashlib
import json
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "experiments" / "README.md"
SECTION = "## Today's figures"
COLUMNS = ["what", "value", "machine", "command", "commit"]
ANCHOR = re.compile(r'^<a id="([a-z0-9-]+)"></a>\s*')
RECIPE = re.compile(r"\s*;?\s*recipe ([0-9a-f]{8})$")
RUNNERS = ("gpt1", "python", "python3", "bash", "pip")
"""How a span of a command cell that runs something starts (after its environment variables and ``time``)."""
PLACEHOLDERS = re.compile(r"<(run|time)>")
RUN_DIR = "2025-01-01_12-00-00"
"""What ``<run>`` and ``<time>`` (a run directory's timestamp) stand for in a recipe."""
QUICKSTART = "outputs/quickstart/"
PENDING = "to re-measure"


@dataclass
class Row:
    """One row of a table of today's figures: its cells as written, and the line of the file it is on."""

    id: str
    what: str
    value: str
    machine: str
    command: str
    commit: str
    recipe: str | None
    line: int

    @property
    def pending(self) -> bool:
        """Whether the row waits to be measured again (its value starts "to re-measure"): it has no figure to cite."""
        return self.value.startswith(PENDING)


def rows(text: str | None = None) -> dict[str, Row]:
    """The rows of experiments/README.md's tables of today's figures, by id (a row without one: ``line N``)."""
    lines = (TABLE.read_text() if text is None else text).splitlines()
    start = lines.index(SECTION)
    end = next((n for n in range(start + 1, len(lines)) if lines[n].startswith("## ")), len(lines))
    found: dict[str, Row] = {}
    previous = ""
    for n in range(start, end):
        cells = [c.strip() for c in lines[n].strip().strip("|").split(" | ")]
        if not lines[n].startswith("| ") or cells == COLUMNS or len(cells) != len(COLUMNS):
            continue
        what, value, machine, command, commit = cells
        anchor = ANCHOR.match(what)
        recipe = RECIPE.search(commit)
        command = previous if command == "the same" else command
        previous = command
        row_id = anchor.group(1) if anchor else f"line {n + 1}"
        found[row_id] = Row(
            row_id,
            what[anchor.end() :] if anchor else what,
            value,
            machine,
            command,
            commit,
            recipe.group(1) if recipe else None,
            n,
        )
    return found


def commands(cell: str) -> list[str]:
    """The commands of a command cell's spans that run something (a span's ``&&`` chain split), as written."""
    spans = [c.strip() for span in re.findall(r"`([^`]+)`", cell) for c in span.split("&&")]
    return [c for c in spans if _argv(c) and _argv(c)[0] in RUNNERS]


def _argv(command: str) -> list[str]:
    """A command's words as bash splits them, its environment variables and ``time`` left out."""
    command = re.sub(r"^(?:[A-Z_]+=(?:\$\([^)]*\)|\S+)\s+)+", "", PLACEHOLDERS.sub(RUN_DIR, command))
    try:
        argv = shlex.split(command)
    except ValueError:
        return []
    while argv and argv[0] in ("time", "/usr/bin/time", "-v"):
        argv = argv[1:]
    return argv


def recipe(row: Row) -> list[dict[str, Any]]:
    """What determines the row's figures: a part per command (the module docstring says what each part holds)."""
    parts = [part(command) for command in commands(row.command)]
    if needs_quickstart(commands(row.command)):
        parts.append({"checkpoint": QUICKSTART, "made by": part("gpt1 pretrain")})
    return parts


def needs_quickstart(commands: list[str]) -> bool:
    """Whether commands read a checkpoint of the quickstart (``outputs/quickstart/...``) that none of them makes."""
    return any(QUICKSTART in c for c in commands) and not any(_argv(c)[:2] == ["gpt1", "pretrain"] for c in commands)


def fingerprint(parts: list[dict[str, Any]]) -> str:
    """Eight hex digits of the SHA-256 of the parts as canonical JSON."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:8]


def part(command: str) -> dict[str, Any]:
    argv = _argv(command)
    if argv[:2] == ["gpt1", "bench"]:
        return bench_part(argv[2:])
    if argv[0] == "gpt1":
        return {"command": argv[1], "config": composed(argv[1], tuple(argv[2:]))}
    if argv[0] in ("python", "python3") and argv[1:3] == ["-m", "pytest"]:
        files = [a for a in argv[3:] if a.startswith("tests/")]
        code = {f: code_of(ROOT / f.split("::")[0]) for f in files} or {"pyproject.toml": pytest_options()}
        return {"pytest": code, "args": [a for a in argv[3:] if a not in files]}
    if argv[0] in ("python", "python3", "bash") and (ROOT / argv[1]).is_file():
        return {"script": argv[1], "code": code_of(ROOT / argv[1]), "args": argv[2:]}
    if argv[0] == "pip":
        return {"pip": argv[1:], "pyproject.toml": project_dependencies(argv[1:])}
    return {"words": argv}


def code_of(path: Path) -> str:
    """A script's code: a Python file's syntax tree without its docstrings and the modules its names are imported
    from, a shell script's lines without comments (so a comment, a reflowed line or a module moved with its names
    changes no recipe)."""
    text = path.read_text()
    if path.suffix != ".py":
        return "\n".join(s for line in text.splitlines() if (s := re.sub(r"(^|\s)#.*", "", line).strip()))
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            node.body = body[1:] or [ast.Pass()]
        if isinstance(node, ast.ImportFrom):
            node.module, node.level = None, 0
    return ast.dump(tree)


@functools.lru_cache
def composed(command: str, overrides: tuple[str, ...]) -> dict[str, Any]:
    """The config ``gpt1 <command> <overrides>`` runs with, interpolations as written, less the keys that change no
    figure (composed once a process; not to be changed)."""
    from omegaconf import OmegaConf

    from gpt1 import api

    if command == "convert":
        from gpt1.commands.convert import positional_to_overrides

        overrides = positional_to_overrides(list(overrides))
    overrides = [o for o in overrides if o != "-m" and not o.startswith("hydra.")]
    return _numbers_only(OmegaConf.to_container(api.compose(command, overrides), resolve=False))


def _numbers_only(node: Any, prefix: str = "") -> Any:
    """A composed config less every key that changes no figure (``gpt1.app.effects``: paths, loggers, callbacks,
    loader processes, what a sweeper reads, ...)."""
    from gpt1.app.effects import effect

    if not isinstance(node, dict):
        return node
    return {k: _numbers_only(v, f"{prefix}{k}.") for k, v in node.items() if effect(f"{prefix}{k}").numbers}


def bench_part(flags: list[str]) -> dict[str, Any]:
    """``gpt1 bench``'s flags as parsed (the output file, and flags left at None, "the preset's", out: a flag added
    since changes no recipe) and the model preset they name."""
    from gpt1.app.model_group import model_config
    from gpt1.tools.bench import parse_args

    args = {k: v for k, v in vars(parse_args(flags)).items() if v is not None and k != "json"}
    return {"bench": args, "model": asdict(model_config(args["model"]))}


def project_dependencies(args: list[str]) -> dict[str, Any]:
    """What ``pip install ARGS`` of this project fetches, by pyproject.toml: its dependencies and those of the extras
    named (``-e ".[test]"``)."""
    project = pyproject()["project"]
    extras = [e for a in args for group in re.findall(r"^\.\[([\w,-]+)\]$", a) for e in group.split(",")]
    return {"dependencies": project["dependencies"], **{e: project["optional-dependencies"][e] for e in extras}}


def pytest_options() -> dict[str, Any]:
    """pyproject.toml's pytest options but the markers' descriptions: which tests ``python -m pytest`` runs, how."""
    options = pyproject()["tool"]["pytest"]["ini_options"]
    return {k: v for k, v in options.items() if k != "markers"}


def pyproject() -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python 3.10: pytest's own TOML reader
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def stale(table: dict[str, Row] | None = None) -> list[str]:
    """A line per row whose recorded recipe is missing or differs from today's (rows to re-measure aside)."""
    lines = []
    for row in (rows() if table is None else table).values():
        if row.pending:
            continue
        now = fingerprint(recipe(row))
        if row.recipe != now:
            was = f"measured on recipe {row.recipe}" if row.recipe else "no recipe recorded"
            lines.append(
                f"experiments/README.md, row {row.id}: {was}, today's is {now}: measure it again "
                f"(python tools/figures.py measure {row.id}), then python tools/figures.py record {row.id} VALUE"
            )
    return lines


def measure(row: Row, out: Path) -> None:
    """Run the row's commands as written, one after the other, each line echoed: ``gpt1`` commands in ``out`` (the
    quickstart first where one needs its checkpoint; ``<run>``: the newest run directory there), the scripts in the
    checkout; ``DIR`` is ``out/dir``. Each new ``metrics.json`` is printed."""
    shown: set[Path] = set()
    todo = (["gpt1 pretrain"] if needs_quickstart(commands(row.command)) else []) + commands(row.command)

    def newest(found: re.Match) -> str:  # outputs/quickstart/<run> -> the run directory made last there
        made = sorted(p for p in (out / found.group(1)).glob("*") if p.is_dir())
        return str(made[-1]) if made else found.group()

    for command in todo:
        line = re.sub(r"\bDIR\b", str(out / "dir"), re.sub(r"([\w./-]*)<(?:run|time)>", newest, command))
        print(f"$ {line}", flush=True)
        where = out if _argv(command)[0] == "gpt1" else ROOT
        subprocess.run(["bash", "-c", f"cd {shlex.quote(str(where))} && {line}"], check=True)
        for metrics in sorted(set(out.glob("outputs/**/metrics.json")) - shown):
            print(f"{metrics.relative_to(out)}: {metrics.read_text()}")
            shown.add(metrics)


def record(row: Row, value: str, machine: str | None) -> None:
    """Rewrite the row in experiments/README.md: the value, the machine (if given), and the commit cell: HEAD, today
    and the recipe. The tree must hold no uncommitted change to a tracked file: the row names the commit measured."""
    head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True)
    if head.returncode or dirty.stdout:
        print("error: a row records the measurement of a commit: commit or stash your changes", file=sys.stderr)
        sys.exit(2)
    commit = f"{head.stdout.strip()} ({datetime.date.today().isoformat()}); recipe {fingerprint(recipe(row))}"
    TABLE.write_text(rewrite(TABLE.read_text(), row, value, machine, commit))
    print(f"experiments/README.md, row {row.id}: {value} ({machine or row.machine}), {commit}")


def rewrite(text: str, row: Row, value: str, machine: str | None, commit: str) -> str:
    """The table's text with the row's value, machine (if given) and commit cells replaced."""
    lines = text.splitlines(keepends=True)
    cells = [c.strip() for c in lines[row.line].strip().strip("|").split(" | ")]
    cells[1], cells[2], cells[4] = value, machine or cells[2], commit
    lines[row.line] = "| " + " | ".join(cells) + " |\n"
    return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/figures.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("check", help="the rows whose recipe changed since they were measured")
    for name, text in (("recipe", "what the row's fingerprint hashes"), ("measure", "run the row's commands")):
        sub.add_parser(name, help=text).add_argument("row")
    writes = sub.add_parser("record", help="write a new value, with this commit and its recipe")
    writes.add_argument("row")
    writes.add_argument("value", help="the value cell, as the pages will cite it")
    writes.add_argument("--machine", help="the machine cell (default: unchanged)")
    args = parser.parse_args(argv)
    table = rows()
    if args.action == "check":
        lines = stale(table)
        waiting = [r for r in table.values() if r.pending]
        print("\n".join(lines) or f"{len(table) - len(waiting)} rows measured on today's recipes")
        for row in waiting:
            print(f"experiments/README.md, row {row.id}: waits to be measured again: {row.command}")
        return 1 if lines else 0
    if args.row not in table:
        print(f"error: experiments/README.md has no row {args.row!r}; its rows: {', '.join(table)}", file=sys.stderr)
        return 2
    row = table[args.row]
    if args.action == "recipe":
        parts = recipe(row)
        print(json.dumps(parts, indent=1, sort_keys=True, default=str))
        print(f"recipe {fingerprint(parts)} (recorded: {row.recipe})")
    elif args.action == "measure":
        measure(row, Path(tempfile.mkdtemp(prefix=f"figures-{row.id}-")))
    else:
        record(row, args.value, args.machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
