// Tests of the elementwise kernels (tensor/kernels_elementwise.h, tensor/fast_math.h; swiglu's op
// is in autograd/ops_activation.cpp, depth_mix's in autograd/ops_arithmetic.cpp): swiglu and
// depth_mix fast kernels against the plain reference kernels, sum_axes's two paths against each
// other and the reference (the same bits), binary_kernel's broadcasting loops against the formula
// applied element by element, float32 bit-identity at 1 and 2
// threads, depth_mix's aliasing and errors, and exp_f32's accuracy. Gradients: the activation and
// elementwise rows of the gradient-check table.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/fast_math.h"
#include "tensor/kernels_elementwise.h"
#include "tensor/threads.h"
#include "tests/kernel_test_helpers.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

namespace {}  // namespace

// ---- fast kernels against the reference kernels -------------------------------------------------

TEST_CASE_TEMPLATE("elementwise kernels: fast matches reference", T, float, double) {
  const int64_t rows = 67, D = 96;  // rows not a multiple of kRowChunk

  SUBCASE("swiglu: forward, backward adding, backward overwriting") {
    const int64_t n = rows * D;
    auto g = rand_vec<T>(n, 26, -6, 6), u = rand_vec<T>(n, 27), dout = rand_vec<T>(n, 28);
    std::vector<T> y(n), y_ref(n);
    swiglu_forward<T>(y.data(), g.data(), u.data(), n);
    ref_swiglu_forward<T>(y_ref.data(), g.data(), u.data(), n);
    CHECK(rel_diff(y, y_ref) < tol<T>());
    std::vector<T> dg = rand_vec<T>(n, 29), du = rand_vec<T>(n, 30);
    std::vector<T> dg_ref = dg, du_ref = du;
    swiglu_backward<T>(dg.data(), false, du.data(), false, dout.data(), g.data(), u.data(), n);
    ref_swiglu_backward<T>(dg_ref.data(), du_ref.data(), dout.data(), g.data(), u.data(), n);
    CHECK(rel_diff(dg, dg_ref) < tol<T>());
    CHECK(rel_diff(du, du_ref) < tol<T>());
    // overwrite: whatever the buffers held (NaN here) is replaced, not added to
    std::vector<T> dg_new(n, T(NAN)), du_new(n, T(NAN)), zg(n, T(0)), zu(n, T(0));
    swiglu_backward<T>(dg_new.data(), true, du_new.data(), true, dout.data(), g.data(), u.data(),
                       n);
    ref_swiglu_backward<T>(zg.data(), zu.data(), dout.data(), g.data(), u.data(), n);
    CHECK(rel_diff(dg_new, zg) < tol<T>());
    CHECK(rel_diff(du_new, zu) < tol<T>());
  }

  SUBCASE("depth mix forward and backward, J = 1..3") {
    for (int64_t J = 1; J <= 3; ++J) {
      CAPTURE(J);
      std::vector<std::vector<T>> S, dS, dS_ref;
      for (int64_t j = 0; j < J; ++j) {
        S.push_back(rand_vec<T>(rows * D, 30 + j));
        dS.push_back(rand_vec<T>(rows * D, 40 + j));
      }
      dS_ref = dS;
      auto alpha = rand_vec<T>(rows * J, 24, 0, 1), dout = rand_vec<T>(rows * D, 25);
      std::vector<const T*> sp;
      std::vector<T*> dp, dp_ref;
      for (int64_t j = 0; j < J; ++j) {
        sp.push_back(S[j].data());
        dp.push_back(j == 1 ? nullptr : dS[j].data());  // source 1 (when present) needs no gradient
        dp_ref.push_back(j == 1 ? nullptr : dS_ref[j].data());
      }
      std::vector<T> y(rows * D), y_ref(rows * D);
      depth_mix_forward<T>(y.data(), sp.data(), alpha.data(), rows, J, D);
      ref_depth_mix_forward<T>(y_ref.data(), sp.data(), alpha.data(), rows, J, D);
      CHECK(rel_diff(y, y_ref) < tol<T>());
      auto da = rand_vec<T>(rows * J, 26), da_ref = da;
      depth_mix_backward<T>(dp.data(), da.data(), dout.data(), sp.data(), alpha.data(), rows, J, D);
      ref_depth_mix_backward<T>(dp_ref.data(), da_ref.data(), dout.data(), sp.data(), alpha.data(),
                                rows, J, D);
      CHECK(rel_diff(da, da_ref) < tol<T>());
      for (int64_t j = 0; j < J; ++j) CHECK(rel_diff(dS[j], dS_ref[j]) < tol<T>());
    }
  }
}

