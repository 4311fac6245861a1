#!/usr/bin/env bash
# `depthgrad finetune` end to end, run by ctest: LoRA adapters over the imported tiny Llama and
# tiny GPT-2 of tests/data/hf, 50 steps on the first 200 kB of Tiny Shakespeare (as your own
# text). For each: the training loss falls (the mean of steps 46-50 below that of steps 1-5), the
# adapter files are PEFT's (adapter_config.json's fields, adapter_model.safetensors' keys, F32),
# the merged model.safetensors is read by `depthgrad eval`, a run stopped at step 25 and resumed
# gives the adapter's bytes of the straight run; with MPI, 2 ranks with --accum 1 give the bits of
# one process with --accum 2; over an int8 base the loss falls too; and the refusals of bad --lora
# and --base-precision flags.
# Usage: tests/finetune_lora.sh PATH/TO/depthgrad DATA_DIR SOURCE_DIR [mpirun]
set -u
BIN="$1"
DATA="${2:-}"
SRC="$3"
MPIRUN="${4:-}"
if [ -z "$DATA" ]; then
  echo "SKIPPED: finetune_lora needs the data directory (DG_TEST_DATA_DIR is empty)"
  exit 77
fi
if [ ! -f "$DATA/tiny_shakespeare.txt" ]; then
  echo "SKIPPED: finetune_lora needs $DATA/tiny_shakespeare.txt (tools/download-data.sh)"
  exit 77
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export XDG_CACHE_HOME="$WORK/cache"
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # containers without CMA (ptrace) support
failures=0
passes=0
pass() { passes=$((passes + 1)); echo "ok: $1"; }
fail() { failures=$((failures + 1)); echo "FAIL: $1"; }

head -c 200000 "$DATA/tiny_shakespeare.txt" > "$WORK/shakespeare.txt"
# The tensor bytes of a safetensors file (everything after its JSON header).
tensor_bytes() {
  local n
  n=$(od -An -t u8 -N8 "$1" | tr -d ' ')
  tail -c +$((9 + n)) "$1" | sha256sum | cut -d' ' -f1
}
header() { head -c "$(($(od -An -t u8 -N8 "$1" | tr -d ' ') + 8))" "$1" | tail -c +9; }
losses() { sed -E 's/.*"loss": *([^,}]+).*/\1/' "$1/steps.jsonl"; }
mean() { awk '{ s += $1; n++ } END { printf "%.6f\n", s / n }'; }

finetune() { "$BIN" finetune --dataset "$WORK/shakespeare.txt" --threads 1 --quiet --batch 4 \
  --lr 3e-3 --eval-windows 4 "$@"; }

check_model() {
  local name="$1" lora="$2" key="$3" shape="$4"
  local from="$SRC/tests/data/hf/$name" out="$WORK/$name"
  if ! finetune --from "$from" --lora "$lora" --steps 50 --output-dir "$out" > "$WORK/$name.log" 2>&1; then
    fail "$name: finetune"; cat "$WORK/$name.log"; return
  fi
  pass "$name: 50 steps"
  grep -q "trainable params: .* || all params: .* || trainable%: " "$WORK/$name.log" &&
    pass "$name: PEFT's trainable-parameter line" || fail "$name: no trainable-parameter line"
  local first last
  first=$(losses "$out" | head -5 | mean)
  last=$(losses "$out" | tail -5 | mean)
  if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.05) }'; then
    pass "$name: training loss falls ($first -> $last)"
  else
    fail "$name: training loss $first -> $last"
  fi
  # PEFT's files
  local config="$out/adapter_config.json"
  for field in '"peft_type": "LORA"' '"task_type": "CAUSAL_LM"' '"bias": "none"' \
    '"use_dora": false' '"inference_mode": true' '"modules_to_save": null'; do
    grep -qF "$field" "$config" || fail "$name: adapter_config.json lacks $field"
  done
  if header "$out/adapter_model.safetensors" | grep -qF "\"$key\":{\"dtype\":\"F32\",\"shape\":$shape" &&
    header "$out/adapter_model.safetensors" | grep -qF '"__metadata__":{"format":"pt"}'; then
    pass "$name: adapter_model.safetensors has PEFT's keys"
  else
    fail "$name: adapter_model.safetensors: no $key $shape"; header "$out/adapter_model.safetensors"
  fi
  "$BIN" eval --checkpoint "$out/model.safetensors" --dataset "$WORK/shakespeare.txt" \
    --windows 2 --threads 1 > /dev/null 2>&1 && pass "$name: the merged model evaluates" ||
    fail "$name: eval of the merged model.safetensors"
  # Stopped at step 25 (a run of 25 steps), then resumed to 50: the straight run's adapter.
  finetune --from "$from" --lora "$lora" --steps 25 --output-dir "$out-resumed" > /dev/null 2>&1 &&
    finetune --from "$from" --lora "$lora" --steps 50 --output-dir "$out-resumed" \
      --resume "$out-resumed/checkpoint.safetensors" > /dev/null 2>&1
  if [ "$(tensor_bytes "$out-resumed/adapter_model.safetensors" 2>/dev/null)" = \
    "$(tensor_bytes "$out/adapter_model.safetensors")" ]; then
    pass "$name: resumed at step 25 = straight run, bit for bit"
  else
    fail "$name: the resumed run's adapter differs"
  fi
}

