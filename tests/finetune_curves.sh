#!/usr/bin/env bash
# tools/finetune_curves.cpp on hand-written steps.jsonl files, run by ctest: the table has the
# start row and one row per evaluation with each run's validation loss, the SVG names every run,
# and the refusals say what is wrong (a run without validation losses, runs evaluated at other
# steps, an argument that is not LABEL=DIR, a missing steps.jsonl, a --start that is no number).
# Usage: tests/finetune_curves.sh PATH/TO/finetune_curves
set -u
BIN="$1"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
failures=0
passes=0
pass() { passes=$((passes + 1)); echo "ok: $1"; }
fail() { failures=$((failures + 1)); echo "FAIL: $1"; }

mkdir -p "$WORK/full" "$WORK/lora" "$WORK/none" "$WORK/other" "$WORK/empty"
step() { echo "{\"step\":$1,\"loss\":5.0,\"tokens_per_second\":10.0${2:+,\"validation_loss\":$2}}"; }
{ step 0; step 1 4.5; step 2; step 3 4.25; } >"$WORK/full/steps.jsonl"
{ step 0; step 1 6.5; step 2; step 3 6.125; } >"$WORK/lora/steps.jsonl"
{ step 0; step 1; } >"$WORK/none/steps.jsonl"
{ step 0 6.0; step 1 5.0; } >"$WORK/other/steps.jsonl"

if "$BIN" --title "T" --start 7.5 --svg "$WORK/c.svg" "full=$WORK/full" "LoRA r=8=$WORK/lora" \
  >"$WORK/table.md" 2>"$WORK/err"; then
  pass "two runs drawn"
else
  fail "two runs: $(cat "$WORK/err")"
fi
expected="| step | full | LoRA r=8 |
|---:|---:|---:|
| 0 | 7.5000 | 7.5000 |
| 2 | 4.5000 | 6.5000 |
| 4 | 4.2500 | 6.1250 |"
[ "$(cat "$WORK/table.md")" = "$expected" ] && pass "the table" ||
  fail "the table: $(cat "$WORK/table.md")"
grep -q "<svg" "$WORK/c.svg" && grep -q ">full<" "$WORK/c.svg" && grep -q ">LoRA r=8<" "$WORK/c.svg" &&
  grep -q "every 2 steps" "$WORK/c.svg" && pass "the chart names both runs and the interval" ||
  fail "the chart"

refused() {  # MESSAGE ARGS...: the tool exits 1 and prints MESSAGE
  local message="$1"
  shift
  if "$BIN" --svg "$WORK/x.svg" "$@" >/dev/null 2>"$WORK/err"; then
    fail "accepted: $*"
  elif grep -qF -- "$message" "$WORK/err"; then
    pass "refused: $message"
  else
    fail "other message for $*: $(cat "$WORK/err")"
  fi
}
refused "none/steps.jsonl: no validation_loss (train the run with --eval-every N)" "a=$WORK/none"
refused "b was evaluated at other steps than a" "a=$WORK/full" "b=$WORK/other"
refused "'nolabel' is not LABEL=DIR" nolabel
refused "empty/steps.jsonl" "a=$WORK/empty"
refused "usage: finetune_curves" --title T
refused "--start: 'x' is not a number" --start x "a=$WORK/full"

echo "finetune_curves: $passes passed, $failures failed"
[ "$failures" -eq 0 ]
