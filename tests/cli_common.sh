# Sourced by the end-to-end tests of the depthgrad program (cli_smoke.sh, cli_usage.sh,
# cli_hardening.sh), never run alone. It reads their two arguments (the program, the data folder;
# without a data folder the test reports itself skipped with ctest's code 77), makes a work
# folder removed at exit with a cache of its own, and gives the checks every one of them uses:
#   pass NAME / fail NAME                count a check (printed as ok: / FAIL:)
#   expect NAME CODE TEXT -- command...  exit CODE, exactly one line on stderr, containing TEXT
#   expect_error NAME TEXT -- command... the same for any non-zero exit
#   finish                               print the counts; the test's exit status (0 when none failed)
# Every expected failure must come within EXPECT_TIMEOUT seconds (default 120): a hang fails.
# Usage, first lines of a test:  source "$(dirname "$0")/cli_common.sh" NAME "$@"
BIN="$2"
DATA="${3:-}"
# No data directory configured (-DDG_TEST_DATA_DIR=): skipped, visibly. A directory that is
# configured but missing fails in the test, as every data test does.
if [ -z "$DATA" ]; then
  echo "SKIPPED: $1 needs the data directory (DG_TEST_DATA_DIR is empty)"
  exit 77
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export XDG_CACHE_HOME="$WORK/cache"
EXPECT_TIMEOUT="${EXPECT_TIMEOUT:-120}"
failures=0
passes=0
pass() { passes=$((passes + 1)); echo "ok: $1"; }
fail() { failures=$((failures + 1)); echo "FAIL: $1"; }

expect() {
  local name="$1" code="$2" text="$3"
  shift 4
  local err rc lines
  err="$(timeout "$EXPECT_TIMEOUT" "$@" 2>&1 >/dev/null)"
  rc=$?
  lines=$(printf '%s\n' "$err" | grep -c .)
  if { [ "$code" = any ] && [ $rc -ne 0 ] && [ $rc -ne 124 ]; } || [ "$rc" = "$code" ]; then
    if [ "$lines" -eq 1 ] && printf '%s' "$err" | grep -qF -- "$text"; then
      pass "$name"
      return
    fi
  fi
  fail "$name (rc=$rc, expected $code; stderr: $err)"
}

expect_error() {
  local name="$1" text="$2"
  shift 2
  expect "$name" any "$text" "$@"
}

finish() {
  echo "$passes passed, $failures failed"
  [ $failures -eq 0 ]
}
