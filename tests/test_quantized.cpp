// The frozen base in bf16 and int8 (tensor/quantized_matrix.h, quantized_linear, nn/quantize.h):
// the quantisation rule, the stated error bound on random and awkward shapes, the fast kernels
// against the references, the GEMV's paths bit for bit, thread-count independence, the op's
// gradients (against linear on the dequantised weight, and a float64 gradient check), a tiny
// MicroLM with every Linear quantized (logits, loss gradient, cached greedy decoding, bytes), and
// every error path.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/lm/decode.h"
#include "nn/lm/micro_lm.h"
#include "nn/lora.h"
#include "nn/quantize.h"
#include "tensor/gemm_kernels.h"
#include "tensor/quantized_matrix.h"
#include "tensor/threads.h"
#include "tests/kernel_test_helpers.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/io/onnx/export.h"

using namespace dg;

namespace {

constexpr double kU = 0x1p-24;  // float32's unit roundoff
double gamma_n(int64_t n) { return double(n) * kU / (1.0 - double(n) * kU); }

// A float32 weight [N, K] uniform in (-1, 1) with row `zero_row` (if in range) all zeros.
Tensor random_weight(int64_t N, int64_t K, uint64_t seed, int64_t zero_row = -1) {
  std::vector<float> w = random_values<float>(size_t(N * K), seed);
  if (zero_row >= 0 && zero_row < N) std::fill_n(w.begin() + zero_row * K, K, 0.0f);
  return Tensor::from_vector(w, {N, K});
}

struct Shape3 {
  int64_t M, N, K;
};
// M = 1 (the GEMV), N = 1, K around the 16/32-lane chunks, N around the 128-row panels, M and K
// around the 256 tiles of the backward.
const Shape3 kShapes[] = {{1, 1, 1},     {1, 5, 33},   {3, 1, 17},     {4, 7, 31},
                          {2, 65, 100},  {5, 130, 47}, {3, 129, 20},   {2, 128, 9},
                          {1, 200, 513}, {1, 9, 15},   {300, 70, 300}, {7, 64, 257}};

// Whether |exact − got| ≤ the header's bound for each output element of y = x·Wᵀ + b.
void check_bound(const Tensor& w, const QuantizedMatrix& q, const std::vector<float>& x,
                 const std::vector<float>& b, const std::vector<float>& y, int64_t M) {
  const int64_t N = q.rows, K = q.cols;
  const std::vector<double> W = w.to_vector(), What = dequantize(q).to_vector();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t o = 0; o < N; ++o) {
      double exact = b[o], abs_x = 0, abs_xw = 0, abs_xwhat = std::fabs(b[o]);
      for (int64_t k = 0; k < K; ++k) {
        const double xv = x[m * K + k];
        exact += xv * W[o * K + k];
        abs_x += std::fabs(xv);
        abs_xw += std::fabs(xv * W[o * K + k]);
        abs_xwhat += std::fabs(xv * What[o * K + k]);
      }
      const double first = q.format == QuantFormat::int8
                               ? double(q.scale_data()[o]) * (0.5 + 0x1p-16) * abs_x
                               : 0x1p-8 * abs_xw;
      CAPTURE(m);
      CAPTURE(o);
      CHECK(std::fabs(exact - y[m * N + o]) <= first + gamma_n(K + 3) * abs_xwhat);
    }
}

}  // namespace

