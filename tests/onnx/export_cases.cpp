// export_cases: writes the ONNX test cases that the real clients run (tests/onnx/onnx_runtime.sh:
// ONNX Runtime under node, then the onnx checker) into a folder: each case's model, its inputs
// and the outputs depthgrad's ops compute for them (tests/onnx/onnx_cases.h has the format).
// The models here are assembled by hand with the codec (train/io/onnx/proto.h); they check the
// chain (files, names, every dtype, a dynamic batch axis) rather than an exporter.
//
//   export_cases OUT_DIR                 mlp, gather_compare and dtypes, each at two batch sizes
//   export_cases OUT_DIR --plant-error   the same, with one expected value of mlp off by 1e-3
//                                        relative (100 times the tolerance) and a model the checker
//                                        must refuse (broken_graph): the clients' teeth
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "tests/onnx/exported_examples.h"
#include "tests/onnx/onnx_cases.h"
#include "tests/onnx/sequence_cases.h"
#include "train/io/files.h"
#include "train/io/onnx/proto.h"
#include "train/io/onnx/tensors.h"

namespace {

using dg::Tensor;
using dg::onnx::AttributeProto;
using dg::onnx::ElemType;
using dg::onnx::ModelProto;
using dg::onnx::NodeProto;
using dg::onnx::ValueInfo;
using dg::onnx_cases::NamedTensors;
using dg::onnx_cases::OnnxCaseRun;

constexpr double kTolerance = 1e-5;  // float32, relative (onnx_cases.h states the rule)

// A graph input or output: dims > 0 are fixed, -1 is the named dynamic axis "batch".
ValueInfo value_info(const std::string& name, ElemType type, const std::vector<int64_t>& dims) {
  ValueInfo v;
  v.name = name;
  v.elem_type = static_cast<int32_t>(type);
  v.has_shape = true;
  for (int64_t d : dims) {
    dg::onnx::Dimension dim;
    if (d < 0) {
      dim.param = "batch";
    } else {
      dim.has_value = true;
      dim.value = d;
    }
    v.shape.push_back(dim);
  }
  return v;
}

NodeProto node(const std::string& op, std::vector<std::string> inputs,
               std::vector<std::string> outputs, std::vector<AttributeProto> attributes = {}) {
  NodeProto n;
  n.name = op + "_" + outputs.front();
  n.op_type = op;
  n.input = std::move(inputs);
  n.output = std::move(outputs);
  n.attribute = std::move(attributes);
  return n;
}

AttributeProto int_attribute(const std::string& name, int64_t value) {
  AttributeProto a;
  a.name = name;
  a.type = AttributeProto::i;
  a.i_value = value;
  return a;
}

ModelProto empty_model(const std::string& graph_name) {
  ModelProto model;
  model.ir_version = 8;
  model.opset_import = {{.domain = "", .version = 17}};
  model.producer_name = "depthgrad-tests";
  model.producer_version = "1";
  model.has_graph = true;
  model.graph.name = graph_name;
  return model;
}

// Deterministic values in about [-1, 1], different for each tensor through `seed`.
Tensor wave(const dg::Shape& shape, double seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = std::sin(seed + 0.7 * static_cast<double>(i));
  return Tensor::from_vector(values, shape, dg::DType::f32);
}

// Moves the first value b of the first output by 1e-3 * max(1, |b|): a wrong expectation, 100
// times the tolerance.
void plant_error(NamedTensors& outputs) {
  Tensor& t = outputs.front().value;
  t = t.clone();
  float* first = t.mutable_data<float>();
  first[0] += 1e-3f * std::max(1.0f, std::fabs(first[0]));
}

// x [batch, 4] -> Gemm (transB, as torch exports Linear) -> Relu -> MatMul -> Add -> y [batch, 3].
void write_mlp_case(const std::string& dir, bool planted) {
  const Tensor w1 = wave({8, 4}, 0.1), b1 = wave({8}, 1.2);
  const Tensor w2t = wave({8, 3}, 2.3), b2 = wave({3}, 3.4);
  ModelProto model = empty_model("mlp");
  auto& g = model.graph;
  for (auto [name, t] : {std::pair{"w1", w1}, {"b1", b1}, {"w2t", w2t}, {"b2", b2}})
    g.initializer.push_back(dg::onnx::to_tensor_proto(name, t));
  g.input = {value_info("x", ElemType::float32, {-1, 4})};
  g.output = {value_info("y", ElemType::float32, {-1, 3})};
  g.node = {node("Gemm", {"x", "w1", "b1"}, {"h"}, {int_attribute("transB", 1)}),
            node("Relu", {"h"}, {"r"}), node("MatMul", {"r", "w2t"}, {"m"}),
            node("Add", {"m", "b2"}, {"y"})};
  dg::onnx::write_model(model, dir + "/mlp.onnx");
  auto run = [&](int64_t batch, double seed) {
    const Tensor x = wave({batch, 4}, seed);
    const Tensor y = dg::add(dg::matmul(dg::relu(dg::linear(x, w1, b1)), w2t), b2);
    return OnnxCaseRun{.inputs = {{"x", x}}, .outputs = {{"y", y}}};
  };
  OnnxCaseRun traced = run(2, 5.0), other = run(5, 6.0);
  if (planted) plant_error(traced.outputs);
  dg::onnx_cases::write_onnx_case(dir, "mlp", "mlp.onnx", traced.inputs, traced.outputs, kTolerance,
                                  other);
}

// ids int64 [batch, 3] -> Gather (an embedding) -> emb float32 [batch, 3, 2]; emb > 0 -> mask
// bool [batch, 3, 2].
void write_gather_compare_case(const std::string& dir) {
  const Tensor table = wave({10, 2}, 0.3);
  ModelProto model = empty_model("gather_compare");
  auto& g = model.graph;
  g.initializer = {dg::onnx::to_tensor_proto("table", table),
                   dg::onnx::to_tensor_proto("zero", Tensor::zeros({}, dg::DType::f32))};
  g.input = {value_info("ids", ElemType::int64, {-1, 3})};
  g.output = {value_info("emb", ElemType::float32, {-1, 3, 2}),
              value_info("mask", ElemType::boolean, {-1, 3, 2})};
  g.node = {node("Gather", {"table", "ids"}, {"emb"}, {int_attribute("axis", 0)}),
            node("Greater", {"emb", "zero"}, {"mask"})};
  dg::onnx::write_model(model, dir + "/gather_compare.onnx");
  auto run = [&](std::vector<int64_t> ids) {
    const int64_t batch = static_cast<int64_t>(ids.size()) / 3;
    const Tensor id_tensor = Tensor::from_ids(ids, {batch, 3});
    const Tensor emb = dg::embedding(table, id_tensor);
    return OnnxCaseRun{.inputs = {{"ids", id_tensor}},
                       .outputs = {{"emb", emb}, {"mask", dg::gt(emb, 0.0)}}};
  };
  const OnnxCaseRun traced = run({0, 3, 9, 4, 4, 1}), other = run({9, 8, 7, 6, 5, 4, 3, 2, 1});
  dg::onnx_cases::write_onnx_case(dir, "gather_compare", "gather_compare.onnx", traced.inputs,
                                  traced.outputs, kTolerance, other);
}

// The other dtypes through the files, as inputs and as outputs: a float64 negated, a bool
// negated, an int32, an int64 (past 2^32) and a uint8 passed through.
void write_dtypes_case(const std::string& dir) {
  ModelProto model = empty_model("dtypes");
  auto& g = model.graph;
  g.input = {value_info("a", ElemType::float64, {-1, 3}), value_info("k", ElemType::int32, {-1}),
             value_info("u", ElemType::uint8, {-1, 2}), value_info("m", ElemType::boolean, {-1}),
             value_info("l", ElemType::int64, {-1})};
  g.output = {
      value_info("neg_a", ElemType::float64, {-1, 3}), value_info("k_out", ElemType::int32, {-1}),
      value_info("u_out", ElemType::uint8, {-1, 2}), value_info("not_m", ElemType::boolean, {-1}),
      value_info("l_out", ElemType::int64, {-1})};
  g.node = {node("Neg", {"a"}, {"neg_a"}), node("Identity", {"k"}, {"k_out"}),
            node("Identity", {"u"}, {"u_out"}), node("Not", {"m"}, {"not_m"}),
            node("Identity", {"l"}, {"l_out"})};
  dg::onnx::write_model(model, dir + "/dtypes.onnx");
  auto run = [&](int64_t batch, double seed) {
    const Tensor a = wave({batch, 3}, seed).to(dg::DType::f64);
    std::vector<int64_t> ks, us, ms, ls;
    for (int64_t i = 0; i < batch; ++i) ks.push_back(1000003 * (i + 1) * (i % 2 ? -1 : 1));
    for (int64_t i = 0; i < 2 * batch; ++i) us.push_back((37 * i + 200) % 256);
    for (int64_t i = 0; i < batch; ++i) ms.push_back(i % 3 == 0);
    for (int64_t i = 0; i < batch; ++i) ls.push_back((int64_t{1} << 40) * (i + 1) - 7);
    const Tensor k = Tensor::from_ids(ks, {batch}, dg::DType::i32);
    const Tensor u = Tensor::from_ids(us, {batch, 2}, dg::DType::u8);
    const Tensor m = Tensor::from_ids(ms, {batch}, dg::DType::b8);
    const Tensor l = Tensor::from_ids(ls, {batch});
    return OnnxCaseRun{.inputs = {{"a", a}, {"k", k}, {"u", u}, {"m", m}, {"l", l}},
                       .outputs = {{"neg_a", dg::neg(a)},
                                   {"k_out", k},
                                   {"u_out", u},
                                   {"not_m", dg::logical_not(m)},
                                   {"l_out", l}}};
  };
  const OnnxCaseRun traced = run(2, 7.0), other = run(4, 8.0);
  dg::onnx_cases::write_onnx_case(dir, "dtypes", "dtypes.onnx", traced.inputs, traced.outputs,
                                  kTolerance, other);
}

// A node reading a tensor nothing defines: the checker (and ONNX Runtime) must refuse it.
void write_broken_graph_case(const std::string& dir) {
  ModelProto model = empty_model("broken_graph");
  model.graph.input = {value_info("x", ElemType::float32, {-1, 2})};
  model.graph.output = {value_info("y", ElemType::float32, {-1, 2})};
  model.graph.node = {node("Add", {"x", "nowhere"}, {"y"})};
  dg::onnx::write_model(model, dir + "/broken_graph.onnx");
  const Tensor x = wave({1, 2}, 9.0);
  dg::onnx_cases::write_onnx_case(dir, "broken_graph", "broken_graph.onnx", {{"x", x}}, {{"y", x}},
                                  kTolerance);
}

}  // namespace

int main(int argc, char** argv) {
  const bool planted = argc == 3 && std::strcmp(argv[2], "--plant-error") == 0;
  if (argc < 2 || argc > 3 || (argc == 3 && !planted)) {
    fmt::print(stderr, "usage: export_cases OUT_DIR [--plant-error]\n");
    return 2;
  }
  try {
    const std::string dir = argv[1];
    dg::make_dirs(dir);
    write_mlp_case(dir, planted);
    write_gather_compare_case(dir);
    write_dtypes_case(dir);
    int exported = 0;
    if (planted) {
      write_broken_graph_case(dir);
    } else {  // the exporter's files: the examples' models and every op's gradient-check rows,
              // and the sequence family's cases (tests/onnx/sequence_cases.h)
      dg::onnx_cases::write_exported_examples(dir);
      exported = 8 + dg::onnx_cases::write_op_row_cases(dir);
      exported += dg::onnx_cases::write_sequence_cases(dir);
    }
    fmt::print("export_cases: wrote {} cases and {}/manifest.json\n", planted ? 4 : 3 + exported,
               dir);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "export_cases: error: {}\n", e.what());
    return 1;
  }
}
