#!/usr/bin/env bash
# Data-parallel training over MPI ranks, end to end, run by ctest: N ranks with batch b give the
# same bits (losses, gradient norms, weights) as one process with --accum N for every residual
# mode with clipping active, with 2 and 3 ranks (3 oversubscribed: Open MPI's own sums differ
# there), with --zero 1 and 2 and the sum after backward (--overlap=false) too; against one
# process with batch N·b to 1e-6; resume with the same and another rank count; refused layouts and mismatched settings; an error on one rank and a killed
# rank end the job promptly; the paired protocol over ranks (the same numbers as one process; stopped
# by SIGTERM and resumed on 2 ranks or one; a stop sent to one rank alone) and bench over ranks.
# Usage: tests/mpi_train.sh PATH/TO/depthgrad DATA_DIR [mpirun] [quick|full]
#   quick (ctest): every check class; the 3-rank and ZeRO-1 comparisons on two residual modes
#   full (make test-mpi-full): those on all five modes as well
set -u
BIN="$1"
DATA="${2:-}"
MPIRUN="${3:-mpirun}"
BATTERY="${4:-full}"
if [ -z "$DATA" ]; then
  echo "SKIPPED: mpi_train needs the data directory (DG_TEST_DATA_DIR is empty)"
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

# One thread per rank, no binding (ranks may outnumber cores), and root allowed (CI containers).
mpi() {
  local n="$1"
  shift
  "$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np "$n" -x DEPTHGRAD_THREADS=1 "$@"
}
# A tiny run: 2 layers of width 32, sequence 32, clipping at 0.85 so that it is active on some
# steps (the gradient norms run from about 0.75 to 0.95 here).
TINY=(--dim 32 --layers 2 --heads 2 --seq-len 32 --dataset-dir "$DATA" --threads 1 --quiet --clip 0.85 --eval-windows 2)

# The tensor bytes of a safetensors file (everything after its JSON header): equal weights even
# when the metadata (the config: batch, accum) differs.
tensor_bytes() {
  local f="$1" n
  n=$(od -An -t u8 -N8 "$f" | tr -d ' ')
  tail -c +$((9 + n)) "$f" | sha256sum | cut -d' ' -f1
}
# "loss grad_norm clipped" of every step, exactly as logged (17 significant digits)
curve() { sed -E 's/.*"loss": *([^,}]+), *"grad_norm": *([^,}]+), *"clipped": *([a-z]+).*/\1 \2 \3/' "$1/steps.jsonl"; }
checkpoint_step() { head -c "$(($(od -An -t u8 -N8 "$1" 2>/dev/null | tr -d ' ') + 8))" "$1" 2>/dev/null | grep -ao '"depthgrad.step": *"[0-9]*"' | grep -o '[0-9]*' | tail -1; }
# PIDs of the ranks mpirun LAUNCHER started (its children whose environment has an
# OMPI_COMM_WORLD_RANK, so a child not yet exec'd as a rank is not taken); with RANK, only the one
# whose OMPI_COMM_WORLD_RANK is RANK. Read from /proc, so no procps is needed.
launcher_ranks() {
  local d key value
  for d in /proc/[0-9]*; do
    key="" value=""
    while read -r key value; do [ "$key" = "PPid:" ] && break; done 2>/dev/null < "$d/status"
    [ "$key" = "PPid:" ] && [ "$value" = "$1" ] || continue
    tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=${2:-[0-9][0-9]*}" || continue
    echo "${d#/proc/}"
  done
}
# Waits (up to 30 s) until mpirun LAUNCHER has started COUNT ranks and prints their PIDs: found
# before a test waits for the moment to stop them, so the /proc scan (slow on a host with many
# processes) is not inside that moment.
await_ranks() {
  local launcher="$1" count="$2" rank="${3:-}" found=""
  for _ in $(seq 1 600); do
    found=$(launcher_ranks "$launcher" $rank)
    [ "$(wc -w <<<"$found")" -ge "$count" ] && break
    sleep 0.05
  done
  echo $found
}
same_run() {  # NAME DIR_A DIR_B: identical losses, grad norms, clipping and final weights
  local name="$1" a="$2" b="$3"
  if [ -s "$a/steps.jsonl" ] && [ "$(curve "$a")" = "$(curve "$b")" ] &&
    [ "$(tensor_bytes "$a/model.safetensors")" = "$(tensor_bytes "$b/model.safetensors")" ]; then
    pass "$name"
  else
    fail "$name"
    diff <(curve "$a") <(curve "$b") | head -5
  fi
}

