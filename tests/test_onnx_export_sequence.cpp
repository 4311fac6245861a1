// The ONNX exporter's mappings of the recurrent layers, attention and norms
// (train/io/onnx/export_ops_sequence.cpp): each small module or function exported, its nodes and
// their attributes checked, exporting twice gives the same bytes, and the refusals name the op.
// With DG_ONNX_DUMP_DIR set, each case also writes NAME.onnx and NAME.json (the example inputs
// and the forward's outputs, and a second set at other dynamic sizes) there, for running the
// files in ONNX Runtime by hand.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/recurrent.h"
#include "nn/transformer.h"
#include "nn/vision_layers.h"
#include "tensor/factory.h"
#include "tools/example/gpt2_model.h"
#include "train/io/onnx/export.h"
#include "train/io/onnx/export_graph.h"

using namespace dg;
using dg::onnx::ExportOptions;
using dg::onnx::ModelProto;
using dg::onnx::NodeProto;

namespace {

// Every parameter of m drawn again from N(0, 0.5²) (the default inits leave norms' weights at 1).
void randomize(Module& m, uint64_t seed) {
  TorchGenerator gen(seed);
  for (const NamedTensor& named : m.named_parameters()) {
    Tensor p = named.second;
    p.copy_from(scale(randn(p.shape(), p.dtype(), &gen), 0.5));
  }
}

Tensor example(const Shape& shape, uint64_t seed) {
  TorchGenerator gen(seed);
  return randn(shape, get_default_dtype(), &gen);
}

void write_json_tensors(std::ofstream& out, const std::vector<std::string>& names,
                        const std::vector<Tensor>& values) {
  out << "{";
  for (size_t k = 0; k < values.size(); ++k) {
    const Tensor& t = values[k];
    out << (k ? ", " : "") << "\"" << names[k] << "\": {\"dtype\": \"" << dtype_name(t.dtype())
        << "\", \"dims\": [";
    for (int64_t d = 0; d < t.dim(); ++d) out << (d ? ", " : "") << t.size(d);
    out << "], \"data\": [";
    const std::vector<double> v = t.to_vector();
    for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << fmt::format("{:.9g}", v[i]);
    out << "]}";
  }
  out << "}";
}

std::vector<std::string> names_or(const std::vector<std::string>& given, size_t count,
                                  const char* stem) {
  if (!given.empty()) return given;
  if (count == 1) return {stem};
  std::vector<std::string> names;
  for (size_t k = 0; k < count; ++k) names.push_back(fmt::format("{}_{}", stem, k));
  return names;
}

// Exports forward(examples) twice (the same bytes, checked), dumps it when asked, and returns
// the model. `others`: inputs at other dynamic sizes, for the dump.
ModelProto export_case(const std::string& name, Module& m, const onnx::ExportForward& forward,
                       const std::vector<Tensor>& examples, const ExportOptions& options = {},
                       const std::vector<Tensor>& others = {}) {
  const ModelProto model = onnx::export_to_proto(m, forward, examples, options);
  const ModelProto again = onnx::export_to_proto(m, forward, examples, options);
  CHECK(onnx::encode_model(model) == onnx::encode_model(again));
  const char* dir = std::getenv("DG_ONNX_DUMP_DIR");
  if (!dir) return model;
  onnx::write_model(model, fmt::format("{}/{}.onnx", dir, name));
  std::ofstream out(fmt::format("{}/{}.json", dir, name));
  const bool was_training = m.is_training();
  m.eval();
  out << "{\"sets\": [";
  for (const auto* inputs : {&examples, &others}) {
    if (inputs->empty()) continue;
    NoGradGuard no_grad;
    const std::vector<Tensor> outputs = forward(*inputs);
    out << (inputs == &others ? ", " : "") << "{\"inputs\": ";
    write_json_tensors(out, names_or(options.input_names, inputs->size(), "input"), *inputs);
    out << ", \"outputs\": ";
    write_json_tensors(out, names_or(options.output_names, outputs.size(), "output"), outputs);
    out << "}";
  }
  out << "]}\n";
  m.train(was_training);
  return model;
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

using Dynamic = std::map<std::string, std::map<int64_t, std::string>>;

}  // namespace

TEST_CASE("onnx export: an LSTM layer is one ONNX LSTM node with its gates in ONNX's order") {
  LSTM lstm({.input_size = 4, .hidden_size = 6});
  randomize(lstm, 1);
  const auto forward = [&](const std::vector<Tensor>& in) {
    const RecurrentOutput r = lstm(in[0]);
    return std::vector<Tensor>{r.output, r.h_n, r.c_n};
  };
  ExportOptions options;
  options.output_names = {"output", "h_n", "c_n"};
  options.dynamic_axes = Dynamic{{"input", {{0, "seq"}, {1, "batch"}}}};
  const ModelProto model = export_case("lstm_1", lstm, forward, {example({5, 3, 4}, 2)}, options,
                                       {example({7, 2, 4}, 3)});
  const auto lstms = nodes_of(model, "LSTM");
  REQUIRE(lstms.size() == 1);
  CHECK(attribute_of(*lstms[0], "hidden_size")->i_value == 6);
  CHECK(attribute_of(*lstms[0], "direction") == nullptr);
  REQUIRE(lstms[0]->input.size() == 4);  // X, W, R, B: no initial states given
  const onnx::TensorProto* W = initializer_of(model, lstms[0]->input[1]);
  REQUIRE(W != nullptr);
  CHECK(W->dims == std::vector<int64_t>{1, 24, 4});
  // ONNX's gate 1 (o) is torch's gate 3: row 6 of W is row 18 of weight_ih_l0
  float w_row6 = 0;
  std::memcpy(&w_row6, W->raw_data.data() + 6 * 4 * sizeof(float), sizeof(float));
  CHECK(w_row6 == static_cast<float>(lstm.weight_ih[0].at({18, 0})));
  CHECK(initializer_of(model, "weight_ih_l0") == nullptr);  // the converted copy replaces it
  CHECK(initializer_of(model, lstms[0]->input[3])->dims == std::vector<int64_t>{1, 48});
}

TEST_CASE("onnx export: stacked batch_first LSTM with initial states, bidirectional LSTM") {
  LSTM lstm({.input_size = 4, .hidden_size = 5, .num_layers = 2, .batch_first = true});
  randomize(lstm, 4);
  const auto forward = [&](const std::vector<Tensor>& in) {
    const RecurrentOutput r = lstm(in[0], in[1], in[2]);
    return std::vector<Tensor>{r.output, r.h_n, r.c_n};
  };
  ExportOptions options;
  options.input_names = {"x", "h0", "c0"};
  options.output_names = {"y", "h_n", "c_n"};
  options.dynamic_axes =
      Dynamic{{"x", {{0, "batch"}, {1, "seq"}}}, {"h0", {{1, "batch"}}}, {"c0", {{1, "batch"}}}};
  const ModelProto model =
      export_case("lstm_2_batch_first", lstm, forward,
                  {example({3, 6, 4}, 5), example({2, 3, 5}, 6), example({2, 3, 5}, 7)}, options,
                  {example({2, 9, 4}, 8), example({2, 2, 5}, 9), example({2, 2, 5}, 10)});
  const auto lstms = nodes_of(model, "LSTM");
  REQUIRE(lstms.size() == 2);
  for (const NodeProto* n : lstms) {
    REQUIRE(n->input.size() == 7);  // X, W, R, B, sequence_lens "", initial_h, initial_c
    CHECK(n->input[4].empty());
    CHECK(!n->input[5].empty());
    CHECK(!n->input[6].empty());
  }
  CHECK(nodes_of(model, "Transpose").size() >= 2);  // batch_first in and out

  LSTM bi({.input_size = 3, .hidden_size = 4, .bidirectional = true});
  randomize(bi, 11);
  const auto bi_forward = [&](const std::vector<Tensor>& in) {
    const RecurrentOutput r = bi(in[0]);
    return std::vector<Tensor>{r.output, r.h_n};
  };
  ExportOptions bi_options;
  bi_options.dynamic_axes = Dynamic{{"input", {{0, "seq"}, {1, "batch"}}}};
  const ModelProto bi_model =
      export_case("lstm_bidirectional", bi, bi_forward, {example({5, 2, 3}, 12)}, bi_options,
                  {example({3, 4, 3}, 13)});
  REQUIRE(nodes_of(bi_model, "LSTM").size() == 1);
  CHECK(attribute_of(*nodes_of(bi_model, "LSTM")[0], "direction")->s_value == "bidirectional");
}

TEST_CASE("onnx export: GRU with linear_before_reset, RNN with tanh and relu") {
  GRU gru({.input_size = 4, .hidden_size = 5, .num_layers = 2});
  randomize(gru, 14);
  const auto gru_forward = [&](const std::vector<Tensor>& in) {
    const RecurrentOutput r = gru(in[0], in[1]);
    return std::vector<Tensor>{r.output, r.h_n};
  };
  ExportOptions options;
  options.dynamic_axes =
      Dynamic{{"input_0", {{0, "seq"}, {1, "batch"}}}, {"input_1", {{1, "batch"}}}};
  const ModelProto gru_model =
      export_case("gru_2", gru, gru_forward, {example({6, 3, 4}, 15), example({2, 3, 5}, 16)},
                  options, {example({4, 2, 4}, 17), example({2, 2, 5}, 18)});
  const auto grus = nodes_of(gru_model, "GRU");
  REQUIRE(grus.size() == 2);
  CHECK(attribute_of(*grus[0], "linear_before_reset")->i_value == 1);

  for (const RNN::Nonlinearity f : {RNN::Nonlinearity::tanh, RNN::Nonlinearity::relu}) {
    const bool relu = f == RNN::Nonlinearity::relu;
    RNN rnn({.input_size = 3, .hidden_size = 4, .bidirectional = relu}, f);
    randomize(rnn, 19);
    const auto forward = [&](const std::vector<Tensor>& in) {
      const RecurrentOutput r = rnn(in[0]);
      return std::vector<Tensor>{r.output, r.h_n};
    };
    ExportOptions rnn_options;
    rnn_options.dynamic_axes = Dynamic{{"input", {{0, "seq"}, {1, "batch"}}}};
    const ModelProto model =
        export_case(relu ? "rnn_relu_bidirectional" : "rnn_tanh", rnn, forward,
                    {example({5, 2, 3}, 20)}, rnn_options, {example({3, 4, 3}, 21)});
    const auto rnns = nodes_of(model, "RNN");
    REQUIRE(rnns.size() == 1);
    const onnx::AttributeProto* activations = attribute_of(*rnns[0], "activations");
    if (relu) {
      REQUIRE(activations != nullptr);
      CHECK(activations->strings_value == std::vector<std::string>{"Relu", "Relu"});
    } else {
      CHECK(activations == nullptr);  // ONNX's default: Tanh
    }
  }
}

TEST_CASE("onnx export: the LSTM and GRU cells, fused and composed, are their formulas") {
  for (const GateMath math : {GateMath::fused, GateMath::composed}) {
    LSTMCell cell(4, 5);
    cell.gate_math = math;
    randomize(cell, 22);
    const auto forward = [&](const std::vector<Tensor>& in) {
      const RecurrentOutput r = cell(in[0], in[1], in[2]);
      return std::vector<Tensor>{r.output, r.c_n};
    };
    const ModelProto model =
        export_case(math == GateMath::fused ? "lstm_cell" : "lstm_cell_composed", cell, forward,
                    {example({3, 4}, 23), example({3, 5}, 24), example({3, 5}, 25)});
    CHECK(nodes_of(model, "Split").size() == 1);
    CHECK(nodes_of(model, "Sigmoid").size() == 3);
    CHECK(nodes_of(model, "Tanh").size() == 2);
  }
  GRUCell gru(4, 5);
  randomize(gru, 26);
  const auto forward = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gru(in[0], in[1]).output};
  };
  const ModelProto model =
      export_case("gru_cell", gru, forward, {example({3, 4}, 27), example({3, 5}, 28)});
  CHECK(nodes_of(model, "Split").size() == 2);
  CHECK(nodes_of(model, "Sigmoid").size() == 2);
}

