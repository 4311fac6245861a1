// Variable-length batches through RNN, LSTM and GRU, as torch.nn.utils.rnn's: pack_padded_sequence
// (batch_first both ways, sorted and unsorted lengths), the recurrent layers' forward on a
// PackedSequence and pad_packed_sequence, against torch 1.13 (tests/nn_misc_goldens.h, written by
// tools/torch_goldens_nn_misc.py): packed data, outputs, final states and every gradient, in
// float64 at 1e-12, with the fused and the composed gate math; gradcheck through the module; and
// the refusals. The point: padding never reaches a sequence's outputs or states (a bidirectional
// layer's reverse half starts at each sequence's last valid step).
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "nn/recurrent.h"
#include "tests/kernel_test_helpers.h"
#include "tests/nn_misc_goldens.h"
#include "tests/nn_test_helpers.h"

using namespace dg;
using namespace dg::nn_test;
using nn_misc_goldens::kPackedGoldens;

namespace {
Tensor filled(const Shape& shape, int mul, int mod, int shift, double div, DType dtype,
              bool requires_grad = true) {
  Tensor t = Tensor::from_vector(pattern(shape_numel(shape), mul, mod, shift, div), shape, dtype);
  if (requires_grad) t.set_requires_grad(true);
  return t;
}
// The script's set_parameters: parameter k of the state dict, in order, gets a fixed pattern.
void set_parameters(const Module& m) {
  int k = 0;
  for (const auto& [name, p] : m.named_parameters()) {
    const int mod = 13 + k;
    Tensor(p).copy_from(
        filled(p.shape(), 3 + 2 * (k % 5), mod, mod / 2, 2.0 * mod, p.dtype(), false));
    ++k;
  }
}
struct Case {
  std::string name;
  RecurrentKind kind;
  RecurrentOptions options;
  Shape x_shape;
  std::vector<int64_t> lengths;
  bool enforce_sorted, with_h, with_c;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"gru_bi_bf",
       RecurrentKind::gru,
       {.input_size = 3, .hidden_size = 4, .batch_first = true, .bidirectional = true},
       {4, 5, 3},
       {3, 5, 1, 4},
       false,
       true,
       false},
      {"lstm_2l_bi",
       RecurrentKind::lstm,
       {.input_size = 3, .hidden_size = 4, .num_layers = 2, .bidirectional = true},
       {5, 3, 3},
       {5, 3, 2},
       true,
       true,
       true},
      {"rnn_relu_bi",
       RecurrentKind::rnn_relu,
       {.input_size = 3, .hidden_size = 4, .bidirectional = true},
       {4, 3, 3},
       {2, 4, 1},
       false,
       false,
       false},
      {"lstm_bf_ties",
       RecurrentKind::lstm,
       {.input_size = 2, .hidden_size = 3, .batch_first = true, .bidirectional = true},
       {3, 3, 2},
       {2, 3, 2},
       false,
       false,
       false},
      {"gru_2l",
       RecurrentKind::gru,
       {.input_size = 2, .hidden_size = 3, .num_layers = 2, .batch_first = true},
       {3, 4, 2},
       {4, 1, 3},
       false,
       true,
       false},
  };
  return all;
}
std::vector<double> golden(const std::string& key) {
  CAPTURE(key);
  REQUIRE(kPackedGoldens.count(key) == 1);
  return kPackedGoldens.at(key);
}
Shape state_shape(const Case& c) {
  const int64_t D = c.options.bidirectional ? 2 : 1;
  const int64_t B = c.options.batch_first ? c.x_shape[0] : c.x_shape[1];
  return {c.options.num_layers * D, B, c.options.hidden_size};
}

