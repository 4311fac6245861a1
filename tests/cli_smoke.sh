#!/usr/bin/env bash
# End-to-end checks of the depthgrad program, run by ctest: the parity reproduction on the real
# data (its numbers must match the reference's recorded ones), the paired protocol and the
# everyday commands on tiny budgets, and bad input ending in one clear line and a non-zero exit.
# Usage: tests/cli_smoke.sh PATH/TO/depthgrad DATA_DIR
set -u
source "$(dirname "$0")/cli_common.sh" cli_smoke "$@"

# --- parity reproduction on the real data ---
out="$("$BIN" reproduce --paper rd-attnres --dataset-dir "$DATA" --seed 42 --threads 1 --quiet --output-dir "$WORK/runs")"
rc=$?
echo "$out"
if [ $rc -eq 0 ]; then pass "reproduce parity runs"; else fail "reproduce parity exit $rc"; fi
run_dir="$(ls -d "$WORK"/runs/2608.01075-rd-attnres/*/ 2>/dev/null | head -1)"
for f in result.json metrics.json report.md report.html tokenizer.json steps.jsonl; do
  if [ -s "$run_dir/$f" ]; then pass "reproduce wrote $f"; else fail "reproduce did not write $f"; fi
done
# The result names the commit the binary was built from (found at build time, not configure time).
head="$(git -C "$(dirname "$0")/.." rev-parse --short=12 HEAD 2> /dev/null)"
if [ -n "$head" ]; then
  if grep -q "\"code_commit\": *\"$head" "$run_dir/result.json" && "$BIN" --version | grep -q "($head"; then
    pass "result.json and --version name the commit built ($head)"
  else
    fail "code_commit is not $head: $(grep -o '"code_commit": *"[^"]*"' "$run_dir/result.json")"
  fi
fi
# lm_loss must match the reference's recorded values (tools/attnres/PROTOCOL.md §0) within 1e-5; the
# rd arm's route JS within 5e-8 (1e-5 relative: JS is a difference of two float32 route
# distributions after 30 float32 steps, so exp/sum rounding choices that are not torch's own move
# it by ~1e-8 — measured 2e-10 to 9e-9 across depthgrad versions — while a real routing bug moves
# it by 1e-4 or more).
check_close() {
  local name="$1" got="$2" want="$3" tol="$4"
  if awk -v g="$got" -v w="$want" -v t="$tol" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= t) }'; then
    pass "$name $got ~ $want"
  else
    fail "$name $got != $want (tolerance $tol)"
  fi
}
block_loss=$(printf '%s\n' "$out" | awk -F'|' '/^\| block_attnres/ { gsub(/ /, "", $3); print $3 }')
rd_loss=$(printf '%s\n' "$out" | awk -F'|' '/^\| rd_attnres/ { gsub(/ /, "", $3); print $3 }')
rd_js=$(printf '%s\n' "$out" | awk -F'|' '/^\| rd_attnres/ { gsub(/ /, "", $6); print $6 }')
check_close "block_attnres lm_loss" "${block_loss:-nan}" 5.7570388168 1e-5
check_close "rd_attnres lm_loss" "${rd_loss:-nan}" 5.7630852014 1e-5
check_close "rd_attnres JS" "${rd_js:-nan}" 0.0048934901 5e-8
if printf '%s\n' "$out" | grep -q "report.md"; then pass "reproduce prints the report path"; else fail "no report path"; fi

# --- paired protocol, tiny budget, and resume through the state file ---
"$BIN" reproduce --protocol paired --seeds 1-2 --steps 4 --layers 3 --dim 32 --train-tokens 20000 --eval reference \
  --dataset-dir "$DATA" --threads 1 --quiet --output-dir "$WORK/paired" --state-file "$WORK/state.json" > "$WORK/paired.txt"
if [ $? -eq 0 ] && grep -q "paired over 2 seeds" "$WORK/paired.txt"; then pass "paired protocol"; else fail "paired protocol"; cat "$WORK/paired.txt"; fi
"$BIN" reproduce --protocol paired --seeds 1-2 --steps 4 --layers 3 --dim 32 --train-tokens 20000 --eval reference \
  --dataset-dir "$DATA" --threads 1 --output-dir "$WORK/paired2" --state-file "$WORK/state.json" > "$WORK/paired2.txt" 2> "$WORK/paired2.err"
