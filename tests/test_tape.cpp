// The tape's gradient contract (autograd/tape.h) and ownership rules (autograd/grad_sink.h), one
// test per rule: accumulate_grad and the fast kernels' GradSink, buffers taken over only when
// nobody else can see them, aliasing inputs, set_grad views, repeated backward and keep_graph.
// Each test is built so that breaking its rule changes a value or a storage identity it checks.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>

#include "autograd/grad_sink.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"

using namespace dg;

namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector(); }

bool shares_storage(const Tensor& a, const Tensor& b) {
  return a.storage().get() == b.storage().get();
}

// max |a − b| over equal-sized vectors
double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// A random-weighted scalar loss of y (so every output element has its own weight).
Tensor weighted_sum(const Tensor& y, uint64_t seed) {
  return sum(mul(y, random_tensor(y.shape(), seed, 0.5, 1.5, false)));
}

// The custom op of autograd/README.md ("How to add an op"), written as a learner would.
// y = x³ elementwise; dy/dx = 3x².
dg::Tensor cube(const dg::Tensor& x) {
  dg::Tensor out;
  {
    dg::NoGradGuard no_grad;  // the forward's steps are not recorded one by one
    out = dg::mul(dg::mul(x, x), x);
  }
  if (dg::should_record({x}))
    dg::record("cube", {x}, out, [x](const dg::Tensor& g) {  // the walk records nothing
      dg::accumulate_grad(x, dg::mul(g, dg::scale(dg::mul(x, x), 3.0)));  // g · 3x²
    });
  return out;
}

}  // namespace

TEST_CASE("a custom op written with accumulate_grad alone passes gradcheck (autograd/README.md)") {
  auto r = gradcheck("cube", [](const std::vector<Tensor>& in) { return cube(in[0]); },
                     {random_tensor({3, 4}, 1)});
  CHECK_MESSAGE(r.passed, r.message);
  // a tensor read by two nodes gets both contributions: d(x³ + x³)/dx = 6x²
  Tensor x = random_tensor({5}, 2);
  backward(sum(add(cube(x), cube(x))));
  const std::vector<double> xv = values(x), gv = values(x.grad());
  for (size_t i = 0; i < xv.size(); ++i) CHECK(gv[i] == doctest::Approx(6 * xv[i] * xv[i]));
}

// ---- the two ways to write a gradient ----------------------------------------------------------

TEST_CASE("GradSink: a fresh gradient is the input's own buffer; an existing one is added into") {
  Tensor x = random_tensor({2, 3}, 1);
  {
    GradSink sink(x);
    CHECK(sink.direct);
    CHECK(sink.fresh);
    CHECK(sink.beta<double>() == 0.0);
    REQUIRE(x.grad().defined());
    CHECK(shares_storage(sink.buffer, x.grad()));  // written in place: no scratch, no zeros
    sink.buffer.fill(2.0);
    sink.finish();
  }
  {
    GradSink sink(x);  // x has a gradient now: the kernel must add (beta 1)
    CHECK(sink.direct);
    CHECK_FALSE(sink.fresh);
    CHECK(sink.beta<double>() == 1.0);
    sink.zero_if_fresh();  // not fresh: leaves the 2s alone
    for (int64_t i = 0; i < 6; ++i) sink.data<double>()[i] += 1.0;
    sink.finish();
  }
  CHECK(values(x.grad()) == std::vector<double>(6, 3.0));
}

TEST_CASE(
    "GradSink: an input that is also another input of the op writes scratch, added by finish()") {
  Tensor x = random_tensor({4}, 2);
  GradSink first(x, {x});
  CHECK_FALSE(first.direct);
  CHECK(first.fresh);
  CHECK_FALSE(x.grad().defined());  // nothing installed until finish()
  first.buffer.fill(1.0);
  GradSink second(x, {x});  // the second contribution of the same tensor, before the first lands
  CHECK_FALSE(shares_storage(first.buffer, second.buffer));
  second.buffer.fill(10.0);
  first.finish();
  second.finish();
  CHECK(values(x.grad()) == std::vector<double>(4, 11.0));
  // other inputs that are different tensors leave the buffer direct
  Tensor y = random_tensor({4}, 4);
  GradSink sink(y, {x, dg::raw::clone(y)});
  CHECK(sink.direct);
}

// ---- rule 1: a gradient buffer belongs to one tensor -------------------------------------------

