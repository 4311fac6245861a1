// Out and back in: models and ops exported by dg::onnx::export_model (train/io/onnx/export.h) and
// loaded by dg::onnx::load's importer (train/io/onnx/import.h) give depthgrad's own outputs. Every
// gradient-check row of every op family (autograd/gradcheck.h) that the exporter writes (it
// refuses the ops with no ONNX form, such as the losses) is exported in float32 and run back
// through the importer, within 1e-5 of the output's largest
// value; so are an MLP, a CNN with batch norm, a 2-layer LSTM classifier and a TransformerEncoder
// classifier at a second batch size, and their parameters come back under their own names; the
// language model (standard and RD-AttnRes residual modes) through export_lm_onnx at two lengths.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/lm/micro_lm.h"
#include "nn/recurrent.h"
#include "nn/transformer.h"
#include "nn/vision_layers.h"
#include "tensor/factory.h"
#include "tensor/rng.h"
#include "tests/onnx/op_rows.h"
#include "tests/temp_dir.h"
#include "train/io/onnx/export.h"
#include "train/io/onnx/import.h"
#include "train/io/onnx/tensors.h"
#include "train/lm/export_onnx.h"

using namespace dg;
using dg::test::TempDir;

namespace {

double scaled_error(const Tensor& got, const Tensor& want) {
  const std::vector<double> a = got.contiguous().to_vector(), b = want.contiguous().to_vector();
  REQUIRE(a.size() == b.size());
  double worst = 0, scale = 1e-30;
  for (size_t k = 0; k < a.size(); ++k) {
    worst = std::max(worst, std::abs(a[k] - b[k]));
    scale = std::max(scale, std::abs(b[k]));
  }
  return worst / scale;
}

}  // namespace

TEST_CASE("every op row the exporter maps comes back through the importer with its values") {
  int rows = 0;
  for (const OpCase& c : all_op_cases()) {
    CAPTURE(c.name);
    const std::vector<Tensor> inputs = onnx_cases::float32_row_inputs(c);
    Module none;
    const onnx::ExportForward forward = onnx_cases::row_forward(c);
    onnx::ModelProto file;
    try {
      file = onnx::export_to_proto(none, forward, inputs);
    } catch (const std::exception&) {  // no ONNX form (losses, batch statistics...): not ours
      continue;
    }
    try {
      onnx::OnnxModel model(file, c.name);
      std::vector<Tensor> defined;  // the graph's inputs are the defined ones
      for (const Tensor& t : inputs)
        if (t.defined()) defined.push_back(t);
      NoGradGuard no_grad;
      const Tensor want = c.fn(inputs);
      const std::vector<Tensor> got = model.run(defined);
      REQUIRE(got.size() == 1);
      CHECK(got[0].shape() == want.shape());
      CHECK(scaled_error(got[0], want) <= 1e-5);
      ++rows;
    } catch (const std::exception& e) {
      FAIL_CHECK(std::string(e.what()));
    }
  }
  CHECK(rows >= 240);  // every row the exporter wrote when this was written
}

