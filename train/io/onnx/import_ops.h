// The operators the ONNX importer runs (import.h): one table row per op, its input and output
// counts, its attributes with their types, and the function that runs it with depthgrad's ops.
// The rows live with their families: import_ops.cpp (elementwise, reductions, shapes),
// import_ops_nn.cpp (matmul, convolution, pooling, normalisation, recurrent). Not for users:
// import.cpp checks every node against its row at load and calls the row's run.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "train/io/onnx/proto.h"

namespace dg::onnx {

// One node being run: its inputs (undefined for an optional input not given), its attributes,
// and errors that name the file, the node and its op.
class NodeRun {
 public:
  NodeRun(const NodeProto& node, const std::string& source, int64_t opset,
          std::vector<Tensor> inputs)
      : node_(node), source_(source), opset_(opset), inputs_(std::move(inputs)) {}

  int64_t opset() const { return opset_; }
  size_t input_count() const { return inputs_.size(); }
  bool has(size_t i) const { return i < inputs_.size() && inputs_[i].defined(); }
  const Tensor& input(size_t i) const;  // refuses a missing one, naming it
  const std::vector<Tensor>& inputs() const { return inputs_; }
  size_t output_count() const { return node_.output.size(); }

  // Attributes (their types were checked at load); the default when absent.
  bool has_attribute(const std::string& name) const;
  int64_t i(const std::string& name, int64_t fallback) const;
  double f(const std::string& name, double fallback) const;
  std::string s(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> ints(const std::string& name, std::vector<int64_t> fallback = {}) const;
  std::vector<float> floats(const std::string& name) const;
  std::vector<std::string> strings(const std::string& name) const;
  const TensorProto* tensor(const std::string& name) const;

  // An int64 (or int32) input's values (axes, shapes, pads), refusing any other dtype.
  std::vector<int64_t> int_values(size_t i) const;
  // An axis in [-rank, rank) made non-negative, refused otherwise.
  int64_t axis(int64_t axis, int64_t rank, const char* what = "axis") const;

  [[noreturn]] void fail(const std::string& what) const;
  const std::string& source() const { return source_; }

 private:
  const AttributeProto* find(const std::string& name) const;
  const NodeProto& node_;
  const std::string& source_;
  int64_t opset_;
  std::vector<Tensor> inputs_;
};

using OpFunction = std::vector<Tensor> (*)(const NodeRun& node);

struct OpSpec {
  const char* op_type;
  int min_inputs, max_inputs;  // counting optional inputs given as ""
  int max_outputs;
  // Attributes accepted, "name:type" separated by spaces; type f, i, s, t, floats, ints,
  // strings.
  const char* attributes;
  OpFunction run;
};

// A row's attributes, name -> AttributeProto type; throws std::logic_error naming the op for a
// type the table misspells (tests/test_onnx_ops.cpp reads every row).
std::map<std::string, int32_t> spec_attributes(const OpSpec& spec);

// The rows of each family, and the one lookup (nullptr for an op without a row).
const std::vector<OpSpec>& elementwise_ops();
const std::vector<OpSpec>& shape_ops();
const std::vector<OpSpec>& nn_ops();
const OpSpec* find_op(const std::string& op_type);

}  // namespace dg::onnx
