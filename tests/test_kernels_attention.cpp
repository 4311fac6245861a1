// Fused causal attention: fast kernels against the reference (forward, lse, dq, dk, dv) in float
// and double, MHA and GQA, strided views, thread-count independence, a torch 1.13 golden, the
// backward's add-into contract, causality and error messages; then rope (kernels against the
// reference, thread bit-identity, the reference's float32 formula, linear_rope's bits, errors).
// The gradcheck rows live in autograd/ops_attention.cpp and run in test_gradcheck_ops.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/kernels_attention.h"
#include "tensor/threads.h"
#include "tests/kernel_test_helpers.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

namespace {

Tensor rand_input(const Shape& shape, uint64_t seed, DType dtype, double range = 2.0) {
  Tensor t = random_tensor(shape, seed, -range, range, false).to(dtype);
  t.set_requires_grad(true);
  return t;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : t.to_vector()) m = std::max(m, std::fabs(x));
  return m;
}

// max |a − b| / (1 + max |b|); NaN anywhere gives infinity.
double rel_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  std::vector<double> x = a.to_vector(), y = b.to_vector();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double d = std::fabs(x[i] - y[i]);
    m = std::isnan(d) ? INFINITY : std::max(m, d);
  }
  return m / (1.0 + max_abs(b));
}

struct Result {
  Tensor out, dq, dk, dv;
};

// The op through the tape: out = causal_attention(q, k, v), then backward with dout.
Result run_op(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
              double scale = 0.0) {
  for (const Tensor& t : {q, k, v}) t.impl()->grad = Tensor();
  Result r;
  r.out = causal_attention(q, k, v, scale);
  backward(r.out, dout);
  r.dq = q.grad();
  r.dk = k.grad();
  r.dv = v.grad();
  return r;
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to_floats(), y = b.to_floats();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

struct ThreadGuard {
  int saved = threads();
  ~ThreadGuard() { set_threads(saved); }
};

}  // namespace

TEST_CASE("causal attention: fast forward and all three gradients match the reference") {
  struct Config {
    int64_t B, H, Hkv, T, hd;
  };
  const Config configs[] = {
      {2, 3, 3, 1, 8}, {2, 3, 3, 7, 8},   {2, 3, 3, 64, 16}, {2, 8, 2, 1, 8},
      {2, 8, 2, 7, 8}, {2, 8, 2, 64, 16}, {1, 4, 1, 150, 12}};  // 150: several row blocks and a
                                                                // ragged last one
  for (DType dtype : {DType::f32, DType::f64}) {
    const double tol = dtype == DType::f32 ? 3e-6 : 1e-12;
    for (const Config& c : configs) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(c.H);
      CAPTURE(c.Hkv);
      CAPTURE(c.T);
      Tensor q = rand_input({c.B, c.H, c.T, c.hd}, 1, dtype);
      Tensor k = rand_input({c.B, c.Hkv, c.T, c.hd}, 2, dtype);
      Tensor v = rand_input({c.B, c.Hkv, c.T, c.hd}, 3, dtype);
      Tensor dout = random_tensor({c.B, c.H, c.T, c.hd}, 4, -1, 1, false).to(dtype);
      Result fast = run_op(q, k, v, dout);
      Tensor ref_lse;
      Tensor ref_out = ref_attention_forward(q, k, v, 0.0, &ref_lse);
      Tensor rq, rk, rv;
      ref_attention_backward(q, k, v, dout, 0.0, rq, rk, rv);
      CHECK(fast.out.dtype() == dtype);
      CHECK(rel_diff(fast.out, ref_out) < tol);
      CHECK(rel_diff(fast.dq, rq) < tol);
      CHECK(rel_diff(fast.dk, rk) < tol);
      CHECK(rel_diff(fast.dv, rv) < tol);
      // the saved statistics are the row logsumexps
      Tensor out = Tensor::empty(q.shape(), dtype), lse = Tensor::empty({c.B, c.H, c.T}, dtype);
      attention_forward(q, k, v, 1.0 / std::sqrt(double(c.hd)), out, lse);
      CHECK(rel_diff(lse, ref_lse) < tol);
      CHECK(bit_equal(out, fast.out));
    }
  }
}

