// Writing GGUF v3: the writer checks every key, value and tensor info, then lays out the header,
// the metadata, the tensor infos and the aligned tensor data.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>

#include "train/io/files.h"
#include "train/lm/gguf.h"
#include "train/lm/gguf_layout.h"

namespace dg {

namespace {

using namespace gguf_layout;

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

}  // namespace

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
    uint64_t bytes = 0;
    if (const std::string why = tensor_byte_count(t.type, t.dims, count, bytes); !why.empty())
      fail(why);
    if (bytes != t.bytes.size())
      fail(fmt::format("{} bytes, but dims {} of {} need {}", t.bytes.size(), dims_text(t.dims),
                       ggml_type_name(t.type), bytes));
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

}  // namespace dg
