// GEMM wrappers, batched GEMM, layouts, strided copy/add and column sums against their naive
// references (odd shapes, float and double, every transpose flag, padded leading dimensions);
// the matmul/linear ops against ref_matmul; shape ops as views; and bit-identical results at 1
// and 2 threads for the paths that use threads (BLAS threading, the batch loop, column sums).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/kernels_matmul.h"
#include "tensor/threads.h"
#include "tests/kernel_test_helpers.h"

using namespace dg;

namespace {

template <class T>
double tolerance(int64_t K) {
  return (std::is_same_v<T, float> ? 3e-6 : 1e-13) * double(K + 1);
}

Tensor rand_t(const Shape& shape, uint64_t seed, DType dtype) {
  return random_tensor(shape, seed, -1, 1, false).to(dtype);
}

double max_abs_diff(const Tensor& x, const Tensor& y) {
  REQUIRE(x.shape() == y.shape());
  std::vector<double> a = x.to_vector(), b = y.to_vector();
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

bool same_bytes(const Tensor& x, const Tensor& y) {
  Tensor a = x.contiguous(), b = y.contiguous();
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.storage()->data(), b.storage()->data(), a.numel() * dtype_size(a.dtype())) ==
             0;
}

// Runs f at 1 thread and at 2 threads and restores the previous setting.
template <class F>
auto at_threads(int n, F f) {
  const int previous = threads();
  set_threads(n);
  auto result = f();
  set_threads(previous);
  return result;
}

// One GEMM case checked against ref_gemm: C padded (ldc > N) and pre-filled with NaN when beta = 0
// (beta = 0 must not read C) or with values otherwise; the padding must stay untouched.
template <class T>
void check_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, T beta) {
  CAPTURE(ta);
  CAPTURE(tb);
  CAPTURE(M);
  CAPTURE(N);
  CAPTURE(K);
  const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
  std::vector<T> A = random_values<T>((ta ? K : M) * lda + 1, 1),
                 B = random_values<T>((tb ? N : K) * ldb + 1, 2);
  std::vector<T> C0 = random_values<T>(M * ldc + 1, 3);
  if (beta == T(0))
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C0[i * ldc + j] = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> fast = C0, ref = C0;
  gemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, fast.data(), ldc);
  ref_gemm<T>(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, ref.data(), ldc);
  double worst = 0;
  bool finite = true, padding_kept = true;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t p = i * ldc + j;
      if (j < N) {
        finite = finite && std::isfinite(double(fast[p]));
        worst = std::max(worst, std::fabs(double(fast[p]) - double(ref[p])));
      } else {
        padding_kept = padding_kept && std::memcmp(&fast[p], &C0[p], sizeof(T)) == 0;
      }
    }
  CHECK(finite);
  CHECK(worst <= tolerance<T>(K));
  CHECK(padding_kept);
}
}  // namespace

TEST_CASE_TEMPLATE("gemm matches ref_gemm on odd shapes, every transpose flag, padded ld", T, float,
                   double) {
  // the last: float32 cuts its long K into pieces summed in order
  const int64_t shapes[][3] = {{1, 1, 1},  {3, 5, 7},     {17, 33, 9},   {65, 1, 129},
                               {1, 70, 3}, {130, 67, 45}, {64, 48, 4100}};
  for (auto& s : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        check_gemm<T>(ta, tb, s[0], s[1], s[2], T(1), T(0));
        check_gemm<T>(ta, tb, s[0], s[1], s[2], T(0.5), T(-0.75));
      }
  check_gemm<T>(false, true, 4, 3, 0, T(1), T(0));    // K = 0: C = 0
  check_gemm<T>(true, false, 4, 3, 0, T(1), T(2.5));  // K = 0: C = beta·C
}

TEST_CASE("gemm rejects bad leading dimensions, naming gemm and the sizes") {
  std::vector<float> a(64), b(64), c(64);
  CHECK_THROWS_WITH(gemm(false, false, 4, 4, 4, 1.f, a.data(), 3, b.data(), 4, 0.f, c.data(), 4),
                    doctest::Contains("gemm: lda"));
  CHECK_THROWS_WITH(gemm(false, true, 4, 4, 4, 1.f, a.data(), 4, b.data(), 4, 0.f, c.data(), 2),
                    doctest::Contains("M=4, N=4, K=4"));
}

