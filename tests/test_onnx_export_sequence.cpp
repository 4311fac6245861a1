// The ONNX exporter's mappings of the recurrent layers, attention and norms
// (train/io/onnx/export_ops_sequence.cpp) on the cases of tests/onnx/sequence_cases.h: each
// exported graph's nodes and attributes checked, exporting twice gives the same bytes, and the
// refusals name the op. ONNX Runtime runs the same cases under ctest (onnx_runtime).
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <string>

#include "autograd/ops.h"
#include "tests/onnx/sequence_cases.h"
#include "train/io/onnx/export.h"
#include "train/io/onnx/export_graph.h"

using namespace dg;
using dg::onnx::ModelProto;
using dg::onnx::NodeProto;

namespace {

// The case named `name`, exported (twice: the same bytes).
ModelProto exported(const std::string& name) {
  static const std::vector<onnx_cases::SequenceCase> cases = onnx_cases::sequence_cases();
  for (const onnx_cases::SequenceCase& c : cases) {
    if (c.name != name) continue;
    const ModelProto model = onnx::export_to_proto(*c.module, c.forward, c.examples, c.options);
    const ModelProto again = onnx::export_to_proto(*c.module, c.forward, c.examples, c.options);
    CHECK(onnx::encode_model(model) == onnx::encode_model(again));
    return model;
  }
  FAIL("no case " << name);
  return {};
}
const onnx_cases::SequenceCase& case_named(const std::string& name) {
  static const std::vector<onnx_cases::SequenceCase> cases = onnx_cases::sequence_cases();
  for (const onnx_cases::SequenceCase& c : cases)
    if (c.name == name) return c;
  throw std::out_of_range("no case " + name);
}

std::vector<const NodeProto*> nodes_of(const ModelProto& model, const std::string& op_type) {
  std::vector<const NodeProto*> found;
  for (const NodeProto& n : model.graph.node)
    if (n.op_type == op_type) found.push_back(&n);
  return found;
}
const onnx::AttributeProto* attribute_of(const NodeProto& n, const std::string& name) {
  for (const onnx::AttributeProto& a : n.attribute)
    if (a.name == name) return &a;
  return nullptr;
}
const onnx::TensorProto* initializer_of(const ModelProto& model, const std::string& name) {
  for (const onnx::TensorProto& t : model.graph.initializer)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace

TEST_CASE("onnx export: an LSTM layer is one ONNX LSTM node with its gates in ONNX's order") {
  const ModelProto model = exported("lstm_1");
  const auto lstms = nodes_of(model, "LSTM");
  REQUIRE(lstms.size() == 1);
  CHECK(attribute_of(*lstms[0], "hidden_size")->i_value == 6);
  CHECK(attribute_of(*lstms[0], "direction") == nullptr);
  REQUIRE(lstms[0]->input.size() == 4);  // X, W, R, B: no initial states given
  const onnx::TensorProto* W = initializer_of(model, lstms[0]->input[1]);
  REQUIRE(W != nullptr);
  CHECK(W->dims == std::vector<int64_t>{1, 24, 4});
  // ONNX's gate 1 (o) is torch's gate 3: row 6 of W is row 18 of weight_ih_l0
  const auto& lstm = dynamic_cast<const LSTM&>(*case_named("lstm_1").module);
  float w_row6 = 0;
  std::memcpy(&w_row6, W->raw_data.data() + 6 * 4 * sizeof(float), sizeof(float));
  CHECK(w_row6 == static_cast<float>(lstm.weight_ih[0].at({18, 0})));
  CHECK(initializer_of(model, "weight_ih_l0") == nullptr);  // the converted copy replaces it
  CHECK(initializer_of(model, lstms[0]->input[3])->dims == std::vector<int64_t>{1, 48});
  CHECK(model.graph.output.size() == 3);  // output, h_n, c_n
}

TEST_CASE("onnx export: stacked batch_first LSTM with initial states, bidirectional LSTM") {
  const ModelProto model = exported("lstm_2_batch_first");
  const auto lstms = nodes_of(model, "LSTM");
  REQUIRE(lstms.size() == 2);
  for (const NodeProto* n : lstms) {
    REQUIRE(n->input.size() == 7);  // X, W, R, B, sequence_lens "", initial_h, initial_c
    CHECK(n->input[4].empty());
    CHECK(!n->input[5].empty());
    CHECK(!n->input[6].empty());
  }
  CHECK(nodes_of(model, "Transpose").size() >= 2);  // batch_first in and out
  const ModelProto bi = exported("lstm_bidirectional");
  REQUIRE(nodes_of(bi, "LSTM").size() == 1);
  CHECK(attribute_of(*nodes_of(bi, "LSTM")[0], "direction")->s_value == "bidirectional");
}

TEST_CASE(
    "onnx export: recurrent layers without bias, unbatched, packed, with h0 only, GRU both ways") {
  const ModelProto no_bias = exported("lstm_no_bias_h0_only");
  const auto lstms = nodes_of(no_bias, "LSTM");
  REQUIRE(lstms.size() == 1);
  REQUIRE(lstms[0]->input.size() == 6);  // X, W, R, B "", sequence_lens "", initial_h
  CHECK(lstms[0]->input[3].empty());
  CHECK(nodes_of(exported("lstm_unbatched"), "LSTM").size() == 1);
  // a layer whose steps run as composed cells is still one LSTM node (the layer's op wins)
  const ModelProto composed = exported("lstm_composed_steps");
  CHECK(nodes_of(composed, "LSTM").size() == 1);
  CHECK(nodes_of(composed, "Sigmoid").empty());
  // a packed batch runs step by step (no layer op): the cells' formulas, 5 steps
  const ModelProto packed = exported("lstm_packed");
  CHECK(nodes_of(packed, "LSTM").empty());
  CHECK(nodes_of(packed, "Split").size() == 5);
  const ModelProto gru = exported("gru_2_bidirectional_batch_first");
  const auto grus = nodes_of(gru, "GRU");
  REQUIRE(grus.size() == 2);
  CHECK(attribute_of(*grus[1], "direction")->s_value == "bidirectional");
  const onnx::TensorProto* W = initializer_of(gru, grus[1]->input[1]);
  REQUIRE(W != nullptr);
  CHECK(W->dims == std::vector<int64_t>{2, 12, 8});  // layer 1 reads both directions' outputs
}

TEST_CASE("onnx export: GRU with linear_before_reset, RNN with tanh and relu") {
  const ModelProto gru = exported("gru_2");
  const auto grus = nodes_of(gru, "GRU");
  REQUIRE(grus.size() == 2);
  CHECK(attribute_of(*grus[0], "linear_before_reset")->i_value == 1);
  const ModelProto tanh_model = exported("rnn_tanh");
  const auto tanh_rnn = nodes_of(tanh_model, "RNN");
  REQUIRE(tanh_rnn.size() == 1);
  CHECK(attribute_of(*tanh_rnn[0], "activations") == nullptr);  // ONNX's default: Tanh
  const ModelProto relu_model = exported("rnn_relu_bidirectional");
  const auto relu_rnn = nodes_of(relu_model, "RNN");
  REQUIRE(relu_rnn.size() == 1);
  const onnx::AttributeProto* activations = attribute_of(*relu_rnn[0], "activations");
  REQUIRE(activations != nullptr);
  CHECK(activations->strings_value == std::vector<std::string>{"Relu", "Relu"});
}

TEST_CASE("onnx export: the LSTM and GRU cells, fused and composed, are their formulas") {
  for (const char* name : {"lstm_cell", "lstm_cell_composed"}) {
    const ModelProto model = exported(name);
    CHECK(nodes_of(model, "Split").size() == 1);
    CHECK(nodes_of(model, "Sigmoid").size() == 3);
    CHECK(nodes_of(model, "Tanh").size() == 2);
  }
  const ModelProto gru = exported("gru_cell");
  CHECK(nodes_of(gru, "Split").size() == 2);
  CHECK(nodes_of(gru, "Sigmoid").size() == 2);
}

TEST_CASE("onnx export: scaled_dot_product_attention, causal with a runtime length, and masks") {
  const ModelProto causal = exported("sdpa_causal");
  CHECK(nodes_of(causal, "Range").size() == 2);  // the mask follows the runtime lengths
  CHECK(nodes_of(causal, "Softmax").size() == 1);
  CHECK(nodes_of(causal, "MatMul").size() == 2);
  CHECK(nodes_of(causal, "ReduceMax").empty());
  // a bool mask: Where(mask, 0, -inf); rows with no key give zeros (ReduceMax finds them)
  const ModelProto masked = exported("sdpa_bool_mask");
  CHECK(nodes_of(masked, "ReduceMax").size() == 1);
  CHECK(nodes_of(masked, "Where").size() == 3);
  const ModelProto float_mask = exported("sdpa_float_mask");
  const auto reduce_max = nodes_of(float_mask, "ReduceMax");
  REQUIRE(reduce_max.size() == 1);
  CHECK(reduce_max[0]->input.size() == 2);  // opset 18: the axes an input
}

TEST_CASE("onnx export: MultiheadAttention with and without masks, weights returned") {
  CHECK(nodes_of(exported("mha"), "Softmax").size() == 1);
  // the padding mask's additive form follows the runtime batch: no constant of the traced [3, 4]
  const ModelProto padded = exported("mha_padding_mask");
  const std::vector<int64_t> traced_shape{3, 4};
  for (const onnx::TensorProto& t : padded.graph.initializer)
    CHECK_MESSAGE(t.dims != traced_shape, t.name);
  const ModelProto masked = exported("mha_masks_weights");
  CHECK(nodes_of(masked, "Softmax").size() == 1);
  CHECK(masked.graph.output.size() == 2);
}

TEST_CASE("onnx export: TransformerEncoderLayer and TransformerEncoder at opset 13 and 17") {
  const ModelProto old = exported("transformer_encoder_opset13");
  const ModelProto current = exported("transformer_encoder_opset17");
  CHECK(nodes_of(old, "LayerNormalization").empty());
  CHECK(nodes_of(old, "ReduceMean").size() == 10);  // 5 norms, mean and variance each
  CHECK(nodes_of(current, "LayerNormalization").size() == 5);
  CHECK(nodes_of(current, "Softmax").size() == 2);
  CHECK(nodes_of(exported("transformer_layer_norm_first"), "LayerNormalization").size() == 2);
}

TEST_CASE("onnx export: causal_attention with grouped kv heads, attention_heads with RoPE") {
  CHECK(nodes_of(exported("causal_attention_gqa"), "Expand").size() == 2);
  const ModelProto heads = exported("attention_heads_rope");
  CHECK(nodes_of(heads, "Concat").size() == 2);  // q and k rotated
  CHECK(nodes_of(heads, "Range").size() == 2);
}

TEST_CASE("onnx export: the GPT-2 example (attention_heads, layer norms)") {
  const ModelProto model = exported("gpt2");
  CHECK(nodes_of(model, "LayerNormalization").size() == 5);
  CHECK(nodes_of(model, "Softmax").size() == 2);
}

TEST_CASE("onnx export: LayerNorm, GroupNorm and RMSNorm at opset 13, 17 and 18") {
  for (const int64_t opset : {13, 17, 18}) {
    CAPTURE(opset);
    const ModelProto ln = exported(fmt::format("layer_norm_opset{}", opset));
    CHECK(nodes_of(ln, "LayerNormalization").size() == (opset >= 17 ? 1u : 0u));
    CHECK(nodes_of(ln, "ReduceMean").size() == (opset >= 17 ? 0u : 2u));
    if (opset >= 17)
      CHECK(attribute_of(*nodes_of(ln, "LayerNormalization")[0], "epsilon")->f_value ==
            doctest::Approx(1e-5));
    CHECK(nodes_of(exported(fmt::format("group_norm_opset{}", opset)), "ReduceMean").size() == 2);
    const ModelProto rms = exported(fmt::format("rms_norm_opset{}", opset));
    const auto means = nodes_of(rms, "ReduceMean");
    REQUIRE(means.size() == 1);
    CHECK(means[0]->input.size() == (opset >= 18 ? 2u : 1u));
    CHECK((attribute_of(*means[0], "axes") != nullptr) == (opset < 18));
  }
}

TEST_CASE("onnx export: the norms without their optional parts") {
  const ModelProto current = exported("layer_norm_no_bias_opset17");
  const auto norms = nodes_of(current, "LayerNormalization");
  REQUIRE(norms.size() == 1);
  CHECK(norms[0]->input.size() == 2);  // X, Scale: no B
  CHECK(attribute_of(*norms[0], "epsilon")->f_value == doctest::Approx(1e-3));
  const ModelProto old = exported("layer_norm_no_bias_opset13");
  CHECK(nodes_of(old, "Add").size() == 1);  // the variance's eps only
  const ModelProto plain = exported("group_norm_no_affine");
  CHECK(nodes_of(plain, "Mul").size() == 1);  // the centered square only
  CHECK(nodes_of(plain, "Identity").size() == 1);
}

TEST_CASE("onnx export: lstm_sequence and gru_sequence called by hand, one node a direction") {
  const ModelProto lstm = exported("lstm_sequence_by_hand");
  const auto lstms = nodes_of(lstm, "LSTM");
  REQUIRE(lstms.size() == 2);
  CHECK(attribute_of(*lstms[0], "direction") == nullptr);
  CHECK(attribute_of(*lstms[1], "direction")->s_value == "reverse");
  const onnx::TensorProto* W = initializer_of(lstm, lstms[0]->input[1]);
  REQUIRE(W != nullptr);
  CHECK(W->dims == std::vector<int64_t>{1, 16, 16});  // a permutation of the projections
  const ModelProto gru = exported("gru_sequence_by_hand");
  const auto grus = nodes_of(gru, "GRU");
  REQUIRE(grus.size() == 1);
  CHECK(attribute_of(*grus[0], "linear_before_reset")->i_value == 1);
  CHECK(initializer_of(gru, grus[0]->input[3])->dims == std::vector<int64_t>{1, 24});
}

TEST_CASE("onnx export: a recurrent layer of an unknown kind is refused, naming it") {
  onnx::OpExporter recurrent = nullptr;
  for (const onnx::OpExporterEntry& e : onnx::sequence_op_exporters())
    if (std::string(e.op) == "recurrent_layer") recurrent = e.exporter;
  const bool found = recurrent != nullptr;
  REQUIRE(found);
  onnx::ExportGraph graph(17);
  TracedOp op{"recurrent_layer", {}, {}, {{"kind", "lstm2"}}, ""};
  CHECK_THROWS_WITH(recurrent(graph, op),
                    doctest::Contains("recurrent_layer of unknown kind 'lstm2'"));
}