TEST_CASE("causal attention: scale 0 means 1/sqrt(hd); other scales are honoured") {
  Tensor q = rand_input({1, 2, 9, 16}, 5, DType::f64), k = rand_input({1, 2, 9, 16}, 6, DType::f64);
  Tensor v = rand_input({1, 2, 9, 16}, 7, DType::f64);
  NoGradGuard no_grad;
  CHECK(rel_diff(causal_attention(q, k, v), causal_attention(q, k, v, 0.25)) == 0.0);
  Tensor sharp = causal_attention(q, k, v, 3.0);
  CHECK(rel_diff(sharp, ref_attention_forward(q, k, v, 3.0)) < 1e-12);
  CHECK(rel_diff(sharp, causal_attention(q, k, v)) > 1e-3);
}

TEST_CASE("causal attention: permuted [B,T,H,hd] views are read in place and give the same bits") {
  const int64_t B = 2, T = 70, H = 4, Hkv = 2, hd = 8;
  for (DType dtype : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dtype));
    // views of [B, T, H, hd] buffers, as a model that splits heads out of [B, T, C] produces
    Tensor qb = rand_input({B, T, H, hd}, 11, dtype), kb = rand_input({B, T, Hkv, hd}, 12, dtype);
    Tensor vb = rand_input({B, T, Hkv, hd}, 13, dtype);
    Tensor qv = dg::raw::view_permute(qb, {0, 2, 1, 3}).set_requires_grad(true);
    Tensor kv = dg::raw::view_permute(kb, {0, 2, 1, 3}).set_requires_grad(true);
    Tensor vv = dg::raw::view_permute(vb, {0, 2, 1, 3}).set_requires_grad(true);
    REQUIRE_FALSE(qv.is_contiguous());
    Tensor qc = dg::raw::clone(qv).set_requires_grad(true),
           kc = dg::raw::clone(kv).set_requires_grad(true);
    Tensor vc = dg::raw::clone(vv).set_requires_grad(true);
    Tensor dout = random_tensor({B, H, T, hd}, 14, -1, 1, false).to(dtype);
    Result views = run_op(qv, kv, vv, dout);
    Result plain = run_op(qc, kc, vc, dout);
    // the output is written heads-last: merging the heads back to [B, T, H·hd] is a view
    CHECK(dg::raw::view_permute(views.out, {0, 2, 1, 3}).is_contiguous());
    CHECK(rel_diff(views.out, plain.out) == 0.0);
    CHECK(rel_diff(views.dq, plain.dq) == 0.0);
    CHECK(rel_diff(views.dk, plain.dk) == 0.0);
    CHECK(rel_diff(views.dv, plain.dv) == 0.0);
    // a layout whose last axis is not unit-stride takes the copying path: still correct
    Tensor qt =
        dg::raw::view_transpose(rand_input({B, H, hd, T}, 15, dtype), 2, 3).set_requires_grad(true);
    Result copied = run_op(qt, kc, vc, dout);
    Tensor rq, rk, rv;
    ref_attention_backward(qt, kc, vc, dout, 0.0, rq, rk, rv);
    const double tol = dtype == DType::f32 ? 3e-6 : 1e-12;
    CHECK(rel_diff(copied.out, ref_attention_forward(qt, kc, vc, 0.0)) < tol);
    CHECK(rel_diff(copied.dq, rq) < tol);
    CHECK(rel_diff(copied.dk, rk) < tol);
    // dout as a non-contiguous view
    Tensor dout_t = dg::raw::view_transpose(
        dg::raw::view_transpose(dg::raw::clone(dout), 1, 2).contiguous(), 1, 2);
    REQUIRE_FALSE(dout_t.is_contiguous());
    Result strided_dout = run_op(qc, kc, vc, dout_t);
    CHECK(rel_diff(strided_dout.dq, plain.dq) == 0.0);
    CHECK(rel_diff(strided_dout.dv, plain.dv) == 0.0);
  }
}

TEST_CASE("causal attention: float32 results are bit-identical at 1 and 2 threads") {
  ThreadGuard guard;
  Tensor q = rand_input({2, 8, 100, 16}, 21, DType::f32),
         k = rand_input({2, 2, 100, 16}, 22, DType::f32);
  Tensor v = rand_input({2, 2, 100, 16}, 23, DType::f32);
  Tensor dout = random_tensor({2, 8, 100, 16}, 24, -1, 1, false).to(DType::f32);
  set_threads(1);
  Result one = run_op(q, k, v, dout);
  set_threads(2);
  Result two = run_op(q, k, v, dout);
  CHECK(bit_equal(one.out, two.out));
  CHECK(bit_equal(one.dq, two.dq));
  CHECK(bit_equal(one.dk, two.dk));
  CHECK(bit_equal(one.dv, two.dv));
}