TEST_CASE("quantize_matrix: int8 per row, scale max|w|/127, round to nearest even; bf16 rounded") {
  // Row 0: max 2.54, so s = 0.02: 0.05 / s = 2.5 (ties to even: 2), 0.07 / s = 3.5 (4).
  // Row 1: all zeros (scale 0). Row 2: one value (q = 127).
  const Tensor w = Tensor::from_vector(
      std::vector<float>{2.54f, -0.05f, 0.07f, -2.54f, 0, 0, 0, 0, 0, 0, 0, -3}, {3, 4});
  const QuantizedMatrix q = quantize_matrix(w, QuantFormat::int8);
  CHECK(q.rows == 3);
  CHECK(q.cols == 4);
  CHECK(q.bytes() == 12 + 12);
  const float s0 = 2.54f / 127.0f;
  CHECK(q.scale_data()[0] == s0);
  CHECK(q.scale_data()[1] == 0.0f);
  CHECK(q.scale_data()[2] == 3.0f / 127.0f);
  const int8_t expected[12] = {127,
                               static_cast<int8_t>(std::nearbyint(-0.05f / s0)),
                               static_cast<int8_t>(std::nearbyint(0.07f / s0)),
                               -127,
                               0,
                               0,
                               0,
                               0,
                               0,
                               0,
                               0,
                               -127};
  CHECK(std::memcmp(q.int8_rows(), expected, 12) == 0);
  CHECK(std::abs(expected[1]) == 2);  // -2.5 → -2 (ties to even)
  CHECK(expected[2] == 4);            // 3.5 → 4
  const std::vector<double> back = dequantize(q).to_vector();
  CHECK(back[0] == double(s0 * 127.0f));
  CHECK(back[5] == 0.0);

  const QuantizedMatrix h = quantize_matrix(w, QuantFormat::bf16);
  CHECK(h.bytes() == 24);
  CHECK(!h.scales.defined());
  const std::vector<double> wb = dequantize(h).to_vector(), wv = w.to_vector();
  for (size_t i = 0; i < wv.size(); ++i) {
    CHECK(wb[i] == double(from_bf16(to_bf16(float(wv[i])))));
    CHECK(std::fabs(wb[i] - wv[i]) <= 0x1p-8 / (1 + 0x1p-8) * std::fabs(wv[i]));
  }
  // The relative bound is 2^-8 / (1 + 2^-8), and it is reached: 1 + 2^-8 is a tie, rounded to 1.
  const Tensor tie = Tensor::from_vector(std::vector<float>{1.0f + 0x1p-8f}, {1, 1});
  CHECK(dequantize(quantize_matrix(tie, QuantFormat::bf16)).item<double>() == 1.0);
}

TEST_CASE("quantized_matmul: the stated error bound holds, awkward shapes and a zero row") {
  for (QuantFormat format : {QuantFormat::int8, QuantFormat::bf16})
    for (const Shape3& s : kShapes)
      for (bool with_bias : {false, true}) {
        const std::string format_name = quant_format_name(format);
        CAPTURE(format_name);
        CAPTURE(s.M);
        CAPTURE(s.N);
        CAPTURE(s.K);
        CAPTURE(with_bias);
        const Tensor w = random_weight(s.N, s.K, 1 + s.N, s.N > 1 ? 1 : -1);
        const QuantizedMatrix q = quantize_matrix(w, format);
        const std::vector<float> x = random_values<float>(size_t(s.M * s.K), 2);
        std::vector<float> b = random_values<float>(size_t(s.N), 3);
        if (!with_bias) std::fill(b.begin(), b.end(), 0.0f);
        std::vector<float> y(size_t(s.M * s.N));
        for (int64_t m = 0; m < s.M; ++m) std::copy(b.begin(), b.end(), y.begin() + m * s.N);
        quantized_matmul<float>(x.data(), s.M, s.K, q, y.data(), s.N, true);
        check_bound(w, q, x, b, y, s.M);
      }
}

