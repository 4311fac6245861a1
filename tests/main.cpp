// The one main() of the test binary. Each tests/test_*.cpp adds its cases; ctest runs each
// file at 1 and at 2 threads (DEPTHGRAD_THREADS). This file sets the threads up once.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tensor/threads.h"

int main(int argc, char** argv) {
  dg::init_threads_from_env();
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
