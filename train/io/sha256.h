// SHA-256 (FIPS 180-4): a streaming hasher, one-shot hex digests of bytes and of files.
// Uses the x86 SHA extensions when present, portable C++ otherwise. Meant for file integrity
// checks; not hardened for secret data.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace dg {

class Sha256 {
 public:
  Sha256();
  // Adds bytes; may be called any number of times.
  void update(std::string_view bytes);
  void update(const void* data, size_t size);
  // Finishes and returns the 32-byte digest. The hasher must not be updated afterwards
  // (it throws std::logic_error); reset() starts over.
  std::array<uint8_t, 32> finish();
  std::string finish_hex();  // 64 lowercase hex digits
  void reset();

 private:
  void compress_blocks(const uint8_t* blocks, size_t count);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
  bool finished_ = false;
};

// Lowercase hex SHA-256 of bytes.
std::string sha256_hex(std::string_view bytes);
// Lowercase hex SHA-256 of a file's content, read in chunks. Throws naming the path.
std::string sha256_file(const std::string& path);
// "sha-ni" when the x86 SHA extensions are used, else "portable".
const char* sha256_backend();
// For tests and benchmarks: use the portable code even where the CPU has SHA extensions.
void sha256_force_portable(bool force);

// Lowercase hex of arbitrary bytes.
std::string to_hex(const uint8_t* data, size_t size);

}  // namespace dg
