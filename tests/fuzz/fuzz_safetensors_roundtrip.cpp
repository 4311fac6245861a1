// Fuzz target: safetensors write -> read. The input chooses up to 8 tensors (name, dtype, a
// shape of up to 3 small dimensions, bytes) and metadata; whatever serialize_safetensors
// accepts must read back identical, with each tensor's data aligned to its element size. It
// does not check the byte layout against the reference writer (tests/test_safetensors.cpp does).
#include <cstdint>

#include "tests/fuzz/fuzz_common.h"
#include "train/io/json.h"
#include "train/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dg;
  static const char* const kDtypes[] = {"BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "F8_E8M0",
                                        "I16",  "U16", "F16", "BF16",    "I32",     "U32",
                                        "F32",  "F64", "I64", "U64"};
  fuzz::Bytes in(data, size);
  std::vector<TensorEntry> tensors(in.in_range(0, 8));
  for (TensorEntry& tensor : tensors) {
    tensor.name = in.string(12);
    tensor.dtype = kDtypes[in.u8() % std::size(kDtypes)];
    tensor.shape.resize(in.in_range(0, 3));
    size_t count = 1;
    for (int64_t& dim : tensor.shape) {
      dim = in.in_range(0, 5);
      count *= static_cast<size_t>(dim);
    }
    tensor.bytes.resize(count * safetensors_dtype_size(tensor.dtype));
    for (uint8_t& byte : tensor.bytes) byte = in.u8();
  }
  std::map<std::string, std::string> metadata;
  for (uint32_t i = in.in_range(0, 3); i > 0; --i) metadata[in.string(8)] = in.string(8);

  std::string written;
  try {
    written = serialize_safetensors(tensors, metadata);
  } catch (const std::runtime_error&) {
    return 0;  // duplicate, reserved or non-UTF-8 names: refused by the writer, as documented
  }
  const SafetensorsFile back = parse_safetensors(written, "roundtrip.safetensors");
  fuzz::check(back.metadata == metadata, "metadata changed on the round-trip");
  fuzz::check(back.tensors.size() == tensors.size(), "tensor count changed on the round-trip");
  for (const TensorEntry& tensor : tensors) {
    const TensorEntry* other = back.find(tensor.name);
    fuzz::check(other && other->dtype == tensor.dtype && other->shape == tensor.shape &&
                    other->bytes == tensor.bytes,
                "tensor changed on the round-trip: " + tensor.name);
  }
  // Alignment: every tensor's data starts at a multiple of its element size (8 + header is a
  // multiple of 8, so offsets within the data buffer suffice).
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i)
    header_length = (header_length << 8) | static_cast<unsigned char>(written[i]);
  fuzz::check(header_length % 8 == 0, "header length is not a multiple of 8");
  const json::Value header =
      json::parse(std::string_view(written).substr(8, header_length), "roundtrip header");
  for (const auto& [name, info] : header.as_object()) {
    if (name == "__metadata__") continue;
    const int64_t begin = info.at("data_offsets").at(size_t{0}).as_int();
    const size_t element = safetensors_dtype_size(info.at("dtype").as_string());
    fuzz::check(begin % static_cast<int64_t>(element) == 0, "tensor not aligned: " + name);
  }
  return 0;
}
