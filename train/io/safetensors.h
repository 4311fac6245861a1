// Reader and writer of the safetensors format: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then
// the tensor bytes. Tensor bytes are copied as they are (little-endian, C order); no dtype
// conversion, no memory mapping, and no sub-byte dtypes (F4, F6_*).
//
// Files we write match the reference (Rust) writer byte for byte: compact JSON with
// "__metadata__" first (only when there is metadata; keys sorted, where the Rust writer's order
// of several keys is unspecified), then one entry per
// tensor with keys in the order dtype, shape, data_offsets; the header padded with spaces to a
// multiple of 8 bytes; tensors ordered by descending dtype rank (U64, I64, F64, F32, U32, I32,
// BF16, F16, U16, I16, F8_E8M0, F8_E4M3, F8_E5M2, I8, U8, BOOL), then by name, so that every
// tensor starts at an offset aligned to its element size.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dg {

struct TensorEntry {
  std::string name;
  std::string dtype;  // "F32", "F64", "I64", "I32", "U8", "BF16", "F16", "BOOL", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // little-endian, row-major; size = prod(shape) * dtype size
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<TensorEntry> tensors;  // in the order the header lists them
  // The tensor called `name`, or nullptr.
  const TensorEntry* find(std::string_view name) const;
};

// Bytes per element of a safetensors dtype name; throws std::runtime_error for names it does
// not know (the message lists the supported ones).
size_t safetensors_dtype_size(std::string_view dtype);

// The whole file as bytes, in the layout described above. Throws std::runtime_error naming the
// tensor for an unknown dtype, a negative dimension, a byte count that does not match the
// shape, a duplicate or reserved ("__metadata__") name, or a name that is not UTF-8.
std::string serialize_safetensors(const std::vector<TensorEntry>& tensors,
                                  const std::map<std::string, std::string>& metadata);

// Writes serialize_safetensors(...) to `path` atomically (write_file_atomic). Errors name the path.
void save_safetensors(const std::string& path, const std::vector<TensorEntry>& tensors,
                      const std::map<std::string, std::string>& metadata);

// Parses and validates a whole safetensors file held in memory; `source_name` (the path) starts
// every error message. Refuses: fewer than 8 bytes, a header length beyond the file or above
// 100 MB, header JSON that is invalid or not an object, an unknown dtype, unknown or missing
// fields, shapes or offsets that are not non-negative integers, a byte span that does not equal
// prod(shape) * dtype size, offsets outside the data, overlapping or with gaps, and bytes after
// the last tensor.
SafetensorsFile parse_safetensors(std::string_view file_bytes, const std::string& source_name);

// read_file + parse_safetensors.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace dg
