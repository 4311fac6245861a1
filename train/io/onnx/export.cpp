// The exporter's driver (see export.h): trace the forward, keep the ops on the path to the
// outputs, map each to ONNX nodes (export_ops*.cpp), name the graph's inputs, outputs and weights.
#include "train/io/onnx/export.h"

#include <fmt/format.h>

#include <unordered_map>

#include "autograd/ops.h"
#include "train/io/onnx/export_graph.h"
#include "train/io/onnx/tensors.h"

namespace dg::onnx {

namespace {

std::vector<std::string> value_names(const std::vector<std::string>& given, size_t count,
                                     const char* stem, const char* what) {
  if (!given.empty() && given.size() != count)
    throw std::invalid_argument(
        fmt::format("onnx export: {} {} names given for {} {}s", given.size(), what, count, what));
  if (!given.empty()) return given;
  if (count == 1) return {stem};
  std::vector<std::string> names;
  for (size_t k = 0; k < count; ++k) names.push_back(fmt::format("{}_{}", stem, k));
  return names;
}

// The mapping of each traced op, from the families' tables.
const std::unordered_map<std::string, OpExporter>& exporters() {
  static const auto table = [] {
    std::unordered_map<std::string, OpExporter> t;
    for (const auto& family : {basic_op_exporters(), sequence_op_exporters()})
      for (const OpExporterEntry& e : family) t[e.op] = e.exporter;
    return t;
  }();
  return table;
}

// The ops the outputs depend on, in trace order: for each tensor, the last op that made it.
std::vector<const TracedOp*> ops_on_path(const std::vector<TracedOp>& ops,
                                         const std::vector<Tensor>& outputs,
                                         const ExportGraph& graph) {
  std::unordered_map<const TensorImpl*, size_t> producer;
  for (size_t i = 0; i < ops.size(); ++i)
    for (const Tensor& out : ops[i].outputs)
      if (out.defined()) producer[out.impl()] = i;
  std::vector<bool> needed(ops.size(), false);
  std::vector<Tensor> stack(outputs.begin(), outputs.end());
  while (!stack.empty()) {
    const Tensor t = stack.back();
    stack.pop_back();
    if (!t.defined() || graph.bound(t)) continue;
    const auto it = producer.find(t.impl());
    if (it == producer.end() || needed[it->second]) continue;
    needed[it->second] = true;
    for (const Tensor& in : ops[it->second].inputs) stack.push_back(in);
  }
  std::vector<const TracedOp*> path;
  for (size_t i = 0; i < ops.size(); ++i)
    if (needed[i]) path.push_back(&ops[i]);
  return path;
}

// Dims an op's mapping left unset: broadcasting's rule, from the right, over the op's inputs.
void broadcast_dims(ExportGraph& graph, const TracedOp& op) {
  for (const Tensor& out : op.outputs) {
    if (!out.defined() || graph.has_dims(out)) continue;
    std::vector<std::string> dims(static_cast<size_t>(out.dim()));
    for (const Tensor& in : op.inputs) {
      if (!in.defined() || !graph.any_dynamic(in)) continue;
      const std::vector<std::string> in_dims = graph.dims(in);
      for (int64_t k = 1; k <= std::min(out.dim(), in.dim()); ++k)
        if (dims[size_t(out.dim() - k)].empty() && in.size(-k) == out.size(-k))
          dims[size_t(out.dim() - k)] = in_dims[size_t(in.dim() - k)];
    }
    graph.set_dims(out, std::move(dims));
  }
}

ValueInfo value_info(const std::string& name, const Tensor& t,
                     const std::vector<std::string>& dims) {
  ValueInfo v;
  v.name = name;
  v.elem_type = elem_type_of(t.dtype());
  v.has_shape = true;
  for (int64_t k = 0; k < t.dim(); ++k) {
    Dimension d;
    if (dims[size_t(k)].empty()) {
      d.has_value = true;
      d.value = t.size(k);
    } else {
      d.param = dims[size_t(k)];
    }
    v.shape.push_back(d);
  }
  return v;
}

// Renames value `from` to `to` in every node (the graph's outputs carry the caller's names).
void rename_value(std::vector<NodeProto>& nodes, const std::string& from, const std::string& to) {
  for (NodeProto& n : nodes) {
    for (std::string& s : n.input)
      if (s == from) s = to;
    for (std::string& s : n.output)
      if (s == from) s = to;
  }
}

// The example inputs as the trace's inputs: the same values, floating ones requiring grad so that
// every recorded op on them shows (an op recorded but not traced has no mapping: refused).
std::vector<Tensor> traced_inputs(const std::vector<Tensor>& examples) {
  std::vector<Tensor> inputs;
  for (size_t k = 0; k < examples.size(); ++k) {
    if (!examples[k].defined())
      throw std::invalid_argument(fmt::format("onnx export: example input {} is undefined", k));
    Tensor t = detach(examples[k]);
    if (is_floating(t.dtype())) t.set_requires_grad(true);
    inputs.push_back(t);
  }
  return inputs;
}

// Puts `module` in eval mode for the trace and back afterwards.
class EvalScope {
 public:
  explicit EvalScope(Module& m) : module_(m), was_training_(m.is_training()) { m.eval(); }
  ~EvalScope() { module_.train(was_training_); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

void name_inputs(ExportGraph& graph, const std::vector<Tensor>& inputs,
                 const std::vector<std::string>& names, const ExportOptions& options) {
  for (size_t k = 0; k < inputs.size(); ++k) {
    graph.bind(inputs[k], names[k]);
    std::vector<std::string> dims(static_cast<size_t>(inputs[k].dim()));
    const auto axes = options.dynamic_axes.find(names[k]);
    if (axes != options.dynamic_axes.end())
      for (const auto& [axis, dim_name] : axes->second) {
        if (axis < 0 || axis >= inputs[k].dim())
          throw std::invalid_argument(fmt::format(
              "onnx export: dynamic_axes names axis {} of input '{}', which has {} dims", axis,
              names[k], inputs[k].dim()));
        dims[size_t(axis)] = dim_name;
      }
    graph.set_dims(inputs[k], dims);
  }
}

void map_ops(ExportGraph& graph, const std::vector<const TracedOp*>& path) {
  for (const TracedOp* op : path) {
    const auto it = exporters().find(op->op);
    if (it == exporters().end())
      throw OnnxError(fmt::format("onnx export: op '{}'{} has no ONNX mapping", op->op,
                                  op->module_path.empty()
                                      ? std::string()
                                      : fmt::format(" in module '{}'", op->module_path)));
    graph.set_current(op);
    it->second(graph, *op);
    broadcast_dims(graph, *op);
  }
  graph.set_current(nullptr);
}

GraphProto name_outputs(ExportGraph& graph, const std::vector<Tensor>& inputs,
                        const std::vector<std::string>& in_names,
                        const std::vector<Tensor>& outputs, const ExportOptions& options) {
  GraphProto g;
  g.name = "depthgrad";
  for (size_t k = 0; k < inputs.size(); ++k)
    g.input.push_back(value_info(in_names[k], inputs[k], graph.dims(inputs[k])));
  const std::vector<std::string> out_names =
      value_names(options.output_names, outputs.size(), "output", "output");
  for (size_t k = 0; k < outputs.size(); ++k) {
    const std::string made = graph.value(outputs[k]);
    bool made_by_node = false;
    for (const NodeProto& n : graph.nodes())
      for (const std::string& o : n.output) made_by_node |= o == made;
    if (made_by_node)
      rename_value(graph.nodes(), made, out_names[k]);
    else
      graph.node("Identity", {made}, {out_names[k]});
    std::vector<std::string> dims = graph.dims(outputs[k]);
    const auto axes = options.dynamic_axes.find(out_names[k]);
    if (axes != options.dynamic_axes.end())
      for (const auto& [axis, dim_name] : axes->second)
        if (axis >= 0 && axis < outputs[k].dim()) dims[size_t(axis)] = dim_name;
    g.output.push_back(value_info(out_names[k], outputs[k], dims));
  }
  g.node = std::move(graph.nodes());
  g.initializer = std::move(graph.initializers());
  return g;
}

}  // namespace

ModelProto export_to_proto(Module& module, const ExportForward& forward,
                           const std::vector<Tensor>& example_inputs,
                           const ExportOptions& options) {
  if (options.opset < 13 || options.opset > 18)
    throw std::invalid_argument(
        fmt::format("onnx export: opset {} is not supported (13 to 18)", options.opset));
  const std::vector<std::string> in_names =
      value_names(options.input_names, example_inputs.size(), "input", "input");
  const std::vector<Tensor> inputs = traced_inputs(example_inputs);
  std::vector<Tensor> outputs;
  std::vector<TracedOp> ops, recorded;
  {
    // The trace ends before the mappings run: ops they call (a table's reshape) are not traced.
    OpTrace trace;
    EvalScope eval(module);
    outputs = forward(inputs);
    ops = trace.ops();
    recorded = trace.recorded();
  }
  ExportGraph graph(options.opset);
  graph.set_recorded(std::move(recorded));
  name_inputs(graph, inputs, in_names, options);
  for (const auto& [name, t] : module.named_parameters()) graph.declare_weight(t, name);
  for (const auto& [name, t] : module.named_buffers()) graph.declare_weight(t, name);
  map_ops(graph, ops_on_path(ops, outputs, graph));
  ModelProto model;
  model.ir_version = 8;
  model.producer_name = options.producer_name;
  model.opset_import = {OpsetId{"", options.opset}};
  model.has_graph = true;
  model.graph = name_outputs(graph, inputs, in_names, outputs, options);
  return model;
}

void export_model(Module& module, const ExportForward& forward,
                  const std::vector<Tensor>& example_inputs, const std::string& path,
                  const ExportOptions& options) {
  write_model(export_to_proto(module, forward, example_inputs, options), path);
}

void export_model(Module& module, const std::vector<Tensor>& example_inputs,
                  const std::string& path, const ExportOptions& options) {
  if (example_inputs.size() != 1)
    throw std::invalid_argument(fmt::format(
        "onnx export: module(x) takes one input, {} were given (pass a forward for several)",
        example_inputs.size()));
  export_model(
      module,
      [&module](const std::vector<Tensor>& in) { return std::vector<Tensor>{module(in[0])}; },
      example_inputs, path, options);
}

}  // namespace dg::onnx