# Tokenizer cache first (one process), so the ranks below do not all build it.
"$BIN" train "${TINY[@]}" --steps 1 --output "$WORK/warm" > /dev/null || fail "warm-up run"

# tools/results/run_scales.sh in one process, the reference of its RANKS=2 run near the end: in the
# background from here, on the core that the one-process references and the waits below leave idle
# (the cache files it shares with them are written atomically).
SCALES="$(cd "$(dirname "$0")/.." && pwd)/tools/results/run_scales.sh"
scales() { env BIN="$BIN" DATA="$DATA" MPIRUN="$MPIRUN" ONLY=micro-block STEPS=20 SEEDS=1-2 "$@" bash "$SCALES"; }
scales RANKS=1 RESULTS="$WORK/scales1" WORK="$WORK/scales1-runs" > "$WORK/scales1.txt" 2>&1 &
scales1=$!

# --- N ranks == one process with --accum N, every residual mode, clipping active -------------
for mode in standard block_attnres rd_attnres paper_block_attnres paper_rd_attnres; do  # every battery
  "$BIN" train "${TINY[@]}" --mode "$mode" --steps 20 --batch 2 --accum 2 --output "$WORK/accum2-$mode" > /dev/null
  mpi 2 "$BIN" train "${TINY[@]}" --quiet=false --mode "$mode" --steps 20 --batch 2 --output "$WORK/ranks2-$mode" > "$WORK/ranks2-$mode.txt" 2>&1
  same_run "2 ranks == --accum 2 ($mode)" "$WORK/accum2-$mode" "$WORK/ranks2-$mode"
done
if grep -q '"clipped":true' "$WORK/accum2-rd_attnres/steps.jsonl" && grep -q '"clipped":false' "$WORK/accum2-rd_attnres/steps.jsonl"; then
  pass "clipping is active in the comparison runs"
else fail "clipping never (or always) active: the comparison does not exercise it"; fi
if grep -q "2 rank(s) x accum 1 x batch 2 = global batch 4 windows per step, ZeRO-0 (every rank holds all state), the gradient summed while backward runs; rank 0 holds weights [0-9.]* MiB, gradients [0-9.]* MiB, optimiser state [0-9.]* MiB, parameters identical on every rank (checksum [0-9a-f]\{16\})" "$WORK/ranks2-rd_attnres.txt" &&
  grep -q "^peak resident memory per rank (MiB): start-up [0-9]*, [0-9]*; training [0-9]*, [0-9]*; after the last step [0-9]*, [0-9]*$" "$WORK/ranks2-rd_attnres.txt"; then
  pass "the log names the ranks, the global batch, the sharding, each rank's state, the start-up parameter checksum and the peak memory per rank"
else fail "no ranks/global batch line"; fi
[ "$(grep -c '^validation loss' "$WORK/ranks2-rd_attnres.txt")" -eq 1 ] && [ "$(grep -c '^training ' "$WORK/ranks2-rd_attnres.txt")" -eq 1 ] &&
  [ "$(wc -l < "$WORK/ranks2-rd_attnres/steps.jsonl")" -eq 20 ] && pass "one rank prints and writes" || fail "more than one rank printed"

ALL_MODES=(standard block_attnres rd_attnres paper_block_attnres paper_rd_attnres)
if [ "$BATTERY" = full ]; then MORE_MODES=("${ALL_MODES[@]}"); else MORE_MODES=(rd_attnres paper_block_attnres); fi
for mode in "${MORE_MODES[@]}"; do
  mpi 2 "$BIN" train "${TINY[@]}" --mode "$mode" --steps 20 --batch 2 --zero 1 --output "$WORK/zero2-$mode" > /dev/null 2>&1
  same_run "2 ranks with --zero 1 == --accum 2 ($mode)" "$WORK/accum2-$mode" "$WORK/zero2-$mode"
  mpi 2 "$BIN" train "${TINY[@]}" --mode "$mode" --steps 20 --batch 2 --zero 2 --output "$WORK/zerotwo2-$mode" > /dev/null 2>&1
  same_run "2 ranks with --zero 2 == --accum 2 ($mode)" "$WORK/accum2-$mode" "$WORK/zerotwo2-$mode"
