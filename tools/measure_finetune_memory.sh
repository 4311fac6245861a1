#!/usr/bin/env bash
# Peak resident memory and tokens/s of fine-tuning one Hugging Face Llama or GPT-2 folder: full
# fine-tuning in float32 (`depthgrad import`, then `depthgrad train --init-from`) and LoRA
# (`depthgrad finetune --lora`) over a float32, a bf16 and an int8 base, each a few steps on the
# same text, timed by /usr/bin/time -v ("Fine-tuning memory" in tools/README.md). Prints one
# Markdown table row per run: the peak RSS of the whole command (loading the model included), the
# peak RSS while it trains (VmRSS sampled every 0.2 s from the end of the first step to the end
# of the last, so neither the loading nor the final evaluation and writing count), the
# median tokens/s of the steps after the first (steps.jsonl), the wall time, the trainable
# parameters and the load average when the run started (the machine may be shared).
#
#   tools/measure_finetune_memory.sh HF_DIR TEXT OUT_DIR [MODES]
#   tools/measure_finetune_memory.sh llama-12x768-hf tiny_shakespeare.txt runs/mem
#
# MODES (default "full f32 bf16 int8") picks the runs; STEPS (4), BATCH (1), THREADS (2), LORA
# (r=8,alpha=16,targets=q_proj,v_proj) and DEPTHGRAD (build/depthgrad) come from the environment.
# The sequence length is the model's context (max_position_embeddings): finetune trains at it.
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,17p' "$0"
  exit 2
fi
hf=$1 text=$2 out=$3
modes=${4:-full f32 bf16 int8}
steps=${STEPS:-4} batch=${BATCH:-1} threads=${THREADS:-2}
lora=${LORA:-r=8,alpha=16,targets=q_proj,v_proj}
dg=${DEPTHGRAD:-build/depthgrad}
mkdir -p "$out"
common=(--dataset "$text" --steps "$steps" --batch "$batch" --eval-windows 2
  --checkpoint-every 0 --threads "$threads" --no-cache --quiet --overwrite)

# The median of the tokens/s of the steps after the first, from a steps.jsonl.
median_tokens_per_second() {
  grep -o '"tokens_per_second":[0-9.e+-]*' "$1" | tail -n +2 | cut -d: -f2 | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) printf "%.1f", v[(NR + 1) / 2];
      else printf "%.1f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# One run under /usr/bin/time -v; prints its table row.
run() {
  local name=$1 trainable=$2 log=$out/$1.log
  shift 2
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  rm -f "$out/$name/steps.jsonl"
  env -u OPENBLAS_CORETYPE /usr/bin/time -v "$@" >"$log" 2>&1 &
  local pid=$! training=0
  while kill -0 "$pid" 2>/dev/null; do  # the largest VmRSS of the command's child
    local logged
    logged=0
    [ -f "$out/$name/steps.jsonl" ] && logged=$(wc -l <"$out/$name/steps.jsonl")
    if [ "$logged" -ge 1 ] && [ "$logged" -lt "$steps" ]; then  # steps 2..last, not the writing
      local child rss_kb
      child=$(pgrep -P "$pid" | head -1 || true)
      rss_kb=$(awk '/^VmRSS/ { print $2 }' "/proc/$child/status" 2>/dev/null || true)
      [ -n "$rss_kb" ] && [ "$rss_kb" -gt "$training" ] && training=$rss_kb
    fi
    sleep 0.2
  done
  wait "$pid" || {
    echo "$name failed: see $log" >&2
    return 1
  }
  local training_rss
  training_rss=$(awk -v k="$training" 'BEGIN { printf "%.2f GiB", k / 1048576 }')
  local rss wall
  rss=$(awk '/Maximum resident set size/ { printf "%.2f GiB", $NF / 1048576 }' "$log")
  wall=$(awk '/Elapsed \(wall clock\)/ { print $NF }' "$log")
  if [ "$trainable" = from-log ]; then
    trainable=$(grep -o 'trainable params: [0-9,]*' "$log" | cut -d' ' -f3)
  fi
  echo "| $name | $rss | $training_rss | $(median_tokens_per_second "$out/$name/steps.jsonl") | $wall | $trainable | $load |"
}

echo "| run | peak RSS | peak RSS training | tokens/s (median, steps 2-$steps) | wall | trainable parameters | load before |"
echo "|---|---|---|---|---|---|---|"
for mode in $modes; do
  case $mode in
    full)
      "$dg" import --from "$hf" --to "$out/imported" >"$out/import.log"
      params=$(grep -o '([0-9]* parameters)' "$out/import.log" | tr -dc 0-9)
      run full "$params" "$dg" train --init-from "$out/imported" --lr 3e-5 \
        --output-dir "$out/full" "${common[@]}"
      ;;
    f32 | bf16 | int8)
      run "$mode" from-log "$dg" finetune --from "$hf" --lora "$lora" --base-precision "$mode" \
        --output-dir "$out/$mode" "${common[@]}"
      ;;
    *)
      echo "unknown mode $mode (full, f32, bf16, int8)" >&2
      exit 2
      ;;
  esac
done
