// Tests of the norm family (tensor/kernels_norm.h, autograd/ops_norm.cpp): rmsnorm and layernorm
// fast kernels against the plain reference kernels, float32 bit-identity at 1 and 2 threads, a
// torch 1.13 golden for rms_norm and the ops' errors. Gradients: the norm rows of the gradient-
// check table; plain_rms_norm against rms_norm: tests/test_plain_ops.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "tensor/kernels_norm.h"
#include "tensor/threads.h"
#include "tests/kernel_test_helpers.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

namespace {}  // namespace

// ---- fast kernels against the reference kernels -------------------------------------------------

TEST_CASE_TEMPLATE("norm kernels: fast matches reference", T, float, double) {
  const int64_t rows = 67, D = 96;  // rows not a multiple of kRowChunk

  SUBCASE("rmsnorm forward and backward (dx, dw)") {
    auto x = rand_vec<T>(rows * D, 11), w = rand_vec<T>(D, 12, 0.5, 1.5),
         dout = rand_vec<T>(rows * D, 13);
    std::vector<T> y(rows * D), rs(rows), y_ref(rows * D), rs_ref(rows);
    rmsnorm_forward<T>(y.data(), rs.data(), x.data(), w.data(), rows, D, 1e-6);
    ref_rmsnorm_forward<T>(y_ref.data(), rs_ref.data(), x.data(), w.data(), rows, D, 1e-6);
    CHECK(rel_diff(y, y_ref) < tol<T>());
    CHECK(rel_diff(rs, rs_ref) < tol<T>());
    auto dx = rand_vec<T>(rows * D, 14), dx_ref = dx, dw = rand_vec<T>(D, 15), dw_ref = dw;
    rmsnorm_backward<T>(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rs.data(), rows, D);
    ref_rmsnorm_backward<T>(dx_ref.data(), dw_ref.data(), dout.data(), x.data(), w.data(),
                            rs.data(), rows, D);
    CHECK(rel_diff(dx, dx_ref) < tol<T>());
    CHECK(rel_diff(dw, dw_ref) < tol<T>());
    // null gradient pointers are skipped
    auto dx2 = rand_vec<T>(rows * D, 14);
    rmsnorm_backward<T>(dx2.data(), nullptr, dout.data(), x.data(), w.data(), rs.data(), rows, D);
    CHECK(same_bits(dx2, dx));
  }

  SUBCASE("layernorm forward and backward (dx, dw, db)") {
    auto x = rand_vec<T>(rows * D, 16, -1, 3), w = rand_vec<T>(D, 17, 0.5, 1.5),
         b = rand_vec<T>(D, 18);
    auto dout = rand_vec<T>(rows * D, 19);
    std::vector<T> y(rows * D), mu(rows), rs(rows), y_ref(rows * D), mu_ref(rows), rs_ref(rows);
    layernorm_forward<T>(y.data(), mu.data(), rs.data(), x.data(), w.data(), b.data(), rows, D,
                         1e-5);
    ref_layernorm_forward<T>(y_ref.data(), mu_ref.data(), rs_ref.data(), x.data(), w.data(),
                             b.data(), rows, D, 1e-5);
    CHECK(rel_diff(y, y_ref) < tol<T>());
    CHECK(rel_diff(mu, mu_ref) < tol<T>());
    CHECK(rel_diff(rs, rs_ref) < tol<T>());
    auto dx = rand_vec<T>(rows * D, 20), dx_ref = dx, dw = rand_vec<T>(D, 21), dw_ref = dw;
    auto db = rand_vec<T>(D, 22), db_ref = db;
    layernorm_backward<T>(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                          mu.data(), rs.data(), rows, D);
    ref_layernorm_backward<T>(dx_ref.data(), dw_ref.data(), db_ref.data(), dout.data(), x.data(),
                              w.data(), mu.data(), rs.data(), rows, D);
    CHECK(rel_diff(dx, dx_ref) < tol<T>());
    CHECK(rel_diff(dw, dw_ref) < tol<T>());
    CHECK(rel_diff(db, db_ref) < tol<T>());
  }
}

// ---- thread-count independence ------------------------------------------------------------------

