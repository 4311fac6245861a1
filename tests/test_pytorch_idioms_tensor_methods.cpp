// PyTorch idioms translated line by line: Tensor's methods (recorded as torch's), detach, and a
// module called as module(x) with its hooks. Each case holds the torch lines as a comment, the
// depthgrad lines, and torch 1.13's values (tools/pytorch_idioms/tensor_methods.py), float64 at
// 1e-12 and float32 at 1e-6.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "tests/pytorch_idioms/tensor_methods_goldens.h"

using namespace dg;
namespace gold = tensor_methods_goldens;

namespace {

// The generator's pattern(): ((k·mul) % mod − shift) / div for k in 0..numel−1, float64.
Tensor pattern(const Shape& shape, int mul = 3, int mod = 7, int shift = 3, double div = 4.0) {
  std::vector<double> v(shape_numel(shape));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = (static_cast<double>((static_cast<int64_t>(k) * mul) % mod) - shift) / div;
  return Tensor::from_vector(v, shape, DType::f64);
}
Tensor loss_weights(const Shape& shape) { return pattern(shape, 5, 11, 5, 3.0); }
Tensor leaf(const Shape& shape) { return pattern(shape).set_requires_grad(true); }

void check_close(const std::vector<double>& got, const std::vector<double>& want,
                 double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", torch " << want[i]);
    CHECK(std::fabs(got[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i])));
  }
}

// out = fn(a) for a = pattern(shape) requiring grad; checks out and a.grad of sum(w ⊙ out).
template <class F>
void check_method(const Shape& shape, F fn, const std::vector<double>& out_golden,
                  const std::vector<double>& grad_golden) {
  Tensor a = leaf(shape);
  Tensor out = fn(a);
  CHECK(out.requires_grad());
  backward(sum(mul(out, loss_weights(out.shape()))));
  check_close(out.to_vector(), out_golden);
  REQUIRE(a.grad().defined());
  check_close(a.grad().to_vector(), grad_golden);
}

// A Linear(3, 2) with the generator's weights, float64.
std::unique_ptr<Linear> pattern_linear() {
  auto lin = std::make_unique<Linear>(3, 2, true, DType::f64);
  lin->weight.copy_from(pattern({2, 3}));
  lin->bias.copy_from(pattern({2}, 5));
  return lin;
}

// A user's module as a PyTorch user writes it: a plain forward, nothing else.
struct Net : Module {
  Linear* fc;
  Net() : Module(DType::f64) { fc = &register_module("fc", pattern_linear()); }
  Tensor forward(const Tensor& x) const override { return tanh((*fc)(x)); }
};

// The same, with a forward that is not const (libtorch's examples write them so).
struct MutableNet : Module {
  Linear* fc;
  int calls = 0;
  MutableNet() : Module(DType::f64) { fc = &register_module("fc", pattern_linear()); }
  Tensor forward(const Tensor& x) override {
    ++calls;
    return tanh((*fc)(x));
  }
};

// A module whose class declares no forward(x) at all.
struct NoForward : Module {
  NoForward() : Module(DType::f64) {}
};

}  // namespace

TEST_CASE("idiom: (y.clone().sum() + y.sum()).backward()  # clone is recorded") {
  // lin = nn.Linear(3, 2); y = lin(x); (y.clone().sum() + y.sum()).backward()
  auto lin = pattern_linear();
  Tensor y = (*lin)(pattern({4, 3}, 2));
  backward(add(sum(y.clone()), sum(y)));
  check_close(lin->bias.grad().to_vector(), gold::clone_bias_grad);  // 8 = 2 paths × 4 rows
  check_close(lin->weight.grad().to_vector(), gold::clone_weight_grad);
}

TEST_CASE("idiom: (y.view(8) * w).sum().backward()  # a view passes the gradient") {
  auto lin = pattern_linear();
  Tensor y = (*lin)(pattern({4, 3}, 2));
  Tensor v = y.view({8});
  CHECK(v.requires_grad());
  backward(sum(mul(v, loss_weights({8}))));
  check_close(lin->bias.grad().to_vector(), gold::view_bias_grad);
  check_close(lin->weight.grad().to_vector(), gold::view_weight_grad);
}

