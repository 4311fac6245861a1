#!/usr/bin/env bash
# The GPT-2 example (tools/example/gpt2.cpp, built in the tree as example_gpt2) end to end on Tiny
# Shakespeare, run by ctest: a short run trains (the loss falls), evaluates and samples through the
# CausalLM interface; the same run stopped by SIGINT after a few steps and resumed with the printed
# command gives byte-identical weights and the same losses; the model's K/V cache gives the full
# forward's logits (--check-cache, on the trained weights); with mpirun, 2 ranks x accum 1 give the
# bits of 1 process x accum 2, and a 2-rank run stopped by SIGTERM to one rank resumes to the same bits.
# Usage: tests/example_gpt2.sh PATH/TO/example_gpt2 DATA_DIR [mpirun]
set -u
BIN="$1"
DATA="${2:-}"
MPIRUN="${3:-}"
if [ -z "$DATA" ]; then
  echo "SKIPPED: example_gpt2 needs the data directory (DG_TEST_DATA_DIR is empty)"
  exit 77
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # containers without CMA (ptrace) support
failures=0
passes=0
pass() { passes=$((passes + 1)); echo "ok: $1"; }
fail() { failures=$((failures + 1)); echo "FAIL: $1"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
# Each step's line without its timings: what must be equal between runs.
losses() { sed 's/,"seconds".*//' "$1/steps.jsonl"; }
checksum() { grep -o 'weights checksum [0-9a-f]*' "$1"; }
wait_lines() {  # FILE N: up to 60 s until FILE has N lines
  for _ in $(seq 600); do
    [ -f "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}

TINY=(--text "$DATA/tiny_shakespeare.txt" --vocab 512 --dim 64 --layers 2 --heads 4 --seq-len 32 --batch 4
  --threads 1 --eval-windows 8 --log-every 20 --sample-tokens 60 --prompt "Who's there?")

# --- (1) a whole run: the loss falls; validation loss, the cache check and a sample are printed ---
"$BIN" "${TINY[@]}" --steps 300 --out "$WORK/whole" > "$WORK/whole.out" 2>&1
rc=$?
first=$(head -1 "$WORK/whole/steps.jsonl" 2> /dev/null | grep -o '"loss":[^,]*' | cut -d: -f2)
last=$(tail -1 "$WORK/whole/steps.jsonl" 2> /dev/null | grep -o '"loss":[^,]*' | cut -d: -f2)
if [ $rc -eq 0 ] && [ "$(wc -l < "$WORK/whole/steps.jsonl")" -eq 300 ] && [ -s "$WORK/whole/model.safetensors" ] &&
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }'; then
  pass "300 steps train (loss $first -> $last), steps.jsonl has one line per step"
else
  fail "the whole run (rc=$rc, loss '$first' -> '$last')"; tail -5 "$WORK/whole.out"
fi
grep -q '^validation loss [0-9.]* (perplexity [0-9.]*) over 8 windows of 32 tokens' "$WORK/whole.out" &&
  pass "validation loss by evaluate_loss: $(grep '^validation loss' "$WORK/whole.out")" || fail "no validation loss line"

# --- (4) a sample through the CausalLM interface (generate_tokens on the model's own cache) ---
if grep -q '^sample:' "$WORK/whole.out" && grep -q '^(60 tokens in .* tokens/s, [0-9]* context moves)' "$WORK/whole.out"; then
  pass "a 60-token sample generated through the CausalLM interface"
else
  fail "no sample"; tail -8 "$WORK/whole.out"
fi

# --- (5) the K/V cache against the full forward: after training, and on the saved weights ---
grep -q '^K/V cache vs full forward .* greedy ids the same -> ok$' "$WORK/whole.out" &&
  pass "after training: $(grep '^K/V cache' "$WORK/whole.out")" || fail "cache check after training"
"$BIN" "${TINY[@]}" --check-cache --weights "$WORK/whole/model.safetensors" > "$WORK/check.out" 2>&1
[ $? -eq 0 ] && grep -q ' -> ok$' "$WORK/check.out" && pass "--check-cache on the saved weights exits 0" ||
  { fail "--check-cache"; cat "$WORK/check.out"; }

# --- (2) SIGINT after a few steps, resume with the printed command: the same bits ---
"$BIN" "${TINY[@]}" --steps 300 --out "$WORK/cut" > "$WORK/cut.out" 2> "$WORK/cut.err" &
pid=$!
wait_lines "$WORK/cut/steps.jsonl" 5
kill -INT $pid
wait $pid
rc=$?
resume="$(grep -A1 '^resume with:' "$WORK/cut.err" | tail -1)"
stopped_at=$(wc -l < "$WORK/cut/steps.jsonl")
if [ $rc -eq 130 ] && [ -n "$resume" ] && [ "$stopped_at" -lt 300 ] && [ ! -e "$WORK/cut/model.safetensors" ]; then
  pass "SIGINT stops the run after step $stopped_at with exit 130, the checkpoint saved and the resume command printed"
else
  fail "SIGINT (rc=$rc, $stopped_at steps)"; cat "$WORK/cut.err"
fi
bash -c "$resume" > "$WORK/resumed.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(sha "$WORK/cut/model.safetensors")" = "$(sha "$WORK/whole/model.safetensors")" ] &&
  [ "$(checksum "$WORK/resumed.out")" = "$(checksum "$WORK/whole.out")" ] && [ "$(losses "$WORK/cut")" = "$(losses "$WORK/whole")" ]; then
  pass "resumed at step $stopped_at: model.safetensors byte-identical, $(checksum "$WORK/whole.out"), the same 300 losses"
else
  fail "the resumed run differs (rc=$rc; $resume)"; tail -3 "$WORK/resumed.out"; diff <(losses "$WORK/cut") <(losses "$WORK/whole") | head -4
fi

# --- (3) 2 ranks x accum 1 == 1 process x accum 2, bit for bit; a stop sent to one rank stops both ---
if [ -n "$MPIRUN" ] && command -v "$MPIRUN" > /dev/null; then
  mpi() { "$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np 2 -x DEPTHGRAD_THREADS=1 "$@"; }
  SHORT=("${TINY[@]}" --steps 200 --sample-tokens 0)
  "$BIN" "${SHORT[@]}" --accum 2 --out "$WORK/accum2" > "$WORK/accum2.out" 2>&1
  mpi "$BIN" "${SHORT[@]}" --out "$WORK/ranks2" > "$WORK/ranks2.out" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && grep -q '^2 rank(s) x accum 1 x batch 4 = 8 windows' "$WORK/ranks2.out" &&
    [ "$(grep -c '^validation loss' "$WORK/ranks2.out")" -eq 1 ] && [ "$(wc -l < "$WORK/ranks2/steps.jsonl")" -eq 200 ] &&
    [ "$(losses "$WORK/ranks2")" = "$(losses "$WORK/accum2")" ] &&
    [ "$(sha "$WORK/ranks2/model.safetensors")" = "$(sha "$WORK/accum2/model.safetensors")" ]; then
    pass "2 ranks x accum 1 == 1 process x accum 2: the same 200 losses and weights ($(checksum "$WORK/ranks2.out")); rank 0 alone prints"
  else
    fail "2 ranks vs accum 2 (rc=$rc)"; tail -5 "$WORK/ranks2.out"; diff <(losses "$WORK/ranks2") <(losses "$WORK/accum2") | head -4
  fi
  # SIGTERM to rank 1 alone (mpirun relays a stop to every rank, but late and not at one step):
  # at the next step the ranks share what they saw, so both stop after the same step, save the
  # checkpoint, and rank 0 prints the resume line. (mpirun itself in the background, not through
  # mpi(): its children are the ranks.)
  # On a fast machine the 200 steps can end before rank 1 is found and signalled; such a try
  # (every step logged, no stop) is run again from scratch, up to three times.
  for attempt in 1 2 3; do
    rm -rf "$WORK/ranks2-cut"
    "$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np 2 -x DEPTHGRAD_THREADS=1 \
      "$BIN" "${SHORT[@]}" --out "$WORK/ranks2-cut" > "$WORK/ranks2-cut.out" 2>&1 &
    pid=$!
    rank1=""
    for _ in $(seq 600); do  # rank 1: the child of mpirun whose environment says so (from /proc)
      for d in /proc/[0-9]*; do
        grep -q "^PPid:[[:space:]]*$pid$" "$d/status" 2> /dev/null &&
          tr '\0' '\n' < "$d/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && rank1=${d#/proc/}
      done
      [ -n "$rank1" ] && break
      sleep 0.05
    done
    wait_lines "$WORK/ranks2-cut/steps.jsonl" 5
    [ -n "$rank1" ] && kill -TERM "$rank1" 2> /dev/null
    wait $pid
    grep -q "^stopped by SIGTERM" "$WORK/ranks2-cut.out" && break
    [ "$(wc -l < "$WORK/ranks2-cut/steps.jsonl")" -eq 200 ] || break  # a real failure: reported below
    echo "note: try $attempt finished all 200 steps before rank 1 was signalled; again"
  done
  resume="$(grep -A1 '^resume with:' "$WORK/ranks2-cut.out" | tail -1 | sed "s|^ *mpirun -np 2 ||")"
  stopped_at=$(wc -l < "$WORK/ranks2-cut/steps.jsonl")
  if grep -q "^stopped by SIGTERM after step $stopped_at of 200; checkpoint saved" "$WORK/ranks2-cut.out" && [ -n "$resume" ]; then
    pass "SIGTERM to rank 1 alone: both ranks stop after step $stopped_at, the checkpoint saved, the resume command printed"
  else
    fail "stopping 2 ranks (rank 1: '$rank1')"; cat "$WORK/ranks2-cut.out"
  fi
  eval "mpi $resume" > "$WORK/ranks2-resumed.out" 2>&1
  if [ "$(sha "$WORK/ranks2-cut/model.safetensors" 2> /dev/null)" = "$(sha "$WORK/accum2/model.safetensors")" ] &&
    [ "$(losses "$WORK/ranks2-cut")" = "$(losses "$WORK/accum2")" ]; then
    pass "resumed on 2 ranks: the weights and losses of the uninterrupted runs"
  else
    fail "2-rank resume differs"; tail -3 "$WORK/ranks2-resumed.out"
  fi
else
  echo "skipped: 2 ranks vs accum 2 (no mpirun: the build has DG_MPI=OFF)"
fi

echo "example_gpt2: $passes passed, $failures failed"
[ $failures -eq 0 ]
