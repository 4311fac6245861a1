// Replays every file of tests/fuzz/corpus/<target>/ through its fuzz target (tests/fuzz/) with a
// plain loop instead of libFuzzer, so the seeds and every crash kept as a regression run under
// ctest with any compiler. A violated property fails naming the corpus file; a memory error
// shows under `make test-sanitize`. Fuzzing itself is `make fuzz` (clang), never part of ctest.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <set>

#include "tests/fuzz/fuzz_common.h"
#include "train/io/files.h"

#define DG_FUZZ_TARGET(name) extern "C" int dg_fuzz_##name(const uint8_t* data, size_t size);
#include "dg_fuzz_targets.inc"
#undef DG_FUZZ_TARGET

namespace {

struct FuzzTarget {
  const char* name;
  int (*run)(const uint8_t* data, size_t size);
};

const FuzzTarget kFuzzTargets[] = {
#define DG_FUZZ_TARGET(name) {#name, dg_fuzz_##name},
#include "dg_fuzz_targets.inc"
#undef DG_FUZZ_TARGET
};

const std::filesystem::path kCorpusRoot =
    std::filesystem::path(DG_SOURCE_DIR) / "tests/fuzz/corpus";

std::vector<std::filesystem::path> corpus_files(const std::string& target) {
  std::vector<std::filesystem::path> files;
  const std::filesystem::path dir = kCorpusRoot / target;
  if (std::filesystem::is_directory(dir))
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("fuzz corpus replay: every target has a corpus and every corpus a target") {
  std::set<std::string> targets;
  for (const FuzzTarget& target : kFuzzTargets) targets.insert(target.name);
  CHECK(targets.size() >= 8);
  for (const std::string& name : targets) {
    CAPTURE(name);
    CHECK(corpus_files(name).size() >= 3);
  }
  for (const auto& entry : std::filesystem::directory_iterator(kCorpusRoot)) {
    CAPTURE(entry.path().string());
    CHECK((!entry.is_directory() || targets.count(entry.path().filename().string()) == 1));
  }
}

TEST_CASE("fuzz corpus replay: every corpus file passes its target") {
  for (const FuzzTarget& target : kFuzzTargets) {
    for (const std::filesystem::path& file : corpus_files(target.name)) {
      CAPTURE(file.string());
      const std::string bytes = dg::read_file(file.string());
      try {
        target.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      } catch (const dg::fuzz::Failure& failure) {
        FAIL_CHECK(failure.what);
      } catch (const std::exception& error) {
        FAIL_CHECK("the target let an exception escape: " << error.what());
      }
    }
  }
}
