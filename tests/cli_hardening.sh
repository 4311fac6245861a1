#!/usr/bin/env bash
# The command line against the classes of bad input and interruption: non-regular files,
# sizes that cannot fit, out-of-range values, untrustworthy checkpoints, divergence, resume that
# keeps a run's folder intact, two processes sharing one cache. Each bad input must end in one
# line on stderr and the documented exit code (2 usage, 1 runtime), never a hang or a signal.
# Usage: tests/cli_hardening.sh PATH/TO/depthgrad DATA_DIR   (ctest runs it; skips without data)
set -u
source "$(dirname "$0")/cli_common.sh" cli_hardening "$@"
export DEPTHGRAD_THREADS=1
# A hang (a FIFO read to the end, memory exhaustion) must fail fast.
EXPECT_TIMEOUT=60
T=(--dataset-dir "$DATA" --threads 1 --quiet --dim 16 --layers 2 --heads 2 --seq-len 16 --batch 2)

# --- a first run (also fills the cache) ---
"$BIN" train "${T[@]}" --steps 4 --schedule constant --checkpoint-every 2 --output "$WORK/a" > /dev/null
if [ $? -eq 0 ] && [ "$(wc -l < "$WORK/a/steps.jsonl")" -eq 4 ]; then pass "train 4 steps"; else fail "train 4 steps"; fi

