#!/usr/bin/env bash
# Fine-tune each sample task from the quickstart checkpoint and, at the same budget, from random weights
# (init_from=random: the quickstart's tokenizer and architecture, no pre-trained weights); then the zero-shot
# heuristics over the quickstart's saved steps. Results: OUT/<task>/{pretrained,random}/metrics.json and
# OUT/zeroshot_<task>/metrics.json (OUT: outputs/exp); experiments/results/finetuning.md records them.
#   bash experiments/sample_tasks.sh outputs/exp/quickstart       # the run directory of `gpt1 pretrain`
#   TASKS="entailment nli" ZEROSHOT=0 bash experiments/sample_tasks.sh outputs/exp/quickstart
#   OUT=outputs/exp_occurrence RANDOM_INIT=0 ZEROSHOT=0 EXTRA="model.embd_dropout=occurrence" \
#     bash experiments/sample_tasks.sh outputs/exp/quickstart    # one option changed, from the checkpoint only
# The paper's recipe (lr 6.25e-5, 0.2% warm-up then linear decay, lambda 0.5, batch 32) with a CPU budget of
# updates per task (3 epochs where that is less): multiple-choice batches are 8 examples of 4-5 sequences each.
set -euo pipefail
run=${1:?the quickstart run directory}
out=${OUT:-outputs/exp}
read -ra extra_all <<<"${EXTRA:-}"  # overrides added to every fine-tuning run
declare -A budget=(
  [sentiment]="trainer.max_steps=300"
  [entailment]="trainer.max_steps=60"
  [nli]="trainer.max_steps=60"
  [similarity]="trainer.max_steps=75"
  [paraphrase]="trainer.max_steps=60"
  [multiple_choice]="trainer.max_steps=40 batch_size=8"
  [story]="trainer.max_steps=40 batch_size=8"
)
for task in ${TASKS:-sentiment entailment nli similarity paraphrase multiple_choice story}; do
  read -ra extra <<<"${budget[$task]}"
  common=(trainer.enable_progress_bar=false logger=csv "${extra[@]}" "${extra_all[@]}")
  gpt1 finetune "task=$task" "init_from=$run/checkpoints/last.ckpt" "${common[@]}" \
    "hydra.run.dir=$out/$task/pretrained"
  if [ "${RANDOM_INIT:-1}" = 1 ]; then
    gpt1 finetune "task=$task" init_from=random "tokenizer_from=$run/checkpoints/last.ckpt" "${common[@]}" \
      "hydra.run.dir=$out/$task/random"
  fi
done
if [ "${ZEROSHOT:-1}" = 1 ]; then
  for task in sentiment multiple_choice story; do
    gpt1 zeroshot "task=$task" "ckpts=[$run/checkpoints/step*.ckpt]" "hydra.run.dir=$out/zeroshot_$task"
  done
fi