if grep -q "done earlier" "$WORK/paired2.err" && diff <(grep '^| ' "$WORK/paired.txt") <(grep '^| ' "$WORK/paired2.txt") > /dev/null; then
  pass "paired run resumes from the state file with identical results"
else
  fail "state-file resume"
fi
# Any other setting (here the warm-up, which the old hand-built key left out) makes the state file
# another run's: refused before any training.
expect_error "state file of other settings refused" "belongs to a run with other settings" -- "$BIN" reproduce --protocol paired \
  --seeds 1-2 --steps 4 --layers 3 --dim 32 --train-tokens 20000 --eval reference --warmup 2 \
  --dataset-dir "$DATA" --threads 1 --quiet --output-dir "$WORK/paired3" --state-file "$WORK/state.json"
if grep -q '"config"' "$(ls -d "$WORK"/paired/2608.01075-rd-attnres/*/ | head -1)/result.json"; then pass "result.json records the run config"; else fail "no config in result.json"; fi

# --- presets, the pair, divergence, the cross-scale report ---
# Another pair against the first run's state file: refused, naming the pair.
expect_error "state file of another pair refused, naming it" "pair: absent vs" -- "$BIN" reproduce --protocol paired \
  --pair paper_block_attnres,paper_rd_attnres --seeds 1-2 --steps 4 --layers 3 --dim 32 --train-tokens 20000 --eval reference \
  --dataset-dir "$DATA" --threads 1 --quiet --output-dir "$WORK/paired3" --state-file "$WORK/state.json"
"$BIN" reproduce --protocol paired --pair paper_block_attnres,paper_rd_attnres --seeds 1-2 --steps 4 --layers 3 --dim 32 \
  --train-tokens 20000 --eval reference --dataset-dir "$DATA" --threads 1 --quiet --output-dir "$WORK/paper" > "$WORK/paper.txt"
rc=$?
paper_dir="$(ls -d "$WORK"/paper/2608.01075-rd-attnres/*/ 2>/dev/null | head -1)"
if [ $rc -eq 0 ] && grep -q "paper_rd_attnres − paper_block_attnres mean" "$WORK/paper.txt" && grep -q '"method": "paper_rd_attnres"' "$paper_dir/result.json" \
   && grep -q "perplexity .*% (95% CI" "$WORK/paper.txt"; then
  pass "reproduce --pair compares the paper forms and labels the arms by mode"
else
  fail "reproduce --pair"; cat "$WORK/paper.txt"
fi
expect_error "--pair of one mode twice" "the two modes must differ" -- "$BIN" reproduce --protocol paired --pair rd_attnres,rd_attnres
expect_error "--pair with the parity protocol" "--protocol paired" -- "$BIN" reproduce --pair paper_block_attnres,paper_rd_attnres --dataset-dir "$WORK/no-such-dir"
expect_error "unknown preset" "--preset: unknown preset 'huge'" -- "$BIN" reproduce --preset huge
# A preset is sizes only, under the flags given; config.json records its name and the values.
"$BIN" train --preset mini --layers 2 --steps 1 --dataset-dir "$DATA" --threads 1 --quiet --output "$WORK/train-mini" > /dev/null
if [ $? -eq 0 ] && grep -q '"preset": "mini"' "$WORK/train-mini/config.json" && grep -q '"dim": 128' "$WORK/train-mini/config.json" \
   && grep -q '"layers": 2' "$WORK/train-mini/config.json" && grep -q '"steps": 1,' "$WORK/train-mini/config.json"; then
  pass "train --preset mini with --layers over it"
else
  fail "train --preset"; cat "$WORK/train-mini/config.json"
fi
expect_error "--preset with --config refused" "give one" -- "$BIN" train --preset mini --config "$WORK/train-mini/config.json"
if "$BIN" train --help | grep -q "mini   vocab 512, dim 128, 4 layers, 4 heads, seq 128, ffn 3x, batch 8: 921,728 parameters"; then pass "the presets' numbers are in --help"; else fail "presets in --help"; fi
# A diverged arm is recorded with its step, kept in the state file and not retried.
expect_error "divergence reported with its step" "diverged arm (seed 1 block_attnres at step" -- "$BIN" reproduce --protocol paired \
  --seeds 1 --steps 3 --layers 1 --dim 16 --lr 1e38 --train-tokens 20000 --eval reference --dataset-dir "$DATA" --threads 1 --quiet \
  --output-dir "$WORK/diverge" --state-file "$WORK/diverge.json"
