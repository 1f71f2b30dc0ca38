"""The fuzzing campaign (issue 52): tests/fuzz/ with the ``campaign`` profile, thousands of generated cases over every
input surface (docs/development.md, "The input surface"), run to the end whatever they find, then their counts and
outcomes written to experiments/results/fuzz_campaign.md.

    python experiments/fuzz_campaign.py --seed 52 --out experiments/results/fuzz_campaign.md
    python experiments/fuzz_campaign.py --seed 52 --examples 20 --out DIR/fuzz.md     # 20 cases per surface

Every case is recorded as it ends (``$GPT1_FUZZ_RECORD``: ``--record``, a JSON Lines file, by default in a temporary
folder), so an interrupted campaign's cases can be counted all the same. The exit status is 1 if any case broke a
property.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUTCOMES = ["error line", "success", "traceback", "hang", "stray write", "run changed", "other"]
"""What a case did: refused in one line, succeeded, or broke a property (the first that applies)."""


def outcome(entry: dict) -> str:
    if entry["hang"]:
        return "hang"
    if entry["traceback"]:
        return "traceback"
    if entry["stray"]:
        return "stray write"
    if entry["changed"]:
        return "run changed"
    if entry["violations"]:
        return "other"
    return "success" if entry["status"] == 0 else "error line"


def summary(entries: list[dict]) -> tuple[list[str], list[str]]:
    """The report's table (a row per surface, then the total) and its list of broken properties."""
    rows = collections.defaultdict(collections.Counter)
    for entry in entries:
        rows[entry["surface"]][outcome(entry)] += 1
        rows[entry["surface"]][f"expect {entry['expect']}"] += 1
    header = ["surface", "cases", "expected valid / invalid / either", *OUTCOMES, "seconds (median)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    total = collections.Counter()
    for surface in sorted(rows):
        counts = rows[surface]
        cases = sum(counts[o] for o in OUTCOMES)
        total.update({**{o: counts[o] for o in OUTCOMES}, "cases": cases})
        total.update({k: v for k, v in counts.items() if k.startswith("expect")})
        seconds = sorted(e["seconds"] for e in entries if e["surface"] == surface)
        lines.append(_row(surface, cases, counts, f"{seconds[len(seconds) // 2]:.1f}"))
    lines.append(_row("**all**", total["cases"], total, ""))
    broken = [
        f"- {e['surface']}: `gpt1 {shlex.join(e['argv'])}` ({e['what']}): {'; '.join(e['violations'])}"
        for e in entries
        if e["violations"]
    ]
    return lines, broken


def _row(name: str, cases: int, counts: collections.Counter, seconds: str) -> str:
    expected = " / ".join(str(counts[f"expect {k}"]) for k in ("valid", "invalid", "either"))
    return f"| {name} | {cases} | {expected} | " + " | ".join(str(counts[o]) for o in OUTCOMES) + f" | {seconds} |"


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + (" (uncommitted changes)" if git("status", "--porcelain") else "")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=52, help="hypothesis's seed (the campaign's cases follow from it)")
    p.add_argument("--examples", type=int, default=None, help="cases per surface (default: the campaign's budgets)")
    p.add_argument("--out", type=Path, default=REPO / "experiments" / "results" / "fuzz_campaign.md")
    p.add_argument("--workers", type=int, default=1, help="pytest-xdist processes (the surfaces' tests share them)")
    p.add_argument("--record", type=Path, default=None, help="each case's JSON line (default: a temporary file)")
    args = p.parse_args()
    record = args.record or Path(tempfile.mkdtemp(prefix="gpt1-fuzz-campaign-")) / "cases.jsonl"
    record.unlink(missing_ok=True)
    env = {**os.environ, "GPT1_FUZZ": "campaign", "GPT1_FUZZ_KEEP_GOING": "1", "GPT1_FUZZ_RECORD": str(record)}
    if args.examples:
        env["GPT1_FUZZ_EXAMPLES"] = str(args.examples)
    pytest = [
        sys.executable,
        "-m",
        "pytest",
        "tests/fuzz/test_fuzz.py",
        "-n",
        str(args.workers if args.workers > 1 else 0),
        "-p",
        "no:cacheprovider",
        "-q",
        f"--hypothesis-seed={args.seed}",
    ]
    start = time.time()
    ran = subprocess.run(pytest, cwd=REPO, env=env)
    hours = (time.time() - start) / 3600
    entries = [json.loads(line) for line in record.read_text().splitlines()] if record.is_file() else []
    table, broken = summary(entries)
    command = shlex.join(
        ["python", "experiments/fuzz_campaign.py", "--seed", str(args.seed)]
        + (["--examples", str(args.examples)] if args.examples else [])
        + (["--workers", str(args.workers)] if args.workers > 1 else [])
    )
    args.out.write_text(
        "# The fuzzing campaign (issue 52)\n\n"
        f"Command: `{command}` (pytest {'passed' if ran.returncode == 0 else f'exit status {ran.returncode}'}). "
        f"Seed {args.seed}; commit {commit()}; {time.strftime('%Y-%m-%d')}; {platform.node()}, {os.cpu_count()} "
        f"cores, {args.workers} worker(s), {hours:.2f} hours (load average at the end {os.getloadavg()[0]:.1f}).\n\n"
        "Each case is a command line built by a surface's generator (tests/fuzz/gen_*.py), run by the real entry "
        "point (in this process; `console script`: the `gpt1` script in a process of its own; `no read "
        "permission`: as an unprivileged user) in a sandbox with a fake HOME and XDG directories. Its outcome: "
        "refused with exactly one `error:` line naming the file (and line) or key and what to do, or succeeded "
        "where the input was valid; else the first property it broke.\n\n"
        + "\n".join(table)
        + "\n\n"
        + ("Broken properties:\n\n" + "\n".join(broken) + "\n" if broken else "No property broken.\n")
    )
    print(f"{len(entries)} cases, {len(broken)} broke a property: {args.out} (each case: {record})")
    return 1 if broken or ran.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
