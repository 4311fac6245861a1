// ONNX import: an .onnx file (opset 13 to 18) as a depthgrad Module that runs the graph with
// depthgrad's ops (autograd/ops.h), so it infers, and fine-tunes: every op is recorded on the tape
// and the weights are the module's parameters, which the Trainer, the optimisers and checkpoints
// use as any model's.
//
//   auto model = dg::onnx::load("mlp.onnx");            // throws OnnxError, one line, when refused
//   dg::Tensor y = (*model)(x);                          // one input, one output
//   std::vector<dg::Tensor> ys = model->run({a, b});     // several inputs or outputs
//   for (auto& [name, p] : model->named_parameters()) ...  // "fc1.weight", as in the file
//
// Names: every floating-point initializer is registered under its name in the file. Since a
// Module entry's name may not contain '.', a dotted name builds a tree of child modules
// ("enc.layers.0.norm1.weight" is parameter "weight" of child "norm1" of child "0" ...), so
// named_parameters(), state_dict() and checkpoints give exactly the file's names. A name that
// cannot be such a path (an empty part, or a part that is both a tensor and a prefix of another)
// is registered on the root with its '.' written '_' (and '_' appended while that name is taken:
// "fc" beside "fc.weight" becomes "fc_"). Initializers that only BatchNormalization
// reads as its running mean and variance are buffers (torch's running statistics: saved, never
// trained); integer initializers (shape constants) are plain tensors, neither.
//
// What runs: nodes in file order (ONNX requires a topological order: a node reading a value that
// a later node defines is refused), the default domain only, the ops of import_ops.h's table with
// the attributes listed there (an attribute outside the list is refused, not ignored). Shape
// arithmetic (Shape, Gather, Concat of int64...) runs on int64 tensors without recording. The
// model is the same in train and eval mode: Dropout is the identity and BatchNormalization uses
// the running statistics (an ONNX graph is an inference graph). What is refused, with one line
// naming the file (and the node, value or input): other opsets, unsupported ops, subgraphs
// (If, Loop, Scan), other domains, a value read before it is defined or defined twice, a graph
// without outputs, an initializer whose data does not match its dims, external data, element
// types depthgrad lacks (float16, bfloat16, int8, strings).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nn/module.h"
#include "train/io/onnx/proto.h"

namespace dg::onnx {

class OnnxGraph;  // the checked graph and its value slots (import.cpp)

class OnnxModel : public Module {
 public:
  OnnxModel(const ModelProto& model, const std::string& source);
  ~OnnxModel() override;

  // The graph's one input to its one output (refuses a graph with more, naming run()).
  Tensor forward(const Tensor& x) const override;
  // Inputs in the graph's input order (initializers listed as inputs excluded), each checked
  // against its declared element type and static dims (a dim_param accepts any size); the
  // outputs in the graph's output order.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;

  const std::vector<std::string>& input_names() const;
  const std::vector<std::string>& output_names() const;
  const std::string& source() const;
  int64_t opset() const;
  std::string type_name() const override { return "OnnxModel"; }

 private:
  std::unique_ptr<OnnxGraph> graph_;
};

// The model in the file at `path`.
std::unique_ptr<OnnxModel> load(const std::string& path);
// The model in `bytes`; `source` names them in errors ("model.onnx").
std::unique_ptr<OnnxModel> load_bytes(std::string_view bytes, const std::string& source);

}  // namespace dg::onnx
