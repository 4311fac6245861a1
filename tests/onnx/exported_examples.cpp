// The examples' models through the exporter, as ONNX cases (see exported_examples.h).
#include "tests/onnx/exported_examples.h"

#include <fmt/format.h>

#include <cctype>
#include <memory>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/recurrent.h"
#include "nn/transformer.h"
#include "nn/vision_layers.h"
#include "tensor/factory.h"
#include "tensor/rng.h"
#include "tests/onnx/onnx_cases.h"
#include "tests/onnx/op_rows.h"
#include "tools/example/fashion_cnn_model.h"
#include "tools/example/gpt2_model.h"
#include "train/io/onnx/export.h"
#include "train/lm/export_onnx.h"

namespace dg::onnx_cases {

namespace {

constexpr double kTolerance = 1e-5;

// The character LSTM of tools/example/char_lstm.cpp: ids [B, T] -> logits [B·T, vocab].
class CharLstm : public Module {
 public:
  CharLstm(int64_t vocab, int64_t embed, int64_t hidden, int64_t layers)
      : embedding(register_module("embedding", std::make_unique<Embedding>(vocab, embed))),
        lstm(
            register_module("lstm", std::make_unique<LSTM>(RecurrentOptions{.input_size = embed,
                                                                            .hidden_size = hidden,
                                                                            .num_layers = layers,
                                                                            .batch_first = true}))),
        head(register_module("head", std::make_unique<Linear>(hidden, vocab))) {}
  Tensor forward(const Tensor& ids) const override {
    const Tensor h = lstm(embedding(ids)).output;  // [B, T, H]
    return head(reshape(h, {-1, h.size(2)}));
  }
  Embedding& embedding;
  LSTM& lstm;
  Linear& head;
};

// A TransformerEncoder over [B, T, d] features, mean over T, a linear head: [B, classes].
class EncoderClassifier : public Module {
 public:
  EncoderClassifier(int64_t d, int64_t classes)
      : encoder(
            register_module("encoder", std::make_unique<TransformerEncoder>(
                                           TransformerEncoderLayerOptions{.d_model = d,
                                                                          .nhead = 2,
                                                                          .dim_feedforward = 2 * d,
                                                                          .dropout = 0.1,
                                                                          .batch_first = true},
                                           2, true))),
        head(register_module("head", std::make_unique<Linear>(d, classes))) {}
  Tensor forward(const Tensor& x) const override { return head(mean(encoder.forward(x), {1})); }
  TransformerEncoder& encoder;
  Linear& head;
};

// Exports `model` traced on inputs[0] and writes the case: depthgrad's outputs (eval mode) on
// inputs[0] and, as the second run, on other[0].
void write_case(const std::string& dir, const std::string& name, Module& model, const Tensor& input,
                const Tensor& other, const onnx::ExportOptions& options) {
  onnx::export_model(model, {input}, dir + "/" + name + ".onnx", options);
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  const Tensor y = model(input), y2 = model(other);
  model.train(was_training);
  write_onnx_case(dir, name, name + ".onnx", {{"input", input}}, {{"output", y}}, kTolerance,
                  OnnxCaseRun{{{"input", other}}, {{"output", y2}}});
}

onnx::ExportOptions batch_axis(bool sequence_too = false) {
  onnx::ExportOptions o;
  std::map<int64_t, std::string> in = {{0, "batch"}};
  if (sequence_too) in[1] = "sequence";
  o.dynamic_axes = {{"input", in}, {"output", in}};
  return o;
}

Tensor random_ids(const Shape& shape, int64_t vocab) {
  return to_dtype(floor(scale(rand(shape), static_cast<double>(vocab) - 1e-3)), DType::i64);
}

// The language model through export_lm_onnx (depthgrad export --to onnx): traced at seq_len with
// a dynamic sequence, run at a batch of 3 × seq_len and 2 × (seq_len - 3).
void write_lm_case(const std::string& dir, const std::string& name, const MicroLMConfig& config) {
  MicroLM model(config);
  {
    NoGradGuard no_grad;  // weights away from their initial values (zero projections, unit gains)
    for (Tensor p : model.parameters()) p.copy_from(scale(randn(p.shape()), 0.3));
  }
  const std::string file = name + ".onnx";
  export_lm_onnx(model, dir + "/" + file, {.dynamic_sequence = true});
  const Tensor ids = random_ids({3, config.seq_len}, config.vocab);
  const Tensor shorter = random_ids({2, config.seq_len - 3}, config.vocab);
  model.eval();
  NoGradGuard no_grad;
  write_onnx_case(dir, name, file, {{"input_ids", ids}}, {{"logits", model.forward(ids)}},
                  kTolerance,
                  OnnxCaseRun{{{"input_ids", shorter}}, {{"logits", model.forward(shorter)}}});
}

}  // namespace

namespace {
// The rows whose ops have no ONNX mapping, by name prefix (see exported_examples.h).
bool refused_row(const std::string& name) {
  for (const char* prefix :
       {"masked_select/", "cross_entropy/", "linear_cross_entropy/", "nll_loss/", "mse_loss/",
        "l1_loss/", "binary_cross_entropy_with_logits/", "kl_div/", "smooth_l1_loss/",
        "huber_loss/", "batch_norm/train", "batch_norm_relu/train", "adaptive_avg_pool2d/5x7",
        "index_put", "pad/circular", "quantized_linear/", "packed_self_attention/"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}
}  // namespace

int write_op_row_cases(const std::string& dir) {
  int written = 0, row = 0;
  for (const OpCase& c : all_op_cases()) {
    std::string name = fmt::format("op_{:03}_{}", row++, c.name.substr(0, 48));
    for (char& ch : name)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-') ch = '_';
    const std::vector<Tensor> inputs = float32_row_inputs(c);
    Module none;
    const onnx::ExportForward forward = row_forward(c);
    const std::string file = name + ".onnx";
    try {
      onnx::export_model(none, forward, inputs, dir + "/" + file);
    } catch (const std::exception& e) {  // OnnxError; in-place ops refuse to write under a trace
      if (refused_row(c.name)) continue;
      throw std::runtime_error(fmt::format("row '{}' was refused: {}", c.name, e.what()));
    }
    if (refused_row(c.name))
      throw std::runtime_error(
          fmt::format("row '{}' exports: take it off the refused list", c.name));
    NamedTensors in;
    for (size_t k = 0; k < inputs.size(); ++k)
      in.push_back({inputs.size() == 1 ? "input" : fmt::format("input_{}", k), inputs[k]});
    NoGradGuard no_grad;
    write_onnx_case(dir, name, file, in, {{"output", c.fn(inputs)}}, kTolerance);
    ++written;
  }
  return written;
}

void write_exported_examples(const std::string& dir) {
  manual_seed(7);
  auto mlp = std::make_unique<Sequential>();
  mlp->emplace<Linear>(4, 16);
  mlp->add(gelu);
  mlp->emplace<Linear>(16, 3);
  write_case(dir, "export_mlp", *mlp, randn({3, 4}), randn({5, 4}), batch_axis());

  auto cnn = fashion_cnn::make_model();
  {
    NoGradGuard no_grad;  // running statistics away from (0, 1), as after training
    for (auto& [name, buffer] : cnn->named_buffers())
      if (is_floating(buffer.dtype()))
        buffer.copy_from(add_scalar(scale(rand(buffer.shape()), 0.5), 0.5));
  }
  write_case(dir, "export_fashion_cnn", *cnn, randn({3, 1, 28, 28}), randn({2, 1, 28, 28}),
             batch_axis());

  CharLstm lstm(20, 8, 12, 2);
  onnx::ExportOptions lstm_axes;
  lstm_axes.dynamic_axes = {{"input", {{0, "batch"}}}, {"output", {{0, "rows"}}}};
  write_case(dir, "export_char_lstm", lstm, random_ids({3, 6}, 20), random_ids({2, 6}, 20),
             lstm_axes);

  EncoderClassifier encoder(16, 4);
  write_case(dir, "export_encoder", encoder, randn({3, 5, 16}), randn({2, 5, 16}), batch_axis());

  gpt2::Model gpt(gpt2::Config{.vocab = 40, .context = 16, .dim = 16, .layers = 2, .heads = 2});
  gpt.init_weights(11);
  write_case(dir, "export_gpt2", gpt, random_ids({3, 7}, 40), random_ids({2, 5}, 40),
             batch_axis(true));

  // The MicroLM: RMSNorm, SwiGLU, RoPE, grouped-query attention, in the standard and RD-AttnRes
  // residual modes; and the layout of an imported GPT-2 (LayerNorm, GELU, learned positions,
  // biases, untied head).
  MicroLMConfig lm{.vocab = 50, .dim = 16, .layers = 2, .heads = 4, .kv_heads = 2, .seq_len = 8};
  lm.mode = residual_mode("standard");
  write_lm_case(dir, "export_micro_lm", lm);
  lm.mode = residual_mode("rd_attnres");
  write_lm_case(dir, "export_micro_lm_rd_attnres", lm);
  MicroLMConfig gpt2_layout = lm;
  gpt2_layout.mode = residual_mode("standard");
  gpt2_layout.norm = Norm::Kind::layer;
  gpt2_layout.ffn = FeedForward::Kind::gelu;
  gpt2_layout.rope = false;
  gpt2_layout.learned_positions = true;
  gpt2_layout.bias = true;
  gpt2_layout.tied_head = false;
  gpt2_layout.kv_heads = 4;
  write_lm_case(dir, "export_micro_lm_gpt2_layout", gpt2_layout);
}

}  // namespace dg::onnx_cases
