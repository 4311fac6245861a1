// Malformed and unsupported ONNX files refused by the importer (train/io/onnx/import.h) with one
// line that names the file and what is wrong, and never a crash: broken bytes (cut short, a wrong
// wire type, a length past the end), graphs that break ONNX's rules (a value read before or
// without a definition, defined twice, no outputs, an initializer whose data does not fit its
// dims, an attribute of the wrong type) and what depthgrad does not run (another opset, an
// unknown op, a subgraph, another domain, external data, float16). Each model is built here
// with the codec (train/io/onnx/proto.h) from one small valid graph, changed in one place. The
// same small graph also shows what is accepted at the edges: initializers listed as graph inputs
// (older exporters), names that cannot be a module path, and the forward hooks of module(x).
#include <doctest/doctest.h>

#include <cstring>
#include <limits>
#include <string>

#include "autograd/ops.h"
#include "train/io/onnx/import.h"
#include "train/io/onnx/tensors.h"

using namespace dg;
using namespace dg::onnx;

namespace {

const std::string kSource = "model.onnx";

ValueInfo value(const std::string& name, ElemType type, std::vector<Dimension> dims) {
  ValueInfo v;
  v.name = name;
  v.elem_type = static_cast<int32_t>(type);
  v.has_shape = true;
  v.shape = std::move(dims);
  return v;
}

NodeProto node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
               const std::string& name) {
  NodeProto n;
  n.op_type = op;
  n.input = std::move(in);
  n.output = std::move(out);
  n.name = name;
  return n;
}

// x [batch, 3] -> Gemm(x, w [2, 3], b [2], transB) -> h -> Relu -> y [batch, 2]; opset 17.
ModelProto valid_model() {
  ModelProto m;
  m.ir_version = 8;
  m.opset_import = {{"", 17}};
  m.has_graph = true;
  m.graph.name = "small";
  m.graph.input = {value("x", ElemType::float32, {{false, 0, "batch"}, {true, 3, ""}})};
  m.graph.output = {value("y", ElemType::float32, {{false, 0, "batch"}, {true, 2, ""}})};
  m.graph.initializer = {to_tensor_proto("w", Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3})),
                         to_tensor_proto("b", Tensor::from_vector({0.5, -0.5}, {2}))};
  NodeProto gemm = node("Gemm", {"x", "w", "b"}, {"h"}, "gemm");
  AttributeProto trans_b;
  trans_b.name = "transB";
  trans_b.type = AttributeProto::i;
  trans_b.i_value = 1;
  gemm.attribute = {trans_b};
  m.graph.node = {gemm, node("Relu", {"h"}, {"y"}, "relu")};
  return m;
}