TEST_CASE("idiom: a.transpose(0, 1)") {
  check_method(
      {2, 3}, [](const Tensor& a) { return a.transpose(0, 1); }, gold::transpose_out,
      gold::transpose_grad);
}
TEST_CASE("idiom: a.t().contiguous().view(-1)") {
  check_method(
      {2, 3}, [](const Tensor& a) { return a.transpose(0, 1).contiguous().view({-1}); },
      gold::t_contiguous_view_out, gold::t_contiguous_view_grad);
}
TEST_CASE("idiom: a.transpose(0, 1).reshape(6)") {
  check_method(
      {2, 3}, [](const Tensor& a) { return a.transpose(0, 1).reshape({6}); },
      gold::transpose_reshape_out, gold::transpose_reshape_grad);
}
TEST_CASE("idiom: a.permute(2, 0, 1)") {
  check_method(
      {2, 3, 4},
      [](const Tensor& a) {
        return a.permute({2, 0, 1});
      },
      gold::permute_out, gold::permute_grad);
}
TEST_CASE("idiom: a.narrow(1, 1, 2)") {
  check_method(
      {3, 4}, [](const Tensor& a) { return a.narrow(1, 1, 2); }, gold::narrow_out,
      gold::narrow_grad);
}
TEST_CASE("idiom: a.narrow(0, -2, 2)") {
  check_method(
      {3, 4}, [](const Tensor& a) { return a.narrow(0, -2, 2); }, gold::narrow_negative_out,
      gold::narrow_negative_grad);
}
TEST_CASE("idiom: a.expand(3, 4)") {
  check_method(
      {1, 4},
      [](const Tensor& a) {
        return a.expand({3, 4});
      },
      gold::expand_out, gold::expand_grad);
}
TEST_CASE("idiom: a.expand(2, -1, -1)  # -1 keeps a size") {
  Tensor a = leaf({3, 1});
  Tensor e = a.expand({2, -1, 4});
  CHECK(e.shape() == Shape{2, 3, 4});
  backward(sum(e));
  CHECK(a.grad().to_vector() == std::vector<double>{8, 8, 8});  // 2 · 4 copies of each
  CHECK_THROWS_WITH_AS(a.expand({-1, 3, 1}), doctest::Contains("new leading axis"),
                       std::invalid_argument);
}
TEST_CASE("idiom: a.unsqueeze(0).expand(2, 3)") {
  check_method(
      {3},
      [](const Tensor& a) {
        return a.unsqueeze(0).expand({2, 3});
      },
      gold::unsqueeze_expand_out, gold::unsqueeze_expand_grad);
}
TEST_CASE("idiom: a.flatten(1)") {
  check_method(
      {2, 3, 2}, [](const Tensor& a) { return a.flatten(1); }, gold::flatten_out,
      gold::flatten_grad);
}
TEST_CASE("idiom: a.squeeze(1)") {
  check_method(
      {3, 1, 2}, [](const Tensor& a) { return a.squeeze(1); }, gold::squeeze_out,
      gold::squeeze_grad);
}
TEST_CASE("idiom: a.view(2, -1)") {
  check_method(
      {3, 4},
      [](const Tensor& a) {
        return a.view({2, -1});
      },
      gold::view_infer_out, gold::view_infer_grad);
}
TEST_CASE("idiom: a.reshape(-1, 2)") {
  check_method(
      {3, 4},
      [](const Tensor& a) {
        return a.reshape({-1, 2});
      },
      gold::reshape_infer_out, gold::reshape_infer_grad);
}
TEST_CASE("idiom: a.t().view(2, 3, 4)  # a view of a transposed tensor where strides allow") {
  check_method(
      {4, 6},
      [](const Tensor& a) {
        Tensor v = a.transpose(0, 1).view({2, 3, 4});
        CHECK(v.storage() == a.storage());  // no copy, as torch
        return v;
      },
      gold::view_of_transposed_out, gold::view_of_transposed_grad);
}
TEST_CASE("idiom: a.t().view(-1)  # RuntimeError in torch: not viewable") {
  Tensor a = leaf({2, 3});
  CHECK_THROWS_WITH_AS(a.transpose(0, 1).view({-1}),
                       doctest::Contains("use reshape (copies when needed)"),
                       std::invalid_argument);
  CHECK(a.transpose(0, 1).reshape({-1}).to_vector() ==
        std::vector<double>{-0.75, -0.25, 0.0, 0.5, 0.75, -0.5});
}
TEST_CASE("idiom: (a.clone() * 2)  # clone of a leaf is not a leaf") {
  check_method(
      {5},
      [](const Tensor& a) {
        Tensor c = a.clone();
        CHECK_FALSE(c.is_leaf());
        CHECK(c.storage() != a.storage());
        return scale(c, 2.0);
      },
      gold::clone_leaf_out, gold::clone_leaf_grad);
}
TEST_CASE("idiom: a.transpose(0, 1).contiguous()") {
  check_method(
      {2, 3}, [](const Tensor& a) { return a.transpose(0, 1).contiguous(); },
      gold::contiguous_transposed_out, gold::contiguous_transposed_grad);
}
TEST_CASE("idiom: a.to(torch.float32).to(torch.float64) * a") {
  Tensor a = leaf({4});
  Tensor out = mul(a.to(DType::f32).to(DType::f64), a);
  backward(sum(mul(out, loss_weights({4}))));
  check_close(out.to_vector(), gold::to_float32_and_back_out);
  check_close(a.grad().to_vector(), gold::to_float32_and_back_grad);
}
TEST_CASE("idiom: a * a.detach()  # detach: the one way out of the graph") {
  check_method(
      {4},
      [](const Tensor& a) {
        Tensor d = a.detach();
        CHECK_FALSE(d.requires_grad());
        CHECK(d.storage() == a.storage());  // shares the values, as torch's detach
        return mul(a, d);
      },
      gold::detach_constant_out, gold::detach_constant_grad);
}

