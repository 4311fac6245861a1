// ONNX import (see import.h): the graph checked at load (opset, domains, ops and attributes
// against import_ops.h's table, the order of definitions, initializers' data), the initializers
// registered as parameters and buffers under the file's names, and the run, node by node.
#include "train/io/onnx/import.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "train/io/onnx/import_ops.h"
#include "train/io/onnx/tensors.h"

namespace dg::onnx {

namespace {
constexpr int64_t kFirstOpset = 13, kLastOpset = 18;

std::string node_label(const NodeProto& node, size_t index) {
  return node.name.empty() ? fmt::format("#{}", index) : node.name;
}

const char* attribute_type_name(int32_t type) {
  static const char* names[] = {"undefined", "float", "int",     "string",  "tensor", "graph",
                                "floats",    "ints",  "strings", "tensors", "graphs"};
  return type >= 0 && type <= 10 ? names[type] : "unknown";
}
}  // namespace

// The graph as load checked it: value slots, the steps to run, the fixed values.
class OnnxGraph {
 public:
  struct Step {
    const NodeProto* node = nullptr;
    const OpSpec* spec = nullptr;
    std::vector<int> in, out;  // slots; -1 for an optional input or output not given
    std::string label;
    bool constant = false;  // a Constant node: its value was made at load
  };
  std::string source;
  int64_t opset = 0;
  ModelProto model;
  std::vector<ValueInfo> inputs;
  std::vector<std::string> input_names, output_names;
  std::map<std::string, int> slot_of;
  std::vector<Tensor> fixed;  // per slot: initializers and constants; undefined for the rest
  std::vector<Step> steps;
  std::vector<int> input_slots, output_slots;
  std::vector<std::string> initializer_names;   // in file order
  std::set<std::string> batch_norm_statistics;  // initializers read only as BN mean / var

  int new_slot(const std::string& name, const std::string& what) {
    if (name.empty()) fail(what + " has an empty name");
    if (slot_of.count(name))
      fail(fmt::format("value '{}' is defined twice (again by {})", name, what));
    slot_of[name] = static_cast<int>(fixed.size());
    fixed.emplace_back();
    return slot_of[name];
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw OnnxError(fmt::format("{}: {}", source, what));
  }

  void check_model();
  void read_initializers();
  void read_inputs();
  void read_nodes();
  void read_outputs();
  void find_batch_norm_statistics();

