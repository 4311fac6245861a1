// dropout(x, p, training, generator): inverted dropout as torch.nn.functional.dropout. The mask
// is drawn serially from the caller's TorchGenerator, so it does not depend on the thread count;
// it is saved (as 0 or 1/(1−p), torch's "noise") for the backward. Does not do: in-place dropout,
// a global default generator, or torch's exact mask stream (see ops.h).
// Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them), the mask's statistics in
// tests/test_dropout.cpp.
#include <fmt/format.h>

#include <vector>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/profile.h"
#include "tensor/rng.h"

namespace dg {

namespace {
// The saved noise of dropout on x: kept (1/(1−p)) where u < 1 − p, else 0, for one uniform u
// per element in row-major order (the 24-bit stream uniform_ draws for float32 and float64
// alike): the same mask at either dtype and any thread count. The draw is serial (one stream);
// the compare runs over the threads. float32 draws straight into the noise buffer (no
// temporary, which as a std::vector was a fresh 1.6 MB allocation, page faults, every step).
Tensor dropout_noise(const Tensor& x, double p, TorchGenerator& generator) {
  const int64_t n = x.numel();
  if (p >= 1.0) return Tensor::zeros(x.shape(), x.dtype());  // all zeros, nothing drawn
  Tensor noise = Tensor::empty(x.shape(), x.dtype());
  Tensor u = x.dtype() == DType::f32 ? noise : Tensor::empty(x.shape(), DType::f32);
  generator.uniform_(u.data<float>(), n, 0.0, 1.0);
  const float* us = u.data<float>();
  dispatch_float(x.dtype(), "dropout", [&]<class T>() {
    const T kept = T(1) / static_cast<T>(1.0 - p);
    const double keep_below = 1.0 - p;
    T* ns = noise.data<T>();
#pragma omp parallel for simd if (parallel : n > kParallelGrain) schedule(static)
    for (int64_t k = 0; k < n; ++k) ns[k] = static_cast<double>(us[k]) < keep_below ? kept : T(0);
  });
  return noise;
}
}  // namespace

// ---- dropout: out = x ⊙ noise, noise = keep / (1 − p), keep ~ Bernoulli(1 − p) ------------------
Tensor dropout(const Tensor& x, double p, bool training, TorchGenerator& generator) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "dropout";
  check_float(x, op);
  if (!(p >= 0.0 && p <= 1.0))
    throw std::invalid_argument(fmt::format("dropout: p must be in [0, 1], got {}", p));
  if (!training || p == 0.0 || x.numel() == 0) return x;  // torch returns the input itself
  Tensor noise = dropout_noise(x, p, generator);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = mul(x, noise);  // over the threads, as any product; traced, the ONNX exporter's Mul
  }
  if (should_record({x}))
    record(op, {x}, out,
           [x, noise](const Tensor& g) {
             accumulate_grad(x, mul(g, noise));  // g ⊙ noise (the noise is a constant of the graph)
           })
        .saves({})
        .composed();
  return out;
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

// data table: the dropout family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> dropout_op_cases() {
  using V = const std::vector<Tensor>&;
  auto one = [](Shape s, uint64_t seed) {
    return [=] { return std::vector<Tensor>{random_tensor(s, seed).set_name("x")}; };
  };
  // A fresh generator per call: every evaluation of the row draws the same mask.
  return {
      {"dropout/p 0.3", one({4, 5}, 61),
       [](V in) {
         TorchGenerator gen(7);
         return dropout(in[0], 0.3, true, gen);
       }},
      {"dropout/of a transposed view, p 0.5", one({3, 4}, 62),
       [](V in) {
         TorchGenerator gen(8);
         return dropout(transpose(in[0], 0, 1), 0.5, true, gen);
       }},
  };
}

}  // namespace dg
