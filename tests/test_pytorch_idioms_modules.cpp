// PyTorch idioms at the module level, translated line by line: print(model), model.double() /
// .float() / .to(dtype), torch.set_default_dtype, F.max_pool2d with and without indices, and
// variable-length batches through pack_padded_sequence / pad_packed_sequence. Each TEST_CASE
// quotes the torch lines and checks depthgrad's against torch 1.13's results
// (tests/pytorch_idioms/modules_goldens.h, written by tools/pytorch_idioms/modules.py): texts
// exactly, float64 at 1e-12, float32 at 1e-6.
#include <doctest/doctest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/recurrent.h"
#include "nn/transformer.h"
#include "nn/vision_layers.h"
#include "tensor/factory.h"
#include "tests/kernel_test_helpers.h"
#include "tests/pytorch_idioms/modules_goldens.h"
#include "train/optim.h"

using namespace dg;
using idioms_modules::kText;
using idioms_modules::kValues;

namespace {
Tensor filled(const Shape& shape, int mul, int mod, int shift, double div, DType dtype) {
  return Tensor::from_vector(pattern(shape_numel(shape), mul, mod, shift, div), shape, dtype);
}
// The generator's set_parameters: parameter k gets pattern(numel, 3 + 2 (k mod 5), 13 + k, ..).
void set_parameters(const Module& m) {
  int k = 0;
  for (const auto& [name, p] : m.named_parameters()) {
    const int mod = 13 + k;
    Tensor(p).copy_from(filled(p.shape(), 3 + 2 * (k % 5), mod, mod / 2, 16.0, p.dtype()));
    ++k;
  }
}
void check_values(const Tensor& t, const std::string& key, double tolerance) {
  CAPTURE(key);
  check_close(t.contiguous().to_vector(), kValues.at(key), tolerance);
}
std::string torch_dtype(DType d) { return std::string("torch.") + dtype_name(d); }
// The CIFAR-10 tutorial's network, as a user writes it.
class Net : public Module {
 public:
  Net() {
    conv1 = &register_module("conv1", std::make_unique<Conv2d>(3, 6, 5));
    pool = &register_module("pool", std::make_unique<MaxPool2d>(2, 2));
    conv2 = &register_module("conv2", std::make_unique<Conv2d>(6, 16, 5));
    fc1 = &register_module("fc1", std::make_unique<Linear>(16 * 5 * 5, 120));
    fc2 = &register_module("fc2", std::make_unique<Linear>(120, 84));
    fc3 = &register_module("fc3", std::make_unique<Linear>(84, 10));
  }
  Conv2d *conv1, *conv2;
  MaxPool2d* pool;
  Linear *fc1, *fc2, *fc3;
};
}  // namespace

TEST_CASE("idiom: print(nn.Linear(2, 16))") {
  // print(nn.Linear(2, 16))
  std::ostringstream out;
  out << Linear(2, 16);
  CHECK(out.str() == kText.at("print_linear"));
}

TEST_CASE("idiom: print(nn.Conv2d(1, 32, 3, padding=1))") {
  CHECK(repr(Conv2d(1, 32, 3, /*stride=*/1, /*padding=*/1)) == kText.at("print_conv"));
}

TEST_CASE("idiom: print(nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1)))") {
  Sequential model(std::make_unique<Linear>(2, 16), relu, std::make_unique<Linear>(16, 1));
  CHECK(repr(model) == kText.at("print_sequential"));
}

TEST_CASE("idiom: print(nn.Sequential(conv, ReLU, MaxPool2d(2), Flatten, nn.Sequential(...)))") {
  // nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
  //               nn.Sequential(nn.Linear(8, 4), nn.Dropout(0.2)))
  Sequential model(
      std::make_unique<Conv2d>(1, 8, 3), relu, std::make_unique<MaxPool2d>(2),
      std::make_unique<Flatten>(),
      std::make_unique<Sequential>(std::make_unique<Linear>(8, 4), std::make_unique<Dropout>(0.2)));
  CHECK(repr(model) == kText.at("print_nested"));
}

