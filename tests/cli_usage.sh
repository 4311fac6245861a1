#!/usr/bin/env bash
# End-to-end checks of everyday use, run by ctest: training on your own text (a file, a folder,
# the cache), tokenizers that round-trip any bytes, one vocabulary of flags (--output-dir, help
# defaults, --threads everywhere), checks before data, no finished run replaced without --overwrite
# (train, tokenize, bench --write-check), and Ctrl-C: SIGINT/SIGTERM stop train and a
# paired reproduction at a step boundary, the printed command resumes them and gives the same bits
# as a run that was never interrupted; after SIGKILL a paired reproduction resumes from its periodic
# arm checkpoint to the same numbers; a fine-tune of an imported model (train --init-from) stops
# and resumes to the same bits too.
# Usage: tests/cli_usage.sh PATH/TO/depthgrad DATA_DIR
set -u
source "$(dirname "$0")/cli_common.sh" cli_usage "$@"
sha() { sha256sum "$1" | cut -d' ' -f1; }
# Waits (up to 60 s) until FILE has at least N lines.
wait_lines() {
  local file="$1" n="$2" i
  for i in $(seq 600); do
    [ -f "$file" ] && [ "$(wc -l < "$file")" -ge "$n" ] && return 0
    sleep 0.1
  done
  return 1
}

# --- own text: a file (validation held out by position), a folder, the cache, eval ---
head -c 300000 "$DATA/tiny_shakespeare.txt" > "$WORK/own.txt"
TINY=(--dim 32 --layers 1 --heads 2 --seq-len 32 --batch 4 --vocab 300 --threads 1 --quiet)
"$BIN" train --dataset "$WORK/own.txt" --steps 6 "${TINY[@]}" --output-dir "$WORK/own" > "$WORK/own.out" 2> "$WORK/own.err"
if [ $? -eq 0 ] && [ -s "$WORK/own/model.safetensors" ] && grep -q "validation loss .* (32 validation windows of 32 tokens)" "$WORK/own.out"; then
  pass "train --dataset FILE (and the loss says what it was computed on)"
else
  fail "train --dataset FILE"; cat "$WORK/own.out" "$WORK/own.err"
fi
if grep -q '"validation_fraction": 0.1' "$WORK/own/config.json" && grep -q "last 10% held out" "$WORK/own/summary.json"; then
  pass "own text: config.json and summary.json record the held-out split"
else
  fail "own text: config/summary"; cat "$WORK/own/summary.json"
fi
if ls "$XDG_CACHE_HOME"/depthgrad/tokenizers/text-bpe-300-*.json > /dev/null 2>&1; then pass "own text: tokenizer cached"; else fail "own text: no cached tokenizer"; fi
"$BIN" train --dataset "$WORK/own.txt" --steps 6 "${TINY[@]}" --output-dir "$WORK/own-again" > "$WORK/own-again.out"
if [ "$(sha "$WORK/own/model.safetensors")" = "$(sha "$WORK/own-again/model.safetensors")" ]; then pass "own text: the cached run gives the same weights"; else fail "own text: cached run differs"; fi
"$BIN" eval --checkpoint "$WORK/own/model.safetensors" --dataset "$WORK/own.txt" --windows 32 --threads 1 > "$WORK/own-eval.out"
if [ $? -eq 0 ] && [ "$(awk '{print $4}' "$WORK/own-eval.out")" = "$(awk '{print $3}' "$WORK/own.out" | head -1)" ]; then
  pass "eval on own text equals train's validation loss"
else
  fail "eval on own text"; cat "$WORK/own-eval.out" "$WORK/own.out"
