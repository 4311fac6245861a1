#!/usr/bin/env bash
# The validation-loss curves of full fine-tuning against LoRA on the two tiny random Hugging Face
# models of tests/data/hf (Llama and GPT-2), on Tiny Shakespeare: full fine-tuning in float32
# (`depthgrad import`, then `train --init-from`), LoRA r=8, alpha=16 over a float32 and an int8
# base (`depthgrad finetune`), each 400 steps of batch 8 with the validation loss every 25 steps on
# the same 128 windows, and the loss before training from `depthgrad eval` on those windows. Writes
# tools/results/finetune-curves/{llama,gpt2}.svg and .md (the charts and tables that
# tools/README.md, "Fine-tuning memory", shows), and keeps the runs in WORK.
#
#   tools/results/finetune_curves.sh BUILD_DIR DATA_DIR WORK
#   tools/results/finetune_curves.sh build data runs/finetune-curves
#
# BUILD_DIR has depthgrad and finetune_curves; DATA_DIR has tiny_shakespeare.txt. One thread, so
# the runs are the same bits on any machine; a few minutes in all.
set -euo pipefail
if [ $# -ne 3 ]; then
  sed -n '2,14p' "$0"
  exit 2
fi
build=$1 data=$2 work=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
results=$root/tools/results/finetune-curves
mkdir -p "$work" "$results"
common=(--dataset tiny-shakespeare --dataset-dir "$data" --steps 400 --batch 8 --eval-every 25
  --eval-windows 128 --schedule constant --weight-decay 0 --checkpoint-every 0 --threads 1
  --seed 1 --no-cache --quiet --overwrite)

# MODEL TARGETS: the four runs of one tiny model and its chart.
curves() {
  local model=$1 targets=$2 hf=$root/tests/data/hf/$1
  local lora="r=8,alpha=16,targets=$targets"
  "$build/depthgrad" import --from "$hf" --to "$work/$model-imported" >/dev/null
  local start
  start=$("$build/depthgrad" eval --checkpoint "$work/$model-imported/model.safetensors" \
    --dataset tiny-shakespeare --dataset-dir "$data" --windows 128 --no-cache |
    sed -E 's/.*loss ([0-9.]+) .*/\1/')
  "$build/depthgrad" train --init-from "$work/$model-imported" --lr 1e-3 \
    --output-dir "$work/$model-full" "${common[@]}" >/dev/null
  for base in f32 int8; do
    "$build/depthgrad" finetune --from "$hf" --lora "$lora" --base-precision "$base" --lr 3e-3 \
      --output-dir "$work/$model-lora-$base" "${common[@]}" >/dev/null
  done
  "$build/finetune_curves" --title "$model (tests/data/hf): validation loss on Tiny Shakespeare" \
    --start "$start" --svg "$results/$model.svg" "full, float32, lr 1e-3=$work/$model-full" \
    "LoRA r=8 $targets, f32 base, lr 3e-3=$work/$model-lora-f32" \
    "LoRA r=8 $targets, int8 base, lr 3e-3=$work/$model-lora-int8" >"$results/$model.md"
  echo "$results/$model.svg, $results/$model.md"
}

curves llama q_proj,v_proj
curves gpt2 c_attn
