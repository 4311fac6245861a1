// Module-level habits a PyTorch user brings: print(model) (repr() and operator<< against torch
// 1.13's text for every built-in layer, containers nested, a user's module under its class name),
// module.to(dtype) (.double()/.float(): tensors converted in place, identity kept, refused after
// flat_parameters()), and torch.set_default_dtype (factories and new modules follow it; float32
// unchanged by default). Goldens: tests/nn_misc_goldens.h, written by
// tools/torch_goldens_nn_misc.py.
#include <doctest/doctest.h>

#include <memory>
#include <sstream>
#include <string>

#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/recurrent.h"
#include "nn/transformer.h"
#include "nn/vision_layers.h"
#include "tensor/factory.h"
#include "tests/nn_misc_goldens.h"
#include "tests/nn_test_helpers.h"
#include "train/optim.h"

using namespace dg;
using namespace dg::nn_test;
using nn_misc_goldens::kReprGoldens;

namespace {
void check_repr(const std::string& name, const Module& m) {
  CAPTURE(name);
  CHECK(repr(m) == kReprGoldens.at(name));
}

// A user's module: repr prints its class name, its extra_repr and its children.
class MyNet : public Module {
 public:
  MyNet() {
    fc1 = &register_module("fc1", std::make_unique<Linear>(4, 8));
    act = &register_module("act", std::make_unique<Functional>(relu));
    fc2 = &register_module("fc2", std::make_unique<Linear>(8, 2));
  }
  Tensor forward(const Tensor& x) const {
    return hooked([&](const Tensor& x) { return fc2->forward(act->forward(fc1->forward(x))); }, x);
  }
  Linear *fc1, *fc2;
  Functional* act;
};
class Scaled : public Module {
 public:
  std::string extra_repr() const override { return "scale=2.0"; }
  std::string type_name() const override { return "ScaleBy"; }
};
}  // namespace

TEST_CASE("repr: torch 1.13's text for the layers") {
  check_repr("linear", Linear(2, 16));
  check_repr("linear_nobias", Linear(3, 1, false));
  check_repr("conv2d", Conv2d(1, 32, 3, 1, 1));
  check_repr("conv2d_all", Conv2d(4, 8, {3, 5}, 2, 0, 2, 2, false));
  check_repr("conv1d", Conv1d(2, 4, 3));
  check_repr("conv_transpose2d", ConvTranspose2d(2, 4, 3, 2, 0, 1));
  check_repr("maxpool", MaxPool2d(2));
  check_repr("maxpool_pairs", MaxPool2d({2, 3}, 1, 1, 1, true));
  check_repr("avgpool", AvgPool2d(3, 2, 1));
  check_repr("adaptive", AdaptiveAvgPool2d(1));
  check_repr("flatten", Flatten());
  check_repr("batchnorm2d", BatchNorm2d(16));
  check_repr("batchnorm1d", BatchNorm1d(4, 1e-5, std::nullopt, false, false));
  check_repr("groupnorm", GroupNorm(2, 4));
  check_repr("lstm",
             LSTM({.input_size = 10, .hidden_size = 20, .num_layers = 2, .batch_first = true}));
  check_repr("gru", GRU({.input_size = 3,
                         .hidden_size = 4,
                         .num_layers = 2,
                         .dropout = 0.5,
                         .bidirectional = true}));
  check_repr("rnn", RNN({.input_size = 3, .hidden_size = 4, .bias = false},
                        RNN::Nonlinearity::relu));  // torch's RNN does not print nonlinearity
  check_repr("lstm_cell", LSTMCell(3, 4));
  check_repr("rnn_cell", RNNCell(3, 4, false, RNN::Nonlinearity::relu));
  check_repr("gru_cell", GRUCell(3, 4));
  check_repr("dropout", Dropout(0.5));
  check_repr("dropout_small", Dropout(1e-5));
  check_repr("embedding", Embedding(10, 3));
  check_repr("embedding_padding", Embedding(10, 3, DType::f32, 0));
  check_repr("layernorm", LayerNorm(8));
}