fi
mkdir -p "$WORK/folder"
head -c 200000 "$DATA/tiny_shakespeare.txt" > "$WORK/folder/train.txt"
tail -c 50000 "$DATA/tiny_shakespeare.txt" > "$WORK/folder/valid.txt"
"$BIN" train --dataset "$WORK/folder" --steps 4 "${TINY[@]}" --output-dir "$WORK/fold" > "$WORK/fold.out" 2>&1
if [ $? -eq 0 ] && grep -q "valid.txt" "$WORK/fold/summary.json"; then pass "train --dataset FOLDER (train.txt + valid.txt)"; else fail "train --dataset FOLDER"; cat "$WORK/fold.out"; fi
mkdir -p "$WORK/empty-folder"
expect_error "own text: folder without train.txt" "has no train.txt" -- "$BIN" train --dataset "$WORK/empty-folder" --steps 2 "${TINY[@]}" --output-dir "$WORK/never"
expect_error "own text: missing path" "is neither wikitext-2, tiny-shakespeare nor an existing" -- "$BIN" train --dataset "$WORK/nope.txt" --steps 2 "${TINY[@]}" --output-dir "$WORK/never"
head -c 2000 "$DATA/tiny_shakespeare.txt" > "$WORK/short.txt"
expect_error "own text: a validation part shorter than one window" "--validation-fraction" -- "$BIN" train --dataset "$WORK/short.txt" --validation-fraction 0.01 --steps 2 "${TINY[@]}" --output-dir "$WORK/never"

# evolve on own text, then one generation more on the finished search
EV=(evolve --dataset "$WORK/own.txt" --population 2 --steps 3 --trial-seeds 1 --dim 32 --layers 2 --eval-windows 4 --threads 1 --quiet --output-dir "$WORK/ev")
"$BIN" "${EV[@]}" --generations 1 > "$WORK/ev.out" 2>&1
ev_dir="$(ls -d "$WORK"/ev/micro-llm-*/ 2>/dev/null | head -1)"
n1=$(grep -o '"trial_id": "g[0-9]*-t[0-9]*"' "$ev_dir/result.json" 2>/dev/null | sort -u | wc -l)
"$BIN" evolve --resume "$ev_dir" --generations 2 --threads 1 --quiet > "$WORK/ev2.out" 2>&1
rc=$?
n2=$(grep -o '"trial_id": "g[0-9]*-t[0-9]*"' "$ev_dir/result.json" 2>/dev/null | sort -u | wc -l)
if [ -n "$ev_dir" ] && [ $rc -eq 0 ] && [ "$n1" -eq 3 ] && [ "$n2" -eq 5 ] && grep -q '"generations": 2' "$ev_dir/result.json"; then
  pass "evolve on own text; --resume --generations 2 adds a generation to the finished search"
else
  fail "evolve own text / more generations (rc=$rc, trials $n1 -> $n2)"; tail -n 5 "$WORK/ev.out" "$WORK/ev2.out"
fi

# --- tokenizers round-trip any text; decode ends with a newline; tokenize takes --threads ---
tab_text=$'tab\tx 😀 日本語 ünïcödé'
ids="$("$BIN" tokenize --action encode --tokenizer "$WORK/own/tokenizer.json" --text "$tab_text" --threads 1 2>/dev/null)"
"$BIN" tokenize --action decode --tokenizer "$WORK/own/tokenizer.json" --ids "$ids" > "$WORK/decoded.txt"
if [ "$(cat "$WORK/decoded.txt")" = "$tab_text" ] && [ "$(tail -c 1 "$WORK/decoded.txt" | od -An -c | tr -d ' ')" = '\n' ]; then
  pass "own-text tokenizer: tab, emoji, CJK round-trip; decode prints a trailing newline"
else
  fail "tokenize round trip / newline: $(od -c "$WORK/decoded.txt" | head -3)"
fi
printf 'the cat sat on the mat.\n%.0s' {1..40} > "$WORK/cat.txt"
"$BIN" tokenize --action train --input "$WORK/cat.txt" --vocab 300 --output "$WORK/cat.json" --threads 1 > /dev/null
"$BIN" tokenize --action train --input "$WORK/cat.txt" --vocab 300 --output "$WORK/cat-ref.json" --reference-alphabet > /dev/null
r1="$("$BIN" tokenize --action decode --tokenizer "$WORK/cat.json" --ids "$("$BIN" tokenize --action encode --tokenizer "$WORK/cat.json" --text "$tab_text" 2>/dev/null)")"
r2="$("$BIN" tokenize --action decode --tokenizer "$WORK/cat-ref.json" --ids "$("$BIN" tokenize --action encode --tokenizer "$WORK/cat-ref.json" --text "$tab_text" 2>/dev/null)")"
if [ "$r1" = "$tab_text" ] && [ "$r2" != "$tab_text" ]; then pass "tokenize --action train: all bytes by default, --reference-alphabet as the reference"; else fail "tokenize train alphabet: '$r1' / '$r2'"; fi