TEST_CASE("causal attention matches torch 1.13 (math attention with a causal mask, GQA)") {
  // Inputs: q[i] = sin(0.37 i + 0.1), k[i] = sin(0.53 i + 0.7), v[i] = sin(0.29 i − 0.4) over flat
  // indices of q [1,4,7,8], k v [1,2,7,8]; dout[i] = cos(0.11 i). torch: k, v repeat_interleave'd
  // to 4 heads, softmax((q·kᵀ)/sqrt(8) masked by tril) · v, backward(dout), all float64.
  auto fill = [](Shape shape, double a, double c, DType dtype) {
    std::vector<double> x(shape_numel(shape));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(a * double(i) + c);
    Tensor t = Tensor::from_vector(x, shape, dtype);
    t.set_requires_grad(true);
    return t;
  };
  using Golden = std::vector<std::pair<int64_t, double>>;
  const Golden out_g = {{3, 0.452886285379},   {9, 0.167854148838},   {13, 0.534559307566},
                        {57, -0.109778300837}, {61, 0.867423225594},  {100, -0.300811985799},
                        {111, 0.419195176050}, {150, 0.514814371251}, {223, 0.275628467621}};
  const Golden dq_g = {{3, 0.0},
                       {9, -0.160039606494},
                       {13, 0.112409630715},
                       {61, 0.0},
                       {100, -0.269014318369},
                       {111, -0.477915732546},
                       {150, 0.215523956298},
                       {223, 0.153856292890}};
  const Golden dk_g = {{3, 0.115642833532},   {9, 0.338118361149},  {13, -0.084351488110},
                       {57, -0.247209037621}, {61, 0.309590169901}, {100, 0.171805058276},
                       {111, -0.024479452593}};
  const Golden dv_g = {{3, 1.337375855158},  {9, -0.183284475284}, {13, -0.679717287871},
                       {57, 1.965051901372}, {61, 1.454293156849}, {100, 0.113134399484},
                       {111, 0.129967203693}};
  for (DType dtype : {DType::f64, DType::f32}) {
    CAPTURE(dtype_name(dtype));
    Tensor q = fill({1, 4, 7, 8}, 0.37, 0.1, dtype), k = fill({1, 2, 7, 8}, 0.53, 0.7, dtype);
    Tensor v = fill({1, 2, 7, 8}, 0.29, -0.4, dtype);
    std::vector<double> d(4 * 7 * 8);
    for (size_t i = 0; i < d.size(); ++i) d[i] = std::cos(0.11 * double(i));
    Result r = run_op(q, k, v, Tensor::from_vector(d, {1, 4, 7, 8}, dtype));
    for (auto [t, golden] :
         {std::pair{r.out, &out_g}, {r.dq, &dq_g}, {r.dk, &dk_g}, {r.dv, &dv_g}}) {
      std::vector<double> got = t.to_vector();
      for (const auto& index_value : *golden) {
        const auto i = index_value.first;  // plain variables: clang < 16 cannot capture bindings
        const auto want = index_value.second;
        CAPTURE(i);
        CHECK(std::fabs(got[i] - want) <= 1e-6);
      }
    }
  }
}

TEST_CASE("causal attention backward adds into gradients and skips inputs without requires_grad") {
  Tensor q = rand_input({1, 4, 10, 8}, 31, DType::f64),
         k = rand_input({1, 2, 10, 8}, 32, DType::f64);
  Tensor v = random_tensor({1, 2, 10, 8}, 33, -2, 2, false);  // no gradient wanted
  Tensor dout = random_tensor({1, 4, 10, 8}, 34, -1, 1, false);
  Result once = run_op(q, k, v, dout);
  CHECK_FALSE(v.grad().defined());
  Tensor dq1 = dg::raw::clone(once.dq), dk1 = dg::raw::clone(once.dk);
  backward(causal_attention(q, k, v), dout);  // second backward accumulates
  std::vector<double> a = q.grad().to_vector(), b = dq1.to_vector();
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(2 * b[i]).epsilon(1e-12));
  CHECK(rel_diff(k.grad(), Tensor::from_vector(
                               [&] {
                                 std::vector<double> x = dk1.to_vector();
                                 for (double& e : x) e *= 2;
                                 return x;
                               }(),
                               dk1.shape(), DType::f64)) < 1e-14);
}

