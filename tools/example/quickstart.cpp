// The README's first program: a two-layer network of depthgrad modules fits y = sin(2x).
#include <depthgrad/depthgrad.h>

#include <cmath>
#include <cstdio>

struct Net : dg::Module {  // y = W2 · silu(W1 · x + b1) + b2
  dg::Linear& hidden = register_module("hidden", std::make_unique<dg::Linear>(1, 32, true));
  dg::Linear& out = register_module("out", std::make_unique<dg::Linear>(32, 1, true));
  dg::Tensor forward(const dg::Tensor& x) { return out.forward(dg::silu(hidden.forward(x))); }
};

int main() {
  std::vector<double> xs, ys;
  for (int i = 0; i < 64; ++i) xs.push_back(i / 21.0 - 1.5), ys.push_back(std::sin(2 * xs.back()));
  dg::Tensor x = dg::Tensor::from_vector(xs, {64, 1}), y = dg::Tensor::from_vector(ys, {64, 1});

  Net net;
  dg::TorchGenerator gen(7);  // redraw every parameter N(0, 0.5²) over the default init
  for (dg::Tensor p : net.parameters()) gen.normal_(p.data<float>(), p.numel(), 0.0, 0.5);
  dg::AdamW optimizer(net, dg::AdamWConfig{.weight_decay = 0});

  for (int step = 0; step <= 500; ++step) {
    net.zero_grad();
    dg::Tensor error = dg::sub(net.forward(x), y);
    dg::Tensor loss = dg::mean(dg::mul(error, error));
    dg::backward(loss);
    optimizer.step(1e-2);
    if (step % 100 == 0) std::printf("step %3d  mse %.5f\n", step, loss.item());
  }
}