TEST_CASE_TEMPLATE("gemm_batched sums entries that share an output, in entry order", T, float,
                   double) {
  const int64_t M = 5, N = 7, K = 6, MN = M * N;
  std::vector<T> A = random_values<T>(6 * M * K, 4), B = random_values<T>(6 * K * N, 5);
  const std::vector<int64_t> ao{0, 1 * M * K, 2 * M * K, 3 * M * K, 4 * M * K, 5 * M * K};
  const std::vector<int64_t> bo{0, K * N, 0, 2 * K * N, 3 * K * N, 4 * K * N};  // b entry 0 reused
  const std::vector<int64_t> co{0, MN, 0, 2 * MN, MN, 0};                       // 3 groups
  for (T beta : {T(0), T(0.5)}) {
    CAPTURE(beta);
    std::vector<T> fast = random_values<T>(3 * MN, 6), ref = fast;
    if (beta == T(0)) std::fill(fast.begin(), fast.end(), std::numeric_limits<T>::quiet_NaN());
    gemm_batched<T>(true, false, M, N, K, T(2), A.data(), M, ao, B.data(), N, bo, beta, fast.data(),
                    N, co);
    // reference: beta once per output, then every entry added in order
    for (int64_t g = 0; g < 3; ++g)
      for (int64_t e = 0; e < M * N; ++e)
        ref[g * MN + e] = beta == T(0) ? T(0) : beta * ref[g * MN + e];
    for (size_t i = 0; i < co.size(); ++i)
      ref_gemm<T>(true, false, M, N, K, T(2), A.data() + ao[i], M, B.data() + bo[i], N, T(1),
                  ref.data() + co[i], N);
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      worst = std::max(worst, std::fabs(double(fast[i]) - double(ref[i])));
    CHECK(worst <= 4 * tolerance<T>(K));
  }
  // strided form with a shared A (stride 0) and a summing output (stride 0)
  std::vector<T> fast(MN), ref(MN, T(0));
  gemm_strided_batched<T>(false, false, M, N, K, T(1), A.data(), K, 0, B.data(), N, K * N, T(0),
                          fast.data(), N, 0, 4);
  for (int64_t i = 0; i < 4; ++i)
    ref_gemm<T>(false, false, M, N, K, T(1), A.data(), K, B.data() + i * K * N, N, T(1), ref.data(),
                N);
  double worst = 0;
  for (int64_t i = 0; i < MN; ++i)
    worst = std::max(worst, std::fabs(double(fast[i]) - double(ref[i])));
  CHECK(worst <= 4 * tolerance<T>(K));
}

TEST_CASE("blas_layout reads contiguous, transposed and row-sliced matrices in place") {
  Tensor a = Tensor::zeros({2, 3, 4});
  MatrixLayout l = blas_layout(a);
  CHECK((l.ok && !l.trans && l.ld == 4));
  l = blas_layout(dg::raw::view_transpose(a, 1, 2));  // [2, 4, 3] with strides (12, 1, 4)
  CHECK((l.ok && l.trans && l.ld == 4));
  l = blas_layout(dg::raw::view_narrow(a, 2, 1, 2));  // rows of 2 elements, 4 apart
  CHECK((l.ok && !l.trans && l.ld == 4));
  l = blas_layout(dg::raw::view_expand(Tensor::zeros({1, 4}), {3, 4}));  // row stride 0
  CHECK_FALSE(l.ok);
  l = blas_layout(dg::raw::view_narrow(
      dg::raw::view_transpose(dg::raw::view_narrow(Tensor::zeros({4, 6}), 1, 0, 3), 0, 1), 0, 0,
      2));
  CHECK((l.ok && l.trans && l.ld == 6));
  CHECK(rows_ld(a) == 4);
  CHECK(rows_ld(dg::raw::view_narrow(a, 2, 0, 3)) ==
        4);  // [2, 3, 3] rows 4 apart, blocks of 3 rows
  CHECK(rows_ld(dg::raw::view_narrow(a, 1, 0, 2)) == -1);  // blocks of 2 rows 12 apart
  CHECK(rows_ld(dg::raw::view_transpose(a, 0, 1)) == -1);
  CHECK(rows_ld(Tensor::zeros({5})) == 5);
}

