// bf16 activations: linear in bf16 precision keeps its input rounded to bf16 for the backward and
// the tape frees the float32 input once nothing else holds it (RecordedNode::releases_values_of,
// autograd/tape.h). The gradients keep their bits (the same bf16 operand the GEMM rounded before),
// an input the caller still holds or a view still shares is never freed, a freed tensor refuses
// its values with a clear error, a backward run after the precision went back to float32 reads
// the kept copy widened, and create_graph is refused. On a CPU without bf16 only the float32
// path's behaviour (nothing released) is checked.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "tensor/gemm_kernels.h"
#include "tensor/kernels_matmul.h"

using namespace dg;

namespace {
bool bf16_here() { return bf16_unsupported_reason().empty(); }

Tensor random_tensor(const Shape& shape, uint32_t seed, bool grad = false) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  Tensor t = Tensor::empty(shape, DType::f32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(gen);
  if (grad) t.set_requires_grad(true);
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data<float>(), b.data<float>(), size_t(a.numel()) * sizeof(float)) == 0;
}

// loss = Σ weights ⊙ linear(gelu(a), W) (gelu saves its input, not its output): the gradients of a
// and W, with the linear's input held by the caller through the backward (hold = true) or dropped
// right after the forward.
struct Grads {
  Tensor a, w;
  bool released = false;  // the input's values were freed before the backward
};
Grads run(const Tensor& a_values, const Tensor& w_values, const Tensor& weights, bool hold) {
  Tensor a = dg::raw::clone(a_values), w = dg::raw::clone(w_values);
  a.set_requires_grad(true);
  w.set_requires_grad(true);
  Tensor x = gelu(a);
  const WeakTensor x_weak(x);
  Tensor y = linear(x, w, Tensor());
  if (!hold) x = Tensor();
  Tensor loss = sum(mul(y, weights));  // records two ops: the tape frees x's values here
  Grads g;
  try {
    x_weak.lock().to_vector();
  } catch (const std::logic_error&) {
    g.released = true;
  }
  backward(loss);
  g.a = dg::raw::clone(a.grad());
  g.w = dg::raw::clone(w.grad());
  return g;
}
}  // namespace

TEST_CASE("linear in bf16 keeps its input in bf16: the float32 input is freed, the bits stay") {
  if (!bf16_here()) return;
  const Tensor a = random_tensor({96, 64}, 1), w = random_tensor({80, 64}, 2);
  const Tensor weights = random_tensor({96, 80}, 3);
  MatmulPrecisionScope bf16(MatmulPrecision::bf16);
  const Grads held = run(a, w, weights, true), dropped = run(a, w, weights, false);
  CHECK_FALSE(held.released);
  CHECK(dropped.released);
  CHECK(same_bits(held.a, dropped.a));
  CHECK(same_bits(held.w, dropped.w));
  // dW = dyᵀ · x as gemm computes it from the float32 x (rounding it itself): the same bits.
  const Tensor x = detach(gelu(a));
  Tensor dw = Tensor::empty({80, 64}, DType::f32);
  gemm(true, false, 80, 64, 96, 1.0f, weights.data<float>(), 80, x.data<float>(), 64, 0.0f,
       dw.data<float>(), 64);
  CHECK(same_bits(dw, dropped.w));
}

TEST_CASE("a released input refuses its values, naming why; a view or a holder keeps them") {
  if (!bf16_here()) return;
  MatmulPrecisionScope bf16(MatmulPrecision::bf16);
  const Tensor a = random_tensor({32, 16}, 4, true), w = random_tensor({8, 16}, 5, true);
  {
    Tensor x = gelu(a);
    const WeakTensor x_weak(x);
    Tensor y = linear(x, w, Tensor());
    x = Tensor();
    Tensor s = sum(y);
    const Tensor husk = x_weak.lock();
    REQUIRE(husk.defined());
    CHECK(husk.shape() == Shape{32, 16});  // shape and dtype stay
    CHECK_THROWS_WITH_AS(husk.to_vector(), doctest::Contains("values were released"),
                         std::logic_error);
    CHECK_THROWS_WITH_AS(husk.data<float>(), doctest::Contains("values were released"),
                         std::logic_error);
    CHECK_THROWS_WITH_AS(husk.version(), doctest::Contains("values were released"),
                         std::logic_error);
  }
  {  // a view of x shares its storage: x's values stay
    Tensor x = gelu(a);
    const Tensor row = dg::raw::view_narrow(x, 0, 0, 1);
    const std::vector<double> before = x.to_vector();
    const WeakTensor x_weak(x);
    Tensor y = linear(x, w, Tensor());
    x = Tensor();
    Tensor s = sum(y);
    CHECK(x_weak.lock().to_vector() == before);
    backward(s);
    CHECK(row.to_vector().size() == 16);
  }
}

