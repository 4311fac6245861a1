#!/usr/bin/env bash
# The installed package as another project uses it: installs the build into a temporary prefix,
# builds tools/example/ against it with find_package(depthgrad CONFIG) (and one program again with
# pkg-config) and runs every example: the README's first program (quickstart.cpp), an MLP
# regression, a classifier with dropout, a custom op with its gradient check, a Hessian-vector
# product and a physics-informed network (both by double backward), a few steps of the
# GPT-2 example (trained by dg::Trainer, sampled from its own K/V cache), a short run of the
# character LSTM on Tiny Shakespeare (when the data directory is given). tools/example/
# sets no C++ standard: the package must carry C++20. Also checks that the experiments, tests and
# tools are not installed, that only <prefix>/include is exported (a consumer's own nn/layers.h
# does not replace depthgrad's), that the package says how it was built (native or portable), and
# that a program honours DEPTHGRAD_THREADS / OMP_NUM_THREADS without calling set_threads.
# Usage: tests/package_consumer.sh BUILD_DIR EXAMPLE_DIR [CONSUMER_FLAGS] [DATA_DIR]
# CONSUMER_FLAGS: compile and link flags the consumer needs besides the package's own; a
# sanitizer build (DG_SANITIZE) passes its -fsanitize flags, since its library calls the
# sanitizer runtimes that only such a link provides.
set -euo pipefail
build=$1
example=$2
extra=${3:-}
data=${4:-}  # the data directory (tiny_shakespeare.txt), for char_lstm; empty: skipped
work=$(mktemp -d "${TMPDIR:-/tmp}/dg-package-XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" > "$work/install.log"
test -f "$prefix/include/depthgrad/depthgrad.h"
test -f "$prefix/include/depthgrad/tensor/tensor.h"
test -f "$prefix/lib/cmake/depthgrad/depthgradConfig.cmake"
test -f "$prefix/lib/pkgconfig/depthgrad.pc"
if [ -e "$prefix/include/depthgrad/tools/attnres" ] || [ -e "$prefix/include/depthgrad/tests" ] ||
   [ -e "$prefix/include/depthgrad/tools" ]; then
  echo "package_consumer: experiments, tests or tools were installed as headers" >&2
  exit 1
fi

# Only <prefix>/include is exported, and installed headers include one another as depthgrad/...
if grep -q 'include/depthgrad' "$prefix/lib/cmake/depthgrad/depthgradTargets.cmake" ||
   grep -q 'includedir}/depthgrad' "$prefix/lib/pkgconfig/depthgrad.pc"; then
  echo "package_consumer: include/depthgrad is exported as an include directory" >&2
  exit 1
fi
if grep -rEq '#include "(tensor|autograd|nn|train)/' "$prefix/include/depthgrad"; then
  echo "package_consumer: an installed header includes a project header without depthgrad/:" >&2
  grep -rEn '#include "(tensor|autograd|nn|train)/' "$prefix/include/depthgrad" | head -3 >&2
  exit 1
fi
# The build flavour: the CMake package and the pkg-config file say the same thing.
native=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --variable=native depthgrad)
case "$native" in ON | OFF) ;; *) echo "package_consumer: depthgrad.pc native='$native'" >&2; exit 1 ;; esac
grep -q "set(depthgrad_NATIVE $native)" "$prefix/lib/cmake/depthgrad/depthgradConfig.cmake" || {
  echo "package_consumer: depthgradConfig.cmake does not report depthgrad_NATIVE $native" >&2
  exit 1
}
echo "package: built $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --variable=flavour depthgrad)"

echo "== find_package(depthgrad CONFIG)"
cmake -S "$example" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="$extra" -DCMAKE_EXE_LINKER_FLAGS="$extra" > "$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/cmake-build" -j 2 > "$work/build.log" || { cat "$work/build.log"; exit 1; }
# The examples a user copies from: each checks its own result and exits non-zero when it fails.
for program in custom_op mlp_regression classifier hessian_vector pinn_heat; do
  echo "-- $program"
  DEPTHGRAD_THREADS=1 "$work/cmake-build/$program"
done
# The Fashion-MNIST CNN, short: 30 steps on 3,840 images (the full run is 4 epochs on 60,000),
# checkpointed and resumed half-way to the same bits, batch norm's running statistics included.
echo "-- fashion_cnn"
DEPTHGRAD_THREADS=2 "$work/cmake-build/fashion_cnn" --epochs 1 --train-examples 3840 \
  --test-examples 2000 --min-accuracy 0.70 --check-resume
# The GPT-2 example, a few steps on the project's own Markdown (no data set needed): it trains
# through dg::Trainer, evaluates, checks its K/V cache against the full forward and samples.
if [ -n "$data" ] && [ -f "$data/tiny_shakespeare.txt" ]; then
  echo "-- char_lstm"
  DEPTHGRAD_THREADS=1 "$work/cmake-build/char_lstm" "$data" --steps 150 --batch 16 --seq-len 32 \
    --embed 16 --hidden 64 --layers 1 --lr 1e-2 --eval-windows 32 --sample-chars 60 \
    > "$work/char_lstm.log" || { cat "$work/char_lstm.log"; exit 1; }
  grep -E '^(validation|example passed)' "$work/char_lstm.log"