TEST_CASE_TEMPLATE(
    "matmul matches ref_matmul: broadcast batch, transposed, sliced, expanded operands", T, float,
    double) {
  const DType dt = dtype_of<T>();
  struct Case {
    Tensor a, b;
  };
  Tensor big = rand_t({3, 9, 11}, 7, dt);
  std::vector<Case> cases = {
      {rand_t({13, 7}, 1, dt), rand_t({7, 19}, 2, dt)},
      {rand_t({3, 1, 5, 6}, 3, dt), rand_t({4, 6, 2}, 4, dt)},  // batch [3, 4]
      {rand_t({5, 6}, 5, dt), rand_t({3, 6, 7}, 6, dt)},        // a broadcast
      {rand_t({2, 3, 5, 6}, 7, dt), rand_t({6, 9}, 8, dt)},     // one folded GEMM
      {dg::raw::view_transpose(rand_t({7, 13}, 9, dt), 0, 1),
       dg::raw::view_transpose(rand_t({19, 7}, 10, dt), 0, 1)},
      {dg::raw::view_transpose(rand_t({4, 6, 5}, 11, dt), 1, 2), rand_t({4, 6, 8}, 12, dt)},
      {dg::raw::view_narrow(big, 1, 2, 5),
       dg::raw::view_narrow(dg::raw::view_transpose(big, 1, 2), 2, 1,
                            7)},  // [3, 5, 11] @ [3, 11, 7]
      {dg::raw::view_expand(rand_t({1, 6}, 13, dt), {5, 6}), rand_t({6, 3}, 14, dt)},  // copied
      {dg::raw::view_permute(rand_t({6, 2, 4}, 15, dt), {1, 0, 2}),
       rand_t({4, 3}, 16, dt)},  // batch stride 4, not foldable
      {rand_t({0, 4}, 17, dt), rand_t({4, 3}, 18, dt)},
      {rand_t({2, 0}, 19, dt), rand_t({0, 3}, 20, dt)},     // K = 0: zeros
      {rand_t({2, 3}, 21, dt), rand_t({2, 3, 0}, 22, dt)},  // N = 0
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    Tensor fast = matmul(cases[i].a, cases[i].b);
    Tensor ref = ref_matmul(cases[i].a, cases[i].b);
    CHECK(fast.dtype() == dt);
    CHECK(max_abs_diff(fast, ref) <= tolerance<T>(cases[i].a.size(-1)));
  }
  CHECK_THROWS_WITH(matmul(rand_t({2, 3}, 1, dt), rand_t({4, 2}, 2, dt)),
                    doctest::Contains("matmul: [2, 3]"));
  CHECK_THROWS_WITH(matmul(rand_t({3}, 1, dt), rand_t({3, 2}, 2, dt)),
                    doctest::Contains("at least 2 axes"));
  CHECK_THROWS_WITH(bmm(rand_t({2, 3, 4}, 1, dt), rand_t({3, 4, 2}, 2, dt)),
                    doctest::Contains("bmm: batch sizes"));
}

TEST_CASE_TEMPLATE("linear matches x·Wᵀ + b from the reference", T, float, double) {
  const DType dt = dtype_of<T>();
  Tensor x = rand_t({3, 5, 17}, 1, dt), w = rand_t({11, 17}, 2, dt), b = rand_t({11}, 3, dt);
  Tensor ref = ref_matmul(x, dg::raw::view_transpose(w, 0, 1));
  std::vector<double> r = ref.to_vector(), bv = b.to_vector();
  for (size_t i = 0; i < r.size(); ++i) r[i] += bv[i % 11];
  CHECK(max_abs_diff(linear(x, w, b), Tensor::from_vector(r, ref.shape(), dt)) <= tolerance<T>(17));
  CHECK(max_abs_diff(linear(x, w), ref) <= tolerance<T>(17));
  // a column slice of x (row stride 20) and a transposed-view weight are read in place
  Tensor xs = dg::raw::view_narrow(rand_t({4, 20}, 4, dt), 1, 2, 17),
         wt = dg::raw::view_transpose(rand_t({17, 11}, 5, dt), 0, 1);
  CHECK(max_abs_diff(linear(xs, wt), ref_matmul(xs, dg::raw::view_transpose(wt, 0, 1))) <=
        tolerance<T>(17));
  CHECK_THROWS_WITH(linear(x, rand_t({11, 16}, 6, dt)), doctest::Contains("linear"));
  CHECK_THROWS_WITH(linear(x, w, rand_t({10}, 7, dt)), doctest::Contains("bias [11]"));
  // linear_add: the residual pre-fills the output (a transposed view is copied in)
  Tensor res = dg::raw::view_permute(rand_t({11, 5, 3}, 8, dt), {2, 1, 0});
  std::vector<double> rv = res.to_vector();
  for (size_t i = 0; i < r.size(); ++i) r[i] += rv[i];
  CHECK(max_abs_diff(linear_add(res, x, w, b), Tensor::from_vector(r, ref.shape(), dt)) <=
        tolerance<T>(17));
  CHECK_THROWS_WITH(
      linear_add(rand_t({3, 5, 10}, 9, dt), x, w),
      doctest::Contains("linear_add: expected a residual of the output's shape [3, 5, 11]"));
}

