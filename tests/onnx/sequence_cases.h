// The sequence family's export cases (train/io/onnx/export_ops_sequence.cpp): small recurrent
// layers and cells, attentions, transformer encoders and norms, each with the forward to export,
// its example inputs and, where an axis is dynamic, inputs at other sizes. Test code only
// (header-only): tests/test_onnx_export_sequence.cpp checks the graphs they export, and
// export_cases (tests/onnx/export_cases.cpp) writes them for ONNX Runtime and the onnx checker:
//
//   for (const SequenceCase& c : sequence_cases()) onnx::export_to_proto(*c.module, c.forward, ..);
//   write_sequence_cases(dir);  // each case's model, inputs and depthgrad's outputs (onnx_cases.h)
#pragma once
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/recurrent.h"
#include "nn/transformer.h"
#include "nn/vision_layers.h"
#include "tensor/factory.h"
#include "tensor/rng.h"
#include "tests/onnx/onnx_cases.h"
#include "tools/example/gpt2_model.h"
#include "train/io/onnx/export.h"

namespace dg::onnx_cases {

struct SequenceCase {
  std::string name;
  std::shared_ptr<Module> module;  // names the weights (an empty Sequential for a function)
  onnx::ExportForward forward;
  std::vector<Tensor> examples;  // the traced inputs
  std::vector<Tensor> others;    // the same inputs at other dynamic sizes, or none
  onnx::ExportOptions options;
};

namespace sequence_detail {

using Dynamic = std::map<std::string, std::map<int64_t, std::string>>;

// Every parameter of m drawn again from N(0, 0.5²) (the default inits leave norms at 1 and 0).
inline void randomize(Module& m, uint64_t seed) {
  TorchGenerator gen(seed);
  for (const auto& named : m.named_parameters()) {
    Tensor p = named.second;
    p.copy_from(scale(randn(p.shape(), p.dtype(), &gen), 0.5));
  }
}
inline Tensor example(const Shape& shape, uint64_t seed) {
  TorchGenerator gen(seed);
  return randn(shape, get_default_dtype(), &gen);
}
inline onnx::ExportOptions axes(Dynamic dynamic, std::vector<std::string> outputs = {},
                                int64_t opset = 17) {
  onnx::ExportOptions o;
  o.opset = opset;
  o.dynamic_axes = std::move(dynamic);
  o.output_names = std::move(outputs);
  return o;
}
// A recurrent module's forward: its inputs (x, h0, c0 as given) -> the outputs `take` names.
template <class M>
onnx::ExportForward recurrent_forward(std::shared_ptr<M> m, std::string take) {
  return [m, take](const std::vector<Tensor>& in) {
    const RecurrentOutput r =
        (*m)(in[0], in.size() > 1 ? in[1] : Tensor(), in.size() > 2 ? in[2] : Tensor());
    std::vector<Tensor> out{r.output};
    if (take.find('h') != std::string::npos) out.push_back(r.h_n);
    if (take.find('c') != std::string::npos) out.push_back(r.c_n);
    return out;
  };
}
template <class M>
std::shared_ptr<M> randomized(std::shared_ptr<M> m, uint64_t seed) {
  randomize(*m, seed);
  return m;
}
template <class M>  // M's own operator() (TransformerEncoder's takes masks too)
onnx::ExportForward one_input(std::shared_ptr<M> m) {
  return [m](const std::vector<Tensor>& in) { return std::vector<Tensor>{(*m)(in[0])}; };
}

// LSTM 1 and 2 layers (batch_first, initial states), bidirectional, without bias, unbatched,
// packed; GRU; RNN tanh and relu; lstm_sequence and gru_sequence called by hand.
inline void recurrent_cases(std::vector<SequenceCase>& cases) {
  const Dynamic time_major{{"input", {{0, "seq"}, {1, "batch"}}}};
  auto lstm = randomized(std::make_shared<LSTM>(RecurrentOptions{4, 6}), 1);
  cases.push_back({"lstm_1",
                   lstm,
                   recurrent_forward(lstm, "hc"),
                   {example({5, 3, 4}, 2)},
                   {example({7, 2, 4}, 3)},
                   axes(time_major, {"output", "h_n", "c_n"})});
  auto stacked =
      randomized(std::make_shared<LSTM>(RecurrentOptions{
                     .input_size = 4, .hidden_size = 5, .num_layers = 2, .batch_first = true}),
                 4);
  onnx::ExportOptions stacked_options =
      axes({{"x", {{0, "batch"}, {1, "seq"}}}, {"h0", {{1, "batch"}}}, {"c0", {{1, "batch"}}}},
           {"y", "h_n", "c_n"});
  stacked_options.input_names = {"x", "h0", "c0"};
  cases.push_back({"lstm_2_batch_first",
                   stacked,
                   recurrent_forward(stacked, "hc"),
                   {example({3, 6, 4}, 5), example({2, 3, 5}, 6), example({2, 3, 5}, 7)},
                   {example({2, 9, 4}, 8), example({2, 2, 5}, 9), example({2, 2, 5}, 10)},
                   stacked_options});
  auto bi = randomized(std::make_shared<LSTM>(RecurrentOptions{
                           .input_size = 3, .hidden_size = 4, .bidirectional = true}),
                       11);
  cases.push_back({"lstm_bidirectional",
                   bi,
                   recurrent_forward(bi, "h"),
                   {example({5, 2, 3}, 12)},
                   {example({3, 4, 3}, 13)},
                   axes(time_major)});
  auto no_bias = randomized(
      std::make_shared<LSTM>(RecurrentOptions{.input_size = 3, .hidden_size = 4, .bias = false}),
      73);
  cases.push_back({"lstm_no_bias_h0_only",
                   no_bias,
                   recurrent_forward(no_bias, "c"),
                   {example({5, 2, 3}, 74), example({1, 2, 4}, 75)},
                   {},
                   {}});
  cases.push_back(
      {"lstm_unbatched", no_bias, recurrent_forward(no_bias, ""), {example({5, 3}, 76)}, {}, {}});
  auto gru = randomized(
      std::make_shared<GRU>(RecurrentOptions{.input_size = 4, .hidden_size = 5, .num_layers = 2}),
      14);
  cases.push_back({"gru_2",
                   gru,
                   recurrent_forward(gru, "h"),
                   {example({6, 3, 4}, 15), example({2, 3, 5}, 16)},
                   {example({4, 2, 4}, 17), example({2, 2, 5}, 18)},
                   axes({{"input_0", {{0, "seq"}, {1, "batch"}}}, {"input_1", {{1, "batch"}}}})});
  auto gru_bi = randomized(std::make_shared<GRU>(RecurrentOptions{.input_size = 3,
                                                                  .hidden_size = 4,
                                                                  .num_layers = 2,
                                                                  .batch_first = true,
                                                                  .bidirectional = true}),
                           77);
  cases.push_back({"gru_2_bidirectional_batch_first",
                   gru_bi,
                   recurrent_forward(gru_bi, "h"),
                   {example({2, 5, 3}, 78), example({4, 2, 4}, 79)},
                   {example({3, 7, 3}, 80), example({4, 3, 4}, 81)},
                   axes({{"input_0", {{0, "batch"}, {1, "seq"}}}, {"input_1", {{1, "batch"}}}})});
  auto composed = randomized(std::make_shared<LSTM>(RecurrentOptions{4, 6}), 106);
  composed->gate_math = GateMath::composed;  // per-step plain cells under the layer's op
  cases.push_back({"lstm_composed_steps",
                   composed,
                   recurrent_forward(composed, "hc"),
                   {example({5, 3, 4}, 107)},
                   {example({7, 2, 4}, 108)},
                   axes(time_major)});
  cases.push_back({"lstm_packed",
                   no_bias,  // step by step: the traced lengths fixed
                   [no_bias](const std::vector<Tensor>& in) {
                     const PackedRecurrentOutput r =
                         (*no_bias)(pack_padded_sequence(in[0], std::vector<int64_t>{5, 3}));
                     return std::vector<Tensor>{pad_packed_sequence(r.output).padded, r.h_n};
                   },
                   {example({5, 2, 3}, 88)},
                   {},
                   {}});
  // the sequence ops called by hand: a forward and a reverse LSTM direction, a GRU with b_hh
  const Tensor w_f = example({16, 4}, 92), w_r = example({16, 4}, 93), w_g = example({12, 4}, 94),
               b_g = example({12}, 95);
  cases.push_back(
      {"lstm_sequence_by_hand",
       std::make_shared<Sequential>(),
       [w_f, w_r](const std::vector<Tensor>& in) {  // gates_x of each, h0, c0
         const std::vector<SequenceResult> r =
             lstm_sequence({{in[0], w_f, Tensor(), in[2], in[3], false},
                            {in[1], w_r, Tensor(), in[2], in[3], true}});
         return std::vector<Tensor>{r[0].output, r[1].output, r[1].h_n, r[0].c_n};
       },
       {example({15, 16}, 96), example({15, 16}, 97), example({3, 4}, 98), example({3, 4}, 99)},
       {example({10, 16}, 100), example({10, 16}, 101), example({2, 4}, 102), example({2, 4}, 103)},
       axes({{"input_0", {{0, "rows"}}},
             {"input_1", {{0, "rows"}}},
             {"input_2", {{0, "batch"}}},
             {"input_3", {{0, "batch"}}}})});
  cases.push_back({"gru_sequence_by_hand",
                   std::make_shared<Sequential>(),
                   [w_g, b_g](const std::vector<Tensor>& in) {
                     const std::vector<SequenceResult> r =
                         gru_sequence({{in[0], w_g, b_g, in[1], Tensor(), true}});
                     return std::vector<Tensor>{r[0].output, r[0].h_n};
                   },
                   {example({15, 12}, 104), example({3, 4}, 105)},
                   {},
                   {}});
  for (const bool relu : {false, true}) {
    auto rnn =
        randomized(std::make_shared<RNN>(
                       RecurrentOptions{.input_size = 3, .hidden_size = 4, .bidirectional = relu},
                       relu ? RNN::Nonlinearity::relu : RNN::Nonlinearity::tanh),
                   19);
    cases.push_back({relu ? "rnn_relu_bidirectional" : "rnn_tanh",
                     rnn,
                     recurrent_forward(rnn, "h"),
                     {example({5, 2, 3}, 20)},
                     {example({3, 4, 3}, 21)},
                     axes(time_major)});
  }
}

// LSTMCell fused and composed, GRUCell.
inline void cell_cases(std::vector<SequenceCase>& cases) {
  for (const GateMath math : {GateMath::fused, GateMath::composed}) {
    auto cell = randomized(std::make_shared<LSTMCell>(4, 5), 22);
    cell->gate_math = math;
    cases.push_back({math == GateMath::fused ? "lstm_cell" : "lstm_cell_composed",
                     cell,
                     recurrent_forward(cell, "c"),
                     {example({3, 4}, 23), example({3, 5}, 24), example({3, 5}, 25)},
                     {},
                     {}});
  }
  auto gru = randomized(std::make_shared<GRUCell>(4, 5), 26);
  cases.push_back({"gru_cell",
                   gru,
                   recurrent_forward(gru, ""),
                   {example({3, 4}, 27), example({3, 5}, 28)},
                   {},
                   {}});
}

// scaled_dot_product_attention (causal over a dynamic length, a bool mask with an empty row, a
// float mask at opset 18), causal_attention with grouped kv heads, attention_heads with RoPE.
inline void attention_op_cases(std::vector<SequenceCase>& cases) {
  auto none = std::make_shared<Sequential>();
  const auto sdpa = [](bool causal, double scale) -> onnx::ExportForward {
    return [causal, scale](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{scaled_dot_product_attention(
          in[0], in[1], in[2], in.size() > 3 ? in[3] : Tensor(), causal, scale)};
    };
  };
  const auto qkv = [](Shape q, Shape k, Shape v, uint64_t seed) {
    return std::vector<Tensor>{example(q, seed), example(k, seed + 1), example(v, seed + 2)};
  };
  cases.push_back({"sdpa_causal", none, sdpa(true, 0.5),
                   qkv({2, 3, 5, 4}, {2, 3, 5, 4}, {2, 3, 5, 4}, 29),
                   qkv({2, 3, 8, 4}, {2, 3, 8, 4}, {2, 3, 8, 4}, 32),
                   axes({{"input_0", {{2, "seq"}}},
                         {"input_1", {{2, "seq"}}},
                         {"input_2", {{2, "seq"}}},
                         {"output", {{2, "seq"}}}})});
  const Tensor keep = Tensor::from_vector(  // [L, S] = [3, 5]; row 2 keeps no key
      std::vector<bool>{1, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, {3, 5});
  cases.push_back({"sdpa_bool_mask",
                   none,
                   [keep](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         scaled_dot_product_attention(in[0], in[1], in[2], keep)};
                   },
                   qkv({2, 3, 4}, {2, 5, 4}, {2, 5, 2}, 35),
                   {},
                   {}});
  std::vector<Tensor> masked = qkv({2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 3}, 38);
  masked.push_back(example({2, 1, 3, 5}, 41));
  cases.push_back({"sdpa_float_mask", none, sdpa(false, 0.7), masked, {}, axes({}, {}, 18)});
  cases.push_back({"causal_attention_gqa",
                   none,
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{causal_attention(in[0], in[1], in[2])};
                   },
                   qkv({2, 4, 5, 3}, {2, 2, 5, 3}, {2, 2, 5, 3}, 52),
                   {},
                   {}});
  cases.push_back(
      {"attention_heads_rope", none,
       [](const std::vector<Tensor>& in) {
         return std::vector<Tensor>{attention_heads(in[0], in[1], in[2], 4, 2, 10000.0)};
       },
       qkv({2, 6, 16}, {2, 6, 8}, {2, 6, 8}, 55), qkv({3, 6, 16}, {3, 6, 8}, {3, 6, 8}, 58),
       axes({{"input_0", {{0, "batch"}}},
             {"input_1", {{0, "batch"}}},
             {"input_2", {{0, "batch"}}}})});
}

// MultiheadAttention with and without masks (its weights returned), TransformerEncoder at opset
// 13 and 17, a norm_first batch_first TransformerEncoderLayer, the GPT-2 example.
inline void transformer_cases(std::vector<SequenceCase>& cases) {
  auto mha = randomized(std::make_shared<MultiheadAttention>(8, 2), 42);
  cases.push_back({"mha",
                   mha,
                   [mha](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         (*mha)(in[0], in[0], in[0], Tensor(), false).output};
                   },
                   {example({4, 3, 8}, 43)},
                   {example({4, 5, 8}, 44)},
                   axes({{"input", {{1, "batch"}}}})});
  const Tensor attn_mask = Tensor::from_vector(  // [L, S] = [4, 4], True = not allowed
      std::vector<bool>{0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0}, {4, 4});
  cases.push_back({"mha_masks_weights",
                   mha,
                   [mha, attn_mask](const std::vector<Tensor>& in) {  // padding from an input
                     const MultiheadAttentionOutput r =
                         (*mha)(in[0], in[1], in[1], gt(in[2], 0.5), true, attn_mask);
                     return std::vector<Tensor>{r.output, r.weights};
                   },
                   {example({4, 3, 8}, 45), example({4, 3, 8}, 46), example({3, 4}, 47)},
                   {},
                   {}});
  cases.push_back({"mha_padding_mask",
                   mha,  // the padding mask follows the runtime batch
                   [mha](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{
                         (*mha)(in[0], in[0], in[0], gt(in[1], 0.0), false).output};
                   },
                   {example({4, 3, 8}, 84), example({3, 4}, 85)},
                   {example({4, 5, 8}, 86), example({5, 4}, 87)},
                   axes({{"input_0", {{1, "batch"}}}, {"input_1", {{0, "batch"}}}})});
  for (const int64_t opset : {13, 17}) {
    auto encoder = randomized(
        std::make_shared<TransformerEncoder>(
            TransformerEncoderLayerOptions{.d_model = 8, .nhead = 2, .dim_feedforward = 16}, 2,
            true),
        47);
    cases.push_back({fmt::format("transformer_encoder_opset{}", opset),
                     encoder,
                     one_input(encoder),
                     {example({5, 3, 8}, 48)},
                     {example({7, 2, 8}, 49)},
                     axes({{"input", {{0, "seq"}, {1, "batch"}}}}, {}, opset)});
  }
  auto layer = randomized(std::make_shared<TransformerEncoderLayer>(
                              TransformerEncoderLayerOptions{.d_model = 8,
                                                             .nhead = 2,
                                                             .dim_feedforward = 16,
                                                             .batch_first = true,
                                                             .norm_first = true}),
                          50);
  cases.push_back(
      {"transformer_layer_norm_first", layer, one_input(layer), {example({2, 5, 8}, 51)}, {}, {}});
  auto gpt = std::make_shared<gpt2::Model>(
      gpt2::Config{.vocab = 32, .context = 8, .dim = 16, .layers = 2, .heads = 2});
  gpt->init_weights(82);
  randomize(*gpt, 83);  // LayerNorms away from 1 and 0
  onnx::ExportOptions gpt_options =
      axes({{"ids", {{0, "batch"}}}, {"logits", {{0, "batch"}}}}, {"logits"});
  gpt_options.input_names = {"ids"};
  cases.push_back(
      {"gpt2",
       gpt,
       one_input(gpt),
       {Tensor::from_ids({1, 5, 9, 30, 2, 7, 3, 3, 0, 31, 12, 4}, {2, 6})},
       {Tensor::from_ids({8, 6, 2, 1, 0, 4, 9, 9, 10, 11, 12, 13, 5, 5, 6, 7, 1, 2}, {3, 6})},
       gpt_options});
}

