// Reading GGUF v3: a bounds-checked cursor walks the header, the metadata and the tensor infos,
// and every field is validated (each error names it) before anything is returned. No memory
// mapping.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>
#include <utility>

#include "train/io/files.h"
#include "train/lm/gguf.h"
#include "train/lm/gguf_layout.h"

namespace dg {

namespace {

using namespace gguf_layout;

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

// The header: magic, version and the two counts, each count refused when it cannot fit in the
// file. Returns {tensor_count, metadata_kv_count}.
std::pair<uint64_t, uint64_t> read_header(Cursor& in, std::string_view bytes) {
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
  return {tensor_count, kv_count};
}

// The metadata: ASCII keys, each once, values of known types; general.alignment checked and set.
void read_metadata(Cursor& in, uint64_t kv_count, GgufFile& file) {
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
}

// Tensor info i: name, dimensions, type and aligned offset (its bytes are read later).
GgufTensor read_tensor_info(Cursor& in, uint64_t i, uint64_t alignment,
                            std::set<std::string>& names) {
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
                                         "BF16, Q8_0, I8, I16, I32, I64, F64)",
                                         type));
  t.type = static_cast<GgmlType>(type);
  uint64_t bytes = 0;
  if (const std::string why = tensor_byte_count(t.type, t.dims, count, bytes); !why.empty())
    in.fail(field + " dimensions", why);
  t.offset = in.read<uint64_t>(field + " offset");
  if (t.offset % alignment != 0)
    in.fail(field + " offset",
            fmt::format("{} is not a multiple of the alignment {}", t.offset, alignment));
  return t;
}

// Bytes of a checked tensor info.
uint64_t tensor_bytes(const GgufTensor& t) {
  uint64_t count, bytes = 0;
  element_count(t.dims, count);
  tensor_byte_count(t.type, t.dims, count, bytes);
  return bytes;
}

// The data section starts at the aligned end of the header, after zero padding.
void check_padding(Cursor& in, std::string_view bytes, uint64_t tensor_count, GgufFile& file) {
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
}

// Tensors in offset order: each inside the data section, none overlapping the next, nothing after
// the last but its padding.
void check_tensor_layout(Cursor& in, std::string_view bytes, const GgufFile& file) {
  const uint64_t data_size = bytes.size() > file.data_offset ? bytes.size() - file.data_offset : 0;
  std::vector<size_t> order(file.tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const GgufTensor& t = file.tensors[i];
    const uint64_t size = tensor_bytes(t);
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
    last_end = std::max(last_end, t.offset + tensor_bytes(t));
  }
  if (!file.tensors.empty() && data_size > align_up(last_end, file.alignment))
    in.fail("file size",
            fmt::format("{} bytes after the last tensor ends (data section byte {}); at most the "
                        "padding to {} may follow",
                        data_size - last_end, last_end, file.alignment));
  if (file.tensors.empty() && bytes.size() > file.data_offset)
    in.fail("file size", fmt::format("{} bytes follow a header that lists no tensors",
                                     bytes.size() - file.data_offset));
}

}  // namespace

GgufFile parse_gguf(std::string_view bytes, const std::string& source) {
  Cursor in(bytes, source);
  GgufFile file;
  const auto [tensor_count, kv_count] = read_header(in, bytes);
  read_metadata(in, kv_count, file);
  std::set<std::string> names;
  for (uint64_t i = 0; i < tensor_count; ++i)
    file.tensors.push_back(read_tensor_info(in, i, file.alignment, names));
  check_padding(in, bytes, tensor_count, file);
  check_tensor_layout(in, bytes, file);
  // Every info is checked: the tensors' bytes are read.
  for (GgufTensor& t : file.tensors) {
    const uint64_t size = tensor_bytes(t);
    const auto* begin =
        reinterpret_cast<const uint8_t*>(bytes.data()) + file.data_offset + t.offset;
    t.bytes.assign(begin, begin + size);
  }
  return file;
}

GgufFile load_gguf(const std::string& path) { return parse_gguf(read_file(path), path); }

}  // namespace dg