TEST_CASE("matmul and linear backwards add into existing gradients (beta = 1)") {
  Tensor a = random_tensor({2, 4, 3}, 1), b = random_tensor({3, 5}, 2),
         w = random_tensor({6, 3}, 3), bias = random_tensor({6}, 4);
  auto run = [&] {
    Tensor y = matmul(a, b);
    Tensor z = linear(a, w, bias);
    backward(add(sum(y), sum(z)));
  };
  run();
  std::vector<double> ga = a.grad().to_vector(), gb = b.grad().to_vector(),
                      gw = w.grad().to_vector(), gbias = bias.grad().to_vector();
  run();  // no zero_grad: everything doubles
  auto doubled = [](const std::vector<double>& once, const Tensor& g) {
    std::vector<double> twice = g.to_vector();
    for (size_t i = 0; i < once.size(); ++i)
      if (std::fabs(twice[i] - 2 * once[i]) > 1e-12) return false;
    return true;
  };
  CHECK(doubled(ga, a.grad()));
  CHECK(doubled(gb, b.grad()));
  CHECK(doubled(gw, w.grad()));
  CHECK(doubled(gbias, bias.grad()));
  CHECK(gbias[0] == doctest::Approx(8.0));  // Σ over 2·4 rows of ones
  // empty products: backward runs and leaves zero gradients
  Tensor e = random_tensor({0, 3}, 5), f = random_tensor({3, 4}, 6);
  backward(sum(add(matmul(e, f), Tensor::zeros({0, 4}, DType::f64))));
  backward(sum(linear(e, random_tensor({2, 3}, 7), random_tensor({2}, 8))));
  CHECK(f.grad().to_vector() == std::vector<double>(12, 0.0));
}