TEST_CASE(
    "idiom: print(nn.LSTM(10, 20, num_layers=2, batch_first=True)); print(nn.GRU(8, 16, "
    "bidirectional=True))") {
  CHECK(repr(LSTM({.input_size = 10, .hidden_size = 20, .num_layers = 2, .batch_first = true})) ==
        kText.at("print_lstm"));
  CHECK(repr(GRU({.input_size = 8, .hidden_size = 16, .bidirectional = true})) ==
        kText.at("print_gru"));
}

TEST_CASE(
    "idiom: print(nn.BatchNorm2d(16)); print(nn.Embedding(10, 3)); print(nn.Dropout(p=0.5)); "
    "print(nn.LayerNorm(8))") {
  CHECK(repr(BatchNorm2d(16)) == kText.at("print_batchnorm"));
  CHECK(repr(Embedding(10, 3)) == kText.at("print_embedding"));
  CHECK(repr(Dropout(0.5)) == kText.at("print_dropout"));
  CHECK(repr(LayerNorm(8)) == kText.at("print_layernorm"));
}

TEST_CASE("idiom: print(nn.MultiheadAttention(embed_dim=8, num_heads=2))") {
  CHECK(repr(MultiheadAttention(8, 2)) == kText.at("print_mha"));
}

TEST_CASE(
    "idiom: print(nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, "
    "batch_first=True))") {
  TransformerEncoderLayer layer(
      {.d_model = 8, .nhead = 2, .dim_feedforward = 16, .batch_first = true});
  CHECK(repr(layer) == kText.at("print_encoder_layer"));
}

TEST_CASE(
    "idiom: print(nn.ModuleList([nn.Linear(10, 10) for _ in range(2)])); "
    "print(nn.ModuleDict(...))") {
  ModuleList list;
  for (int i = 0; i < 2; ++i) list.emplace<Linear>(10, 10);
  CHECK(repr(list) == kText.at("print_module_list"));
  // nn.ModuleDict({'conv': nn.Conv2d(10, 10, 3), 'pool': nn.MaxPool2d(3)})
  ModuleDict dict;
  dict.emplace<Conv2d>("conv", 10, 10, 3);
  dict.emplace<MaxPool2d>("pool", 3);
  CHECK(repr(dict) == kText.at("print_module_dict"));
}

TEST_CASE("idiom: class Net(nn.Module): ...; print(Net())") {
  // self.conv1 = nn.Conv2d(3, 6, 5); self.pool = nn.MaxPool2d(2, 2); ...; print(net)
  Net net;
  CHECK(repr(net) == kText.at("print_net"));  // the class name, from the C++ type
}

TEST_CASE("idiom: torch.get_default_dtype()") {
  CHECK(torch_dtype(get_default_dtype()) == kText.at("default_dtype_start"));
}

TEST_CASE("idiom: torch.set_default_dtype(torch.float64); torch.zeros(2).dtype") {
  DefaultDTypeGuard guard(DType::f64);  // set_default_dtype(DType::f64), restored at scope end
  CHECK(torch_dtype(zeros({2}).dtype()) == kText.at("default_zeros"));
  CHECK(torch_dtype(Tensor::zeros({2}).dtype()) == kText.at("default_zeros"));
}

TEST_CASE(
    "idiom: torch.set_default_dtype(torch.float64); torch.tensor([1.5, 2.5]).dtype; nn.Linear(2, "
    "3).weight.dtype") {
  set_default_dtype(DType::f64);
  const DType literal = Tensor::from_vector({1.5, 2.5}, {2}).dtype();
  const DType weight = Linear(2, 3).weight.dtype();
  const DType ints = arange(3).dtype();  // torch.arange(3): int64 whatever the default
  set_default_dtype(DType::f32);
  CHECK(torch_dtype(literal) == kText.at("default_literal"));
  CHECK(torch_dtype(weight) == kText.at("default_linear"));
  CHECK(torch_dtype(ints) == kText.at("default_arange"));
}

TEST_CASE("idiom: model.double(); model(x)") {
  // model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)); model.double()
  Sequential model(std::make_unique<Linear>(3, 4), dg::tanh, std::make_unique<Linear>(4, 2));
  set_parameters(model);
  model.to(DType::f64);
  const Tensor x = filled({2, 3}, 5, 11, 5, 4.0, DType::f64);
  check_values(model.forward(x), "double_forward", 1e-12);
  CHECK(torch_dtype(model.parameters()[0].dtype()) == kText.at("double_dtype"));
}

