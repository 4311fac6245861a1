#!/usr/bin/env bash
# Shows tools/check_framework_headers.sh has teeth: in a copy of the tree (never the work tree it
# is run from), the unchanged copy passes; an include of the language model's run config planted
# in a header the Trainer reaches (two includes deep) fails naming that header; the model's name
# planted in a comment of nn/module.h fails naming the line; the same name in a header the two
# front doors do not reach passes.
# Usage: tests/check_framework_headers_teeth.sh [repo root]   (ctest runs it)
set -euo pipefail
src=$(cd "${1:-$(dirname "$0")/..}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
pass() { echo "ok: $1"; }
fail() { echo "FAIL: $1" >&2; failures=$((failures + 1)); }

copy() {  # a fresh copy of the tree's files in $tmp/$1
  rm -rf "$tmp/$1" && mkdir -p "$tmp/$1"
  (cd "$src" && git ls-files -z | xargs -0 cp --parents -t "$tmp/$1" 2>/dev/null) || true
  [ -f "$tmp/$1/train/trainer.h" ] || cp -r "$src/." "$tmp/$1"  # not a git checkout: copy all
}
check() { bash "$src/tools/check_framework_headers.sh" "$1" 2>&1; }

copy clean
if out=$(check "$tmp/clean"); then pass "the tree as it is passes"; else
  fail "the tree as it is fails:"; echo "$out" >&2
fi

copy include
printf '#include "train/lm/run_config.h"\n' >> "$tmp/include/train/io/json.h"
if out=$(check "$tmp/include"); then
  fail "an include of the run config two headers deep passed"
elif grep -qF "train/lm/run_config.h: a framework header reaches the language model's folder" <<<"$out"; then
  pass "an include of the run config two headers deep fails naming it"
else
  fail "the planted include was not named:"; echo "$out" >&2
fi

name="Micro""LM"  # assembled here, so this script names no model in its own text
copy word
printf '// Trains a %s.\n' "$name" >> "$tmp/word/nn/module.h"
line=$(wc -l < "$tmp/word/nn/module.h")
if out=$(check "$tmp/word"); then
  fail "the model's name in nn/module.h passed"
elif grep -qF "nn/module.h:$line:// Trains a $name." <<<"$out"; then
  pass "the model's name in nn/module.h fails naming line $line"
else
  fail "the planted word was not named:"; echo "$out" >&2
fi

copy elsewhere
printf '// Trains a %s.\n' "$name" >> "$tmp/elsewhere/tools/cli/flags.h"
if out=$(check "$tmp/elsewhere"); then pass "a header the front doors do not reach may name the model"; else
  fail "a header outside the closure was read:"; echo "$out" >&2
fi

[ "$failures" -eq 0 ] || { echo "check_framework_headers_teeth: $failures failure(s)" >&2; exit 1; }
echo "check_framework_headers_teeth: planted includes and words are caught, the rest passes"
