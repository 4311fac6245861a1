// safetensors serialization on top of dg::json: builds and checks the header, lays out the
// buffer, and validates every offset of files it reads. Reads whole files; no lazy loading.
#include "train/io/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>

#include "train/io/files.h"
#include "train/io/json.h"

namespace dg {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference reader's limit

struct DtypeInfo {
  const char* name;
  size_t size;
};

// In increasing rank, as the reference format orders its dtypes (rank grows with alignment).
constexpr DtypeInfo kDtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
    {"F32", 4},  {"F64", 8}, {"I64", 8}, {"U64", 8},
};

const DtypeInfo* find_dtype(std::string_view name, size_t* rank = nullptr) {
  for (size_t i = 0; i < std::size(kDtypes); ++i) {
    if (name == kDtypes[i].name) {
      if (rank) *rank = i;
      return &kDtypes[i];
    }
  }
  return nullptr;
}

std::string supported_dtypes() {
  std::string list;
  for (const DtypeInfo& dtype : kDtypes)
    list += (list.empty() ? "" : ", ") + std::string(dtype.name);
  return list;
}

// "[2, 3]": fmt::join on int64 trips a GCC 12 -Wstringop-overflow false positive in fmt 9.
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// prod(shape) * element_size, or throws with `context` on a negative dimension or overflow.
uint64_t byte_count(const std::vector<int64_t>& shape, size_t element_size,
                    const std::string& context) {
  uint64_t count = element_size;
  for (const int64_t dim : shape) {
    if (dim < 0)
      throw std::runtime_error(
          fmt::format("{}: negative dimension {} in shape {}", context, dim, shape_text(shape)));
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(dim), &count))
      throw std::runtime_error(fmt::format("{}: shape {} is too large (byte count overflows)",
                                           context, shape_text(shape)));
  }
  return count;
}

void append_u64_le(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

uint64_t read_u64_le(std::string_view bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

// A non-negative JSON integer, or throws naming what it is for.
uint64_t non_negative_integer(const json::Value& value, const std::string& context) {
  if (!value.is_integer() || value.as_int() < 0)
    throw std::runtime_error(
        fmt::format("{} must be a non-negative integer, got {}", context, json::dump(value)));
  return static_cast<uint64_t>(value.as_int());
}

}  // namespace

const TensorEntry* SafetensorsFile::find(std::string_view name) const {
  for (const TensorEntry& tensor : tensors)
    if (tensor.name == name) return &tensor;
  return nullptr;
}

size_t safetensors_dtype_size(std::string_view dtype) {
  if (const DtypeInfo* info = find_dtype(dtype)) return info->size;
  throw std::runtime_error(
      fmt::format("unknown safetensors dtype \"{}\" (supported: {})", dtype, supported_dtypes()));
}

std::string serialize_safetensors(const std::vector<TensorEntry>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  struct Planned {
    const TensorEntry* tensor;
    size_t rank;
  };
  std::vector<Planned> plan;
  std::set<std::string_view> names;
  for (const TensorEntry& tensor : tensors) {
    const std::string context = fmt::format("safetensors: tensor \"{}\"", tensor.name);
    if (tensor.name == "__metadata__")
      throw std::runtime_error(context + ": the name __metadata__ is reserved");
    if (!names.insert(tensor.name).second)
      throw std::runtime_error(context + ": duplicate tensor name");
    size_t rank = 0;
    const DtypeInfo* dtype = find_dtype(tensor.dtype, &rank);
    if (!dtype)
      throw std::runtime_error(fmt::format("{}: unknown dtype \"{}\" (supported: {})", context,
                                           tensor.dtype, supported_dtypes()));
    const uint64_t expected = byte_count(tensor.shape, dtype->size, context);
    if (expected != tensor.bytes.size())
      throw std::runtime_error(fmt::format("{}: has {} bytes but shape {} of {} needs {}", context,
                                           tensor.bytes.size(), shape_text(tensor.shape),
                                           tensor.dtype, expected));
    plan.push_back({&tensor, rank});
  }
  std::sort(plan.begin(), plan.end(), [](const Planned& a, const Planned& b) {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.tensor->name < b.tensor->name;
  });

  json::Value header = json::Object{};
  if (!metadata.empty()) {
    json::Value& meta = header["__metadata__"];
    meta = json::Object{};
    for (const auto& [key, value] : metadata)
      meta.as_object().emplace_back(key, json::Value(value));
  }
  uint64_t offset = 0;
  for (const Planned& entry : plan) {
    const TensorEntry& tensor = *entry.tensor;
    json::Value info = json::Object{};
    info["dtype"] = tensor.dtype;
    json::Value& shape = info["shape"];
    shape = json::Array{};
    for (const int64_t dim : tensor.shape) shape.push_back(dim);
    info["data_offsets"] =
        json::Array{json::Value(offset), json::Value(offset + tensor.bytes.size())};
    offset += tensor.bytes.size();
    header.as_object().emplace_back(tensor.name, std::move(info));
  }
  std::string header_text;
  try {
    header_text = json::dump(header);
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(fmt::format("safetensors: cannot write the header: {}", error.what()));
  }
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + header_text.size() + offset);
  append_u64_le(out, header_text.size());
  out += header_text;
  for (const Planned& entry : plan)
    out.append(reinterpret_cast<const char*>(entry.tensor->bytes.data()),
               entry.tensor->bytes.size());
  return out;
}

