#!/usr/bin/env bash
# The GPU checks of a lent machine in one call (experiments/results/benchmarks.md, "GPU"): the full GPT-1 bench at 64 x 512,
# bf16-mixed, compiled and eager, this checkout against a baseline commit in turn, then the GPU tests.
#
#   bash experiments/gpu_check.sh prepare [BASELINE]   # here, with pip's registry: fills .gpu/ (git-excluded)
#   bash experiments/gpu_check.sh run                  # on the GPU machine, .gpu/ carried; results under $OUT
#   bash experiments/gpu_check.sh decode [ROUNDS]      # there: batch-1 decoding, baseline and this tree alternating
#   bash experiments/gpu_check.sh setup                # there: only what the image lacks, and gpt1 (for a probe)
#   bash experiments/gpu_check.sh strategies           # there (run ends with it too): DDP, FSDP, DeepSpeed on one GPU
#
# .gpu/ holds what the workplace's CUDA image lacks (wheels of hydra-core, omegaconf, antlr4, datasets, dill,
# multiprocess; DeepSpeed's, built here without its CUDA ops, which it compiles there when first used, hjson, pydantic),
# the sample data (../shared/data does not travel) and the baseline's gpt1/ and conf/ (default 68a8f8a, the commit of
# the first GPU figures).
set -euo pipefail
cd "$(dirname "$0")/.."

prepare() {
    local baseline=${1:-68a8f8a}
    grep -qsx "/.gpu/" .git/info/exclude || echo "/.gpu/" >> .git/info/exclude
    rm -rf .gpu && mkdir -p .gpu/whl .gpu/old
    python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .gpu/whl \
        hydra-core==1.3.8 omegaconf==2.3.1 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
    python -m pip wheel -q --no-deps -w .gpu/whl antlr4-python3-runtime==4.9.3  # sdist only on PyPI
    # trainer=deepspeed: DeepSpeed (sdist only; its ops are built there, by ninja and nvcc, when first used) and what
    # it needs that the image lacks
    python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d .gpu/whl \
        hjson==3.1.0 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
        || echo "DeepSpeed's dependencies not downloaded: the GPU check runs without DeepSpeed"
    DS_BUILD_OPS=0 python -m pip wheel -q --no-deps --no-build-isolation -w .gpu/whl deepspeed==0.19.8 \
        || echo "no DeepSpeed wheel: the GPU check runs without DeepSpeed"
    cp -r "${GPT1_SAMPLE_DATA:-../shared/data}" .gpu/data
    git archive "$baseline" gpt1 conf | tar -x -C .gpu/old
    echo "$baseline" > .gpu/old/COMMIT
    du -sh .gpu
}

bench() {  # bench TREE NAME SECONDS ARGS...: one gpt1 bench of the full model at 64 x 512 from TREE's gpt1 package
    local tree=$1 name=$2 limit=$3; shift 3
    echo "== $name ($tree)"
    (cd "$tree" && timeout "$limit" python -c "import sys; from ${BENCH_MODULE[$tree]} import main; main(sys.argv[1:])" \
        --batch 64 --seq 512 --precision bf16-mixed --mc-batch 0 --json "$OUT/$name.json" "$@") 2>&1 \
        | tee "$OUT/$name.log" | grep -v "^\s*$" | tail -25 || echo "$name failed"
}

setup() {  # what the image lacks, and gpt1 itself (editable)
    OUT=${OUT:-outputs/gpu_check}; mkdir -p "$OUT"
    python -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl
    export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 GPT1_SAMPLE_DATA=$PWD/.gpu/data
    python -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null || echo "gpt1 not installed: the tests will fail"
    export PATH=$PATH:/tmp/site/bin  # (DeepSpeed's scripts)
    nvidia-smi -L
    python -c "import torch, transformers, lightning, datasets; print('torch', torch.__version__, '| transformers', \
transformers.__version__, '| lightning', lightning.__version__, '| datasets', datasets.__version__)" || true
}

decode() {  # the decoding probe (experiments/gpu_decode_probe.py), the baseline's tree and this one in turn
    setup
    for round in $(seq "${1:-3}"); do
        for tree in .gpu/old .; do
            PYTHONPATH=$PWD/$tree:/tmp/site timeout 120 python experiments/gpu_decode_probe.py \
                "$([ "$tree" = . ] && echo new || echo "old-$(cat .gpu/old/COMMIT)")" | grep RESULT || echo "$tree failed"
        done
    done
}