TEST_CASE("idiom: model.float(); model(x.float())") {
  Sequential model(std::make_unique<Linear>(3, 4), dg::tanh, std::make_unique<Linear>(4, 2));
  set_parameters(model);
  model.to(DType::f64).to(DType::f32);
  const Tensor x = filled({2, 3}, 5, 11, 5, 4.0, DType::f32);
  check_values(model.forward(x), "float_forward", 1e-6);
}

TEST_CASE(
    "idiom: model.double(); opt = torch.optim.SGD(model.parameters(), lr=0.1); loss.backward(); "
    "opt.step()") {
  Sequential model(std::make_unique<Linear>(3, 4), dg::tanh, std::make_unique<Linear>(4, 2));
  set_parameters(model);
  model.to(DType::f64);  // first, then the optimiser (to() refuses once it holds the buffers)
  SGD opt(model);
  opt.set_lr(0.1);
  const Tensor x = filled({2, 3}, 5, 11, 5, 4.0, DType::f64);
  backward(sum(mul(model.forward(x), filled({2, 2}, 3, 7, 3, 4.0, DType::f64))));
  opt.step();
  check_values(model.at<Linear>(0).weight, "double_sgd_weight", 1e-12);
}

TEST_CASE(
    "idiom: bn = nn.BatchNorm1d(3).to(torch.float64); bn.running_mean.dtype; "
    "bn.num_batches_tracked.dtype") {
  BatchNorm1d bn(3);
  bn.to(DType::f64);
  CHECK(torch_dtype(bn.running_mean.dtype()) == kText.at("bn_to_running_mean"));
  CHECK(torch_dtype(bn.num_batches_tracked.dtype()) == kText.at("bn_to_num_batches"));
}

TEST_CASE("idiom: F.max_pool2d(x, 2)") {
  const Tensor x = filled({1, 2, 5, 6}, 7, 23, 11, 8.0, DType::f32);
  const Tensor y = max_pool2d(x, 2);  // a Tensor, as torch's
  check_values(y, "max_pool2d", 1e-6);
}

TEST_CASE("idiom: y, idx = F.max_pool2d(x, 2, return_indices=True)") {
  const Tensor x = filled({1, 2, 5, 6}, 7, 23, 11, 8.0, DType::f32);
  const auto [y, idx] = max_pool2d_with_indices(x, 2);
  check_values(y, "max_pool2d_indices.values", 1e-6);
  check_values(idx, "max_pool2d_indices.indices", 0.0);
  CHECK(idx.dtype() == DType::i64);
}

TEST_CASE("idiom: nn.MaxPool2d(3, stride=2, padding=1)(x)") {
  const Tensor x = filled({1, 2, 5, 6}, 7, 23, 11, 8.0, DType::f32);
  check_values(MaxPool2d(3, 2, 1).forward(x), "maxpool_module", 1e-6);
}

TEST_CASE("idiom: y = F.max_pool2d(x, 2, ceil_mode=True); (y * w).sum().backward()") {
  Tensor x = filled({1, 2, 5, 6}, 7, 23, 11, 8.0, DType::f64);
  x.set_requires_grad(true);
  const Tensor y = max_pool2d(x, 2, 0, 0, 1, /*ceil_mode=*/true);
  backward(sum(mul(y, filled(y.shape(), 3, 7, 3, 4.0, DType::f64))));
  check_values(y, "max_pool2d_ceil", 1e-12);
  check_values(x.grad(), "max_pool2d_ceil.dx", 1e-12);
}

namespace {
struct EmbeddedBatch {
  Embedding emb{7, 3, DType::f32, 0};
  GRU gru{{.input_size = 3, .hidden_size = 4, .batch_first = true, .bidirectional = true}};
  Tensor ids = Tensor::from_ids({1, 2, 0, 0, 3, 4, 5, 6, 2, 6, 1, 0}, {3, 4});
  std::vector<int64_t> lengths{2, 4, 3};
  EmbeddedBatch() {
    set_parameters(emb);
    float* row0 = emb.weight.mutable_data<float>();  // with torch.no_grad(): emb.weight[0].zero_()
    for (int i = 0; i < 3; ++i) row0[i] = 0.0f;
    set_parameters(gru);
  }
};
}  // namespace

