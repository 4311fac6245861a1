// The ONNX importer (train/io/onnx/import.h) on files torch.onnx.export (torch 1.13) wrote
// (tests/data/onnx/, made by tools/torch_goldens_onnx.py with tests/onnx_goldens.h): each gives
// torch's outputs within 1e-5 relative (the largest error over the largest value of each
// output), at the traced batch size and another one (the batch axis
// is dynamic); parameters carry the file's initializer names; the MLP, the CNN and the LSTM
// fine-tune 20 steps through the Trainer, and a checkpoint at step 10 resumed to 20 equals the
// straight run bit for bit, and 5 steps give the same bits at 1 and 2 threads (the CNN, the LSTM
// and the encoder). Inputs are checked against the graph's declared types and dims.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>

#include "autograd/ops.h"
#include "tensor/factory.h"
#include "tensor/threads.h"
#include "tests/onnx_goldens.h"
#include "tests/temp_dir.h"
#include "train/io/onnx/import.h"
#include "train/trainer.h"

using namespace dg;
using dg::test::TempDir;

namespace {

std::string model_path(const std::string& name) {
  return std::string(DG_SOURCE_DIR) + "/tests/data/onnx/" + name + ".onnx";
}

bool takes_token_ids(const std::string& model) { return model.rfind("encoder", 0) == 0; }

std::vector<Tensor> golden_inputs(const OnnxGolden& g) {
  std::vector<Tensor> inputs;
  for (const OnnxGoldenTensor& t : g.inputs) {
    const Tensor x = Tensor::from_vector(t.values, t.shape);
    inputs.push_back(takes_token_ids(g.model) ? x.to(DType::i64) : x);
  }
  return inputs;
}

const OnnxGolden& first_golden(const std::string& model) {
  for (const OnnxGolden& g : onnx_goldens())
    if (g.model == model) return g;
  throw std::runtime_error("no golden for " + model);
}

// The largest |got - want| over the elements, relative to the largest |want| (the tensor's
// scale: an element that is a small difference of order-1 terms is not held to 1e-5 of itself).
double relative_error(const Tensor& got, const std::vector<float>& want) {
  const std::vector<float> values = got.contiguous().to_floats();
  REQUIRE(values.size() == want.size());
  double worst = 0, scale = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    worst = std::max(worst, std::abs(double(values[k]) - want[k]));
    scale = std::max(scale, std::abs(double(want[k])));
  }
  return worst / scale;
}

}  // namespace

TEST_CASE("torch.onnx.export's MLP, CNN, LSTM, GRU, encoders and op zoos give torch's outputs") {
  std::set<std::string> models;
  for (const OnnxGolden& g : onnx_goldens()) {
    CAPTURE(g.model);
    CAPTURE(g.inputs[0].shape[0]);
    auto model = onnx::load(model_path(g.model));
    const std::vector<Tensor> ys = model->run(golden_inputs(g));
    REQUIRE(ys.size() == g.outputs.size());
    for (size_t k = 0; k < ys.size(); ++k) {
      CAPTURE(k);
      CHECK(ys[k].shape() == Shape(g.outputs[k].shape));
      CHECK(relative_error(ys[k], g.outputs[k].values) < 1e-5);
    }
    if (g.inputs.size() == 1 && ys.size() == 1)  // module(x) is run() of one input and output
      CHECK(((*model)(golden_inputs(g)[0]).to_floats() == ys[0].to_floats()));
    models.insert(g.model);
  }
  CHECK(models == std::set<std::string>{"mlp", "cnn", "lstm", "gru", "encoder13", "encoder17",
                                        "zoo_conv", "zoo_seq"});
}

TEST_CASE(
    "every initializer keeps its name: floats as parameters, BatchNorm statistics as buffers") {
  for (const char* name :
       {"mlp", "cnn", "lstm", "gru", "encoder13", "encoder17", "zoo_conv", "zoo_seq"}) {
    CAPTURE(name);
    const onnx::ModelProto file = onnx::read_model(model_path(name));
    std::set<std::string> initializers, registered;
    for (const onnx::TensorProto& t : file.graph.initializer) initializers.insert(t.name);
    auto model = onnx::load(model_path(name));
    for (const auto& [n, p] : model->named_parameters()) registered.insert(n);
    for (const auto& [n, b] : model->named_buffers()) registered.insert(n);
    CHECK(registered == initializers);
    if (std::string(name) == "cnn") {
      std::set<std::string> buffers;
      for (const auto& [n, b] : model->named_buffers()) buffers.insert(n);
      CHECK(buffers == std::set<std::string>{"bn.running_mean", "bn.running_var"});
      CHECK(model->parameter("conv.weight").shape() == Shape{4, 1, 3, 3});
    }
  }
  auto encoder = onnx::load(model_path("encoder17"));
  CHECK(encoder->parameter("enc.layers.0.norm1.weight").shape() == Shape{8});
  CHECK(encoder->opset() == 17);
  CHECK(encoder->input_names() == std::vector<std::string>{"x"});
  CHECK(encoder->output_names() == std::vector<std::string>{"y"});
}

TEST_CASE("gradients reach every parameter of an imported model") {
  for (const char* name :
       {"mlp", "cnn", "lstm", "gru", "encoder13", "encoder17", "zoo_conv", "zoo_seq"}) {
    CAPTURE(name);
    auto model = onnx::load(model_path(name));
    const Tensor y = model->run(golden_inputs(first_golden(name)))[0];
    backward(sum(mul(y, y)));
    for (const NamedTensor& parameter : model->named_parameters()) {
      CAPTURE(parameter.first);  // not a structured binding: clang 14 cannot capture one
      REQUIRE(parameter.second.grad().defined());
      CHECK(sum(abs(parameter.second.grad())).item() > 0);
    }
  }
}

