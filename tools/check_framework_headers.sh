#!/usr/bin/env bash
# Checks that the framework's front doors know no model: every header reachable from
# train/trainer.h and nn/module.h through #include "..." (the project's own headers; <...> system
# headers are not followed) must lie outside nn/lm/ and train/lm/ and must not name the language
# model built on the framework (the words below, in any case). Other headers are not read.
# Usage: tools/check_framework_headers.sh [repo root]. Prints each violation; exits 1 if any.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

roots=(train/trainer.h nn/module.h)
# What a framework header must not say: the model's names, its folders and its settings.
words='microlm|micro_lm|attnres|residual mode|runconfig|runpreset'

declare -A seen=()
queue=("${roots[@]}")
problems=0
while [ "${#queue[@]}" -gt 0 ]; do
  header=${queue[0]}
  queue=("${queue[@]:1}")
  [ -n "${seen[$header]:-}" ] && continue
  seen[$header]=1
  case "$header" in
    nn/lm/* | train/lm/*)
      echo "$header: a framework header reaches the language model's folder"
      problems=$((problems + 1))
      ;;
  esac
  if [ ! -f "$header" ]; then
    echo "$header: included, but not a file of the tree"
    problems=$((problems + 1))
    continue
  fi
  while IFS= read -r hit; do
    echo "$header:$hit"
    problems=$((problems + 1))
  done < <(grep -inE "$words" "$header" || true)
  while IFS= read -r included; do
    queue+=("$included")
  done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/p' "$header")
done

if [ "$problems" -gt 0 ]; then
  echo "check_framework_headers: $problems problem(s) in the headers reachable from ${roots[*]}" >&2
  exit 1
fi
echo "check_framework_headers: ${#seen[@]} headers reachable from ${roots[*]} name no model"