 private:
  void check_node(const NodeProto& node, const std::string& label, const OpSpec*& spec) const;
  void check_attributes(const NodeProto& node, const std::string& label, const OpSpec& spec) const;
};

void OnnxGraph::check_model() {
  opset = model.default_opset();
  if (opset == 0) fail("the model imports no default (ai.onnx) operator set");
  if (opset < kFirstOpset || opset > kLastOpset)
    fail(fmt::format("opset {} is not supported (depthgrad's importer reads opsets {} to {})",
                     opset, kFirstOpset, kLastOpset));
  if (!model.has_graph) fail("the model has no graph");
  if (model.graph.output.empty()) fail("the graph has no outputs");
}

void OnnxGraph::read_initializers() {
  for (const TensorProto& proto : model.graph.initializer) {
    const int slot = new_slot(proto.name, "an initializer");
    fixed[slot] = from_tensor_proto(proto, source);
    initializer_names.push_back(proto.name);
  }
}

void OnnxGraph::read_inputs() {
  for (const ValueInfo& input : model.graph.input) {
    if (slot_of.count(input.name) && fixed[slot_of[input.name]].defined())
      continue;  // an initializer also listed as an input (IR version 3 files)
    if (input.elem_type == 0)
      fail(fmt::format("input '{}' is not a tensor (no element type)", input.name));
    dtype_of(input.elem_type, fmt::format("{}: input '{}'", source, input.name));
    input_slots.push_back(new_slot(input.name, fmt::format("input '{}'", input.name)));
    inputs.push_back(input);
    input_names.push_back(input.name);
  }
}

void OnnxGraph::check_attributes(const NodeProto& node, const std::string& label,
                                 const OpSpec& spec) const {
  const std::map<std::string, int32_t> types = spec_attributes(spec);
  std::set<std::string> seen;
  for (const AttributeProto& a : node.attribute) {
    const std::string where =
        fmt::format("node '{}' ({}): attribute '{}'", label, node.op_type, a.name);
    if (a.has_graph || a.type == AttributeProto::g || a.type == AttributeProto::graphs)
      fail(where + " is a subgraph, which is not supported");
    const auto it = types.find(a.name);
    if (it == types.end()) fail(where + " is not supported by depthgrad's importer");
    if (a.type != it->second)
      fail(fmt::format("{} should be of type {}, is {}", where, attribute_type_name(it->second),
                       attribute_type_name(a.type)));
    if (a.type == AttributeProto::t && a.t_value.size() != 1)
      fail(where + " should hold one tensor");
    if (!seen.insert(a.name).second) fail(where + " is given twice");
  }
}

void OnnxGraph::check_node(const NodeProto& node, const std::string& label,
                           const OpSpec*& spec) const {
  const std::string where = fmt::format("node '{}' ({})", label, node.op_type);
  if (!node.domain.empty() && node.domain != "ai.onnx")
    fail(fmt::format("{} is in domain '{}'; depthgrad's importer runs the default domain only",
                     where, node.domain));
  if (node.op_type == "If" || node.op_type == "Loop" || node.op_type == "Scan")
    fail(where + " has subgraphs, which depthgrad's importer does not run");
  spec = find_op(node.op_type);
  if (!spec)
    fail(fmt::format("op '{}' of node '{}' is not supported by depthgrad's importer", node.op_type,
                     label));
  const auto inputs = static_cast<int>(node.input.size());
  if (inputs < spec->min_inputs || inputs > spec->max_inputs)
    fail(fmt::format("{} has {} inputs; it takes {} to {}", where, inputs, spec->min_inputs,
                     spec->max_inputs));
  const auto outputs = static_cast<int>(node.output.size());
  if (outputs < 1 || outputs > spec->max_outputs)
    fail(fmt::format("{} has {} outputs; it gives 1 to {}", where, outputs, spec->max_outputs));
  check_attributes(node, label, *spec);
}

void OnnxGraph::read_nodes() {
  std::map<std::string, size_t> defined_by;  // every node output -> its node, to name the order
  for (size_t k = 0; k < model.graph.node.size(); ++k)
    for (const std::string& name : model.graph.node[k].output)
      if (!name.empty() && !defined_by.count(name)) defined_by[name] = k;
  for (size_t k = 0; k < model.graph.node.size(); ++k) {
    const NodeProto& node = model.graph.node[k];
    Step step{&node, nullptr, {}, {}, node_label(node, k)};
    check_node(node, step.label, step.spec);
    for (const std::string& name : node.input) {
      if (name.empty()) {
        step.in.push_back(-1);
        continue;
      }
      const auto it = slot_of.find(name);
      if (it != slot_of.end()) {
        step.in.push_back(it->second);
        continue;
      }
      const auto later = defined_by.find(name);
      if (later != defined_by.end())
        fail(
            fmt::format("node '{}' ({}) reads '{}' before node '{}' defines it: the nodes are "
                        "not in topological order",
                        step.label, node.op_type, name,
                        node_label(model.graph.node[later->second], later->second)));
      fail(fmt::format("node '{}' ({}) reads '{}', which no input, initializer or node defines",
                       step.label, node.op_type, name));
    }
    for (const std::string& name : node.output)
      step.out.push_back(
          name.empty() ? -1
                       : new_slot(name, fmt::format("node '{}' ({})", step.label, node.op_type)));
    if (node.op_type == "Constant") {  // made now, so a bad value is refused at load
      step.constant = true;
      const NodeRun run(node, source, opset, {});
      try {
        const Tensor value = step.spec->run(run)[0];
        if (step.out[0] >= 0) fixed[static_cast<size_t>(step.out[0])] = value;
      } catch (const OnnxError&) {
        throw;
      } catch (const std::exception& e) {
        run.fail(e.what());
      }
    }
    steps.push_back(std::move(step));
  }
}

void OnnxGraph::read_outputs() {
  for (const ValueInfo& output : model.graph.output) {
    const auto it = slot_of.find(output.name);
    if (it == slot_of.end())
      fail(fmt::format("graph output '{}' is not defined by any node, input or initializer",
                       output.name));
    output_slots.push_back(it->second);
    output_names.push_back(output.name);
  }
}

void OnnxGraph::find_batch_norm_statistics() {
  std::set<std::string> other_uses;
  for (const NodeProto& node : model.graph.node)
    for (size_t i = 0; i < node.input.size(); ++i) {
      if (node.op_type == "BatchNormalization" && (i == 3 || i == 4))
        batch_norm_statistics.insert(node.input[i]);
      else
        other_uses.insert(node.input[i]);
    }
  for (const std::string& name : output_names) other_uses.insert(name);
  for (const std::string& name : other_uses) batch_norm_statistics.erase(name);
}

// ---- NodeRun ------------------------------------------------------------------------------

const Tensor& NodeRun::input(size_t i) const {
  if (!has(i)) fail(fmt::format("input {} is required but not given", i));
  return inputs_[i];
}

const AttributeProto* NodeRun::find(const std::string& name) const {
  for (const AttributeProto& a : node_.attribute)
    if (a.name == name) return &a;
  return nullptr;
}
bool NodeRun::has_attribute(const std::string& name) const { return find(name) != nullptr; }
int64_t NodeRun::i(const std::string& name, int64_t fallback) const {
  const AttributeProto* a = find(name);
  return a ? a->i_value : fallback;
}
double NodeRun::f(const std::string& name, double fallback) const {
  const AttributeProto* a = find(name);
  return a ? a->f_value : fallback;
}
std::string NodeRun::s(const std::string& name, const std::string& fallback) const {
  const AttributeProto* a = find(name);
  return a ? a->s_value : fallback;
}
std::vector<int64_t> NodeRun::ints(const std::string& name, std::vector<int64_t> fallback) const {
  const AttributeProto* a = find(name);
  return a ? a->ints_value : fallback;
}
std::vector<float> NodeRun::floats(const std::string& name) const {
  const AttributeProto* a = find(name);
  return a ? a->floats_value : std::vector<float>{};
}
std::vector<std::string> NodeRun::strings(const std::string& name) const {
  const AttributeProto* a = find(name);
  return a ? a->strings_value : std::vector<std::string>{};
}
const TensorProto* NodeRun::tensor(const std::string& name) const {
  const AttributeProto* a = find(name);
  return a && !a->t_value.empty() ? &a->t_value[0] : nullptr;
}

std::vector<int64_t> NodeRun::int_values(size_t i) const {
  const Tensor& t = input(i);
  if (t.dtype() != DType::i64 && t.dtype() != DType::i32)
    fail(fmt::format("input {} should be int64, is {}", i, t.describe()));
  const Tensor c = t.to(DType::i64).contiguous();
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

int64_t NodeRun::axis(int64_t axis, int64_t rank, const char* what) const {
  if (axis < -rank || axis >= rank)
    fail(fmt::format("{} {} is out of range for rank {}", what, axis, rank));
  return axis < 0 ? axis + rank : axis;
}

void NodeRun::fail(const std::string& what) const {
  throw OnnxError(fmt::format("{}: node '{}' ({}): {}", source_,
                              node_.name.empty() ? "(unnamed)" : node_.name, node_.op_type, what));
}

// ---- The module ---------------------------------------------------------------------------
namespace {

// A child module that only holds the parameters under one prefix of the dotted names.
class OnnxScope : public Module {
 public:
  std::string type_name() const override { return "OnnxScope"; }
};

std::vector<std::string> dotted_parts(const std::string& name) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (true) {
    const size_t dot = name.find('.', at);
    parts.push_back(name.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
    if (dot == std::string::npos) return parts;
    at = dot + 1;
  }
}

// Names that can be paths of the module tree: no empty part, and no name that is a prefix of
// another's path.
std::set<std::string> tree_names(const std::vector<std::string>& names) {
  std::set<std::string> prefixes;
  for (const std::string& name : names) {
    std::string prefix;
    const std::vector<std::string> parts = dotted_parts(name);
    for (size_t k = 0; k + 1 < parts.size(); ++k) {
      prefix += (k ? "." : "") + parts[k];
      prefixes.insert(prefix);
    }
  }
  std::set<std::string> out;
  for (const std::string& name : names) {
    bool ok = !prefixes.count(name);
    for (const std::string& part : dotted_parts(name)) ok = ok && !part.empty();
    if (ok) out.insert(name);
  }
  return out;
}

Module& child_for(Module& parent, const std::string& part) {
  for (auto& [name, child] : parent.named_children())
    if (name == part) return *child;
  return parent.register_module(part, std::make_unique<OnnxScope>());
}

}  // namespace

OnnxModel::OnnxModel(const ModelProto& model, const std::string& source)
    : graph_(std::make_unique<OnnxGraph>()) {
  OnnxGraph& g = *graph_;
  g.source = source;
  g.model = model;
  g.check_model();
  g.read_initializers();
  g.read_inputs();
  g.read_nodes();
  g.read_outputs();
  g.find_batch_norm_statistics();
  std::vector<std::string> floating;
  for (const std::string& name : g.initializer_names)
    if (is_floating(g.fixed[g.slot_of[name]].dtype())) floating.push_back(name);
  const std::set<std::string> as_paths = tree_names(floating);
  std::set<std::string> root_names;  // the root's entries: the paths' first parts, the others
  for (const std::string& name : as_paths) root_names.insert(dotted_parts(name)[0]);
  for (const std::string& name : floating) {
    Tensor& value = g.fixed[g.slot_of[name]];
    Module* owner = this;
    std::string leaf = name;
    try {
      if (as_paths.count(name)) {
        const std::vector<std::string> parts = dotted_parts(name);
        for (size_t k = 0; k + 1 < parts.size(); ++k) owner = &child_for(*owner, parts[k]);
        leaf = parts.back();
      } else {
        std::replace(leaf.begin(), leaf.end(), '.', '_');
        while (!root_names.insert(leaf).second) leaf += '_';
      }
      value = g.batch_norm_statistics.count(name) ? owner->register_buffer(leaf, value)
                                                  : owner->register_parameter(leaf, value);
    } catch (const std::invalid_argument& e) {
      g.fail(
          fmt::format("initializer '{}' cannot be registered as '{}': {}", name, leaf, e.what()));
    }
  }
}

OnnxModel::~OnnxModel() = default;

const std::vector<std::string>& OnnxModel::input_names() const { return graph_->input_names; }
const std::vector<std::string>& OnnxModel::output_names() const { return graph_->output_names; }
const std::string& OnnxModel::source() const { return graph_->source; }
int64_t OnnxModel::opset() const { return graph_->opset; }

namespace {

void check_input(const OnnxGraph& g, const ValueInfo& info, const Tensor& x) {
  const std::string what = fmt::format("{}: input '{}'", g.source, info.name);
  if (!x.defined()) throw OnnxError(what + " is an undefined tensor");
  const DType want = dtype_of(info.elem_type, what);
  if (x.dtype() != want)
    throw OnnxError(fmt::format("{} should be {}, got {}", what, dtype_name(want), x.describe()));
  if (!info.has_shape) return;
  if (x.dim() != static_cast<int64_t>(info.shape.size()))
    throw OnnxError(
        fmt::format("{} should have {} dims, got {}", what, info.shape.size(), x.describe()));
  for (size_t d = 0; d < info.shape.size(); ++d)
    if (info.shape[d].has_value && info.shape[d].value != x.size(static_cast<int64_t>(d)))
      throw OnnxError(fmt::format("{} dim {} should be {}, got {}", what, d, info.shape[d].value,
                                  x.describe()));
}

std::vector<Tensor> run_step(const OnnxGraph& g, const OnnxGraph::Step& step,
                             const std::vector<Tensor>& values) {
  std::vector<Tensor> in;
  for (int slot : step.in) in.push_back(slot < 0 ? Tensor() : values[static_cast<size_t>(slot)]);
  const NodeRun node(*step.node, g.source, g.opset, std::move(in));
  std::vector<Tensor> out;
  try {
    out = step.spec->run(node);
  } catch (const OnnxError&) {
    throw;
  } catch (const std::exception& e) {
    node.fail(e.what());
  }
  for (size_t k = 0; k < step.out.size(); ++k)
    if (step.out[k] >= 0 && (k >= out.size() || !out[k].defined()))
      node.fail(fmt::format("output {} is not produced by depthgrad's importer", k));
  return out;
}

}  // namespace

std::vector<Tensor> OnnxModel::run(const std::vector<Tensor>& inputs) const {
  const OnnxGraph& g = *graph_;
  if (inputs.size() != g.inputs.size())
    throw OnnxError(fmt::format("{}: the graph takes {} inputs, got {}", g.source, g.inputs.size(),
                                inputs.size()));
  std::vector<Tensor> values = g.fixed;
  for (size_t k = 0; k < inputs.size(); ++k) {
    check_input(g, g.inputs[k], inputs[k]);
    values[static_cast<size_t>(g.input_slots[k])] = inputs[k];
  }
  for (const OnnxGraph::Step& step : g.steps) {
    if (step.constant) continue;
    std::vector<Tensor> out = run_step(g, step, values);
    for (size_t k = 0; k < step.out.size(); ++k)
      if (step.out[k] >= 0) values[static_cast<size_t>(step.out[k])] = std::move(out[k]);
  }
  std::vector<Tensor> outputs;
  for (int slot : g.output_slots) outputs.push_back(values[static_cast<size_t>(slot)]);
  return outputs;
}

Tensor OnnxModel::forward(const Tensor& x) const {
  const OnnxGraph& g = *graph_;
  if (g.inputs.size() != 1 || g.output_slots.size() != 1)
    throw OnnxError(
        fmt::format("{}: the graph has {} inputs and {} outputs; forward(x) takes "
                    "one and gives one, call run(inputs)",
                    g.source, g.inputs.size(), g.output_slots.size()));
  return hooked([&](const Tensor& input) { return run({input})[0]; }, x);
}

std::unique_ptr<OnnxModel> load_bytes(std::string_view bytes, const std::string& source) {
  return std::make_unique<OnnxModel>(decode_model(bytes, source), source);
}

std::unique_ptr<OnnxModel> load(const std::string& path) {
  return std::make_unique<OnnxModel>(read_model(path), path);
}

}  // namespace dg::onnx