TEST_CASE_TEMPLATE("copy_strided and add_strided match the references on views", T, float, double) {
  const DType dt = dtype_of<T>();
  Tensor src = rand_t({4, 5, 6}, 1, dt);
  std::vector<Tensor> sources = {src, dg::raw::view_permute(src, {2, 0, 1}),
                                 dg::raw::view_narrow(src, 1, 1, 3),
                                 dg::raw::view_narrow(dg::raw::view_transpose(src, 0, 2), 0, 2, 3),
                                 dg::raw::view_expand(rand_t({5, 1}, 2, dt), {4, 5, 6})};
  for (size_t i = 0; i < sources.size(); ++i) {
    CAPTURE(i);
    const Tensor& s = sources[i];
    Tensor fast = Tensor::full(s.shape(), 7.0, dt), ref = Tensor::full(s.shape(), 7.0, dt);
    copy_strided(fast, s);
    ref_copy_strided(ref, s);
    CHECK(same_bytes(fast, ref));
    // add into a permuted view of a bigger buffer
    Tensor base_f = rand_t({s.size(2), s.size(0), s.size(1)}, 3, dt),
           base_r = dg::raw::clone(base_f);
    Tensor view_f = dg::raw::view_permute(base_f, {1, 2, 0}),
           view_r = dg::raw::view_permute(base_r, {1, 2, 0});
    add_strided(view_f, s);
    ref_add_strided(view_r, s);
    CHECK(same_bytes(base_f, base_r));
  }
  // Above the parallel grain (rows split over the threads, each stepping its own row index):
  // attention's head split and merge, and a transpose with unit-length rows.
  const Tensor big = rand_t({8, 128, 8, 32}, 4, dt);
  for (const Tensor& s :
       {dg::raw::view_permute(big, {0, 2, 1, 3}), dg::raw::view_permute(big, {2, 3, 0, 1}),
        dg::raw::view_narrow(dg::raw::view_permute(big, {1, 0, 2, 3}), 0, 3, 100)}) {
    Tensor fast = Tensor::full(s.shape(), 7.0, dt), ref = Tensor::full(s.shape(), 7.0, dt);
    copy_strided(fast, s);
    ref_copy_strided(ref, s);
    CHECK(same_bytes(fast, ref));
    Tensor sum_f = rand_t(s.shape(), 5, dt), sum_r = dg::raw::clone(sum_f);
    add_strided(sum_f, s);
    ref_add_strided(sum_r, s);
    CHECK(same_bytes(sum_f, sum_r));
  }
  Tensor ids = Tensor::from_ids({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor ids_t = Tensor::empty({3, 2}, DType::i64);
  copy_strided(ids_t, dg::raw::view_transpose(ids, 0, 1));
  CHECK(ids_t.to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
  Tensor dst = dg::raw::view_expand(Tensor::zeros({1, 3}), {2, 3});
  CHECK_THROWS_WITH(add_strided(dst, Tensor::zeros({2, 3})), doctest::Contains("stride 0"));
}

TEST_CASE_TEMPLATE("add_column_sums equals the reference bit for bit", T, float, double) {
  for (int64_t cols : {1, 63, 64, 200}) {
    const int64_t rows = 301, ld = cols + 5;
    std::vector<T> x = random_values<T>(rows * ld, 9), fast = random_values<T>(cols, 10),
                   ref = fast;
    add_column_sums(x.data(), rows, cols, ld, fast.data());
    ref_add_column_sums(x.data(), rows, cols, ld, ref.data());
    CHECK(std::memcmp(fast.data(), ref.data(), cols * sizeof(T)) == 0);
  }
}

TEST_CASE_TEMPLATE("linear_relu equals relu(linear(·)) bit for bit, values and gradients", T, float,
                   double) {
  const DType dt = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  auto run = [&](bool fused) {
    Tensor x = rand_t({3, 40, 24}, 31, dt), w = rand_t({36, 24}, 32, dt), b = rand_t({36}, 33, dt);
    x.set_requires_grad(true), w.set_requires_grad(true), b.set_requires_grad(true);
    const Tensor y = fused ? linear_relu(x, w, b) : relu(linear(x, w, b));
    backward(y, rand_t(y.shape(), 34, dt));
    return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad()};
  };
  const std::vector<Tensor> fused = run(true), plain = run(false);
  for (size_t i = 0; i < fused.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bytes(fused[i], plain[i]));
  }
}

TEST_CASE("matmul, batched matmul and their backwards are bit-identical at 1 and 2 threads") {
  struct Result {
    std::vector<Tensor> tensors;
  };
  auto compute = [] {
    Result r;
    Tensor a = rand_t({300, 257}, 1, DType::f32), b = rand_t({190, 257}, 2, DType::f32);
    r.tensors.push_back(matmul(a, dg::raw::view_transpose(b, 0, 1)));  // split over threads
    // K between OpenBLAS's K-block and twice it: its own threading would round differently here.
    // 260 x 130 spreads its pieces over the threads; 260 x 12 (under kGemmParallelMinWork) runs
    // them in order with BLAS held to the calling thread.
    for (int64_t m : {260, 261, 20, 17}) {
      const int64_t n = m == 260 ? 130 : m == 261 ? 12 : m;
      Tensor p = rand_t({m, 600}, 13, DType::f32), q = rand_t({600, n}, 14, DType::f32);
      r.tensors.push_back(matmul(p, q));
      r.tensors.push_back(matmul(transpose(q, 0, 1), transpose(p, 0, 1)));
    }
    // batched, small matrices: the OpenMP batch loop; with gradients reduced over a broadcast axis
    Tensor q = rand_t({16, 96, 80}, 3, DType::f32), k = rand_t({80, 112}, 4, DType::f32);
    Tensor q2 = rand_t({96, 64}, 5, DType::f32), k2 = rand_t({16, 64, 96}, 6, DType::f32);
    q.set_requires_grad(true), k.set_requires_grad(true), q2.set_requires_grad(true),
        k2.set_requires_grad(true);
    Tensor y = matmul(q, k);
    backward(y, rand_t(y.shape(), 10, DType::f32));
    Tensor y2 = matmul(q2, k2);
    backward(y2, rand_t(y2.shape(), 11, DType::f32));
    // linear with enough rows and columns that the bias column sums run in parallel
    Tensor x = rand_t({2, 300, 130}, 7, DType::f32), w = rand_t({260, 130}, 8, DType::f32),
           bias = rand_t({260}, 9, DType::f32);
    x.set_requires_grad(true), w.set_requires_grad(true), bias.set_requires_grad(true);
    Tensor z = linear(x, w, bias);
    backward(z, rand_t(z.shape(), 12, DType::f32));
    // linear_add with a residual that requires grad
    Tensor res = rand_t({2, 300, 260}, 15, DType::f32), x3 = rand_t({2, 300, 130}, 16, DType::f32);
    res.set_requires_grad(true), x3.set_requires_grad(true);
    Tensor za = linear_add(res, x3, w, bias);
    backward(za, rand_t(za.shape(), 17, DType::f32));
    // linear_rope: 260 outputs as 13 heads of 20, rotated in place
    Tensor x4 = rand_t({2, 300, 130}, 18, DType::f32);
    x4.set_requires_grad(true);
    Tensor zr = linear_rope(x4, w, bias, 13, 10000.0);
    backward(zr, rand_t(zr.shape(), 19, DType::f32));
    // linear_relu, and a weight gradient over 2,050 rows: K cut into pieces (kernels_matmul.h)
    Tensor x5 = rand_t({2050, 130}, 20, DType::f32), w5 = rand_t({96, 130}, 21, DType::f32);
    x5.set_requires_grad(true), w5.set_requires_grad(true);
    Tensor zl = linear_relu(x5, w5, slice(bias.detach(), 0, 0, 96));
    backward(zl, rand_t(zl.shape(), 22, DType::f32));
    for (Tensor t :
         {y, y2, z, q.grad(), k.grad(), q2.grad(), k2.grad(), x.grad(), w.grad(), bias.grad(), za,
          res.grad(), x3.grad(), zr, x4.grad(), zl, x5.grad(), w5.grad()})
      r.tensors.push_back(t);
    return r;
  };
  Result one = at_threads(1, compute);
  Result two = at_threads(2, compute);
  REQUIRE(one.tensors.size() == two.tensors.size());
  for (size_t i = 0; i < one.tensors.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bytes(one.tensors[i], two.tensors[i]));
  }
}