TEST_CASE("rule 1: backward leaves grad_root alone (it is copied, never taken over)") {
  // y = reshape(x + x·x): reshape's backward hands a view of its gradient on, and x collects two
  // contributions, so a taken-over caller's buffer would be written into.
  Tensor x = random_tensor({2, 3}, 61).set_requires_grad(true);
  Tensor y = reshape(add(x, mul(x, x)), {3, 2});
  Tensor dout = random_tensor({3, 2}, 62);
  const std::vector<double> before = dout.to_vector();
  backward(y, dout);
  CHECK(dout.to_vector() == before);
  CHECK_FALSE(shares_storage(x.grad(), dout));
  std::vector<double> g = x.grad().to_vector(), xv = x.to_vector(), d = before;
  for (size_t i = 0; i < g.size(); ++i)
    CHECK(g[i] == doctest::Approx(d[i] * (1 + 2 * xv[i])).epsilon(1e-12));
}

TEST_CASE("rule 1: grad_root given as a view of the caller's tensor stays the caller's") {
  Tensor base = random_tensor({3, 2}, 63, -1, 1, false);
  const std::vector<double> before = base.to_vector();
  Tensor x = random_tensor({2, 3}, 64);
  Tensor y = transpose(x, 0, 1);  // [3, 2]
  backward(y, dg::raw::view_reshape(base, {3, 2}));
  backward(transpose(x, 0, 1),
           dg::raw::view_reshape(base, {3, 2}));  // a second walk adds into x.grad
  CHECK(base.to_vector() == before);
  CHECK_FALSE(shares_storage(x.grad(), base));
}

TEST_CASE(
    "rule 1: a node's gradient buffer is given to at most one input, even as a view and as "
    "itself") {
  // A hand-made op out = a + b (same shapes) whose backward passes a full view of g to a and then
  // g itself to b: both may be taken over alone, but not both at once.
  Tensor a = random_tensor({2, 3}, 63).set_requires_grad(true);
  Tensor b = random_tensor({2, 3}, 64).set_requires_grad(true);
  Tensor out = Tensor::empty({2, 3}, a.dtype());
  out.copy_from(a);
  record("test_view_then_self", {a, b}, out, [a, b](const Tensor& g) {
    accumulate_grad(a, dg::raw::view_reshape(g, {2, 3}));
    accumulate_grad(b, g);
  });
  backward(out, Tensor::ones({2, 3}, a.dtype()));
  REQUIRE(a.grad().defined());
  REQUIRE(b.grad().defined());
  CHECK(a.grad().storage().get() != b.grad().storage().get());
}

TEST_CASE("rule 1: a gradient nobody else sees is taken over, not copied (the fast path)") {
  // g itself, and a temporary of the backward, become the inputs' gradients: no zeros, no copy.
  Tensor a = random_tensor({2, 3}, 69), b = random_tensor({2, 3}, 70);
  Tensor out = Tensor::zeros({2, 3}, DType::f64);
  const Storage* given_g = nullptr;
  const Storage* given_t = nullptr;
  record("test_take_over", {a, b}, out, [a, b, &given_g, &given_t](const Tensor& g) {
    given_g = g.storage().get();
    accumulate_grad(a, g);
    Tensor t = scale(g, 2.0);
    given_t = t.storage().get();
    accumulate_grad(b, t);
  });
  backward(out, Tensor::ones({2, 3}, DType::f64));
  CHECK(a.grad().storage().get() == given_g);
  CHECK(b.grad().storage().get() == given_t);
  CHECK(values(b.grad()) == std::vector<double>(6, 2.0));
}

TEST_CASE(
    "rule 1: one temporary handed to two inputs is taken by the first and copied into the second") {
  Tensor a = random_tensor({3}, 65), b = random_tensor({3}, 66);
  Tensor out = Tensor::zeros({3}, DType::f64);
  record("test_one_buffer_two_inputs", {a, b}, out, [a, b](const Tensor& g) {
    Tensor t = dg::raw::clone(g);  // a temporary of this backward
    accumulate_grad(a, t);
    accumulate_grad(b, t);
  });
  backward(out, Tensor::from_vector({1, 2, 3}, {3}, DType::f64));
  REQUIRE(a.grad().defined());
  REQUIRE(b.grad().defined());
  CHECK_FALSE(shares_storage(a.grad(), b.grad()));
  // a later contribution to a alone must not show up in b
  backward(scale(a, 10.0), Tensor::ones({3}, DType::f64));
  CHECK(values(a.grad()) == std::vector<double>{11, 12, 13});
  CHECK(values(b.grad()) == std::vector<double>{1, 2, 3});
}

