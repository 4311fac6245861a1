#!/usr/bin/env bash
# The installed package as another project uses it: installs the build into a temporary prefix,
# builds tools/example/ against it with find_package(depthgrad CONFIG) and again with pkg-config,
# and runs both, and the README's first program (tools/example/quickstart.cpp). Also checks
# that the experiments, tests and tools are not installed.
# Usage: tests/package_consumer.sh BUILD_DIR EXAMPLE_DIR [CONSUMER_FLAGS]
# CONSUMER_FLAGS: compile and link flags the consumer needs besides the package's own; a
# sanitizer build (DG_SANITIZE) passes its -fsanitize flags, since its library calls the
# sanitizer runtimes that only such a link provides.
set -euo pipefail
build=$1
example=$2
extra=${3:-}
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

echo "== find_package(depthgrad CONFIG)"
cmake -S "$example" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="$extra" -DCMAKE_EXE_LINKER_FLAGS="$extra" > "$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/cmake-build" -j 2 > "$work/build.log" || { cat "$work/build.log"; exit 1; }
DEPTHGRAD_THREADS=1 "$work/cmake-build/softsign_example"
# The README's first program: it must run and fit its curve (last mse under 5% of the first).
DEPTHGRAD_THREADS=1 "$work/cmake-build/quickstart" | tee "$work/quickstart.log"
awk '/^step/ { if (first == "") first = $NF; last = $NF }
     END { if (first == "" || !(last < 0.05 * first)) { print "package_consumer: quickstart did not fit (mse " first " -> " last ")"; exit 1 } }' \
  "$work/quickstart.log"

echo "== pkg-config depthgrad"
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs depthgrad)
# shellcheck disable=SC2086  # word splitting of the flag lists is intended
c++ -O2 $extra "$example/main.cpp" -o "$work/pc_example" $flags
DEPTHGRAD_THREADS=1 "$work/pc_example" > "$work/pc_run.log" || { cat "$work/pc_run.log"; exit 1; }
tail -1 "$work/pc_run.log"
echo "package_consumer: passed"
