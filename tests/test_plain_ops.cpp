// The fused ops against their plain twins (autograd/ops.h): plain_attention vs the path MicroLM
// runs (linear_rope / linear + attention_heads, and attention_heads' own RoPE), MHA and GQA, with
// and without RoPE and biases; plain_rms_norm vs rms_norm; plain_cross_entropy vs cross_entropy;
// plain_linear_cross_entropy vs linear_cross_entropy. Float64, forward values and every input's
// gradient, equal within 1e-13 relative to the largest value.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"

using namespace dg;

namespace {

// max |a − b| / (1 + max |b|)
double rel_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double m = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    m = std::isnan(x[i] - y[i]) ? INFINITY : std::max(m, std::fabs(x[i] - y[i]));
    s = std::max(s, std::fabs(y[i]));
  }
  return m / (1.0 + s);
}

// Runs f on `inputs` (gradients cleared first), backward with a random-weighted loss; returns the
// output followed by each input's gradient.
std::vector<Tensor> run(const std::function<Tensor()>& f, const std::vector<Tensor>& inputs,
                        uint64_t seed) {
  for (const Tensor& t : inputs) t.impl()->grad = Tensor();
  Tensor out = f();
  Tensor w = random_tensor(out.shape(), seed, 0.5, 1.5, false);
  backward(out.numel() == 1 ? out : sum(mul(out, w)));
  std::vector<Tensor> r{out};
  for (const Tensor& t : inputs) r.push_back(t.grad());
  return r;
}

void check_same(const std::vector<Tensor>& fused, const std::vector<Tensor>& plain, double tol) {
  REQUIRE(fused.size() == plain.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    CAPTURE(i);  // 0: the output, then the inputs' gradients in order
    REQUIRE(fused[i].defined());
    REQUIRE(plain[i].defined());
    CHECK(rel_diff(fused[i], plain[i]) < tol);
  }
}

}  // namespace

TEST_CASE("plain_attention equals the fused attention path MicroLM runs (MHA, GQA, RoPE, bias)") {
  struct Case {
    int64_t H, Hkv;
    double base;
    bool bias;
  };
  for (Case c : {Case{2, 2, 0.0, false}, Case{2, 2, 10000.0, true}, Case{4, 2, 10000.0, false},
                 Case{4, 1, 100.0, true}, Case{4, 2, 0.0, true}}) {
    CAPTURE(c.H);
    CAPTURE(c.Hkv);
    CAPTURE(c.base);
    CAPTURE(c.bias);
    const int64_t B = 2, T = 5, D = 8, hd = 4;
    Tensor u_qk = random_tensor({B, T, D}, 1), u_v = random_tensor({B, T, D}, 2);
    Tensor wq = random_tensor({c.H * hd, D}, 3), wk = random_tensor({c.Hkv * hd, D}, 4);
    Tensor wv = random_tensor({c.Hkv * hd, D}, 5);
    Tensor bq, bk, bv;
    std::vector<Tensor> inputs{u_qk, u_v, wq, wk, wv};
    if (c.bias) {
      bq = random_tensor({c.H * hd}, 6), bk = random_tensor({c.Hkv * hd}, 7);
      bv = random_tensor({c.Hkv * hd}, 8);
      inputs.insert(inputs.end(), {bq, bk, bv});
    }
    auto plain = [&] {
      return plain_attention(u_qk, u_v, wq, bq, wk, bk, wv, bv, c.H, c.Hkv, c.base);
    };
    // MicroLM's path (nn/layers.cpp): RoPE inside the Q and K projections, then attention_heads
    auto fused_in_projection = [&] {
      Tensor q = c.base > 0 ? linear_rope(u_qk, wq, bq, c.H, c.base) : linear(u_qk, wq, bq);
      Tensor k = c.base > 0 ? linear_rope(u_qk, wk, bk, c.Hkv, c.base) : linear(u_qk, wk, bk);
      return attention_heads(q, k, linear(u_v, wv, bv), c.H, c.Hkv);
    };
    // attention_heads rotating q and k itself
    auto fused_in_heads = [&] {
      return attention_heads(linear(u_qk, wq, bq), linear(u_qk, wk, bk), linear(u_v, wv, bv), c.H,
                             c.Hkv, c.base);
    };
    const std::vector<Tensor> reference = run(plain, inputs, 9);
    check_same(run(fused_in_projection, inputs, 9), reference, 1e-12);
    check_same(run(fused_in_heads, inputs, 9), reference, 1e-12);
  }
}

