// The one main() of the test binary. Each tests/test_*.cpp adds its cases; ctest runs each
// file at 1 and at 2 threads (DEPTHGRAD_THREADS). This file sets the threads up once, and exits
// with 77 (ctest: Skipped) when data tests were skipped and nothing failed (tests/test_data.h).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "tensor/threads.h"
#include "tests/test_data.h"

int main(int argc, char** argv) {
  dg::init_threads_from_env();
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  const int result = context.run();
  if (result == 0 && !context.shouldExit() && dg::test::g_skipped_data_tests > 0) {
    std::printf("SKIPPED: %d data test(s) did not run: DEPTHGRAD_TEST_DATA is not set\n",
                dg::test::g_skipped_data_tests);
    return dg::test::kSkippedExitCode;
  }
  return result;
}
