// Export to ONNX: a module (or any forward written with depthgrad's ops) traced on example inputs
// and written as an ONNX model, its weights as initializers named as in named_parameters() and
// named_buffers(). torch.onnx.export's role:
//
//   dg::onnx::ExportOptions options;
//   options.input_names = {"images"};
//   options.output_names = {"logits"};
//   options.dynamic_axes = {{"images", {{0, "batch"}}}, {"logits", {{0, "batch"}}}};
//   dg::onnx::export_model(model, {example_images}, "cnn.onnx", options);
//
// The forward runs once on the examples in eval mode (as torch's default), under an op trace
// (autograd/op_trace.h); every op on the path from the inputs and weights to the outputs becomes
// ONNX nodes (train/io/onnx/export_ops*.cpp hold each op's mapping). Tensors the forward made
// without an op (a table of positions built from a vector) become constants. An op with no
// mapping is refused, naming the op and the module it ran in. Dynamic axes: the named dims of
// the inputs and outputs stay free in the file; the shapes the graph computes from them (a
// reshape that keeps the batch, a flatten of batch and sequence) are written relative to the
// input (ONNX's 0 and -1 in Reshape), so that another batch size runs. Give example inputs whose
// dynamic sizes differ from every fixed size of the model (a batch of 3, not of the hidden width):
// a reshape's target is matched to the input's dims by size.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nn/module.h"
#include "train/io/onnx/proto.h"

namespace dg::onnx {

struct ExportOptions {
  int64_t opset = 17;                     // 13 to 18
  std::vector<std::string> input_names;   // default "input" (one) or "input_0", "input_1", ...
  std::vector<std::string> output_names;  // default "output" (one) or "output_0", ...
  // torch's dynamic_axes: value name -> {axis -> dim name}.
  std::map<std::string, std::map<int64_t, std::string>> dynamic_axes;
  std::string producer_name = "depthgrad";
};

// A forward of several inputs and outputs (a module's forward with other arguments, a function).
using ExportForward = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

// Traces module(example_inputs[0]) (one input) and writes the model to `path` (atomically).
void export_model(Module& module, const std::vector<Tensor>& example_inputs,
                  const std::string& path, const ExportOptions& options = {});
// Traces forward(example_inputs); `module` names the weights (and is put in eval mode for the
// trace, then back).
void export_model(Module& module, const ExportForward& forward,
                  const std::vector<Tensor>& example_inputs, const std::string& path,
                  const ExportOptions& options = {});
// The model export_model writes, without writing it.
ModelProto export_to_proto(Module& module, const ExportForward& forward,
                           const std::vector<Tensor>& example_inputs,
                           const ExportOptions& options = {});

}  // namespace dg::onnx
