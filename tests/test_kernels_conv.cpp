// Tests of the convolution and pooling kernels (tensor/kernels_conv.h): the conv2d forward, input
// gradient and weight/bias gradient on each kernel (im2col + GEMM, oneDNN, the automatic choice)
// against the direct-loop references over geometries with groups, stride, padding, dilation and
// 1×1 kernels, in float32, float64 and bf16 precision; which kernel the automatic choice takes;
// max and average pooling against theirs; float32 bit-identity at 1 and 2 threads at sizes that
// run in parallel.
// The ops (shapes, errors, torch goldens) are tested in tests/test_conv_ops.cpp.
#include <doctest/doctest.h>

#include <limits>
#include <random>
#include <vector>

#include "tensor/cpu_features.h"
#include "tensor/gemm_kernels.h"
#include "tensor/kernels_conv.h"
#include "tensor/kernels_conv_onednn.h"
#include "tensor/threads.h"
#include "tests/kernel_test_helpers.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

namespace {
// input [N, C, H, W], weight [O, C/groups, k, k], stride, padding, dilation, groups
ConvGeom geom(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t kH, int64_t kW,
              int64_t s, int64_t p, int64_t d, int64_t groups) {
  ConvGeom g{N, C, H, W, O, kH, kW, s, s, p, p, d, d, groups, 0, 0};
  g.Ho = (H + 2 * p - d * (kH - 1) - 1) / s + 1;
  g.Wo = (W + 2 * p - d * (kW - 1) - 1) / s + 1;
  return g;
}

// The three conv kernels on random data: y, dx, dw, db (fast when !ref).
template <class T>
std::vector<std::vector<T>> run_conv(const ConvGeom& g, bool ref) {
  auto x = rand_vec<T>(g.N * g.C * g.H * g.W, 1), w = rand_vec<T>(g.O * g.K(), 2);
  auto b = rand_vec<T>(g.O, 3), dy = rand_vec<T>(g.N * g.O * g.Ho * g.Wo, 4);
  std::vector<T> y(dy.size()), dx = rand_vec<T>(x.size(), 5), dw = rand_vec<T>(w.size(), 6),
                               db = rand_vec<T>(g.O, 7);
  if (ref) {
    ref_conv2d_forward<T>(y.data(), x.data(), w.data(), b.data(), g);
    ref_conv2d_backward_input<T>(dx.data(), dy.data(), w.data(), g);
    ref_conv2d_backward_weight<T>(dw.data(), db.data(), x.data(), dy.data(), g);
  } else {
    conv2d_forward<T>(y.data(), x.data(), w.data(), b.data(), g);
    conv2d_backward_input<T>(dx.data(), dy.data(), w.data(), g);
    conv2d_backward_weight<T>(dw.data(), db.data(), x.data(), dy.data(), g);
  }
  return {y, dx, dw, db};
}

PoolGeom pool(int64_t H, int64_t W, int64_t k, int64_t s, int64_t p, int64_t d, int64_t Ho,
              int64_t Wo) {
  return {H, W, Ho, Wo, k, k, s, s, p, p, d, d};
}

// Max pool (values, indices as T) and the avg pool windows' forward and backward.
template <class T>
std::vector<std::vector<T>> run_pools(int64_t P, const PoolGeom& g, const PoolWindows& w,
                                      bool ref) {
  auto x = rand_vec<T>(P * g.H * g.W, 8), dy = rand_vec<T>(P * w.Ho * w.Wo, 9);
  std::vector<T> y(P * g.Ho * g.Wo), ya(P * w.Ho * w.Wo), dx = rand_vec<T>(x.size(), 10);
  std::vector<int64_t> idx(y.size());
  (ref ? ref_max_pool2d_forward<T> : max_pool2d_forward<T>)(y.data(), idx.data(), x.data(), P, g);
  std::vector<T> dmax = rand_vec<T>(x.size(), 11), gmax = rand_vec<T>(y.size(), 12);
  if (ref)
    ref_max_pool2d_backward<T>(dmax.data(), gmax.data(), idx.data(), P, g.H * g.W, g.Ho * g.Wo);
  else
    max_pool2d_backward<T>(dmax.data(), gmax.data(), idx.data(), P, g.H * g.W, g.Ho * g.Wo);
  (ref ? ref_avg_pool2d_forward<T> : avg_pool2d_forward<T>)(ya.data(), x.data(), P, w);
  (ref ? ref_avg_pool2d_backward<T> : avg_pool2d_backward<T>)(dx.data(), dy.data(), P, w);
  return {y, std::vector<T>(idx.begin(), idx.end()), ya, dx, dmax};
}

// Geometries with groups, stride, padding, dilation, 1×1 kernels, channel counts that fill and
// do not fill oneDNN's blocks of 16, small images (a weight-gradient chunk of many images) and
// an output one row taller than the padding gives (conv_transpose2d's output_padding).
std::vector<ConvGeom> conv_geometries() {
  std::vector<ConvGeom> gs = {
      geom(2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1),   geom(3, 4, 9, 8, 6, 3, 2, 2, 1, 2, 2),
      geom(2, 6, 5, 5, 6, 3, 3, 1, 2, 1, 6),   geom(5, 3, 4, 6, 5, 1, 1, 1, 0, 1, 1),
      geom(2, 2, 6, 7, 4, 1, 1, 2, 0, 1, 2),   geom(1, 2, 8, 1, 3, 3, 1, 2, 1, 2, 1),
      geom(5, 17, 6, 7, 20, 3, 3, 1, 1, 1, 1), geom(3, 32, 8, 8, 16, 3, 3, 2, 1, 1, 1),
      geom(9, 16, 3, 3, 32, 3, 3, 1, 1, 1, 1), geom(2, 16, 9, 9, 16, 3, 3, 1, 2, 2, 1),
      geom(4, 24, 5, 5, 40, 1, 1, 1, 0, 1, 1), geom(3, 16, 10, 10, 16, 3, 3, 1, 1, 1, 1),
      geom(2, 32, 8, 9, 48, 3, 3, 1, 1, 1, 1)};
  ConvGeom taller = geom(2, 16, 5, 5, 16, 3, 3, 2, 1, 1, 1);
  taller.Ho += 1;
  gs.push_back(taller);
  return gs;
}

const char* kernel_name(ConvKernel k) {
  return k == ConvKernel::im2col ? "im2col" : k == ConvKernel::onednn ? "onednn" : "automatic";
}

// Sets the conv kernel (and the matmul precision) for a scope; restores the defaults.
struct ConvKernelGuard {
  explicit ConvKernelGuard(ConvKernel k, MatmulPrecision p = MatmulPrecision::float32) {
    set_conv_kernel(k);
    set_matmul_precision(p);
  }
  ~ConvKernelGuard() {
    set_conv_kernel(ConvKernel::automatic);
    set_matmul_precision(MatmulPrecision::float32);
  }
};
}  // namespace