TEST_CASE("shape ops are views where they should be and copies where they must be") {
  Tensor a = random_tensor({3, 4, 5}, 1);
  CHECK(transpose(a, 0, 2).storage() == a.storage());
  CHECK(permute(a, {1, 2, 0}).storage() == a.storage());
  CHECK(slice(a, 1, 1, 3).storage() == a.storage());
  CHECK(slice(a, 1, 1, 3).offset() == 5);
  CHECK(expand(random_tensor({4, 1}, 2), {2, 4, 6}).strides() == Shape{0, 1, 0});
  CHECK(reshape(a, {12, 5}).storage() == a.storage());
  CHECK(contiguous(a).same(a));
  Tensor t = transpose(a, 1, 2);
  Tensor c = contiguous(t);
  CHECK(c.is_contiguous());
  CHECK(c.storage() != a.storage());
  CHECK(c.to_vector() == t.to_vector());
  Tensor r = reshape(t, {3, 20});
  CHECK(r.storage() != a.storage());
  CHECK(r.to_vector() == t.to_vector());
  CHECK_THROWS_WITH(slice(a, 1, 2, 6), doctest::Contains("slice: [2, 6)"));
  CHECK_THROWS_WITH(cat(std::vector<Tensor>{a, random_tensor({3, 2, 4}, 3)}, 1),
                    doctest::Contains("cat: part 1"));
  CHECK_THROWS_WITH(stack(std::vector<Tensor>{a, random_tensor({3, 4, 4}, 3)}, 0),
                    doctest::Contains("stack: part 1"));
}

TEST_CASE("cat and stack place every part where it belongs") {
  Tensor a = Tensor::from_vector({1, 2, 3, 4}, {2, 2}, DType::f64);
  Tensor b = Tensor::from_vector({5, 6}, {2, 1}, DType::f64);
  CHECK(cat({a, b}, 1).to_vector() == std::vector<double>{1, 2, 5, 3, 4, 6});
  CHECK(cat({a, dg::raw::view_transpose(a, 0, 1)}, 0).to_vector() ==
        std::vector<double>{1, 2, 3, 4, 1, 3, 2, 4});
  Tensor s = stack({a, dg::raw::view_transpose(a, 0, 1)}, 1);
  CHECK(s.shape() == Shape{2, 2, 2});
  CHECK(s.to_vector() == std::vector<double>{1, 2, 1, 3, 3, 4, 2, 4});
  CHECK(stack({a, a}, -1).shape() == Shape{2, 2, 2});
}
