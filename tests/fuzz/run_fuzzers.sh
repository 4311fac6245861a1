#!/usr/bin/env bash
# Runs the libFuzzer programs of a DG_FUZZ build (`make fuzz` builds them), one at a time, each
# for a bounded time, starting from its seed corpus tests/fuzz/corpus/<target>/ (never written:
# new inputs go to BUILD/fuzz-work/<target>/corpus, crashes to .../artifacts). Prints one line
# per target with its executions, then a summary line (targets, total and fewest executions, how
# many reached the issue's goal of 10 million each); exits 1 when any target crashed, leaked or
# timed out.
# It does not minimise or merge corpora; copy a crash into tests/fuzz/corpus/<target>/ by hand.
# Usage: tests/fuzz/run_fuzzers.sh BUILD_DIR [SECONDS_EACH] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: tests/fuzz/run_fuzzers.sh BUILD_DIR [SECONDS_EACH] [TARGET...]}
seconds=${2:-60}
shift $(($# < 2 ? $# : 2))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for program in "$build"/fuzz_*; do
    [ -x "$program" ] && targets+=("$(basename "$program" | sed 's/^fuzz_//')")
  done
fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "run_fuzzers: no fuzz_* programs in $build (configure with -DDG_FUZZ=ON and build fuzz_targets)" >&2
  exit 2
fi

failed=0
goal=10000000
total=0
fewest=""
fewest_target=""
reached=0
printf '%-24s %12s %8s  %s\n' target executions seconds result
for target in "${targets[@]}"; do
  work="$build/fuzz-work/$target"
  mkdir -p "$work/corpus" "$work/artifacts"
  # One thread: the kernels' OpenMP would only add noise, and the machine is shared.
  OMP_NUM_THREADS=1 DEPTHGRAD_THREADS=1 "$build/fuzz_$target" "$work/corpus" "tests/fuzz/corpus/$target" \
    -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/" >"$work/log" 2>&1
  status=$?
  executions=$(awk '/stat::number_of_executed_units/ {print $2}' "$work/log" | tail -1)
  elapsed=$(awk '/stat::average_exec_per_sec/ {rate=$2} /stat::number_of_executed_units/ {n=$2} END {if (rate > 0) printf "%d", n / rate}' "$work/log")
  if [ $status -eq 0 ]; then
    result=ok
  else
    failed=1
    artifact=$(ls -t "$work/artifacts" 2>/dev/null | head -1)
    result="FAILED (exit $status): $work/artifacts/$artifact, log $work/log"
  fi
  printf '%-24s %12s %8s  %s\n' "$target" "${executions:-?}" "${elapsed:-?}" "$result"
  n=${executions:-0}
  total=$((total + n))
  if [ -z "$fewest" ] || [ "$n" -lt "$fewest" ]; then fewest=$n; fewest_target=$target; fi
  [ "$n" -ge $goal ] && reached=$((reached + 1))
done
echo "summary: ${#targets[@]} targets, $total executions in all, fewest $fewest ($fewest_target), $reached/${#targets[@]} at >= $goal"
exit $failed
