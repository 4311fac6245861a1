// IDX files (the MNIST family's format), raw or gzip-compressed: read into a tensor.
// An IDX file is a 4-byte magic (0, 0, element type, rank), `rank` big-endian uint32 sizes, then
// the elements in row-major order, big-endian. A gzip file (magic 1f 8b) is inflated with zlib
// first, so the files a Debian package or a download ships (.gz) are read as they are.
// Refuses: element types other than unsigned byte (0x08) and int32 (0x0C) (the only two the
// MNIST-family data sets use), a truncated or over-long file, a size product over 2^40 elements,
// and a corrupt gzip stream; each error names the file and what is wrong. Does not write IDX.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace dg {

// An IDX file's contents as bytes: its sizes, element type and the decompressed file (header
// included) for hashing.
struct IdxFile {
  std::vector<int64_t> shape;
  uint8_t element_type = 0;  // 0x08 unsigned byte, 0x0C int32
  std::string bytes;         // the whole decompressed file
  int64_t header_bytes = 0;  // where the elements start in `bytes`
};

// Inflates `compressed` (a gzip stream) in memory; throws naming `what` when it is corrupt or
// truncated. Bytes that are not gzip (no 1f 8b magic) are returned as they are.
std::string gunzip_if_compressed(std::string compressed, const std::string& what);

// Reads and parses the file at `path` (raw or gzip). Throws std::runtime_error naming the path.
IdxFile read_idx_file(const std::string& path);
// Parses IDX bytes already in memory; `what` names them in errors.
IdxFile parse_idx(std::string bytes, const std::string& what);

// The elements as a tensor of the file's shape: unsigned bytes as int64 (labels) or scaled to
// float32 in [0, 1] by /255 (images) as torchvision's ToTensor does; int32 elements as int64.
Tensor idx_to_int64(const IdxFile& file);
Tensor idx_bytes_to_unit_float(const IdxFile& file);

}  // namespace dg