TEST_CASE("a bf16 linear's backward after the precision went back to float32 reads the kept copy") {
  if (!bf16_here()) return;
  const Tensor a = random_tensor({40, 24}, 6, true), w = random_tensor({12, 24}, 7, true);
  const Tensor weights = random_tensor({40, 12}, 8);
  Tensor loss;
  {
    MatmulPrecisionScope bf16(MatmulPrecision::bf16);
    loss = sum(mul(linear(gelu(a), w, Tensor()), weights));
  }
  backward(loss);  // float32 precision now
  // dW = dyᵀ · bf16(x), in float32
  const Tensor x = detach(gelu(a));
  std::vector<uint16_t> x16(size_t(x.numel()));
  to_bf16(x.data<float>(), x.numel(), x16.data());
  Tensor x_kept = Tensor::empty(x.shape(), DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) x_kept.data<float>()[i] = from_bf16(x16[size_t(i)]);
  Tensor dw = Tensor::empty({12, 24}, DType::f32);
  gemm(true, false, 12, 24, 40, 1.0f, weights.data<float>(), 12, x_kept.data<float>(), 24, 0.0f,
       dw.data<float>(), 24);
  CHECK(same_bits(dw, w.grad()));
}

TEST_CASE("create_graph through a bf16 linear is refused, naming the op; float32 keeps x") {
  const Tensor a = random_tensor({8, 16}, 9, true), w = random_tensor({4, 16}, 10, true);
  if (bf16_here()) {
    MatmulPrecisionScope bf16(MatmulPrecision::bf16);
    Tensor s = sum(linear(gelu(a), w, Tensor()));
    CHECK_THROWS_WITH_AS(grad({s}, {w}, {}, false, true), doctest::Contains("linear"),
                         std::exception);
  }
  // float32 precision: the linear saves x itself, nothing is released
  Tensor x = gelu(a);
  const WeakTensor x_weak(x);
  Tensor y = linear(x, w, Tensor());
  x = Tensor();
  Tensor s = sum(y);
  CHECK(x_weak.lock().to_vector().size() == 128);
}

TEST_CASE("linears reading one input share its bf16 copy; none is made when a backward keeps it") {
  if (!bf16_here()) return;
  MatmulPrecisionScope bf16(MatmulPrecision::bf16);
  const Tensor a = random_tensor({64, 32}, 11, true);
  const Tensor w1 = random_tensor({16, 32}, 12, true), w2 = random_tensor({16, 32}, 13, true);
  const size_t x_bytes = 64 * 32 * 4, y_bytes = 64 * 16 * 4;
  {
    const Tensor x = gelu(a);  // gelu's backward reads a, not x
    const size_t before = storage_stats().live_bytes;
    const Tensor y1 = linear(x, w1, Tensor());
    CHECK(storage_stats().live_bytes - before == y_bytes + x_bytes / 2);  // y1 and x's copy
    const Tensor y2 = linear(x, w2, Tensor());
    CHECK(storage_stats().live_bytes - before == 2 * y_bytes + x_bytes / 2);  // one copy
  }
  {
    const Tensor x = tanh(a);  // tanh's backward reads its output x: x stays, so no copy
    const size_t before = storage_stats().live_bytes;
    const Tensor y = linear(x, w1, Tensor());
    CHECK(storage_stats().live_bytes - before == y_bytes);
  }
}