TEST_CASE("rule 1: a view of a temporary the backward still holds is added, not taken over") {
  Tensor a = random_tensor({2, 2}, 67), b = random_tensor({4}, 68);
  Tensor out = Tensor::zeros({4}, DType::f64);
  record("test_view_of_kept_temporary", {a, b}, out, [a, b](const Tensor& g) {
    Tensor t = dg::raw::clone(g);
    accumulate_grad(a, dg::raw::view_reshape(t, {2, 2}));  // t is still held here: not adoptable
    accumulate_grad(b, t);                                 // may take t itself
  });
  backward(out, Tensor::from_vector({1, 2, 3, 4}, {4}, DType::f64));
  CHECK_FALSE(shares_storage(a.grad(), b.grad()));
  backward(scale(b, 1.0), Tensor::ones({4}, DType::f64));
  CHECK(values(a.grad()) == std::vector<double>{1, 2, 3, 4});
  CHECK(values(b.grad()) == std::vector<double>{2, 3, 4, 5});
}

// ---- rule 2: aliasing inputs get the sum of their contributions --------------------------------

TEST_CASE("rule 2: one tensor passed as several inputs gets the sum of its gradients, op by op") {
  // Each op f(x, x, ..) is compared with f(x1, x2, ..) on distinct copies: grad(x) = Σ grad(xi).
  struct Case {
    const char* name;
    std::vector<Shape> shapes;  // the distinct inputs; `uses` maps each op argument to one of them
    std::vector<int> uses;
    std::function<Tensor(const std::vector<Tensor>&)> fn;
  };
  const std::vector<Case> cases = {
      {"add", {{2, 3}}, {0, 0}, [](const std::vector<Tensor>& in) { return add(in[0], in[1]); }},
      {"mul", {{2, 3}}, {0, 0}, [](const std::vector<Tensor>& in) { return mul(in[0], in[1]); }},
      {"matmul",
       {{3, 3}},
       {0, 0},
       [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }},
      {"linear x is W",
       {{3, 3}},
       {0, 0},
       [](const std::vector<Tensor>& in) { return linear(in[0], in[1]); }},
      {"linear_add residual is x",
       {{2, 4}, {4, 4}},
       {0, 0, 1},
       [](const std::vector<Tensor>& in) { return linear_add(in[0], in[1], in[2]); }},
      {"swiglu",
       {{2, 5}},
       {0, 0},
       [](const std::vector<Tensor>& in) { return swiglu(in[0], in[1]); }},
      {"depth_mix source twice",
       {{2, 3, 4}, {2, 3, 2}},
       {0, 0, 1},
       [](const std::vector<Tensor>& in) {
         return depth_mix({in[0], in[1]}, in[2]);
       }},
      {"causal_attention q=k=v",
       {{1, 2, 4, 4}},
       {0, 0, 0},
       [](const std::vector<Tensor>& in) { return causal_attention(in[0], in[1], in[2]); }},
      {"attention_heads q=k=v, rope",
       {{1, 4, 8}},
       {0, 0, 0},
       [](const std::vector<Tensor>& in) {
         return attention_heads(in[0], in[1], in[2], 2, 2, 10000.0);
       }},
      {"attention_heads k=v",
       {{1, 4, 8}, {1, 4, 4}},
       {0, 1, 1},
       [](const std::vector<Tensor>& in) { return attention_heads(in[0], in[1], in[2], 2, 1); }},
  };
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    std::vector<Tensor> distinct;
    for (size_t i = 0; i < c.shapes.size(); ++i)
      distinct.push_back(random_tensor(c.shapes[i], 70 + i));
    std::vector<Tensor> aliased, copies;
    for (int u : c.uses) {
      aliased.push_back(distinct[u]);
      copies.push_back(dg::raw::clone(distinct[u]).set_requires_grad(true));
    }
    backward(weighted_sum(c.fn(aliased), 80));
    backward(weighted_sum(c.fn(copies), 80));
    for (size_t i = 0; i < distinct.size(); ++i) {
      std::vector<double> expected(distinct[i].numel(), 0.0);
      for (size_t k = 0; k < c.uses.size(); ++k)
        if (c.uses[k] == static_cast<int>(i)) {
          const std::vector<double> gk = values(copies[k].grad());
          for (size_t e = 0; e < gk.size(); ++e) expected[e] += gk[e];
        }
      CAPTURE(i);
      CHECK(max_diff(values(distinct[i].grad()), expected) < 1e-12);
    }
  }
}

// ---- rule 3: set_grad buffers are added into, never replaced -----------------------------------

