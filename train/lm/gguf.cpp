// GGUF values and types: the value constructors, the type names and sizes, lookups in a file,
// and the float conversions (f16, bf16) of tensors. The file format itself is written in
// gguf_write.cpp and read in gguf_read.cpp. Little-endian hosts and files only.
#include "train/lm/gguf.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "train/lm/gguf_layout.h"

namespace dg {

static_assert(std::endian::native == std::endian::little, "GGUF files are read little-endian");

namespace {
constexpr size_t kQ8Block = 32;                 // ggml's QK8_0
constexpr size_t kQ8BlockBytes = 2 + kQ8Block;  // block_q8_0: F16 d, then int8 qs[32]
}  // namespace

// ---- values ----------------------------------------------------------------------------------

const char* gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::u8:
      return "u8";
    case GgufType::i8:
      return "i8";
    case GgufType::u16:
      return "u16";
    case GgufType::i16:
      return "i16";
    case GgufType::u32:
      return "u32";
    case GgufType::i32:
      return "i32";
    case GgufType::f32:
      return "f32";
    case GgufType::boolean:
      return "bool";
    case GgufType::string:
      return "string";
    case GgufType::array:
      return "array";
    case GgufType::u64:
      return "u64";
    case GgufType::i64:
      return "i64";
    case GgufType::f64:
      return "f64";
  }
  return "unknown";
}

namespace {
GgufValue unsigned_value(GgufType t, uint64_t v) {
  GgufValue g;
  g.type = t;
  g.uint = v;
  return g;
}
GgufValue signed_value(GgufType t, int64_t v) {
  GgufValue g;
  g.type = t;
  g.sint = v;
  return g;
}
GgufValue real_value(GgufType t, double v) {
  GgufValue g;
  g.type = t;
  g.real = v;
  return g;
}
}  // namespace

GgufValue GgufValue::u8(uint8_t v) { return unsigned_value(GgufType::u8, v); }
GgufValue GgufValue::i8(int8_t v) { return signed_value(GgufType::i8, v); }
GgufValue GgufValue::u16(uint16_t v) { return unsigned_value(GgufType::u16, v); }
GgufValue GgufValue::i16(int16_t v) { return signed_value(GgufType::i16, v); }
GgufValue GgufValue::u32(uint32_t v) { return unsigned_value(GgufType::u32, v); }
GgufValue GgufValue::i32(int32_t v) { return signed_value(GgufType::i32, v); }
GgufValue GgufValue::f32(float v) { return real_value(GgufType::f32, v); }
GgufValue GgufValue::boolean(bool v) { return unsigned_value(GgufType::boolean, v ? 1 : 0); }
GgufValue GgufValue::u64(uint64_t v) { return unsigned_value(GgufType::u64, v); }
GgufValue GgufValue::i64(int64_t v) { return signed_value(GgufType::i64, v); }
GgufValue GgufValue::f64(double v) { return real_value(GgufType::f64, v); }
GgufValue GgufValue::string(std::string v) {
  GgufValue g;
  g.type = GgufType::string;
  g.text = std::move(v);
  return g;
}
GgufValue GgufValue::array(GgufType element_type, std::vector<GgufValue> elements) {
  GgufValue g;
  g.type = GgufType::array;
  g.element_type = element_type;
  g.elements = std::move(elements);
  return g;
}
GgufValue GgufValue::strings(const std::vector<std::string>& values) {
  std::vector<GgufValue> e;
  e.reserve(values.size());
  for (const std::string& v : values) e.push_back(string(v));
  return array(GgufType::string, std::move(e));
}
GgufValue GgufValue::i32s(const std::vector<int32_t>& values) {
  std::vector<GgufValue> e;
  e.reserve(values.size());
  for (const int32_t v : values) e.push_back(i32(v));
  return array(GgufType::i32, std::move(e));
}
GgufValue GgufValue::f32s(const std::vector<float>& values) {
  std::vector<GgufValue> e;
  e.reserve(values.size());
  for (const float v : values) e.push_back(f32(v));
  return array(GgufType::f32, std::move(e));
}

const char* ggml_type_name(GgmlType type) {
  switch (type) {
    case GgmlType::f32:
      return "F32";
    case GgmlType::f16:
      return "F16";
    case GgmlType::q8_0:
      return "Q8_0";
    case GgmlType::i8:
      return "I8";
    case GgmlType::i16:
      return "I16";
    case GgmlType::i32:
      return "I32";
    case GgmlType::i64:
      return "I64";
    case GgmlType::f64:
      return "F64";
    case GgmlType::bf16:
      return "BF16";
  }
  return "unknown";
}