// The message load_bytes throws for these bytes (an OnnxError), or "" when it loads.
std::string refusal(const std::string& bytes) {
  try {
    load_bytes(bytes, kSource);
  } catch (const OnnxError& e) {
    const std::string message = e.what();
    CHECK(message.find('\n') == std::string::npos);
    return message;
  }
  return "";
}
std::string refusal(const ModelProto& m) { return refusal(encode_model(m)); }
// The same for a model given as decoded (for what the encoder does not write: external data).
std::string refusal_of_decoded(const ModelProto& m) {
  try {
    OnnxModel model(m, kSource);
  } catch (const OnnxError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the small valid model loads and runs, so each refusal below is its one change") {
  auto model = load_bytes(encode_model(valid_model()), kSource);
  const Tensor y = (*model)(Tensor::from_vector({1, 0, -1, 0, 1, 0}, {2, 3}));
  CHECK(y.to_vector() == std::vector<double>{0, 0, 2.5, 4.5});  // relu(x·wᵀ + b)
  CHECK(model->named_parameters().size() == 2);
}

TEST_CASE("broken bytes are refused naming the message, field and byte") {
  const std::string good = encode_model(valid_model());
  CHECK(refusal(good.substr(0, good.size() - 7))
            .find("model.onnx: not a valid ONNX model: a length of") == 0);
  // Field 1 (ir_version) is a varint; here it comes as bytes (wire type 2).
  CHECK(refusal(std::string("\x0a\x01\x08", 3) + good) ==
        "model.onnx: not a valid ONNX model: field 1 should be an integer (wire type 0) but has "
        "wire type 2 in ModelProto (byte 1 of the message)");
  // Field 7 (graph) claims 1000 bytes; 2 follow.
  CHECK(refusal(std::string("\x3a\xe8\x07\x00\x00", 5)) ==
        "model.onnx: not a valid ONNX model: a length of 1000 past the end in ModelProto (byte 3 "
        "of the message)");
  CHECK(refusal(std::string("\x08\xff\xff", 3)) ==
        "model.onnx: not a valid ONNX model: a varint cut short by the end in ModelProto (byte 3 "
        "of the message)");
  CHECK(refusal("") == "model.onnx: the model imports no default (ai.onnx) operator set");
}

TEST_CASE("an opset outside 13 to 18, another domain, an unknown op or a subgraph is refused") {
  ModelProto m = valid_model();
  m.opset_import = {{"", 9}};
  CHECK(refusal(m) ==
        "model.onnx: opset 9 is not supported (depthgrad's importer reads opsets 13 to 18)");
  m.opset_import = {{"", 19}};
  CHECK(refusal(m) ==
        "model.onnx: opset 19 is not supported (depthgrad's importer reads opsets 13 to 18)");

  m = valid_model();
  m.graph.node[1].op_type = "Mish";
  CHECK(refusal(m) ==
        "model.onnx: op 'Mish' of node 'relu' is not supported by depthgrad's importer");

  m = valid_model();
  m.graph.node[1].domain = "com.microsoft";
  CHECK(refusal(m) ==
        "model.onnx: node 'relu' (Relu) is in domain 'com.microsoft'; depthgrad's "
        "importer runs the default domain only");

  m = valid_model();
  m.graph.node[1] = node("If", {"h"}, {"y"}, "branch");
  CHECK(refusal(m) ==
        "model.onnx: node 'branch' (If) has subgraphs, which depthgrad's importer does not run");
}

TEST_CASE("values read before or without a definition, or defined twice, are refused") {
  ModelProto m = valid_model();
  m.graph.node[1].input = {"ghost"};
  CHECK(refusal(m) ==
        "model.onnx: node 'relu' (Relu) reads 'ghost', which no input, "
        "initializer or node defines");

  m = valid_model();
  std::swap(m.graph.node[0], m.graph.node[1]);
  CHECK(refusal(m) ==
        "model.onnx: node 'relu' (Relu) reads 'h' before node 'gemm' defines it: "
        "the nodes are not in topological order");

  m = valid_model();  // a cycle: relu reads its own output
  m.graph.node[1].input = {"y"};
  CHECK(refusal(m) ==
        "model.onnx: node 'relu' (Relu) reads 'y' before node 'relu' defines it: "
        "the nodes are not in topological order");

  m = valid_model();
  m.graph.node[1].output = {"h"};
  CHECK(refusal(m) == "model.onnx: value 'h' is defined twice (again by node 'relu' (Relu))");

  m = valid_model();
  m.graph.output.clear();
  CHECK(refusal(m) == "model.onnx: the graph has no outputs");

  m = valid_model();
  m.graph.output[0].name = "z";
  CHECK(refusal(m) ==
        "model.onnx: graph output 'z' is not defined by any node, input or initializer");
}

TEST_CASE("initializers whose data does not fit, or that live elsewhere, are refused") {
  ModelProto m = valid_model();
  m.graph.initializer[0].raw_data.resize(20);
  CHECK(refusal(m) == "model.onnx: tensor 'w' of shape [2, 3] needs 24 bytes of raw data, has 20");

  m = valid_model();  // dims claiming 2^39 elements with 24 bytes: refused, not allocated
  m.graph.initializer[0].dims = {int64_t{1} << 39};
  CHECK(refusal(m) ==
        "model.onnx: tensor 'w' of shape [549755813888] needs 2199023255552 bytes "
        "of raw data, has 24");

  m = valid_model();
  m.graph.initializer[0].external = true;
  CHECK(refusal_of_decoded(m) ==
        "model.onnx: tensor 'w' keeps its values in an external file, which is not "
        "supported");
}

TEST_CASE(
    "attributes of the wrong type or unknown to the importer, and float16 inputs, are refused") {
  ModelProto m = valid_model();
  m.graph.node[0].attribute[0].type = AttributeProto::f;
  m.graph.node[0].attribute[0].f_value = 1;
  CHECK(refusal(m) ==
        "model.onnx: node 'gemm' (Gemm): attribute 'transB' should be of type int, is float");

  m = valid_model();
  m.graph.node[0].attribute[0].name = "transC";
  CHECK(refusal(m) ==
        "model.onnx: node 'gemm' (Gemm): attribute 'transC' is not supported by "
        "depthgrad's importer");

  m = valid_model();
  m.graph.node[1].input = {"h", "h"};
  CHECK(refusal(m) == "model.onnx: node 'relu' (Relu) has 2 inputs; it takes 1 to 1");

  m = valid_model();
  m.graph.input[0].elem_type = static_cast<int32_t>(ElemType::float16);
  CHECK(refusal(m) ==
        "model.onnx: input 'x' has element type float16, which depthgrad does not "
        "have (it reads float32, float64, int32, int64, bool and uint8)");
}

TEST_CASE("a node that fails while running names the file, the node and its op") {
  ModelProto m = valid_model();
  NodeProto reshape = node("Reshape", {"h", "shape"}, {"y"}, "to_five");
  m.graph.node[1] = reshape;
  m.graph.initializer.push_back(to_tensor_proto("shape", Tensor::from_ids({5}, {1})));
  auto model = load_bytes(encode_model(m), kSource);
  try {
    (*model)(Tensor::zeros({2, 3}));
    FAIL("the reshape of 4 values to 5 ran");
  } catch (const OnnxError& e) {
    CHECK(std::string(e.what()).rfind("model.onnx: node 'to_five' (Reshape): ", 0) == 0);
  }
}

TEST_CASE("initializers also listed as graph inputs are initializers, not inputs") {
  ModelProto m = valid_model();  // as torch's keep_initializers_as_inputs=True writes them
  m.graph.input.push_back(value("w", ElemType::float32, {{true, 2, ""}, {true, 3, ""}}));
  m.graph.input.push_back(value("b", ElemType::float32, {{true, 2, ""}}));
  auto model = load_bytes(encode_model(m), kSource);
  CHECK(model->input_names() == std::vector<std::string>{"x"});
  CHECK(model->named_parameters().size() == 2);
  CHECK((*model)(Tensor::zeros({1, 3})).to_vector() == std::vector<double>{0.5, 0});
}

TEST_CASE("names that cannot be a module path are registered with '_' for '.'") {
  ModelProto m = valid_model();
  m.graph.initializer[0].name = "fc.w";
  m.graph.initializer[1].name = "fc";  // both a tensor and the prefix of "fc.w"
  m.graph.node[0].input = {"x", "fc.w", "fc"};
  m.graph.initializer.push_back(to_tensor_proto("odd..name", Tensor::zeros({1})));
  m.graph.initializer.push_back(to_tensor_proto("blocks.0.scale", Tensor::ones({1})));
  auto model = load_bytes(encode_model(m), kSource);
  std::vector<std::string> names;
  for (const auto& [name, p] : model->named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"fc.w", "fc_", "odd__name", "blocks.0.scale"});
}