TEST_CASE_TEMPLATE("conv kernels: each kernel matches the direct loops", T, float, double) {
  for (ConvKernel k : {ConvKernel::im2col, ConvKernel::onednn, ConvKernel::automatic}) {
    ConvKernelGuard kernel(k);
    for (const ConvGeom& g : conv_geometries()) {
      INFO(kernel_name(k), " N ", g.N, " C ", g.C, " O ", g.O, " k ", g.kH, " s ", g.sH, " p ",
           g.pH, " d ", g.dH, " groups ", g.groups, " Ho ", g.Ho);
      const auto fast = run_conv<T>(g, false), ref = run_conv<T>(g, true);
      for (size_t i = 0; i < fast.size(); ++i) {
        CAPTURE(i);  // y, dx, dw, db
        CHECK(rel_diff(fast[i], ref[i]) < tol<T>());
      }
    }
  }
}

TEST_CASE("conv2d_backward: both gradients at once, the bits of the two calls") {
  ThreadsGuard guard;
  for (ConvKernel k : {ConvKernel::im2col, ConvKernel::automatic})
    for (int threads : {1, 2}) {
      set_threads(threads);
      ConvKernelGuard kernel(k);
      for (const ConvGeom& g : conv_geometries()) {
        INFO(kernel_name(k), " threads ", threads, " N ", g.N, " C ", g.C, " O ", g.O);
        auto x = rand_vec<float>(g.N * g.C * g.H * g.W, 1), w = rand_vec<float>(g.O * g.K(), 2);
        auto dy = rand_vec<float>(g.N * g.O * g.Ho * g.Wo, 4);
        std::vector<float> dx = rand_vec<float>(x.size(), 5), dw = rand_vec<float>(w.size(), 6),
                           db = rand_vec<float>(g.O, 7);
        std::vector<float> dx2 = dx, dw2 = dw, db2 = db;
        conv2d_backward<float>(dx.data(), dw.data(), db.data(), x.data(), dy.data(), w.data(), g);
        conv2d_backward_input<float>(dx2.data(), dy.data(), w.data(), g);
        conv2d_backward_weight<float>(dw2.data(), db2.data(), x.data(), dy.data(), g);
        CHECK(same_bits(dx, dx2));
        CHECK(same_bits(dw, dw2));
        CHECK(same_bits(db, db2));
      }
    }
}