# --- what a run wrote is never replaced without --overwrite (train, tokenize, bench --write-check) ---
R="$WORK/own-again"  # a finished run; $WORK/own is another one
kept="$(sha "$R/model.safetensors")"
expect "train: a folder holding a run is refused, naming the folder and the ways on" 2 \
  "$R holds a run (config.json, tokenizer.json, steps.jsonl, checkpoint.safetensors, model.safetensors, summary.json): continue it with --resume $R/checkpoint.safetensors, replace it with --overwrite, or give a fresh --output-dir" -- \
  "$BIN" train --dataset "$WORK/own.txt" --steps 6 "${TINY[@]}" --output-dir "$R"
expect "train: --resume of another run's checkpoint into a folder holding a run is refused" 2 "$R holds a run" -- \
  "$BIN" train --dataset "$WORK/own.txt" --steps 8 "${TINY[@]}" --resume "$WORK/own/checkpoint.safetensors" --output-dir "$R"
expect "train: --resume with --overwrite is refused" 2 "--resume and --overwrite" -- \
  "$BIN" train --dataset "$WORK/own.txt" --steps 8 "${TINY[@]}" --resume "$R/checkpoint.safetensors" --overwrite --output-dir "$R"
if [ "$(sha "$R/model.safetensors")" = "$kept" ]; then pass "train: the refused runs left the run as it was"; else fail "train: a refused run changed model.safetensors"; fi
# --overwrite removes the old run's files before the new run writes (here the new run diverges at
# once: no weights or summary of the old run survive beside it); files of the user's stay.
echo "my notes" > "$R/notes.txt"
"$BIN" train --dataset "$WORK/own.txt" --steps 6 "${TINY[@]}" --lr 1e30 --clip 0 --overwrite --output-dir "$R" > /dev/null 2>&1
if [ $? -eq 1 ] && [ ! -e "$R/model.safetensors" ] && [ ! -e "$R/summary.json" ] && [ ! -e "$R/checkpoint.safetensors" ] && [ "$(cat "$R/notes.txt")" = "my notes" ]; then
  pass "train --overwrite: the old run's files are removed before the new run writes; other files stay"
else
  fail "train --overwrite left old files"; ls -l "$R"
fi
"$BIN" train --dataset "$WORK/own.txt" --steps 3 "${TINY[@]}" --overwrite --output-dir "$R" > /dev/null
if [ $? -eq 0 ] && grep -q '"steps": 3' "$R/config.json" && [ "$(wc -l < "$R/steps.jsonl")" -eq 3 ] && [ -s "$R/model.safetensors" ]; then
  pass "train --overwrite replaces the run"
else
  fail "train --overwrite"; ls -l "$R"
fi
cp "$WORK/cat.json" "$WORK/cat-kept.json"
expect "tokenize: an existing --output is refused" 2 "--output: $WORK/cat.json exists: replace it with --overwrite, or give another --output" -- \
  "$BIN" tokenize --action train --input "$WORK/cat.txt" --vocab 300 --output "$WORK/cat.json" --reference-alphabet
if cmp -s "$WORK/cat.json" "$WORK/cat-kept.json"; then pass "tokenize: the refused run left the file as it was"; else fail "tokenize: refused run changed the file"; fi
"$BIN" tokenize --action train --input "$WORK/cat.txt" --vocab 300 --output "$WORK/cat.json" --reference-alphabet --overwrite > /dev/null
if [ $? -eq 0 ] && cmp -s "$WORK/cat.json" "$WORK/cat-ref.json"; then pass "tokenize --overwrite writes over the file"; else fail "tokenize --overwrite"; fi
"$BIN" bench --write-check "$WORK/check" --configs micro > /dev/null
expect "bench --write-check: files of an earlier check are refused" 2 \
  "$WORK/check holds equivalence-check files (micro.safetensors, micro.tokens.json): replace them with --overwrite" -- \
  "$BIN" bench --write-check "$WORK/check" --configs micro
if "$BIN" bench --write-check "$WORK/check" --configs micro --overwrite > /dev/null; then pass "bench --write-check --overwrite"; else fail "bench --write-check --overwrite"; fi
expect "--overwrite where nothing is replaced is refused" 2 "--overwrite: only --combine" -- "$BIN" reproduce --overwrite --dataset-dir "$WORK/no-such-dir"

