// safetensors: exact bytes of the reference writer's documented example, round trips through a
// file, tensor ordering and alignment, and one clear error for every malformed-file case.
//
// Offline interoperability check (python3-safetensors is not packaged in Debian bookworm, so
// the reference library could not be run here): a file written by save_safetensors with F32,
// F64, I64 (scalar), BF16, U8 and an empty [0, 3] tensor plus metadata was read by an
// independent Python reader (struct + json, following the format's description): the header
// length, 8-byte data alignment, per-dtype offset alignment, metadata, dtypes, shapes and every
// value matched what was written. The exact-bytes test below pins the same layout against the
// example that the reference project's own tests expect.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>

#include "tests/temp_dir.h"
#include "train/io/files.h"
#include "train/io/safetensors.h"

namespace fs = std::filesystem;
using dg::test::TempDir;

namespace {

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

dg::TensorEntry make(std::string name, std::string dtype, std::vector<int64_t> shape,
                     std::vector<uint8_t> bytes) {
  return dg::TensorEntry{std::move(name), std::move(dtype), std::move(shape), std::move(bytes)};
}

// A file: the 8-byte little-endian header length, the header, then `data`.
std::string assemble(const std::string& header, const std::string& data) {
  std::string out;
  const uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((length >> (8 * i)) & 0xFF);
  return out + header + data;
}

std::string parse_error(const std::string& file_bytes) {
  try {
    dg::parse_safetensors(file_bytes, "bad.safetensors");
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("safetensors: writes the reference writer's bytes for its documented example") {
  // huggingface/safetensors' Python tests expect save({"test": np.zeros((2, 2), np.int32)}) to be
  // '@' 0 0 0 0 0 0 0, the 60-byte header padded with 4 spaces to 64, then 16 zero bytes.
  const std::string header = R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})";
  const std::string expected =
      std::string("@\0\0\0\0\0\0\0", 8) + header + "    " + std::string(16, '\0');
  const std::string written =
      dg::serialize_safetensors({make("test", "I32", {2, 2}, std::vector<uint8_t>(16, 0))}, {});
  CHECK(written == expected);

  // Metadata comes first; the 95-byte header is padded to 96.
  const std::string with_metadata = dg::serialize_safetensors(
      {make("test1", "I32", {2, 2}, std::vector<uint8_t>(16, 0))}, {{"framework", "pt"}});
  CHECK(
      with_metadata.substr(0, 8 + 96) ==
      std::string("\x60\0\0\0\0\0\0\0", 8) +
          R"({"__metadata__":{"framework":"pt"},"test1":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}} )");

  // The older unpadded form ('<' = 60) reads too, with the value at [1][1] set.
  std::string unpadded = std::string("<\0\0\0\0\0\0\0", 8) + header + std::string(16, '\0');
  unpadded[8 + 60 + 12] = 1;
  const dg::SafetensorsFile file = dg::parse_safetensors(unpadded, "example");
  REQUIRE(file.tensors.size() == 1);
  const dg::TensorEntry& test = file.tensors[0];
  CHECK(test.name == "test");
  CHECK(test.dtype == "I32");
  CHECK(test.shape == std::vector<int64_t>{2, 2});
  int32_t values[4];
  REQUIRE(test.bytes.size() == sizeof values);
  std::memcpy(values, test.bytes.data(), sizeof values);
  CHECK(values[0] == 0);
  CHECK(values[3] == 1);
  CHECK(file.metadata.empty());
}

TEST_CASE("safetensors: save and load round trip, ordered by dtype rank then name") {
  TempDir dir("safetensors");
  const std::string path = (dir.path / "model.safetensors").string();
  const std::vector<dg::TensorEntry> tensors = {
      make("b.weight", "F32", {2, 3}, bytes_of(std::vector<float>{1.5f, -2, 3, 4, 5, 6.25f})),
      make("a.bias", "F32", {3}, bytes_of(std::vector<float>{0.1f, 0.2f, 0.3f})),
      make("tokens", "U8", {5}, {1, 2, 3, 250, 255}),
      make("step", "I64", {}, bytes_of(std::vector<int64_t>{123456789012345})),
      make("half", "BF16", {2}, {0x80, 0x3f, 0x00, 0xc0}),
      make("empty", "F64", {0, 4}, {}),
      make("mask", "BOOL", {3}, {1, 0, 1}),
      make("x\xC3\xA9", "F64", {1}, bytes_of(std::vector<double>{-0.0})),
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"note", "caf\xC3\xA9 \"quoted\"\n"}};
  dg::save_safetensors(path, tensors, metadata);
  const dg::SafetensorsFile file = dg::load_safetensors(path);
  CHECK(file.metadata == metadata);
  REQUIRE(file.tensors.size() == tensors.size());
  for (const dg::TensorEntry& expected : tensors) {
    CAPTURE(expected.name);
    const dg::TensorEntry* got = file.find(expected.name);
    REQUIRE(got != nullptr);
    CHECK(got->dtype == expected.dtype);
    CHECK(got->shape == expected.shape);
    CHECK(got->bytes == expected.bytes);
  }
  CHECK(file.find("missing") == nullptr);
  // Header order: I64 first, then F64 by name, F32 by name, BF16, U8, BOOL.
  std::vector<std::string> order;
  for (const dg::TensorEntry& tensor : file.tensors) order.push_back(tensor.name);
  CHECK(order == std::vector<std::string>{"step", "empty", "x\xC3\xA9", "a.bias", "b.weight",
                                          "half", "tokens", "mask"});
  // Data starts 8-byte aligned and each tensor is aligned to its element size.
  const std::string raw = dg::read_file(path);
  uint64_t header_length = 0;
  std::memcpy(&header_length, raw.data(), 8);
  CHECK((8 + header_length) % 8 == 0);
  CHECK(raw.find(R"("step":{"dtype":"I64","shape":[],"data_offsets":[0,8]})") != std::string::npos);
  CHECK(raw.find(R"("a.bias":{"dtype":"F32","shape":[3],"data_offsets":[16,28]})") !=
        std::string::npos);
  // Writing the same tensors in another order gives identical bytes.
  std::vector<dg::TensorEntry> reversed(tensors.rbegin(), tensors.rend());
  CHECK(dg::serialize_safetensors(reversed, metadata) == raw);
}