TEST_CASE("onnx export: scaled_dot_product_attention, causal with a runtime length, and masks") {
  Sequential none;
  const auto causal = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), true)};
  };
  ExportOptions options;
  options.dynamic_axes = Dynamic{{"input_0", {{2, "seq"}}},
                                 {"input_1", {{2, "seq"}}},
                                 {"input_2", {{2, "seq"}}},
                                 {"output", {{2, "seq"}}}};
  const ModelProto model = export_case(
      "sdpa_causal", none, causal,
      {example({2, 3, 5, 4}, 29), example({2, 3, 5, 4}, 30), example({2, 3, 5, 4}, 31)}, options,
      {example({2, 3, 8, 4}, 32), example({2, 3, 8, 4}, 33), example({2, 3, 8, 4}, 34)});
  CHECK(nodes_of(model, "Range").size() == 2);  // the mask follows the runtime lengths
  CHECK(nodes_of(model, "Softmax").size() == 1);
  CHECK(nodes_of(model, "MatMul").size() == 2);

  const Tensor keep = Tensor::from_vector(
      std::vector<bool>{1, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, {3, 5});  // row 2: no key
  const auto masked = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{scaled_dot_product_attention(in[0], in[1], in[2], keep)};
  };
  const ModelProto bool_model =
      export_case("sdpa_bool_mask", none, masked,
                  {example({2, 3, 4}, 35), example({2, 5, 4}, 36), example({2, 5, 2}, 37)});
  CHECK(nodes_of(bool_model, "ReduceMax").size() == 1);  // the rows with no key give zeros
  const auto additive = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{
        scaled_dot_product_attention(in[0], in[1], in[2], in[3], false, 0.7)};
  };
  const ModelProto float_model = export_case("sdpa_float_mask", none, additive,
                                             {example({2, 2, 3, 4}, 38), example({2, 2, 5, 4}, 39),
                                              example({2, 2, 5, 3}, 40), example({2, 1, 3, 5}, 41)},
                                             {.opset = 18});
  CHECK(nodes_of(float_model, "ReduceMax")[0]->input.size() == 2);  // opset 18: axes an input
}