TEST_CASE("conv kernels: oneDNN runs the many-channel layers, im2col the first layer's dx") {
  const ConvGeom wide = geom(8, 32, 12, 12, 32, 3, 3, 1, 1, 1, 1);
  const ConvGeom first = geom(8, 1, 12, 12, 32, 3, 3, 1, 1, 1, 1);
  if (conv_onednn_impl(wide, ConvPass::forward).rfind("jit", 0) != 0) {
    MESSAGE("oneDNN has no JIT convolution on this CPU: ",
            conv_onednn_impl(wide, ConvPass::forward));
    return;
  }
  for (ConvPass pass : {ConvPass::forward, ConvPass::backward_input, ConvPass::backward_weight})
    CHECK(conv_onednn_runs(wide, pass));
  CHECK(conv_onednn_runs(first, ConvPass::forward));
  CHECK_FALSE(conv_onednn_runs(first, ConvPass::backward_input));
  CHECK_FALSE(conv_onednn_runs(geom(8, 32, 12, 12, 32, 3, 3, 1, 1, 1, 2), ConvPass::forward));
  // Winograd F(4, 3) where it measured faster (oneDNN has it for AVX-512), direct elsewhere
  const std::string wino =
      conv_onednn_impl(geom(8, 32, 16, 16, 32, 3, 3, 1, 1, 1, 1), ConvPass::forward);
  if (cpu_features().avx512_core()) CHECK(wino.find("wino") != std::string::npos);
  CHECK(conv_onednn_impl(geom(8, 32, 4, 4, 32, 3, 3, 1, 1, 1, 1), ConvPass::forward).find("wino") ==
        std::string::npos);  // 16 positions
  CHECK(conv_onednn_impl(first, ConvPass::forward).find("wino") == std::string::npos);
  CHECK(conv_weight_grad_batched(geom(8, 32, 8, 8, 32, 3, 3, 1, 1, 1, 1)));  // 64 positions
  CHECK_FALSE(conv_weight_grad_batched(wide));                               // 144
  CHECK_FALSE(conv_weight_grad_batched(geom(8, 32, 8, 8, 32, 3, 3, 1, 1, 1, 2)));
  ConvKernelGuard pinned(ConvKernel::im2col);
  CHECK_FALSE(conv_onednn_runs(wide, ConvPass::forward));
}