void save_safetensors(const std::string& path, const std::vector<TensorEntry>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::string bytes;
  try {
    bytes = serialize_safetensors(tensors, metadata);
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(fmt::format("cannot save {}: {}", path, error.what()));
  }
  write_file_atomic(path, bytes);
}

namespace {
[[noreturn]] void refuse(const std::string& source_name, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: safetensors: {}", source_name, what));
}

// The header's length (checked against the limit and the file) and its JSON object; `data` is
// set to the bytes after it.
json::Value read_header(std::string_view file_bytes, const std::string& source_name,
                        std::string_view& data) {
  const auto fail = [&](const std::string& what) { refuse(source_name, what); };
  if (file_bytes.size() < 8)
    fail(fmt::format("file is {} bytes, shorter than the 8-byte header length", file_bytes.size()));
  const uint64_t header_length = read_u64_le(file_bytes);
  if (header_length > kMaxHeaderBytes)
    fail(fmt::format("header length {} is larger than the {} byte limit", header_length,
                     kMaxHeaderBytes));
  if (header_length > file_bytes.size() - 8)
    fail(fmt::format("header length {} is larger than the {} bytes that follow it", header_length,
                     file_bytes.size() - 8));
  const std::string_view header_text = file_bytes.substr(8, header_length);
  data = file_bytes.substr(8 + header_length);
  if (header_text.empty() || header_text[0] != '{') fail("header does not start with '{'");
  json::Value header;
  try {
    header = json::parse(header_text, source_name + " (safetensors header)");
  } catch (const std::runtime_error& error) {
    fail(fmt::format("bad header JSON: {}", error.what()));
  }
  if (!header.is_object()) fail("header JSON is not an object");
  return header;
}

// "__metadata__": an object of strings.
void read_metadata(const json::Value& info, const std::string& source_name, SafetensorsFile& file) {
  if (!info.is_object())
    refuse(source_name, fmt::format("__metadata__ must be an object of strings, got {}",
                                    json::kind_name(info.kind())));
  for (const auto& [key, value] : info.as_object()) {
    if (!value.is_string())
      refuse(source_name, fmt::format("__metadata__ value of \"{}\" must be a string, got {}", key,
                                      json::dump(value)));
    file.metadata[key] = value.as_string();
  }
}

// Where a tensor's bytes lie in the data buffer, and its index in the file's tensors.
struct Span {
  uint64_t begin, end;
  size_t index;
};

// One tensor's entry: exactly dtype, shape and data_offsets, the offsets within the data buffer
// and spanning the bytes its shape and dtype need. Its bytes are copied later.
TensorEntry read_tensor_info(const std::string& name, const json::Value& info, uint64_t data_size,
                             const std::string& source_name, Span& span) {
  const auto fail = [&](const std::string& what) { refuse(source_name, what); };
  const std::string tensor = fmt::format("tensor \"{}\"", name);
  if (!info.is_object())
    fail(fmt::format("{}: entry must be an object, got {}", tensor, json::kind_name(info.kind())));
  for (const auto& [field, ignored] : info.as_object())
    if (field != "dtype" && field != "shape" && field != "data_offsets")
      fail(fmt::format("{}: unknown field \"{}\"", tensor, field));
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!info.find(field)) fail(fmt::format("{}: missing field \"{}\"", tensor, field));