# --- one vocabulary of flags ---
"$BIN" train --dataset "$WORK/own.txt" --steps 2 "${TINY[@]}" --output "$WORK/alias" > /dev/null
if [ -s "$WORK/alias/model.safetensors" ]; then pass "train --output still works (alias of --output-dir)"; else fail "train --output alias"; fi
help_ok=1
for c in reproduce evolve train eval generate tokenize gradcheck bench list; do
  h="$("$BIN" $c --help)"
  if printf '%s' "$h" | grep -q "(default: none)"; then help_ok=0; echo "  $c --help shows (default: none)"; fi
  if printf '%s\n' "$h" | grep -E "default.*\(default: " > /dev/null; then help_ok=0; echo "  $c --help shows a default twice"; fi
done
if [ $help_ok -eq 1 ]; then pass "--help shows each default once, none for flags without one"; else fail "--help defaults"; fi
if "$BIN" train --help | grep -q -- "--output-dir VALUE.*(alias: --output)" && "$BIN" train --help | grep -q "Run" && grep -q "^## Run configuration" "$(dirname "$0")/../train/lm/README.md"; then
  pass "train --help names --output as an alias and points at train/lm/README.md's Run configuration"
else
  fail "train --help"
fi
for c in train eval tokenize reproduce evolve generate gradcheck; do
  if ! "$BIN" $c --help | grep -q -- "--threads"; then fail "$c has no --threads"; fi
done
# The configuration is checked before any data is read (the data directory does not exist).
expect_error "train: --heads 5 with width 64 before the data" "heads 5 must divide dim 64" -- "$BIN" train --heads 5 --dataset-dir "$WORK/no-such-dir"
expect_error "train: --heads 5 before own text is read" "heads 5 must divide dim 64" -- "$BIN" train --heads 5 --dataset "$WORK/no-such.txt"
expect_error "evolve: --heads 5 before the data" "heads" -- "$BIN" evolve --heads 5 --dataset-dir "$WORK/no-such-dir"

# --- Ctrl-C: train stops at a step boundary, saves, prints the resume command, same bits ---
LONG=(--dataset "$WORK/own.txt" --steps 3000 --checkpoint-every 0 --dim 32 --layers 1 --heads 2 --seq-len 32 --batch 4 --vocab 300 --threads 1)
"$BIN" train "${LONG[@]}" --quiet --output-dir "$WORK/whole" > /dev/null
for sig in INT TERM; do
  want=$([ $sig = INT ] && echo 130 || echo 143)
  env -u OMP_WAIT_POLICY "$BIN" train "${LONG[@]}" --output-dir "$WORK/cut-$sig" > "$WORK/cut-$sig.out" 2> "$WORK/cut-$sig.err" &
  pid=$!
  wait_lines "$WORK/cut-$sig/steps.jsonl" 60
  kill -$sig $pid
  wait $pid
  rc=$?
  resume="$(grep -A1 '^resume with:' "$WORK/cut-$sig.err" | tail -1)"
  if [ $rc -eq $want ] && [ -n "$resume" ] && grep -q "checkpoint saved" "$WORK/cut-$sig.err" && [ ! -e "$WORK/cut-$sig/model.safetensors" ]; then
    pass "train: SIG$sig stops it with exit $want and prints the resume command"
  else
    fail "train SIG$sig (rc=$rc)"; cat "$WORK/cut-$sig.err"
  fi
  if [ $sig = INT ]; then
    if grep -q "OMP_WAIT_POLICY=passive" "$WORK/cut-$sig.err"; then pass "OpenMP waits passively by default"; else fail "OMP_WAIT_POLICY default"; fi
  fi
  bash -c "$resume --quiet" > /dev/null 2>&1
  if [ $? -eq 0 ] && [ "$(sha "$WORK/whole/model.safetensors")" = "$(sha "$WORK/cut-$sig/model.safetensors")" ]; then
    pass "train: the resumed run gives the same weights as the uninterrupted one (SIG$sig)"
  else
    fail "train: resumed weights differ (SIG$sig; $resume)"
  fi
done

