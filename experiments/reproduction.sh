#!/usr/bin/env bash
# The paper's findings at small scale, on the sample data, on a CPU: the ablations of Table 5, the layers-transferred
# curve and the zero-shot curve of Figure 2, each one multirun of conf/experiment/, then `gpt1 report` on each sweep.
# The pre-trained model is the quickstart's (`gpt1 pretrain`: 2 layers, 256 wide, ~0.8M tokens of the sample
# novels; the results recorded in experiments/results/finetuning.md used the earlier 4-layer recipe), far from the
# paper's 117M model and 1B tokens: what a laptop can show in half an hour.
#   bash experiments/reproduction.sh                                    # pre-trains first if RUN has no checkpoint
#   RUN=outputs/exp/quickstart TASK=sentiment STEPS=150 VAL=1000 SEEDS=1,2,3 LAYER_SEEDS=1,2 bash experiments/reproduction.sh
# Writes the sweeps under OUT (outputs/reproduction) and the reports under experiments/results/reproduction/<sweep>/.
set -euo pipefail
run=${RUN:-outputs/reproduction/quickstart}
out=${OUT:-outputs/reproduction}
task=${TASK:-sentiment}
seeds=${SEEDS:-1,2}
ckpt=$run/checkpoints/last.ckpt
[ -f "$ckpt" ] || gpt1 pretrain "hydra.run.dir=$run" trainer.enable_progress_bar=false
# the layers-transferred curve runs n_transfer = 0 .. the checkpoint's depth
layers=$(python -c "import sys, torch
print(torch.load(sys.argv[1], map_location='cpu', weights_only=False)['gpt1']['model_config']['n_layer'])" "$ckpt")

# Every fine-tuning job: the paper's recipe (experiment=finetune) with a CPU budget of updates, scored on the first
# 1,000 validation examples (no test split: the budget goes to more jobs).
common=("task=$task" "trainer.max_steps=${STEPS:-150}" "++task.splits.validation='validation[:${VAL:-1000}]'"
  "~task.data_files.test" trainer.enable_progress_bar=false logger=csv)
gpt1 finetune -m experiment=ablation_aux_lm "init_from=$ckpt" "${common[@]}" "seed=$seeds" \
  "hydra.sweep.dir=$out/ablation_aux_lm"
gpt1 finetune -m experiment=ablation_pretraining "tokenizer_from=$ckpt" "${common[@]}" "seed=$seeds" \
  "hydra.sweep.dir=$out/ablation_pretraining"
gpt1 finetune -m experiment=ablation_lstm "init_from=$ckpt" "${common[@]}" "seed=$seeds" \
  "hydra.sweep.dir=$out/ablation_lstm"
gpt1 finetune -m experiment=layers_transferred "init_from=$ckpt" "${common[@]}" "n_transfer=range(0,$((layers + 1)))" \
  "seed=${LAYER_SEEDS:-1}" "hydra.sweep.dir=$out/layers_transferred"
# the fourth heuristic, Winograd, on the repository's 24 schemas (experiments/conf/task/winograd_sample.yaml)
gpt1 zeroshot -m --config-dir experiments/conf experiment=zero_shot_curve "ckpts=[$run/checkpoints/step*.ckpt]" \
  task=sentiment,multiple_choice,story,winograd_sample "hydra.sweep.dir=$out/zero_shot_curve"

for sweep in ablation_aux_lm ablation_pretraining ablation_lstm layers_transferred zero_shot_curve; do
  gpt1 report "$out/$sweep" --out "experiments/results/reproduction/$sweep"
done
