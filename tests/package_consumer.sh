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
# The process group: train/dist/world.h is installed; libdepthgrad.a references no MPI symbol.
# With a package built with MPI (the component mpi: libdepthgrad_mpi.a, depthgrad-mpi.pc): no
# symbol is defined in both libraries; the MLP, classifier and GPT-2 examples (linked with
# depthgrad::mpi) on 2 ranks under mpirun give the losses and final weights of one process at
# --accum 2, bit for bit; one example built with pkg-config depthgrad-mpi runs on 2 ranks too; an
# error on one rank ends the job. Without MPI, asking for the component fails with a message
# saying so, and the MPI runs are reported skipped.
# Usage: tests/package_consumer.sh BUILD_DIR EXAMPLE_DIR [CONSUMER_FLAGS] [DATA_DIR] [MPIRUN]
# CONSUMER_FLAGS: compile and link flags the consumer needs besides the package's own; a
# sanitizer build (DG_SANITIZE) passes its -fsanitize flags, since its library calls the
# sanitizer runtimes that only such a link provides.
set -euo pipefail
build=$1
example=$2
extra=${3:-}
data=${4:-}  # the data directory (tiny_shakespeare.txt), for char_lstm; empty: skipped
mpirun=${5:-}  # mpiexec of the MPI the package was built with; empty: the MPI runs are skipped
# The consumer compiles with the compiler that built the package (CXX, which ctest sets to the
# build's; c++ when unset): a static library built by clang calls libomp's OpenMP, gcc's libgomp.
cxx=${CXX:-c++}
export CXX=$cxx
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

# The process group: its header is installed; the core library never references MPI; with the
# component mpi, its library and the core define no symbol in common (strong definitions: a
# program's link must not depend on which archive comes first).
test -f "$prefix/include/depthgrad/train/dist/world.h"
if nm "$prefix/lib/libdepthgrad.a" 2> /dev/null | grep -Eq ' U (P?MPI_|ompi_)'; then
  echo "package_consumer: libdepthgrad.a references MPI:" >&2
  nm "$prefix/lib/libdepthgrad.a" | grep -E ' U (P?MPI_|ompi_)' | head -3 >&2
  exit 1
fi
with_mpi=OFF
if [ -f "$prefix/lib/libdepthgrad_mpi.a" ]; then
  with_mpi=ON
  test -f "$prefix/lib/pkgconfig/depthgrad-mpi.pc"
  strong() { nm --defined-only "$1" 2> /dev/null | awk '$2 ~ /^[TDBR]$/ { print $3 }' | sort -u; }
  both=$(comm -12 <(strong "$prefix/lib/libdepthgrad.a") <(strong "$prefix/lib/libdepthgrad_mpi.a"))
  if [ -n "$both" ]; then
    echo "package_consumer: symbols defined in both libdepthgrad.a and libdepthgrad_mpi.a:" >&2
    echo "$both" | head -5 >&2
    exit 1
  fi
elif [ -e "$prefix/lib/pkgconfig/depthgrad-mpi.pc" ]; then
  echo "package_consumer: depthgrad-mpi.pc installed without libdepthgrad_mpi.a" >&2
  exit 1
fi
echo "package: MPI component $with_mpi"

# The programs built without the examples' CMake project (with pkg-config, the consumer with its
# own nn/layers.h, the thread probe) compile one after another in the background from here, beside
# the single-threaded configure steps and example runs below (ctest gives this script two cores);
# each is waited for where it was built before, its output shown when it fails.
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs depthgrad)
mpi_flags=""
if [ "$with_mpi" = ON ]; then
  mpi_flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs depthgrad-mpi)
fi
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
side_build() {  # NAME COMMAND...: output in $work/NAME.build.log, then NAME.built or NAME.failed
  local name=$1
  shift
  if "$@" > "$work/$name.build.log" 2>&1; then touch "$work/$name.built"; else touch "$work/$name.failed"; fi
}
(
  set +e
  # shellcheck disable=SC2086  # word splitting of the flag lists is intended
  side_build pc_example "$cxx" -O2 $extra "$example/custom_op.cpp" -o "$work/pc_example" $flags
  if [ "$with_mpi" = ON ]; then
    # shellcheck disable=SC2086
    side_build pc_mlp_mpi "$cxx" -O2 $extra "$example/mlp_regression.cpp" -o "$work/pc_mlp_mpi" $mpi_flags
  fi
  side_build collision bash -c 'cmake -S "$1/collision" -B "$1/collision-build" -DCMAKE_PREFIX_PATH="$2" \
    -DCMAKE_CXX_FLAGS="$3" -DCMAKE_EXE_LINKER_FLAGS="$3" && cmake --build "$1/collision-build"' \
    collision "$work" "$prefix" "$extra"
  # shellcheck disable=SC2086
  side_build pc_collision "$cxx" -O1 $extra -I"$work/collision" "$work/collision/main.cpp" -o "$work/pc_collision" $flags
  # shellcheck disable=SC2086
  side_build threads_probe "$cxx" -O1 $extra "$(dirname "$0")/support/threads_probe.cpp" -o "$work/threads_probe" $flags
) &
side_builds=$!
trap 'wait "$side_builds"; rm -rf "$work"' EXIT
side_wait() {  # NAME: waits for NAME's build; fails with its output when it failed
  while [ ! -e "$work/$1.built" ] && [ ! -e "$work/$1.failed" ] && kill -0 "$side_builds" 2> /dev/null; do
    sleep 0.1
  done
  [ -e "$work/$1.built" ] || { cat "$work/$1.build.log" >&2; echo "package_consumer: building $1 failed" >&2; exit 1; }
}