TEST_CASE_TEMPLATE("quantized kernels match their references (forward and dX)", T, float, double) {
  const double u = std::is_same_v<T, float> ? kU : 0x1p-53;
  for (QuantFormat format : {QuantFormat::int8, QuantFormat::bf16})
    for (const Shape3& s : kShapes)
      for (bool accumulate : {false, true}) {
        const std::string format_name = quant_format_name(format);
        CAPTURE(format_name);
        CAPTURE(s.M);
        CAPTURE(s.N);
        CAPTURE(s.K);
        CAPTURE(accumulate);
        const QuantizedMatrix q = quantize_matrix(random_weight(s.N, s.K, 4, 0), format);
        const std::vector<double> What = dequantize(q).to_vector();
        const std::vector<T> x = random_values<T>(size_t(s.M * s.K), 5),
                             dy = random_values<T>(size_t(s.M * s.N), 6),
                             y0 = random_values<T>(size_t(s.M * s.N), 7),
                             dx0 = random_values<T>(size_t(s.M * s.K), 8);
        std::vector<T> fast = y0, ref = y0;
        if (!accumulate) std::fill(fast.begin(), fast.end(), std::numeric_limits<T>::quiet_NaN());
        quantized_matmul<T>(x.data(), s.M, s.K, q, fast.data(), s.N, accumulate);
        ref_quantized_matmul<T>(x.data(), s.M, s.K, q, ref.data(), s.N, accumulate);
        for (int64_t m = 0; m < s.M; ++m)
          for (int64_t o = 0; o < s.N; ++o) {
            double mag = accumulate ? std::fabs(double(y0[m * s.N + o])) : 0.0;
            for (int64_t k = 0; k < s.K; ++k) mag += std::fabs(x[m * s.K + k] * What[o * s.K + k]);
            CHECK(std::fabs(double(fast[m * s.N + o]) - double(ref[m * s.N + o])) <=
                  double(s.K + 3) * u * mag);
          }
        std::vector<T> dfast = dx0, dref = dx0;
        quantized_matmul_backward_input<T>(dy.data(), s.M, s.N, q, dfast.data(), s.K, accumulate);
        ref_quantized_matmul_backward_input<T>(dy.data(), s.M, s.N, q, dref.data(), s.K,
                                               accumulate);
        for (int64_t m = 0; m < s.M; ++m)
          for (int64_t k = 0; k < s.K; ++k) {
            double mag = accumulate ? std::fabs(double(dx0[m * s.K + k])) : 0.0;
            for (int64_t o = 0; o < s.N; ++o) mag += std::fabs(dy[m * s.N + o] * What[o * s.K + k]);
            CHECK(std::fabs(double(dfast[m * s.K + k]) - double(dref[m * s.K + k])) <=
                  double(s.N + 3) * u * mag);
          }
      }
}

TEST_CASE("quantized_gemv: every path this CPU has gives the portable path's bits") {
  INFO("best path here: " << gemv_path_name(gemv_best_path()));
  for (QuantFormat format : {QuantFormat::int8, QuantFormat::bf16})
    for (int64_t K : {1, 5, 15, 16, 17, 31, 32, 33, 47, 64, 100, 513})
      for (int64_t N : {1, 3, 4, 7, 9}) {
        const std::string format_name = quant_format_name(format);
        CAPTURE(format_name);
        CAPTURE(K);
        CAPTURE(N);
        const QuantizedMatrix q = quantize_matrix(random_weight(N, K, 9, 2), format);
        const std::vector<float> x = random_values<float>(size_t(K), 10);
        std::vector<float> portable(size_t(N), 0.25f);
        quantized_gemv(q, x.data(), portable.data(), true, GemvPath::portable);
        for (GemvPath path : {GemvPath::avx2, GemvPath::avx512}) {
          const std::string path_name = gemv_path_name(path);
          CAPTURE(path_name);
          std::vector<float> fast(size_t(N), 0.25f);
          quantized_gemv(q, x.data(), fast.data(), true, path);
          CHECK(std::memcmp(fast.data(), portable.data(), sizeof(float) * N) == 0);
        }
      }
}