namespace {

TensorDataset regression_data(const OnnxGolden& g, int64_t count) {
  TorchGenerator generator(21);
  Shape shape = g.inputs[0].shape;
  shape[0] = count;
  return TensorDataset({randn(shape, DType::f32, &generator),
                        randn({count, g.outputs[0].shape[1]}, DType::f32, &generator)});
}

TrainingConfig settings() {
  TrainingConfig c;
  c.steps = 20;
  c.batch = 4;
  c.seed = 5;
  return c;
}

Tensor mse(onnx::OnnxModel& model, const Batch& b) { return mse_loss(model(b[0]), b[1]); }

std::vector<float> weights(Trainer& t) { return t.parameters().values.to_floats(); }

}  // namespace

TEST_CASE("the MLP, the CNN and the LSTM fine-tune through the Trainer and resume exactly") {
  TempDir dir("onnx_import");
  for (const char* name : {"mlp", "cnn", "lstm"}) {
    CAPTURE(name);
    const TensorDataset data = regression_data(first_golden(name), 12);
    const auto sampler = [&] { return Sampler::shuffled(data.size(), 3, false); };

    auto whole_net = onnx::load(model_path(name));
    AdamW whole_opt(*whole_net, AdamWConfig{.lr = 1e-2});
    Trainer whole(*whole_net, data, sampler(), mse, settings(), whole_opt);
    const std::vector<float> initial = weights(whole);
    whole.run();
    CHECK(weights(whole) != initial);
    CHECK(whole.losses().size() == 20);
    CHECK(whole.losses().back() < whole.losses().front());

    auto first_net = onnx::load(model_path(name));
    AdamW first_opt(*first_net, AdamWConfig{.lr = 1e-2});
    Trainer first(*first_net, data, sampler(), mse, settings(), first_opt);
    first.run(10);
    const std::string checkpoint = (dir.path / (std::string(name) + ".safetensors")).string();
    first.save_checkpoint(checkpoint);

    auto fresh_net = onnx::load(model_path(name));
    for (const Tensor& p : fresh_net->parameters()) p.detach().fill(0.25);  // overwritten by resume
    AdamW fresh_opt(*fresh_net, AdamWConfig{.lr = 1e-2});
    Trainer resumed(*fresh_net, data, sampler(), mse, settings(), fresh_opt);
    resumed.load_checkpoint(checkpoint);
    CHECK(resumed.step() == 10);
    resumed.run();
    CHECK(resumed.losses() == whole.losses());
    CHECK(weights(resumed) == weights(whole));
  }
}

TEST_CASE("inputs are checked against the graph's element types and static dims") {
  auto mlp = onnx::load(model_path("mlp"));
  const std::string file = model_path("mlp");
  // The batch axis is dynamic: any size runs.
  CHECK((*mlp)(Tensor::zeros({1, 6})).shape() == Shape{1, 3});
  CHECK((*mlp)(Tensor::zeros({9, 6})).shape() == Shape{9, 3});
  CHECK_THROWS_WITH_AS((*mlp)(Tensor::zeros({2, 5})),
                       (file + ": input 'x' dim 1 should be 6, got [2, 5] float32").c_str(),
                       onnx::OnnxError);
  CHECK_THROWS_WITH_AS((*mlp)(Tensor::zeros({2, 6}, DType::f64)),
                       (file + ": input 'x' should be float32, got [2, 6] float64").c_str(),
                       onnx::OnnxError);
  CHECK_THROWS_WITH_AS((*mlp)(Tensor::zeros({6})),
                       (file + ": input 'x' should have 2 dims, got [6] float32").c_str(),
                       onnx::OnnxError);
  CHECK_THROWS_WITH_AS(mlp->run({}), (file + ": the graph takes 1 inputs, got 0").c_str(),
                       onnx::OnnxError);
  auto encoder = onnx::load(model_path("encoder13"));
  CHECK_THROWS_WITH_AS(
      (*encoder)(Tensor::zeros({2, 5})),
      (model_path("encoder13") + ": input 'x' should be int64, got [2, 5] float32").c_str(),
      onnx::OnnxError);
}

TEST_CASE("fine-tuning an imported model gives the same bits at 1 and 2 threads") {
  const int before = threads();
  for (const char* name : {"cnn", "lstm", "encoder17"}) {
    CAPTURE(name);
    const OnnxGolden& g = first_golden(name);
    TorchGenerator generator(4);
    Shape shape = g.inputs[0].shape;
    shape[0] = 8;
    const Tensor x =
        takes_token_ids(name)
            ? to_dtype(floor(scale(rand(shape, DType::f32, &generator), 10.99)), DType::i64)
            : randn(shape, DType::f32, &generator);
    const TensorDataset data({x, randn({8, g.outputs[0].shape[1]}, DType::f32, &generator)});
    std::vector<std::vector<float>> runs;
    for (int n : {1, 2}) {
      set_threads(n);
      auto net = onnx::load(model_path(name));
      AdamW opt(*net, AdamWConfig{.lr = 1e-2});
      TrainingConfig c = settings();
      c.steps = 5;
      Trainer trainer(*net, data, Sampler::shuffled(data.size(), 3, false), mse, c, opt);
      trainer.run();
      runs.push_back(weights(trainer));
    }
    CHECK(runs[0] == runs[1]);
  }
  set_threads(before);
}
