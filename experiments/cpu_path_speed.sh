#!/usr/bin/env bash
# `gpt1 bench --compare hf` on two trees in turn (base, this tree, base, this tree, ...), ROUNDS times each, sharing
# one CPU kernel cache (the first run measures, every later one reads the same choice), then each run's training-step
# and batch-1 decoding speed-ups over HF's, which the bench times in turn with gpt1's within the run. Compares the
# CPU path applied from above (gpt1.cpu.layers, this tree) with the layers that took it themselves (e.g. c96c481).
# Usage: bash experiments/cpu_path_speed.sh BASE_TREE OUT [ROUNDS [BENCH FLAGS...]]
#   BASE_TREE: a checkout of the commit to compare (git worktree add --detach /work/base-c96 c96c481); both trees
#   run in this environment's Python, each through PYTHONPATH. Defaults: 2 rounds, --batch 2 --mc-batch 0.
set -euo pipefail
base=$(realpath "${1:?usage: cpu_path_speed.sh BASE_TREE OUT [ROUNDS [BENCH FLAGS...]]}")
out=$(realpath -m "${2:?usage: cpu_path_speed.sh BASE_TREE OUT [ROUNDS [BENCH FLAGS...]]}")
rounds=${3:-2}
shift $(($# < 3 ? $# : 3))
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--batch 2 --mc-batch 0)
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
export XDG_CACHE_HOME="$out/cache"
for round in $(seq "$rounds"); do
  for side in base this; do
    tree=$([ "$side" = base ] && echo "$base" || echo "$here")
    echo "$(date +%T) round $round, $side ($tree), load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out/runs.txt"
    PYTHONPATH="$tree" python -m gpt1.tools.bench --compare hf "${flags[@]}" --json "$out/$side-$round.json" \
      > "$out/$side-$round.log" 2>&1
  done
done
python - "$out" <<'EOF'
import json, sys
from pathlib import Path

print("run      train x HF   decode x HF   gpt1 step s   gpt1 ms/token")
for path in sorted(Path(sys.argv[1]).glob("*.json"), key=lambda p: (p.stem.split("-")[1], p.stem)):
    r = json.loads(path.read_text())
    hf, gen = r["hf"], r["generate"]
    print(f"{path.stem:8} {hf['speedup_train']:10.3f} {hf['speedup_generate']:13.2f} {r['train']['step_s']:13.3f}"
          f" {gen['batch1_ms_per_token']:15.1f}")
EOF
