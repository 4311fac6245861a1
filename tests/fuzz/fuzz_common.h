// Shared by the fuzz targets: a byte consumer that turns the input into sizes, strings and
// choices, and the two verdicts a target gives. A reader may reject an input only with a
// std::exception whose message names the source (the fake file name the target passed in);
// anything else (a crash, an allocation failure, a message without the file, a broken
// round-trip) is a defect. Test code only: no libFuzzer header, so gcc builds it too.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dg::fuzz {

// A property the target checks does not hold. Under libFuzzer (DG_FUZZ_LIBFUZZER) this prints
// and aborts, so libFuzzer saves the input; in the replay test it throws, so the test names
// the corpus file and goes on.
struct Failure {
  std::string what;
};

[[noreturn]] inline void fail(const std::string& what) {
#ifdef DG_FUZZ_LIBFUZZER
  std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
  std::abort();
#else
  throw Failure{what};
#endif
}

inline void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

// Runs `read`; true when it returned, false when it threw an acceptable rejection: a
// std::exception (not an allocation failure) whose message contains `source`.
template <class Read>
bool accepted(const std::string& source, Read&& read) {
  try {
    read();
    return true;
  } catch (const std::bad_alloc& e) {
    fail("allocation failure instead of a clear error: " + std::string(e.what()));
  } catch (const std::length_error& e) {
    fail("std::length_error (an unchecked size) instead of a clear error: " +
         std::string(e.what()));
  } catch (const std::exception& e) {
    const std::string message = e.what();
    check(message.find(source) != std::string::npos,
          "error message does not name the source \"" + source + "\": " + message);
    return false;
  }
}

// Takes bytes off the front of the fuzz input; past the end every read gives zeros/empties.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return size_ == 0; }
  size_t remaining() const { return size_; }

  uint8_t u8() {
    if (size_ == 0) return 0;
    --size_;
    return *data_++;
  }
  uint32_t u32() {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value |= static_cast<uint32_t>(u8()) << (8 * i);
    return value;
  }
  // A value in [lo, hi].
  uint32_t in_range(uint32_t lo, uint32_t hi) { return lo + u32() % (hi - lo + 1); }
  bool flag() { return u8() & 1; }
  // Up to max_length bytes: the length is the next byte (mod max_length + 1).
  std::string string(size_t max_length) {
    size_t length = u8() % (max_length + 1);
    if (length > size_) length = size_;
    std::string out(reinterpret_cast<const char*>(data_), length);
    data_ += length;
    size_ -= length;
    return out;
  }
  std::string rest() { return string_of(size_); }

 private:
  std::string string_of(size_t length) {
    std::string out(reinterpret_cast<const char*>(data_), length);
    data_ += length;
    size_ -= length;
    return out;
  }
  const uint8_t* data_;
  size_t size_;
};

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace dg::fuzz
