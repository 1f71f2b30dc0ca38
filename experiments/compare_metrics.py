"""Compare the metrics.json files of two behaviour_check.sh directories, figure by figure, to the last digit
(``gpt1.core.figures``, which ``gpt1 <command> rerun=DIR`` uses too).

Usage: python experiments/compare_metrics.py BEFORE AFTER. Times and peak memory (keys with "time", "per_sec" or
"memory") are listed apart, since they move between any two runs; paths are compared with each directory's own prefix
taken off. Exit status 1 when another figure differs or a file is missing.
"""

import json
import sys
from pathlib import Path

from gpt1.core.figures import compare


def main(before: Path, after: Path) -> int:
    differ = 0
    for path in sorted(before.glob("*.json")):
        other = after / path.name
        if not other.is_file():
            print(f"{path.name}: missing in {after}")
            differ += 1
            continue
        found = compare(
            json.loads(path.read_text()), json.loads(other.read_text()), [str(before.resolve())], [str(after.resolve())]
        )
        print("\n".join(found.lines(path.name)))
        differ += len(found.moved)
    print("equal to the last digit" if not differ else f"{differ} differences")
    return int(bool(differ))


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