void check_case(const Case& c, GateMath math) {
  CAPTURE(c.name);
  const double tol = 1e-12;
  Recurrent m(c.kind, c.options, DType::f64);
  m.gate_math = math;
  set_parameters(m);
  const Tensor x = filled(c.x_shape, 7, 23, 11, 8.0, DType::f64);
  const Tensor h = c.with_h ? filled(state_shape(c), 5, 11, 5, 8.0, DType::f64) : Tensor();
  const Tensor cc = c.with_c ? filled(state_shape(c), 3, 13, 6, 8.0, DType::f64) : Tensor();
  const PackedSequence packed =
      pack_padded_sequence(x, c.lengths, c.options.batch_first, c.enforce_sorted);
  const std::string n = c.name + ".";
  check_close(packed.data.to_vector(), golden(n + "packed_data"), 0.0);
  check_close(packed.batch_sizes.to_vector(), golden(n + "batch_sizes"), 0.0);
  CHECK(packed.sorted_indices.defined() == !c.enforce_sorted);
  if (!c.enforce_sorted) {
    check_close(packed.sorted_indices.to_vector(), golden(n + "sorted_indices"), 0.0);
    check_close(packed.unsorted_indices.to_vector(), golden(n + "unsorted_indices"), 0.0);
  }
  const PackedRecurrentOutput r = m.forward(packed, h, cc);
  check_close(r.output.data.to_vector(), golden(n + "output_data"), tol);
  const PaddedSequence padded = pad_packed_sequence(r.output, c.options.batch_first);
  check_close(padded.padded.contiguous().to_vector(), golden(n + "padded"), tol);
  check_close(padded.lengths.to_vector(), golden(n + "lengths"), 0.0);
  check_close(r.h_n.to_vector(), golden(n + "h_n"), tol);
  Tensor loss =
      add(sum(mul(padded.padded, filled(padded.padded.shape(), 3, 11, 5, 4.0, DType::f64, false))),
          sum(mul(r.h_n, filled(r.h_n.shape(), 5, 7, 3, 4.0, DType::f64, false))));
  if (r.c_n.defined()) {
    check_close(r.c_n.to_vector(), golden(n + "c_n"), tol);
    loss = add(loss, sum(mul(r.c_n, filled(r.c_n.shape(), 2, 9, 4, 4.0, DType::f64, false))));
  }
  backward(loss);
  check_close(x.grad().to_vector(), golden(n + "dinput"), tol);
  if (h.defined()) check_close(h.grad().to_vector(), golden(n + "dh0"), tol);
  if (cc.defined()) check_close(cc.grad().to_vector(), golden(n + "dc0"), tol);
  for (const auto& entry : m.named_parameters()) {
    const std::string& name = entry.first;
    const Tensor& p = entry.second;
    CAPTURE(name);
    check_close(p.grad().to_vector(), golden(n + "d" + name), tol);
  }
}
}  // namespace

TEST_CASE("packed sequences through RNN, LSTM, GRU match torch 1.13 (values, states, gradients)") {
  for (const Case& c : cases()) {
    check_case(c, GateMath::fused);
    check_case(c, GateMath::composed);
  }
}

TEST_CASE("packed sequences: appended padding no longer changes a bidirectional GRU's outputs") {
  manual_seed(5);
  GRU gru({.input_size = 2, .hidden_size = 3, .batch_first = true, .bidirectional = true},
          DType::f64);
  const Tensor x = filled({2, 4, 2}, 5, 17, 8, 6.0, DType::f64, false);
  const Tensor longer = cat({x, Tensor::full({2, 3, 2}, 7.0, DType::f64)}, 1);  // 3 pad steps
  const std::vector<int64_t> lengths = {4, 2};
  const PackedRecurrentOutput a = gru.forward(pack_padded_sequence(x, lengths, true, false));
  const PackedRecurrentOutput b = gru.forward(pack_padded_sequence(longer, lengths, true, false));
  CHECK(a.output.data.to_vector() == b.output.data.to_vector());
  CHECK(a.h_n.to_vector() == b.h_n.to_vector());
  // each sequence alone, cut to its length, gives its valid steps and its final states
  const Tensor padded_out = pad_packed_sequence(a.output, true).padded;  // [2, 4, 6]
  for (int64_t n = 0; n < 2; ++n) {
    CAPTURE(n);
    const Tensor alone = slice(slice(x, 0, n, n + 1), 1, 0, lengths[n]);  // [1, L, 2]
    const RecurrentOutput r = gru.forward(alone);
    check_close(r.output.contiguous().to_vector(),
                slice(slice(padded_out, 0, n, n + 1), 1, 0, lengths[n]).contiguous().to_vector(),
                1e-12);
    check_close(r.h_n.contiguous().to_vector(), slice(a.h_n, 1, n, n + 1).contiguous().to_vector(),
                1e-12);
  }
  // total_length pads back to the input's length, with padding_value
  const PaddedSequence p = pad_packed_sequence(b.output, true, -1.0, 7);
  CHECK(p.padded.shape() == Shape{2, 7, 6});
  CHECK(p.padded.at({1, 2, 0}) == -1.0);
  CHECK(p.padded.at({0, 4, 5}) == -1.0);
  CHECK(p.padded.at({0, 3, 0}) == a.output.data.at({5, 0}));  // sequence 0's last step
}