TEST_CASE("onnx export: MultiheadAttention with and without masks, weights returned") {
  MultiheadAttention mha(8, 2);
  randomize(mha, 42);
  const Tensor attn_mask = Tensor::from_vector(  // [L, S] = [4, 4], True = not allowed
      std::vector<bool>{0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0}, {4, 4});
  const auto plain = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{mha(in[0], in[0], in[0], Tensor(), false).output};
  };
  ExportOptions options;
  options.dynamic_axes = Dynamic{{"input", {{1, "batch"}}}};
  const ModelProto model =
      export_case("mha", mha, plain, {example({4, 3, 8}, 43)}, options, {example({4, 5, 8}, 44)});
  CHECK(nodes_of(model, "Softmax").size() == 1);
  const auto masked = [&](const std::vector<Tensor>& in) {
    const MultiheadAttentionOutput r =
        mha(in[0], in[1], in[1], gt(in[2], 0.5), true, attn_mask);  // padding from an input
    return std::vector<Tensor>{r.output, r.weights};
  };
  const ModelProto masked_model =
      export_case("mha_masks_weights", mha, masked,
                  {example({4, 3, 8}, 45), example({4, 3, 8}, 46), example({3, 4}, 47)});
  CHECK(nodes_of(masked_model, "Softmax").size() == 1);
  CHECK(masked_model.graph.output.size() == 2);
}