TEST_CASE("module(x) on an imported model runs its forward hooks once") {
  auto model = load_bytes(encode_model(valid_model()), kSource);
  int calls = 0;
  HookHandle handle =
      model->register_forward_hook([&](const Module&, const std::vector<Tensor>&, const Tensor& y) {
        ++calls;
        return mul(y, Tensor::full({}, 2.0));
      });
  CHECK((*model)(Tensor::zeros({1, 3})).to_vector() == std::vector<double>{1, 0});
  CHECK(calls == 1);
  handle.remove();
}

TEST_CASE("a shape computed from the graph's values cannot ask for more than 2^30 elements") {
  ModelProto m = valid_model();
  m.graph.initializer.push_back(
      to_tensor_proto("huge", Tensor::from_ids({int64_t{1} << 20, int64_t{1} << 20}, {2})));
  m.graph.node.push_back(node("ConstantOfShape", {"huge"}, {"z"}, "big"));
  m.graph.output.push_back(value("z", ElemType::float32, {}));
  auto model = load_bytes(encode_model(m), kSource);
  CHECK_THROWS_WITH_AS(model->run({Tensor::zeros({1, 3})}),
                       "model.onnx: node 'big' (ConstantOfShape): an output of shape [1048576, "
                       "1048576] has more than 2^30 elements",
                       OnnxError);
  m.graph.node.back() = node("Range", {"zero", "limit", "one"}, {"z"}, "long");
  m.graph.initializer.push_back(to_tensor_proto("zero", Tensor::from_ids({0}, {})));
  m.graph.initializer.push_back(to_tensor_proto("one", Tensor::from_ids({1}, {})));
  m.graph.initializer.push_back(to_tensor_proto("limit", Tensor::from_ids({int64_t{1} << 40}, {})));
  model = load_bytes(encode_model(m), kSource);
  CHECK_THROWS_WITH_AS(model->run({Tensor::zeros({1, 3})}),
                       "model.onnx: node 'long' (Range): 1099511627776 values are more than 2^30",
                       OnnxError);
}