TEST_CASE("packed sequences: gradcheck through pack, a bidirectional LSTM and pad (float64)") {
  manual_seed(11);
  LSTM lstm({.input_size = 2,
             .hidden_size = 3,
             .num_layers = 2,
             .batch_first = true,
             .bidirectional = true},
            DType::f64);
  const std::vector<int64_t> lengths = {2, 3, 1};
  const Tensor x = filled({3, 3, 2}, 5, 17, 8, 6.0, DType::f64);
  const Tensor h0 = filled({4, 3, 3}, 3, 11, 5, 9.0, DType::f64);
  const Tensor c0 = filled({4, 3, 3}, 7, 13, 6, 9.0, DType::f64);
  GradcheckOptions opt;  // random directions for the parameters, as test_recurrent.cpp's
  opt.full_max_numel = 256;
  opt.jacobian_max_entries = 0;
  std::vector<Tensor> inputs = {x, h0, c0};
  for (const auto& [name, p] : lstm.named_parameters()) inputs.push_back(p);
  expect_gradcheck(
      "packed LSTM",
      [&](const std::vector<Tensor>& in) {
        const PackedRecurrentOutput r =
            lstm.forward(pack_padded_sequence(in[0], lengths, true, false), in[1], in[2]);
        const Tensor padded = pad_packed_sequence(r.output, true).padded;
        return cat({reshape(padded, {-1}), reshape(r.h_n, {-1}), reshape(r.c_n, {-1})}, 0);
      },
      inputs, opt);
}

TEST_CASE("packed sequences: refusals name the function and the argument") {
  const Tensor x = Tensor::zeros({4, 3, 2});  // [T, B, in]
  auto says = [](const std::function<void()>& fn, const std::vector<std::string>& parts) {
    const std::string message = invalid_argument_of(fn);
    for (const std::string& part : parts) {
      CAPTURE(message);
      CHECK(contains(message, part));
    }
  };
  says(
      [&] {
        pack_padded_sequence(x, {3, 4, 2});
      },
      {"pack_padded_sequence", "sorted in decreasing order", "enforce_sorted"});
  says(
      [&] {
        pack_padded_sequence(x, {3, 0, 2}, false, false);
      },
      {"pack_padded_sequence", "greater than 0", "lengths[1]"});
  says([&] { pack_padded_sequence(x, {5, 2, 1}); }, {"pack_padded_sequence", "lengths[0] = 5"});
  says([&] { pack_padded_sequence(x, {3, 2}); }, {"pack_padded_sequence", "batch_size=3"});
  says([&] { pack_padded_sequence(x, Tensor::zeros({3})); }, {"pack_padded_sequence", "int64"});
  says([&] { pack_padded_sequence(Tensor::zeros({4}), {1}); },
       {"pack_padded_sequence", "[T, B, *]"});
  const PackedSequence packed = pack_padded_sequence(x, {4, 2, 1});
  says([&] { pad_packed_sequence(packed, false, 0.0, 3); },
       {"pad_packed_sequence", "total_length=3", "being 4"});
  PackedSequence broken = packed;
  broken.data = Tensor::zeros({5, 2});
  says([&] { pad_packed_sequence(broken); }, {"pad_packed_sequence", "sum(batch_sizes) = 7"});
  says([] { pad_sequence({}); }, {"pad_sequence", "empty"});
  says(
      [] {
        pad_sequence({Tensor::zeros({2, 3}), Tensor::zeros({1, 4})});
      },
      {"pad_sequence", "trailing shape [3]"});
  says(
      [] {
        pack_sequence({Tensor::zeros({1, 2}), Tensor::zeros({2, 2})});
      },
      {"pack_padded_sequence", "enforce_sorted"});
  GRU gru({.input_size = 2, .hidden_size = 3});
  says(
      [&] {
        gru.forward(pack_padded_sequence(Tensor::zeros({4, 3, 5}), {4, 2, 1}));
      },
      {"GRU", "input_size = 2"});
  says(
      [&] {
        gru.forward(pack_padded_sequence(Tensor::zeros({4, 3, 2}, DType::f64), {4, 2, 1}));
      },
      {"GRU", "dtype"});
  says([&] { gru.forward(packed, Tensor::zeros({1, 2, 3})); }, {"GRU", "h0"});
}