TEST_CASE("safetensors: the writer refuses inconsistent tensors") {
  CHECK_THROWS_WITH_AS(
      dg::serialize_safetensors({make("w", "F32", {2, 2}, std::vector<uint8_t>(12))}, {}),
      doctest::Contains("tensor \"w\": has 12 bytes but shape [2, 2] of F32 needs 16"),
      std::runtime_error);
  CHECK_THROWS_WITH_AS(
      dg::serialize_safetensors({make("w", "F31", {1}, std::vector<uint8_t>(4))}, {}),
      doctest::Contains("tensor \"w\": unknown dtype \"F31\""), std::runtime_error);
  CHECK_THROWS_WITH_AS(dg::serialize_safetensors({make("w", "F32", {-1}, {})}, {}),
                       doctest::Contains("negative dimension -1"), std::runtime_error);
  CHECK_THROWS_WITH_AS(
      dg::serialize_safetensors({make("w", "U8", {1}, {1}), make("w", "U8", {1}, {2})}, {}),
      doctest::Contains("tensor \"w\": duplicate tensor name"), std::runtime_error);
  CHECK_THROWS_WITH_AS(dg::serialize_safetensors({make("__metadata__", "U8", {1}, {1})}, {}),
                       doctest::Contains("reserved"), std::runtime_error);
  CHECK_THROWS_WITH_AS(dg::serialize_safetensors({make("bad\xFF", "U8", {1}, {1})}, {}),
                       doctest::Contains("invalid UTF-8"), std::runtime_error);
  TempDir dir("safetensors");
  const std::string path = (dir.path / "x.safetensors").string();
  CHECK_THROWS_WITH_AS(dg::save_safetensors(path, {make("w", "F32", {1}, {})}, {}),
                       doctest::Contains(("cannot save " + path).c_str()), std::runtime_error);
  CHECK_FALSE(dg::file_exists(path));
  CHECK(dg::safetensors_dtype_size("BF16") == 2);
  CHECK(dg::safetensors_dtype_size("U64") == 8);
  CHECK_THROWS_WITH_AS(dg::safetensors_dtype_size("F4"), doctest::Contains("supported: BOOL, U8"),
                       std::runtime_error);
}

