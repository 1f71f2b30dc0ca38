#!/usr/bin/env bash
# Issue 25's before/after table: the quickstart checkpoint fine-tuned on every sample task at sample_tasks.sh's
# budgets by the code before issue 25 (commit 9263b2c, in a git worktree with its own venv), by this checkout, and by
# this checkout with each of the original code's defaults reverted alone; seeds 1234 (the default), 1 and 2. Then the
# zero-shot curve of the four heuristics over the checkpoint's steps, and its report. About 70 minutes on 2 Zen 4
# cores, 2 hours on 2 AVX2 ones.
#   bash experiments/fidelity.sh                   # into outputs/fidelity; skips the runs it finds done
#   SEEDS=1234 bash experiments/fidelity.sh        # one seed: about 25 minutes (Zen 4)
#   python experiments/fidelity_table.py outputs/fidelity     # the table
set -euo pipefail
repo=$(git rev-parse --show-toplevel)
out=$(realpath -m "${OUT:-outputs/fidelity}")
before=9263b2c
mkdir -p "$out/logs"
export GPT1_SAMPLE_DATA=${GPT1_SAMPLE_DATA:-$(realpath "$repo/../shared/data")}

ckpt=$out/quickstart/checkpoints/last.ckpt
if [ ! -f "$ckpt" ]; then
  gpt1 pretrain "hydra.run.dir=$out/quickstart" callbacks.checkpoint.every_n_steps=25 callbacks.checkpoint.keep_last=-1 \
    trainer.enable_progress_bar=false > "$out/logs/pretrain.log" 2>&1
fi
# 9263b2c's model config has no embd_dropout (its one way, occurrence): the same weights with the key dropped
ckpt_before=$out/quickstart_for_$before.ckpt
[ -f "$ckpt_before" ] || python - "$ckpt" "$ckpt_before" <<'EOF'
import sys, torch
ckpt = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
assert ckpt["gpt1"]["model_config"].pop("embd_dropout") == "occurrence"
torch.save(ckpt, sys.argv[2])
EOF
if [ ! -x "$out/code_$before/.venv/bin/gpt1" ]; then
  git -C "$repo" worktree add --force "$out/code_$before" "$before" > /dev/null
  python3 -m venv "$out/code_$before/.venv"
  "$out/code_$before/.venv/bin/pip" install --quiet "torch==2.13.0" -e "$out/code_$before" > "$out/logs/install.log" 2>&1
fi

declare -A budget  # experiments/sample_tasks.sh's, which 9263b2c's copy runs with the random-weight runs too
budget=([sentiment]="trainer.max_steps=300" [entailment]="trainer.max_steps=60" [nli]="trainer.max_steps=60"
  [similarity]="trainer.max_steps=75" [paraphrase]="trainer.max_steps=60"
  [multiple_choice]="trainer.max_steps=40 batch_size=8" [story]="trainer.max_steps=40 batch_size=8")
tasks="sentiment entailment nli similarity paraphrase multiple_choice story"
# column -> the override that reverts one of the original's defaults (and the tasks where it can matter)
declare -A column=([after]="" [ckpt_dropout]="model.embd_pdrop=null model.attn_pdrop=null model.resid_pdrop=null"
  [occurrence]="model.embd_dropout=occurrence" [schedule_linear]="optim.schedule=linear"
  [selection_last]="model_selection=last")
declare -A column_tasks=([selection_last]="entailment similarity")  # the budgets that validate before their end

for seed in ${SEEDS:-1234 1 2}; do
  for task in $tasks; do
    dir=$out/seed$seed/before/$task/pretrained  # the layout of sample_tasks.sh's runs
    [ -f "$dir/metrics.json" ] && continue
    read -ra extra <<<"${budget[$task]}"
    "$out/code_$before/.venv/bin/gpt1" finetune "task=$task" "init_from=$ckpt_before" trainer.enable_progress_bar=false \
      logger=csv "${extra[@]}" "seed=$seed" "hydra.run.dir=$dir" > "$out/logs/seed${seed}_before_$task.log" 2>&1
  done
  for col in after ckpt_dropout occurrence schedule_linear selection_last; do
    for task in ${column_tasks[$col]:-$tasks}; do
      [ -f "$out/seed$seed/$col/$task/pretrained/metrics.json" ] && continue
      OUT=$out/seed$seed/$col TASKS=$task RANDOM_INIT=0 ZEROSHOT=0 EXTRA="seed=$seed ${column[$col]}" \
        bash "$repo/experiments/sample_tasks.sh" "$out/quickstart" > "$out/logs/seed${seed}_${col}_$task.log" 2>&1
    done
  done
done

if [ ! -f "$out/zero_shot_curve/report.md" ]; then
  (cd "$repo" && gpt1 zeroshot -m --config-dir experiments/conf experiment=zero_shot_curve \
    "ckpts=[$out/quickstart/checkpoints/step*.ckpt]" task=sentiment,multiple_choice,story,winograd_sample \
    "hydra.sweep.dir=$out/zero_shot_curve/runs" > "$out/logs/zero_shot_curve.log" 2>&1)
  gpt1 report "$out/zero_shot_curve/runs" --out "$out/zero_shot_curve"
fi
python "$repo/experiments/fidelity_table.py" "$out"