TEST_CASE("idiom: net.register_forward_pre_hook / register_forward_hook; net(x)") {
  // class Net(nn.Module): def forward(self, x): return torch.tanh(self.fc(x))
  // net.register_forward_pre_hook(lambda m, inp: (inp[0] + 1,))
  // net.register_forward_hook(lambda m, inp, out: out * 2)
  Net net;
  int pre_calls = 0, post_calls = 0;
  net.register_forward_pre_hook([&](const Module&, const std::vector<Tensor>& in) {
    ++pre_calls;
    return std::optional<std::vector<Tensor>>({add_scalar(in[0], 1.0)});
  });
  net.register_forward_hook([&](const Module&, const std::vector<Tensor>&, const Tensor& out) {
    ++post_calls;
    return scale(out, 2.0);
  });
  Tensor out = net(pattern({4, 3}, 2));
  CHECK(pre_calls == 1);
  CHECK(post_calls == 1);
  backward(sum(mul(out, loss_weights({4, 2}))));
  check_close(out.to_vector(), gold::hooked_net_out);
  check_close(net.fc->weight.grad().to_vector(), gold::hooked_net_weight_grad);
}

TEST_CASE("idiom: net.fc.register_forward_hook(...)  # a child's hook fires inside net(x)") {
  Net net;
  std::vector<Tensor> seen;
  net.fc->register_forward_hook([&](const Module&, const std::vector<Tensor>&, const Tensor& out) {
    seen.push_back(out.detach().clone());
    return Tensor();
  });
  net(pattern({4, 3}, 2));
  REQUIRE(seen.size() == 1);
  check_close(seen[0].to_vector(), gold::child_hook_seen);
}

TEST_CASE("module(x): a forward that is not const is the one called, with its hooks") {
  MutableNet net;
  int post_calls = 0;
  net.register_forward_hook([&](const Module&, const std::vector<Tensor>&, const Tensor&) {
    ++post_calls;
    return Tensor();
  });
  const Tensor x = pattern({4, 3}, 2);
  Tensor a = net(x);
  const MutableNet& as_const = net;
  Tensor b = as_const(x);
  CHECK(net.calls == 2);
  CHECK(post_calls == 2);
  Net reference;
  CHECK(a.to_vector() == reference(x).to_vector());
  CHECK(b.to_vector() == a.to_vector());
}

TEST_CASE("module(x): a built-in module's hooks run once per call, however it is called") {
  auto lin = pattern_linear();
  int calls = 0;
  lin->register_forward_hook([&](const Module&, const std::vector<Tensor>&, const Tensor&) {
    ++calls;
    return Tensor();
  });
  const Tensor x = pattern({4, 3}, 2);
  (*lin)(x);
  CHECK(calls == 1);
  lin->forward(x);  // the built-in forwards run their hooks when called directly, too
  CHECK(calls == 2);
}

TEST_CASE("module(x): a Sequential calls a user's module with its hooks") {
  Sequential seq(DType::f64);
  Net& inner = seq.add(std::make_unique<Net>());
  int calls = 0;
  inner.register_forward_hook([&](const Module&, const std::vector<Tensor>&, const Tensor&) {
    ++calls;
    return Tensor();
  });
  seq(pattern({4, 3}, 2));
  seq.forward(pattern({4, 3}, 2));
  CHECK(calls == 2);
}

TEST_CASE("module(x): a module with no forward(x) refuses, naming the forward to declare") {
  NoForward m;
  CHECK_THROWS_WITH_AS(m(pattern({2})), doctest::Contains("declares no forward(x)"),
                       std::logic_error);
  CHECK_THROWS_WITH_AS(m(pattern({2})), doctest::Contains("NoForward"), std::logic_error);
  CHECK_THROWS_WITH_AS(m(pattern({2})),
                       doctest::Contains("dg::Tensor forward(const dg::Tensor& x) const override"),
                       std::logic_error);
}