size_t ggml_block_size(GgmlType type) { return type == GgmlType::q8_0 ? kQ8Block : 1; }

size_t ggml_type_size(GgmlType type) {
  switch (type) {
    case GgmlType::q8_0:
      return kQ8BlockBytes;
    case GgmlType::i8:
      return 1;
    case GgmlType::f16:
    case GgmlType::bf16:
    case GgmlType::i16:
      return 2;
    case GgmlType::f32:
    case GgmlType::i32:
      return 4;
    case GgmlType::i64:
    case GgmlType::f64:
      return 8;
  }
  throw std::runtime_error(
      fmt::format("ggml type {} is not one this reader knows (F32, F16, "
                  "BF16, Q8_0, I8, I16, I32, I64, F64)",
                  static_cast<uint32_t>(type)));
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

// ---- float conversions -------------------------------------------------------------------------

uint16_t float_to_f16(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t a = x & 0x7FFFFFFF;
  if (a > 0x7F800000)  // NaN: quiet, the payload's top bits kept
    return sign | 0x7E00 | static_cast<uint16_t>((a >> 13) & 0x3FF);
  // 65520 = 0x477FF000 lies halfway between 65504 (F16's largest, odd mantissa) and 2^16: the tie
  // goes to the even neighbour, 2^16, which is infinity. Everything from there up, inf included.
  if (a >= 0x477FF000) return sign | 0x7C00;
  if (a >= 0x38800000) {  // normal in F16 (≥ 2^-14): rebias the exponent, round 13 mantissa bits
    uint32_t h = ((((a >> 23) - 127 + 15) << 10) | ((a & 0x7FFFFF) >> 13));
    const uint32_t rest = a & 0x1FFF;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry moves into the exponent
    return sign | static_cast<uint16_t>(h);
  }
  // F16 subnormal (units of 2^-24) or zero: the value is m · 2^(e-150), m with its implicit bit,
  // so it is m >> (126 - e) units, rounded to nearest even on the bits shifted out.
  const uint32_t e = a >> 23;
  if (e < 102) return sign;  // below 2^-25: rounds to zero (2^-25 itself is the tie, to 0)
  const uint32_t m = (a & 0x7FFFFF) | 0x800000;
  const uint32_t shift = 126 - e;  // 14..24
  uint32_t h = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1))) ++h;  // may round up to the smallest normal
  return sign | static_cast<uint16_t>(h);
}

float f16_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t e = (bits >> 10) & 0x1F, m = bits & 0x3FF;
  uint32_t x;
  if (e == 0x1F) {
    x = sign | 0x7F800000 | (m << 13);  // inf or NaN, payload kept
  } else if (e != 0) {
    x = sign | ((e - 15 + 127) << 23) | (m << 13);
  } else {  // zero or subnormal: m · 2^-24, exact in float32
    const float magnitude = std::ldexp(static_cast<float>(m), -24);
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(x);
}