echo "== find_package(depthgrad CONFIG)"
# Asking for the component mpi: REQUIRED works with it, and fails with a clear message without it.
mkdir -p "$work/component"
printf '%s\n' 'cmake_minimum_required(VERSION 3.20)' 'project(component LANGUAGES CXX)' \
  'find_package(depthgrad CONFIG REQUIRED COMPONENTS mpi)' \
  'if(NOT TARGET depthgrad::mpi)' '  message(FATAL_ERROR "no depthgrad::mpi")' 'endif()' \
  > "$work/component/CMakeLists.txt"
if cmake -S "$work/component" -B "$work/component-build" -DCMAKE_PREFIX_PATH="$prefix" > "$work/component.log" 2>&1; then
  [ "$with_mpi" = ON ] || { echo "package_consumer: COMPONENTS mpi accepted without MPI" >&2; exit 1; }
  echo "-- find_package(depthgrad REQUIRED COMPONENTS mpi): depthgrad::mpi"
else
  # (CMake wraps the message: its lines are joined before the search)
  if [ "$with_mpi" = ON ] || ! tr -s ' \n' ' ' < "$work/component.log" | grep -q 'built without MPI (-DDG_MPI=OFF): it has no component mpi'; then
    cat "$work/component.log"
    exit 1
  fi
  echo "-- find_package(depthgrad REQUIRED COMPONENTS mpi) refused: the package was built without MPI"
fi
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
grep -aE '^(step|validation|K/V)' "$work/gpt2.log"
# The README's first program: it must run and fit its curve (last mse under 5% of the first).
DEPTHGRAD_THREADS=1 "$work/cmake-build/quickstart" | tee "$work/quickstart.log"
awk '/^step/ { if (first == "") first = $NF; last = $NF }
     END { if (first == "" || !(last < 0.05 * first)) { print "package_consumer: quickstart did not fit (mse " first " -> " last ")"; exit 1 } }' \
  "$work/quickstart.log"