TEST_CASE("conv kernels in bf16 precision: float32 Winograd on large images, whole-batch dw") {
  if (!bf16_unsupported_reason().empty() || !cpu_features().avx512_core()) {
    MESSAGE("no bf16 or no AVX-512 here");
    return;
  }
  ConvKernelGuard bf16(ConvKernel::automatic, MatmulPrecision::bf16);
  const ConvGeom large = geom(2, 16, 32, 32, 16, 3, 3, 1, 1, 1, 1);  // 1024 positions
  if (!cpu_features().amx_bf16)  // measured on AVX512_BF16; an AMX CPU keeps its bf16 kernels
    CHECK(conv_onednn_impl(large, ConvPass::forward).find("wino") != std::string::npos);
  CHECK(
      conv_onednn_impl(geom(2, 16, 16, 16, 16, 3, 3, 1, 1, 1, 1), ConvPass::forward).find("bf16") !=
      std::string::npos);  // 256 positions: the bf16 direct kernel
  const ConvGeom small = geom(8, 32, 8, 8, 32, 3, 3, 1, 1, 1, 1);
  CHECK(conv_onednn_weight_grad_whole_batch(small));
  CHECK_FALSE(conv_onednn_weight_grad_whole_batch(geom(8, 32, 16, 16, 32, 3, 3, 2, 1, 1, 1)));
  CHECK_FALSE(conv_onednn_weight_grad_whole_batch(geom(8, 32, 12, 12, 32, 3, 3, 1, 1, 1, 1)));
  // Winograd in float32 is more precise than bf16 asks: within the float32 tolerance
  const auto fast = run_conv<float>(large, false), ref = run_conv<float>(large, true);
  for (size_t i = 0; i < fast.size(); ++i) CHECK(rel_diff(fast[i], ref[i]) < tol<float>());
  set_matmul_precision(MatmulPrecision::float32);  // float32 keeps the GEMM over the batch
  CHECK_FALSE(conv_onednn_weight_grad_whole_batch(small));
}

TEST_CASE("conv kernels in bf16 precision: within bf16's rounding of the direct loops") {
  if (!bf16_unsupported_reason().empty()) {
    MESSAGE("no bf16 here: ", bf16_unsupported_reason());
    return;
  }
  ConvKernelGuard bf16(ConvKernel::automatic, MatmulPrecision::bf16);
  for (const ConvGeom& g : conv_geometries()) {
    INFO("N ", g.N, " C ", g.C, " O ", g.O, " k ", g.kH, " s ", g.sH, " groups ", g.groups);
    const auto fast = run_conv<float>(g, false), ref = run_conv<float>(g, true);
    for (size_t i = 0; i < fast.size(); ++i) {
      CAPTURE(i);
      CHECK(rel_diff(fast[i], ref[i]) < 2e-2);  // operands rounded to 8 bits, sums in float32
    }
  }
}

TEST_CASE_TEMPLATE("pool kernels match the references", T, float, double) {
  const int64_t P = 6;
  // max: 3×3, stride 2, padding 1, ceil-mode sized output; dilation 2; windows inside the plane
  // (the fast path: 2×2/2, 3×3/2) and a ceil-mode window past the edge without padding; avg
  // windows with padding counted and not; adaptive windows that overlap
  for (const PoolGeom& g : {pool(7, 6, 3, 2, 1, 1, 4, 4), pool(9, 8, 2, 1, 1, 2, 8, 7),
                            pool(8, 6, 2, 2, 0, 1, 4, 3), pool(7, 7, 3, 2, 0, 1, 3, 3),
                            pool(7, 7, 2, 2, 0, 1, 4, 4), pool(9, 70, 2, 2, 0, 1, 4, 35)}) {
    for (const PoolWindows& w : {avg_pool_windows(g, true), avg_pool_windows(g, false),
                                 adaptive_pool_windows(g.H, g.W, 4, 5)}) {
      const auto fast = run_pools<T>(P, g, w, false), ref = run_pools<T>(P, g, w, true);
      CHECK(same_bits(fast[0], ref[0]));  // max values
      CHECK(same_bits(fast[1], ref[1]));  // indices
      CHECK(rel_diff(fast[2], ref[2]) < tol<T>());
      CHECK(rel_diff(fast[3], ref[3]) < tol<T>());
      CHECK(same_bits(fast[4], ref[4]));  // max pool's backward: the same adds in the same order
    }
    // a fresh dx (garbage in it) gets the bits of adding into zeros
    auto x = rand_vec<T>(P * g.H * g.W, 8), gy = rand_vec<T>(P * g.Ho * g.Wo, 12);
    std::vector<T> y(gy.size()), zeros(x.size(), T(0)), fresh(x.size(), T(3));
    std::vector<int64_t> idx(y.size());
    max_pool2d_forward<T>(y.data(), idx.data(), x.data(), P, g);
    max_pool2d_backward<T>(zeros.data(), gy.data(), idx.data(), P, g.H * g.W, g.Ho * g.Wo);
    max_pool2d_backward<T>(fresh.data(), gy.data(), idx.data(), P, g.H * g.W, g.Ho * g.Wo, true);
    CHECK(same_bits(fresh, zeros));
  }
}

