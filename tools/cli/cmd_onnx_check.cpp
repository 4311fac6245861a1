// `depthgrad onnx-check FILE`: what an ONNX model file holds, read with depthgrad's own codec
// (train/io/onnx/proto.h): the IR version, the operator sets, the producer, the graph's inputs and
// outputs (element type and shape, dynamic axes by name), how many nodes of each op type, the
// initializers and their parameter count, and the graph's wiring checked (nodes in order, every
// tensor made before it is read and only once, every output made). A file that does not decode,
// decodes to no model or is miswired is one line and exit 1. It checks the file's structure only:
// it neither runs the graph nor checks the nodes against the operator schemas (the onnx checker
// and ONNX Runtime do, in tests/onnx/).
//
//   depthgrad onnx-check model.onnx
#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "train/io/onnx/proto.h"

namespace dg::cli {
namespace {

const char* kOnnxCheckHelp =
    "usage: depthgrad onnx-check FILE\n\n"
    "Print what an ONNX model file holds: its IR version, operator sets and producer, the\n"
    "graph's inputs and outputs (element type and shape; a dynamic axis by its name, ? when it\n"
    "has none), the count of each op type, the initializers and their parameter count; checks\n"
    "the graph's wiring (nodes in order, every tensor made before it is read and only once,\n"
    "every output made). A file that is not a readable, well-wired ONNX model is one line on\n"
    "stderr and exit 1. The file's structure only: the graph is not run, nor its nodes checked\n"
    "against the operator schemas.\n\n"
    "flags:\n"
    "  --help                     show this help\n";

// "[batch, 4]": fixed dims as numbers, named dynamic ones by name, unknown ones as "?".
std::string shape_text(const onnx::ValueInfo& v) {
  if (!v.has_shape) return "(shape not given)";
  std::string out = "[";
  for (size_t i = 0; i < v.shape.size(); ++i) {
    const onnx::Dimension& d = v.shape[i];
    if (i) out += ", ";
    out += d.has_value ? std::to_string(d.value) : !d.param.empty() ? d.param : "?";
  }
  return out + "]";
}

std::string domain_name(const std::string& domain) { return domain.empty() ? "ai.onnx" : domain; }

void print_values(const char* title, const std::vector<const onnx::ValueInfo*>& values) {
  fmt::print("{} ({}):\n", title, values.size());
  size_t width = 4;
  for (const onnx::ValueInfo* v : values) width = std::max(width, v->name.size());
  for (const onnx::ValueInfo* v : values)
    fmt::print("  {:<{}}  {:<8}  {}\n", v->name, width, onnx::elem_type_name(v->elem_type),
               shape_text(*v));
}

// The elements of every initializer; throws OnnxError naming one with a negative dimension.
int64_t parameter_count(const onnx::GraphProto& graph, const std::string& path) {
  int64_t total = 0;
  for (const onnx::TensorProto& t : graph.initializer) {
    int64_t n = 1;
    for (int64_t d : t.dims) {
      if (d < 0)
        throw onnx::OnnxError(
            fmt::format("{}: initializer '{}' has a negative dimension {}", path, t.name, d));
      n = d == 0 || n <= (int64_t{1} << 62) / d ? n * d : int64_t{1} << 62;
    }
    total += n;
  }
  return total;
}

void print_ops(const onnx::GraphProto& graph) {
  std::map<std::string, int64_t> counts;  // sorted by op type
  for (const onnx::NodeProto& n : graph.node) {
    const std::string domain = n.domain == "ai.onnx" ? "" : n.domain;
    counts[domain.empty() ? n.op_type : domain + ":" + n.op_type] += 1;
  }
  fmt::print("ops ({} types, {} nodes):\n", counts.size(), graph.node.size());
  size_t width = 4;
  for (const auto& [op, count] : counts) width = std::max(width, op.size());
  for (const auto& [op, count] : counts) fmt::print("  {:<{}}  {}\n", op, width, count);
}

// The graph's wiring as ONNX requires it: nodes in topological order (every tensor a node reads is
// a graph input, an initializer or an earlier node's output), each tensor made once, every graph
// output made. Throws OnnxError naming the node and the tensor.
void check_wiring(const onnx::GraphProto& graph, const std::string& path) {
  std::map<std::string, std::string> made;  // tensor -> what makes it
  auto define = [&](const std::string& name, const std::string& by) {
    if (name.empty()) return;  // an optional output not asked for
    const auto [it, fresh] = made.emplace(name, by);
    if (!fresh)
      throw onnx::OnnxError(fmt::format("{}: tensor '{}' is made twice, by {} and by {}", path,
                                        name, it->second, by));
  };
  for (const onnx::TensorProto& t : graph.initializer) define(t.name, "an initializer");
  for (const onnx::ValueInfo& v : graph.input)
    if (!made.count(v.name)) define(v.name, "a graph input");  // an initializer may be listed too
  for (size_t i = 0; i < graph.node.size(); ++i) {
    const onnx::NodeProto& n = graph.node[i];
    const std::string who =
        fmt::format("node {} ({}{})", i, n.op_type, n.name.empty() ? "" : " '" + n.name + "'");
    for (const std::string& input : n.input)
      if (!input.empty() && !made.count(input))
        throw onnx::OnnxError(fmt::format(
            "{}: {} reads '{}', which no graph input, initializer or earlier node makes", path, who,
            input));
    for (const std::string& output : n.output) define(output, who);
  }
  for (const onnx::ValueInfo& v : graph.output)
    if (!made.count(v.name))
      throw onnx::OnnxError(fmt::format(
          "{}: graph output '{}' is made by no node, graph input or initializer", path, v.name));
}

void print_model(const onnx::ModelProto& model, const std::string& path) {
  const onnx::GraphProto& graph = model.graph;
  std::string opsets;
  for (const onnx::OpsetId& id : model.opset_import)
    opsets +=
        fmt::format("{}{} {}", opsets.empty() ? "" : ", ", domain_name(id.domain), id.version);
  const std::string producer =
      model.producer_name.empty()
          ? "(not given)"
          : model.producer_name +
                (model.producer_version.empty() ? "" : " " + model.producer_version);
  fmt::print("{}: ONNX IR version {}, opset {}\n", path, model.ir_version, model.default_opset());
  fmt::print("opsets: {}\nproducer: {}\ngraph: '{}'\n", opsets.empty() ? "(none)" : opsets,
             producer, graph.name);
  // Initializers listed among the inputs too (older exporters do) are not inputs to feed.
  std::set<std::string> initializer_names;
  for (const onnx::TensorProto& t : graph.initializer) initializer_names.insert(t.name);
  std::vector<const onnx::ValueInfo*> inputs, outputs;
  for (const onnx::ValueInfo& v : graph.input)
    if (!initializer_names.count(v.name)) inputs.push_back(&v);
  for (const onnx::ValueInfo& v : graph.output) outputs.push_back(&v);
  print_values("inputs", inputs);
  print_values("outputs", outputs);
  print_ops(graph);
  fmt::print("initializers: {} ({} parameters)\n", graph.initializer.size(),
             parameter_count(graph, path));
  fmt::print(
      "wiring: ok (nodes in order, every tensor read is made first, each once; every "
      "output made)\n");
}

}  // namespace

int cmd_onnx_check(int argc, char** argv, int start) {
  std::vector<std::string> files;
  for (int i = start; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      fmt::print("{}", kOnnxCheckHelp);
      return 0;
    }
    if (!std::strncmp(argv[i], "--", 2))
      throw UsageError(fmt::format("unknown flag {} (see depthgrad onnx-check --help)", argv[i]));
    files.push_back(argv[i]);
  }
  if (files.size() != 1)
    throw UsageError(files.empty() ? "give the ONNX file: depthgrad onnx-check FILE"
                                   : "one file at a time: depthgrad onnx-check FILE");
  const std::string& path = files.front();
  const onnx::ModelProto model = onnx::read_model(path);
  if (!model.has_graph)
    throw onnx::OnnxError(fmt::format(
        "{}: not an ONNX model: it has no graph (ModelProto field 7; an empty file or another "
        "format decodes to none)",
        path));
  if (model.ir_version <= 0)
    throw onnx::OnnxError(
        fmt::format("{}: not an ONNX model: ir_version (ModelProto field 1) is {}, not positive",
                    path, model.ir_version));
  check_wiring(model.graph, path);  // before any output: a broken file is one line
  parameter_count(model.graph, path);
  print_model(model, path);
  return 0;
}

}  // namespace dg::cli