TEST_CASE("quantized kernels give the same bits at 1 and 2 threads") {
  // Above the sizes that spread panels, tiles and GEMV rows over the threads.
  const int64_t M = 300, N = 200, K = 300;
  const int previous = threads();
  for (QuantFormat format : {QuantFormat::int8, QuantFormat::bf16}) {
    const std::string format_name = quant_format_name(format);
    CAPTURE(format_name);
    const QuantizedMatrix q = quantize_matrix(random_weight(N, K, 11), format);
    const std::vector<float> x = random_values<float>(size_t(M * K), 12),
                             dy = random_values<float>(size_t(M * N), 13);
    std::vector<float> y[2], dx[2], g[2];
    for (int t : {1, 2}) {
      set_threads(t);
      y[t - 1].resize(size_t(M * N));
      dx[t - 1].resize(size_t(M * K));
      g[t - 1].resize(size_t(N));
      quantized_matmul<float>(x.data(), M, K, q, y[t - 1].data(), N, false);
      quantized_matmul_backward_input<float>(dy.data(), M, N, q, dx[t - 1].data(), K, false);
      quantized_gemv(q, x.data(), g[t - 1].data(), false);
    }
    set_threads(previous);
    CHECK(std::memcmp(y[0].data(), y[1].data(), sizeof(float) * y[0].size()) == 0);
    CHECK(std::memcmp(dx[0].data(), dx[1].data(), sizeof(float) * dx[0].size()) == 0);
    CHECK(std::memcmp(g[0].data(), g[1].data(), sizeof(float) * g[0].size()) == 0);
  }
}

TEST_CASE("quantized_linear: gradients against linear on the dequantised weight; no weight grad") {
  for (QuantFormat format : {QuantFormat::int8, QuantFormat::bf16}) {
    const std::string format_name = quant_format_name(format);
    CAPTURE(format_name);
    const int64_t N = 70, K = 45;
    const QuantizedMatrix q = quantize_matrix(random_weight(N, K, 14, 3), format);
    const Tensor w_hat = dequantize(q);
    Tensor x = Tensor::from_vector(random_values<float>(2 * 3 * K, 15), {2, 3, K});
    Tensor b = Tensor::from_vector(random_values<float>(N, 16), {N});
    Tensor x2 = raw::clone(x), b2 = raw::clone(b);
    for (Tensor* t : {&x, &b, &x2, &b2}) t->set_requires_grad(true);
    const Tensor upstream = Tensor::from_vector(random_values<float>(2 * 3 * N, 17), {2, 3, N});
    const Tensor y = quantized_linear(x, q, b), y2 = linear(x2, w_hat, b2);
    REQUIRE(y.shape() == Shape{2, 3, N});
    backward(sum(mul(y, upstream)));
    backward(sum(mul(y2, upstream)));
    const std::vector<double> gx = x.grad().to_vector(), gx2 = x2.grad().to_vector(),
                              gy = upstream.to_vector(), wv = w_hat.to_vector();
    // dx: two float32 sums of N products in different orders: within 2·γ_{N+1}·Σ|dy·ŵ|.
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t k = 0; k < K; ++k) {
        double mag = 0;
        for (int64_t o = 0; o < N; ++o) mag += std::fabs(gy[r * N + o] * wv[o * K + k]);
        CHECK(std::fabs(gx[r * K + k] - gx2[r * K + k]) <= 2 * gamma_n(N + 1) * mag);
      }
    // The bias's gradient: the same column sums, bit for bit.
    CHECK(b.grad().to_vector() == b2.grad().to_vector());
    CHECK(test::rel_diff(y.to_vector(), y2.to_vector()) < 1e-5);
  }
}

TEST_CASE("quantized_linear: float64 gradient check of the input and the bias") {
  // Float64 activations read Ŵ exactly and sum in double: the op is a linear map of x and b, and
  // its backward is checked against central differences as every op's is.
  for (QuantFormat format : {QuantFormat::int8, QuantFormat::bf16}) {
    const std::string format_name = quant_format_name(format);
    CAPTURE(format_name);
    const QuantizedMatrix q = quantize_matrix(random_weight(6, 5, 18, 2), format);
    const GradcheckResult r =
        gradcheck("quantized_linear",
                  [&](const std::vector<Tensor>& in) { return quantized_linear(in[0], q, in[1]); },
                  {random_tensor({2, 3, 5}, 19), random_tensor({6}, 20)});
    CHECK_MESSAGE(r.passed, r.message);
    CHECK(r.checks > 0);
  }
}

