// Tests of the fused nn kernels and ops
// (tensor/kernels_{embedding,loss,norm,attention,elementwise}.h, autograd/ops_*.cpp): fast kernels
// against the plain reference kernels, float32 results bit-identical at 1 and 2 threads, golden
// values from torch 1.13 (F.cross_entropy, an RMSNorm, the reference's float32 RoPE), and the
// error messages. Gradients of every op are checked numerically by the all_op_cases() rows.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/fast_math.h"
#include "tensor/kernels_attention.h"
#include "tensor/kernels_elementwise.h"
#include "tensor/kernels_embedding.h"
#include "tensor/kernels_loss.h"
#include "tensor/kernels_norm.h"
#include "tensor/threads.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

namespace {

std::vector<int32_t> rand_ids(int64_t n, int32_t V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = static_cast<int32_t>(rng() % V);
  return v;
}

template <class T>
double tol() {
  return sizeof(T) == 4 ? 2e-5 : 1e-12;
}

// Restores the thread count when a test that changes it ends.

void check_close(const std::vector<double>& got, const std::vector<double>& want,
                 double tolerance) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(got[i] - want[i]) <= tolerance * std::max(1.0, std::fabs(want[i])));
  }
}

std::vector<double> pattern(int64_t n, int mul, int mod, int shift, double div) {
  std::vector<double> v(n);
  for (int64_t k = 0; k < n; ++k) v[k] = static_cast<double>((k * mul) % mod - shift) / div;
  return v;
}

}  // namespace

// ---- fast kernels against the reference kernels -------------------------------------------------