// ---- sum over a run of axes: the fast path against the general path and the reference ---------

namespace {
// The elements of t as T, in row-major order (exact: to_vector widens to double).
template <class T>
std::vector<T> values_of(const Tensor& t) {
  std::vector<T> v;
  for (double x : t.to_vector()) v.push_back(static_cast<T>(x));
  return v;
}
// t's values in a non-contiguous tensor (its last two axes swapped in memory, then viewed back):
// sum_axes takes its general path (a permuted copy) on it.
Tensor non_contiguous_copy(const Tensor& t) {
  Shape order;
  for (int64_t k = 0; k < t.dim(); ++k) order.push_back(k);
  std::swap(order[t.dim() - 1], order[t.dim() - 2]);
  return dg::raw::view_permute(dg::raw::clone(dg::raw::view_permute(t, order)), order);
}
}  // namespace

TEST_CASE_TEMPLATE(
    "sum_axes: the run-of-axes path, the general path and the reference agree in bits", T, float,
    double) {
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;
  };
  // leading axes (bias gradients), a middle run, above kParallelGrain, an empty reduced axis
  const std::vector<Case> cases{{{67, 96}, {0}},
                                {{3, 45, 40}, {0, 1}},
                                {{3, 45, 40}, {1}},
                                {{5, 7, 3, 33}, {1, 2}},
                                {{2, 1000, 70}, {1}},
                                {{1500, 100}, {0}},
                                {{4, 0, 3}, {1}},
                                {{9, 600, 2}, {0}},
                                // the general path: rows summed 8 at a time, and the rest
                                {{67, 96}, {1}},
                                {{3, 45, 40}, {2}},
                                {{3, 45, 40}, {0, 2}},
                                {{5, 7, 3, 33}, {1, 3}},
                                {{2, 1000, 70}, {2}},
                                {{7, 5}, {1}}};
  for (const Case& c : cases)
    for (bool keepdim : {false, true}) {
      const std::string shape = shape_str(c.shape);
      CAPTURE(shape);
      CAPTURE(keepdim);
      Tensor a = random_tensor(c.shape, 71, -1, 1, false).to(dtype_of<T>());
      REQUIRE(a.is_contiguous());
      const Tensor fast = sum_axes(a, c.axes, keepdim);
      CHECK(fast.shape() == ref_sum_axes(a, c.axes, keepdim).shape());
      CHECK(same_bits(values_of<T>(fast), values_of<T>(ref_sum_axes(a, c.axes, keepdim))));
      if (a.numel() > 0) {
        const Tensor general = sum_axes(non_contiguous_copy(a), c.axes, keepdim);
        CHECK(same_bits(values_of<T>(fast), values_of<T>(general)));
      }
    }
}

TEST_CASE("sum_axes: float32 bits the same at 1 and 2 threads") {
  ThreadsGuard guard;
  Tensor a = random_tensor({3, 700, 130}, 72, -1, 1, false).to(DType::f32);  // above the grain
  auto run = [&](int n) {
    set_threads(n);
    return std::vector<std::vector<float>>{
        values_of<float>(sum_axes(a, {0, 1}, false)), values_of<float>(sum_axes(a, {1}, true)),
        values_of<float>(sum_axes(a, {0}, false)), values_of<float>(sum_axes(a, {2}, false)),
        values_of<float>(sum_axes(a, {0, 2}, false))};
  };
  check_same_bits_at_1_and_2_threads(run);
}