TEST_CASE(
    "idiom: packed = pack_padded_sequence(emb(ids), lengths, batch_first=True, "
    "enforce_sorted=False)") {
  EmbeddedBatch b;
  const PackedSequence packed = pack_padded_sequence(b.emb.forward(b.ids), b.lengths, true, false);
  check_values(packed.data, "pack.data", 1e-6);
  check_values(packed.batch_sizes, "pack.batch_sizes", 0.0);
  check_values(packed.sorted_indices, "pack.sorted_indices", 0.0);
  check_values(packed.unsorted_indices, "pack.unsorted_indices", 0.0);
}

TEST_CASE(
    "idiom: out, h_n = nn.GRU(3, 4, batch_first=True, bidirectional=True)(packed); "
    "pad_packed_sequence(out, batch_first=True)") {
  EmbeddedBatch b;
  const PackedRecurrentOutput r =
      b.gru.forward(pack_padded_sequence(b.emb.forward(b.ids), b.lengths, true, false));
  const auto [padded, lengths] = pad_packed_sequence(r.output, /*batch_first=*/true);
  check_values(padded, "gru.padded", 1e-6);
  check_values(lengths, "gru.lengths", 0.0);
  check_values(r.h_n, "gru.h_n", 1e-6);
}

TEST_CASE("idiom: pad_packed_sequence(out, batch_first=True, total_length=6)") {
  EmbeddedBatch b;
  const PackedRecurrentOutput r =
      b.gru.forward(pack_padded_sequence(b.emb.forward(b.ids), b.lengths, true, false));
  check_values(pad_packed_sequence(r.output, true, 0.0, 6).padded, "gru.total_length", 1e-6);
}

TEST_CASE(
    "idiom: out, (h_n, c_n) = nn.LSTM(2, 3).double()(pack_padded_sequence(x, [4, 3, 1])); "
    "backward") {
  LSTM lstm({.input_size = 2, .hidden_size = 3});
  set_parameters(lstm);
  lstm.to(DType::f64);
  Tensor x = filled({4, 3, 2}, 7, 23, 11, 8.0, DType::f64);
  x.set_requires_grad(true);
  const PackedRecurrentOutput r = lstm.forward(pack_padded_sequence(x, {4, 3, 1}));
  const Tensor padded = pad_packed_sequence(r.output).padded;
  backward(add(sum(mul(padded, filled(padded.shape(), 3, 11, 5, 4.0, DType::f64))), sum(r.h_n)));
  check_values(padded, "lstm.padded", 1e-12);
  check_values(r.h_n, "lstm.h_n", 1e-12);
  check_values(r.c_n, "lstm.c_n", 1e-12);
  check_values(x.grad(), "lstm.dx", 1e-12);
}

TEST_CASE("idiom: pad_sequence([a, b, c], batch_first=True, padding_value=-1.0)") {
  const Tensor a = filled({2, 2}, 3, 7, 3, 4.0, DType::f64),
               b = filled({4, 2}, 5, 9, 4, 4.0, DType::f64),
               c = filled({1, 2}, 1, 3, 1, 4.0, DType::f64);
  check_values(pad_sequence({a, b, c}, /*batch_first=*/true, -1.0), "pad_sequence", 1e-12);
}

TEST_CASE("idiom: pack_sequence([a, b, c], enforce_sorted=False)") {
  const Tensor a = filled({2, 2}, 3, 7, 3, 4.0, DType::f64),
               b = filled({4, 2}, 5, 9, 4, 4.0, DType::f64),
               c = filled({1, 2}, 1, 3, 1, 4.0, DType::f64);
  const PackedSequence packed = pack_sequence({a, b, c}, /*enforce_sorted=*/false);
  check_values(packed.data, "pack_sequence.data", 1e-12);
  check_values(packed.batch_sizes, "pack_sequence.batch_sizes", 0.0);
  check_values(packed.sorted_indices, "pack_sequence.sorted_indices", 0.0);
}
