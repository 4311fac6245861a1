#!/usr/bin/env bash
# Checks the include rules between folders (the folder map of README.md states them): a file may
# include only files of its own folder and of the folders its row below allows, so the layers
# tensor -> autograd -> nn -> train stay one-way, the framework never includes the language model
# built on it (nn/lm/, train/lm/), and the experiments stay out of both.
# Usage: tools/check_includes.sh [repo root]. Prints each broken rule; exits 1 if any.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

# folder of a path: the longest matching prefix among the layers
layer_of() {
  case "$1" in
    tools/attnres/*) echo tools/attnres ;;
    nn/lm/*) echo nn/lm ;;
    train/lm/text/*) echo train/lm/text ;;
    train/lm/data/*) echo train/lm/data ;;
    train/lm/*) echo train/lm ;;
    train/dist/*) echo train/dist ;;
    train/io/onnx/*) echo train ;;  # ONNX import and export build Modules from autograd's ops
    train/io/*) echo train/io ;;
    train/*) echo train ;;
    tensor/*) echo tensor ;;
    autograd/*) echo autograd ;;
    nn/*) echo nn ;;
    tools/*) echo tools ;;
    tests/*) echo tests ;;
    examples/*) echo examples ;;
    *) echo other ;;
  esac
}

# what each folder may include besides itself
allowed_for() {
  case "$1" in
    tensor) echo "" ;;
    autograd) echo "tensor" ;;
    nn) echo "tensor autograd" ;;
    train/io) echo "tensor" ;;
    train) echo "tensor autograd nn train/io" ;;
    train/dist) echo "tensor autograd nn train train/io" ;;
    # the language model: the framework's layers below it, never the other way
    nn/lm) echo "tensor autograd nn" ;;
    train/lm/text) echo "train/io" ;;
    train/lm/data) echo "train/io train/lm/text" ;;
    train/lm) echo "tensor autograd nn nn/lm train train/io train/lm/text train/lm/data" ;;
    tools/attnres) echo "tensor autograd nn nn/lm train train/io train/lm train/lm/text train/lm/data" ;;
    tools) echo "tensor autograd nn nn/lm train train/io train/lm train/lm/text train/lm/data tools/attnres train/dist" ;;
    tests) echo "tensor autograd nn nn/lm train train/io train/lm train/lm/text train/lm/data tools/attnres train/dist tools" ;;
    *) echo "" ;;
  esac
}

failures=0
checked=0
while IFS= read -r file; do
  from=$(layer_of "$file")
  [ "$from" = other ] && continue
  allowed=" $from $(allowed_for "$from") "
  while IFS= read -r line; do
    [ -z "$line" ] && continue
    lineno=${line%%:*}
    target=$(sed -E 's/^[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$line")
    to=$(layer_of "$target")
    [ "$to" = other ] && continue  # a system or same-folder-relative header
    checked=$((checked + 1))
    if [[ "$allowed" != *" $to "* ]]; then
      echo "$file:$lineno: $from/ may not include $to/ (\"$target\"); allowed: $(allowed_for "$from" | sed 's/^$/nothing else/')"
      failures=$((failures + 1))
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" || true)
done < <(git ls-files '*.h' '*.cpp' 2>/dev/null || find . -name '*.h' -o -name '*.cpp' | sed 's#^\./##')

if [ "$failures" -ne 0 ]; then
  echo "check_includes: $failures include(s) break the folder rules" >&2
  exit 1
fi
echo "check_includes: $checked project includes follow the folder rules"
