#!/usr/bin/env bash
# Proves that tools/check_docs.sh has teeth: in a throwaway repository it plants a broken link
# (reported with its file and line), links inside a fenced block and inside a code span that runs
# over a line break (ignored), a link into a folder (resolves), and a README whose program differs
# from tools/example/quickstart.cpp (reported). Usage: tests/check_docs_teeth.sh REPO_ROOT
set -euo pipefail
root=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/dg-docs-teeth-XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
git init -q
mkdir -p tools/example sub
cp "$root/tools/example/quickstart.cpp" tools/example/
touch sub/present.md
{
  echo '# A readme'
  echo '```cpp'
  cat tools/example/quickstart.cpp
  echo '```'
  echo '```sh'
  echo 'echo [fenced](not-a-file)'
  echo '```'
  echo 'A [good link](sub/present.md#part), a [folder](sub/) and a [broken one](sub/missing.md).'
  echo 'A `code span [that](spans'
  echo 'two lines)` is not a link.'
} > README.md
git add -A
passed=0
failed=0
check() {  # check NAME CONDITION...
  if "${@:2}"; then passed=$((passed + 1)); else echo "FAIL: $1"; failed=$((failed + 1)); fi
}
out=$(bash "$root/tools/check_docs.sh" . 2>&1) && status=0 || status=$?
broken_line=$(grep -n 'broken one' README.md | cut -d: -f1)
check "a broken link fails the check" test "$status" -ne 0
check "the broken link is named with its line" grep -q "README.md:$broken_line: link to 'sub/missing.md'" <<<"$out"
check "a fenced block is not read" bash -c "! grep -q not-a-file <<<\"\$0\"" "$out"
check "a code span over two lines is not read" bash -c "! grep -q spans <<<\"\$0\"" "$out"
check "only the broken link is reported" test "$(grep -c 'does not resolve' <<<"$out")" -eq 1
sed -i 's/broken one\](sub\/missing.md)/fixed one](sub\/present.md)/' README.md
out=$(bash "$root/tools/check_docs.sh" . 2>&1) && status=0 || status=$?
check "the fixed tree passes" test "$status" -eq 0
echo '// changed' >> tools/example/quickstart.cpp
out=$(bash "$root/tools/check_docs.sh" . 2>&1) && status=0 || status=$?
check "a README program that differs from quickstart.cpp fails" test "$status" -ne 0
check "the difference is named" grep -q 'differs from tools/example/quickstart.cpp' <<<"$out"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
