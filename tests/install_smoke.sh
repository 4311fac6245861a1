#!/usr/bin/env bash
# The installed program on its own: `cmake --install` into a temporary prefix, then
# <prefix>/bin/depthgrad run from an empty folder with a bare environment (env -i: PATH, HOME in
# the work folder, DEPTHGRAD_DATA; nothing points into the source or build tree): --version, list,
# a 5-step train on Tiny Shakespeare, generate from its weights, and bench --compare-torch finding
# the installed torch_reference.py (with a Python without torch it must name the package, not a
# path). Then the installed script removed: bench names the prefix's path, which shows the
# installed program never reaches for the source tree's copy. It does not test the library package
# (tests/package_consumer.sh does).
# Usage: tests/install_smoke.sh BUILD_DIR DATA_DIR
set -u
build=$1
source "$(dirname "$0")/cli_common.sh" install_smoke "" "${2:-}"
prefix="$WORK/prefix"
if ! cmake --install "$build" --prefix "$prefix" > "$WORK/install.log" 2>&1; then
  cat "$WORK/install.log"
  fail "cmake --install"
  finish
  exit 1
fi
BIN="$prefix/bin/depthgrad"
script="$prefix/share/depthgrad/torch_reference.py"
if [ -x "$BIN" ] && [ -s "$script" ]; then pass "installs bin/depthgrad and share/depthgrad/torch_reference.py"; else fail "installed layout"; ls -R "$prefix"; fi

mkdir -p "$WORK/empty" "$WORK/home"
cd "$WORK/empty" || exit 1
# The installed program with nothing of the build's environment: only what a user's shell has.
run() { env -i PATH=/usr/bin:/bin HOME="$WORK/home" DEPTHGRAD_DATA="$DATA" DEPTHGRAD_THREADS=2 "$BIN" "$@"; }

if run --version | grep -q "^depthgrad "; then pass "--version"; else fail "--version"; fi
if run list | grep -q "rd-attnres"; then pass "list"; else fail "list"; fi
run train --dataset tiny-shakespeare --steps 5 --dim 32 --layers 2 --seq-len 32 --batch 2 --quiet \
  --checkpoint-every 0 --output-dir run > "$WORK/train.out" 2> "$WORK/train.err"
if [ $? -eq 0 ] && [ -s run/model.safetensors ] && grep -q "validation loss" "$WORK/train.out"; then
  pass "train 5 steps on Tiny Shakespeare"
else
  fail "train"; cat "$WORK/train.out" "$WORK/train.err"
fi
text="$(run generate --checkpoint run/model.safetensors --prompt "ROMEO:" --max-new-tokens 8 --seed 1 --quiet 2> "$WORK/gen.err")"
if [ $? -eq 0 ] && [ -n "$text" ]; then pass "generate from the trained weights"; else fail "generate"; cat "$WORK/gen.err"; fi
# The default --torch-script is the installed copy, found from the program's path.
if run bench --help | grep -qF "$script"; then pass "bench --help names the installed torch_reference.py"; else fail "bench --help: $(run bench --help | grep torch-script)"; fi
expect "bench --compare-torch finds its script, then names the missing package" 2 "python3-torch" -- \
  env -i PATH=/usr/bin:/bin HOME="$WORK/home" "$BIN" bench --compare-torch --configs micro --python /bin/false
rm "$script"
expect "without its installed script, bench names the prefix's path (no other place is tried)" 1 "$script is missing" -- \
  env -i PATH=/usr/bin:/bin HOME="$WORK/home" "$BIN" bench --compare-torch --configs micro --python /bin/false
if [ -z "$(ls -A "$WORK/empty" | grep -v '^run$')" ]; then pass "nothing written beside the run"; else fail "stray files: $(ls -A "$WORK/empty")"; fi
finish