// LayerNorm, GroupNorm, RMSNorm at opset 13, 17 and 18, a dynamic batch.
inline void norm_cases(std::vector<SequenceCase>& cases) {
  for (const int64_t opset : {13, 17, 18}) {
    const onnx::ExportOptions options = axes({{"input", {{0, "batch"}}}}, {}, opset);
    auto layer_norm = randomized(std::make_shared<LayerNorm>(6), 61);
    cases.push_back({fmt::format("layer_norm_opset{}", opset),
                     layer_norm,
                     one_input(layer_norm),
                     {example({3, 4, 6}, 64)},
                     {example({5, 4, 6}, 65)},
                     options});
    auto group_norm = randomized(std::make_shared<GroupNorm>(2, 6), 62);
    cases.push_back({fmt::format("group_norm_opset{}", opset),
                     group_norm,
                     one_input(group_norm),
                     {example({3, 6, 2, 2}, 66)},
                     {example({5, 6, 2, 2}, 67)},
                     options});
    auto rms_norm = randomized(std::make_shared<RMSNorm>(6), 63);
    cases.push_back({fmt::format("rms_norm_opset{}", opset),
                     rms_norm,
                     one_input(rms_norm),
                     {example({3, 6}, 68)},
                     {example({5, 6}, 69)},
                     options});
  }
  // without the optional parts: layer_norm without a bias, GroupNorm without affine
  for (const int64_t opset : {13, 17}) {
    const Tensor weight = example({6}, 89);
    cases.push_back({fmt::format("layer_norm_no_bias_opset{}", opset),
                     std::make_shared<Sequential>(),
                     [weight](const std::vector<Tensor>& in) {
                       return std::vector<Tensor>{layer_norm(in[0], weight, Tensor(), 1e-3)};
                     },
                     {example({3, 6}, 90)},
                     {},
                     axes({}, {}, opset)});
  }
  auto plain_group_norm = std::make_shared<GroupNorm>(3, 6, 1e-5, /*affine=*/false);
  cases.push_back({"group_norm_no_affine",
                   plain_group_norm,
                   one_input(plain_group_norm),
                   {example({2, 6, 5}, 91)},
                   {},
                   {}});
}

