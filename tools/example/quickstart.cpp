// The README's first program: a small network of depthgrad modules fits y = sin(2x).
#include <depthgrad/depthgrad.h>

#include <cmath>
#include <cstdio>

int main() {
  std::vector<float> xs, ys;
  for (int i = 0; i < 64; ++i)
    xs.push_back(i / 21.0f - 1.5f), ys.push_back(std::sin(2 * xs.back()));
  dg::Tensor x = dg::Tensor::from_vector(xs, {64, 1}), y = dg::Tensor::from_vector(ys, {64, 1});

  dg::manual_seed(0);  // layers start as PyTorch's do (Linear: kaiming-uniform)
  dg::Sequential net(std::make_unique<dg::Linear>(1, 32), dg::tanh,
                     std::make_unique<dg::Linear>(32, 1));
  dg::AdamW optimizer(net, {.lr = 1e-2, .weight_decay = 0});

  for (int step = 0; step <= 500; ++step) {
    optimizer.zero_grad();
    dg::Tensor loss = dg::mse_loss(net(x), y);
    dg::backward(loss);
    optimizer.step();
    if (step % 100 == 0) std::printf("step %3d  mse %.5f\n", step, loss.item());
  }
}
