#!/usr/bin/env bash
# The measurements behind "Many machines, modelled" (tools/README.md), then the model on them:
# `depthgrad bench` of the configs in one process at 1 and 2 threads, `depthgrad bench --one
# CHECK_CONFIG --threads 1` under mpirun at 2 and 4 ranks, and mpi_collectives_bench at 2 and 4
# ranks (with the check config's gradient size among its sizes), REPEATS times each, interleaved, every run's JSON kept in OUT_DIR; finally scaling_model's tables
# (the median over the repeats) in OUT_DIR/model.md. It does not judge the numbers.
# Usage: tools/measure_scaling.sh BUILD_DIR OUT_DIR [REPEATS=3] [CONFIGS=small] [CHECK_CONFIG=small]
# (CONFIGS=small,base adds base: a base step takes seconds). Runs with OPENBLAS_CORETYPE unset.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
build=$1 out=$2 repeats=${3:-3} configs=${4:-small} check=${5:-small}
mkdir -p "$out"
mpi=(mpirun --bind-to none -x DEPTHGRAD_THREADS=1 -x OMPI_MCA_btl_vader_single_copy_mechanism=none)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
[ "$(nproc)" -lt 4 ] && mpi+=(--oversubscribe)
say() { echo "$(date -u +%T) $* (load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$out/log.txt"; }
lscpu > "$out/lscpu.txt"
for rep in $(seq 1 "$repeats"); do
  say "depthgrad bench --configs $configs --threads 1,2, one process, repeat $rep"
  env -u OPENBLAS_CORETYPE "$build/depthgrad" bench --configs "$configs" --threads 1,2 --steps 10 \
    --no-peak --json > "$out/bench-$rep.json"
  for n in 2 4; do
    say "depthgrad bench --one $check --threads 1, $n ranks, repeat $rep"
    env -u OPENBLAS_CORETYPE "${mpi[@]}" -np "$n" "$build/depthgrad" bench --one "$check" \
      --threads 1 --steps 10 --no-peak --json > "$out/ranks-$n-$rep.json"
  done
  # the check config's gradient (4 bytes a parameter) is timed besides the geometric sizes
  parameters=$(grep -Eo '"parameters": *[0-9]+' "$out/ranks-2-$rep.json" | grep -Eo '[0-9]+$')
  for n in 2 4; do
    say "mpi_collectives_bench --bytes $((4 * parameters)), $n ranks, repeat $rep"
    env -u OPENBLAS_CORETYPE "${mpi[@]}" -np "$n" "$build/mpi_collectives_bench" --json \
      --bytes $((4 * parameters)) > "$out/collectives-$n-$rep.json"
  done
done
say "done; the model:"
join() { local IFS=,; echo "$*"; }
for t in 1 2; do
  "$build/scaling_model" --bench "$(join "$out"/bench-*.json)" --threads "$t" \
    --add-ns-per-byte "$("$build/scaling_model" --add-rate "$(join "$out"/collectives-2-*.json)")" \
    $([ "$t" = 1 ] && echo --check "$(join "$out"/collectives-*.json)" --measured \
      "$(join "$out"/ranks-*.json)" --check-config "$check" --check-threads 1 --cores "$(nproc)")
  echo
done | tee "$out/model.md"