TEST_CASE("quantized_linear refuses bad inputs, naming the op") {
  const QuantizedMatrix q = quantize_matrix(random_weight(4, 3, 21), QuantFormat::int8);
  CHECK_THROWS_WITH(quantized_linear(Tensor::zeros({2, 5}), q),
                    doctest::Contains("quantized_linear"));
  CHECK_THROWS_WITH(quantized_linear(Tensor::zeros({2, 3}), q, Tensor::zeros({5})),
                    doctest::Contains("a bias [4]"));
  QuantizedMatrix broken = q;
  broken.scales = Tensor();
  CHECK_THROWS_WITH(quantized_linear(Tensor::zeros({2, 3}), broken),
                    doctest::Contains("float32 scales [4]"));
  Tensor x = Tensor::zeros({2, 3});
  x.set_requires_grad(true);
  const Tensor y = quantized_linear(x, q);
  CHECK_THROWS_WITH(grad({sum(y)}, {x}, {}, true, true), doctest::Contains("quantized_linear"));
}

TEST_CASE("quantize_matrix and parse_quant_format refuse bad input with a clear message") {
  CHECK_THROWS_WITH(quantize_matrix(Tensor::zeros({3}), QuantFormat::int8),
                    doctest::Contains("float32 weight [N, K]"));
  CHECK_THROWS_WITH(quantize_matrix(Tensor::zeros({2, 2}, DType::f64), QuantFormat::bf16),
                    doctest::Contains("float32 weight [N, K]"));
  const Tensor bad = Tensor::from_vector(
      std::vector<float>{1, 2, 3, std::numeric_limits<float>::infinity()}, {2, 2});
  CHECK_THROWS_WITH(quantize_matrix(bad, QuantFormat::int8),
                    doctest::Contains("non-finite value inf at row 1, column 1"));
  CHECK(parse_quant_format("int8") == QuantFormat::int8);
  CHECK(parse_quant_format("bf16") == QuantFormat::bf16);
  CHECK_THROWS_WITH(parse_quant_format("q4"), doctest::Contains("'q4' is not known"));
}

namespace {

// A tiny standard-mode MicroLM with an untied head (so the head is a Linear too), with biases.
MicroLMConfig tiny_lm_config() {
  MicroLMConfig c;
  c.vocab = 61;
  c.dim = 32;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_len = 12;
  c.expansion = 2;
  c.mode = residual_mode("standard");
  c.tied_head = false;
  c.bias = true;
  return c;
}

std::vector<int32_t> some_ids(int64_t n, int64_t vocab) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 37 + 5) % vocab));
  return ids;
}

Tensor logits_of(MicroLM& model, const std::vector<int32_t>& ids) {
  NoGradGuard no_grad;
  const int64_t T = static_cast<int64_t>(ids.size());
  return raw::view_reshape(model.forward(Tensor::from_ids(ids, {1, T})), {T, model.config().vocab});
}

int64_t argmax_of(const std::vector<double>& v) {
  return std::max_element(v.begin(), v.end()) - v.begin();
}

// Σ over the Linears of their weights' bytes as stored (float32, or the packed form).
int64_t linear_weight_bytes(const Module& m) {
  int64_t bytes = 0;
  if (auto* l = dynamic_cast<const Linear*>(&m))
    bytes += l->quantized_weight ? l->quantized_weight->bytes() : 4 * l->weight.numel();
  for (auto& [name, child] : m.named_children()) bytes += linear_weight_bytes(*child);
  return bytes;
}

}  // namespace