TEST_CASE("safetensors: every malformed file gets an error naming the problem") {
  const std::string ok_entry = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string eight(8, '\x11');
  // Sanity: the well-formed version of these files reads.
  CHECK(dg::parse_safetensors(assemble("{" + ok_entry + "}", eight), "ok").tensors.size() == 1);

  CHECK(parse_error("") ==
        "bad.safetensors: safetensors: file is 0 bytes, shorter than the 8-byte header length");
  CHECK(parse_error("abc").find("file is 3 bytes, shorter than the 8-byte header length") !=
        std::string::npos);
  {
    std::string huge(8, '\0');
    huge[4] = 1;  // 2^32
    CHECK(parse_error(huge + "{}")
              .find("header length 4294967296 is larger than the 100000000 byte limit") !=
          std::string::npos);
    std::string long_header(8, '\0');
    long_header[0] = 100;
    CHECK(parse_error(long_header + "{}")
              .find("header length 100 is larger than the 2 bytes that follow it") !=
          std::string::npos);
  }
  CHECK(parse_error(assemble("[1]", "")).find("header does not start with '{'") !=
        std::string::npos);
  CHECK(parse_error(assemble("{\"w\":", ""))
            .find("bad header JSON: bad.safetensors (safetensors header): JSON error at line 1 "
                  "column 6") != std::string::npos);
  CHECK(parse_error(assemble("{" + ok_entry + "," + ok_entry + "}", eight))
            .find("duplicate key \"w\"") != std::string::npos);
  CHECK(parse_error(assemble(R"({"w":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", eight))
            .find("tensor \"w\": unknown dtype \"F33\"") != std::string::npos);
  CHECK(parse_error(assemble(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})",
                             std::string(4, 'x')))
            .find("tensor \"w\": shape [2] of F32 needs 8 bytes but data_offsets [0, 4] span 4") !=
        std::string::npos);
  CHECK(parse_error(assemble(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight))
            .find("tensor \"w\": shape [-2] must hold non-negative integers") != std::string::npos);
  CHECK(parse_error(assemble(R"({"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", eight))
            .find("tensor \"w\": shape [2.0] must hold non-negative integers") !=
        std::string::npos);
  CHECK(parse_error(assemble(R"({"w":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", eight))
            .find("shape must be an array") != std::string::npos);
  CHECK(parse_error(assemble(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}})", eight))
            .find("data_offsets must be [begin, end]") != std::string::npos);
  CHECK(parse_error(assemble(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", eight))
            .find("data_offsets begin must be a non-negative integer, got -8") !=
        std::string::npos);
  CHECK(parse_error(assemble(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight))
            .find("end before they begin") != std::string::npos);
  CHECK(
      parse_error(assemble(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", eight))
          .find("tensor \"w\": data_offsets [4, 12] are out of range of the 8-byte data buffer") !=
      std::string::npos);
  CHECK(parse_error(assemble(R"({"w":{"dtype":"F32","shape":[2]}})", eight))
            .find("tensor \"w\": missing field \"data_offsets\"") != std::string::npos);
  CHECK(parse_error(
            assemble(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", eight))
            .find("tensor \"w\": unknown field \"extra\"") != std::string::npos);
  CHECK(parse_error(assemble(R"({"w":[1]})", "")).find("tensor \"w\": entry must be an object") !=
        std::string::npos);
  CHECK(parse_error(assemble(R"({"__metadata__":{"k":1}})", ""))
            .find("__metadata__ value of \"k\" must be a string, got 1") != std::string::npos);
  CHECK(
      parse_error(assemble(R"({"__metadata__":[]})", "")).find("__metadata__ must be an object") !=
      std::string::npos);
  // Overlap, gap, and bytes after the last tensor.
  CHECK(
      parse_error(
          assemble(
              R"({"a":{"dtype":"U8","shape":[6],"data_offsets":[0,6]},"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
              eight))
          .find("tensor \"b\" data_offsets [4, 8] overlap tensor \"a\" (which ends at 6)") !=
      std::string::npos);
  CHECK(
      parse_error(
          assemble(
              R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
              eight))
          .find("bytes 2..4 are not covered") != std::string::npos);
  CHECK(parse_error(assemble("{" + ok_entry + "}", eight + "junk"))
            .find("trailing garbage: the tensors cover 8 bytes of the 12-byte data buffer") !=
        std::string::npos);
  // Shapes whose byte count overflows 64 bits.
  CHECK(
      parse_error(
          assemble(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                   eight))
          .find("byte count overflows") != std::string::npos);
}

TEST_CASE("safetensors: load errors name the path") {
  TempDir dir("safetensors");
  const std::string path = (dir.path / "truncated.safetensors").string();
  dg::write_file_atomic(path, std::string("\x10\0\0", 3));
  CHECK_THROWS_WITH_AS(dg::load_safetensors(path),
                       doctest::Contains((path + ": safetensors: file is 3 bytes").c_str()),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(dg::load_safetensors(path + ".missing"),
                       doctest::Contains((path + ".missing").c_str()), std::runtime_error);
}

TEST_CASE("safetensors: mutated files either load consistently or throw runtime_error") {
  const std::string good = dg::serialize_safetensors(
      {make("a", "F32", {2}, bytes_of(std::vector<float>{1, 2})), make("b", "U8", {3}, {7, 8, 9}),
       make("c", "I64", {1, 1}, bytes_of(std::vector<int64_t>{-5}))},
      {{"k", "v"}});
  std::mt19937 random(777);
  int loaded = 0, refused = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = good;
    const size_t at = random() % bytes.size();
    if (random() % 4 == 0)
      bytes.resize(at);
    else
      bytes[at] = static_cast<char>(random() % 256);
    try {
      const dg::SafetensorsFile file = dg::parse_safetensors(bytes, "fuzz.safetensors");
      ++loaded;
      for (const dg::TensorEntry& tensor : file.tensors) {
        uint64_t count = dg::safetensors_dtype_size(tensor.dtype);
        for (const int64_t dim : tensor.shape) count *= static_cast<uint64_t>(dim);
        CHECK(count == tensor.bytes.size());
      }
    } catch (const std::runtime_error& error) {
      ++refused;
      CHECK(std::string(error.what()).rfind("fuzz.safetensors: safetensors: ", 0) == 0);
    }
  }
  CHECK(loaded > 0);
  CHECK(refused > 0);
}
