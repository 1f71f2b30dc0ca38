#!/bin/bash
# Issue 45's reproduction, what a user sees: a tiny pre-training, a 3-seed fine-tuning sweep whose launcher is SIGKILLed
# during seed 2 (tests/sweep_app.py: 1 s per update until stopped), the same command with resume=auto, then the sweep
# reordered and extended (seed=3,2,1,4), then gpt1 report. Usage: experiments/sweep_resume.sh DIR (a new directory),
# from the checkout, its venv active. Recorded in experiments/results/sweeps_world_size_provenance.md.
set -e
repo=$(pwd) out=$(realpath -m "$1")
mkdir -p "$out" && cd "$out"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 GPT1_CPU_MATMUL=torch
gpt1 pretrain model=tiny tokenizer.vocab_size=512 'data.train_files=[${paths.sample_data}/books/train/northanger_abbey.txt]' \
  data.batch_size=8 data.max_valid_windows=32 logger=csv trainer.enable_progress_bar=false trainer.num_sanity_val_steps=0 \
  trainer.max_steps=2 callbacks.samples.every_n_steps=0 paths.cache_dir="$out/cache" hydra.run.dir="$out/pre" >/dev/null 2>&1
common=(task=sentiment "++task.splits.train='train[:64]'" "++task.splits.validation='validation[:16]'"
  "++task.splits.test='test[:16]'" batch_size=8 trainer.max_steps=6 callbacks.checkpoint.every_n_steps=1 logger=csv
  trainer.enable_progress_bar=false init_from="$out/pre/checkpoints/last.ckpt" paths.cache_dir="$out/cache"
  hydra.sweep.dir="$out/sweep")
GPT1_TEST_STEP_S=1 PYTHONPATH="$repo" python "$repo/tests/sweep_app.py" -m hydra.job.name=finetune seed=1,2,3 \
  "${common[@]}" >/dev/null 2>&1 &
pid=$!
until ls "$out"/sweep/seed=2-*/checkpoints/step0000002.ckpt >/dev/null 2>&1; do sleep 0.2; done
kill -9 $pid && wait $pid || true
gpt1 finetune -m seed=1,2,3 resume=auto "${common[@]}" 2>/dev/null | grep -A3 "^resuming the sweep"
gpt1 finetune -m seed=3,2,1,4 resume=auto "${common[@]}" 2>/dev/null | grep -A4 "^resuming the sweep"
gpt1 report "$out/sweep" | tail -1