TEST_CASE("onnx export: TransformerEncoderLayer and TransformerEncoder at opset 13 and 17") {
  for (const int64_t opset : {13, 17}) {
    TransformerEncoder encoder({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.1}, 2,
                               /*final_norm=*/true);
    randomize(encoder, 47);
    const auto forward = [&](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{encoder(in[0])};
    };
    ExportOptions options;
    options.opset = opset;
    options.dynamic_axes = Dynamic{{"input", {{0, "seq"}, {1, "batch"}}}};
    const ModelProto model =
        export_case(fmt::format("transformer_encoder_opset{}", opset), encoder, forward,
                    {example({5, 3, 8}, 48)}, options, {example({7, 2, 8}, 49)});
    CHECK(nodes_of(model, "LayerNormalization").size() == (opset >= 17 ? 5u : 0u));
    CHECK(nodes_of(model, "Softmax").size() == 2);
  }
  TransformerEncoderLayer layer(
      {.d_model = 8, .nhead = 2, .dim_feedforward = 16, .batch_first = true, .norm_first = true});
  randomize(layer, 50);
  const auto forward = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{layer(in[0])};
  };
  const ModelProto model =
      export_case("transformer_layer_norm_first", layer, forward, {example({2, 5, 8}, 51)});
  CHECK(nodes_of(model, "LayerNormalization").size() == 2);
}

