// What an op's ONNX mapping sees while the exporter builds the graph (not public: the files
// train/io/onnx/export*.cpp share it). A mapping is a function of (ExportGraph&, const TracedOp&)
// that adds the ONNX nodes computing the op's outputs from its inputs:
//
//   void export_relu(ExportGraph& g, const TracedOp& op) {
//     g.node("Relu", {g.value(op.inputs[0])}, {g.output(op.outputs[0])});
//   }
//
// value(t) is the ONNX name of a tensor the op reads (a graph input, a weight, an earlier op's
// output, or a constant made now from its values); output(t) names an output the op makes.
// Dims: each value carries, per dim, the name of the dynamic axis it follows ("batch") or ""
// (fixed). After a mapping, each output without dims set gets broadcasting's rule from the op's
// inputs (an elementwise op keeps its inputs' dynamic dims); a mapping that moves dims (transpose,
// reshape, matmul) sets them with set_dims.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/op_trace.h"
#include "nn/module.h"
#include "train/io/onnx/proto.h"

namespace dg::onnx {

AttributeProto attr(const std::string& name, int64_t value);
AttributeProto attr(const std::string& name, double value);
AttributeProto attr(const std::string& name, std::vector<int64_t> values);
AttributeProto attr(const std::string& name, std::vector<float> values);
AttributeProto attr(const std::string& name, const std::string& value);
AttributeProto attr(const std::string& name, const TensorProto& value);

class ExportGraph {
 public:
  explicit ExportGraph(int64_t opset) : opset_(opset) {}
  int64_t opset() const { return opset_; }

  // ---- names of values -----------------------------------------------------------------------
  // The value holding t (see above). Throws when t is undefined.
  std::string value(const Tensor& t);
  // Names t as made by the op being exported (the next node's output); returns the name.
  std::string output(const Tensor& t);
  // A fresh name for an intermediate value ("hint_7").
  std::string fresh(const std::string& hint);
  // Constants (initializers): int64 values (1-D, or a scalar when `scalar`), a number of a dtype.
  std::string constant_ints(const std::vector<int64_t>& values, bool scalar = false);
  std::string constant_scalar(double value, DType dtype);
  std::string constant(const Tensor& t, const std::string& hint);

  // ---- nodes ---------------------------------------------------------------------------------
  // Appends a node; returns outputs[0]. Its name is the module path and op type.
  std::string node(const std::string& op_type, std::vector<std::string> inputs,
                   std::vector<std::string> outputs, std::vector<AttributeProto> attributes = {});
  // A node with one fresh output named after the op type; returns that output.
  std::string op(const std::string& op_type, std::vector<std::string> inputs,
                 std::vector<AttributeProto> attributes = {});

  // ---- dynamic dims --------------------------------------------------------------------------
  std::vector<std::string> dims(const Tensor& t) const;  // "" per fixed dim
  void set_dims(const Tensor& t, std::vector<std::string> dims);
  bool has_dims(const Tensor& t) const;
  bool any_dynamic(const Tensor& t) const;
  // A reshape's target shape for ONNX's Reshape: dims kept from `input` at the same index where
  // the input's is dynamic become 0 (copy), one dim made of dynamic ones becomes -1; the output's
  // dims are set. Throws when two target dims would need -1.
  std::vector<int64_t> reshape_target(const Tensor& input, const Tensor& output);

  // ---- what the driver reads -----------------------------------------------------------------
  std::vector<NodeProto>& nodes() { return nodes_; }
  std::vector<TensorProto>& initializers() { return initializers_; }
  // Names a tensor before the walk: a graph input (bind), a weight (an initializer of that name,
  // written when an op first reads it).
  void bind(const Tensor& t, const std::string& name) {
    names_[t.impl()] = name;
    inputs_.push_back(t);
  }
  void declare_weight(const Tensor& t, const std::string& name) {
    weights_.emplace(t.impl(), NamedTensor{name, t});
  }
  bool bound(const Tensor& t) const { return names_.count(t.impl()) != 0; }
  // The ops the tape recorded during the trace (OpTrace::recorded): a tensor one of them made
  // that no traced op made is refused naming that op and its module.
  void set_recorded(std::vector<TracedOp> recorded);
  // The module path of the op being exported (node names); set by the driver.
  void set_current(const TracedOp* op) { current_ = op; }

 private:
  int64_t opset_;
  std::unordered_map<const TensorImpl*, std::string> names_;
  std::unordered_map<const TensorImpl*, std::vector<std::string>> dims_;
  std::unordered_map<const TensorImpl*, NamedTensor> weights_;
  std::vector<Tensor> inputs_;  // the graph's inputs, in order
  std::vector<TracedOp> recorded_;
  std::unordered_map<const TensorImpl*, const TracedOp*> recorded_by_;
  // Every tensor named or given dims here, held: the maps are keyed by TensorImpl*, which a
  // tensor freed while the graph is built could pass on to a new one.
  std::vector<Tensor> held_;
  std::string positions_of(const Tensor& t);
  std::unordered_map<std::string, int> used_;
  std::vector<NodeProto> nodes_;
  std::vector<TensorProto> initializers_;
  const TracedOp* current_ = nullptr;
};

// Rotate-half RoPE (autograd/ops.h's rope) on the ONNX value x, positions along axis
// `position_axis` (counted from the end: -2 for [.., T, hd], -3 for [.., T, heads, hd]) and the
// head size hd last: pairs (i, i + hd/2) turned by (position + offset)·base^(-2i/hd). The cos/sin
// tables are constants of the traced length T, cut to the input's length when `dynamic_length`.
// Returns the rotated value. (export_ops_sequence.cpp; the rope, linear_rope and attention
// mappings share it.)
std::string rope_nodes(ExportGraph& g, const std::string& x, int64_t T, int64_t hd, DType dtype,
                       bool dynamic_length, double base, int64_t offset,
                       int64_t position_axis = -2);

// An op's mapping, and the table the driver looks ops up in (each export_ops*.cpp file adds its
// family's entries).
using OpExporter = void (*)(ExportGraph& graph, const TracedOp& op);
struct OpExporterEntry {
  const char* op;
  OpExporter exporter;
};
std::vector<OpExporterEntry> basic_op_exporters();     // export_ops.cpp
std::vector<OpExporterEntry> sequence_op_exporters();  // export_ops_sequence.cpp

}  // namespace dg::onnx