TEST_CASE("norm kernels: float32 results are bit-identical at 1 and 2 threads") {
  ThreadsGuard guard;
  // Sizes above kParallelGrain so that the parallel branches run.
  const int64_t rows = 900, D = 160;
  auto x = rand_vec<float>(rows * D, 1), w = rand_vec<float>(D, 2, 0.5, 1.5),
       b = rand_vec<float>(D, 3);
  auto dout = rand_vec<float>(rows * D, 4);
  auto run = [&](int n) {
    set_threads(n);
    std::vector<std::vector<float>> r;
    auto keep = [&](std::vector<float> v) { r.push_back(std::move(v)); };
    {  // rmsnorm and layernorm with weight gradients
      std::vector<float> y(rows * D), rs(rows), mu(rows), dx(rows * D, 0.0f), dw(D, 0.0f),
          db(D, 0.0f);
      rmsnorm_forward<float>(y.data(), rs.data(), x.data(), w.data(), rows, D, 1e-6);
      rmsnorm_backward<float>(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rs.data(),
                              rows, D);
      keep(y), keep(rs), keep(dx), keep(dw);
      std::fill(dx.begin(), dx.end(), 0.0f);
      std::fill(dw.begin(), dw.end(), 0.0f);
      layernorm_forward<float>(y.data(), mu.data(), rs.data(), x.data(), w.data(), b.data(), rows,
                               D, 1e-5);
      layernorm_backward<float>(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                                mu.data(), rs.data(), rows, D);
      keep(y), keep(mu), keep(rs), keep(dx), keep(dw), keep(db);
    }
    return r;
  };
  check_same_bits_at_1_and_2_threads(run);
}

// ---- golden values from torch 1.13 --------------------------------------------------------------
// Generated offline with torch 1.13, float32 throughout; inputs are exact dyadic rationals from
// pattern() so both sides start from the same bits.

TEST_CASE("rms_norm matches torch x·rsqrt(mean(x²) + eps)·g (output, dx, dw)") {
  Tensor x = Tensor::from_vector(pattern(12, 7, 23, 11, 8.0), {2, 6}).set_requires_grad(true);
  std::vector<double> g(6);
  for (int k = 0; k < 6; ++k) g[k] = 0.5 + k / 8.0;
  Tensor w = Tensor::from_vector(g, {6}).set_requires_grad(true);
  Tensor y = rms_norm(x, w, 1e-6);
  check_close(y.to_vector(),
              {-0.8008382320404053, -0.3640173673629761, 0.3276156485080719, 1.2740607261657715,
               -0.8736417293548584, 0.16380782425403595, 0.5919159054756165, -0.7398948669433594,
               -0.11098423600196838, 0.7768896818161011, -1.4797897338867188, -0.49942904710769653},
              1e-6);
  backward(y, Tensor::from_vector(pattern(12, 3, 7, 3, 4.0), {2, 6}));
  check_close(x.grad().to_vector(),
              {-0.43399104475975037, 0.0010290228528901935, 0.654459536075592, -0.257384717464447,
               0.5839713215827942, -0.6554885506629944, -0.1803826242685318, -0.22655954957008362,
               0.04104520007967949, 0.53061842918396, 0.11449405550956726, 0.7890410423278809},
              1e-6);
  check_close(w.grad().to_vector(),
              {1.4972152709960938, 0.8878738880157471, 0.3276156485080719, 0.30188804864883423,
               -0.06687343120574951, -0.2947719395160675},
              1e-6);
}

// ---- op-level behaviour and errors --------------------------------------------------------------

TEST_CASE("norms reject mismatched shapes, naming the op") {
  Tensor x = Tensor::zeros({2, 6});
  CHECK_THROWS_WITH(rms_norm(x, Tensor::ones({5})), doctest::Contains("rms_norm"));
  CHECK_THROWS_WITH(rms_norm(x, Tensor::ones({6}, DType::f64)), doctest::Contains("dtypes differ"));
  CHECK_THROWS_WITH(layer_norm(x, Tensor::ones({6}), Tensor::ones({4})),
                    doctest::Contains("bias of shape [6]"));
}