TEST_CASE("onnx export: causal_attention with grouped kv heads, attention_heads with RoPE") {
  Sequential none;
  const auto gqa = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{causal_attention(in[0], in[1], in[2])};
  };
  const ModelProto model = export_case(
      "causal_attention_gqa", none, gqa,
      {example({2, 4, 5, 3}, 52), example({2, 2, 5, 3}, 53), example({2, 2, 5, 3}, 54)});
  CHECK(nodes_of(model, "Expand").size() == 2);
  const auto heads = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{attention_heads(in[0], in[1], in[2], 4, 2, 10000.0)};
  };
  ExportOptions options;
  options.dynamic_axes = Dynamic{
      {"input_0", {{0, "batch"}}}, {"input_1", {{0, "batch"}}}, {"input_2", {{0, "batch"}}}};
  const ModelProto heads_model = export_case(
      "attention_heads_rope", none, heads,
      {example({2, 6, 16}, 55), example({2, 6, 8}, 56), example({2, 6, 8}, 57)}, options,
      {example({3, 6, 16}, 58), example({3, 6, 8}, 59), example({3, 6, 8}, 60)});
  CHECK(nodes_of(heads_model, "Concat").size() == 2);  // q and k rotated
}

TEST_CASE("onnx export: LayerNorm, GroupNorm and RMSNorm at opset 13, 17 and 18") {
  for (const int64_t opset : {13, 17, 18}) {
    LayerNorm layer_norm(6);
    GroupNorm group_norm(2, 6);
    RMSNorm rms_norm(6);
    randomize(layer_norm, 61);
    randomize(group_norm, 62);
    randomize(rms_norm, 63);
    ExportOptions options;
    options.opset = opset;
    options.dynamic_axes = Dynamic{{"input", {{0, "batch"}}}};
    const auto one = [](Module& m) {
      return [&m](const std::vector<Tensor>& in) { return std::vector<Tensor>{m(in[0])}; };
    };
    const ModelProto ln =
        export_case(fmt::format("layer_norm_opset{}", opset), layer_norm, one(layer_norm),
                    {example({3, 4, 6}, 64)}, options, {example({5, 4, 6}, 65)});
    CHECK(nodes_of(ln, "LayerNormalization").size() == (opset >= 17 ? 1u : 0u));
    CHECK(nodes_of(ln, "ReduceMean").size() == (opset >= 17 ? 0u : 2u));
    const ModelProto gn =
        export_case(fmt::format("group_norm_opset{}", opset), group_norm, one(group_norm),
                    {example({3, 6, 2, 2}, 66)}, options, {example({5, 6, 2, 2}, 67)});
    CHECK(nodes_of(gn, "ReduceMean").size() == 2);
    const ModelProto rms =
        export_case(fmt::format("rms_norm_opset{}", opset), rms_norm, one(rms_norm),
                    {example({3, 6}, 68)}, options, {example({5, 6}, 69)});
    const auto means = nodes_of(rms, "ReduceMean");
    REQUIRE(means.size() == 1);
    CHECK(means[0]->input.size() == (opset >= 18 ? 2u : 1u));
    CHECK((attribute_of(*means[0], "axes") != nullptr) == (opset < 18));
  }
}

