#!/bin/bash
# The family benchmark's table in its quick mode, without PyTorch: bench_families --quick must
# succeed, write its table atomically (no .tmp left), and give one row per workload (8: matmul,
# three conv2d shapes, CNN, LSTM, encoder, ResNet) x precision (float32, and bf16 when the header
# does not say it was skipped) x threads (1, 2), every row with the header's columns, no NaN or
# inf, PyTorch's columns n/a. A second run must give the same non-timing columns (workload, unit,
# precision, threads, check). No timing is asserted.
#   tests/bench_families_table.sh BENCH_FAMILIES_BINARY
set -euo pipefail
bench=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "bench_families_table: $*" >&2; exit 1; }

for run in 1 2; do
  "$bench" --quick --no-torch --threads 1,2 --out "$dir/table$run.md" > "$dir/stdout$run" 2> "$dir/stderr$run" ||
    { cat "$dir/stderr$run" >&2; fail "run $run exited non-zero"; }
  [ -f "$dir/table$run.md" ] || fail "run $run wrote no table"
  # write_file_atomic's temporaries are .<name>.tmp-<pid>-<hex> beside the table
  leftover=$(ls -A "$dir" | grep '\.tmp' || true)
  [ -z "$leftover" ] || fail "run $run left a temporary file: $leftover"
  cmp -s "$dir/table$run.md" "$dir/stdout$run" || fail "run $run: the file is not what it printed"
done

table="$dir/table1.md"
grep -q 'CPU: ' "$table" || fail "no CPU line in the header"
grep -q 'OPENBLAS_CORETYPE' "$table" || fail "the header does not say OPENBLAS_CORETYPE"
precisions=2
grep -q 'not measured here' "$table" && precisions=1
expected=$((8 * precisions * 2))

rows=$(grep -c '^| ' "$table")  # the header row and the data rows (the rule row starts "|---")
[ "$rows" -eq $((expected + 1)) ] || fail "$((rows - 1)) data rows, expected $expected"
columns=$(grep -m1 '^| workload' "$table" | awk -F'|' '{print NF}')
[ "$columns" -eq 18 ] || fail "the header has $((columns - 2)) columns, expected 16"
awk -F'|' -v n="$columns" '/^\|/ && NF != n { print "row with " NF - 2 " columns: " $0; bad = 1 }
  END { exit bad }' "$table" >&2 || fail "rows differ in their number of columns"
if grep '^| ' "$table" | grep -qiE '\bnan\b|\binf\b'; then fail "a NaN or inf in the table"; fi
awk -F'|' '/^\| [a-zA-Z]/ && !/^\| workload/ && $7 != " n/a " { bad = 1 } END { exit bad }' "$table" ||
  fail "a PyTorch column is not n/a under --no-torch"

# workload, unit, precision, threads and check: the same in both runs
same() { grep '^| [a-zA-Z]' "$1" | awk -F'|' '{ print $2 $3 $4 $5 $17 }'; }
diff <(same "$dir/table1.md") <(same "$dir/table2.md") >&2 || fail "the non-timing columns differ between two runs"
echo "bench_families_table: $expected rows of 16 columns, the same non-timing columns twice"
