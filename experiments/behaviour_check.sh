#!/usr/bin/env bash
# Runs each command once on fixed seeds and tiny budgets and collects every metrics.json into OUT: run it before and
# after a change, then `python experiments/compare_metrics.py BEFORE AFTER` says whether any figure moved.
# Usage: bash experiments/behaviour_check.sh OUT   (a few minutes on 2 cores)
set -euo pipefail
out=$(realpath -m "${1:?usage: behaviour_check.sh OUT}")
mkdir -p "$out"
runs="$out/runs"
cache="$out/cache"
export GPT1_CACHE_DIR="$cache"
# the same fp32 kernels on both sides of a comparison (gpt1.cpu.settings.configure would otherwise measure and choose)
export GPT1_CPU_MATMUL="${GPT1_CPU_MATMUL:-onednn}"
quiet=(logger=csv trainer.enable_progress_bar=false)

gpt1 pretrain debug=fast "${quiet[@]}" hydra.run.dir="$runs/pretrain" > "$out/pretrain.log" 2>&1
cp "$runs/pretrain/metrics.json" "$out/pretrain.json"
ckpt="$runs/pretrain/checkpoints/last.ckpt"

for task in sentiment entailment nli similarity paraphrase multiple_choice story; do
  gpt1 finetune task=$task init_from="$ckpt" "${quiet[@]}" batch_size=8 trainer.max_epochs=1 \
    '++task.splits.train="train[:48]"' '++task.splits.validation="validation[:24]"' '++task.splits.test="test[:16]"' \
    hydra.run.dir="$runs/finetune_$task" > "$out/finetune_$task.log" 2>&1
  cp "$runs/finetune_$task/metrics.json" "$out/finetune_$task.json"
done

gpt1 zeroshot task=sentiment ckpts="[$ckpt]" '++task.splits.validation="validation[:64]"' \
  '++task.zeroshot.max_fit_examples=64' hydra.run.dir="$runs/zeroshot_sentiment" > "$out/zeroshot_sentiment.log" 2>&1
cp "$runs/zeroshot_sentiment/metrics.json" "$out/zeroshot_sentiment.json"
gpt1 zeroshot task=multiple_choice ckpts="[$ckpt]" '++task.splits.validation="validation[:32]"' \
  hydra.run.dir="$runs/zeroshot_mc" > "$out/zeroshot_mc.log" 2>&1
cp "$runs/zeroshot_mc/metrics.json" "$out/zeroshot_mc.json"

gpt1 evaluate ckpt="$runs/finetune_nli/checkpoints/last.ckpt" trainer.enable_progress_bar=false \
  hydra.run.dir="$runs/evaluate_task" > "$out/evaluate_task.log" 2>&1
cp "$runs/evaluate_task/metrics.json" "$out/evaluate_task.json"
gpt1 evaluate ckpt="$ckpt" trainer.enable_progress_bar=false data.max_valid_windows=16 \
  hydra.run.dir="$runs/evaluate_ppl" > "$out/evaluate_ppl.log" 2>&1
cp "$runs/evaluate_ppl/metrics.json" "$out/evaluate_ppl.json"
echo "metrics in $out"