// ---- binary_kernel with broadcasting: every inner-stride case against elementwise f ------------

namespace {
// out = a − 2b + a·b through binary_kernel (not commutative, so a swapped operand shows).
template <class T>
Tensor broadcast_combine(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(broadcast_shapes(a.shape(), b.shape(), "test"), a.dtype());
  binary_kernel<T>(a, b, out, [](T x, T y) { return x - T(2) * y + x * y; });
  return out;
}
// The same formula applied element by element to contiguous copies of the expanded operands.
template <class T>
std::vector<T> expected_combine(const Tensor& a, const Tensor& b) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "test");
  const std::vector<T> va = values_of<T>(dg::raw::clone(dg::raw::view_expand(a, shape)));
  const std::vector<T> vb = values_of<T>(dg::raw::clone(dg::raw::view_expand(b, shape)));
  std::vector<T> out(va.size());
  for (size_t i = 0; i < va.size(); ++i) out[i] = va[i] - T(2) * vb[i] + va[i] * vb[i];
  return out;
}
}  // namespace

TEST_CASE_TEMPLATE("binary_kernel broadcasting: contiguous, scalar-along-row and strided rows", T,
                   float, double) {
  const std::vector<std::pair<Shape, Shape>> cases{
      {{37, 50}, {37, 1}},    {{37, 1}, {37, 50}},    {{1, 50}, {37, 50}},   {{37, 50}, {50}},
      {{5, 1, 9}, {1, 7, 1}}, {{5, 7, 1}, {1, 1, 9}}, {{600, 300}, {600, 1}}};
  for (const auto& [sa, sb] : cases) {
    const std::string shapes = shape_str(sa) + " with " + shape_str(sb);
    CAPTURE(shapes);
    Tensor a = random_tensor(sa, 81, -2, 2, false).to(dtype_of<T>());
    Tensor b = random_tensor(sb, 82, -2, 2, false).to(dtype_of<T>());
    CHECK(same_bits(values_of<T>(broadcast_combine<T>(a, b)), expected_combine<T>(a, b)));
  }
  // a strided (transposed) operand: the general inner stride
  Tensor at =
      dg::raw::view_permute(random_tensor({50, 37}, 83, -2, 2, false).to(dtype_of<T>()), {1, 0});
  Tensor b = random_tensor({37, 1}, 84, -2, 2, false).to(dtype_of<T>());
  CHECK(same_bits(values_of<T>(broadcast_combine<T>(at, b)), expected_combine<T>(at, b)));
}

TEST_CASE("binary_kernel broadcasting: float32 bits the same at 1 and 2 threads") {
  ThreadsGuard guard;
  Tensor a = random_tensor({600, 300}, 85, -2, 2, false).to(DType::f32);  // above the grain
  Tensor col = random_tensor({600, 1}, 86, -2, 2, false).to(DType::f32);
  Tensor row = random_tensor({300}, 87, -2, 2, false).to(DType::f32);
  auto run = [&](int n) {
    set_threads(n);
    return std::vector<std::vector<float>>{values_of<float>(broadcast_combine<float>(a, col)),
                                           values_of<float>(broadcast_combine<float>(col, a)),
                                           values_of<float>(broadcast_combine<float>(a, row))};
  };
  check_same_bits_at_1_and_2_threads(run);
}

// ---- thread-count independence ------------------------------------------------------------------

