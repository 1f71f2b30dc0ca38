#!/usr/bin/env bash
# The GPU checks of a lent machine in one call: `all` runs the GPU tests (tests/test_gpu.py), then
# experiments/gpu_check.py (its docstring lists the steps: the bench's and gpt1 pretrain's steps at 64 x 512 compiled
# and eager, the chunked LM loss against the whole logits, DDP, FSDP2 and DeepSpeed after 40 updates, FSDP2 compiled,
# decoding), under 10 minutes on an H100.
#
#   bash experiments/gpu_check.sh prepare [BASELINE]   # here, with pip's registry: fills .gpu/ (git-excluded)
#   bash experiments/gpu_check.sh [all]                # on the GPU machine, .gpu/ carried: results under $OUT
#   bash experiments/gpu_check.sh dry [FLAGS]          # anywhere: the same steps on the tiny model on the CPU
#   bash experiments/gpu_check.sh decode [ROUNDS]      # there: batch-1 decoding, baseline and this tree alternating
#   bash experiments/gpu_check.sh setup                # there: only what the image lacks, and gpt1 (for a probe)
#
# .gpu/ holds what the workplace's CUDA image lacks (wheels of hydra-core, omegaconf, antlr4, datasets, dill,
# multiprocess; DeepSpeed's, built here without its CUDA ops, which it compiles there when first used, hjson, pydantic)
# and, for `decode`, the baseline's gpt1/ and conf/ (default 68a8f8a, the commit of the first GPU figures).
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
    git archive "$baseline" gpt1 conf | tar -x -C .gpu/old
    echo "$baseline" > .gpu/old/COMMIT
    du -sh .gpu
}

setup() {  # what the image lacks, and gpt1 itself (editable)
    if [ ! -d .gpu/whl ]; then
        echo "error: .gpu/ is missing: run 'bash experiments/gpu_check.sh prepare' where pip's registry is reached, then carry .gpu to the GPU machine" >&2
        exit 2
    fi
    OUT=${OUT:-outputs/gpu_check}; mkdir -p "$OUT"
    python -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl
    export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1  # the sample data travels in the tree (sample_data/)
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

all() {  # setup, the GPU tests, then every step of experiments/gpu_check.py, the results under $OUT
    setup
    timeout 90 python -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider 2>&1 | tee "$OUT/tests.log" | tail -5 || true
    python experiments/gpu_check.py all --out "$OUT" --budget 380
}

dry() {  # the same steps on the tiny model on the CPU (tests/test_gpu_check.py runs this), FLAGS passed on
    OUT=${OUT:-outputs/gpu_check_dry}
    python experiments/gpu_check.py all --dry --out "$OUT" "$@"
}

step=${1:-all}
case "$step" in
    prepare | setup | all | dry | decode) shift $(($# > 0)); "$step" "$@" ;;
    *) echo "error: no step '$step' in experiments/gpu_check.sh: prepare, all (the default), dry, decode or setup" >&2; exit 2 ;;
esac