# --- fine-tuning an imported model: Ctrl-C and the printed resume command give the same bits ---
"$BIN" import --from "$(dirname "$0")/data/hf/gpt2" --to "$WORK/imported" > /dev/null 2>&1
head -c 100000 "$DATA/tiny_shakespeare.txt" > "$WORK/notes.txt"
FT=(--init-from "$WORK/imported" --dataset "$WORK/notes.txt" --steps 1000 --checkpoint-every 100 --batch 2 --threads 1)
"$BIN" train "${FT[@]}" --quiet --output-dir "$WORK/ft-whole" > /dev/null 2>&1
env -u OMP_WAIT_POLICY "$BIN" train "${FT[@]}" --output-dir "$WORK/ft-cut" > "$WORK/ft-cut.out" 2> "$WORK/ft-cut.err" &
pid=$!
wait_lines "$WORK/ft-cut/steps.jsonl" 150
kill -INT $pid
wait $pid
rc=$?
resume="$(grep -A1 '^resume with:' "$WORK/ft-cut.err" | tail -1)"
if [ $rc -eq 130 ] && [ -s "$WORK/ft-whole/model.safetensors" ] && [ ! -e "$WORK/ft-cut/model.safetensors" ] && printf '%s' "$resume" | grep -q -- "--init-from"; then
  pass "train --init-from an imported GPT-2: SIGINT stops it and the resume command keeps --init-from"
else
  fail "train --init-from SIGINT (rc=$rc)"; cat "$WORK/ft-cut.err"
fi
bash -c "$resume --quiet" > /dev/null 2>&1
if [ $? -eq 0 ] && [ "$(sha "$WORK/ft-whole/model.safetensors")" = "$(sha "$WORK/ft-cut/model.safetensors")" ] && [ "$(wc -l < "$WORK/ft-cut/steps.jsonl")" -eq 1000 ]; then
  pass "train --init-from: the resumed fine-tune gives the same weights as the uninterrupted one"
else
  fail "train --init-from: resumed weights differ ($resume)"
fi

# --- Ctrl-C: a paired reproduction resumes from its run folder, the arm in training included ---
PAIRED=(reproduce --protocol paired --seeds 1-2 --steps 1500 --layers 1 --dim 16 --heads 2 --train-tokens 20000 --eval reference --dataset-dir "$DATA" --threads 1)
"$BIN" "${PAIRED[@]}" --quiet --output-dir "$WORK/pw" > "$WORK/pw.out"
"$BIN" "${PAIRED[@]}" --output-dir "$WORK/pc" > "$WORK/pc.out" 2> "$WORK/pc.err" &
pid=$!
for i in $(seq 600); do
  d="$(ls -d "$WORK"/pc/2608.01075-rd-attnres/*/ 2>/dev/null | head -1)"
  [ -n "$d" ] && [ -f "$d/steps.jsonl" ] && [ "$(wc -l < "$d/steps.jsonl")" -ge 1800 ] && break
  sleep 0.1
done
kill -INT $pid
wait $pid
rc=$?
resume="$(grep -A1 '^resume with:' "$WORK/pc.err" | tail -1)"
d="$(ls -d "$WORK"/pc/2608.01075-rd-attnres/*/ | head -1)"
if [ $rc -eq 130 ] && [ -s "$d/state.json" ] && ls "$d"/checkpoints/seed-1-rd_attnres.safetensors > /dev/null 2>&1; then
  pass "reproduce paired: SIGINT keeps state.json and the arm's checkpoint in the run folder"
else
  fail "reproduce paired SIGINT (rc=$rc)"; cat "$WORK/pc.err" | tail -5; ls -R "$d"
fi
# A step log line without its timings (seconds, tokens/s): the same in a resumed run.
log_without_timings() { sed 's/,"seconds".*//' "$1/steps.jsonl"; }
whole_log="$(ls -d "$WORK"/pw/2608.01075-rd-attnres/*/ | head -1)"
bash -c "$resume" > "$WORK/pr.out" 2> "$WORK/pr.err"
rc=$?
if [ $rc -eq 0 ] && grep -q "resuming from" "$WORK/pr.err" && diff <(grep '^| ' "$WORK/pw.out") <(grep '^| ' "$WORK/pr.out") > /dev/null \
   && diff <(grep '^paired' "$WORK/pw.out") <(grep '^paired' "$WORK/pr.out") > /dev/null && [ ! -e "$d/checkpoints/seed-1-rd_attnres.safetensors" ]; then
  pass "reproduce paired: the resumed run gives the same numbers as the uninterrupted one"