TEST_CASE("causal attention: one tensor passed as q, k and v gets the sum of its three gradients") {
  Tensor x = rand_input({2, 2, 6, 4}, 41, DType::f64);
  Tensor dout = random_tensor({2, 2, 6, 4}, 42, -1, 1, false);
  Result r = run_op(x, x, x, dout);
  Tensor rq, rk, rv;
  ref_attention_backward(x, x, x, dout, 0.0, rq, rk, rv);
  std::vector<double> sum = rq.to_vector(), gk = rk.to_vector(), gv = rv.to_vector();
  for (size_t i = 0; i < sum.size(); ++i) sum[i] += gk[i] + gv[i];
  CHECK(rel_diff(r.dq, Tensor::from_vector(sum, x.shape(), DType::f64)) < 1e-12);
}

TEST_CASE("causal attention is causal: future keys and values do not change earlier outputs") {
  const int64_t T = 80, cut = 37;
  Tensor q = rand_input({1, 2, T, 8}, 51, DType::f32), k = rand_input({1, 2, T, 8}, 52, DType::f32);
  Tensor v = rand_input({1, 2, T, 8}, 53, DType::f32);
  NoGradGuard no_grad;
  Tensor a = causal_attention(q, k, v);
  Tensor k2 = dg::raw::clone(k), v2 = dg::raw::clone(v);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = cut; t < T; ++t)
      for (int64_t d = 0; d < 8; ++d) {
        k2.data<float>()[(h * T + t) * 8 + d] = 5.0f;
        v2.data<float>()[(h * T + t) * 8 + d] = -7.0f;
      }
  Tensor b = causal_attention(q, k2, v2);
  CHECK(bit_equal(dg::raw::view_narrow(a, 2, 0, cut), dg::raw::view_narrow(b, 2, 0, cut)));
  CHECK_FALSE(bit_equal(dg::raw::view_narrow(a, 2, cut, T - cut),
                        dg::raw::view_narrow(b, 2, cut, T - cut)));
  // row 0 sees only key 0: its output is v[0]
  for (int64_t d = 0; d < 8; ++d) CHECK(a.at({0, 1, 0, d}) == v.at({0, 1, 0, d}));
}

TEST_CASE("causal attention rejects bad shapes, naming both shapes") {
  auto t = [](Shape s, DType d = DType::f32) { return Tensor::zeros(s, d); };
  CHECK_THROWS_WITH_AS(causal_attention(t({2, 6, 5, 4}), t({2, 4, 5, 4}), t({2, 4, 5, 4})),
                       doctest::Contains("[2, 6, 5, 4]"), std::invalid_argument);
  CHECK_THROWS_WITH(causal_attention(t({2, 6, 5, 4}), t({2, 4, 5, 4}), t({2, 4, 5, 4})),
                    doctest::Contains("[2, 4, 5, 4]"));
  CHECK_THROWS_WITH(causal_attention(t({2, 4, 5, 4}), t({2, 4, 6, 4}), t({2, 4, 6, 4})),
                    doctest::Contains("q [2, 4, 5, 4] and k [2, 4, 6, 4]"));
  CHECK_THROWS_WITH(causal_attention(t({2, 4, 5, 4}), t({2, 4, 5, 4}), t({2, 4, 5, 3})),
                    doctest::Contains("k [2, 4, 5, 4] and v [2, 4, 5, 3]"));
  CHECK_THROWS_WITH(causal_attention(t({4, 5, 4}), t({4, 5, 4}), t({4, 5, 4})),
                    doctest::Contains("causal_attention"));
  CHECK_THROWS_WITH(causal_attention(t({1, 2, 5, 4}), t({1, 2, 5, 4}, DType::f64), t({1, 2, 5, 4})),
                    doctest::Contains("dtype"));
  CHECK_THROWS(causal_attention(t({1, 2, 5, 4}), t({1, 2, 5, 4}), t({1, 2, 5, 4}), NAN));
}