# --- non-regular files: refused by name, at once (no hang, no memory exhaustion) ---
mkfifo "$WORK/fifo"
expect "FIFO as --config" 1 "$WORK/fifo: it is a FIFO" -- "$BIN" train --config "$WORK/fifo" --output "$WORK/never"
expect "FIFO as --resume" 1 "$WORK/fifo: it is a FIFO" -- "$BIN" train "${T[@]}" --resume "$WORK/fifo" --output "$WORK/never"
expect "/dev/zero as --checkpoint" 1 "/dev/zero: it is a character device" -- "$BIN" eval --checkpoint /dev/zero --dataset-dir "$DATA"
expect "FIFO as --tokenizer" 1 "it is a FIFO" -- "$BIN" tokenize --action encode --tokenizer "$WORK/fifo" --text a
expect "/dev/zero as tokenize --input" 1 "/dev/zero: it is a character device" -- "$BIN" tokenize --input /dev/zero --output "$WORK/never.json"
expect "directory as --checkpoint" 1 "it is a directory" -- "$BIN" eval --checkpoint "$WORK/a" --dataset-dir "$DATA"
mkdir -p "$WORK/fifo-data/wikitext-2"
ln -s "$DATA"/wikitext-2/*.txt "$WORK/fifo-data/wikitext-2/"
mkfifo "$WORK/fifo-data/tiny_shakespeare.txt"
expect "FIFO as a data file" 1 "tiny_shakespeare.txt" -- "$BIN" train "${T[@]}" --dataset-dir "$WORK/fifo-data" --output "$WORK/never"

# --- sizes the machine cannot hold, and out-of-range values ---
expect "absurd sizes: what they need" 1 "needs about" -- "$BIN" train --dim 1048576 --heads 1 --kv-heads 1 --layers 64 --dataset-dir "$DATA" --output "$WORK/never"
expect "--vocab below the byte alphabet" 2 "--vocab: expected a value >= 260" -- "$BIN" train --vocab 100 --dataset-dir "$DATA" --output "$WORK/never"
expect "tokenize --vocab below the byte alphabet" 2 "--vocab: expected a value >= 260" -- "$BIN" tokenize --vocab 3 --input "$WORK/a/config.json" --output "$WORK/never.json"
printf '{"model": {"vocab": 100}}' > "$WORK/small-vocab.json"
expect "config vocab below the byte alphabet" 1 "vocab 100 is below the 260 tokens" -- "$BIN" train --config "$WORK/small-vocab.json" --dataset-dir "$DATA" --output "$WORK/never"
expect "negative --eval-windows" 2 "--eval-windows: expected a value >= 0, got '-1'" -- "$BIN" train --eval-windows -1 --output "$WORK/never"
expect "negative eval --windows" 2 "--windows: expected a value >= 0" -- "$BIN" eval --checkpoint x --windows -4
expect "zero --steps" 2 "--steps: expected a value >= 1, got '0'" -- "$BIN" train --steps 0 --output "$WORK/never"
expect "unknown flag exits 2" 2 "unknown flag --stepz" -- "$BIN" train --stepz 3 --output "$WORK/never"
[ ! -e "$WORK/never" ] && pass "refused runs create no output folder" || fail "a refused run created $WORK/never"

# --- resume: a refused one changes nothing; a good one appends to the log ---
cp "$WORK/a/config.json" "$WORK/config.before"
cp "$WORK/a/steps.jsonl" "$WORK/steps.before"
expect "resume with another model refused" 1 "differs from this run's" -- "$BIN" train "${T[@]}" --dim 32 --steps 6 --resume "$WORK/a/checkpoint.safetensors" --output "$WORK/a"
if cmp -s "$WORK/a/config.json" "$WORK/config.before" && cmp -s "$WORK/a/steps.jsonl" "$WORK/steps.before"; then
  pass "a refused resume leaves config.json and steps.jsonl as they were"
else
  fail "a refused resume changed config.json or steps.jsonl"
fi
# A log ahead of its checkpoint (the run wrote steps 4 and 5 and was killed before checkpointing).
printf '{"step":4,"loss":9}\n{"step":5,"loss":9}\n{"step":6,' >> "$WORK/a/steps.jsonl"
"$BIN" train "${T[@]}" --steps 6 --schedule constant --checkpoint-every 2 --resume "$WORK/a/checkpoint.safetensors" --output "$WORK/a" > /dev/null
steps="$(grep -o '"step": *[0-9]*' "$WORK/a/steps.jsonl" | grep -o '[0-9]*$' | tr '\n' ' ')"
if [ "$steps" = "0 1 2 3 4 5 " ] && [ "$(head -4 "$WORK/a/steps.jsonl")" = "$(cat "$WORK/steps.before")" ] && ! grep -q '"loss":9' "$WORK/a/steps.jsonl"; then
  pass "resume appends to steps.jsonl (steps 0-5 once each, the first four lines kept, lines past the checkpoint dropped)"
else
  fail "resume log: steps '$steps'"; cat "$WORK/a/steps.jsonl"
fi
wall="$(grep -o '"wall_seconds": *[0-9.e+-]*' "$WORK/a/summary.json" | grep -o '[0-9.e+-]*$')"
if [ -n "$wall" ]; then pass "summary.json has the run's wall_seconds ($wall)"; else fail "no wall_seconds in summary.json"; fi

# --- checkpoints that cannot be trusted (through the CLI; the library tests cover each field) ---
expect "resume of a checkpoint past the run's steps" 1 "expected an integer in [0, 3]" -- "$BIN" train "${T[@]}" --steps 3 --schedule constant --resume "$WORK/a/checkpoint.safetensors" --output "$WORK/b"

# --- divergence: stop naming step and loss, the last checkpoint kept; or skip and go on ---
expect "divergence stops the run" 1 "training diverged at step" -- "$BIN" train "${T[@]}" --steps 6 --lr 1e30 --clip 0 --schedule constant --checkpoint-every 1 --output "$WORK/d"
# A spike (a NaN gradient at one step, injected by a StepObserver) naming the step and the tensor,
# and skipping it, are the library's: tests/test_hardening.cpp.
if "$BIN" eval --checkpoint "$WORK/d/checkpoint.safetensors" --windows 2 --dataset-dir "$DATA" --threads 1 > /dev/null 2>&1; then
  pass "the last good checkpoint of a diverged run is intact (eval reads it)"
else
  fail "the diverged run's checkpoint is not readable"
fi
expect "skipping cannot rescue an overflowing model: a clear error" 1 "the validation loss is" -- "$BIN" train "${T[@]}" --steps 6 --lr 1e30 --clip 0 --schedule constant --skip-nonfinite --output "$WORK/s2"
# Its log: one line per step, the skipped ones marked and counted.
skipped="$(grep -c '"skipped":true' "$WORK/s2/steps.jsonl")"
if [ "$skipped" -gt 0 ] && [ "$(wc -l < "$WORK/s2/steps.jsonl")" -eq 6 ] && tail -1 "$WORK/s2/steps.jsonl" | grep -q "\"skipped_steps\":$skipped[,}]"; then
  pass "--skip-nonfinite skips and counts the steps ($skipped skipped)"
else
  fail "--skip-nonfinite"; cat "$WORK/s2/steps.jsonl"
fi

# --- two processes sharing one cache directory: both succeed, same numbers, cache consistent ---
C="$WORK/shared-cache"
"$BIN" train "${T[@]}" --steps 2 --cache-dir "$C" --output "$WORK/p1" > "$WORK/p1.txt" 2>&1 &
p1=$!
"$BIN" train "${T[@]}" --steps 2 --cache-dir "$C" --output "$WORK/p2" > "$WORK/p2.txt" 2>&1 &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
leftovers="$(find "$C" -name '.*.tmp-*' | wc -l)"
if [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ "$(head -1 "$WORK/p1.txt")" = "$(head -1 "$WORK/p2.txt")" ] && [ "$leftovers" -eq 0 ]; then
  pass "two runs at once on one cache: both succeed with the same validation loss, no temporaries left"
else
  fail "shared cache (exit $r1 $r2, $leftovers temporaries)"; cat "$WORK/p1.txt" "$WORK/p2.txt"
fi
# A cache file whose header disagrees with its body is rebuilt, not an error.
for f in "$C"/ids/*.ids; do printf '\x07' | dd of="$f" bs=1 seek=8 conv=notrunc 2> /dev/null; done
tok="$(ls "$C"/tokenizers/*.json | head -1)"
printf '{"model": {"type": "BPE"}' > "$tok"
"$BIN" train "${T[@]}" --steps 2 --cache-dir "$C" --output "$WORK/p3" > "$WORK/p3.txt" 2>&1
if [ $? -eq 0 ] && [ "$(head -1 "$WORK/p1.txt")" = "$(head -1 "$WORK/p3.txt")" ] && "$BIN" train "${T[@]}" --steps 2 --cache-dir "$C" --output "$WORK/p4" > "$WORK/p4.txt" 2>&1 && [ "$(head -1 "$WORK/p1.txt")" = "$(head -1 "$WORK/p4.txt")" ]; then
  pass "damaged cache files (header vs body, broken JSON) are rebuilt with the same numbers"
else
  fail "damaged cache"; cat "$WORK/p3.txt"
fi

# Two reproductions at once on one fresh cache: the same numbers, two run folders, whole entries.
R="$WORK/repro"
for i in 1 2; do
  "$BIN" reproduce --paper rd-attnres --dataset-dir "$DATA" --seed 42 --threads 1 --quiet \
    --output-dir "$R/runs" --cache-dir "$R/cache" > "$R.out$i" 2>&1 &
done
wait
folders=$(ls -d "$R"/runs/*/*/ 2> /dev/null | wc -l)
if diff <(grep -v 'wall time\|report' "$R.out1") <(grep -v 'wall time\|report' "$R.out2") > /dev/null &&
  grep -q 'rd-attnres' "$R.out1" && [ "$folders" -eq 2 ] && [ "$(find "$R/cache" -name '.*.tmp-*' | wc -l)" -eq 0 ]; then
  pass "two reproductions at once: same numbers, two run folders, cache consistent"
else
  fail "two reproductions at once ($folders run folders)"; cat "$R.out1" "$R.out2"
fi

finish