else
  fail "reproduce paired resume (rc=$rc; $resume)"; cat "$WORK/pr.err" | tail -5; cat "$WORK/pw.out" "$WORK/pr.out"
fi
if [ "$(wc -l < "$whole_log/steps.jsonl")" -eq 6000 ] && diff <(log_without_timings "$whole_log") <(log_without_timings "$d") > /dev/null; then
  pass "reproduce paired: the resumed run's steps.jsonl keeps the steps before the stop (one line per step, as uninterrupted)"
else
  fail "reproduce paired resume: steps.jsonl differs from the uninterrupted run's"; wc -l "$whole_log/steps.jsonl" "$d/steps.jsonl"
fi


# --- SIGKILL: the arm in training was saved every --checkpoint-every steps; resume from there ---
"$BIN" "${PAIRED[@]}" --checkpoint-every 100 --quiet --output-dir "$WORK/pk" > /dev/null 2>&1 &
pid=$!
for i in $(seq 1200); do
  d="$(ls -d "$WORK"/pk/2608.01075-rd-attnres/*/ 2>/dev/null | head -1)"
  [ -n "$d" ] && [ -f "$d/checkpoints/seed-1-rd_attnres.safetensors" ] && break
  sleep 0.05
done
kill -KILL $pid
wait $pid 2> /dev/null
d="$(ls -d "$WORK"/pk/2608.01075-rd-attnres/*/ | head -1)"
if [ -f "$d/checkpoints/seed-1-rd_attnres.safetensors" ] && [ -s "$d/state.json" ]; then
  "$BIN" "${PAIRED[@]}" --checkpoint-every 100 --resume "$d" > "$WORK/pk.out" 2> "$WORK/pk.err"
  rc=$?
  if [ $rc -eq 0 ] && grep -q "seed 1 rd_attnres: resuming from" "$WORK/pk.err" && diff <(grep '^| ' "$WORK/pw.out") <(grep '^| ' "$WORK/pk.out") > /dev/null \
     && diff <(grep '^paired' "$WORK/pw.out") <(grep '^paired' "$WORK/pk.out") > /dev/null; then
    pass "reproduce paired: after SIGKILL the periodic arm checkpoint resumes to the same numbers"
  else
    fail "reproduce paired SIGKILL resume (rc=$rc)"; tail -5 "$WORK/pk.err"; cat "$WORK/pw.out" "$WORK/pk.out"
  fi
  # The lines the killed run logged past its last checkpoint are dropped, then logged again.
  if diff <(log_without_timings "$whole_log") <(log_without_timings "$d") > /dev/null; then
    pass "reproduce paired: after SIGKILL steps.jsonl has each step once, as uninterrupted"
  else
    fail "reproduce paired SIGKILL: steps.jsonl differs from the uninterrupted run's"; wc -l "$whole_log/steps.jsonl" "$d/steps.jsonl"
  fi
else
  fail "reproduce paired: no periodic arm checkpoint before SIGKILL"; ls -R "$d"
fi

# --- export: a standard-mode model to Hugging Face's layout (and back) and to GGUF; AttnRes refused
"$BIN" train --mode standard --dataset tiny-shakespeare --dataset-dir "$DATA" --steps 2 "${TINY[@]}" --output-dir "$WORK/std" > /dev/null 2>&1
"$BIN" export --to gguf --type f16 --checkpoint "$WORK/std/model.safetensors" --output "$WORK/std.gguf" > /dev/null 2>&1
if [ $? -eq 0 ] && [ "$(head -c 4 "$WORK/std.gguf")" = "GGUF" ] && [ "$(od -An -tu4 -j4 -N4 "$WORK/std.gguf" | tr -d ' ')" = "3" ]; then
  pass "export --to gguf writes a GGUF v3 file"
else
  fail "export --to gguf"
fi
"$BIN" export --to gguf --checkpoint "$WORK/imported/model.safetensors" --output "$WORK/gpt2.gguf" > /dev/null 2>&1
if [ $? -eq 0 ] && grep -aq "gpt2.attention.layer_norm_epsilon" "$WORK/gpt2.gguf"; then
  pass "export --to gguf writes an imported GPT-2 as llama.cpp's gpt2 architecture"
else
  fail "export --to gguf of the imported GPT-2"