uint16_t float_to_bf16(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7FFFFFFF) > 0x7F800000)  // NaN: keep sign and top payload, force quiet
    return static_cast<uint16_t>((x >> 16) | 0x40);
  // Round to nearest even on the low 16 bits; a carry out of the mantissa bumps the exponent
  // (the largest floats round up to inf, as IEEE rounding says).
  return static_cast<uint16_t>((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

float bf16_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// ---- Q8_0 --------------------------------------------------------------------------------------

std::vector<uint8_t> quantize_q8_0(const float* values, size_t count) {
  if (count % kQ8Block != 0)
    throw std::invalid_argument(
        fmt::format("Q8_0: {} values are not a whole number of blocks of {}", count, kQ8Block));
  std::vector<uint8_t> out(count / kQ8Block * kQ8BlockBytes);
  for (size_t block = 0; block < count / kQ8Block; ++block) {
    const float* x = values + block * kQ8Block;
    uint8_t* y = out.data() + block * kQ8BlockBytes;
    float amax = 0.0f;
    for (size_t j = 0; j < kQ8Block; ++j) {
      if (!std::isfinite(x[j]))
        throw std::invalid_argument(
            fmt::format("Q8_0: value {} ({}) is not finite", block * kQ8Block + j, x[j]));
      amax = std::max(amax, std::fabs(x[j]));
    }
    const float d = amax / 127.0f;  // ggml: amax / ((1 << 7) - 1), in float32
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t d_bits = float_to_f16(d);
    std::memcpy(y, &d_bits, 2);
    for (size_t j = 0; j < kQ8Block; ++j) {
      // |x · id| <= 127 up to rounding: amax · (1 / (amax / 127)) may land a hair above 127,
      // which roundf still takes to 127.
      const auto q = static_cast<int8_t>(std::roundf(x[j] * id));
      std::memcpy(y + 2 + j, &q, 1);
    }
  }
  return out;
}

std::vector<float> dequantize_q8_0(const uint8_t* bytes, size_t count) {
  if (count % kQ8Block != 0)
    throw std::invalid_argument(
        fmt::format("Q8_0: {} values are not a whole number of blocks of {}", count, kQ8Block));
  std::vector<float> out(count);
  for (size_t block = 0; block < count / kQ8Block; ++block) {
    const uint8_t* y = bytes + block * kQ8BlockBytes;
    uint16_t d_bits;
    std::memcpy(&d_bits, y, 2);
    const float d = f16_to_float(d_bits);
    for (size_t j = 0; j < kQ8Block; ++j) {
      int8_t q;
      std::memcpy(&q, y + 2 + j, 1);
      out[block * kQ8Block + j] = static_cast<float>(q) * d;
    }
  }
  return out;
}

GgufTensor gguf_float_tensor(std::string name, const std::vector<int64_t>& torch_shape,
                             const std::vector<float>& values, GgmlType type) {
  GgufTensor t;
  t.name = std::move(name);
  t.type = type;
  uint64_t count = 1;
  for (auto d = torch_shape.rbegin(); d != torch_shape.rend(); ++d) {
    if (*d < 0)
      throw std::runtime_error(fmt::format("GGUF tensor '{}': negative dimension {}", t.name, *d));
    t.dims.push_back(static_cast<uint64_t>(*d));
    count *= static_cast<uint64_t>(*d);
  }
  if (count != values.size())
    throw std::runtime_error(fmt::format("GGUF tensor '{}': {} values for dims {}", t.name,
                                         values.size(), gguf_layout::dims_text(t.dims)));
  switch (type) {
    case GgmlType::f32:
      t.bytes.resize(values.size() * 4);
      std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
      break;
    case GgmlType::f16:
    case GgmlType::bf16: {
      t.bytes.resize(values.size() * 2);
      for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t h =
            type == GgmlType::f16 ? float_to_f16(values[i]) : float_to_bf16(values[i]);
        std::memcpy(t.bytes.data() + 2 * i, &h, 2);
      }
      break;
    }
    case GgmlType::q8_0:
      if (t.dims.empty() || t.dims[0] % kQ8Block != 0)
        throw std::runtime_error(
            fmt::format("GGUF tensor '{}': Q8_0 stores rows in blocks of {} values; the row "
                        "(dims[0] = {}) is not a multiple of {}",
                        t.name, kQ8Block, t.dims.empty() ? 1 : t.dims[0], kQ8Block));
      try {
        t.bytes = quantize_q8_0(values.data(), values.size());
      } catch (const std::invalid_argument& e) {
        throw std::runtime_error(fmt::format("GGUF tensor '{}': {}", t.name, e.what()));
      }
      break;
    default:
      throw std::runtime_error(
          fmt::format("GGUF tensor '{}': float values are stored as F32, F16, "
                      "BF16 or Q8_0, not {}",
                      t.name, ggml_type_name(type)));
  }
  return t;
}

std::vector<float> gguf_tensor_floats(const GgufTensor& t) {
  if (t.type == GgmlType::q8_0) {
    if (t.bytes.size() % kQ8BlockBytes != 0)
      throw std::runtime_error(
          fmt::format("GGUF tensor '{}': {} bytes is not a whole number of Q8_0 blocks", t.name,
                      t.bytes.size()));
    return dequantize_q8_0(t.bytes.data(), t.bytes.size() / kQ8BlockBytes * kQ8Block);
  }
  const bool half = t.type == GgmlType::f16 || t.type == GgmlType::bf16;
  if (t.type != GgmlType::f32 && !half)
    throw std::runtime_error(
        fmt::format("GGUF tensor '{}': {} is not a float type (F32, F16, BF16, Q8_0)", t.name,
                    ggml_type_name(t.type)));
  const size_t width = half ? 2 : 4;
  if (t.bytes.size() % width != 0)
    throw std::runtime_error(
        fmt::format("GGUF tensor '{}': {} bytes is not a whole number of {} "
                    "values",
                    t.name, t.bytes.size(), ggml_type_name(t.type)));
  std::vector<float> out(t.bytes.size() / width);
  for (size_t i = 0; i < out.size(); ++i) {
    if (!half) {
      std::memcpy(&out[i], t.bytes.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.bytes.data() + 2 * i, 2);
      out[i] = t.type == GgmlType::f16 ? f16_to_float(h) : bf16_to_float(h);
    }
  }
  return out;
}

}  // namespace dg