TEST_CASE("a MicroLM with every Linear quantized: logits near float32's, decoding, bytes") {
  const MicroLMConfig c = tiny_lm_config();
  MicroLM reference(c);
  reference.init_identical(3);
  const std::vector<int32_t> ids = some_ids(c.seq_len, c.vocab);
  const std::vector<double> float_logits = logits_of(reference, ids).to_vector();
  double scale = 0;
  for (double v : float_logits) scale = std::max(scale, std::fabs(v));
  // Measured max |Δlogit| / max |logit| (this model, these ids): int8 0.74%, bf16 0.31%; the
  // checks allow about 4× that.
  for (auto [format, tolerance] :
       {std::pair{QuantFormat::int8, 0.03}, std::pair{QuantFormat::bf16, 0.012}}) {
    const std::string format_name = quant_format_name(format);
    CAPTURE(format_name);
    MicroLM model(c);
    model.init_identical(3);
    const int64_t float_bytes = linear_weight_bytes(model), float_stored = stored_bytes(model);
    CHECK(quantize_frozen(model, format) == 2 * 4 + 1 + 2 * 3);  // q k v output, up gate down, head
    CHECK(!model.head->plain());
    CHECK(!model.head->weight.defined());
    // The weights left the parameters; the state_dict names their packed form.
    for (auto& [name, p] : model.named_parameters()) CHECK(!name.ends_with("q.weight"));
    bool found = false;
    for (auto& [name, t] : model.state_dict())
      if (name == (format == QuantFormat::int8 ? "head.weight_int8" : "head.weight_bf16")) {
        found = true;
        CHECK(t.dtype() == DType::u8);
      }
    CHECK(found);
    // Bytes: int8 is (K + 4) / 4K of float32 (the scales), bf16 exactly half.
    const double ratio = double(linear_weight_bytes(model)) / double(float_bytes);
    INFO("Linear weight bytes ratio " << ratio);
    if (format == QuantFormat::int8)
      CHECK(ratio <= 0.25 + 1.0 / 32 + 1e-9);
    else
      CHECK(ratio == 0.5);
    CHECK(float_stored - stored_bytes(model) == float_bytes - linear_weight_bytes(model));

    const Tensor full = logits_of(model, ids);
    const std::vector<double> q_logits = full.to_vector();
    double err = 0;
    for (size_t i = 0; i < q_logits.size(); ++i)
      err = std::max(err, std::fabs(q_logits[i] - float_logits[i]));
    INFO("max |logit difference| / max |logit| = " << err / scale);
    CHECK(err <= tolerance * scale);

    // Cached decoding reads the packed rows (the GEMV for each step): the full forward's logits
    // at each position to float rounding, so the same greedy choices.
    Decoder decoder(model);
    for (int64_t t = 0; t < c.seq_len; ++t) {
      CAPTURE(t);
      const std::vector<double> step = decoder.append(std::span(ids.data() + t, 1)).to_vector();
      const std::vector<double> row = raw::view_narrow(full, 0, t, 1).to_vector();
      CHECK(test::rel_diff(step, row) < 1e-4);
      CHECK(argmax_of(step) == argmax_of(row));
    }
    // Greedy decoding: a prompt of 3 ids as one chunk (panel GEMMs), then each chosen id fed back
    // (the GEMV); the full forward of the context chooses the same id at every step.
    decoder.reset();
    std::vector<int32_t> context(ids.begin(), ids.begin() + 3);
    std::vector<double> last = decoder.append(std::span(context.data(), 3)).to_vector();
    while (static_cast<int64_t>(context.size()) < c.seq_len) {
      const Tensor all = logits_of(model, context);
      const int64_t T = static_cast<int64_t>(context.size());
      const int64_t expected = argmax_of(raw::view_narrow(all, 0, T - 1, 1).to_vector());
      CAPTURE(T);
      CHECK(argmax_of(last) == expected);
      context.push_back(static_cast<int32_t>(expected));
      last = decoder.append(std::span(&context.back(), 1)).to_vector();
    }
  }
}