  TensorEntry entry;
  entry.name = name;
  const json::Value& dtype = info.at("dtype");
  if (!dtype.is_string())
    fail(fmt::format("{}: dtype must be a string, got {}", tensor, json::dump(dtype)));
  entry.dtype = dtype.as_string();
  const DtypeInfo* dtype_info = find_dtype(entry.dtype);
  if (!dtype_info)
    fail(fmt::format("{}: unknown dtype \"{}\" (supported: {})", tensor, entry.dtype,
                     supported_dtypes()));

  const json::Value& shape = info.at("shape");
  if (!shape.is_array())
    fail(fmt::format("{}: shape must be an array, got {}", tensor, json::dump(shape)));
  for (const json::Value& dim : shape.as_array()) {
    if (!dim.is_integer() || dim.as_int() < 0)
      fail(fmt::format("{}: shape {} must hold non-negative integers", tensor, json::dump(shape)));
    entry.shape.push_back(dim.as_int());
  }

  const json::Value& offsets = info.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2)
    fail(fmt::format("{}: data_offsets must be [begin, end], got {}", tensor, json::dump(offsets)));
  uint64_t begin = 0, end = 0;
  try {
    begin = non_negative_integer(offsets.at(size_t{0}), "data_offsets begin");
    end = non_negative_integer(offsets.at(size_t{1}), "data_offsets end");
  } catch (const std::runtime_error& error) {
    fail(fmt::format("{}: {}", tensor, error.what()));
  }
  if (begin > end)
    fail(fmt::format("{}: data_offsets [{}, {}] end before they begin", tensor, begin, end));
  if (end > data_size)
    fail(fmt::format("{}: data_offsets [{}, {}] are out of range of the {}-byte data buffer",
                     tensor, begin, end, data_size));
  uint64_t expected = 0;
  try {
    expected = byte_count(entry.shape, dtype_info->size, tensor);
  } catch (const std::runtime_error& error) {
    fail(error.what());
  }
  if (expected != end - begin)
    fail(fmt::format("{}: shape {} of {} needs {} bytes but data_offsets [{}, {}] span {}", tensor,
                     json::dump(shape), entry.dtype, expected, begin, end, end - begin));
  span.begin = begin;
  span.end = end;
  return entry;
}

// The spans must tile the buffer exactly: sorted, they start at 0, each begins where the
// previous one ends, and the last one ends at the end of the file.
void check_tiling(const std::vector<Span>& spans, const SafetensorsFile& file, uint64_t data_size,
                  const std::string& source_name) {
  const auto fail = [&](const std::string& what) { refuse(source_name, what); };
  std::vector<Span> sorted = spans;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const Span& span = sorted[i];
    const std::string& name = file.tensors[span.index].name;
    if (span.begin < covered) {
      const std::string& previous = file.tensors[sorted[i - 1].index].name;
      fail(fmt::format(
          "tensor \"{}\" data_offsets [{}, {}] overlap tensor \"{}\" (which ends at {})", name,
          span.begin, span.end, previous, covered));
    }
    if (span.begin > covered)
      fail(
          fmt::format("tensor \"{}\" data_offsets begin at {} but the data before it ends at {}: "
                      "bytes {}..{} are not covered",
                      name, span.begin, covered, covered, span.begin));
    covered = span.end;
  }
  if (covered != data_size)
    fail(fmt::format("trailing garbage: the tensors cover {} bytes of the {}-byte data buffer",
                     covered, data_size));
}
}  // namespace

SafetensorsFile parse_safetensors(std::string_view file_bytes, const std::string& source_name) {
  std::string_view data;
  const json::Value header = read_header(file_bytes, source_name, data);
  SafetensorsFile file;
  std::vector<Span> spans;
  for (const auto& [name, info] : header.as_object()) {
    if (name == "__metadata__") {
      read_metadata(info, source_name, file);
      continue;
    }
    Span span{0, 0, file.tensors.size()};
    file.tensors.push_back(read_tensor_info(name, info, data.size(), source_name, span));
    spans.push_back(span);
  }
  check_tiling(spans, file, data.size(), source_name);
  for (const Span& span : spans) {
    const std::string_view bytes = data.substr(span.begin, span.end - span.begin);
    file.tensors[span.index].bytes.assign(bytes.begin(), bytes.end());
  }
  return file;
}

SafetensorsFile load_safetensors(const std::string& path) {
  return parse_safetensors(read_file(path), path);
}

}  // namespace dg