"$BIN" reproduce --protocol paired --seeds 1 --steps 3 --layers 1 --dim 16 --lr 1e38 --train-tokens 20000 --eval reference \
  --dataset-dir "$DATA" --threads 1 --output-dir "$WORK/diverge" --state-file "$WORK/diverge.json" > /dev/null 2> "$WORK/diverge.err"
if grep -q '"diverged_at_step"' "$WORK/diverge.json" && grep -q "done earlier" "$WORK/diverge.err"; then pass "a diverged arm stays in the state file and is not retried"; else fail "diverged arm"; cat "$WORK/diverge.err"; fi
# The cross-scale report of the two paired runs; a parity run is refused naming its file.
paired_dir="$(ls -d "$WORK"/paired/2608.01075-rd-attnres/*/ | head -1)"
"$BIN" reproduce --combine "${paired_dir},${paper_dir}" --output-dir "$WORK/scales" > "$WORK/scales.txt"
if [ $? -eq 0 ] && [ -s "$WORK/scales/scales.html" ] && [ -s "$WORK/scales/scales.md" ] && [ -s "$WORK/scales/scales.svg" ] && [ "$(grep -c 'class="point"' "$WORK/scales/scales.html")" -eq 2 ]; then
  pass "reproduce --combine writes the cross-scale page with one point per run"
else
  fail "reproduce --combine"; cat "$WORK/scales.txt"
fi
cp "$WORK/scales/scales.html" "$WORK/scales-first.html"
# An earlier page is replaced only with --overwrite: without it, one line and nothing written.
expect "reproduce --combine refuses to replace a report" 2 "$WORK/scales holds a cross-scale report (scales.md, scales.html, scales.json, scales.svg): replace it with --overwrite" -- \
  "$BIN" reproduce --combine "${paper_dir}" --output-dir "$WORK/scales"
if cmp -s "$WORK/scales/scales.html" "$WORK/scales-first.html"; then pass "the refused --combine left the report as it was"; else fail "the refused --combine changed the report"; fi
"$BIN" reproduce --combine "${paper_dir},${paired_dir}" --output-dir "$WORK/scales" --overwrite > /dev/null
if cmp -s "$WORK/scales/scales.html" "$WORK/scales-first.html"; then pass "reproduce --combine is deterministic"; else fail "reproduce --combine output differs between runs"; fi
expect_error "--combine refuses a parity run" "${run_dir%/}/result.json" -- "$BIN" reproduce --combine "${paired_dir},${run_dir}" --output-dir "$WORK/scales2"