namespace {

// A 2-layer LSTM over [B, T, 5] and a linear head on the last step: [B, 3].
class LstmClassifier : public Module {
 public:
  LstmClassifier()
      : lstm(register_module(
            "lstm", std::make_unique<LSTM>(RecurrentOptions{
                        .input_size = 5, .hidden_size = 6, .num_layers = 2, .batch_first = true}))),
        head(register_module("head", std::make_unique<Linear>(6, 3))) {}
  Tensor forward(const Tensor& x) const override {
    const Tensor h = lstm(x).output;  // [B, T, 6]
    return head(select(h, 1, h.size(1) - 1));
  }
  LSTM& lstm;
  Linear& head;
};

// A TransformerEncoder over [B, T, 8] features, mean over T, a linear head: [B, 3].
class EncoderClassifier : public Module {
 public:
  EncoderClassifier()
      : encoder(register_module(
            "encoder",
            std::make_unique<TransformerEncoder>(
                TransformerEncoderLayerOptions{
                    .d_model = 8, .nhead = 2, .dim_feedforward = 16, .batch_first = true},
                2, true))),
        head(register_module("head", std::make_unique<Linear>(8, 3))) {}
  Tensor forward(const Tensor& x) const override { return head(mean(encoder.forward(x), {1})); }
  TransformerEncoder& encoder;
  Linear& head;
};

// Exports `model` traced on `traced` with a dynamic batch, loads it back, and compares the
// importer's outputs on `traced` and `other` with the model's; every floating initializer is a
// parameter or buffer under its name, and (same_names) every parameter's name comes back.
void check_round_trip(Module& model, const Tensor& traced, const Tensor& other,
                      bool same_names = true) {
  {
    NoGradGuard no_grad;  // weights and statistics away from their initial values
    for (Tensor p : model.parameters()) p.copy_from(add(p, scale(randn(p.shape()), 0.2)));
    for (auto& [name, b] : model.named_buffers())
      if (is_floating(b.dtype())) b.copy_from(add_scalar(scale(rand(b.shape()), 0.5), 0.5));
  }
  onnx::ExportOptions options;
  options.dynamic_axes = {{"input", {{0, "batch"}}}, {"output", {{0, "batch"}}}};
  const onnx::ModelProto file = onnx::export_to_proto(
      model, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{model(in[0])}; },
      {traced}, options);
  onnx::OnnxModel back(file, "exported.onnx");
  model.eval();
  NoGradGuard no_grad;
  for (const Tensor& x : {traced, other}) {
    CAPTURE(x.size(0));
    const Tensor want = model(x), got = back(x);
    CHECK(got.shape() == want.shape());
    CHECK(scaled_error(got, want) <= 1e-5);
  }
  std::set<std::string> names, back_names, initializers;
  for (const auto& [n, p] : model.named_parameters()) names.insert(n);
  for (const auto& [n, p] : back.named_parameters()) back_names.insert(n);
  for (const auto& [n, b] : back.named_buffers()) back_names.insert(n);
  for (const onnx::TensorProto& t : file.graph.initializer)
    if (is_floating(onnx::dtype_of(t.data_type, t.name))) initializers.insert(t.name);
  CHECK(back_names == initializers);
  if (same_names)  // recurrent weights are written reordered, under names of their own
    for (const std::string& n : names) {
      CAPTURE(n);
      CHECK(back_names.count(n) == 1);
    }
}

}  // namespace

TEST_CASE("an MLP, a CNN with batch norm, an LSTM and an encoder come back from their export") {
  manual_seed(3);
  Sequential mlp;
  mlp.emplace<Linear>(4, 16);
  mlp.add(gelu);
  mlp.emplace<Linear>(16, 3);
  check_round_trip(mlp, randn({3, 4}), randn({5, 4}));

  Sequential cnn;
  cnn.emplace<Conv2d>(1, 4, 3, 1, 1);
  cnn.emplace<BatchNorm2d>(4);
  cnn.add(relu);
  cnn.emplace<MaxPool2d>(2);
  cnn.emplace<Flatten>();
  cnn.emplace<Linear>(4 * 4 * 4, 3);
  check_round_trip(cnn, randn({3, 1, 8, 8}), randn({2, 1, 8, 8}));

  LstmClassifier lstm;
  check_round_trip(lstm, randn({3, 4, 5}), randn({2, 4, 5}), false);

  EncoderClassifier encoder;
  check_round_trip(encoder, randn({3, 5, 8}), randn({2, 5, 8}));
}

TEST_CASE("the language model exported by export_lm_onnx comes back at two lengths") {
  TempDir dir("onnx_roundtrip");
  for (const char* mode : {"standard", "rd_attnres"}) {
    CAPTURE(mode);
    manual_seed(5);
    MicroLMConfig config{
        .vocab = 50, .dim = 16, .layers = 2, .heads = 4, .kv_heads = 2, .seq_len = 8};
    config.mode = residual_mode(mode);
    MicroLM model(config);
    {
      NoGradGuard no_grad;  // weights away from their initial values (zero projections, unit gains)
      for (Tensor p : model.parameters()) p.copy_from(scale(randn(p.shape()), 0.3));
    }
    const std::string path = (dir.path / (std::string(mode) + ".onnx")).string();
    export_lm_onnx(model, path, {.dynamic_sequence = true});
    auto back = onnx::load(path);
    model.eval();
    NoGradGuard no_grad;
    for (const Shape& shape : {Shape{3, 8}, Shape{2, 5}}) {
      CAPTURE(shape_str(shape));
      const Tensor ids = to_dtype(floor(scale(rand(shape), 49.99)), DType::i64);
      const Tensor want = model.forward(ids), got = (*back)(ids);
      CHECK(got.shape() == want.shape());
      CHECK(scaled_error(got, want) <= 1e-5);
    }
  }
}
