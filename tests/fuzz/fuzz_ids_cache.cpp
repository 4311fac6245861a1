// Fuzz target: the encoded-ids cache files of train/lm/data/corpus.h ("DGIDS001", count, int32
// ids, SHA-256). Arbitrary bytes must be refused (false) or read back to ids that serialize to
// exactly those bytes, without a crash or a huge allocation; and ids built from the input must
// survive serialize -> deserialize. The pinned data set files are read by load_dataset_file,
// which only compares size and SHA-256 (tests/test_data_files.cpp), so they are not fuzzed here.
#include <cstdint>
#include <cstring>

#include "tests/fuzz/fuzz_common.h"
#include "train/lm/data/corpus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dg;
  const std::string bytes(fuzz::as_text(data, size));
  std::vector<int32_t> ids;
  bool read = false;
  try {
    read = deserialize_ids(bytes, ids);
  } catch (const std::exception& e) {
    fuzz::fail(std::string("deserialize_ids threw instead of refusing: ") + e.what());
  }
  if (read) fuzz::check(serialize_ids(ids) == bytes, "accepted ids do not serialize back");

  std::vector<int32_t> built(size / 4);
  if (!built.empty()) std::memcpy(built.data(), data, built.size() * 4);
  std::vector<int32_t> back;
  fuzz::check(deserialize_ids(serialize_ids(built), back) && back == built,
              "ids changed on the serialize -> deserialize round-trip");
  return 0;
}