check_model llama "r=4,alpha=8,targets=q_proj,v_proj,down_proj" \
  "base_model.model.model.layers.1.mlp.down_proj.lora_A.weight" "[4,96]"
check_model gpt2 "r=4,alpha=8,targets=c_attn,c_proj" \
  "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight" "[192,4]"

# Ranks: 2 processes with --accum 1 against one with --accum 2 (no dropout: each rank draws its
# own masks).
if [ -n "$MPIRUN" ]; then
  lora="r=4,alpha=8,targets=c_attn,c_fc"
  from="$SRC/tests/data/hf/gpt2"
  finetune --from "$from" --lora "$lora" --steps 10 --batch 2 --accum 2 --output-dir "$WORK/accum" \
    > /dev/null 2>&1
  "$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np 2 -x DEPTHGRAD_THREADS=1 \
    "$BIN" finetune --from "$from" --lora "$lora" --steps 10 --batch 2 --dataset "$WORK/shakespeare.txt" \
    --threads 1 --quiet --lr 3e-3 --eval-windows 4 --output-dir "$WORK/ranks" > "$WORK/ranks.log" 2>&1
  if [ -f "$WORK/ranks/adapter_model.safetensors" ] &&
    [ "$(tensor_bytes "$WORK/ranks/adapter_model.safetensors")" = \
      "$(tensor_bytes "$WORK/accum/adapter_model.safetensors")" ]; then
    pass "2 ranks = 1 process with --accum 2, bit for bit"
  else
    fail "2 ranks differ from --accum 2"; cat "$WORK/ranks.log"
  fi
else
  echo "skipped: the MPI comparison (built without MPI)"
fi

# Refusals name the flag.
refused() {
  local name="$1" text="$2" err
  shift 2
  err="$("$BIN" finetune --from "$SRC/tests/data/hf/llama" --dataset "$WORK/shakespeare.txt" \
    --output-dir "$WORK/refused" "$@" 2>&1 >/dev/null)"
  if [ $? -eq 2 ] && printf '%s' "$err" | grep -qF -- "$text"; then
    pass "$name"
  else
    fail "$name: got '$err'"
  fi
}
refused "r=0 refused" "--lora: r must be a positive integer, got '0'" --lora r=0
refused "unknown --lora key refused" "--lora: unknown key 'rank'" --lora rank=4
refused "unknown target refused" "--lora targets: 'c_attn' matches no module of LlamaForCausalLM" \
  --lora r=4,targets=c_attn
refused "unknown --base-precision refused" "--base-precision: expected f32, bf16 or int8, got 'f16'" \
  --base-precision f16

# An int8 base (the blocks' Linears quantized per output row): the adapters still learn, a resume
# is bit-exact, and no merged model is written (a merge writes float32 weights).
int8=(--from "$SRC/tests/data/hf/llama" --lora r=4,alpha=8,targets=q_proj,v_proj,down_proj
  --base-precision int8)
if finetune "${int8[@]}" --steps 50 --output-dir "$WORK/int8" > "$WORK/int8.log" 2>&1 &&
  [ -f "$WORK/int8/adapter_model.safetensors" ] && [ ! -e "$WORK/int8/model.safetensors" ]; then
  first=$(losses "$WORK/int8" | head -5 | mean)
  last=$(losses "$WORK/int8" | tail -5 | mean)
  if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.05) }'; then
    pass "int8 base: training loss falls ($first -> $last)"
  else
    fail "int8 base: training loss $first -> $last"
  fi
  finetune "${int8[@]}" --steps 25 --output-dir "$WORK/int8-resumed" > /dev/null 2>&1 &&
    finetune "${int8[@]}" --steps 50 --output-dir "$WORK/int8-resumed" \
      --resume "$WORK/int8-resumed/checkpoint.safetensors" > /dev/null 2>&1
  [ "$(tensor_bytes "$WORK/int8-resumed/adapter_model.safetensors" 2>/dev/null)" = \
    "$(tensor_bytes "$WORK/int8/adapter_model.safetensors")" ] &&
    pass "int8 base: resumed at step 25 = straight run" || fail "int8 base: the resumed adapter differs"
else
  fail "int8 base: finetune"; cat "$WORK/int8.log"
fi

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
