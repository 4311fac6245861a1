// Reader and writer of GGUF version 3, llama.cpp's model file: the magic "GGUF", the version, the
// tensor and metadata counts, typed metadata key-value pairs, tensor infos (name, dimensions in
// GGUF's order, ggml type, offset), padding to the alignment (general.alignment, default 32),
// then the tensor data, each tensor at an aligned offset. Little-endian only; whole files in
// memory, no memory mapping. Tensor types: F32, F16, BF16 (with float32 conversions that round
// to nearest even), Q8_0 (ggml's blocks of 32 int8 values and one F16 scale, quantized exactly as
// ggml's quantize_row_q8_0_ref), and the plain integer and F64 types; other quantized ggml types
// are refused by number, not guessed at. It knows nothing of models: train/lm/export_gguf.h maps
// a MicroLM onto it.
//
//   GgufTensor w = gguf_float_tensor("blk.0.ffn_up.weight", {96, 64}, values, GgmlType::q8_0);
//   std::vector<float> back = gguf_tensor_floats(w);  // dequantized: |back - values| <= d / 2
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dg {

// The metadata value types (gguf_metadata_value_type), with the specification's numbers.
enum class GgufType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
const char* gguf_type_name(GgufType type);  // "u32", "string", "array", ...

// One metadata value. Which field holds it depends on `type`: unsigned integers and bool in
// `uint`, signed integers in `sint`, f32 and f64 in `real`, a string in `text`, an array's
// elements (all of `element_type`; arrays may nest) in `elements`. Build one with the factories.
struct GgufValue {
  GgufType type = GgufType::u32;
  uint64_t uint = 0;
  int64_t sint = 0;
  double real = 0;
  std::string text;
  GgufType element_type = GgufType::u8;
  std::vector<GgufValue> elements;

  static GgufValue u8(uint8_t v);
  static GgufValue i8(int8_t v);
  static GgufValue u16(uint16_t v);
  static GgufValue i16(int16_t v);
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue u64(uint64_t v);
  static GgufValue i64(int64_t v);
  static GgufValue f64(double v);
  static GgufValue array(GgufType element_type, std::vector<GgufValue> elements);
  static GgufValue strings(const std::vector<std::string>& values);
  static GgufValue i32s(const std::vector<int32_t>& values);
  static GgufValue f32s(const std::vector<float>& values);
  bool operator==(const GgufValue&) const = default;
};

// The tensor types this code reads and writes (ggml_type numbers). Others are refused by number.
enum class GgmlType : uint32_t {
  f32 = 0,
  f16 = 1,
  q8_0 = 8,
  i8 = 24,
  i16 = 25,
  i32 = 26,
  i64 = 27,
  f64 = 28,
  bf16 = 30,
};
const char* ggml_type_name(GgmlType type);  // "F32", "F16", "BF16", "Q8_0", ...
// ggml's block: the values stored together (32 for Q8_0, 1 for the others) and their bytes (34
// for Q8_0: an F16 scale and 32 int8; the element size for the others). A tensor's dims[0] (its
// row) must be a whole number of blocks.
size_t ggml_block_size(GgmlType type);
size_t ggml_type_size(GgmlType type);  // bytes per block

// Q8_0 as ggml's quantize_row_q8_0_ref writes it, block by block of 32 values: amax = the largest
// |x| (float32), d = amax / 127 (float32 division), id = 1 / d (0 when d is 0), each q =
// roundf(x · id) (half away from zero) as int8, and the block's scale stored as F16(d) (round to
// nearest even). gguf-py's numpy quantizer divides x / d instead of multiplying by id, which can
// differ in the last bit; this follows ggml (llama-quantize), as its reference for "exact".
// Throws std::invalid_argument when the count is not a multiple of 32 or a value is not finite
// (ggml would store a NaN or infinite scale). Dequantizing gives q · float(F16(d)).
std::vector<uint8_t> quantize_q8_0(const float* values, size_t count);
std::vector<float> dequantize_q8_0(const uint8_t* bytes, size_t count);

struct GgufTensor {
  std::string name;  // at most 63 bytes (llama.cpp's GGML_MAX_NAME leaves one for the NUL)
  // GGUF's order: dims[0] varies fastest, so a torch [rows, cols] matrix is {cols, rows}. 1 to 4.
  std::vector<uint64_t> dims;
  GgmlType type = GgmlType::f32;
  // little-endian, prod(dims) / ggml_block_size(type) · ggml_type_size(type) bytes
  std::vector<uint8_t> bytes;
  uint64_t offset = 0;  // read: offset in the data section; the writer lays out its own
  bool operator==(const GgufTensor&) const = default;
};

struct GgufFile {
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in file order, keys unique
  std::vector<GgufTensor> tensors;                          // in file order, names unique
  // Set by the reader: general.alignment or 32, and where the data section starts in the file.
  uint64_t alignment = 32;
  uint64_t data_offset = 0;
  // The value of `key`, or nullptr.
  const GgufValue* find(std::string_view key) const;
  // The tensor called `name`, or nullptr.
  const GgufTensor* find_tensor(std::string_view name) const;
};

// float32 to IEEE half (F16) and bfloat16 (BF16), rounding to nearest with ties to even;
// overflow gives ±inf, NaN stays NaN (quiet, sign kept), subnormals are kept (F16 rounds into its
// own subnormals). The inverse conversions are exact.
uint16_t float_to_f16(float value);
float f16_to_float(uint16_t bits);
uint16_t float_to_bf16(float value);
float bf16_to_float(uint16_t bits);

// A tensor of float values in torch's shape (row-major, last dimension fastest) stored as `type`
// (F32, F16, BF16 or Q8_0): the dims come out reversed, as GGUF orders them. Throws naming the
// tensor on another type, when values.size() is not the shape's element count, and for Q8_0
// when the last dimension is not a multiple of 32 or a value is not finite.
GgufTensor gguf_float_tensor(std::string name, const std::vector<int64_t>& torch_shape,
                             const std::vector<float>& values, GgmlType type);
// The values of an F32, F16, BF16 or Q8_0 (dequantized) tensor as float32 (row-major); throws
// naming it otherwise.
std::vector<float> gguf_tensor_floats(const GgufTensor& tensor);

// The whole file as bytes: header, metadata in the given order, tensor infos, zero padding to the
// alignment (general.alignment when the metadata has it, else 32), then each tensor's bytes at
// the next aligned offset, zero-padded to the alignment after each. Throws std::runtime_error
// naming the key or tensor for: an empty, non-ASCII or duplicate key (or one over 65535 bytes), a
// general.alignment that is not a u32 power of two of at least 8, an integer out of its type's
// range, a bool other than 0/1, an array element of another type, a string that is not UTF-8, a
// tensor name that is empty, duplicate or 64 bytes or longer, no dims or more than 4, a byte
// count that does not match the dims, an unknown tensor type, a dims[0] that is not a whole
// number of the type's blocks (Q8_0: 32).
std::string serialize_gguf(const GgufFile& file);

// serialize_gguf(file) written to `path` atomically (write_file_atomic). Errors name the path.
void save_gguf(const std::string& path, const GgufFile& file);

// Parses and validates a whole GGUF file held in memory against the specification; every error
// starts with `source_name` (the path) and names the field: the magic, version 3, tensor and
// metadata counts the file can hold, string lengths inside the file, keys (non-empty ASCII, at
// most 65535 bytes, unique), known value types and array element types, bools 0 or 1, strings
// UTF-8, general.alignment (u32, a power of two, a multiple of 8), tensor names (non-empty,
// under 64 bytes, unique), 1 to 4 dims whose element count fits int64, known tensor types
// (dims[0] a whole number of the type's blocks),
// offsets multiples of the alignment and inside the data section, tensors that do not overlap,
// zero padding before the data section, and a file that ends within one alignment of the last
// tensor's bytes.
GgufFile parse_gguf(std::string_view file_bytes, const std::string& source_name);

// read_file + parse_gguf.
GgufFile load_gguf(const std::string& path);

}  // namespace dg