run() {
    setup
    declare -gA BENCH_MODULE=([.]=gpt1.tools.bench [.gpu/old]=gpt1.bench)
    bench . new-compiled 150 --compile --compare hf
    bench .gpu/old old-compiled 120 --compile
    echo "== tests"
    timeout 200 python -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider 2>&1 | tee "$OUT/tests.log" | tail -15 || true
    bench . new-eager 50
    bench .gpu/old old-eager 50
    strategies --no-setup
    python - "$OUT" <<'EOF'
import json, pathlib, sys
print(f"{'run':<14}{'step ms':>9}{'tokens/s':>11}{'MFU':>7}{'vs HF':>7}{'GiB':>6}{'ms/token b1':>13}")
for name in ("new-compiled", "old-compiled", "new-eager", "old-eager"):
    path = pathlib.Path(sys.argv[1]) / f"{name}.json"
    if not path.exists():
        print(f"{name:<14} (no result)"); continue
    r = json.loads(path.read_text()); t = r["train"]; g = r.get("generate", {})
    hf = r.get("hf", {}).get("speedup_train")
    print(f"{name:<14}{1000 * t.get('step_s', float('nan')):>9.1f}{t.get('tokens_per_s', float('nan')):>11,.0f}"
          f"{100 * t.get('mfu', float('nan')):>6.1f}%{(f'{hf:.2f}x' if hf else '-'):>7}"
          f"{t.get('peak_memory_gib', float('nan')):>6.1f}{g.get('batch1_ms_per_token', float('nan')):>13.2f}")
EOF
}

strategies() {  # the same 40 pre-training updates of GPT-1 (117M, 32 x 512, bf16-mixed) on one GPU under DDP, FSDP
    # (FSDP2) and DeepSpeed ZeRO-2: step time and peak memory side by side ($OUT/strategies.json, the runs' last lines
    # in $OUT/strategies.log), then the GPU tests of FSDP and of the memory report. At most about 6 minutes.
    [ "${1:-}" = --no-setup ] || setup
    local work=/tmp/gpt1-strategies
    rm -rf "$work" && mkdir -p "$work"
    for strategy in ddp fsdp deepspeed; do
        echo "== trainer=$strategy"
        timeout 100 python -m gpt1.commands.pretrain trainer=$strategy trainer.devices=1 model=gpt1 data=books \
            tokenizer.vocab_size=40478 model.pad_vocab_to_multiple=64 data.batch_size=32 data.max_valid_windows=32 \
            trainer.max_steps=40 trainer.val_check_interval=1000 trainer.num_sanity_val_steps=0 \
            trainer.log_every_n_steps=1 trainer.enable_progress_bar=false callbacks.samples.every_n_steps=0 \
            logger=csv paths.cache_dir=$work/cache hydra.run.dir=$work/$strategy > "$work/$strategy.log" 2>&1 \
            || echo "trainer=$strategy failed (status $?): $(grep -v '^\s*$' "$work/$strategy.log" | tail -1)"
        { echo "== trainer=$strategy"; tail -40 "$work/$strategy.log"; } >> "$OUT/strategies.log"
    done
    python - "$work" "$OUT/strategies.json" <<'EOF'
import csv, json, pathlib, statistics, sys
work, results = pathlib.Path(sys.argv[1]), {}
print(f"{'trainer':<10}{'step ms':>9}{'tokens/s':>11}{'GPU GB':>8}{'reserved':>10}{'host GB':>9}{'val loss':>10}")
for name in ("ddp", "fsdp", "deepspeed"):
    run = work / name
    if not (run / "metrics.json").exists():
        print(f"{name:<10} (no result: strategies.log)"); continue
    m = json.loads((run / "metrics.json").read_text())
    rows = [r for r in csv.DictReader(open(run / "csv" / "metrics.csv")) if r.get("train/time")]
    t = [float(r["train/time"]) for r in rows][10:]  # after 10 warm-up updates
    step = statistics.median(b - a for a, b in zip(t, t[1:])) if len(t) > 1 else float("nan")
    results[name] = {"step_s": step, "tokens_per_s": 32 * 512 / step, **{k: v for k, v in m.items() if k.startswith(
        ("peak_", "val/loss", "train/loss", "steps"))}}
    gb = {k: m.get(k, float("nan")) for k in ("peak_device_memory_gb", "peak_device_reserved_gb", "peak_host_memory_gb")}
    print(f"{name:<10}{1000 * step:>9.1f}{32 * 512 / step:>11,.0f}{gb['peak_device_memory_gb']:>8.2f}"
          f"{gb['peak_device_reserved_gb']:>10.2f}{gb['peak_host_memory_gb']:>9.2f}{m.get('val/loss', float('nan')):>10.3f}")
pathlib.Path(sys.argv[2]).write_text(json.dumps(results, indent=2) + "\n")
EOF
    echo "== GPU tests: FSDP, memory"
    timeout 80 python -m pytest -m gpu tests/test_gpu.py tests/test_memory.py -k "fsdp or device_peak" -q \
        -p no:cacheprovider 2>&1 | tee "$OUT/strategies-tests.log" | tail -5 || true
}

"$@"