TEST_CASE("a quantized MicroLM trains its float32 parts: the loss's gradient reaches them") {
  // The loss and the embedding's gradient against a float32 model whose Linears hold the
  // dequantised weights: the same function, summed in other orders.
  const MicroLMConfig c = tiny_lm_config();
  MicroLM quantized(c), dequantized(c);
  quantized.init_identical(4);
  dequantized.init_identical(4);
  quantize_frozen(quantized, QuantFormat::int8);
  {
    NoGradGuard no_grad;
    const std::function<void(Module&, Module&)> copy = [&](Module& q, Module& f) {
      if (auto* l = dynamic_cast<Linear*>(&q))
        dynamic_cast<Linear&>(f).weight.copy_from(dequantize(*l->quantized_weight));
      auto qc = q.named_children(), fc = f.named_children();
      for (size_t i = 0; i < qc.size(); ++i) copy(*qc[i].second, *fc[i].second);
    };
    copy(quantized, dequantized);
  }
  const std::vector<int32_t> ids = some_ids(2 * c.seq_len, c.vocab);
  const Tensor in =
      Tensor::from_ids(std::vector<int32_t>(ids.begin(), ids.begin() + c.seq_len), {1, c.seq_len});
  const Tensor target =
      Tensor::from_ids(std::vector<int32_t>(ids.begin() + c.seq_len, ids.end()), {1, c.seq_len});
  const Tensor lq = quantized.loss(in, target), lf = dequantized.loss(in, target);
  CHECK(std::fabs(lq.item<double>() - lf.item<double>()) < 1e-5);
  backward(lq);
  backward(lf);
  CHECK(test::rel_diff(quantized.token->weight.grad().to_vector(),
                       dequantized.token->weight.grad().to_vector()) < 1e-4);
  const Linear& q_proj = *quantized.blocks[0]->attention->q;  // a quantized Linear's float32 bias
  CHECK(test::rel_diff(q_proj.bias.grad().to_vector(),
                       dequantized.blocks[0]->attention->q->bias.grad().to_vector()) < 1e-4);
}

TEST_CASE("quantize_linear refuses a second quantization and a module already flattened") {
  Linear layer(4, 3);
  quantize_linear(layer, QuantFormat::bf16);
  CHECK_THROWS_AS(quantize_linear(layer, QuantFormat::int8), std::logic_error);
  CHECK(quantize_frozen(layer, QuantFormat::int8) == 0);  // already quantized: left alone
  Linear flat(4, 3);
  flat.flat_parameters();
  CHECK_THROWS_WITH(quantize_linear(flat, QuantFormat::int8),
                    doctest::Contains("flat_parameters() made"));
  CHECK(flat.weight.defined());  // nothing changed
  Linear wide(4, 3, true, DType::f64);
  CHECK_THROWS_WITH(quantize_linear(wide, QuantFormat::int8),
                    doctest::Contains("needs a float32 weight"));
  Linear converted(4, 3);  // to(float64) after quantizing: the forward names the scales
  quantize_linear(converted, QuantFormat::int8);
  converted.to(DType::f64);
  CHECK_THROWS_WITH(converted.forward(Tensor::zeros({1, 4}, DType::f64)),
                    doctest::Contains("float32 scales [3]"));
  Linear other(4, 3);
  CHECK_THROWS_WITH(other.unregister_parameter("nothing"),
                    doctest::Contains("no parameter 'nothing'"));
}

TEST_CASE("a quantized Linear's state_dict names its packed form and loads into another one") {
  for (QuantFormat format : {QuantFormat::int8, QuantFormat::bf16}) {
    const std::string format_name = quant_format_name(format);
    CAPTURE(format_name);
    Linear a(5, 4), b(5, 4);  // different draws
    const WeakTensor float_weight(a.weight);
    quantize_linear(a, format);
    CHECK(!float_weight.lock().defined());  // nothing holds the float32 weight any more: freed
    quantize_linear(b, format);
    std::vector<std::string> names;
    for (auto& [name, t] : a.state_dict()) names.push_back(name);
    CHECK(names == (format == QuantFormat::int8
                        ? std::vector<std::string>{"bias", "weight_int8", "weight_scale"}
                        : std::vector<std::string>{"bias", "weight_bf16"}));
    CHECK(a.parameters().size() == 1);  // the bias
    const Tensor x = Tensor::from_vector(random_values<float>(10, 22), {2, 5});
    CHECK(a.forward(x).to_vector() != b.forward(x).to_vector());
    b.load_state_dict(a.state_dict());  // the kernels read the loaded values
    CHECK(a.forward(x).to_vector() == b.forward(x).to_vector());
  }
}

