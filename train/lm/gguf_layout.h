// The rules of the GGUF v3 layout that the reader (gguf_read.cpp) and the writer
// (gguf_write.cpp) share: limits, value and tensor type sizes, alignment. Not a public header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "train/io/utf8.h"
#include "train/lm/gguf.h"

namespace dg::gguf_layout {

inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr uint64_t kMaxKeyBytes = 65535;
inline constexpr size_t kMaxNameBytes = 63;  // llama.cpp: name.length() < GGML_MAX_NAME (64)
inline constexpr size_t kMaxDims = 4;
inline constexpr int kMaxArrayDepth = 8;  // nested arrays deeper than this are refused
inline constexpr char kAlignmentKey[] = "general.alignment";

inline bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::f64); }

// Bytes of a fixed-size value type, 0 for string and array.
inline size_t value_size(GgufType t) {
  switch (t) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::boolean:
      return 1;
    case GgufType::u16:
    case GgufType::i16:
      return 2;
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::f32:
      return 4;
    case GgufType::u64:
    case GgufType::i64:
    case GgufType::f64:
      return 8;
    case GgufType::string:
    case GgufType::array:
      return 0;
  }
  return 0;
}

inline bool known_tensor_type(uint32_t t) {
  switch (static_cast<GgmlType>(t)) {
    case GgmlType::f32:
    case GgmlType::f16:
    case GgmlType::q8_0:
    case GgmlType::i8:
    case GgmlType::i16:
    case GgmlType::i32:
    case GgmlType::i64:
    case GgmlType::f64:
    case GgmlType::bf16:
      return true;
  }
  return false;
}

inline uint64_t align_up(uint64_t offset, uint64_t alignment) {
  return offset + (alignment - offset % alignment) % alignment;
}

inline bool is_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const Utf8Char c = decode_utf8(text, i);
    if (!c.valid) return false;
    i += static_cast<size_t>(c.length);
  }
  return true;
}

// "[0:5, 1:3]" style dims for messages: GGUF order.
inline std::string dims_text(const std::vector<uint64_t>& dims) {
  std::string text = "{";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "}";
}

// Element count of dims, or false when it overflows int64 (llama.cpp's limit).
inline bool element_count(const std::vector<uint64_t>& dims, uint64_t& count) {
  count = 1;
  for (const uint64_t d : dims) {
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    if (__builtin_mul_overflow(count, d, &count)) return false;
  }
  return count <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

// The bytes of a tensor of `type` with `dims` whose element count is `count`, or an empty
// string; or why it cannot be stored: dims[0] not a whole number of the type's blocks, or a byte
// count that overflows.
inline std::string tensor_byte_count(GgmlType type, const std::vector<uint64_t>& dims,
                                     uint64_t count, uint64_t& bytes) {
  const uint64_t block = ggml_block_size(type);
  if (dims.empty() || dims[0] % block != 0)
    return "dims " + dims_text(dims) + ": " + ggml_type_name(type) + " stores blocks of " +
           std::to_string(block) + " values, and dims[0] is not a multiple of " +
           std::to_string(block);
  if (__builtin_mul_overflow(count / block, ggml_type_size(type), &bytes))
    return "dims " + dims_text(dims) + ": byte count overflows";
  return "";
}

}  // namespace dg::gguf_layout