TEST_CASE("elementwise kernels: float32 results are bit-identical at 1 and 2 threads") {
  ThreadsGuard guard;
  // Sizes above kParallelGrain so that the parallel branches run.
  const int64_t rows = 900, D = 160, J = 3;
  auto x = rand_vec<float>(rows * D, 1);
  auto dout = rand_vec<float>(rows * D, 4);
  auto alpha = rand_vec<float>(rows * J, 9, 0, 1);
  auto run = [&](int n) {
    set_threads(n);
    std::vector<std::vector<float>> r;
    auto keep = [&](std::vector<float> v) { r.push_back(std::move(v)); };
    {  // swiglu
      std::vector<float> y(rows * D), dg(rows * D, 0.5f), du(rows * D);
      swiglu_forward<float>(y.data(), x.data(), dout.data(), rows * D);
      swiglu_backward<float>(dg.data(), false, du.data(), true, dout.data(), x.data(), dout.data(),
                             rows * D);
      keep(y), keep(dg), keep(du);
    }
    {  // depth mix
      std::vector<float> s0 = rand_vec<float>(rows * D, 12), s1 = rand_vec<float>(rows * D, 13);
      const float* S[3] = {s0.data(), s1.data(), x.data()};
      std::vector<float> y(rows * D), d0(rows * D, 0.0f), d2(rows * D, 0.0f), da(rows * J, 0.0f);
      float* dS[3] = {d0.data(), nullptr, d2.data()};
      depth_mix_forward<float>(y.data(), S, alpha.data(), rows, J, D);
      depth_mix_backward<float>(dS, da.data(), dout.data(), S, alpha.data(), rows, J, D);
      keep(y), keep(d0), keep(d2), keep(da);
    }
    return r;
  };
  check_same_bits_at_1_and_2_threads(run);
}

// ---- op-level behaviour and errors --------------------------------------------------------------

TEST_CASE("depth_mix: a source passed twice gets both contributions; shapes are checked") {
  Tensor s = random_tensor({2, 3}, 1);
  Tensor alpha =
      Tensor::from_vector({0.25, 0.5, 1.0, -1.0}, {2, 2}, DType::f64).set_requires_grad(true);
  Tensor y = depth_mix({s, s}, alpha);
  backward(y, Tensor::ones({2, 3}, DType::f64));
  std::vector<double> gs = s.grad().to_vector();
  for (int k = 0; k < 3; ++k) {
    CHECK(gs[k] == doctest::Approx(0.75));
    CHECK(gs[3 + k] == doctest::Approx(0.0));
  }
  std::vector<double> sv = s.to_vector();
  CHECK(alpha.grad().at({1, 0}) == doctest::Approx(sv[3] + sv[4] + sv[5]));
  CHECK_THROWS_WITH(depth_mix({s, s}, Tensor::zeros({2, 3}, DType::f64)),
                    doctest::Contains("alpha of shape [2, 2]"));
  CHECK_THROWS_WITH(depth_mix({s, random_tensor({3, 2}, 2)}, alpha), doctest::Contains("source 1"));
  CHECK_THROWS_WITH(depth_mix({}, alpha), doctest::Contains("depth_mix"));
}

TEST_CASE("exp_f32: within 2 ulp of exp on [-87, 88], exact at 0, and the special values") {
  double worst = 0;
  for (double x = -87.0; x <= 88.0; x += 3.7e-4) {
    const float xf = static_cast<float>(x);
    const double want = std::exp(static_cast<double>(xf));
    const double ulp =
        std::nextafter(static_cast<float>(want), INFINITY) - static_cast<float>(want);
    worst = std::max(worst, std::fabs(exp_f32(xf) - want) / ulp);
  }
  CHECK(worst <= 2.0);
  // the same values from a vectorised loop (the path the kernels take)
  std::vector<float> xs(1000), ys(1000);
  for (int i = 0; i < 1000; ++i) xs[i] = -20.0f + 0.04f * i;
#pragma omp simd
  for (int i = 0; i < 1000; ++i) ys[i] = exp_f32(xs[i]);
  for (int i = 0; i < 1000; ++i) CHECK(ys[i] == exp_f32(xs[i]));
  CHECK(exp_f32(0.0f) == 1.0f);
  CHECK(exp_f32(-INFINITY) == 0.0f);
  CHECK(exp_f32(-100.0f) == 0.0f);
  CHECK(std::isinf(exp_f32(100.0f)));
  CHECK(std::isnan(exp_f32(NAN)));
}
