// The op trace (autograd/op_trace.h) and the ONNX exporter's graph (train/io/onnx/export.h):
// what a trace holds; the nodes, initializers and named dims an export writes; dynamic axes kept
// through reshapes and integer positions; the opset's forms; the refusals. That the exported
// models compute depthgrad's outputs is checked by ONNX Runtime itself (the onnx_runtime ctest
// entry, tests/onnx/).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "autograd/op_trace.h"
#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/vision_layers.h"
#include "tensor/factory.h"
#include "tensor/rng.h"
#include "train/io/onnx/export.h"

using namespace dg;
using namespace dg::onnx;

namespace {

std::vector<std::string> op_types(const ModelProto& m) {
  std::vector<std::string> types;
  for (const NodeProto& n : m.graph.node) types.push_back(n.op_type);
  return types;
}
std::vector<std::string> initializer_names(const ModelProto& m) {
  std::vector<std::string> names;
  for (const TensorProto& t : m.graph.initializer) names.push_back(t.name);
  return names;
}
const NodeProto& first_node(const ModelProto& m, const std::string& type) {
  for (const NodeProto& n : m.graph.node)
    if (n.op_type == type) return n;
  FAIL("no node of type " << type);
  throw std::logic_error("unreachable");
}
ModelProto export_module(Module& m, const Tensor& x, const ExportOptions& o = {}) {
  return export_to_proto(
      m, [&m](const std::vector<Tensor>& in) { return std::vector<Tensor>{m(in[0])}; }, {x}, o);
}
std::unique_ptr<Sequential> small_mlp() {
  auto mlp = std::make_unique<Sequential>();
  mlp->emplace<Linear>(4, 8);
  mlp->add(relu);
  mlp->emplace<Linear>(8, 3);
  return mlp;
}

// A module whose child runs an op that has no ONNX mapping (masked_select: recorded, not traced).
struct Flipper : Module {
  Tensor forward(const Tensor& x) const override {
    return hooked(
        [](const Tensor& x) {
          return reshape(masked_select(x, gt(x, -100.0)), {-1, 4});
        },
        x);
  }
};
struct WithFlip : Module {
  WithFlip()
      : inner(register_module("inner", std::make_unique<Flipper>())),
        proj(register_module("proj", std::make_unique<Linear>(4, 2))) {}
  Tensor forward(const Tensor& x) const override { return proj(inner(x)); }
  Flipper& inner;
  Linear& proj;
};

}  // namespace

TEST_CASE("op trace: each op appends its name, tensor arguments, outputs and settings") {
  const Tensor a = randn({2, 3}), b = randn({2, 3});
  std::vector<TracedOp> ops;
  {
    OpTrace trace;
    CHECK_THROWS_WITH_AS(OpTrace(), doctest::Contains("already tracing"), std::logic_error);
    const Tensor y = softmax(add(a, b), -1);
    ops = trace.ops();
    CHECK(ops.back().outputs[0].same(y));
  }
  REQUIRE(ops.size() == 2);
  CHECK(ops[0].op == "add");
  CHECK(ops[0].inputs[0].same(a));
  CHECK(ops[0].inputs[1].same(b));
  CHECK(ops[1].op == "softmax");
  CHECK(ops[1].attribute("axis").integer == 1);  // normalised
  CHECK_THROWS_WITH_AS(ops[1].attribute("dim"), doctest::Contains("has no attribute 'dim'"),
                       std::out_of_range);
  CHECK_FALSE(tracing());
  const Tensor z = add(a, b);  // no trace: nothing kept
  CHECK(z.defined());
}