TEST_CASE("max pool kernels: ties keep the first tap, the first NaN wins, on both paths") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // One 4×4 plane: window (0, 0) ties, window (0, 1) has a NaN after its max, window (1, 0) a NaN
  // then a larger number, window (1, 1) two NaNs.
  const std::vector<double> x = {1, 1, 0, 5, 1, 0, nan, 2, nan, 0, nan, 1, 9, 3, 4, nan};
  for (const PoolGeom& g : {pool(4, 4, 2, 2, 0, 1, 2, 2), pool(4, 4, 2, 2, 1, 1, 3, 3)}) {
    std::vector<double> y(g.Ho * g.Wo), yr(y.size());
    std::vector<int64_t> idx(y.size()), idxr(y.size());
    max_pool2d_forward<double>(y.data(), idx.data(), x.data(), 1, g);
    ref_max_pool2d_forward<double>(yr.data(), idxr.data(), x.data(), 1, g);
    CHECK(same_bits(y, yr));
    CHECK(idx == idxr);
    if (g.pH == 0) CHECK(idx == std::vector<int64_t>{0, 6, 8, 10});
  }
}

TEST_CASE("max pool 2x2/2 kernels: ties and NaNs over wide rows, as the reference") {
  // Values from {0, 1, 2, NaN}: many ties and NaNs; rows of 20, 35 and 16 windows (a full vector,
  // two and a remainder, exactly one).
  for (int64_t W : {40, 70, 32}) {
    CAPTURE(W);
    const PoolGeom g = pool(6, W, 2, 2, 0, 1, 3, W / 2);
    std::vector<float> x(3 * 6 * W);
    std::mt19937 rng(7);
    for (float& v : x) {
      const int r = static_cast<int>(rng() % 4);
      v = r == 3 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(r);
    }
    std::vector<float> y(3 * g.Ho * g.Wo), yr(y.size());
    std::vector<int64_t> idx(y.size()), idxr(y.size());
    max_pool2d_forward<float>(y.data(), idx.data(), x.data(), 3, g);
    ref_max_pool2d_forward<float>(yr.data(), idxr.data(), x.data(), 3, g);
    CHECK(same_bits(y, yr));
    CHECK(idx == idxr);
  }
}

TEST_CASE("conv and pool kernels: float32 bits do not depend on the thread count") {
  ThreadsGuard guard;
  // Above kParallelGrain, so the images run in parallel: 8 images (the weight gradient sums two
  // chunks in either case) and 3 (the forward's chunks hold 3 images at 1 thread, 2 at 2), on
  // every kernel and in bf16 precision where the CPU has it.
  for (ConvKernel k : {ConvKernel::im2col, ConvKernel::onednn, ConvKernel::automatic})
    for (MatmulPrecision p : {MatmulPrecision::float32, MatmulPrecision::bf16}) {
      if (p == MatmulPrecision::bf16 && !bf16_unsupported_reason().empty()) continue;
      ConvKernelGuard kernel(k, p);
      for (const ConvGeom& g :
           {geom(8, 4, 12, 12, 8, 3, 3, 1, 1, 1, 2), geom(8, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1),
            geom(3, 32, 16, 16, 32, 3, 3, 1, 1, 1, 1), geom(8, 32, 4, 4, 64, 3, 3, 1, 1, 1, 1)}) {
        INFO(kernel_name(k), p == MatmulPrecision::bf16 ? " bf16" : "", " N ", g.N, " C ", g.C);
        check_same_bits_at_1_and_2_threads([&](int threads) {
          set_threads(threads);
          return run_conv<float>(g, false);
        });
      }
    }
  const PoolGeom pg = pool(48, 48, 3, 2, 1, 1, 24, 24);
  check_same_bits_at_1_and_2_threads([&](int threads) {
    set_threads(threads);
    return run_pools<float>(64, pg, avg_pool_windows(pg, true), false);
  });
}