fi
"$BIN" export --to hf --checkpoint "$WORK/std/model.safetensors" --output "$WORK/std-hf" > /dev/null 2>&1 &&
  "$BIN" import --from "$WORK/std-hf" --to "$WORK/std-back" > /dev/null 2>&1 &&
  "$BIN" generate --checkpoint "$WORK/std-back/model.safetensors" --prompt "ROMEO:" --max-new-tokens 8 --seed 1 --threads 1 > "$WORK/std-back.out" 2>&1
if [ $? -eq 0 ] && [ -s "$WORK/std-hf/config.json" ] && [ -s "$WORK/std-back.out" ]; then
  pass "export --to hf, import it back, generate from it"
else
  fail "export --to hf / import / generate"; cat "$WORK/std-back.out"
fi
# --- export --to onnx: the standard-mode model and the imported GPT-2 (ONNX Runtime checks the
# numbers of the same export in ctest's onnx_runtime); onnx-check reads them back
"$BIN" export --to onnx --checkpoint "$WORK/std/model.safetensors" --output "$WORK/std.onnx" > /dev/null 2>&1 &&
  "$BIN" onnx-check "$WORK/std.onnx" > "$WORK/std-onnx.txt" 2>&1
if [ $? -eq 0 ] && grep -q "input_ids" "$WORK/std-onnx.txt" && grep -q "logits" "$WORK/std-onnx.txt" && grep -q "batch" "$WORK/std-onnx.txt"; then
  pass "export --to onnx writes the model; onnx-check names input_ids, logits and the batch axis"
else
  fail "export --to onnx / onnx-check"; cat "$WORK/std-onnx.txt"
fi
"$BIN" export --to onnx --dynamic-sequence --checkpoint "$WORK/imported/model.safetensors" --output "$WORK/gpt2.onnx" > /dev/null 2>&1 &&
  "$BIN" onnx-check "$WORK/gpt2.onnx" > "$WORK/gpt2-onnx.txt" 2>&1
if [ $? -eq 0 ] && grep -q "sequence" "$WORK/gpt2-onnx.txt"; then
  pass "export --to onnx --dynamic-sequence of the imported GPT-2 leaves the sequence axis free"
else
  fail "export --to onnx of the imported GPT-2"; cat "$WORK/gpt2-onnx.txt"
fi
expect_error "export --to onnx refuses a sequence longer than seq_len" "outside 1.." -- "$BIN" export --to onnx --sequence 100000 --checkpoint "$WORK/std/model.safetensors" --output "$WORK/long.onnx"
expect_error "export --to onnx into an existing file is refused" "replace it with --overwrite" -- "$BIN" export --to onnx --checkpoint "$WORK/std/model.safetensors" --output "$WORK/std.onnx"
expect_error "export --sequence applies to onnx only" "apply to --to onnx" -- "$BIN" export --to gguf --sequence 4 --checkpoint "$WORK/std/model.safetensors" --output "$WORK/x.gguf"
expect_error "export --to gguf into an existing file is refused" "replace it with --overwrite" -- "$BIN" export --to gguf --checkpoint "$WORK/std/model.safetensors" --output "$WORK/std.gguf"
expect_error "export --to hf into a folder holding an export is refused" "holds an export" -- "$BIN" export --to hf --checkpoint "$WORK/std/model.safetensors" --output "$WORK/std-hf"
expect_error "import into a folder holding a model is refused" "holds a model" -- "$BIN" import --from "$WORK/std-hf" --to "$WORK/std-back"
if "$BIN" export --to gguf --type f32 --checkpoint "$WORK/std/model.safetensors" --output "$WORK/std.gguf" --overwrite > /dev/null 2>&1 &&
  "$BIN" import --from "$WORK/std-hf" --to "$WORK/std-back" --overwrite > /dev/null 2>&1; then
  pass "export and import replace what they wrote with --overwrite"
else
  fail "export/import --overwrite"
fi
expect_error "export of an AttnRes mode is refused with the reason" "AttnRes" -- "$BIN" export --to gguf --checkpoint "$WORK/own/model.safetensors" --output "$WORK/never.gguf"
expect_error "export --to: an unknown layout is named" "expected hf, gguf or onnx" -- "$BIN" export --to tflite --checkpoint "$WORK/std/model.safetensors" --output "$WORK/never"

finish