TEST_CASE("plain_attention is causal and its scale argument is honoured") {
  Tensor u = random_tensor({1, 4, 4}, 11), w = random_tensor({4, 4}, 12);
  Tensor a = plain_attention(u, u, w, Tensor(), w, Tensor(), w, Tensor(), 1, 1, 0.0, 0.3);
  // the first position attends to itself only: its output is its own value projection
  const std::vector<double> out = a.to_vector(), v = linear(u, w).to_vector();
  for (int d = 0; d < 4; ++d) CHECK(out[d] == doctest::Approx(v[d]).epsilon(1e-14));
  Tensor f = attention_heads(linear(u, w), linear(u, w), linear(u, w), 1, 1, 0.0, 0.3);
  CHECK(rel_diff(a, f) < 1e-13);
}

TEST_CASE("plain_rms_norm equals rms_norm (value, dx, dw)") {
  for (double eps : {1e-6, 0.5}) {
    CAPTURE(eps);
    Tensor x = random_tensor({3, 4, 6}, 21, -2, 2), w = random_tensor({6}, 22, 0.5, 1.5);
    check_same(run([&] { return rms_norm(x, w, eps); }, {x, w}, 23),
               run([&] { return plain_rms_norm(x, w, eps); }, {x, w}, 23), 1e-13);
  }
}

TEST_CASE("plain_cross_entropy equals cross_entropy (value, dlogits, ignored rows, ignore_index)") {
  // logits up to ±30: the row max shift matters (exp(30) alone is fine, but the sums must agree)
  Tensor x = random_tensor({7, 9}, 41, -30, 30);
  Tensor targets = Tensor::from_ids({3, -100, 0, 8, 7, -100, 1}, {7});
  check_same(run([&] { return cross_entropy(x, targets); }, {x}, 42),
             run([&] { return plain_cross_entropy(x, targets); }, {x}, 42), 1e-13);
  Tensor y = random_tensor({5, 4}, 43, -2, 2);
  Tensor t1 = Tensor::from_ids({1, 0, 3, 1, 2}, {5});  // ignore_index 1: rows 0 and 3 ignored
  check_same(run([&] { return cross_entropy(y, t1, Reduction::mean, 1); }, {y}, 44),
             run([&] { return plain_cross_entropy(y, t1, Reduction::mean, 1); }, {y}, 44), 1e-13);
}

TEST_CASE("plain_cross_entropy: every target ignored gives NaN and a zero gradient, as fused") {
  Tensor x = random_tensor({3, 4}, 45, -2, 2);
  Tensor targets = Tensor::from_ids({-100, -100, -100}, {3});
  Tensor loss = plain_cross_entropy(x, targets);
  CHECK(std::isnan(loss.item()));
  backward(loss);
  REQUIRE(x.grad().defined());
  for (double v : x.grad().to_vector()) CHECK(v == 0.0);
  CHECK_THROWS_WITH(plain_cross_entropy(x, Tensor::from_ids({0, 4, 1}, {3})),
                    doctest::Contains("plain_cross_entropy: target 4 at row 1 is out of range"));
}

TEST_CASE("plain_linear_cross_entropy equals linear_cross_entropy (value, dx, dW, ignored rows)") {
  Tensor x = random_tensor({6, 5}, 31, -1.5, 1.5), w = random_tensor({11, 5}, 32, -1.5, 1.5);
  Tensor targets = Tensor::from_ids({3, -100, 0, 10, 7, -100}, {6});
  check_same(run([&] { return linear_cross_entropy(x, w, targets); }, {x, w}, 33),
             run([&] { return plain_linear_cross_entropy(x, w, targets); }, {x, w}, 33), 1e-13);
}
