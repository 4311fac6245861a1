#!/usr/bin/env bash
# Proves that tools/check_chapters.sh has teeth: in a throwaway repository a chapter names a
# function that exists (passes), then one that was renamed, a file that is gone, and a chapter the
# README does not link (each fails, naming the chapter). Usage: tests/check_chapters_teeth.sh ROOT
set -euo pipefail
root=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/dg-chapters-teeth-XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
git init -q
mkdir -p src tools/learn/checks tools/learn/stubs
printf 'int add_one(int x) { return x + 1; }\nstruct Plan {};\n' >src/ops.cpp
touch tools/learn/checks/ch01.cpp tools/learn/stubs/ch01.cpp
printf '# Chapter 1\n\n## What this chapter covers\n\n- `src/ops.cpp`: `add_one`, `struct Plan`\n\n## Next\n' >src/learn-01-ops.md
echo 'Read [chapter 1](src/learn-01-ops.md).' >README.md
git add -A
passed=0
failed=0
check() {  # check NAME CONDITION...
  if "${@:2}"; then passed=$((passed + 1)); else echo "FAIL: $1"; failed=$((failed + 1)); fi
}
check "a chapter whose names exist passes" bash "$root/tools/check_chapters.sh" .
sed -i 's/add_one/add_two/' src/ops.cpp
out=$(bash "$root/tools/check_chapters.sh" . 2>&1) && status=0 || status=$?
check "a renamed function fails" test "$status" -ne 0
check "the failure names the chapter, its line and the function" grep -q "src/learn-01-ops.md:5: names 'add_one'" <<<"$out"
git rm -qf src/ops.cpp
out=$(bash "$root/tools/check_chapters.sh" . 2>&1) && status=0 || status=$?
check "a file that is gone fails" grep -q "names src/ops.cpp, which does not exist" <<<"$out"
echo 'no links' >README.md
out=$(bash "$root/tools/check_chapters.sh" . 2>&1) && status=0 || status=$?
check "a chapter the README does not link fails" grep -q "does not link chapter src/learn-01-ops.md" <<<"$out"
echo "check_chapters_teeth: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