TEST_CASE("onnx export: refusals name the op") {
  Sequential none;
  const auto by_hand = [](const std::vector<Tensor>& in) {  // a sequence op outside a layer
    SequenceDirection dir{in[0], in[1], Tensor(), in[2], in[2]};
    return std::vector<Tensor>{lstm_sequence({dir})[0].output};
  };
  CHECK_THROWS_WITH(
      onnx::export_to_proto(none, by_hand,
                            {example({6, 8}, 70), example({8, 2}, 71), example({3, 2}, 72)}),
      doctest::Contains("'lstm_sequence' has no ONNX mapping"));
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

TEST_CASE("onnx export: recurrent layers without bias, unbatched, with h0 only, GRU both ways") {
  LSTM lstm({.input_size = 3, .hidden_size = 4, .bias = false});
  randomize(lstm, 73);
  const auto h0_only = [&](const std::vector<Tensor>& in) {
    const RecurrentOutput r = lstm(in[0], in[1]);
    return std::vector<Tensor>{r.output, r.c_n};
  };
  const ModelProto model = export_case("lstm_no_bias_h0_only", lstm, h0_only,
                                       {example({5, 2, 3}, 74), example({1, 2, 4}, 75)});
  const auto lstms = nodes_of(model, "LSTM");
  REQUIRE(lstms.size() == 1);
  REQUIRE(lstms[0]->input.size() == 6);  // X, W, R, B "", sequence_lens "", initial_h
  CHECK(lstms[0]->input[3].empty());
  const auto unbatched = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{lstm(in[0]).output};
  };
  const ModelProto unbatched_model =
      export_case("lstm_unbatched", lstm, unbatched, {example({5, 3}, 76)});
  CHECK(nodes_of(unbatched_model, "LSTM").size() == 1);

  GRU gru({.input_size = 3,
           .hidden_size = 4,
           .num_layers = 2,
           .batch_first = true,
           .bidirectional = true});
  randomize(gru, 77);
  const auto forward = [&](const std::vector<Tensor>& in) {
    const RecurrentOutput r = gru(in[0], in[1]);
    return std::vector<Tensor>{r.output, r.h_n};
  };
  ExportOptions options;
  options.dynamic_axes =
      Dynamic{{"input_0", {{0, "batch"}, {1, "seq"}}}, {"input_1", {{1, "batch"}}}};
  const ModelProto gru_model =
      export_case("gru_2_bidirectional_batch_first", gru, forward,
                  {example({2, 5, 3}, 78), example({4, 2, 4}, 79)}, options,
                  {example({3, 7, 3}, 80), example({4, 3, 4}, 81)});
  const auto grus = nodes_of(gru_model, "GRU");
  REQUIRE(grus.size() == 2);
  CHECK(attribute_of(*grus[1], "direction")->s_value == "bidirectional");
  const onnx::TensorProto* W = initializer_of(gru_model, grus[1]->input[1]);
  REQUIRE(W != nullptr);
  CHECK(W->dims == std::vector<int64_t>{2, 12, 8});  // layer 1 reads both directions' outputs
}

TEST_CASE("onnx export: the GPT-2 example (attention_heads, layer norms) at another batch size") {
  gpt2::Model model({.vocab = 32, .context = 8, .dim = 16, .layers = 2, .heads = 2});
  model.init_weights(82);
  randomize(model, 83);  // LayerNorms away from 1 and 0
  const auto forward = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{model(in[0])};
  };
  ExportOptions options;
  options.input_names = {"ids"};
  options.output_names = {"logits"};
  options.dynamic_axes = Dynamic{{"ids", {{0, "batch"}}}, {"logits", {{0, "batch"}}}};
  const Tensor ids = Tensor::from_ids({1, 5, 9, 30, 2, 7, 3, 3, 0, 31, 12, 4}, {2, 6});
  const Tensor other =
      Tensor::from_ids({8, 6, 2, 1, 0, 4, 9, 9, 10, 11, 12, 13, 5, 5, 6, 7, 1, 2}, {3, 6});
  const ModelProto proto = export_case("gpt2", model, forward, {ids}, options, {other});
  CHECK(nodes_of(proto, "LayerNormalization").size() == 5);
  CHECK(nodes_of(proto, "Softmax").size() == 2);
}
