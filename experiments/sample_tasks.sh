#!/usr/bin/env bash
# Fine-tune each sample task from the quickstart checkpoint and, at the same budget, from random weights
# (init_from=random, the quickstart's tokenizer and architecture); then the zero-shot heuristics over the
# quickstart's saved steps. Results: outputs/exp/<task>/{pretrained,random}/metrics.json, outputs/exp/zeroshot_*/.
#   bash experiments/sample_tasks.sh outputs/exp/quickstart        # the run directory of `gpt1 pretrain`
# Budget: the paper's recipe (batch 32, lr 6.25e-5, 0.2% warm-up, linear decay, lambda 0.5), 3 epochs or at most
# 300 updates, whichever comes first (STEPS overrides the cap).
set -euo pipefail
run=${1:?the quickstart run directory}
steps=${STEPS:-300}
common=(trainer.enable_progress_bar=false logger=csv "trainer.max_steps=$steps")
for task in ${TASKS:-sentiment entailment nli similarity paraphrase multiple_choice story}; do
  gpt1 finetune "task=$task" "init_from=$run/checkpoints/last.ckpt" "${common[@]}" \
    "hydra.run.dir=outputs/exp/$task/pretrained"
  gpt1 finetune "task=$task" init_from=random "tokenizer_from=$run/checkpoints/last.ckpt" "${common[@]}" \
    "hydra.run.dir=outputs/exp/$task/random"
done
for task in sentiment multiple_choice story; do
  gpt1 zeroshot "task=$task" "ckpts=[$run/checkpoints/step*.ckpt]" "hydra.run.dir=outputs/exp/zeroshot_$task"
done