TEST_CASE("ONNX export refuses a quantized Linear, naming the op (never a constant output)") {
  Linear layer(4, 3);
  quantize_linear(layer, QuantFormat::int8);
  const onnx::ExportForward forward = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{layer(in[0])};
  };
  CHECK_THROWS_WITH(
      onnx::export_to_proto(layer, forward, {Tensor::zeros({2, 4})}),
      doctest::Contains("op 'quantized_linear' in module '(root)' has no ONNX mapping"));
}

TEST_CASE("LoRA over a quantized base: adapters train, decoding adds their term") {
  const MicroLMConfig c = tiny_lm_config();
  for (bool quantize_first : {true, false}) {
    CAPTURE(quantize_first);
    MicroLM model(c);
    model.init_identical(5);
    const lora::Options options{.targets = {"q", "v"}, .r = 4, .alpha = 8};
    if (quantize_first) CHECK(quantize_frozen(model, QuantFormat::int8) == 15);
    const lora::Summary summary = lora::apply(model, options);
    CHECK(summary.adapted.size() == 4);
    if (!quantize_first) CHECK(quantize_frozen(model, QuantFormat::int8) == 15);  // not A, B
    CHECK(quantize_frozen(model, QuantFormat::int8) == 0);
    const Linear& q0 = *model.blocks[0]->attention->q;
    REQUIRE(q0.quantized_weight);
    REQUIRE(q0.lora);
    CHECK(q0.lora->A->weight.requires_grad());
    CHECK(!q0.lora->A->quantized_weight);
    // A trained-looking adapter: B away from zero, so its term shows.
    {
      NoGradGuard no_grad;
      for (MicroBlock* b : model.blocks)
        for (const Linear* l : {b->attention->q, b->attention->v}) {
          Tensor w = l->lora->B->weight;  // a handle on the adapter's weight
          w.copy_from(Tensor::from_vector(random_values<float>(size_t(w.numel()), 23), w.shape()));
        }
    }
    const std::vector<int32_t> ids = some_ids(c.seq_len, c.vocab);
    const Tensor full = logits_of(model, ids);
    Decoder decoder(model);
    const Tensor& all = decoder.append(std::span(ids.data(), ids.size()), true);
    CHECK(test::rel_diff(all.to_vector(), full.to_vector()) < 1e-4);
    // The loss's gradient reaches the adapters (and nothing frozen asks for one).
    const Tensor in = Tensor::from_ids(ids, {1, c.seq_len});
    backward(model.loss(in, in));
    CHECK(q0.lora->B->weight.grad().defined());
    CHECK(q0.lora->A->weight.grad().defined());
    // Merging needs the float weight, which quantizing released: refused by name.
    CHECK_THROWS_WITH_AS(lora::merge(model),
                         doctest::Contains("'blocks.0.attention.q' is stored quantized"),
                         std::invalid_argument);
  }
}

TEST_CASE("a quantized model's weights file round-trips (uint8 packed values, float32 scales)") {
  const MicroLMConfig c = tiny_lm_config();
  MicroLM saved(c), loaded(c);
  saved.init_identical(6);
  loaded.init_identical(7);
  quantize_frozen(saved, QuantFormat::int8);
  quantize_frozen(loaded, QuantFormat::int8);
  const test::TempDir dir("quantized");
  save_weights(dir.file("w.safetensors"), saved);
  load_weights(dir.file("w.safetensors"), loaded);
  const std::vector<int32_t> ids = some_ids(c.seq_len, c.vocab);
  CHECK(logits_of(loaded, ids).to_vector() == logits_of(saved, ids).to_vector());
  MicroLM bf16(c);  // another format: the names differ, so loading is refused by name
  quantize_frozen(bf16, QuantFormat::bf16);
  CHECK_THROWS_WITH(load_weights(dir.file("w.safetensors"), bf16),
                    doctest::Contains("weight_bf16"));
}
