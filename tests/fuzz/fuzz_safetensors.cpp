// Fuzz target: the safetensors reader (train/io/safetensors.h) on arbitrary bytes. A file it
// accepts must serialize back (serialize_safetensors) into a file that reads to the same
// tensors and metadata; a file it refuses must give an error naming the file. Loading into a
// model is fuzz_checkpoint's job.
#include <cstdint>

#include "tests/fuzz/fuzz_common.h"
#include "train/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dg;
  const std::string source = "fuzz.safetensors";
  SafetensorsFile file;
  if (!fuzz::accepted(source, [&] { file = parse_safetensors(fuzz::as_text(data, size), source); }))
    return 0;
  std::string written;
  try {
    written = serialize_safetensors(file.tensors, file.metadata);
  } catch (const std::exception& e) {
    fuzz::fail(std::string("a file the reader accepted cannot be written back: ") + e.what());
  }
  const SafetensorsFile back = parse_safetensors(written, "rewritten.safetensors");
  fuzz::check(back.metadata == file.metadata, "metadata changed on rewrite");
  fuzz::check(back.tensors.size() == file.tensors.size(), "tensor count changed on rewrite");
  for (const TensorEntry& tensor : file.tensors) {
    const TensorEntry* other = back.find(tensor.name);
    fuzz::check(other != nullptr, "tensor lost on rewrite: " + tensor.name);
    fuzz::check(other->dtype == tensor.dtype && other->shape == tensor.shape &&
                    other->bytes == tensor.bytes,
                "tensor changed on rewrite: " + tensor.name);
  }
  return 0;
}