done
# the sum after backward (--overlap=false) and while it runs, with accumulation on every rank
mpi 2 "$BIN" train "${TINY[@]}" --steps 20 --batch 2 --overlap=false --output "$WORK/after2" > /dev/null 2>&1
same_run "2 ranks summing after backward == --accum 2" "$WORK/accum2-rd_attnres" "$WORK/after2"
mpi 2 "$BIN" train "${TINY[@]}" --steps 10 --batch 1 --accum 2 --zero 2 --output "$WORK/acc-overlap" > /dev/null 2>&1
mpi 2 "$BIN" train "${TINY[@]}" --steps 10 --batch 1 --accum 2 --overlap=false --output "$WORK/acc-after" > /dev/null 2>&1
same_run "2 ranks x --accum 2: ZeRO-2 summing while backward runs == ZeRO-0 after it" "$WORK/acc-after" "$WORK/acc-overlap"

# --- 3 ranks (Open MPI's MPI_SUM association differs here; ours does not) ------------------------
for mode in "${MORE_MODES[@]}"; do
  "$BIN" train "${TINY[@]}" --mode "$mode" --steps 20 --batch 2 --accum 3 --output "$WORK/accum3-$mode" > /dev/null
  mpi 3 "$BIN" train "${TINY[@]}" --mode "$mode" --steps 20 --batch 2 --output "$WORK/ranks3-$mode" > /dev/null 2>&1
  same_run "3 ranks == --accum 3 ($mode)" "$WORK/accum3-$mode" "$WORK/ranks3-$mode"
  mpi 3 "$BIN" train "${TINY[@]}" --mode "$mode" --steps 20 --batch 2 --zero 1 --output "$WORK/zero3-$mode" > /dev/null 2>&1
  same_run "3 ranks with --zero 1 == --accum 3 ($mode)" "$WORK/accum3-$mode" "$WORK/zero3-$mode"
done
mpi 3 "$BIN" train "${TINY[@]}" --mode rd_attnres --steps 20 --batch 2 --zero 2 --output "$WORK/zerotwo3" > /dev/null 2>&1
same_run "3 ranks with --zero 2 == --accum 3" "$WORK/accum3-rd_attnres" "$WORK/zerotwo3"
# against one process with the whole batch at once: same examples, losses to 1e-6 relative
"$BIN" train "${TINY[@]}" --steps 20 --batch 6 --clip 0 --output "$WORK/batch6" > /dev/null
mpi 3 "$BIN" train "${TINY[@]}" --steps 20 --batch 2 --clip 0 --output "$WORK/ranks3-noclip" > /dev/null 2>&1
if paste <(curve "$WORK/batch6" | cut -d' ' -f1) <(curve "$WORK/ranks3-noclip" | cut -d' ' -f1) |
  awk 'BEGIN{bad=0;n=0} {n++; d=$1-$2; if (d<0) d=-d; if (d > 1e-6*($1<0?-$1:$1)) bad=1} END{exit (bad || n!=20)}'; then
  pass "3 ranks x batch 2 == one process with batch 6 (losses to 1e-6 relative)"
else fail "3 ranks x batch 2 vs batch 6"; fi

# --- resume: same N bit-identical; another N == accumulation with the new partition -------------
CONST=(--schedule constant --batch 3)
mpi 2 "$BIN" train "${TINY[@]}" "${CONST[@]}" --steps 16 --output "$WORK/whole2" > /dev/null 2>&1
mpi 2 "$BIN" train "${TINY[@]}" "${CONST[@]}" --steps 8 --zero 1 --output "$WORK/half2" > /dev/null 2>&1
mpi 2 "$BIN" train "${TINY[@]}" "${CONST[@]}" --steps 16 --zero 1 --resume "$WORK/half2/checkpoint.safetensors" \
  --output "$WORK/resumed2" > /dev/null 2>&1
if [ "$(tensor_bytes "$WORK/resumed2/model.safetensors")" = "$(tensor_bytes "$WORK/whole2/model.safetensors")" ] &&
  [ "$(curve "$WORK/resumed2")" = "$(curve "$WORK/whole2" | tail -n 8)" ]; then
  pass "2 ranks (ZeRO-1) resumed at step 8 == 2 ranks uninterrupted"