# --- everyday commands ---
"$BIN" train --steps 6 --dim 32 --layers 2 --dataset-dir "$DATA" --threads 1 --quiet --output "$WORK/train" --checkpoint-every 3 > "$WORK/train.txt"
if [ $? -eq 0 ] && [ -s "$WORK/train/model.safetensors" ] && [ -s "$WORK/train/checkpoint.safetensors" ]; then pass "train"; else fail "train"; fi
"$BIN" eval --checkpoint "$WORK/train/model.safetensors" --split validation --windows 4 --dataset-dir "$DATA" --threads 1 > "$WORK/eval.txt"
if [ $? -eq 0 ] && grep -q "perplexity" "$WORK/eval.txt"; then pass "eval"; else fail "eval"; fi
"$BIN" eval --checkpoint "$WORK/train/checkpoint.safetensors" --split validation --windows 4 --dataset-dir "$DATA" --threads 1 > "$WORK/eval2.txt"
if [ $? -eq 0 ] && [ "$(awk '{print $4}' "$WORK/eval.txt")" = "$(awk '{print $4}' "$WORK/eval2.txt")" ]; then pass "eval of the training checkpoint equals eval of the final weights"; else fail "eval of a training checkpoint"; cat "$WORK/eval2.txt"; fi
# config.json is the run config's JSON: it trains again through --config (flags on top).
"$BIN" train --config "$WORK/train/config.json" --steps 2 --dataset-dir "$DATA" --threads 1 --quiet --output "$WORK/train2" > "$WORK/train2.txt"
if [ $? -eq 0 ] && grep -q '"dim": 32' "$WORK/train2/config.json" && grep -q '"steps": 2' "$WORK/train2/config.json"; then pass "train --config reads config.json"; else fail "train --config"; fi
# No thread count given (no --threads, DEPTHGRAD_THREADS or OMP_NUM_THREADS): sized to the run, one
# thread for a model this small, and the same bits as the --threads 1 run above.
env -u DEPTHGRAD_THREADS -u OMP_NUM_THREADS "$BIN" train --config "$WORK/train/config.json" --steps 2 --dataset-dir "$DATA" --output "$WORK/train3" > "$WORK/train3.txt" 2>&1
if [ $? -eq 0 ] && grep -q "1 thread(s) (chosen for the model's size" "$WORK/train3.txt" && cmp -s "$WORK/train2/model.safetensors" "$WORK/train3/model.safetensors"; then pass "train without a thread count: one thread for a tiny model, the bits of --threads 1"; else fail "train's thread count from the model's size"; cat "$WORK/train3.txt"; fi
ids="$("$BIN" tokenize --action encode --tokenizer "$WORK/train/tokenizer.json" --text "The tower is 324 metres tall." 2>/dev/null)"
text="$("$BIN" tokenize --action decode --tokenizer "$WORK/train/tokenizer.json" --ids "$ids")"
if [ "$text" = "The tower is 324 metres tall." ]; then pass "tokenize encode/decode round trip"; else fail "tokenize round trip: '$text'"; fi
# generate: from the final weights and from the training checkpoint (the same weights at the end),
# seeded sampling reproducible, greedy decoding, a prompt longer than the context
gen() { "$BIN" generate --threads 1 --quiet "$@"; }
g1="$(gen --checkpoint "$WORK/train/model.safetensors" --prompt "The tower is" --max-new-tokens 20 --seed 5)"
rc=$?
g2="$(gen --checkpoint "$WORK/train/model.safetensors" --prompt "The tower is" --max-new-tokens 20 --seed 5)"
g3="$(gen --checkpoint "$WORK/train/checkpoint.safetensors" --prompt "The tower is" --max-new-tokens 20 --seed 5)"
g4="$(gen --checkpoint "$WORK/train/model.safetensors" --prompt "The tower is" --max-new-tokens 20 --seed 6)"
if [ $rc -eq 0 ] && [ -n "$g1" ] && [ "$g1" = "$g2" ] && [ "$g1" = "$g3" ] && [ "$g1" != "$g4" ]; then
  pass "generate: same seed same text, training checkpoint = final weights, another seed other text"
else
  fail "generate sampling (rc=$rc): '$g1' / '$g2' / '$g3' / '$g4'"
fi
gr1="$(gen --checkpoint "$WORK/train/model.safetensors" --prompt "The tower is" --max-new-tokens 100 --temperature 0 --seed 1)"
gr2="$(gen --checkpoint "$WORK/train/model.safetensors" --prompt "The tower is" --max-new-tokens 100 --top-k 1 --seed 2 --tokenizer "$WORK/train/tokenizer.json")"
if [ -n "$gr1" ] && [ "$gr1" = "$gr2" ]; then pass "generate: greedy = top-k 1, past the context of 64"; else fail "generate greedy: '$gr1' vs '$gr2'"; fi
long_err="$("$BIN" generate --threads 1 --checkpoint "$WORK/train/model.safetensors" --prompt "$(head -c 3000 "$DATA/tiny_shakespeare.txt")" --max-new-tokens 5 2>&1 >/dev/null)"
if [ $? -eq 0 ] && printf '%s' "$long_err" | grep -q "the model sees its last 64"; then pass "generate: a long prompt keeps its last seq_len tokens"; else fail "generate long prompt: $long_err"; fi
# train --sample-every prints samples and leaves training unchanged
"$BIN" train --steps 6 --dim 32 --layers 2 --dataset-dir "$DATA" --threads 1 --output "$WORK/train-s" --checkpoint-every 3 --sample-every 3 \
  > "$WORK/train-s.txt" 2> "$WORK/train-s.err"
if [ $? -eq 0 ] && grep -q "^step 6 sample: The" "$WORK/train-s.err" && [ "$(head -1 "$WORK/train.txt")" = "$(head -1 "$WORK/train-s.txt")" ]; then
  pass "train --sample-every prints samples, same validation loss"
else
  fail "train --sample-every"; cat "$WORK/train-s.err"
fi
"$BIN" gradcheck --filter rms_norm > "$WORK/gc.txt"
if [ $? -eq 0 ] && grep -q "^first derivatives: [1-9][0-9]* passed, 0 failed" "$WORK/gc.txt" &&
   grep -q "^second derivatives: [1-9][0-9]* passed, 0 failed" "$WORK/gc.txt"; then
  pass "gradcheck command (both tables)"