TEST_CASE("repr: attention, the encoder and nested containers, as torch prints them") {
  check_repr("mha", MultiheadAttention(8, 2));
  const TransformerEncoderLayerOptions options{.d_model = 8, .nhead = 2, .dim_feedforward = 16};
  check_repr("encoder_layer", TransformerEncoderLayer(options));
  check_repr("encoder", TransformerEncoder(options, 2, true));
  Sequential seq;
  seq.emplace<Linear>(2, 16);
  seq.add(relu);
  seq.add(std::make_unique<Sequential>(std::make_unique<Linear>(16, 4), dg::tanh));
  seq.add(gelu);
  seq.add(silu);
  seq.add(sigmoid);
  check_repr("sequential", seq);
  ModuleList list;
  list.emplace<Linear>(2, 2);
  list.append(std::make_unique<Functional>(relu));
  check_repr("module_list", list);
  ModuleDict dict;
  dict.emplace<Linear>("enc", 2, 3);
  dict.insert("act", std::make_unique<Functional>(relu));
  check_repr("module_dict", dict);
  ParameterList params;
  params.append(Tensor::zeros({2, 3}));
  params.append(Tensor::zeros({4}, DType::f64));
  check_repr("parameter_list", params);
}

TEST_CASE("repr: a user's module prints its class name; operator<< writes the same text") {
  MyNet net;
  const std::string expected =
      "MyNet(\n"
      "  (fc1): Linear(in_features=4, out_features=8, bias=True)\n"
      "  (act): ReLU()\n"
      "  (fc2): Linear(in_features=8, out_features=2, bias=True)\n"
      ")";
  CHECK(repr(net) == expected);
  std::ostringstream out;
  out << net;
  CHECK(out.str() == expected);
  CHECK(repr(Scaled()) == "ScaleBy(scale=2.0)");
  CHECK(repr(Functional([](const Tensor& x) { return x; })) == "Functional()");
  CHECK(repr(Functional(relu, "Activation")) == "Activation()");
  CHECK(repr(Functional(gelu_tanh)) == "GELU(approximate='tanh')");
  CHECK(repr_float(100000.0) == "100000.0");
  CHECK(repr_float(1e-5) == "1e-05");
  CHECK(repr_float(0.1) == "0.1");
}

TEST_CASE("Module::to: every floating parameter and buffer converted in place, identity kept") {
  manual_seed(3);
  Sequential net;
  Linear& fc = net.emplace<Linear>(3, 2);
  BatchNorm1d& bn = net.emplace<BatchNorm1d>(2);
  const Tensor weight = fc.weight;  // a handle held by the caller
  const std::vector<double> before = weight.to_vector();
  fc.weight.set_grad(Tensor::full({2, 3}, 0.5));
  CHECK(&net.to(DType::f64) == &net);  // chains, as torch's returns self
  CHECK(net.dtype() == DType::f64);
  CHECK(fc.dtype() == DType::f64);
  CHECK(weight.dtype() == DType::f64);  // the caller's handle sees the conversion
  CHECK(weight.same(fc.weight));
  CHECK(weight.same(net.parameter("0.weight")));
  CHECK(weight.requires_grad());
  CHECK(weight.is_leaf());
  CHECK(weight.to_vector() == before);  // float32 values are exact in float64
  CHECK(weight.grad().dtype() == DType::f64);
  CHECK(bn.running_var.dtype() == DType::f64);
  CHECK(bn.num_batches_tracked.dtype() == DType::i64);  // integer buffers stay
  const Tensor y = net.forward(Tensor::ones({4, 3}, DType::f64));
  CHECK(y.dtype() == DType::f64);
  // float32 again: rounding back gives the original bits
  net.to(DType::f32);
  CHECK(weight.dtype() == DType::f32);
  CHECK(weight.to_floats() == std::vector<float>(before.begin(), before.end()));
  // an optimiser built after to() trains the converted parameters
  net.to(DType::f64);
  SGD sgd(net);
  CHECK(net.flat_parameters().values.dtype() == DType::f64);
}