// The shape tools/bench_attention times (T=256, hd=32: more row and key blocks and a wider head
// than the cases above), with fewer batches and heads: the fast kernels agree with the reference
// and give the same float32 bits at 1 and 2 threads.
TEST_CASE(
    "causal attention at the benchmark's T=256 hd=32: matches the reference, thread-independent") {
  ThreadGuard guard;
  const Shape shape{1, 2, 256, 32};
  Tensor q = rand_input(shape, 61, DType::f32, 1.0), k = rand_input(shape, 62, DType::f32, 1.0);
  Tensor v = rand_input(shape, 63, DType::f32, 1.0);
  Tensor dout = random_tensor(shape, 64, -1, 1, false).to(DType::f32);
  set_threads(1);
  Result one = run_op(q, k, v, dout);
  set_threads(2);
  Result two = run_op(q, k, v, dout);
  CHECK(bit_equal(one.out, two.out));
  CHECK(bit_equal(one.dq, two.dq));
  CHECK(bit_equal(one.dk, two.dk));
  CHECK(bit_equal(one.dv, two.dv));
  Tensor rq, rk, rv;
  ref_attention_backward(q, k, v, dout, 0.0, rq, rk, rv);
  CHECK(rel_diff(one.out, ref_attention_forward(q, k, v, 0.0)) < 3e-6);
  CHECK(rel_diff(one.dq, rq) < 3e-6);
  CHECK(rel_diff(one.dk, rk) < 3e-6);
  CHECK(rel_diff(one.dv, rv) < 3e-6);
}

// ---- attention_heads: the fused split → rope → attention → merge

namespace {
// attention_heads(q, k, v) and the same computation from separate ops, through the tape.
struct HeadsRun {
  Tensor out, dq, dk, dv;
};
HeadsRun run_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout, int64_t H,
                   int64_t Hkv, double base, bool fused) {
  for (const Tensor& t : {q, k, v}) t.impl()->grad = Tensor();
  const int64_t B = q.size(0), T = q.size(1), hd = q.size(2) / H;
  Tensor out;
  if (fused) {
    out = attention_heads(q, k, v, H, Hkv, base);
  } else {
    auto split = [&](const Tensor& x, int64_t n) {
      return permute(reshape(x, {B, T, n, hd}), {0, 2, 1, 3});
    };
    Tensor qh = split(q, H), kh = split(k, Hkv), vh = split(v, Hkv);
    if (base > 0) qh = rope(qh, base), kh = rope(kh, base);
    out = reshape(contiguous(permute(causal_attention(qh, kh, vh), {0, 2, 1, 3})), {B, T, H * hd});
  }
  backward(out, dout);
  return {out, q.grad(), k.grad(), v.grad()};
}
}  // namespace

TEST_CASE("attention_heads equals split + rope + causal_attention + merge, bit for bit") {
  const int64_t B = 2, T = 67, H = 4, Hkv = 2, hd = 8;
  for (double base : {0.0, 10000.0}) {
    CAPTURE(base);
    Tensor q = rand_input({B, T, H * hd}, 41, DType::f32),
           k = rand_input({B, T, Hkv * hd}, 42, DType::f32);
    Tensor v = rand_input({B, T, Hkv * hd}, 43, DType::f32);
    Tensor dout = random_tensor({B, T, H * hd}, 44, -1, 1, false).to(DType::f32);
    HeadsRun fused = run_heads(q, k, v, dout, H, Hkv, base, true);
    HeadsRun plain = run_heads(q, k, v, dout, H, Hkv, base, false);
    CHECK(fused.out.shape() == Shape{B, T, H * hd});
    CHECK(fused.out.is_contiguous());
    CHECK(bit_equal(fused.out, plain.out));
    CHECK(bit_equal(fused.dq, plain.dq));
    CHECK(bit_equal(fused.dk, plain.dk));
    CHECK(bit_equal(fused.dv, plain.dv));
  }
}