TEST_CASE_TEMPLATE("nn kernels: fast matches reference", T, float, double) {
  const int64_t rows = 67, D = 96;  // rows not a multiple of kRowChunk

  SUBCASE("embedding backward equals the serial scatter-add bit for bit") {
    const int64_t N = 200, V = 13;
    auto ids = rand_ids(N, V, 1);
    auto dout = rand_vec<T>(N * D, 2);
    auto a = rand_vec<T>(V * D, 3), b = a;
    embedding_backward<T>(a.data(), dout.data(), ids.data(), N, V, D);
    ref_embedding_backward<T>(b.data(), dout.data(), ids.data(), N, V, D);
    CHECK(same_bits(a, b));
    std::vector<T> out(N * D), W = rand_vec<T>(V * D, 4);
    embedding_forward<T>(out.data(), ids.data(), W.data(), N, D);
    CHECK(out[5 * D + 7] == W[ids[5] * D + 7]);
  }

  SUBCASE("softmax and log_softmax, last and middle axis") {
    for (bool log : {false, true})
      for (auto dims : {std::tuple<int64_t, int64_t, int64_t>{rows, 37, 1}, {5, 11, 7}}) {
        const auto [outer, C, inner_] = dims;
        const int64_t inner = inner_;  // a plain variable: clang < 16 cannot capture a binding
        CAPTURE(log);
        CAPTURE(inner);
        const int64_t n = outer * C * inner;
        auto x = rand_vec<T>(n, 5, -4, 4);
        std::vector<T> y(n), y_ref(n);
        softmax_forward<T>(y.data(), x.data(), outer, C, inner, log);
        ref_softmax_forward<T>(y_ref.data(), x.data(), outer, C, inner, log);
        CHECK(rel_diff(y, y_ref) < tol<T>());
        auto dy = rand_vec<T>(n, 6);
        auto dx = rand_vec<T>(n, 7), dx_ref = dx;
        softmax_backward<T>(dx.data(), dy.data(), y.data(), outer, C, inner, log);
        ref_softmax_backward<T>(dx_ref.data(), dy.data(), y.data(), outer, C, inner, log);
        CHECK(rel_diff(dx, dx_ref) < tol<T>());
      }
  }

  SUBCASE("cross-entropy with ignored rows") {
    const int64_t N = rows, C = 29;
    auto logits = rand_vec<T>(N * C, 8, -5, 5);
    auto targets = rand_ids(N, C, 9);
    for (int64_t n = 0; n < N; n += 5) targets[n] = -1;
    std::vector<T> loss(N), lse(N), loss_ref(N), lse_ref(N);
    cross_entropy_forward<T>(loss.data(), lse.data(), logits.data(), targets.data(), N, C, -1);
    ref_cross_entropy_forward<T>(loss_ref.data(), lse_ref.data(), logits.data(), targets.data(), N,
                                 C, -1);
    CHECK(rel_diff(loss, loss_ref) < tol<T>());
    CHECK(rel_diff(lse, lse_ref) < tol<T>());
    CHECK(loss[0] == T(0));
    auto d = rand_vec<T>(N * C, 10), d_ref = d;
    cross_entropy_backward<T>(d.data(), logits.data(), lse.data(), targets.data(), T(0.25), N, C,
                              -1);
    ref_cross_entropy_backward<T>(d_ref.data(), logits.data(), lse.data(), targets.data(), T(0.25),
                                  N, C, -1);
    CHECK(rel_diff(d, d_ref) < tol<T>());
  }

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

// ---- thread-count independence ------------------------------------------------------------------

TEST_CASE("nn kernels: float32 results are bit-identical at 1 and 2 threads") {
  ThreadsGuard guard;
  // Sizes above kParallelGrain so that the parallel branches run.
  const int64_t rows = 300, D = 160, V = 50, C = 130, BH = 12, Tn = 64, hd = 64, J = 3;
  auto x = rand_vec<float>(rows * D, 1), w = rand_vec<float>(D, 2, 0.5, 1.5),
       b = rand_vec<float>(D, 3);
  auto dout = rand_vec<float>(rows * D, 4);
  auto ids = rand_ids(rows * 2, V, 5);
  auto logits = rand_vec<float>(rows * C, 6, -6, 6);
  auto targets = rand_ids(rows, C, 7);
  for (int64_t n = 0; n < rows; n += 7) targets[n] = -100;
  auto xr = rand_vec<float>(BH * Tn * hd, 8);
  auto alpha = rand_vec<float>(rows * J, 9, 0, 1);
  auto mid = rand_vec<float>(4 * 100 * 100, 10, -3, 3);

  auto run = [&](int n) {
    set_threads(n);
    std::vector<std::vector<float>> r;
    auto keep = [&](std::vector<float> v) { r.push_back(std::move(v)); };
    {  // embedding backward (repeated ids, D wide rows)
      std::vector<float> dW(V * D, 0.5f);
      auto g = rand_vec<float>(rows * 2 * D, 11);
      embedding_backward<float>(dW.data(), g.data(), ids.data(), rows * 2, V, D);
      keep(dW);
    }
    {  // softmax, last axis and middle axis, forward + backward
      std::vector<float> y(rows * D), dx(rows * D, 0.25f);
      softmax_forward<float>(y.data(), x.data(), rows, D, 1, false);
      softmax_backward<float>(dx.data(), dout.data(), y.data(), rows, D, 1, false);
      keep(y), keep(dx);
      std::vector<float> ym(mid.size()), dm(mid.size(), 0.0f);
      softmax_forward<float>(ym.data(), mid.data(), 4, 100, 100, true);
      softmax_backward<float>(dm.data(), mid.data(), ym.data(), 4, 100, 100, true);
      keep(ym), keep(dm);
    }
    {  // cross-entropy
      std::vector<float> loss(rows), lse(rows), d(rows * C, 0.0f);
      cross_entropy_forward<float>(loss.data(), lse.data(), logits.data(), targets.data(), rows, C,
                                   -100);
      cross_entropy_backward<float>(d.data(), logits.data(), lse.data(), targets.data(),
                                    1.0f / rows, rows, C, -100);
      keep(loss), keep(lse), keep(d);
    }
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
    {  // rope
      std::vector<float> cos(Tn * hd / 2), sin(Tn * hd / 2), y(xr.size()), dx(xr.size(), 0.0f);
      rope_tables<float>(cos.data(), sin.data(), Tn, hd, 10000.0, 0);
      rope_forward<float>(y.data(), xr.data(), cos.data(), sin.data(), BH, Tn, hd);
      rope_backward<float>(dx.data(), xr.data(), cos.data(), sin.data(), BH, Tn, hd);
      keep(y), keep(dx);
    }
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
  auto one = run(1);
  auto two = run(2);
  REQUIRE(one.size() == two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bits(one[i], two[i]));
  }
}

TEST_CASE(
    "linear_rope gives the bits of linear, split heads, rope, merge heads (values, gradients)") {
  const int64_t B = 2, T = 7, H = 3, hd = 6, in = 5;
  auto f32 = [](Tensor t) { return t.to(DType::f32).set_requires_grad(true); };
  Tensor x = f32(random_tensor({B, T, in}, 51, -1, 1, false));
  Tensor w = f32(random_tensor({H * hd, in}, 52, -1, 1, false));
  Tensor b = f32(random_tensor({H * hd}, 53, -1, 1, false));
  Tensor x2 = f32(x.clone()), w2 = f32(w.clone()), b2 = f32(b.clone());
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

// ---- golden values from torch 1.13
// Generated offline with
// /usr/bin/python3 (torch 1.13), float32 throughout; inputs are exact dyadic rationals from
// pattern() so both sides start from the same bits.

TEST_CASE("cross_entropy matches torch F.cross_entropy (value and gradient, ignored rows)") {
  // logits [4, 5] = ((k*5) % 17 − 8) / 4, targets [3, −100, 0, 4], ignore_index −100
  Tensor logits = Tensor::from_vector(pattern(20, 5, 17, 8, 4.0), {4, 5}).set_requires_grad(true);
  Tensor loss = cross_entropy(logits, Tensor::from_ids({3, -100, 0, 4}, {4}));
  CHECK(loss.dim() == 0);
  check_close({loss.item()}, {0.7454997897148132}, 1e-6);
  backward(loss);
  check_close(logits.grad().to_vector(),
              {0.0054367706179618835,
               0.01897618919610977,
               0.06623341888189316,
               -0.10215600579977036,
               0.011509641073644161,
               0.0,
               0.0,
               0.0,
               0.0,
               0.0,
               -0.15414971113204956,
               0.00892102811485529,
               0.03113744780421257,
               0.1086803674697876,
               0.005410877056419849,
               0.04512035846710205,
               0.15748554468154907,
               0.007840744219720364,
               0.027366887778043747,
               -0.2378135323524475},
              1e-6);
}

TEST_CASE("cross_entropy: every target ignored gives NaN and a zero gradient, like torch") {
  Tensor logits = Tensor::zeros({2, 3}).set_requires_grad(true);
  Tensor loss = cross_entropy(logits, Tensor::from_ids({-100, -100}, {2}));
  CHECK(std::isnan(loss.item()));
  backward(loss);
  for (double g : logits.grad().to_vector()) CHECK(g == 0.0);
}

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

// ---- op-level behaviour and errors --------------------------------------------------------------

TEST_CASE("embedding: rows gathered, repeated ids accumulate, out-of-range ids throw") {
  Tensor W = Tensor::from_vector(pattern(10, 3, 7, 3, 2.0), {5, 2}).set_requires_grad(true);
  Tensor ids = Tensor::from_ids({4, 1, 4, 4}, {2, 2});
  Tensor y = embedding(W, ids);
  CHECK(y.shape() == Shape{2, 2, 2});
  CHECK(y.at({1, 0, 1}) == W.at({4, 1}));
  backward(sum(y));
  CHECK(W.grad().at({4, 0}) == 3.0);
  CHECK(W.grad().at({1, 1}) == 1.0);
  CHECK(W.grad().at({0, 0}) == 0.0);
  CHECK_THROWS_WITH(embedding(W, Tensor::from_ids({0, 7}, {2})),
                    doctest::Contains("id 7 at position 1 is out of range for vocabulary size 5"));
  CHECK_THROWS_WITH(embedding(W, Tensor::from_ids({-1}, {1})), doctest::Contains("id -1"));
  CHECK_THROWS_WITH(embedding(W, W), doctest::Contains("embedding"));
  clear_tape();
}

TEST_CASE("cross_entropy: a target outside [0, C) that is not ignore_index throws") {
  Tensor logits = Tensor::zeros({3, 4});
  CHECK_THROWS_WITH(cross_entropy(logits, Tensor::from_ids({0, 4, 1}, {3})),
                    doctest::Contains("target 4 at row 1 is out of range for 4 classes"));
  CHECK_THROWS_WITH(cross_entropy(logits, Tensor::from_ids({0, -1, 1}, {3})),
                    doctest::Contains("target -1"));
  CHECK_NOTHROW(cross_entropy(logits, Tensor::from_ids({0, -1, 1}, {3}), -1));
  CHECK_THROWS_WITH(cross_entropy(logits, Tensor::from_ids({0, 1}, {2})),
                    doctest::Contains("cross_entropy"));
  // uniform logits: loss = log(4)
  CHECK(cross_entropy(logits, Tensor::from_ids({0, 3, 1}, {3})).item() ==
        doctest::Approx(std::log(4.0)));
}

TEST_CASE("softmax: rows sum to one on any axis, views are handled, log_softmax = log(softmax)") {
  Tensor a = random_tensor({3, 4, 5}, 7, -3, 3, false);
  for (int64_t axis : {0, 1, 2}) {
    CAPTURE(axis);
    Tensor s = softmax(a, axis);
    Tensor total = sum(s, {axis});
    for (double v : total.to_vector()) CHECK(v == doctest::Approx(1.0).epsilon(1e-12));
    std::vector<double> ls = log_softmax(a, axis).to_vector(), sv = s.to_vector();
    for (size_t i = 0; i < sv.size(); ++i)
      CHECK(ls[i] == doctest::Approx(std::log(sv[i])).epsilon(1e-12));
  }
  // a transposed view gives the softmax of its contiguous copy
  Tensor t = a.view_transpose(1, 2);
  CHECK(softmax(t, 1).to_vector() == softmax(t.contiguous(), 1).to_vector());
}

TEST_CASE("norms and rope reject mismatched shapes, naming the op") {
  Tensor x = Tensor::zeros({2, 6});
  CHECK_THROWS_WITH(rms_norm(x, Tensor::ones({5})), doctest::Contains("rms_norm"));
  CHECK_THROWS_WITH(rms_norm(x, Tensor::ones({6}, DType::f64)), doctest::Contains("dtypes differ"));
  CHECK_THROWS_WITH(layer_norm(x, Tensor::ones({6}), Tensor::ones({4})),
                    doctest::Contains("bias of shape [6]"));
  CHECK_THROWS_WITH(rope(Tensor::zeros({1, 1, 3, 5})), doctest::Contains("even head size"));
}

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