TEST_CASE("sizes read from a file are bounded, so no arithmetic on them overflows") {
  // Each case: the valid model with a node added after relu, reading "y" and giving "z".
  auto refused_at_run = [](NodeProto added, std::vector<TensorProto> extra) {
    ModelProto m = valid_model();
    m.graph.node.push_back(std::move(added));
    for (TensorProto& t : extra) m.graph.initializer.push_back(std::move(t));
    m.graph.output.push_back(value("z", ElemType::float32, {}));
    auto model = load_bytes(encode_model(m), kSource);
    try {
      model->run({Tensor::zeros({1, 3})});
    } catch (const OnnxError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const int64_t huge = int64_t{1} << 62;
  CHECK(refused_at_run(node("Tile", {"y", "repeats"}, {"z"}, "tile"),
                       {to_tensor_proto("repeats", Tensor::from_ids({huge, 3}, {2}))}) ==
        "model.onnx: node 'tile' (Tile): a repeat of 4611686018427387904 is outside [-2^30, 2^30]");
  CHECK(refused_at_run(node("Tile", {"y", "repeats"}, {"z"}, "tile"),
                       {to_tensor_proto("repeats", Tensor::from_ids({1, 1 << 30}, {2}))}) ==
        "model.onnx: node 'tile' (Tile): repeats [1, 1073741824] of a [1, 2] input make more "
        "than 2^30 elements");
  CHECK(refused_at_run(node("Tile", {"y", "repeats"}, {"z"}, "tile"),
                       {to_tensor_proto("repeats", Tensor::from_ids({1 << 30, 4}, {2}))}) ==
        "model.onnx: node 'tile' (Tile): an output of shape [1073741824, 8] has more than 2^30 "
        "elements");
  CHECK(refused_at_run(node("Reshape", {"y", "shape"}, {"z"}, "reshape"),
                       {to_tensor_proto("shape", Tensor::from_ids({huge, 4, 4}, {3}))}) ==
        "model.onnx: node 'reshape' (Reshape): shape [4611686018427387904, 4, 4] is not a shape "
        "of 2 elements");
  CHECK(refused_at_run(node("Split", {"y", "sizes"}, {"z"}, "split"),
                       {to_tensor_proto("sizes", Tensor::from_ids({3}, {1}))}) ==
        "model.onnx: node 'split' (Split): a split of 3 along an axis of 1");
  NodeProto pool = node("MaxPool", {"y4"}, {"z"}, "pool");
  AttributeProto kernel, strides;
  kernel.name = "kernel_shape";
  kernel.type = AttributeProto::ints;
  kernel.ints_value = {1, 1};
  strides = kernel;
  strides.name = "strides";
  strides.ints_value = {1, huge};
  pool.attribute = {kernel, strides};
  ModelProto m = valid_model();
  m.graph.node.push_back(node("Unsqueeze", {"y", "axes"}, {"y4"}, "to4d"));
  m.graph.node.push_back(pool);
  m.graph.initializer.push_back(to_tensor_proto("axes", Tensor::from_ids({0, 1}, {2})));
  m.graph.output.push_back(value("z", ElemType::float32, {}));
  auto model = load_bytes(encode_model(m), kSource);
  CHECK_THROWS_WITH_AS(
      model->run({Tensor::zeros({1, 3})}),
      "model.onnx: node 'pool' (MaxPool): a stride of 4611686018427387904 is outside [-2^30, 2^30]",
      OnnxError);
}

TEST_CASE("integer shape arithmetic wraps as two's complement, as ONNX Runtime's") {
  ModelProto m = valid_model();
  m.graph.initializer.push_back(
      to_tensor_proto("big", Tensor::from_ids({std::numeric_limits<int64_t>::max()}, {1})));
  m.graph.initializer.push_back(to_tensor_proto("minus_one", Tensor::from_ids({-1}, {1})));
  m.graph.initializer.push_back(
      to_tensor_proto("lowest", Tensor::from_ids({std::numeric_limits<int64_t>::min()}, {1})));
  m.graph.node.push_back(node("Add", {"big", "big"}, {"sum"}, "add"));
  m.graph.node.push_back(node("Div", {"lowest", "minus_one"}, {"quotient"}, "div"));
  m.graph.output.push_back(value("sum", ElemType::int64, {}));
  m.graph.output.push_back(value("quotient", ElemType::int64, {}));
  auto model = load_bytes(encode_model(m), kSource);
  const std::vector<Tensor> out = model->run({Tensor::zeros({1, 3})});
  CHECK(out[1].contiguous().data<int64_t>()[0] == -2);
  CHECK(out[2].contiguous().data<int64_t>()[0] == std::numeric_limits<int64_t>::min());
}

TEST_CASE("GroupNormalization refuses groups that do not divide the channels or misshapen scales") {
  ModelProto m = valid_model();  // y is [batch, 2]: two channels
  m.opset_import = {{"", 18}};
  m.graph.node.push_back(node("GroupNormalization", {"y", "s", "s"}, {"z"}, "norm"));
  m.graph.output.push_back(value("z", ElemType::float32, {}));
  AttributeProto groups;
  groups.name = "num_groups";
  groups.type = AttributeProto::i;
  groups.i_value = 3;
  m.graph.node.back().attribute = {groups};
  m.graph.initializer.push_back(to_tensor_proto("s", Tensor::ones({3})));
  CHECK_THROWS_WITH_AS(load_bytes(encode_model(m), kSource)->run({Tensor::zeros({1, 3})}),
                       "model.onnx: node 'norm' (GroupNormalization): num_groups 3 does not "
                       "divide the 2 channels",
                       OnnxError);
  m.graph.node.back().attribute[0].i_value = 2;
  CHECK_THROWS_WITH_AS(load_bytes(encode_model(m), kSource)->run({Tensor::zeros({1, 3})}),
                       "model.onnx: node 'norm' (GroupNormalization): scale and bias should be "
                       "[2] (one value per group)",
                       OnnxError);
}