else fail "2-rank resume differs"; fi
mpi 2 "$BIN" train "${TINY[@]}" "${CONST[@]}" --steps 8 --zero 2 --output "$WORK/halfz2" > /dev/null 2>&1
mpi 2 "$BIN" train "${TINY[@]}" "${CONST[@]}" --steps 16 --zero 2 --resume "$WORK/halfz2/checkpoint.safetensors" \
  --output "$WORK/resumedz2" > /dev/null 2>&1
[ "$(tensor_bytes "$WORK/resumedz2/model.safetensors")" = "$(tensor_bytes "$WORK/whole2/model.safetensors")" ] &&
  pass "2 ranks (ZeRO-2) resumed at step 8 == 2 ranks uninterrupted" || fail "2-rank ZeRO-2 resume differs"
"$BIN" train "${TINY[@]}" "${CONST[@]}" --steps 16 --accum 2 --resume "$WORK/half2/checkpoint.safetensors" \
  --output "$WORK/resumed1" > /dev/null
[ "$(tensor_bytes "$WORK/resumed1/model.safetensors")" = "$(tensor_bytes "$WORK/whole2/model.safetensors")" ] &&
  pass "a 2-rank checkpoint resumed by one process with --accum 2 == uninterrupted" || fail "resume 2 ranks -> --accum 2"
mpi 3 "$BIN" train "${TINY[@]}" --schedule constant --batch 2 --steps 16 --resume "$WORK/half2/checkpoint.safetensors" \
  --output "$WORK/resumed3" > /dev/null 2>&1
"$BIN" train "${TINY[@]}" --schedule constant --batch 2 --accum 3 --steps 16 --resume "$WORK/half2/checkpoint.safetensors" \
  --output "$WORK/resumed3a" > /dev/null
same_run "a 2-rank checkpoint resumed on 3 ranks == --accum 3 from it" "$WORK/resumed3a" "$WORK/resumed3"
err=$(mpi 2 "$BIN" train "${TINY[@]}" --schedule constant --batch 2 --steps 16 --resume "$WORK/half2/checkpoint.safetensors" \
  --output "$WORK/bad" 2>&1 >/dev/null)
[ $? -ne 0 ] && grep -q "global batch 6" <<<"$err" && pass "resume with another global batch is refused" || fail "resume with global batch 4: $err"

# --- refusals before any work -------------------------------------------------------------------
err=$(mpi 2 "$BIN" train "${TINY[@]}" --steps 5 --global-batch 5 --output "$WORK/bad" 2>&1 >/dev/null)
rc=$?
[ $rc -ne 0 ] && grep -q "global-batch 5 cannot be split over 2 rank" <<<"$err" && [ "$(grep -c 'cannot be split' <<<"$err")" -eq 1 ] &&
  pass "an impossible layout is refused once, clearly" || fail "layout refusal (rc=$rc): $err"
