#!/usr/bin/env bash
# ctest's onnx_runtime: depthgrad's ONNX files run by real clients. The case program writes its
# cases (models, inputs, depthgrad's outputs: tests/onnx/onnx_cases.h) into a folder, ONNX Runtime
# (onnxruntime-node under node: tests/onnx/run_onnxruntime.js) runs each model and must give the
# same outputs within the cases' relative tolerance, and the onnx checker
# (tests/onnx/check_onnx.py, full_check) must accept every model. Then the teeth: the same cases
# with one expected value planted wrong and a model that reads an undefined tensor must fail in
# both clients, naming those cases and passing the others; and the clients' own refusals (a
# manifest they cannot run: one line, exit 2; the package or module missing: 77).
# Skipped (77, with a message) where node or the npm package is missing; the checker is optional
# (Python is never needed by depthgrad): without a python3 that has the onnx module it is left out
# with a note, and ONNX Runtime's verdict stands.
# Usage: tests/onnx/onnx_runtime.sh CASE_PROGRAM ORT_DIR WORK_DIR
#   CASE_PROGRAM  writes the cases: CASE_PROGRAM DIR [--plant-error] (tests/onnx/export_cases.cpp)
#   ORT_DIR       holds node_modules/onnxruntime-node (tools/onnx/install_onnxruntime.sh ORT_DIR)
#   WORK_DIR      a build folder, emptied and kept afterwards for a look at the cases
set -u
if [ $# -ne 3 ]; then
  echo "usage: tests/onnx/onnx_runtime.sh CASE_PROGRAM ORT_DIR WORK_DIR" >&2
  exit 2
fi
cases_program="$1"
ort_dir="$2"
work="$3"
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v node > /dev/null 2>&1; then
  echo "SKIPPED: onnx_runtime needs node to run ONNX Runtime (tools/install-deps.sh installs it: apt-get install nodejs npm)"
  exit 77
fi
failures=0
passes=0
pass() { passes=$((passes + 1)); echo "ok: $1"; }
fail() { failures=$((failures + 1)); echo "FAIL: $1"; }
# has LINE_REGEX FILE: the output has a line matching it
has() { grep -qE "$1" "$2"; }

rm -rf "$work"
mkdir -p "$work"
if "$cases_program" "$work/cases" && "$cases_program" "$work/planted" --plant-error; then
  pass "the case program writes the cases and the planted ones"
else
  fail "the case program failed"
  echo "$passes passed, $failures failed"
  exit 1
fi
ncases="$(grep -c '"model"' "$work/cases/manifest.json")"

# --- ONNX Runtime ---
node "$here/run_onnxruntime.js" --ort-dir "$ort_dir" "$work/cases/manifest.json" > "$work/ort.out" 2>&1
rc=$?
cat "$work/ort.out"
ort_missing=0
if [ $rc -eq 77 ]; then
  ort_missing=1
elif [ $rc -eq 0 ] && [ "$(grep -c '^PASS ' "$work/ort.out")" -eq "$ncases" ]; then
  pass "ONNX Runtime gives depthgrad's outputs for all $ncases cases"
else
  fail "ONNX Runtime (exit $rc)"
fi
if [ $ort_missing -eq 0 ]; then
  node "$here/run_onnxruntime.js" --ort-dir "$ort_dir" "$work/planted/manifest.json" > "$work/ort-planted.out" 2>&1
  rc=$?
  if [ $rc -eq 1 ] && has '^FAIL  mlp .*max error (9\.[0-9]+e-4|1\.00e-3)' "$work/ort-planted.out" &&
    has 'run 0 output .y. .*flat index 0' "$work/ort-planted.out" &&
    has '^FAIL  broken_graph ' "$work/ort-planted.out" && has '^PASS  gather_compare ' "$work/ort-planted.out"; then
    pass "ONNX Runtime's runner fails a planted error of 1e-3 (naming the value) and a broken model, passes the rest"
  else
    fail "the planted errors (exit $rc):"; cat "$work/ort-planted.out"
  fi
fi

# --- the runner's own refusals: no package (skip), a manifest it cannot run (one line, exit 2) ---
printf '{"format": "depthgrad-onnx-cases", "cases": [{"name": "a", "tolerance": 1e-5}]}\n' > "$work/bad.json"
node "$here/run_onnxruntime.js" --ort-dir "$work/no-ort" "$work/cases/manifest.json" > "$work/no-ort.out" 2>&1
rc=$?
if [ $rc -eq 77 ] && has '^SKIPPED: onnxruntime-node not found' "$work/no-ort.out"; then
  pass "the runner reports itself skipped (77) where onnxruntime-node is not installed"
else
  fail "the runner without the package (exit $rc): $(cat "$work/no-ort.out")"
fi
node "$here/run_onnxruntime.js" --ort-dir "$ort_dir" "$work/bad.json" > /dev/null 2> "$work/bad.err"
rc=$?
if [ $rc -eq 2 ] && [ "$(grep -c . "$work/bad.err")" -eq 1 ] &&
  has "bad.json: case 0 \('a'\): \"model\" must be a file name" "$work/bad.err"; then
  pass "the runner refuses a case without a model in one line naming the case and the field"
else
  fail "the runner on a bad manifest (exit $rc): $(cat "$work/bad.err")"
fi

# --- the onnx checker (optional: the first python3 with the onnx module) ---
python=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" > /dev/null 2>&1 && "$candidate" -c 'import onnx' > /dev/null 2>&1; then
    python="$candidate"
    break
  fi
done
if [ -z "$python" ]; then
  echo "note: no python3 with the onnx module: the onnx checker was left out (apt-get install python3-onnx)"
else
  "$python" "$here/check_onnx.py" "$work/cases/manifest.json" > "$work/check.out" 2>&1
  rc=$?
  cat "$work/check.out"
  if [ $rc -eq 0 ] && [ "$(grep -c '^PASS ' "$work/check.out")" -eq "$ncases" ]; then
    pass "the onnx checker (full_check) accepts all $ncases models"
  else
    fail "the onnx checker (exit $rc)"
  fi
  "$python" "$here/check_onnx.py" "$work/planted/manifest.json" > "$work/check-planted.out" 2>&1
  rc=$?
  if [ $rc -eq 1 ] && has '^FAIL  broken_graph ' "$work/check-planted.out" &&
    has 'nowhere' "$work/check-planted.out" && has '^PASS  mlp ' "$work/check-planted.out"; then
    pass "the onnx checker refuses the model reading an undefined tensor, naming it"
  else
    fail "the checker's planted case (exit $rc):"; cat "$work/check-planted.out"
  fi
  "$python" "$here/check_onnx.py" "$work/bad.json" > /dev/null 2> "$work/check-bad.err"
  rc=$?
  if [ $rc -eq 2 ] && [ "$(grep -c . "$work/check-bad.err")" -eq 1 ] &&
    has 'bad.json: case 0: needs a "name" and a "model"' "$work/check-bad.err"; then
    pass "the checker refuses a case without a model in one line"
  else
    fail "the checker on a bad manifest (exit $rc): $(cat "$work/check-bad.err")"
  fi
  # An onnx module that does not import (a stand-in first on the path): skipped, 77.
  mkdir -p "$work/no-onnx/onnx"
  echo 'raise ImportError("the onnx stand-in of tests/onnx/onnx_runtime.sh")' > "$work/no-onnx/onnx/__init__.py"
  PYTHONPATH="$work/no-onnx" "$python" "$here/check_onnx.py" "$work/cases/manifest.json" > "$work/no-onnx.out" 2>&1
  rc=$?
  if [ $rc -eq 77 ] && has '^SKIPPED: the onnx module is missing' "$work/no-onnx.out"; then
    pass "the checker reports itself skipped (77) without the onnx module"
  else
    fail "the checker without onnx (exit $rc): $(cat "$work/no-onnx.out")"
  fi
fi

echo "$passes passed, $failures failed"
if [ $failures -ne 0 ]; then exit 1; fi
if [ $ort_missing -eq 1 ]; then
  echo "SKIPPED: onnxruntime-node is not installed in $ort_dir (tools/onnx/install_onnxruntime.sh $ort_dir; make test installs it)"
  exit 77
fi