// The graph's value names as the exporter gives them (export.h): the options' names, else
// "input" (one) or "input_0", "input_1", ...
inline std::vector<std::string> value_names(const std::vector<std::string>& given, size_t count,
                                            const char* stem) {
  if (!given.empty()) return given;
  if (count == 1) return {stem};
  std::vector<std::string> names;
  for (size_t k = 0; k < count; ++k) names.push_back(fmt::format("{}_{}", stem, k));
  return names;
}

// The case's inputs and depthgrad's outputs for them (eval mode), under the graph's names.
inline OnnxCaseRun run_case(const SequenceCase& c, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  const bool was_training = c.module->is_training();
  c.module->eval();
  const std::vector<Tensor> outputs = c.forward(inputs);
  c.module->train(was_training);
  OnnxCaseRun run;
  const auto in_names = value_names(c.options.input_names, inputs.size(), "input");
  const auto out_names = value_names(c.options.output_names, outputs.size(), "output");
  for (size_t k = 0; k < inputs.size(); ++k) run.inputs.push_back({in_names[k], inputs[k]});
  for (size_t k = 0; k < outputs.size(); ++k) run.outputs.push_back({out_names[k], outputs[k]});
  return run;
}

}  // namespace sequence_detail

inline std::vector<SequenceCase> sequence_cases() {
  std::vector<SequenceCase> cases;
  sequence_detail::recurrent_cases(cases);
  sequence_detail::cell_cases(cases);
  sequence_detail::attention_op_cases(cases);
  sequence_detail::transformer_cases(cases);
  sequence_detail::norm_cases(cases);
  return cases;
}

// Exports every case to dir/<name>.onnx and writes its runs (the examples, and the other sizes
// when given) into dir's manifest, within 1e-5 relative (float32). Returns the number written.
// Leaves out the opset 18 cases: Debian's onnx 1.12 knows opsets up to 17, and its checker
// refuses opset 18's forms (ReduceMean's axes as an input); the graph tests check them.
inline int write_sequence_cases(const std::string& dir) {
  int written = 0;
  for (const SequenceCase& c : sequence_cases()) {
    if (c.options.opset > 17) continue;
    ++written;
    const std::string file = c.name + ".onnx";
    onnx::export_model(*c.module, c.forward, c.examples, dir + "/" + file, c.options);
    const OnnxCaseRun traced = sequence_detail::run_case(c, c.examples);
    std::optional<OnnxCaseRun> other;
    if (!c.others.empty()) other = sequence_detail::run_case(c, c.others);
    write_onnx_case(dir, c.name, file, traced.inputs, traced.outputs, 1e-5, other);
  }
  return written;
}

}  // namespace dg::onnx_cases