TEST_CASE("attention_heads: float32 bit-identical at 1 and 2 threads; bad shapes are named") {
  ThreadGuard guard;
  const int64_t B = 2, T = 100, H = 8, Hkv = 2, hd = 16;
  Tensor q = rand_input({B, T, H * hd}, 51, DType::f32),
         k = rand_input({B, T, Hkv * hd}, 52, DType::f32);
  Tensor v = rand_input({B, T, Hkv * hd}, 53, DType::f32);
  Tensor dout = random_tensor({B, T, H * hd}, 54, -1, 1, false).to(DType::f32);
  set_threads(1);
  HeadsRun one = run_heads(q, k, v, dout, H, Hkv, 10000.0, true);
  set_threads(2);
  HeadsRun two = run_heads(q, k, v, dout, H, Hkv, 10000.0, true);
  CHECK(bit_equal(one.out, two.out));
  CHECK(bit_equal(one.dq, two.dq));
  CHECK(bit_equal(one.dk, two.dk));
  CHECK(bit_equal(one.dv, two.dv));
  CHECK_THROWS_WITH_AS(attention_heads(q, k, v, 3, 1), doctest::Contains("attention_heads"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(attention_heads(q, q, v, H, Hkv), doctest::Contains("k and v of shape"),
                       std::invalid_argument);
  Tensor odd = rand_input({B, T, 3 * H}, 55, DType::f32),
         odd_kv = rand_input({B, T, 3 * Hkv}, 56, DType::f32);
  CHECK_THROWS_WITH_AS(attention_heads(odd, odd_kv, odd_kv, H, Hkv, 10000.0),
                       doctest::Contains("even head dimension"), std::invalid_argument);
}

// ---- rope (tensor/kernels_attention.h): kernels, threads, a golden, linear_rope, errors

TEST_CASE_TEMPLATE("rope kernels: fast matches reference", T, float, double) {
  SUBCASE("rope: tables against the formula; backward inverts forward") {
    const int64_t BH = 6, Tn = 9, hd = 16;
    auto x = rand_vec<T>(BH * Tn * hd, 23);
    std::vector<T> cos(Tn * hd / 2), sin(Tn * hd / 2), y(x.size()), y_ref(x.size());
    rope_tables<T>(cos.data(), sin.data(), Tn, hd, 10000.0, 5);
    rope_forward<T>(y.data(), x.data(), cos.data(), sin.data(), BH, Tn, hd);
    ref_rope_forward<T>(y_ref.data(), x.data(), BH, Tn, hd, 10000.0, 5);
    CHECK(rel_diff(y, y_ref) < tol<T>());
    std::vector<T> back(x.size(), T(0));  // the backward of a rotation is its inverse
    rope_backward<T>(back.data(), y.data(), cos.data(), sin.data(), BH, Tn, hd);
    CHECK(rel_diff(back, x) < tol<T>());
  }
}

TEST_CASE("rope kernels: float32 results are bit-identical at 1 and 2 threads") {
  ThreadsGuard guard;
  // Sizes above kParallelGrain so that the parallel branches run.
  const int64_t BH = 36, Tn = 64, hd = 64;
  auto xr = rand_vec<float>(BH * Tn * hd, 8);
  auto run = [&](int n) {
    set_threads(n);
    std::vector<std::vector<float>> r;
    auto keep = [&](std::vector<float> v) { r.push_back(std::move(v)); };
    {  // rope
      std::vector<float> cos(Tn * hd / 2), sin(Tn * hd / 2), y(xr.size()), dx(xr.size(), 0.0f);
      rope_tables<float>(cos.data(), sin.data(), Tn, hd, 10000.0, 0);
      rope_forward<float>(y.data(), xr.data(), cos.data(), sin.data(), BH, Tn, hd);
      rope_backward<float>(dx.data(), xr.data(), cos.data(), sin.data(), BH, Tn, hd);
      keep(y), keep(dx);
    }
    return r;
  };
  check_same_bits_at_1_and_2_threads(run);
}

TEST_CASE("rope matches the reference's float32 rotate-half formula") {
  // torch: inv_freq = 1/(10000 ** (arange(0, hd, 2).float()/hd)); freqs = outer(arange(T).float()
  // + offset, inv_freq); emb = cat(freqs, freqs); out = x·cos(emb) + rotate_half(x)·sin(emb).
  Tensor x = Tensor::from_vector(pattern(48, 7, 23, 11, 8.0), {1, 2, 3, 8});
  check_close(rope(x).to_vector(),
              {-1.375,
               -0.5,
               0.375,
               1.25,
               -0.75,
               0.125,
               1.0,
               -1.0,
               -0.4882732629776001,
               0.6089822053909302,
               -1.243687629699707,
               -0.37524983286857605,
               0.16496729850769043,
               1.4430058002471924,
               -0.6374685764312744,
               0.24962487816810608,
               0.554794430732727,
               -0.8078908920288086,
               -0.012499166652560234,
               0.8777482509613037,
               1.4911247491836548,
               -0.4188523292541504,
               0.624875009059906,
               -1.3732472658157349,
               -0.5,
               0.375,
               1.25,
               -0.75,
               0.125,
               1.0,
               -1.0,
               -0.125,
               -0.7517958283424377,
               -1.1813592910766602,
               -0.37748122215270996,
               0.4988747537136078,
               1.374018907546997,
               -0.7466694116592407,
               0.24623756110668182,
               1.1254994869232178,
               0.5914528369903564,
               -0.12416832894086838,
               0.9023231863975525,
               -1.123997688293457,
               -0.6915985345840454,
               0.6125416159629822,
               -1.3572261333465576,
               -0.502249002456665},
              1e-6);
  // hd = 16 (the model's head size) at positions 100, 101: float32 angles matter here.
  Tensor x2 = Tensor::from_vector(pattern(32, 5, 19, 9, 8.0), {1, 1, 2, 16});
  check_close(
      rope(x2, 10000.0, 100).to_vector(),
      {-1.4131786823272705,  -0.4379970133304596,   0.0991239845752716,   -0.7291557192802429,
       0.09080088138580322,  -0.3175327777862549,   0.19883432984352112,  0.8389928340911865,
       -0.18486762046813965, -0.34735947847366333,  -0.38265445828437805, -1.0152989625930786,
       -1.2466976642608643,  -0.23542076349258423,  0.5224604606628418,   1.1521029472351074,
       -0.38799336552619934, -0.12488730996847153,  0.059082090854644775, 1.0777126550674438,
       -0.05422239005565643, 0.0009330660104751587, 0.6453495621681213,   -0.9755398035049438,
       -0.617017924785614,   0.2165713757276535,    -1.0736663341522217,  0.9326227903366089,
       -0.556381106376648,   0.39528360962867737,   1.0705251693725586,   -0.7815510034561157},
      1e-6);
  // torch's float32 inv_freq for hd = 16: cos of position 1 at pair i is cos(inv_freq_i)
  std::vector<float> cos(2 * 8), sin(2 * 8);
  rope_tables<float>(cos.data(), sin.data(), 2, 16, 10000.0, 0);
  const double inv_freq[8] = {1.0,
                              0.3162277638912201,
                              0.10000000149011612,
                              0.03162277862429619,
                              0.009999999776482582,
                              0.003162277862429619,
                              0.0010000000474974513,
                              0.0003162277862429619};
  for (int i = 0; i < 8; ++i) {
    CHECK(cos[i] == 1.0f);
    CHECK(sin[8 + i] == doctest::Approx(std::sin(static_cast<float>(inv_freq[i]))).epsilon(1e-7));
  }
}

TEST_CASE(
    "linear_rope gives the bits of linear, split heads, rope, merge heads (values, gradients)") {
  const int64_t B = 2, T = 7, H = 3, hd = 6, in = 5;
  auto f32 = [](Tensor t) { return t.to(DType::f32).set_requires_grad(true); };
  Tensor x = f32(random_tensor({B, T, in}, 51, -1, 1, false));
  Tensor w = f32(random_tensor({H * hd, in}, 52, -1, 1, false));
  Tensor b = f32(random_tensor({H * hd}, 53, -1, 1, false));
  Tensor x2 = f32(dg::raw::clone(x)), w2 = f32(dg::raw::clone(w)), b2 = f32(dg::raw::clone(b));
  Tensor dout = random_tensor({B, T, H * hd}, 54, -1, 1, false).to(DType::f32);
  Tensor fused = linear_rope(x, w, b, H, 500.0);
  backward(fused, dout);
  Tensor heads = permute(reshape(linear(x2, w2, b2), {B, T, H, hd}), {0, 2, 1, 3});
  Tensor plain = reshape(contiguous(permute(rope(heads, 500.0), {0, 2, 1, 3})), {B, T, H * hd});
  backward(plain, dout);
  CHECK(same_bits(fused.to_floats(), plain.to_floats()));
  CHECK(same_bits(x.grad().to_floats(), x2.grad().to_floats()));
  CHECK(same_bits(w.grad().to_floats(), w2.grad().to_floats()));
  CHECK(same_bits(b.grad().to_floats(), b2.grad().to_floats()));
  CHECK_THROWS_WITH(linear_rope(x, w, b, 4),
                    doctest::Contains("split into 4 heads of an even size"));
  CHECK_THROWS_WITH(linear_rope(x, w, b, 0), doctest::Contains("linear_rope: heads must be >= 1"));
}

TEST_CASE("rope rejects an odd head size, naming the op") {
  CHECK_THROWS_WITH(rope(Tensor::zeros({1, 1, 3, 5})), doctest::Contains("even head size"));
}
