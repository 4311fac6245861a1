// GGUF v3 serialization: the writer lays out header, metadata, tensor infos and aligned tensor
// data; the reader walks the same layout with a bounds-checked cursor and validates every field
// before it returns anything. Little-endian hosts and files only; no memory mapping.
#include "train/lm/gguf.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>

#include "train/io/files.h"
#include "train/io/utf8.h"

namespace dg {

static_assert(std::endian::native == std::endian::little, "GGUF files are read little-endian");

namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMaxKeyBytes = 65535;
constexpr size_t kMaxNameBytes = 63;  // llama.cpp: name.length() < GGML_MAX_NAME (64)
constexpr size_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;  // nested arrays deeper than this are refused
constexpr char kAlignmentKey[] = "general.alignment";

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::f64); }

// Bytes of a fixed-size value type, 0 for string and array.
size_t value_size(GgufType t) {
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

bool known_tensor_type(uint32_t t) {
  switch (static_cast<GgmlType>(t)) {
    case GgmlType::f32:
    case GgmlType::f16:
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

uint64_t align_up(uint64_t offset, uint64_t alignment) {
  return offset + (alignment - offset % alignment) % alignment;
}

bool is_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const Utf8Char c = decode_utf8(text, i);
    if (!c.valid) return false;
    i += static_cast<size_t>(c.length);
  }
  return true;
}

// "[0:5, 1:3]" style dims for messages: GGUF order.
std::string dims_text(const std::vector<uint64_t>& dims) {
  std::string text = "{";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "}";
}

// Element count of dims, or false when it overflows int64 (llama.cpp's limit).
bool element_count(const std::vector<uint64_t>& dims, uint64_t& count) {
  count = 1;
  for (const uint64_t d : dims) {
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    if (__builtin_mul_overflow(count, d, &count)) return false;
  }
  return count <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

// ---- writer ----------------------------------------------------------------------------------

template <class T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void put_string(std::string& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.append(s);
}

// Checks that `v` is a well-formed value of its type; `where` names it in errors.
void check_value(const GgufValue& v, const std::string& where, int depth) {
  const auto fail = [&](const std::string& why) {
    throw std::runtime_error(fmt::format("GGUF metadata {}: {}", where, why));
  };
  const auto uint_max = [&](uint64_t max) {
    if (v.uint > max) fail(fmt::format("{} value {} out of range", gguf_type_name(v.type), v.uint));
  };
  const auto sint_range = [&](int64_t min, int64_t max) {
    if (v.sint < min || v.sint > max)
      fail(fmt::format("{} value {} out of range", gguf_type_name(v.type), v.sint));
  };
  switch (v.type) {
    case GgufType::u8:
      uint_max(0xFF);
      break;
    case GgufType::u16:
      uint_max(0xFFFF);
      break;
    case GgufType::u32:
      uint_max(0xFFFFFFFF);
      break;
    case GgufType::u64:
      break;
    case GgufType::boolean:
      uint_max(1);
      break;
    case GgufType::i8:
      sint_range(-128, 127);
      break;
    case GgufType::i16:
      sint_range(-32768, 32767);
      break;
    case GgufType::i32:
      sint_range(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
      break;
    case GgufType::i64:
    case GgufType::f32:
    case GgufType::f64:
      break;
    case GgufType::string:
      if (!is_utf8(v.text)) fail("string is not UTF-8");
      break;
    case GgufType::array:
      if (!known_value_type(static_cast<uint32_t>(v.element_type)))
        fail(fmt::format("unknown array element type {}", static_cast<uint32_t>(v.element_type)));
      if (depth >= kMaxArrayDepth) fail("arrays nested too deep");
      for (size_t i = 0; i < v.elements.size(); ++i) {
        if (v.elements[i].type != v.element_type)
          fail(fmt::format("element {} is {}, the array holds {}", i,
                           gguf_type_name(v.elements[i].type), gguf_type_name(v.element_type)));
        check_value(v.elements[i], fmt::format("{}[{}]", where, i), depth + 1);
      }
      break;
    default:
      fail(fmt::format("unknown value type {}", static_cast<uint32_t>(v.type)));
  }
}

void put_value(std::string& out, const GgufValue& v) {
  switch (v.type) {
    case GgufType::u8:
    case GgufType::boolean:
      put<uint8_t>(out, static_cast<uint8_t>(v.uint));
      break;
    case GgufType::u16:
      put<uint16_t>(out, static_cast<uint16_t>(v.uint));
      break;
    case GgufType::u32:
      put<uint32_t>(out, static_cast<uint32_t>(v.uint));
      break;
    case GgufType::u64:
      put<uint64_t>(out, v.uint);
      break;
    case GgufType::i8:
      put<int8_t>(out, static_cast<int8_t>(v.sint));
      break;
    case GgufType::i16:
      put<int16_t>(out, static_cast<int16_t>(v.sint));
      break;
    case GgufType::i32:
      put<int32_t>(out, static_cast<int32_t>(v.sint));
      break;
    case GgufType::i64:
      put<int64_t>(out, v.sint);
      break;
    case GgufType::f32:
      put<float>(out, static_cast<float>(v.real));
      break;
    case GgufType::f64:
      put<double>(out, v.real);
      break;
    case GgufType::string:
      put_string(out, v.text);
      break;
    case GgufType::array:
      put<uint32_t>(out, static_cast<uint32_t>(v.element_type));
      put<uint64_t>(out, v.elements.size());
      for (const GgufValue& e : v.elements) put_value(out, e);
      break;
  }
}

// general.alignment of the metadata (checked), or the default.
uint64_t alignment_of(const GgufFile& file) {
  const GgufValue* a = file.find(kAlignmentKey);
  if (!a) return kDefaultAlignment;
  if (a->type != GgufType::u32 || a->uint == 0 || a->uint % 8 != 0 || (a->uint & (a->uint - 1)))
    throw std::runtime_error(fmt::format(
        "GGUF metadata '{}': must be a u32 power of two and a multiple of 8", kAlignmentKey));
  return a->uint;
}

// ---- reader ----------------------------------------------------------------------------------

// A bounds-checked cursor over the file; every read names the field it reads.
class Cursor {
 public:
  Cursor(std::string_view bytes, const std::string& source) : bytes_(bytes), source_(source) {}

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw std::runtime_error(fmt::format("{}: GGUF {}: {}", source_, field, why));
  }
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  template <class T>
  T read(const std::string& field) {
    if (remaining() < sizeof(T))
      fail(field, fmt::format("needs {} bytes at offset {}, the file ends at {}", sizeof(T), pos_,
                              bytes_.size()));
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string read_string(const std::string& field) {
    const uint64_t length = read<uint64_t>(field + " length");
    if (length > remaining())
      fail(field, fmt::format("string length {} at offset {} runs past the end of the file ({} "
                              "bytes left)",
                              length, pos_ - 8, remaining()));
    std::string s(bytes_.substr(pos_, length));
    pos_ += length;
    return s;
  }

 private:
  std::string_view bytes_;
  const std::string& source_;
  uint64_t pos_ = 0;
};

GgufValue read_value(Cursor& in, GgufType type, const std::string& field, int depth) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufType::u8:
      v.uint = in.read<uint8_t>(field);
      break;
    case GgufType::u16:
      v.uint = in.read<uint16_t>(field);
      break;
    case GgufType::u32:
      v.uint = in.read<uint32_t>(field);
      break;
    case GgufType::u64:
      v.uint = in.read<uint64_t>(field);
      break;
    case GgufType::boolean:
      v.uint = in.read<uint8_t>(field);
      if (v.uint > 1) in.fail(field, fmt::format("bool value {} is neither 0 nor 1", v.uint));
      break;
    case GgufType::i8:
      v.sint = in.read<int8_t>(field);
      break;
    case GgufType::i16:
      v.sint = in.read<int16_t>(field);
      break;
    case GgufType::i32:
      v.sint = in.read<int32_t>(field);
      break;
    case GgufType::i64:
      v.sint = in.read<int64_t>(field);
      break;
    case GgufType::f32:
      v.real = in.read<float>(field);
      break;
    case GgufType::f64:
      v.real = in.read<double>(field);
      break;
    case GgufType::string:
      v.text = in.read_string(field);
      if (!is_utf8(v.text)) in.fail(field, "string is not UTF-8");
      break;
    case GgufType::array: {
      if (depth >= kMaxArrayDepth) in.fail(field, "arrays nested too deep");
      const uint32_t element = in.read<uint32_t>(field + " element type");
      if (!known_value_type(element))
        in.fail(field + " element type",
                fmt::format("{} is not a GGUF value type (0 to 12)", element));
      v.element_type = static_cast<GgufType>(element);
      const uint64_t count = in.read<uint64_t>(field + " length");
      // Every element takes at least one byte: a count beyond the file is refused before any
      // allocation.
      const size_t least = v.element_type == GgufType::string  ? 8
                           : v.element_type == GgufType::array ? 12
                                                               : value_size(v.element_type);
      if (count > in.remaining() / least)
        in.fail(field + " length",
                fmt::format("{} elements of {} cannot fit in the {} bytes left", count,
                            gguf_type_name(v.element_type), in.remaining()));
      v.elements.reserve(count);
      for (uint64_t i = 0; i < count; ++i)
        v.elements.push_back(
            read_value(in, v.element_type, fmt::format("{}[{}]", field, i), depth + 1));
      break;
    }
  }
  return v;
}

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

size_t ggml_type_size(GgmlType type) {
  switch (type) {
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
                  "BF16, I8, I16, I32, I64, F64)",
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
                                         values.size(), dims_text(t.dims)));
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
    default:
      throw std::runtime_error(
          fmt::format("GGUF tensor '{}': float values are stored as F32, F16 "
                      "or BF16, not {}",
                      t.name, ggml_type_name(type)));
  }
  return t;
}

