#!/usr/bin/env bash
# Formats the tree's C++ with the root .clang-format, or (--check) fails listing the files that
# differ from it. Generated files (first line says GENERATED) are left as their generator wrote
# them. Usage: tools/format.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CLANG_FORMAT:-}" ]; then
  CLANG_FORMAT=clang-format
  command -v clang-format > /dev/null || CLANG_FORMAT=clang-format-14
fi
if ! command -v "$CLANG_FORMAT" > /dev/null; then
  echo "format: $CLANG_FORMAT not found (apt-get install clang-format, or run tools/install-deps.sh)" >&2
  exit 1
fi
files=()
while IFS= read -r f; do
  [ -f "$f" ] || continue
  head -1 "$f" | grep -q GENERATED && continue
  files+=("$f")
done < <(git ls-files '*.cpp' '*.h')

if [ "${1:-}" = --check ]; then
  bad=()
  # One clang-format for every file (--dry-run reports each difference as file:line:col: error);
  # a failure that names no file (a bad .clang-format, say) fails with clang-format's words.
  report=$("$CLANG_FORMAT" --style=file --dry-run -Werror "${files[@]}" 2>&1) && status=0 || status=$?
  while IFS= read -r f; do [ -n "$f" ] && bad+=("$f"); done < <(
    sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*-Wclang-format-violations.*/\1/p' <<< "$report" | sort -u)
  if [ "$status" -ne 0 ] && [ ${#bad[@]} -eq 0 ]; then
    echo "format: $CLANG_FORMAT failed: $(head -5 <<< "$report")" >&2
    exit 1
  fi
  # A section banner longer than the column limit is split by the formatter into a title line and
  # a line of dashes (or dashes running into the next comment): keep banners short instead.
  split_banners=$(grep -nE -A1 '^[[:space:]]*// ---- ' "${files[@]}" |
    grep -E '^[^:]+-[0-9]+-[[:space:]]*// -{8,}([[:space:]]|$)' || true)
  if [ -n "$split_banners" ]; then
    echo "format: section banners split over two lines (shorten the title line):" >&2
    echo "$split_banners" >&2
    bad+=("(split banners)")
  fi
  if [ ${#bad[@]} -ne 0 ]; then
    printf 'format: not clang-formatted: %s\n' "${bad[@]}" >&2
    echo "format: ${#bad[@]} of ${#files[@]} files differ from .clang-format; run 'make format'" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files follow .clang-format"
else
  "$CLANG_FORMAT" --style=file -i "${files[@]}"
  echo "format: formatted ${#files[@]} files"
fi
