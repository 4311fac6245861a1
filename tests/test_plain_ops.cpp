// The fused ops against their plain twins (autograd/ops.h), one test each: plain_attention vs the
// path MicroLM runs (linear_rope / linear + attention_heads, and attention_heads' own RoPE), MHA
// and GQA, with and without RoPE and biases; plain_rms_norm vs rms_norm; plain_cross_entropy vs
// cross_entropy; plain_linear_cross_entropy vs linear_cross_entropy; plain_layer_norm,
// plain_swiglu, plain_linear_add, plain_linear_rope, plain_depth_mix, plain_causal_attention,
// plain_scaled_dot_product_attention, plain_lstm_cell and plain_gru_cell vs their fused ops; the
// plain attentions' causal_mask.
// Float64, forward values and every input's gradient (a random-weighted loss), equal within 1e-13
// relative to the largest value (1e-12 for attention).
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

TEST_CASE("causal_mask: 0 on and below the diagonal, -inf above; refuses T < 0 and integers") {
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor mask = causal_mask(3, dtype);
    CHECK(mask.shape() == Shape{3, 3});
    CHECK(mask.dtype() == dtype);
    const std::vector<double> m = mask.to_vector();
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) CHECK(m[i * 3 + j] == (j > i ? -INFINITY : 0.0));
  }
  CHECK(causal_mask(0, DType::f64).numel() == 0);
  CHECK_THROWS_WITH_AS(causal_mask(-1, DType::f64), doctest::Contains("causal_mask"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(causal_mask(2, DType::i64), doctest::Contains("int64"),
                       std::invalid_argument);
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

TEST_CASE("plain_layer_norm equals layer_norm (value, dx, dw, db; with and without bias)") {
  for (double eps : {1e-5, 0.5})
    for (bool with_bias : {true, false}) {
      CAPTURE(eps);
      CAPTURE(with_bias);
      Tensor x = random_tensor({3, 4, 6}, 51, -2, 2), w = random_tensor({6}, 52, 0.5, 1.5);
      Tensor b = with_bias ? random_tensor({6}, 53) : Tensor();
      std::vector<Tensor> inputs{x, w};
      if (with_bias) inputs.push_back(b);
      check_same(run([&] { return layer_norm(x, w, b, eps); }, inputs, 54),
                 run([&] { return plain_layer_norm(x, w, b, eps); }, inputs, 54), 1e-13);
    }
}

TEST_CASE("plain_swiglu equals swiglu (value, dgate, dup; gate and up the same tensor)") {
  Tensor gate = random_tensor({4, 7}, 61, -3, 3), up = random_tensor({4, 7}, 62, -2, 2);
  check_same(run([&] { return swiglu(gate, up); }, {gate, up}, 63),
             run([&] { return plain_swiglu(gate, up); }, {gate, up}, 63), 1e-13);
  Tensor x = random_tensor({2, 3, 5}, 64, -3, 3);
  check_same(run([&] { return swiglu(x, x); }, {x}, 65),
             run([&] { return plain_swiglu(x, x); }, {x}, 65), 1e-13);
  CHECK_THROWS_WITH(plain_swiglu(gate, random_tensor({4, 1}, 66)),
                    doctest::Contains("plain_swiglu: gate"));
}

TEST_CASE("plain_linear_add equals linear_add (value, dresidual, dx, dW, db)") {
  Tensor r = random_tensor({2, 3, 5}, 71), x = random_tensor({2, 3, 4}, 72);
  Tensor w = random_tensor({5, 4}, 73), b = random_tensor({5}, 74);
  check_same(run([&] { return linear_add(r, x, w, b); }, {r, x, w, b}, 75),
             run([&] { return plain_linear_add(r, x, w, b); }, {r, x, w, b}, 75), 1e-13);
  // no bias, a transposed residual, x passed as the weight too
  Tensor s = random_tensor({5, 5}, 76), v = random_tensor({5, 4}, 77);
  check_same(run([&] { return linear_add(transpose(s, 0, 1), v, v); }, {s, v}, 78),
             run([&] { return plain_linear_add(transpose(s, 0, 1), v, v); }, {s, v}, 78), 1e-13);
}

TEST_CASE("plain_linear_rope equals linear_rope (value, dx, dW, db; 3-D and 2-D inputs)") {
  Tensor x = random_tensor({2, 5, 4}, 81), w = random_tensor({12, 4}, 82);
  Tensor b = random_tensor({12}, 83);
  check_same(run([&] { return linear_rope(x, w, b, 2, 100.0); }, {x, w, b}, 84),
             run([&] { return plain_linear_rope(x, w, b, 2, 100.0); }, {x, w, b}, 84), 1e-13);
  Tensor x2 = random_tensor({6, 3}, 85), w2 = random_tensor({8, 3}, 86);  // 2 heads of 4
  check_same(run([&] { return linear_rope(x2, w2, Tensor(), 2); }, {x2, w2}, 87),
             run([&] { return plain_linear_rope(x2, w2, Tensor(), 2); }, {x2, w2}, 87), 1e-13);
}

TEST_CASE("plain_depth_mix equals depth_mix (value, every source's and alpha's gradient)") {
  for (int64_t J : {1, 2, 3}) {
    CAPTURE(J);
    std::vector<Tensor> sources;
    for (int64_t j = 0; j < J; ++j) sources.push_back(random_tensor({2, 3, 4}, 90 + j));
    Tensor alpha = random_tensor({2, 3, J}, 95, 0.1, 1.0);
    std::vector<Tensor> inputs = sources;
    inputs.push_back(alpha);
    check_same(run([&] { return depth_mix(sources, alpha); }, inputs, 96),
               run([&] { return plain_depth_mix(sources, alpha); }, inputs, 96), 1e-13);
  }
  // one source passed twice: its gradient is the sum of both terms' in either form
  Tensor s = random_tensor({3, 4}, 97), alpha = random_tensor({3, 2}, 98, 0.1, 1.0);
  check_same(run(
                 [&] {
                   return depth_mix({s, s}, alpha);
                 },
                 {s, alpha}, 99),
             run(
                 [&] {
                   return plain_depth_mix({s, s}, alpha);
                 },
                 {s, alpha}, 99),
             1e-13);
}

TEST_CASE("plain_causal_attention equals causal_attention (value, dq, dk, dv; MHA, GQA, scale)") {
  struct Case {
    int64_t H, Hkv;
    double scale;
  };
  for (Case c : {Case{2, 2, 0.0}, Case{4, 2, 0.0}, Case{4, 1, 0.3}}) {
    CAPTURE(c.H);
    CAPTURE(c.Hkv);
    CAPTURE(c.scale);
    Tensor q = random_tensor({2, c.H, 5, 4}, 101, -1.5, 1.5);
    Tensor k = random_tensor({2, c.Hkv, 5, 4}, 102, -1.5, 1.5);
    Tensor v = random_tensor({2, c.Hkv, 5, 4}, 103, -1.5, 1.5);
    check_same(run([&] { return causal_attention(q, k, v, c.scale); }, {q, k, v}, 104),
               run([&] { return plain_causal_attention(q, k, v, c.scale); }, {q, k, v}, 104),
               1e-12);
  }
}

TEST_CASE("plain_scaled_dot_product_attention equals the fused op (value and every gradient)") {
  const Tensor keep =
      Tensor::from_vector(std::vector<bool>{1, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0},
                          {3, 5});  // True = the key takes part; row 2 keeps no key
  Tensor q = random_tensor({2, 2, 3, 4}, 111, -1.5, 1.5);
  Tensor k = random_tensor({2, 1, 5, 4}, 112, -1.5, 1.5);  // broadcast over the heads
  Tensor v = random_tensor({2, 2, 5, 3}, 113, -1.5, 1.5);
  Tensor m = random_tensor({2, 1, 3, 5}, 114, -2, 2);
  check_same(run([&] { return scaled_dot_product_attention(q, k, v, keep); }, {q, k, v}, 115),
             run([&] { return plain_scaled_dot_product_attention(q, k, v, keep); }, {q, k, v}, 115),
             1e-12);
  check_same(
      run([&] { return scaled_dot_product_attention(q, k, v, m, false, 0.6); }, {q, k, v, m}, 116),
      run([&] { return plain_scaled_dot_product_attention(q, k, v, m, false, 0.6); }, {q, k, v, m},
          116),
      1e-12);
  check_same(
      run([&] { return scaled_dot_product_attention(q, k, v, Tensor(), true); }, {q, k, v}, 117),
      run([&] { return plain_scaled_dot_product_attention(q, k, v, Tensor(), true); }, {q, k, v},
          117),
      1e-12);
}

TEST_CASE("plain_lstm_cell and plain_gru_cell equal lstm_cell and gru_cell (value, every input)") {
  Tensor gx = random_tensor({3, 20}, 121, -3, 3), gh = random_tensor({3, 20}, 122, -3, 3);
  Tensor c = random_tensor({3, 5}, 123, -2, 2);
  auto both = [](const HiddenAndCell& r) { return cat({r.h, r.c}, 1); };
  check_same(run([&] { return both(lstm_cell(gx, gh, c)); }, {gx, gh, c}, 124),
             run([&] { return both(plain_lstm_cell(gx, gh, c)); }, {gx, gh, c}, 124), 1e-13);
  check_same(run([&] { return lstm_cell(gx, gh, c).h; }, {gx, gh, c}, 125),
             run([&] { return plain_lstm_cell(gx, gh, c).h; }, {gx, gh, c}, 125), 1e-13);
  Tensor rx = random_tensor({3, 15}, 126, -3, 3), rh = random_tensor({3, 15}, 127, -3, 3);
  check_same(run([&] { return gru_cell(rx, rh, c); }, {rx, rh, c}, 128),
             run([&] { return plain_gru_cell(rx, rh, c); }, {rx, rh, c}, 128), 1e-13);
  check_same(run([&] { return gru_cell(rx, rx, c); }, {rx, c}, 129),  // one tensor as both
             run([&] { return plain_gru_cell(rx, rx, c); }, {rx, c}, 129), 1e-13);
}
