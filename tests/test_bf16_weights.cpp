// bf16 copies of weights (tensor/bf16_weights.h): a GEMM in bf16 precision that reads a kept
// storage gives the bits it gives without the copy, rounds the copy once per write (not per
// call), sees every in-place write, never reads a dead storage's copy, and AdamW writes the copy in
// its update pass so the next GEMM finds it current. On a CPU without bf16 the cases check only
// the registry.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

#include "nn/layers.h"
#include "tensor/bf16_weights.h"
#include "tensor/gemm_kernels.h"
#include "tensor/kernels_matmul.h"
#include "train/optim.h"

using namespace dg;

namespace {
bool bf16_here() { return bf16_unsupported_reason().empty(); }

Tensor random_tensor(const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  Tensor t = Tensor::empty(shape, DType::f32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(gen);
  return t;
}
Tensor random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  return random_tensor({rows, cols}, seed);
}

// Y [M, N] = X [M, K] · Wᵀ (W [N, K], a weight as linear reads it) in bf16 precision; large
// enough to take gemm's rounding path (above one call's size).
std::vector<float> x_times_w_t(const Tensor& x, const Tensor& w) {
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  std::vector<float> y(static_cast<size_t>(M * N));
  MatmulPrecisionScope bf16(MatmulPrecision::bf16);
  gemm(false, true, M, N, K, 1.0f, x.data<float>(), K, w.data<float>(), w.strides()[0], 0.0f,
       y.data(), N);
  return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
}  // namespace

TEST_CASE("keep_bf16_copy: refuses what is not float32; keeps, reports and drops a copy") {
  Tensor d = Tensor::zeros({4, 4}, DType::f64);
  CHECK_THROWS_WITH_AS(keep_bf16_copy(d), doctest::Contains("float32"), std::invalid_argument);
  Tensor w = random_matrix(8, 16, 1);
  const int64_t before = bf16_copy_bytes();
  keep_bf16_copy(w);
  keep_bf16_copy(w);  // a second call keeps one copy
  CHECK(keeps_bf16_copy(w));
  CHECK(bf16_copy_bytes() == before + 8 * 16 * 2);
  drop_bf16_copy(w);
  CHECK_FALSE(keeps_bf16_copy(w));
  CHECK(bf16_copy_bytes() == before);
}

TEST_CASE("bf16 copies: the same bits as rounding on the call, one rounding per write") {
  if (!bf16_here()) return;
  const Tensor x = random_matrix(96, 192, 2);
  Tensor w = random_matrix(160, 192, 3);
  const std::vector<float> plain = x_times_w_t(x, w);
  keep_bf16_copy(w);
  const int64_t r0 = bf16_copy_roundings();
  CHECK(same_bits(x_times_w_t(x, w), plain));
  CHECK(same_bits(x_times_w_t(x, w), plain));
  CHECK(bf16_copy_roundings() == r0 + 1);  // two GEMMs, one rounding

  // An in-place write (mutable_data adds one to the version) makes the next GEMM round again and
  // see the new values.
  w.mutable_data<float>()[5] += 1.0f;
  drop_bf16_copy(w);
  const std::vector<float> changed = x_times_w_t(x, w);
  CHECK_FALSE(same_bits(changed, plain));
  keep_bf16_copy(w);
  CHECK(same_bits(x_times_w_t(x, w), changed));
  w.fill(0.5);
  const std::vector<float> filled = x_times_w_t(x, w);
  drop_bf16_copy(w);
  CHECK(same_bits(filled, x_times_w_t(x, w)));
  CHECK_FALSE(same_bits(filled, changed));
}

TEST_CASE("bf16 copies: a view at an offset of a kept buffer reads the copy at that offset") {
  if (!bf16_here()) return;
  const Tensor x = random_matrix(96, 192, 4);
  const Tensor flat = random_tensor({64 + 160 * 192 + 32}, 5);
  const Tensor w =
      Tensor::from_storage(flat.storage(), {160, 192}, {192, 1}, /*offset=*/64, DType::f32);
  const std::vector<float> plain = x_times_w_t(x, w);
  keep_bf16_copy(w);  // the whole storage
  CHECK(keeps_bf16_copy(flat));
  const int64_t r0 = bf16_copy_roundings();
  CHECK(same_bits(x_times_w_t(x, w), plain));
  CHECK(bf16_copy_roundings() == r0 + 1);
  drop_bf16_copy(flat);
}

TEST_CASE("bf16 copies: a storage that is gone is never read through its copy") {
  if (!bf16_here()) return;
  const Tensor x = random_matrix(96, 192, 6);
  {
    Tensor w = random_matrix(160, 192, 7);
    keep_bf16_copy(w);
    (void)x_times_w_t(x, w);
  }
  // The storage cache hands the same buffer to the next tensor of its size.
  Tensor w2 = random_matrix(160, 192, 8);
  const std::vector<float> with_whatever = x_times_w_t(x, w2);
  keep_bf16_copy(w2);
  drop_bf16_copy(w2);
  CHECK(same_bits(with_whatever, x_times_w_t(x, w2)));
  const int64_t r0 = bf16_copy_roundings();
  (void)x_times_w_t(x, w2);
  CHECK(bf16_copy_roundings() == r0);  // no kept storage: nothing rounded whole
}

TEST_CASE("AdamW writes the bf16 copy in its update pass: the next GEMM finds it current") {
  if (!bf16_here()) return;
  Linear layer(192, 160, true);
  FlatParameters& flat = layer.flat_parameters();
  keep_bf16_copy(flat.values);
  AdamW opt(flat, AdamWConfig{});
  const Tensor x = random_matrix(96, 192, 9);
  const Tensor& w = layer.weight;
  (void)x_times_w_t(x, w);
  for (int step = 0; step < 2; ++step) {
    flat.gradients.copy_from(random_tensor({flat.total}, 10 + step));
    opt.step();
    const int64_t r0 = bf16_copy_roundings();
    const std::vector<float> with_copy = x_times_w_t(x, w);
    CHECK(bf16_copy_roundings() == r0);  // the optimiser wrote it
    drop_bf16_copy(flat.values);
    CHECK(same_bits(with_copy, x_times_w_t(x, w)));
    keep_bf16_copy(flat.values);
  }
  // A copy written and then made stale by a write elsewhere rounds again.
  flat.values.mutable_data<float>()[0] = 0.25f;
  const int64_t r1 = bf16_copy_roundings();
  (void)x_times_w_t(x, w);
  CHECK(bf16_copy_roundings() == r1 + 1);
  drop_bf16_copy(flat.values);
}
