#!/usr/bin/env bash
# tools/results/run_scales.sh across machines: a paired run whose finished arms were kept in the
# tree (KEEP_PARTIAL=1 -> tools/results/<name>/partial/state.json) and whose run folder is gone (a
# new machine) or has fewer finished arms must finish from the kept arms, training only the rest,
# and give the same result.json as an uninterrupted run (every number; times, folder names, dates
# and whether the tokenizer came from the cache aside), drop partial/ and say in command.txt where
# each arm ran. Tiny budget: micro, 2 seeds, 20 steps.
# Usage: tests/run_scales_carry.sh PATH/TO/depthgrad DATA_DIR
source "$(dirname "$0")/cli_common.sh" run_scales_carry "$@"
SCRIPT="$(cd "$(dirname "$0")/.." && pwd)/tools/results/run_scales.sh"
export BIN DATA ONLY=micro-block STEPS=20 SEEDS=1-2 THREADS=1
# (RESULTS before WORK on each command line below: a prefix assignment sees the ones before it)

# 1. Uninterrupted.
RESULTS="$WORK/a-results" WORK="$WORK/a" bash "$SCRIPT" > "$WORK/a.log" 2>&1 ||
  { cat "$WORK/a.log"; fail "uninterrupted run"; finish; exit 1; }
A="$WORK/a-results/micro-block/result.json"
[ -f "$A" ] && pass "uninterrupted run kept its result.json" || fail "uninterrupted result.json"

# 2. A run folder with seed 1's arms finished and seed 2's not: seed 1 run to the end by
#    reproduce itself, then its result.json removed (so run_scales.sh takes it for unfinished).
B_RUNS="$WORK/b/micro-block/runs"
"$BIN" reproduce --protocol paired --preset micro --pair block_attnres,rd_attnres --seeds 1 \
  --steps 20 --dataset-dir "$DATA" --threads 1 --quiet --output-dir "$B_RUNS" > /dev/null 2>&1 ||
  fail "seed 1 alone"
rm -f "$B_RUNS"/*/*/result.json
# The record names the build that started the run, not $BIN now (it may be rebuilt meanwhile):
# run_scales.sh writes started-on.txt when it starts a run; here it started the run by hand.
echo "test CPU, AVX-512 no, 1 cores, depthgrad 0.0.0 (started-build)" > "$WORK/b/micro-block/started-on.txt"
KEEP_PARTIAL=1 RESULTS="$WORK/b-results" WORK="$WORK/b" bash "$SCRIPT" > "$WORK/keep.log" 2>&1 ||
  fail "KEEP_PARTIAL exit status"
PARTIAL="$WORK/b-results/micro-block/partial/state.json"
if [ -f "$PARTIAL" ] && cmp -s "$PARTIAL" "$(ls "$B_RUNS"/*/*/state.json)"; then
  pass "KEEP_PARTIAL kept the run's state file"
else
  cat "$WORK/keep.log"
  fail "KEEP_PARTIAL kept the run's state file"
fi
grep -q '^arms 1-2 finished on: test CPU, .*(started-build) (kept .*): seed 1 block_attnres, seed 1 rd_attnres$' "$WORK/b-results/micro-block/partial/machines.txt" &&
  pass "machines.txt says where arms 1-2 ran, with the build that started them, and names them" ||
  fail "machines.txt says where arms 1-2 ran, with the build that started them, and names them"
[ ! -f "$WORK/b-results/micro-block/result.json" ] && pass "KEEP_PARTIAL ran nothing" ||
  fail "KEEP_PARTIAL ran nothing"

# 3. A new machine: the run folder is gone, and a folder with fewer finished arms than the kept
#    state (none: only a checkpoint, here a file no resume could read) must not be chosen.
rm -rf "$WORK/b"
mkdir -p "$B_RUNS/2608.01075-rd-attnres/older/checkpoints"
echo "not a checkpoint" > "$B_RUNS/2608.01075-rd-attnres/older/checkpoints/arm.ckpt"
RESULTS="$WORK/b-results" WORK="$WORK/b" bash "$SCRIPT" > "$WORK/b.log" 2>&1 ||
  { cat "$WORK/b.log"; fail "carried run"; }
grep -q 'older has 0 finished arms, the kept state 2: using the kept state' "$WORK/b.log" &&
  pass "the kept state wins over a local folder with fewer arms" || fail "kept state chosen"
grep -q 'starting from the 2 finished arms kept in' "$WORK/b.log" &&
  pass "the carried run started from partial/state.json" || fail "carried run start"
# Seed 1's arms are not trained again: only seed 2's two arms print their results.
trained=$(grep -cE '^seed [0-9]+ (block_attnres|rd_attnres): lm_loss' "$WORK/b.log")
[ "$trained" = 2 ] && pass "only the 2 unfinished arms trained" ||
  fail "only the 2 unfinished arms trained (got $trained)"
B="$WORK/b-results/micro-block/result.json"
strip() { grep -vE 'seconds"|"directory"|"created_at"|"tokenizer_from_cache"' "$1"; }
if [ -f "$B" ] && diff <(strip "$A") <(strip "$B") > "$WORK/diff.txt"; then
  pass "carried result.json equals the uninterrupted one (times, folder and date aside)"
else
  head -20 "$WORK/diff.txt"
  fail "carried result.json equals the uninterrupted one"
fi
[ ! -d "$WORK/b-results/micro-block/partial" ] && pass "partial/ removed once finished" ||
  fail "partial/ removed once finished"
C="$WORK/b-results/micro-block/command.txt"
if grep -q 'and carried to this machine' "$C" && grep -q '^#   arms 1-2 finished on: ' "$C" &&
  grep '^#   arms 3-4 finished on: ' "$C" | grep -qF "$("$BIN" --version)" &&
  grep -q '^#   arms 3-4 finished on: .*: seed 2 block_attnres, seed 2 rd_attnres$' "$C"; then
  pass "command.txt says where each arm ran"
else
  cat "$C"
  fail "command.txt says where each arm ran"
fi
finish
