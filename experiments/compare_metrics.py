"""Compare the metrics.json files of two behaviour_check.sh directories, figure by figure, to the last digit.

Usage: python experiments/compare_metrics.py BEFORE AFTER. Times and peak memory (keys with "time", "per_sec" or
"memory") are listed apart, since they move between any two runs; paths are compared with each directory's own prefix
taken off. Exit status 1 when another figure differs or a file is missing.
"""

import json
import sys
from pathlib import Path


def flat(value, root: str, prefix=""):
    if isinstance(value, (dict, list)):
        for k, v in value.items() if isinstance(value, dict) else enumerate(value):
            yield from flat(v, root, f"{prefix}{k}.")
    else:
        yield prefix[:-1], value.replace(root, "<dir>") if isinstance(value, str) else value


def main(before: Path, after: Path) -> int:
    differ = 0
    for path in sorted(before.glob("*.json")):
        other = after / path.name
        if not other.is_file():
            print(f"{path.name}: missing in {after}")
            differ += 1
            continue
        a = dict(flat(json.loads(path.read_text()), str(before.resolve())))
        b = dict(flat(json.loads(other.read_text()), str(after.resolve())))
        timed = sorted(k for k in a.keys() | b.keys() if any(w in k for w in ("time", "per_sec", "memory")))
        moved = [k for k in sorted(a.keys() | b.keys()) if k not in timed and a.get(k) != b.get(k)]
        for k in moved:
            print(f"{path.name}: {k}: {a.get(k, '(absent)')!r} -> {b.get(k, '(absent)')!r}")
        apart = ", ".join(timed)
        print(f"{path.name}: {len(a) - len(timed)} figures, {len(moved)} differ; times and memory apart: {apart}")
        differ += len(moved)
    print("equal to the last digit" if not differ else f"{differ} differences")
    return int(bool(differ))


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