std::vector<float> gguf_tensor_floats(const GgufTensor& t) {
  const bool half = t.type == GgmlType::f16 || t.type == GgmlType::bf16;
  if (t.type != GgmlType::f32 && !half)
    throw std::runtime_error(
        fmt::format("GGUF tensor '{}': {} is not a float type (F32, F16, BF16)", t.name,
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

// ---- writing -----------------------------------------------------------------------------------

std::string serialize_gguf(const GgufFile& file) {
  std::set<std::string_view> keys;
  for (const auto& [key, value] : file.metadata) {
    const std::string where = fmt::format("'{}'", key);
    if (key.empty() || key.size() > kMaxKeyBytes)
      throw std::runtime_error(
          fmt::format("GGUF metadata key {}: must be 1 to {} bytes", where, kMaxKeyBytes));
    for (const char c : key)
      if (static_cast<unsigned char>(c) >= 0x80 || c == 0)
        throw std::runtime_error(fmt::format("GGUF metadata key {}: must be ASCII", where));
    if (!keys.insert(key).second)
      throw std::runtime_error(fmt::format("GGUF metadata key {}: duplicate key", where));
    check_value(value, where, 0);
  }
  const uint64_t alignment = alignment_of(file);

  std::set<std::string_view> names;
  std::vector<uint64_t> offsets;
  uint64_t data_size = 0;
  for (const GgufTensor& t : file.tensors) {
    const auto fail = [&](const std::string& why) {
      throw std::runtime_error(fmt::format("GGUF tensor '{}': {}", t.name, why));
    };
    if (t.name.empty() || t.name.size() > kMaxNameBytes)
      fail(fmt::format("name must be 1 to {} bytes", kMaxNameBytes));
    if (!is_utf8(t.name)) fail("name is not UTF-8");
    if (!names.insert(t.name).second) fail("duplicate tensor name");
    if (t.dims.empty() || t.dims.size() > kMaxDims)
      fail(fmt::format("{} dims; GGUF tensors have 1 to {}", t.dims.size(), kMaxDims));
    if (!known_tensor_type(static_cast<uint32_t>(t.type)))
      fail(fmt::format("unknown tensor type {}", static_cast<uint32_t>(t.type)));
    uint64_t count;
    if (!element_count(t.dims, count))
      fail(fmt::format("dims {} are too large", dims_text(t.dims)));
    if (count * ggml_type_size(t.type) != t.bytes.size())
      fail(fmt::format("{} bytes, but dims {} of {} need {}", t.bytes.size(), dims_text(t.dims),
                       ggml_type_name(t.type), count * ggml_type_size(t.type)));
    offsets.push_back(data_size);
    data_size = align_up(data_size + t.bytes.size(), alignment);
  }

  std::string out = "GGUF";
  put<uint32_t>(out, 3);
  put<uint64_t>(out, file.tensors.size());
  put<uint64_t>(out, file.metadata.size());
  for (const auto& [key, value] : file.metadata) {
    put_string(out, key);
    put<uint32_t>(out, static_cast<uint32_t>(value.type));
    put_value(out, value);
  }
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const GgufTensor& t = file.tensors[i];
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (const uint64_t d : t.dims) put<uint64_t>(out, d);
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, offsets[i]);
  }
  out.resize(align_up(out.size(), alignment), '\0');
  const size_t data_start = out.size();
  out.reserve(data_start + data_size);
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const GgufTensor& t = file.tensors[i];
    out.resize(data_start + offsets[i], '\0');
    out.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  }
  out.resize(data_start + data_size, '\0');
  return out;
}

