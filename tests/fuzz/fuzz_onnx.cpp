// Fuzz target: the ONNX importer (train/io/onnx/import.h) on arbitrary bytes: decode, the graph's
// checks, the initializers registered as parameters. It may refuse only with an exception that
// names the source (OnnxError, a std::runtime_error; nothing else escapes load_bytes by design);
// a model it accepts must list as many parameters and buffers as the file has floating-point
// initializers. Running the graph is not fuzzed here: a valid graph may ask for any amount of
// memory (ConstantOfShape of a large shape), which is the model's right.
#include <cstdint>

#include "tests/fuzz/fuzz_common.h"
#include "train/io/onnx/import.h"
#include "train/io/onnx/tensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dg;
  const std::string source = "fuzz.onnx";
  std::unique_ptr<onnx::OnnxModel> model;
  if (!fuzz::accepted(source, [&] { model = onnx::load_bytes(fuzz::as_text(data, size), source); }))
    return 0;
  const onnx::ModelProto file = onnx::decode_model(fuzz::as_text(data, size), source);
  size_t floating = 0;
  for (const onnx::TensorProto& t : file.graph.initializer)
    floating += is_floating(onnx::dtype_of(t.data_type, source)) ? 1 : 0;
  fuzz::check(model->named_parameters().size() + model->named_buffers().size() == floating,
              "an accepted model does not register every floating-point initializer");
  return 0;
}