else
  echo "-- char_lstm skipped: no data directory (DG_TEST_DATA_DIR)"
fi
cat "$example"/../../README.md "$example"/../../train/README.md > "$work/gpt2.txt"
echo "-- gpt2"
DEPTHGRAD_THREADS=1 "$work/cmake-build/gpt2" --text "$work/gpt2.txt" --out "$work/gpt2" --steps 4 \
  --vocab 300 --dim 32 --layers 1 --heads 2 --seq-len 16 --batch 2 --eval-windows 4 \
  --sample-tokens 20 --log-every 2 > "$work/gpt2.log" || { cat "$work/gpt2.log"; exit 1; }
grep -q '^K/V cache vs full forward .* -> ok$' "$work/gpt2.log" && grep -q '^validation loss' "$work/gpt2.log" &&
  [ "$(wc -l < "$work/gpt2/steps.jsonl")" -eq 4 ] || { echo "package_consumer: gpt2 run incomplete" >&2; cat "$work/gpt2.log"; exit 1; }
grep -E '^(step|validation|K/V)' "$work/gpt2.log"
# The README's first program: it must run and fit its curve (last mse under 5% of the first).
DEPTHGRAD_THREADS=1 "$work/cmake-build/quickstart" | tee "$work/quickstart.log"
awk '/^step/ { if (first == "") first = $NF; last = $NF }
     END { if (first == "" || !(last < 0.05 * first)) { print "package_consumer: quickstart did not fit (mse " first " -> " last ")"; exit 1 } }' \
  "$work/quickstart.log"

echo "== pkg-config depthgrad"
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs depthgrad)
# shellcheck disable=SC2086  # word splitting of the flag lists is intended
c++ -O2 $extra "$example/custom_op.cpp" -o "$work/pc_example" $flags
DEPTHGRAD_THREADS=1 "$work/pc_example" > "$work/pc_run.log" || { cat "$work/pc_run.log"; exit 1; }
tail -1 "$work/pc_run.log"
echo "== a consumer with its own nn/layers.h (CMake and pkg-config)"
mkdir -p "$work/collision/nn"
cat > "$work/collision/nn/layers.h" <<'EOF'
#pragma once
struct ConsumerLayers {
  int count = 3;
};
EOF
cat > "$work/collision/main.cpp" <<'EOF'
#include <depthgrad/depthgrad.h>

#include "nn/layers.h"  // the consumer's own header, beside depthgrad's nn/layers.h

int main() {
  ConsumerLayers mine;
  dg::Norm norm(dg::Norm::Kind::rms, 4, 1e-6);
  return mine.count == 3 && !norm.parameters().empty() ? 0 : 1;
}
EOF
cat > "$work/collision/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.20)
project(collision LANGUAGES CXX)
find_package(depthgrad CONFIG REQUIRED)
add_executable(collision main.cpp)
target_include_directories(collision PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(collision PRIVATE depthgrad::depthgrad)
EOF
cmake -S "$work/collision" -B "$work/collision-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_FLAGS="$extra" -DCMAKE_EXE_LINKER_FLAGS="$extra" > "$work/collision.log" 2>&1 &&
  cmake --build "$work/collision-build" >> "$work/collision.log" 2>&1 || { cat "$work/collision.log"; exit 1; }
"$work/collision-build/collision"
# shellcheck disable=SC2086
c++ -O1 $extra -I"$work/collision" "$work/collision/main.cpp" -o "$work/pc_collision" $flags
"$work/pc_collision"

echo "== the thread environment applies without a call"
# shellcheck disable=SC2086
c++ -O1 $extra "$(dirname "$0")/support/threads_probe.cpp" -o "$work/threads_probe" $flags
probe() { env -u DEPTHGRAD_THREADS -u OMP_NUM_THREADS "$@" "$work/threads_probe" "${probe_args[@]}"; }
expect() {  # expect WANT ENV...: the probe prints "WANT WANT"
  local want=$1 got
  shift
  got=$(probe "$@")
  [ "$got" = "$want $want" ] || { echo "package_consumer: with $* the threads are '$got', expected $want" >&2; exit 1; }
}
probe_args=()
expect 3 DEPTHGRAD_THREADS=3
expect 3 OMP_NUM_THREADS=3
expect 1 DEPTHGRAD_THREADS=1 OMP_NUM_THREADS=3  # DEPTHGRAD_THREADS first
expect 3 DEPTHGRAD_THREADS=3 OMP_NUM_THREADS=1
probe_args=(2)
expect 2 DEPTHGRAD_THREADS=3  # an explicit set_threads wins
probe_args=()
if probe DEPTHGRAD_THREADS=lots 2> "$work/probe.err"; then
  echo "package_consumer: DEPTHGRAD_THREADS=lots was accepted" >&2
  exit 1
fi
grep -q "DEPTHGRAD_THREADS" "$work/probe.err" || { cat "$work/probe.err"; exit 1; }
echo "package_consumer: passed"