TEST_CASE(
    "Module::to refuses after flat_parameters() (an optimiser would go stale) and non-floats") {
  Sequential net;
  Linear& fc = net.emplace<Linear>(3, 2);
  const std::string bad = invalid_argument_of([&] { net.to(DType::i64); });
  CHECK(contains(bad, "floating point"));
  CHECK(contains(bad, "int64"));
  net.flat_parameters();
  for (Module* m : {static_cast<Module*>(&net), static_cast<Module*>(&fc)}) {
    try {
      m->to(DType::f64);
      FAIL("expected std::logic_error");
    } catch (const std::logic_error& e) {
      CHECK(contains(e.what(), "flat_parameters()"));
      CHECK(contains(e.what(), "before building the optimiser"));
    }
  }
  CHECK(fc.weight.dtype() == DType::f32);  // nothing changed
}

TEST_CASE("Module::to after an optimiser over tensors stepped: its next step throws, never stale") {
  Linear fc(3, 2);
  Adam adam(fc.parameters(), AdamConfig{});
  backward(sum(fc.forward(Tensor::ones({1, 3}))));
  adam.step();  // its moments are float32 now
  fc.to(DType::f64);
  backward(sum(fc.forward(Tensor::ones({1, 3}, DType::f64))));
  const std::string message = dg::test::error_of([&] { adam.step(); });
  CAPTURE(message);
  CHECK(contains(message, "float32"));
}

TEST_CASE("set_default_dtype: factories and new modules follow it; float32 by default") {
  CHECK(get_default_dtype() == DType::f32);
  CHECK(Tensor::zeros({2}).dtype() == DType::f32);
  CHECK(Linear(2, 3).weight.dtype() == DType::f32);
  {
    DefaultDTypeGuard guard(DType::f64);
    CHECK(get_default_dtype() == DType::f64);
    CHECK(Tensor::zeros({2}).dtype() == DType::f64);
    CHECK(Tensor::ones({2}).dtype() == DType::f64);
    CHECK(Tensor::full({2}, 1.5).dtype() == DType::f64);
    CHECK(Tensor::empty({2}).dtype() == DType::f64);
    CHECK(Tensor::from_vector(std::vector<double>{1.5, 2.5}, {2}).dtype() == DType::f64);
    CHECK(Tensor::from_vector(std::vector<float>{1.5f}, {1}).dtype() == DType::f32);  // its own
    CHECK(zeros({2}).dtype() == DType::f64);
    CHECK(ones({2}).dtype() == DType::f64);
    CHECK(full({2}, 3.0).dtype() == DType::f64);
    CHECK(rand({2}).dtype() == DType::f64);
    CHECK(randn({2}).dtype() == DType::f64);
    CHECK(linspace(0, 1, 3).dtype() == DType::f64);
    CHECK(arange(0.0, 1.0, 0.5).dtype() == DType::f64);
    CHECK(arange(3).dtype() == DType::i64);  // integers stay int64, as torch's
    CHECK(randint(5, {2}).dtype() == DType::i64);
    Linear fc(2, 3);
    CHECK(fc.dtype() == DType::f64);
    CHECK(fc.weight.dtype() == DType::f64);
    CHECK(LSTM({.input_size = 2, .hidden_size = 3}).weight_ih[0].dtype() == DType::f64);
    CHECK(BatchNorm2d(3).running_mean.dtype() == DType::f64);
    Sequential net(std::make_unique<Linear>(2, 2), relu);
    CHECK(net.dtype() == DType::f64);
    CHECK(net.forward(Tensor::ones({1, 2})).dtype() == DType::f64);
  }
  CHECK(get_default_dtype() == DType::f32);
  const std::string bad = invalid_argument_of([] { set_default_dtype(DType::i32); });
  CHECK(contains(bad, "set_default_dtype"));
  CHECK(contains(bad, "int32"));
  CHECK(get_default_dtype() == DType::f32);
}
