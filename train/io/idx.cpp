// IDX parsing and gzip inflation (zlib). See idx.h.
#include "train/io/idx.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cstring>
#include <stdexcept>

#include "train/io/files.h"

namespace dg {

namespace {
// The big-endian 32-bit word at p: IDX writes its sizes and its int32 elements this way.
uint32_t read_big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
}  // namespace

std::string gunzip_if_compressed(std::string compressed, const std::string& what) {
  const bool gzip = compressed.size() >= 2 && static_cast<uint8_t>(compressed[0]) == 0x1f &&
                    static_cast<uint8_t>(compressed[1]) == 0x8b;
  if (!gzip) return compressed;
  z_stream stream{};
  // 16 + MAX_WBITS: a gzip header and trailer (with its CRC checked), not a raw zlib stream.
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK)
    throw std::runtime_error(fmt::format("{}: zlib could not start inflating", what));
  std::string out;
  out.resize(compressed.size() * 4 + 4096);
  stream.next_in = reinterpret_cast<Bytef*>(compressed.data());
  stream.avail_in = static_cast<uInt>(compressed.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (stream.total_out == out.size()) out.resize(out.size() * 2);
    stream.next_out = reinterpret_cast<Bytef*>(out.data() + stream.total_out);
    stream.avail_out = static_cast<uInt>(out.size() - stream.total_out);
    rc = inflate(&stream, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK || (stream.avail_in == 0 && stream.avail_out != 0)) {
      const std::string detail = stream.msg ? stream.msg : "the stream ends before its trailer";
      inflateEnd(&stream);
      throw std::runtime_error(
          fmt::format("{}: corrupt or truncated gzip data ({})", what, detail));
    }
  }
  out.resize(stream.total_out);
  inflateEnd(&stream);
  return out;
}

IdxFile parse_idx(std::string bytes, const std::string& what) {
  IdxFile file;
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0)
    throw std::runtime_error(
        fmt::format("{}: not an IDX file (the first two bytes must be zero)", what));
  file.element_type = static_cast<uint8_t>(bytes[2]);
  const int rank = static_cast<uint8_t>(bytes[3]);
  if (file.element_type != 0x08 && file.element_type != 0x0C)
    throw std::runtime_error(fmt::format(
        "{}: IDX element type 0x{:02X} is not supported (only 0x08 unsigned byte, 0x0C int32)",
        what, file.element_type));
  if (rank < 1 || bytes.size() < 4 + 4 * static_cast<size_t>(rank))
    throw std::runtime_error(fmt::format("{}: IDX header of rank {} is truncated", what, rank));
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    const int64_t size =
        read_big_endian_u32(reinterpret_cast<const uint8_t*>(bytes.data() + 4 + 4 * d));
    file.shape.push_back(size);
    count *= size;
    if (count > (int64_t{1} << 40))
      throw std::runtime_error(fmt::format("{}: IDX sizes multiply past 2^40 elements", what));
  }
  file.header_bytes = 4 + 4 * rank;
  const int64_t element = file.element_type == 0x08 ? 1 : 4;
  const int64_t expected = file.header_bytes + count * element;
  if (static_cast<int64_t>(bytes.size()) != expected)
    throw std::runtime_error(fmt::format("{}: IDX file has {} bytes; its header ({}) says {}", what,
                                         bytes.size(), fmt::join(file.shape, " x "), expected));
  file.bytes = std::move(bytes);
  return file;
}

IdxFile read_idx_file(const std::string& path) {
  return parse_idx(gunzip_if_compressed(read_file(path), path), path);
}

Tensor idx_to_int64(const IdxFile& file) {
  Tensor out = Tensor::empty(file.shape, DType::i64);
  int64_t* dst = out.data<int64_t>();
  const auto* src = reinterpret_cast<const uint8_t*>(file.bytes.data() + file.header_bytes);
  const int64_t n = out.numel();
  if (file.element_type == 0x08) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<int32_t>(read_big_endian_u32(src + 4 * i));
  }
  return out;
}

Tensor idx_bytes_to_unit_float(const IdxFile& file) {
  if (file.element_type != 0x08)
    throw std::invalid_argument("idx_bytes_to_unit_float: the file's elements are not bytes");
  Tensor out = Tensor::empty(file.shape, DType::f32);
  float* dst = out.data<float>();
  const auto* src = reinterpret_cast<const uint8_t*>(file.bytes.data() + file.header_bytes);
  for (int64_t i = 0; i < out.numel(); ++i) dst[i] = static_cast<float>(src[i]) / 255.0f;
  return out;
}

}  // namespace dg
