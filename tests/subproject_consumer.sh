#!/usr/bin/env bash
# This source tree inside another CMake project, the two ways such a project takes a library in:
#   fetchcontent   FetchContent_Declare(depthgrad SOURCE_DIR <tree>) + FetchContent_MakeAvailable
#   subdirectory   add_subdirectory(<tree> depthgrad-build EXCLUDE_FROM_ALL)
# Each configures a small project (a Debug build with its own flags, enable_testing() of its own),
# builds tools/example/quickstart.cpp against depthgrad::depthgrad and runs it: it must fit its
# curve. Also checked: depthgrad::lm exists; depthgrad brings no test, tool or install rule of its
# own; its flags (warnings, -march=native) stay on its targets, off the consumer's; it builds with
# the consumer's build type and flags, not Release -O3 of its own.
# Time (this compiles the library once more): both consumers use one build folder, and depthgrad
# one binary folder in it, so the second configure finds the first's objects up to date exactly
# when its compile lines are the same and the library is compiled once; at -O0, the fastest
# compile (the quickstart still runs in a second); as a unity build (CMAKE_UNITY_BUILD, which some
# projects set for all their targets), which halves the compile time. Should two of depthgrad's
# sources ever clash in one unity file (the same name at file scope in both), the script says so
# and builds file by file: the test is about the two ways in, not about unity builds.
# Usage: tests/subproject_consumer.sh SOURCE_DIR [CXX_COMPILER] [COMPILER_LAUNCHER]
set -euo pipefail
tree=$(cd "$1" && pwd)
cxx=${2:-c++}
launcher=${3:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/dg-subproject-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "subproject_consumer: $*" >&2; exit 1; }

mkdir -p "$work/consumer"
cp "$tree/tools/example/quickstart.cpp" "$work/consumer/"
cat > "$work/consumer/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.20)
project(consumer LANGUAGES CXX)
enable_testing()  # a project with tests of its own: depthgrad must not add to them
set(WAY "" CACHE STRING "fetchcontent or subdirectory")
set(DEPTHGRAD_TREE "" CACHE PATH "depthgrad's source tree")
if(WAY STREQUAL "fetchcontent")
  include(FetchContent)
  FetchContent_Declare(depthgrad SOURCE_DIR ${DEPTHGRAD_TREE} BINARY_DIR ${CMAKE_BINARY_DIR}/depthgrad-build)
  FetchContent_MakeAvailable(depthgrad)
elseif(WAY STREQUAL "subdirectory")
  add_subdirectory(${DEPTHGRAD_TREE} ${CMAKE_BINARY_DIR}/depthgrad-build EXCLUDE_FROM_ALL)
else()
  message(FATAL_ERROR "WAY must be fetchcontent or subdirectory")
endif()
add_executable(quickstart quickstart.cpp)
target_link_libraries(quickstart PRIVATE depthgrad::depthgrad)
# The language model's target as well (configured, not built here).
add_executable(uses_lm EXCLUDE_FROM_ALL quickstart.cpp)
target_link_libraries(uses_lm PRIVATE depthgrad::lm)
EOF

build=$work/build
unity=ON
for way in fetchcontent subdirectory; do
  echo "== $way"
  start=$SECONDS
  cmake -G "Unix Makefiles" -S "$work/consumer" -B "$build" -DWAY=$way -DDEPTHGRAD_TREE="$tree" \
    -DCMAKE_CXX_COMPILER="$cxx" ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher"} \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DCMAKE_UNITY_BUILD=$unity > "$work/configure.log" 2>&1 ||
    { cat "$work/configure.log"; fail "$way: configure failed"; }
  # The consumer's build type and flags are its own; depthgrad's objects are built with them.
  grep -q '^CMAKE_BUILD_TYPE:STRING=Debug$' "$build/CMakeCache.txt" || fail "$way: the build type changed"
  consumer_flags=$(cat "$build/CMakeFiles/quickstart.dir/flags.make")
  library_flags=$(cat "$build/depthgrad-build/CMakeFiles/dg_core.dir/flags.make")
  for flag in -march=native -Wall -fno-math-errno; do
    if grep -q -- "$flag" <<< "$consumer_flags"; then fail "$way: depthgrad's $flag reached the consumer"; fi
  done
  grep -q -- -Wall <<< "$library_flags" || fail "$way: depthgrad's own targets lost their flags"
  grep -q -- -O0 <<< "$library_flags" && ! grep -q -- -O3 <<< "$library_flags" ||
    fail "$way: depthgrad does not build with the consumer's Debug flags"
  # No tests, tools or install rules of depthgrad's: they are the top-level build's only.
  ctest --test-dir "$build" -N | grep -q '^Total Tests: 0$' || fail "$way: depthgrad added ctest entries"
  if cmake --build "$build" --target help | grep -Eq '\.\.\. (dg_tests|dg_attnres|depthgrad|example_gpt2)$'; then
    fail "$way: depthgrad defined its tests or tools"
  fi
  if grep -q depthgradTargets "$build/depthgrad-build/cmake_install.cmake"; then
    fail "$way: depthgrad added install rules"
  fi
  if ! cmake --build "$build" --target quickstart -j 2 > "$work/build.log" 2>&1; then
    [ "$unity" = ON ] || { cat "$work/build.log"; fail "$way: build failed"; }
    grep -E 'error' "$work/build.log" | head -5 >&2
    echo "subproject_consumer: warning: depthgrad does not build as a unity build (above); building file by file" >&2
    unity=OFF
    cmake "$build" -DCMAKE_UNITY_BUILD=OFF > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "$way: configure failed"; }
    cmake --build "$build" --target quickstart -j 2 > "$work/build.log" 2>&1 ||
      { cat "$work/build.log"; fail "$way: build failed"; }
  fi
  DEPTHGRAD_THREADS=1 "$build/quickstart" > "$work/quickstart.log"
  awk '/^step/ { if (first == "") first = $NF; last = $NF }
       END { if (first == "" || !(last < 0.05 * first)) { print "quickstart did not fit (mse " first " -> " last ")"; exit 1 } }' \
    "$work/quickstart.log" || fail "$way: $(cat "$work/quickstart.log")"
  echo "$way: quickstart mse $(awk '/^step/ { if (first == "") first = $NF; last = $NF } END { print first " -> " last }' \
    "$work/quickstart.log") ($((SECONDS - start)) s)"
done
echo "subproject_consumer: passed"
