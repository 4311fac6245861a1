// SHA-256: the FIPS 180-4 example vectors, padding boundaries, streaming in uneven pieces,
// both backends (x86 SHA extensions and portable), and the data files against SHA256SUMS.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tests/test_data.h"
#include "train/io/files.h"
#include "train/io/sha256.h"

namespace {

std::string pattern_bytes(size_t n) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>((i * 31 + 7) % 256);
  return bytes;
}

// Selects the portable code (or the default backend) for one scope, restoring the default.
struct BackendScope {
  explicit BackendScope(bool portable) { dg::sha256_force_portable(portable); }
  ~BackendScope() { dg::sha256_force_portable(false); }
};

}  // namespace

TEST_CASE("sha256: FIPS 180-4 example vectors") {
  for (const bool portable : {false, true}) {
    BackendScope scope(portable);
    const std::string backend = dg::sha256_backend();
    CAPTURE(backend);
    if (portable) CHECK(backend == "portable");
    CHECK(dg::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(dg::sha256_hex("abc") ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(dg::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(dg::sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopj"
                         "klmnopqklmnopqrlmnop"
                         "qrsmnopqrstnopqrstu") ==
          "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    CHECK(dg::sha256_hex(std::string(1000000, 'a')) ==
          "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }
}

TEST_CASE("sha256: lengths around the padding boundaries (goldens from Python hashlib)") {
  const std::pair<size_t, const char*> goldens[] = {
      {1, "ca358758f6d27e6cf45272937977a748fd88391db679ceda7dc7bf1f005ee879"},
      {55, "8aa994584139d128848eeebc4e815639ba5ab6e6e39574195a63ac4f14f7c43b"},
      {56, "ad574708f75c044c9b85de64cb568ee7711ff4f36448c6242f053ba8f6cc2b63"},
      {57, "5b46e502092be01b1100193e089fdda95638c12e19a1d24f308eb2c3d3ae849d"},
      {63, "280ed3e8ff1df845b2e7dfe6ac6cee817bef20e783cc65abc41b818b4d2fe076"},
      {64, "c6ab9724ade5b6a7a1edfffb12f3aa9181351355af8fd08c919952ad211339dd"},
      {65, "788367c73c7ddf4c53f65e68cc0d943e6227ab55b0e78ba63ace822b1c6301c0"},
      {119, "3d610547d68216dedf7435a4fb6260353911f6b3fd3f18805ddb8be285d726fe"},
      {120, "1f80156a804cb7862ad113e8200e9d74499723e7c7854d5f48776d3148e09656"},
      {128, "cc548ca2dec1f6fe4f58b2e27aa9c7521607df1130d140b55a4dad0665302356"},
      {1000, "5097e7d587352f5097062ae679f37bda5802d9f875aba14c8cb4d1a188ada179"},
  };
  for (const bool portable : {false, true}) {
    BackendScope scope(portable);
    for (const auto& golden : goldens) {
      const auto length = golden.first;  // plain variables: clang < 16 cannot capture bindings
      const auto& expected = golden.second;
      CAPTURE(portable);
      CAPTURE(length);
      const std::string bytes = pattern_bytes(length);
      CHECK(dg::sha256_hex(bytes) == expected);
      // The same bytes fed in uneven pieces (1, 2, 3, ... bytes) give the same digest.
      dg::Sha256 streaming;
      size_t offset = 0;
      for (size_t piece = 1; offset < length; ++piece) {
        const size_t take = std::min(piece, length - offset);
        streaming.update(std::string_view(bytes).substr(offset, take));
        offset += take;
      }
      CHECK(streaming.finish_hex() == expected);
    }
  }
}

TEST_CASE("sha256: finish is final until reset; file errors name the path") {
  dg::Sha256 hasher;
  hasher.update("ab");
  hasher.update("c");
  CHECK(hasher.finish_hex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK_THROWS_AS(hasher.update("x"), std::logic_error);
  CHECK_THROWS_AS(hasher.finish(), std::logic_error);
  hasher.reset();
  CHECK(hasher.finish_hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK_THROWS_WITH_AS(dg::sha256_file("/nonexistent/dg-file"),
                       doctest::Contains("/nonexistent/dg-file"), std::runtime_error);
  const uint8_t bytes[] = {0x00, 0x0f, 0xa5, 0xff};
  CHECK(dg::to_hex(bytes, 4) == "000fa5ff");
}

TEST_CASE("sha256: data files match their SHA256SUMS list") {
  const std::optional<std::string> data_dir = dg::test::data_dir_or_skip();
  if (!data_dir) return;
  std::istringstream sums(dg::read_file(*data_dir + "/SHA256SUMS"));
  std::string expected, name;
  int files = 0;
  while (sums >> expected >> name) {
    CAPTURE(name);
    CHECK(dg::sha256_file(*data_dir + "/" + name) == expected);
    ++files;
  }
  CHECK(files == 4);
  // Throughput of both backends on the largest file, already in memory (informational).
  const std::string train = dg::read_file(*data_dir + "/wikitext-2/train.txt");
  for (const bool portable : {false, true}) {
    BackendScope scope(portable);
    const auto start = std::chrono::steady_clock::now();
    CHECK(dg::sha256_hex(train) ==
          "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MESSAGE(
        fmt::format("sha256 {}: {:.0f} MB/s", dg::sha256_backend(), train.size() / 1e6 / seconds));
  }
}