err=$("$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -x DEPTHGRAD_THREADS=1 \
  -np 1 "$BIN" train "${TINY[@]}" --steps 5 --lr 1e-3 --output "$WORK/bad" : \
  -np 1 "$BIN" train "${TINY[@]}" --steps 5 --lr 2e-3 --output "$WORK/bad" 2>&1 >/dev/null)
rc=$?
[ $rc -ne 0 ] && grep -q "rank 1 was started with setting 'training.lr'" <<<"$err" && pass "ranks with different settings are refused, naming the setting" ||
  fail "settings mismatch (rc=$rc): $err"

# An error only rank 0 meets (it alone writes the output): that rank names itself and the job ends
mkdir -p "$WORK/blocked" && touch "$WORK/blocked/file"
start=$(date +%s)
err=$(mpi 2 "$BIN" train "${TINY[@]}" --steps 5 --output "$WORK/blocked/file/run" 2>&1 >/dev/null)
rc=$?
took=$(($(date +%s) - start))
[ $rc -ne 0 ] && [ $took -le 30 ] && grep -q "depthgrad train: rank 0 of 2: error: .*blocked/file" <<<"$err" &&
  pass "an error on one rank ends the job in ${took} s with a line naming the rank" || fail "one-rank error (rc=$rc, ${took} s): $err"

# --- the paired protocol with its seeds spread over ranks: the same numbers as one process --------
PAIRED=(reproduce --protocol paired --seeds 1-3 --steps 4 --layers 2 --dim 32 --train-tokens 20000 --eval reference
  --dataset-dir "$DATA" --threads 1 --quiet)
"$BIN" "${PAIRED[@]}" --output-dir "$WORK/paired1" > /dev/null
mpi 2 "$BIN" "${PAIRED[@]}" --output-dir "$WORK/paired2" > "$WORK/paired2.txt" 2>&1
numbers() { grep -E '"(lm_loss|final_loss|initial_loss|perplexity|js_reference)"' "$1"/*/*/result.json; }
if [ "$(numbers "$WORK/paired1" | wc -l)" -ge 12 ] && [ "$(numbers "$WORK/paired1")" = "$(numbers "$WORK/paired2")" ] &&
  [ "$(grep -c '^wall time' "$WORK/paired2.txt")" -eq 1 ]; then
  pass "reproduce --protocol paired over 2 ranks (3 seeds) == one process"
else fail "paired protocol over ranks"; fi
# each rank logs its own arms' steps: 3 seeds x 2 arms x 4 steps in all, rank 1's in steps.rank1.jsonl
p2=$(ls -d "$WORK"/paired2/*/*/ | head -1)
[ "$(cat "$p2"/steps.jsonl "$p2"/steps.rank1.jsonl 2>/dev/null | wc -l)" -eq 24 ] && [ "$(wc -l < "$p2/steps.rank1.jsonl")" -eq 8 ] &&
  pass "every rank logs the steps of its own arms" || fail "step logs over ranks: $(wc -l "$p2"/steps*.jsonl 2>&1)"

err=$(mpi 3 "$BIN" "${PAIRED[@]}" --seeds 1-2 --output-dir "$WORK/paired3" 2>&1 >/dev/null)
rc=$?
[ $rc -ne 0 ] && grep -q "2 seed(s) cannot keep 3 MPI ranks busy" <<<"$err" && [ "$(grep -c 'cannot keep' <<<"$err")" -eq 1 ] &&
  [ ! -e "$WORK/paired3" ] && pass "more ranks than seeds is refused once, before any work" || fail "ranks > seeds (rc=$rc): $err"

# --- a paired run over ranks stops and resumes -----------------------------------------------------
# SIGTERM to every rank: each saves its arm in training (checkpoints/) and keeps its finished arms
# in its own state.json.rank<r>; the run resumed on 2 ranks, or by one process, gives the same
# numbers as one process uninterrupted; the finished run has one state.json and no rank files.
LONG=(reproduce --protocol paired --seeds 1-3 --steps 300 --layers 2 --dim 32 --train-tokens 20000 --eval reference
  --dataset-dir "$DATA" --threads 1 --checkpoint-every 50 --quiet)
"$BIN" "${LONG[@]}" --output-dir "$WORK/long1" > /dev/null
"$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np 2 -x DEPTHGRAD_THREADS=1 "$BIN" "${LONG[@]}" \
  --output-dir "$WORK/long2" > "$WORK/long2.txt" 2>&1 &
launcher=$!
ranks=$(await_ranks "$launcher" 2)
# The stop comes once rank 1 has finished its seed (both arms) while rank 0 trains seed 3: rank 1
# then waits at the end of the run, where every rank meets, and stops with rank 0.
for _ in $(seq 1 1200); do  # up to 60 s (1-3 s here)
  [ "$(cat "$WORK"/long2/*/*/state.json.rank1 2>/dev/null | grep -c '"lm_loss"')" -ge 2 ] && break
  sleep 0.05
done
[ -n "$ranks" ] && kill -TERM $ranks
start=$(date +%s)
wait "$launcher"
rc=$?
took=$(($(date +%s) - start))
run2=$(ls -d "$WORK"/long2/*/*/ 2>/dev/null | head -1)
run2="${run2%/}"
if [ $rc -eq 143 ] && [ $took -le 60 ] && [ -n "$run2" ] && ls "$run2"/state.json.rank* > /dev/null 2>&1 &&
  grep -q "^  mpirun -np 2 .* --resume $run2" "$WORK/long2.txt" && [ ! -f "$run2/result.json" ]; then
  pass "SIGTERM to every rank stops a paired run in ${took} s (exit 143; a rank done with its seeds too), each rank's finished arms kept, the resume line printed"
else fail "stopping a paired run over ranks (rc=$rc after ${took} s, ranks:$ranks): $(grep -v '^\[' "$WORK/long2.txt" | tail -5)"; fi
if [ -n "$run2" ]; then
  cp -r "$run2" "$WORK/long2-copy"
  mpi 2 "$BIN" "${LONG[@]}" --resume "$run2" > /dev/null 2>&1
  "$BIN" "${LONG[@]}" --resume "$WORK/long2-copy" > /dev/null 2>&1
  run1=$(ls -d "$WORK"/long1/*/*/ | head -1)
  if [ "$(numbers "$WORK/long1" | wc -l)" -ge 12 ] && [ "$(numbers "$WORK/long1")" = "$(numbers "$WORK/long2")" ]; then
    pass "the stopped 2-rank run resumed on 2 ranks == one process uninterrupted"
  else fail "2-rank resume of a paired run"; fi
  if [ "$(grep -E '"(lm_loss|final_loss|initial_loss|perplexity|js_reference)"' "$run1/result.json")" = \
    "$(grep -E '"(lm_loss|final_loss|initial_loss|perplexity|js_reference)"' "$WORK/long2-copy/result.json")" ]; then
    pass "the stopped 2-rank run resumed by one process == one process uninterrupted"
  else fail "one-process resume of a 2-rank paired run"; fi
  if [ "$(grep -c '"full_validation_lm_loss"\|"lm_loss"' "$run2/state.json")" -eq "$(grep -c '"full_validation_lm_loss"\|"lm_loss"' "$run1/state.json")" ] &&
    ! ls "$run2"/state.json.rank* > /dev/null 2>&1 && [ ! -e "$run2/checkpoints" ]; then
    pass "the finished run keeps one state.json with every arm (rank files and checkpoints gone)"
  else fail "state files after the resumed run: $(ls "$run2")"; fi
  # a rank file of another run's settings is refused, naming it
  mkdir -p "$WORK/foreign"
  cp "$run1/state.json" "$WORK/foreign/state.json"
  sed 's/"steps": *300/"steps": 301/' "$run1/state.json" > "$WORK/foreign/state.json.rank1"
  err=$(mpi 2 "$BIN" "${LONG[@]}" --resume "$WORK/foreign" 2>&1 >/dev/null)
  rc=$?
  [ $rc -ne 0 ] && grep -q "foreign/state.json.rank1 belongs to a run with other settings" <<<"$err" &&
    pass "a rank state file of other settings is refused, naming the file" || fail "foreign rank file (rc=$rc): $err"
fi

# --- a stop sent to one rank alone: it saves its arm, waits --rank-stop-wait seconds for the others,
# then ends the job with a line saying why (no hang); the run resumes. (2000 steps: rank 0 is far
# from done when rank 1 gives up.)
ALONE=(reproduce --protocol paired --seeds 1-3 --steps 2000 --layers 2 --dim 32 --train-tokens 20000 --eval reference
  --dataset-dir "$DATA" --threads 1 --checkpoint-every 50 --quiet)
"$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np 2 -x DEPTHGRAD_THREADS=1 "$BIN" "${ALONE[@]}" \
  --rank-stop-wait 2 --output-dir "$WORK/alone" > "$WORK/alone.txt" 2>&1 &
launcher=$!
victim=$(await_ranks "$launcher" 1 1)
for _ in $(seq 1 1200); do
  ls "$WORK"/alone/*/*/steps.rank1.jsonl > /dev/null 2>&1 && [ -s "$(ls "$WORK"/alone/*/*/steps.rank1.jsonl)" ] && break
  sleep 0.05
done
[ -n "$victim" ] && kill -TERM "$victim"
start=$(date +%s)
wait "$launcher"
rc=$?
took=$(($(date +%s) - start))
alone=$(ls -d "$WORK"/alone/*/*/ 2>/dev/null | head -1)
if [ $rc -ne 0 ] && [ $rc -ne 143 ] && [ $took -le 30 ] &&
  grep -q "rank 1 of 2: error: stopped by SIGTERM .*, but the other ranks did not stop within 2 s" "$WORK/alone.txt" &&
  [ -n "$alone" ] && [ -n "$(ls -A "$alone/checkpoints" 2>/dev/null)" ]; then
  pass "a stop sent to rank 1 alone ends the job after --rank-stop-wait (${took} s), saying why, its arm saved"
else fail "stop sent to one rank (rc=$rc after ${took} s, victim '$victim'): $(grep -v '^\[' "$WORK/alone.txt" | tail -4)"; fi

# --- tools/results/run_scales.sh with RANKS=2: the same result.json as one process -------------
scales RANKS=2 RESULTS="$WORK/scales2" WORK="$WORK/scales2-runs" > "$WORK/scales2.txt" 2>&1
wait "$scales1"  # the RANKS=1 run started after the warm-up
strip() { grep -vE 'seconds"|"directory"|"created_at"|"tokenizer_from_cache"' "$1"; }
if [ -f "$WORK/scales1/micro-block/result.json" ] && [ -f "$WORK/scales2/micro-block/result.json" ] &&
  diff <(strip "$WORK/scales1/micro-block/result.json") <(strip "$WORK/scales2/micro-block/result.json") > /dev/null &&
  grep -q -- "^$MPIRUN -np 2 .* reproduce " "$WORK/scales2/micro-block/command.txt"; then
  pass "run_scales.sh RANKS=2 == RANKS=1 (result.json, times aside)"
else fail "run_scales.sh over ranks: $(tail -3 "$WORK/scales2.txt")"; fi

# --- the benchmark over ranks: one config, tokens/s of the global batch, one JSON from rank 0 ---
out=$(mpi 2 "$BIN" bench --one micro --threads 1 --warmup 1 --steps 3 --no-sgemm --no-profile --json 2>/dev/null)
[ "$(grep -c '"impl":"depthgrad"' <<<"$out")" -eq 1 ] && grep -q '"ranks":2' <<<"$out" && pass "bench --one over 2 ranks" ||
  fail "bench over ranks: $out"

# --- a killed rank ends the job promptly; its last complete checkpoint resumes --------------------
# (mpirun itself in the background, not through mpi(): its children are the ranks)
"$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np 2 -x DEPTHGRAD_THREADS=1 "$BIN" train "${TINY[@]}" \
  --schedule constant --batch 2 --steps 100000 --checkpoint-every 5 --output "$WORK/killed" > "$WORK/killed.txt" 2>&1 &
launcher=$!
victim=""
for _ in $(seq 1 600); do  # up to 60 s for the checkpoint of step 10
  if [ "$(checkpoint_step "$WORK/killed/checkpoint.safetensors")" -ge 10 ] 2>/dev/null; then
    victim=$(launcher_ranks "$launcher" 1)
    break
  fi
  sleep 0.1
done
if [ -n "$victim" ]; then
  kill -9 "$victim"
  start=$(date +%s)
  wait "$launcher"
  rc=$?
  took=$(($(date +%s) - start))
  if [ $rc -ne 0 ] && [ $took -le 20 ] && grep -q "rank 1" "$WORK/killed.txt"; then
    pass "a killed rank ends the job in ${took} s, naming rank 1: $(grep -m1 'rank 1' "$WORK/killed.txt")"
  else fail "killed rank: rc=$rc after ${took} s: $(tail -3 "$WORK/killed.txt")"; fi
  step=$(checkpoint_step "$WORK/killed/checkpoint.safetensors")
  mpi 2 "$BIN" train "${TINY[@]}" --schedule constant --batch 2 --steps $((step + 4)) --resume "$WORK/killed/checkpoint.safetensors" \
    --output "$WORK/after-kill" > /dev/null 2>&1
  mpi 2 "$BIN" train "${TINY[@]}" --schedule constant --batch 2 --steps $((step + 4)) --output "$WORK/no-kill" > /dev/null 2>&1
  [ -n "$step" ] && [ "$(tensor_bytes "$WORK/after-kill/model.safetensors")" = "$(tensor_bytes "$WORK/no-kill/model.safetensors")" ] &&
    pass "the last checkpoint (step $step) is intact and resumes bit-identically" || fail "resume after a kill (step '$step')"
else
  kill -9 "$launcher" 2>/dev/null
  fail "no rank 1 to kill after the checkpoint of step 10 (checkpoint step: '$(checkpoint_step "$WORK/killed/checkpoint.safetensors")')"
fi

echo "mpi_train: $passes passed, $failures failed"
[ $failures -eq 0 ]