else fail "gradcheck command (both tables)"; fi
"$BIN" gradcheck --filter no-such-op > "$WORK/gc0.txt" 2> "$WORK/gc0.err"
if [ $? -eq 2 ] && grep -q "no-such-op" "$WORK/gc0.err" && [ ! -s "$WORK/gc0.txt" ]; then pass "gradcheck --filter matching nothing is a usage error"; else fail "gradcheck --filter matching nothing"; fi

# --- evolve: the documented command on a tiny budget (both AttnRes arms must be trained) ---
"$BIN" evolve --model micro-llm --dataset wikitext-2 --direction "比较 Block AttnRes 与 RD-AttnRes 的 QK/V 深度路由" \
  --generations 1 --population 3 --steps 3 --trial-seeds 1 --dim 32 --layers 2 --eval-windows 4 \
  --dataset-dir "$DATA" --threads 1 --quiet --output-dir "$WORK/evolve" > "$WORK/evolve.txt"
rc=$?
ev_dir="$(ls -d "$WORK"/evolve/micro-llm-*/ 2>/dev/null | head -1)"
if [ $rc -eq 0 ] && [ -s "$ev_dir/result.json" ] && [ -s "$ev_dir/report.md" ] && [ -s "$ev_dir/index.html" ] && grep -qi "champion" "$WORK/evolve.txt"; then
  pass "evolve runs and writes result.json, report.md, index.html"
else
  fail "evolve (rc=$rc)"; cat "$WORK/evolve.txt"
fi
if grep -q '"block_attnres"' "$ev_dir/result.json" 2>/dev/null && grep -q 'attnres' "$WORK/evolve.txt"; then pass "evolve trains AttnRes genomes"; else fail "evolve did not train AttnRes genomes"; fi
expect_error "evolve: unknown model" "micro-llm" -- "$BIN" evolve --model gpt-9 --dataset-dir "$DATA"
expect_error "evolve: a preset its genomes cannot express" "--preset base: its ffn expansion is 4" -- "$BIN" evolve --preset base --dataset-dir "$WORK/no-such-dir"
expect_error "evolve: --preset with --resume refused" "drop --preset" -- "$BIN" evolve --preset mini --resume "$WORK/no-such-run"

# --- bad input: one line, non-zero exit ---
expect_error "unknown paper" "unknown paper key 'nope'" -- "$BIN" reproduce --paper nope --dataset-dir "$DATA"
expect_error "missing dataset" "does not exist" -- "$BIN" reproduce --dataset-dir "$WORK/no-such-dir"
expect_error "bad seed list" "--seeds" -- "$BIN" reproduce --seeds 3-x --dataset-dir "$DATA"
expect_error "unknown flag" "unknown flag --stepz" -- "$BIN" reproduce --stepz 3
expect_error "flag as a value" "--output: missing value" -- "$BIN" train --output --steps 5
expect_error "negative number reaches the range check" "--lr: expected a value > 0, got '-1'" -- "$BIN" train --lr -1 --steps 1 --output "$WORK/never"
expect_error "bad thread count" "--threads" -- "$BIN" reproduce --threads 0 --dataset-dir "$DATA"
expect_error "unknown command" "unknown command" -- "$BIN" frobnicate
expect_error "bench --compare-torch without torch names the package" "python3-torch" -- "$BIN" bench --compare-torch --configs micro --python /bin/false
expect_error "bench --generate takes one thread count" "--generate: give one --threads" -- "$BIN" bench --generate --threads 1,2
expect_error "bench: a precision that is not one" "--precision: 'fp16' is not a precision" -- "$BIN" bench --precision float32,fp16 --configs micro
expect_error "bench --one takes one precision" "--one: give exactly one --precision" -- "$BIN" bench --one micro --threads 1 --precision float32,bf16
# bf16 on a CPU without it is refused in one line naming the flag (else the list is accepted:
# --write-check does no timing).
if grep -qw -e amx_bf16 -e avx512_bf16 /proc/cpuinfo; then
  if "$BIN" bench --precision float32,bf16 --configs micro --write-check "$WORK/bf16-check" > /dev/null; then
    pass "bench --precision float32,bf16 accepted on a bf16 CPU"
  else
    fail "bench --precision float32,bf16 on a bf16 CPU"
  fi