void save_gguf(const std::string& path, const GgufFile& file) {
  std::string bytes;
  try {
    bytes = serialize_gguf(file);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("{}: {}", path, e.what()));
  }
  write_file_atomic(path, bytes);
}

// ---- reading -----------------------------------------------------------------------------------

GgufFile parse_gguf(std::string_view bytes, const std::string& source) {
  Cursor in(bytes, source);
  GgufFile file;
  if (bytes.size() < 24)
    in.fail("header",
            fmt::format("the file has {} bytes, fewer than the 24 of a GGUF header", bytes.size()));
  if (bytes.substr(0, 4) != "GGUF") {
    std::string got;
    for (size_t i = 0; i < 4; ++i)
      got += fmt::format("{}{:02x}", i ? " " : "", static_cast<unsigned char>(bytes[i]));
    in.fail("magic", fmt::format("expected 47 47 55 46 (\"GGUF\"), got {}", got));
  }
  in.read<uint32_t>("magic");
  const uint32_t version = in.read<uint32_t>("version");
  if (version != 3) in.fail("version", fmt::format("{}; this reader reads version 3", version));
  const uint64_t tensor_count = in.read<uint64_t>("tensor_count");
  const uint64_t kv_count = in.read<uint64_t>("metadata_kv_count");
  // A key-value pair takes at least 8 + 1 + 4 + 1 bytes, a tensor info 8 + 1 + 4 + 8 + 4 + 8.
  if (kv_count > in.remaining() / 14)
    in.fail("metadata_kv_count",
            fmt::format("{} pairs cannot fit in a {}-byte file", kv_count, bytes.size()));
  if (tensor_count > in.remaining() / 33)
    in.fail("tensor_count", fmt::format("{} tensor infos cannot fit in a {}-byte file",
                                        tensor_count, bytes.size()));

  std::set<std::string> keys;
  for (uint64_t i = 0; i < kv_count; ++i) {
    const std::string key = in.read_string(fmt::format("metadata[{}] key", i));
    const std::string field = fmt::format("metadata[{}] '{}'", i, key);
    if (key.empty() || key.size() > kMaxKeyBytes)
      in.fail(field + " key", fmt::format("must be 1 to {} bytes", kMaxKeyBytes));
    for (const char c : key)
      if (static_cast<unsigned char>(c) >= 0x80 || c == 0) in.fail(field + " key", "not ASCII");
    if (!keys.insert(key).second) in.fail(field + " key", "duplicate key");
    const uint32_t type = in.read<uint32_t>(field + " value_type");
    if (!known_value_type(type))
      in.fail(field + " value_type", fmt::format("{} is not a GGUF value type (0 to 12)", type));
    file.metadata.emplace_back(key,
                               read_value(in, static_cast<GgufType>(type), field + " value", 0));
  }
  if (const GgufValue* a = file.find(kAlignmentKey)) {
    if (a->type != GgufType::u32)
      in.fail(kAlignmentKey, fmt::format("type {}, must be u32", gguf_type_name(a->type)));
    if (a->uint == 0 || a->uint % 8 != 0 || (a->uint & (a->uint - 1)))
      in.fail(kAlignmentKey, fmt::format("{} is not a power of two and a multiple of 8", a->uint));
    file.alignment = a->uint;
  }

  std::set<std::string> names;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor t;
    t.name = in.read_string(fmt::format("tensor_infos[{}] name", i));
    const std::string field = fmt::format("tensor_infos[{}] '{}'", i, t.name);
    if (t.name.empty() || t.name.size() > kMaxNameBytes)
      in.fail(field + " name", fmt::format("must be 1 to {} bytes", kMaxNameBytes));
    if (!is_utf8(t.name)) in.fail(field + " name", "not UTF-8");
    if (!names.insert(t.name).second) in.fail(field + " name", "duplicate tensor name");
    const uint32_t n_dims = in.read<uint32_t>(field + " n_dimensions");
    if (n_dims == 0 || n_dims > kMaxDims)
      in.fail(field + " n_dimensions", fmt::format("{}; must be 1 to {}", n_dims, kMaxDims));
    for (uint32_t d = 0; d < n_dims; ++d)
      t.dims.push_back(in.read<uint64_t>(fmt::format("{} dimensions[{}]", field, d)));
    uint64_t count;
    if (!element_count(t.dims, count))
      in.fail(field + " dimensions",
              fmt::format("{} hold more than 2^63 elements", dims_text(t.dims)));
    const uint32_t type = in.read<uint32_t>(field + " type");
    if (!known_tensor_type(type))
      in.fail(field + " type", fmt::format("ggml type {} is not one this reader knows (F32, F16, "
                                           "BF16, I8, I16, I32, I64, F64)",
                                           type));
    t.type = static_cast<GgmlType>(type);
    if (__builtin_mul_overflow(count, ggml_type_size(t.type), &count))
      in.fail(field + " dimensions", "byte count overflows");
    t.offset = in.read<uint64_t>(field + " offset");
    if (t.offset % file.alignment != 0)
      in.fail(field + " offset",
              fmt::format("{} is not a multiple of the alignment {}", t.offset, file.alignment));
    file.tensors.push_back(std::move(t));  // bytes are read once every info is checked
  }

  const uint64_t header_end = in.pos();
  file.data_offset = align_up(header_end, file.alignment);
  if (file.data_offset > bytes.size()) {
    if (tensor_count > 0 || header_end < bytes.size())
      in.fail("padding", fmt::format("the data section would start at {}, past the end of the "
                                     "{}-byte file",
                                     file.data_offset, bytes.size()));
  }
  const uint64_t padding_end = std::min<uint64_t>(file.data_offset, bytes.size());
  for (uint64_t p = header_end; p < padding_end; ++p)
    if (bytes[p] != '\0')
      in.fail("padding", fmt::format("byte {} before the data section is not zero", p));

  // Tensors in offset order: each inside the data section, none overlapping the next.
  const uint64_t data_size = bytes.size() > file.data_offset ? bytes.size() - file.data_offset : 0;
  std::vector<size_t> order(file.tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto size_of = [&](const GgufTensor& t) {
    uint64_t count;
    element_count(t.dims, count);
    return count * ggml_type_size(t.type);
  };
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const GgufTensor& t = file.tensors[i];
    const uint64_t size = size_of(t);
    if (t.offset > data_size || size > data_size - t.offset)
      in.fail(fmt::format("tensor_infos[{}] '{}' offset", i, t.name),
              fmt::format("bytes [{}, {}) of the data section lie outside it ({} bytes, starting "
                          "at file offset {})",
                          t.offset, t.offset + size, data_size, file.data_offset));
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return file.tensors[a].offset < file.tensors[b].offset; });
  uint64_t last_end = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const GgufTensor& t = file.tensors[order[k]];
    if (k > 0 && t.offset < last_end) {
      const GgufTensor& prev = file.tensors[order[k - 1]];
      in.fail(fmt::format("tensor_infos[{}] '{}' offset", order[k], t.name),
              fmt::format("bytes from {} overlap tensor '{}' (bytes [{}, {}))", t.offset, prev.name,
                          prev.offset, last_end));
    }
    last_end = std::max(last_end, t.offset + size_of(t));
  }
  if (!file.tensors.empty() && data_size > align_up(last_end, file.alignment))
    in.fail("file size",
            fmt::format("{} bytes after the last tensor ends (data section byte {}); at most the "
                        "padding to {} may follow",
                        data_size - last_end, last_end, file.alignment));
  if (file.tensors.empty() && bytes.size() > file.data_offset)
    in.fail("file size", fmt::format("{} bytes follow a header that lists no tensors",
                                     bytes.size() - file.data_offset));

  for (GgufTensor& t : file.tensors) {
    const uint64_t size = size_of(t);
    const auto* begin =
        reinterpret_cast<const uint8_t*>(bytes.data()) + file.data_offset + t.offset;
    t.bytes.assign(begin, begin + size);
  }
  return file;
}

GgufFile load_gguf(const std::string& path) { return parse_gguf(read_file(path), path); }

}  // namespace dg
