// The data directory the data tests read, from DEPTHGRAD_TEST_DATA, and what happens without it.
// Test code only; it does not check the files' hashes (test_data_files.cpp and test_sha256.cpp do).
//
// The choice: a data test never passes silently.
//  * DEPTHGRAD_TEST_DATA unset or empty: the test is SKIPPED, visibly. It prints
//    "SKIPPED: <test>: no data directory (DEPTHGRAD_TEST_DATA is not set)", and when everything
//    else passed the test binary exits with kSkippedExitCode (77), which ctest reports as
//    "Skipped" (SKIP_RETURN_CODE in CMakeLists.txt). Configure with -DDG_TEST_DATA_DIR= to run the
//    suite on a machine without the data.
//  * DEPTHGRAD_TEST_DATA set but not a directory: the test FAILS. ctest always sets it (to
//    DG_TEST_DATA_DIR) and CI has the data there, so a wrong path is an error, not a skip.
#pragma once
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace dg::test {

constexpr int kSkippedExitCode = 77;

// Data tests skipped in this run (main() turns a non-zero count into kSkippedExitCode).
inline int g_skipped_data_tests = 0;

// The data directory, or nullopt after reporting the skip (the caller then returns). Fails the
// test when the variable names something that is not a directory.
inline std::optional<std::string> data_dir_or_skip() {
  const char* dir = std::getenv("DEPTHGRAD_TEST_DATA");
  const std::string test = doctest::getContextOptions()->currentTest
                               ? doctest::getContextOptions()->currentTest->m_name
                               : "?";
  if (dir == nullptr || *dir == '\0') {
    ++g_skipped_data_tests;
    MESSAGE("SKIPPED: " << test << ": no data directory (DEPTHGRAD_TEST_DATA is not set)");
    return std::nullopt;
  }
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error))
    FAIL("DEPTHGRAD_TEST_DATA="
         << std::string(dir) << " is not a directory (fetch the data with "
         << "tools/download-data.sh DIR, or unset it to skip the data tests)");
  return std::string(dir);
}

}  // namespace dg::test