else
  expect_error "bench --precision bf16 on a CPU without bf16" "--precision bf16: bf16 matmuls need" -- "$BIN" bench --precision float32,bf16 --configs micro
fi
# The run config is checked before any data is read (the data directory here does not exist).
expect_error "reproduce: heads must divide dim" "heads 5 must divide dim 64" -- "$BIN" reproduce --heads 5 --dataset-dir "$WORK/no-such-dir"
expect_error "train: kv-heads must divide heads" "kv_heads 3 must divide heads 4" -- "$BIN" train --kv-heads 3 --dataset-dir "$WORK/no-such-dir"
mkdir -p "$WORK/bad-data/wikitext-2"
for f in train.txt valid.txt test.txt; do cp "$DATA/wikitext-2/$f" "$WORK/bad-data/wikitext-2/"; done
chmod u+w "$WORK/bad-data/wikitext-2/valid.txt"
head -c 1000 "$DATA/tiny_shakespeare.txt" > "$WORK/bad-data/tiny_shakespeare.txt"
expect_error "altered data file" "tiny_shakespeare.txt" -- "$BIN" reproduce --dataset-dir "$WORK/bad-data" --output-dir "$WORK/bad-runs" --quiet
if [ ! -d "$WORK/bad-runs" ] || [ -z "$(ls -A "$WORK/bad-runs"/*/ 2>/dev/null)" ]; then pass "failed run leaves no half-written run directory"; else fail "half-written run directory left"; ls -R "$WORK/bad-runs"; fi
expect_error "eval of a missing checkpoint" "no-such.safetensors" -- "$BIN" eval --checkpoint "$WORK/no-such.safetensors" --dataset-dir "$DATA"
head -c 100 "$WORK/train/model.safetensors" > "$WORK/trunc.safetensors"
expect_error "eval of a truncated checkpoint" "trunc.safetensors" -- "$BIN" eval --checkpoint "$WORK/trunc.safetensors" --dataset-dir "$DATA"

mkdir -p "$WORK/lonely" && cp "$WORK/train/model.safetensors" "$WORK/lonely/"
M="$WORK/train/model.safetensors"
expect_error "generate: a tokenizer.json is not a model" "tokenizer.json" -- "$BIN" generate --checkpoint "$WORK/train/tokenizer.json" --prompt "a"
header='{"__metadata__":{"format":"pt"},"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
{ printf "\x$(printf %02x ${#header})\x00\x00\x00\x00\x00\x00\x00%s" "$header"; printf '\x00\x00\x00\x00'; } > "$WORK/other.safetensors"
expect_error "generate: safetensors that is not a depthgrad model" "not a model written by depthgrad train" -- "$BIN" generate --checkpoint "$WORK/other.safetensors" --prompt "a"
expect_error "generate: no tokenizer beside the checkpoint" "pass --tokenizer" -- "$BIN" generate --checkpoint "$WORK/lonely/model.safetensors" --prompt "a"
printf 'the cat sat on the mat. the dog sat on the log.\n%.0s' {1..50} > "$WORK/small.txt"
"$BIN" tokenize --action train --input "$WORK/small.txt" --vocab 300 --output "$WORK/tok300.json" > /dev/null
expect_error "generate: tokenizer of another vocabulary" "vocabulary" -- "$BIN" generate --checkpoint "$M" --prompt "a" --tokenizer "$WORK/tok300.json"
expect_error "generate: empty prompt" "--prompt encodes to no tokens" -- "$BIN" generate --checkpoint "$M" --prompt ""
expect_error "generate: top-p 0" "--top-p must be in (0, 1]" -- "$BIN" generate --checkpoint "$M" --prompt "a" --top-p 0
expect_error "generate: top-p 1.5" "--top-p must be in (0, 1]" -- "$BIN" generate --checkpoint "$M" --prompt "a" --top-p 1.5
expect_error "generate: negative temperature" "--temperature must be" -- "$BIN" generate --checkpoint "$M" --prompt "a" --temperature -1
expect_error "generate: negative top-k" "--top-k must be >= 0" -- "$BIN" generate --checkpoint "$M" --prompt "a" --top-k -1
expect_error "generate: negative max-new-tokens" "--max-new-tokens must be >= 0" -- "$BIN" generate --checkpoint "$M" --prompt "a" --max-new-tokens -1
expect_error "train: negative --sample-every" "--sample-every" -- "$BIN" train --sample-every -2 --dataset-dir "$DATA" --output "$WORK/train-bad"

finish
