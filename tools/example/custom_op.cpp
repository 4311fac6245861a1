// A custom op, built on depthgrad from outside its tree: it defines a new op (softsign)
// with its backward, checks that backward with the public gradient checker, and trains a small
// network of depthgrad modules with AdamW to fit a curve. Exits non-zero when any check fails.
// It is deliberately small: one op, one model, one loop.
#include <depthgrad/depthgrad.h>

#include <cmath>
#include <cstdio>
#include <memory>

// ---- a new op: softsign(x) = x / (1 + |x|), d/dx = 1 / (1 + |x|)²
// Forward computes a fresh tensor; when the tape records, the
// backward closure ACCUMULATES g · d/dx into the input's gradient (depthgrad's one backward
// contract).
dg::Tensor softsign(const dg::Tensor& x) {
  dg::Tensor in = dg::detach(x).contiguous();  // x's values (x.contiguous() would record itself)
  dg::Tensor out = dg::Tensor::empty(x.shape(), x.dtype());
  auto forward = [&]<class T>() {
    const T* a = in.data<T>();
    T* y = out.data<T>();
    for (int64_t i = 0; i < in.numel(); ++i) y[i] = a[i] / (T(1) + std::abs(a[i]));
  };
  if (x.dtype() == dg::DType::f64)
    forward.operator()<double>();
  else
    forward.operator()<float>();

  if (dg::should_record({x})) {
    dg::record("softsign", {x}, out, [x, in](const dg::Tensor& g) {
      dg::Tensor grad_in = dg::Tensor::empty(in.shape(), in.dtype());
      auto backward = [&]<class T>() {
        const T* a = in.data<T>();
        const dg::Tensor gc = g.contiguous();
        const T* gy = gc.data<T>();
        T* gx = grad_in.data<T>();
        for (int64_t i = 0; i < in.numel(); ++i) {
          const T d = T(1) + std::abs(a[i]);
          gx[i] = gy[i] / (d * d);
        }
      };
      if (in.dtype() == dg::DType::f64)
        backward.operator()<double>();
      else
        backward.operator()<float>();
      dg::accumulate_grad(x, grad_in);  // "accumulate into this input's gradient"
    });
  }
  return out;
}

// ---- a model of depthgrad modules: y = W2 · softsign(W1 · x + b1) + b2 --------------------------
class CurveNet : public dg::Module {
 public:
  explicit CurveNet(int64_t hidden)
      : hidden_layer(register_module("hidden", std::make_unique<dg::Linear>(1, hidden, true))),
        output_layer(register_module("output", std::make_unique<dg::Linear>(hidden, 1, true))) {}
  dg::Tensor forward(const dg::Tensor& x) { return output_layer(softsign(hidden_layer(x))); }
  dg::Linear& hidden_layer;
  dg::Linear& output_layer;
};

int main() {
  // 1. The new op's backward against central differences (float64, random-weighted loss).
  dg::GradcheckResult check =
      dg::gradcheck("softsign", [](const std::vector<dg::Tensor>& in) { return softsign(in[0]); },
                    {dg::random_tensor({4, 5}, /*seed=*/1, -3.0, 3.0)});
  std::printf("gradcheck softsign: %s (%lld comparisons, max error %.2e)\n",
              check.passed ? "passed" : "FAILED", static_cast<long long>(check.checks),
              check.max_abs_error);
  if (!check.passed) {
    std::printf("%s\n", check.message.c_str());
    return 1;
  }

  // 2. Fit y = sin(2x) on [-1.5, 1.5] with 64 points.
  const int64_t n = 64;
  std::vector<double> xs(n), ys(n);
  for (int64_t i = 0; i < n; ++i) {
    xs[i] = -1.5 + 3.0 * static_cast<double>(i) / static_cast<double>(n - 1);
    ys[i] = std::sin(2 * xs[i]);
  }
  dg::Tensor x = dg::Tensor::from_vector(xs, {n, 1}, dg::DType::f32);
  dg::Tensor y = dg::Tensor::from_vector(ys, {n, 1}, dg::DType::f32);

  dg::manual_seed(7);  // the layers' default (torch-like) initialisation, seeded
  CurveNet model(32);
  dg::AdamW optimizer(model, {.lr = 1e-2, .weight_decay = 0});
  double first = 0, last = 0;
  for (int step = 0; step < 500; ++step) {
    optimizer.zero_grad();
    dg::Tensor error = model(x) - y;
    dg::Tensor loss = dg::mean(error * error);
    dg::backward(loss);
    optimizer.step();
    if (step == 0) first = loss.item();
    last = loss.item();
    if (step % 100 == 0 || step == 499) std::printf("step %3d  mse %.5f\n", step, last);
  }
  std::printf("mse %.5f -> %.5f\n", first, last);
  if (!(last < 0.05 * first)) {
    std::printf("FAILED: the model did not fit the curve\n");
    return 1;
  }
  std::printf("example passed\n");
  return 0;
}
