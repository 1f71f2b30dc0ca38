"""The records stay true to the tree: every relative link of every markdown page resolves (its file, and its
``#anchor`` to a heading there), every path under experiments/ that a file of the tree names exists, experiments/
keeps its scripts apart from the results they recorded (under experiments/results/), and each row of
experiments/README.md's table of today's figures names what, the value, the machine, the command and a commit of
this repository's history. (The table's ``gpt1 ...`` commands run as written in tests/test_readme.py, but ``gpt1
bench``'s, which are parsed and checked here.)"""

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
RESULTS = EXPERIMENTS / "results"
SKIP = {".git", ".venv", "outputs", "node_modules", "__pycache__", ".gpu", ".ruff_cache", ".pytest_cache"}


def tree(*suffixes: str) -> list[Path]:
    """The checkout's files with one of these suffixes (or names), outside SKIP's folders."""
    found = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP and not d.endswith(".egg-info")]
        found += [Path(folder, n) for n in names if Path(n).suffix in suffixes or n in suffixes]
    return sorted(found)


PAGES = tree(".md")
"""Every markdown page of the checkout."""
TEXTS = tree(".md", ".py", ".sh", ".yaml", ".toml", "run")
"""Every file of the checkout that may name a path: pages, code, scripts, configs (.ci/run)."""
SCRIPTS = {".sh", ".py"}
"""experiments/ itself holds the scripts (and their inputs: conf/, a task's rows); what they recorded is under
results/."""
INPUTS = {"README.md", "conf", "winograd_sample.jsonl", "results"}
RECORDS = {".md", ".json", ".csv", ".png"}
COLUMNS = ["what", "value", "machine", "command", "commit"]
"""The columns of each table of today's figures."""


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (``-`` and ``_`` kept), spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings (outside code blocks), a repeated heading numbered as GitHub numbers it, and
    its ``<a id="..."></a>`` (a row of a table of today's figures)."""
    seen: dict[str, int] = {}
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    found = set(re.findall(r'<a id="([^"]+)"></a>', text))
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        base = slug(heading)
        found.add(f"{base}-{seen[base]}" if base in seen else base)
        seen[base] = seen.get(base, 0) + 1
    return found


def links(page: Path) -> list[str]:
    """A page's link and image targets, outside code (fenced blocks and inline spans)."""
    text = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", page.read_text(), flags=re.S))
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_of_a_page_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_every_path_under_experiments_that_the_tree_names_exists():
    """Code, configs, scripts and pages that cite a record or a script name one that is there (a record moved or
    dropped takes its citations with it)."""
    missing = []
    for file in TEXTS:
        if file == Path(__file__).resolve():
            continue
        for n, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
            for named in re.findall(r"(?<![\w.])experiments/[\w./-]*[\w/]", line):
                if not (ROOT / named).exists():
                    missing.append(f"{file.relative_to(ROOT)}:{n}: {named}")
    assert not missing, "named but not there:\n" + "\n".join(missing)


def test_experiments_holds_the_scripts_and_results_holds_what_they_recorded():
    misplaced = [
        p.name for p in EXPERIMENTS.iterdir() if p.name not in INPUTS and not (p.is_file() and p.suffix in SCRIPTS)
    ]
    assert not misplaced, f"in experiments/, not scripts (records go under experiments/results/): {misplaced}"
    stray = [str(p.relative_to(RESULTS)) for p in RESULTS.rglob("*") if p.is_file() and p.suffix not in RECORDS]
    assert not stray, f"in experiments/results/, not records (scripts stay in experiments/): {stray}"


def figures() -> list[tuple[str, list[str]]]:
    """The rows of experiments/README.md's tables of today's figures: (the row as written, its cells)."""
    text = (EXPERIMENTS / "README.md").read_text()
    section = text.split("\n## Today's figures\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for table in re.findall(r"(?:^\|.*\|\n)+", section, re.M):
        header, rule, *body = table.splitlines()
        assert [c.strip() for c in header.strip("|").split("|")] == COLUMNS, header
        rows += [(row, [c.strip() for c in row.strip("|").split(" | ")]) for row in body]
    return rows


def history() -> bool:
    """Whether this checkout has its whole git history (not an export, not a shallow clone)."""
    try:
        shallow = subprocess.run(
            ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return False
    return shallow.stdout.strip() == "false"


def test_each_of_todays_figures_names_its_machine_command_and_commit():
    rows = figures()
    assert len(rows) > 20
    commits = set()
    for n, (row, cells) in enumerate(rows):
        assert len(cells) == len(COLUMNS) and all(cells), f"five cells, none empty: {row}"
        what, value, machine, command, commit = cells
        assert "`" in command or (command == "the same" and n), f"a command to run, or the row above's: {row}"
        found = re.match(r"[0-9a-f]{7,40}\b", commit)
        assert found, f"the commit it was measured on first: {row}"
        commits.add(found.group())
    if not history():
        pytest.skip("no git history here to find the commits in")
    unknown = [
        c
        for c in sorted(commits)
        if subprocess.run(["git", "cat-file", "-e", f"{c}^{{commit}}"], cwd=ROOT, capture_output=True).returncode
    ]
    assert not unknown, f"commits not in this repository's history: {unknown}"


def test_the_tables_bench_commands_parse_as_written(monkeypatch, tmp_path):
    """``gpt1 bench`` is timings (tests/test_readme.py leaves it out): its commands in the table get their flags
    parsed and checked, with the measuring replaced."""
    from gpt1.tools import bench

    ran = []
    monkeypatch.setattr(bench, "bench", lambda args: ran.append(args) or {})
    monkeypatch.setattr(bench, "report", lambda out: "")
    monkeypatch.chdir(tmp_path)  # --json writes there
    commands = set(re.findall(r"(gpt1 bench [^`]*)`", (EXPERIMENTS / "README.md").read_text()))
    for command in sorted(commands):
        bench.main(shlex.split(command)[2:])
    assert len(ran) == len(commands) >= 3