echo "== pkg-config depthgrad"
side_wait pc_example
DEPTHGRAD_THREADS=1 "$work/pc_example" > "$work/pc_run.log" || { cat "$work/pc_run.log"; exit 1; }
tail -1 "$work/pc_run.log"
echo "== over MPI ranks: 2 ranks x accum 1 against 1 process x accum 2"
if [ "$with_mpi" = ON ] && [ -n "$mpirun" ] && command -v "$mpirun" > /dev/null; then
  mpi() {
    "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np 2 -x DEPTHGRAD_THREADS=1 \
      -x OMPI_MCA_btl_vader_single_copy_mechanism=none "$@"
  }
  # The lines that must be equal: every step's loss (17 digits) and the weights' checksums.
  bits() { grep -E '^(step [0-9]+ loss|weights checksum)' "$1"; }
  same_bits() {  # NAME LOG_ONE LOG_RANKS STEPS: equal, and every step there
    if [ "$(bits "$2" | grep -c '^step')" -lt "$4" ] || ! grep -q '^weights checksum' "$2" ||
      [ "$(bits "$2")" != "$(bits "$3")" ]; then
      echo "package_consumer: $1 on 2 ranks differs from accum 2 (or did not finish):" >&2
      diff <(bits "$2") <(bits "$3") | head -5 >&2
      tail -3 "$3" >&2
      exit 1
    fi
    echo "-- $1: 2 ranks == accum 2 over $4 steps, $(grep -m1 '^weights checksum' "$2")"
  }
  for program in mlp_regression classifier; do
    args=(--steps 12 --log-steps 1)
    [ "$program" = mlp_regression ] && args+=(--max-mse 1e9)
    # Without dropout: with it each rank draws its own masks (the bits follow the layout).
    [ "$program" = classifier ] && args+=(--dropout 0 --min-accuracy 0)
    DEPTHGRAD_THREADS=1 "$work/cmake-build/$program" "${args[@]}" --accum 2 > "$work/$program-accum2.log" ||
      { cat "$work/$program-accum2.log"; exit 1; }
    mpi "$work/cmake-build/$program" "${args[@]}" > "$work/$program-ranks2.log" 2>&1 ||
      { cat "$work/$program-ranks2.log"; exit 1; }
    grep -q '^2 rank(s) x accum 1 x batch 64 = 128 examples per step' "$work/$program-ranks2.log" ||
      { echo "package_consumer: $program did not run on 2 ranks" >&2; cat "$work/$program-ranks2.log"; exit 1; }
    same_bits "$program" "$work/$program-accum2.log" "$work/$program-ranks2.log" 12
  done
  gpt2_args=(--text "$work/gpt2.txt" --steps 4 --vocab 300 --dim 32 --layers 1 --heads 2 --seq-len 16
    --batch 2 --eval-windows 4 --sample-tokens 0 --log-every 2)
  DEPTHGRAD_THREADS=1 "$work/cmake-build/gpt2" "${gpt2_args[@]}" --accum 2 --out "$work/gpt2-accum2" \
    > "$work/gpt2-accum2.log" || { cat "$work/gpt2-accum2.log"; exit 1; }
  mpi "$work/cmake-build/gpt2" "${gpt2_args[@]}" --out "$work/gpt2-ranks2" > "$work/gpt2-ranks2.log" 2>&1 ||
    { cat "$work/gpt2-ranks2.log"; exit 1; }
  step_losses() { sed 's/,"seconds".*//' "$1/steps.jsonl"; }  # each step's line without its timing
  if ! grep -q '^2 rank(s) x accum 1 x batch 2' "$work/gpt2-ranks2.log" ||
    [ "$(step_losses "$work/gpt2-ranks2")" != "$(step_losses "$work/gpt2-accum2")" ] ||
    ! cmp -s "$work/gpt2-ranks2/model.safetensors" "$work/gpt2-accum2/model.safetensors"; then
    echo "package_consumer: gpt2 on 2 ranks differs from accum 2" >&2
    cat "$work/gpt2-ranks2.log" >&2
    exit 1
  fi
  echo "-- gpt2: 2 ranks == accum 2 over 4 steps (steps.jsonl, model.safetensors), $(grep -o 'weights checksum [0-9a-f]*' "$work/gpt2-ranks2.log")"
  # An error on one rank ends the job: rank 1 alone gets a bad flag (mpirun's MPMD form), names
  # itself and calls world.abort; rank 0, waiting in a collective, is ended with it.
  start=$(date +%s)
  if "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -x DEPTHGRAD_THREADS=1 \
    -x OMPI_MCA_btl_vader_single_copy_mechanism=none -np 1 "$work/cmake-build/mlp_regression" : \
    -np 1 "$work/cmake-build/mlp_regression" --no-such-flag 1 > "$work/mpi-error.log" 2>&1; then
    echo "package_consumer: an error on rank 1 exited 0" >&2
    exit 1
  fi
  took=$(($(date +%s) - start))
  # (Open MPI's own "MPI_ABORT was invoked on rank 1" is not required: its help-message
  # machinery sometimes fails to print it in this two-program form.)
  if [ "$took" -gt 30 ] || ! grep -q "^mlp_regression: error on rank 1: unknown flag or missing value: '--no-such-flag'" "$work/mpi-error.log"; then
    echo "package_consumer: an error on rank 1 (after $took s):" >&2
    cat "$work/mpi-error.log" >&2
    exit 1
  fi
  echo "-- an error on rank 1 alone ends the 2-rank job in $took s: $(grep -m1 '^mlp_regression: error' "$work/mpi-error.log" | cut -c1-60)..."
  # The same program built without CMake: pkg-config depthgrad-mpi (its Cflags carry
  # DEPTHGRAD_WITH_MPI; Requires brings depthgrad and Open MPI's ompi-c).
  side_wait pc_mlp_mpi
  mpi "$work/pc_mlp_mpi" --steps 12 --log-steps 1 --max-mse 1e9 > "$work/pc_mlp_mpi.log" 2>&1 ||
    { cat "$work/pc_mlp_mpi.log"; exit 1; }
  same_bits "mlp_regression (pkg-config depthgrad-mpi)" "$work/mlp_regression-accum2.log" "$work/pc_mlp_mpi.log" 12
else
  echo "-- skipped: the package has no component mpi (built with -DDG_MPI=OFF) or no mpirun"
fi

echo "== a consumer with its own nn/layers.h (CMake and pkg-config)"
side_wait collision
"$work/collision-build/collision"
side_wait pc_collision
"$work/pc_collision"

echo "== the thread environment applies without a call"
side_wait threads_probe
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