TEST_CASE("rule 3: a gradient installed by set_grad is added into, contiguous or strided") {
  // linear's GradSink writes x's gradient directly when contiguous; transpose's goes through the
  // strided path. Both must land in the caller's flat buffer and add to what is there.
  Tensor flat = Tensor::full({2 * 6}, 1.0, DType::f64);
  Tensor x = random_tensor({2, 3}, 90), w = random_tensor({4, 3}, 91);
  Tensor xt = random_tensor({3, 2}, 92);
  x.set_grad(dg::raw::view_reshape(dg::raw::view_narrow(flat, 0, 0, 6), {2, 3}));
  xt.set_grad(dg::raw::view_transpose(
      dg::raw::view_reshape(dg::raw::view_narrow(flat, 0, 6, 6), {2, 3}), 0, 1));  // strided [3, 2]
  Tensor dy = random_tensor({2, 4}, 93, -1, 1, false);
  backward(linear(x, w), dy);
  Tensor dxt = random_tensor({2, 3}, 94, -1, 1, false);
  backward(transpose(xt, 0, 1), dxt);
  CHECK(shares_storage(x.grad(), flat));
  CHECK(shares_storage(xt.grad(), flat));
  // x: 1 + dy·W
  const std::vector<double> dyv = values(dy), wv = values(w), dxtv = values(dxt);
  const std::vector<double> f = values(flat);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 3; ++i) {
      double s = 1.0;
      for (int o = 0; o < 4; ++o) s += dyv[r * 4 + o] * wv[o * 3 + i];
      CHECK(f[r * 3 + i] == doctest::Approx(s).epsilon(1e-14));
    }
  // xt's buffer is [2, 3] seen transposed: element (i, r) of xt lives at 6 + r·3 + i
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 3; ++i) CHECK(f[6 + r * 3 + i] == 1.0 + dxtv[r * 3 + i]);
}

// ---- rules 4 and 5: repeated backward, retained gradients, keep_graph --------------------------

TEST_CASE(
    "rule 4: leaves accumulate over backward calls; intermediates keep nothing unless retained") {
  Tensor x = random_tensor({3, 4}, 100), w = random_tensor({5, 4}, 101);
  auto loss = [&] { return weighted_sum(reshape(linear(x, w), {5, 3}), 102); };
  backward(loss());
  const std::vector<double> once_x = values(x.grad()), once_w = values(w.grad());
  backward(loss());
  std::vector<double> twice_x = once_x, twice_w = once_w;
  for (double& v : twice_x) v *= 2;
  for (double& v : twice_w) v *= 2;
  CHECK(max_diff(values(x.grad()), twice_x) < 1e-14);
  CHECK(max_diff(values(w.grad()), twice_w) < 1e-14);
  Tensor y = linear(x, w);
  backward(weighted_sum(y, 103));
  CHECK_FALSE(y.grad().defined());
  CHECK_THROWS_WITH(backward(sum(y)), doctest::Contains("second time"));  // the walk freed it
}

TEST_CASE("rule 4: a retained gradient is never taken over by the node below it") {
  // y = reshape(x) passes its gradient on as a view; retained, that view must be copied, so a
  // later contribution to x does not change y.grad.
  Tensor x = random_tensor({2, 3}, 104);
  Tensor y = reshape(x, {3, 2});
  retain_grad(y);
  backward(weighted_sum(y, 105));
  const std::vector<double> kept = values(y.grad());
  CHECK_FALSE(shares_storage(y.grad(), x.grad()));
  backward(weighted_sum(x, 106));
  CHECK(values(y.grad()) == kept);
}

TEST_CASE("rule 5: keep_graph runs the same walk twice and adds the same gradients again") {
  Tensor x = random_tensor({1, 4, 8}, 110), w = random_tensor({8, 8}, 111);
  Tensor h = linear(x, w);
  Tensor y = reshape(add(attention_heads(h, h, x, 2, 2, 10000.0), swiglu(h, x)), {4, 8});
  Tensor dout = random_tensor({4, 8}, 112, -1, 1, false);
  backward(y, dout, /*keep_graph=*/true);
  const std::vector<double> once_x = values(x.grad()), once_w = values(w.grad());
  backward(y, dout);
  CHECK_THROWS_WITH(backward(y, dout), doctest::Contains("second time"));  // freed this time
  std::vector<double> twice_x = once_x, twice_w = once_w;
  for (double& v : twice_x) v *= 2;
  for (double& v : twice_w) v *= 2;
  CHECK(max_diff(values(x.grad()), twice_x) < 1e-13);
  CHECK(max_diff(values(w.grad()), twice_w) < 1e-13);
}