TEST_CASE("onnx export: an MLP becomes Gemm nodes with the parameters as named initializers") {
  manual_seed(3);
  auto mlp = small_mlp();
  ExportOptions o;
  o.dynamic_axes = {{"input", {{0, "batch"}}}, {"output", {{0, "batch"}}}};
  const ModelProto m = export_module(*mlp, randn({5, 4}), o);
  CHECK(op_types(m) == std::vector<std::string>{"Gemm", "Relu", "Gemm"});
  CHECK(initializer_names(m) ==
        std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(m.default_opset() == 17);
  CHECK(m.ir_version == 8);
  REQUIRE(m.graph.input.size() == 1);
  CHECK(m.graph.input[0].name == "input");
  CHECK(m.graph.input[0].shape[0].param == "batch");
  CHECK(m.graph.input[0].shape[1].value == 4);
  REQUIRE(m.graph.output.size() == 1);
  CHECK(m.graph.output[0].name == "output");
  CHECK(m.graph.output[0].shape[0].param == "batch");
  CHECK(m.graph.node.back().output[0] == "output");
  // the same model and inputs give the same bytes
  CHECK(encode_model(m) == encode_model(export_module(*mlp, randn({5, 4}), o)));
  CHECK(mlp->is_training());  // traced in eval mode, left as it was
}

TEST_CASE("onnx export: a flatten keeps the dynamic batch (Reshape to 0, -1 or the fixed size)") {
  dg::Flatten flatten;
  ExportOptions o;
  o.dynamic_axes = {{"input", {{0, "batch"}}}};
  const ModelProto m = export_module(flatten, randn({3, 2, 5}), o);
  const NodeProto& reshape = first_node(m, "Reshape");
  const TensorProto* target = nullptr;
  for (const TensorProto& t : m.graph.initializer)
    if (t.name == reshape.input[1]) target = &t;
  REQUIRE(target != nullptr);
  std::vector<int64_t> values(2);
  REQUIRE(target->raw_data.size() == 16);
  std::memcpy(values.data(), target->raw_data.data(), 16);
  CHECK(values == std::vector<int64_t>{0, 10});
  CHECK(m.graph.output[0].shape[0].param == "batch");

  // batch and sequence merged into one dim: -1
  ExportOptions both;
  both.dynamic_axes = {{"input", {{0, "batch"}, {1, "sequence"}}}};
  const ModelProto merged = export_to_proto(
      flatten,
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{dg::reshape(in[0], {-1, 5})};
      },
      {randn({3, 2, 5})}, both);
  CHECK(merged.graph.output[0].shape[0].param == "batch*sequence");
}

TEST_CASE("onnx export: integer positions over a dynamic sequence become a Range of its length") {
  Embedding positions(16, 4);
  ExportOptions o;
  o.dynamic_axes = {{"input", {{1, "sequence"}}}};
  const ModelProto m = export_to_proto(
      positions,
      [&](const std::vector<Tensor>& in) {
        const int64_t T = in[0].size(1);
        std::vector<int64_t> ids(static_cast<size_t>(T));
        for (int64_t t = 0; t < T; ++t) ids[size_t(t)] = t;
        return std::vector<Tensor>{add(in[0], positions(Tensor::from_ids(ids, {T})))};
      },
      {randn({2, 5, 4})}, o);
  const std::vector<std::string> types = op_types(m);
  CHECK(std::count(types.begin(), types.end(), "Range") == 1);
  CHECK(std::count(types.begin(), types.end(), "Shape") == 1);
  CHECK(m.graph.output[0].shape[1].param == "sequence");
}

TEST_CASE("onnx export: the opset decides ReduceMean's axes (attribute to 17, input from 18)") {
  dg::Flatten unused;
  auto mean_of = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{mean(in[0], {1}, true)};
  };
  for (int64_t opset : {13, 17, 18}) {
    CAPTURE(opset);
    ExportOptions o;
    o.opset = opset;
    const ModelProto m = export_to_proto(unused, mean_of, {randn({2, 3})}, o);
    const NodeProto& reduce = first_node(m, "ReduceMean");
    CHECK(reduce.input.size() == (opset >= 18 ? 2u : 1u));
    CHECK(m.default_opset() == opset);
  }
}

TEST_CASE("onnx export: refusals name what is wrong") {
  WithFlip model;
  CHECK_THROWS_WITH_AS(
      export_module(model, randn({2, 4})),
      doctest::Contains("op 'masked_select' in module 'inner' has no ONNX mapping"), OnnxError);
  auto mlp = small_mlp();
  ExportOptions o;
  o.opset = 12;
  CHECK_THROWS_WITH_AS(export_module(*mlp, randn({2, 4}), o),
                       doctest::Contains("opset 12 is not supported (13 to 18)"),
                       std::invalid_argument);
  ExportOptions axes;
  axes.dynamic_axes = {{"input", {{2, "batch"}}}};
  CHECK_THROWS_WITH_AS(export_module(*mlp, randn({2, 4}), axes),
                       doctest::Contains("axis 2 of input 'input', which has 2 dims"),
                       std::invalid_argument);
  ExportOptions names;
  names.input_names = {"a", "b"};
  CHECK_THROWS_WITH_AS(export_module(*mlp, randn({2, 4}), names),
                       doctest::Contains("2 input names given for 1 inputs"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(export_model(*mlp, {randn({2, 4}), randn({2, 4})}, "unused.onnx"),
                       doctest::Contains("takes one input, 2 were given"), std::invalid_argument);
}
