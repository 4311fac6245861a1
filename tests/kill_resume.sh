#!/usr/bin/env bash
# Crash safety, end to end: trains a tiny model without interruption, then trains it again while
# SIGKILLing the process at random moments (a checkpoint every step, so many kills land inside a
# checkpoint write), resuming from the run's checkpoint after each kill. The final weights must
# equal the uninterrupted run's byte for byte, the step log must hold each step exactly once, and
# no temporary file may be left. It does not test power loss (fsync is trusted, not exercised).
# Usage: tests/kill_resume.sh PATH/TO/depthgrad DATA_DIR [KILLS] (ctest: a few; `make kill-test`: many)
set -u
BIN="$1"
DATA="${2:-}"
KILLS="${3:-4}"
if [ -z "$DATA" ]; then
  echo "SKIPPED: kill_resume needs the data directory (DG_TEST_DATA_DIR is empty)"
  exit 77
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export XDG_CACHE_HOME="$WORK/cache"
export DEPTHGRAD_THREADS=1
STEPS=150
T=(train --dataset-dir "$DATA" --threads 1 --quiet --dim 16 --layers 2 --heads 2 --seq-len 16 --batch 2
  --steps $STEPS --eval-windows 2 --checkpoint-every 1)

start=$(date +%s.%N)
"$BIN" "${T[@]}" --output "$WORK/reference" > /dev/null || { echo "FAIL: the uninterrupted run"; exit 1; }
# Kill times fall between the end of start-up (reading data, building the model: a one-step
# run's length) and the end of a whole run, both measured now that the cache is warm.
elapsed_ms() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%d", (b - a) * 1000}'; }
t0=$(date +%s.%N)
"$BIN" "${T[@]/#$STEPS/1}" --output "$WORK/timing1" > /dev/null || exit 1
startup_ms=$(elapsed_ms "$t0")
t0=$(date +%s.%N)
"$BIN" "${T[@]}" --output "$WORK/timing" > /dev/null || exit 1
run_ms=$(elapsed_ms "$t0")
echo "start-up ${startup_ms} ms, one run ${run_ms} ms; $KILLS kills at random moments between"

# Rounds: each trains from scratch into a fresh folder, killed up to 3 times at random moments
# (each within what is left of the run) and resumed from its checkpoint until it finishes; then
# its final weights, step log and folder are checked. Rounds go on until KILLS kills landed.
kills=0
mid_write=0  # kills that left a temporary behind: they landed inside a file write
resumes=0
rounds=0
failures=0
while [ $kills -lt "$KILLS" ]; do
  rounds=$((rounds + 1))
  out="$WORK/killed-$rounds"
  in_round=0
  while :; do
    args=("${T[@]}" --output "$out")
    if [ -f "$out/checkpoint.safetensors" ]; then
      args+=(--resume "$out/checkpoint.safetensors")
      resumes=$((resumes + 1))
    elif [ -e "$out" ]; then
      args+=(--overwrite)  # killed before its first checkpoint: nothing to resume, start again
    fi
    "$BIN" "${args[@]}" > /dev/null 2> "$WORK/err" &
    pid=$!
    if [ $in_round -lt 3 ] && [ $kills -lt "$KILLS" ]; then
      done_steps=$(cat "$out/steps.jsonl" 2> /dev/null | wc -l)
      sleep "$(awk -v r=$RANDOM -v a="$startup_ms" -v b="$run_ms" -v d="$done_steps" -v n=$STEPS \
        'BEGIN {printf "%.3f", (a + 0.9 * r / 32768 * (b - a) * (n - d) / n) / 1000}')"
      if kill -KILL $pid 2> /dev/null; then
        kills=$((kills + 1))
        in_round=$((in_round + 1))
      fi
    fi
    wait $pid 2> /dev/null
    rc=$?
    if [ $rc -eq 137 ] && [ -n "$(find "$out" -name '.*.tmp-*' 2> /dev/null)" ]; then
      mid_write=$((mid_write + 1))
    fi
    if [ $rc -eq 0 ]; then break; fi
    if [ $rc -ne 137 ]; then echo "FAIL: round $rounds: a run exited $rc: $(cat "$WORK/err")"; exit 1; fi
  done
  problems=""
  cmp -s "$WORK/reference/model.safetensors" "$out/model.safetensors" || problems+=" weights differ;"
  logged="$(grep -o '"step": *[0-9]*' "$out/steps.jsonl" | grep -o '[0-9]*$' | tr '\n' ' ')"
  [ "$logged" = "$(seq 0 $((STEPS - 1)) | tr '\n' ' ')" ] || problems+=" steps.jsonl: $logged;"
  left="$(find "$out" -name '.*.tmp-*' | wc -l)"
  [ "$left" -eq 0 ] || problems+=" $left temporary files left;"
  if [ -n "$problems" ]; then
    echo "FAIL: round $rounds ($in_round kills):$problems"
    failures=$((failures + 1))
  fi
  rm -rf "$out"
done
echo "kill points: $kills ($mid_write inside a file write) in $rounds rounds ($resumes resumes), $failures rounds failed, $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.0f", b - a}') s"
if [ $failures -eq 0 ]; then
  echo "ok: every round's final weights equal the uninterrupted run's byte for byte; each step logged once; no temporaries left"
fi
[ $failures -eq 0 ]
