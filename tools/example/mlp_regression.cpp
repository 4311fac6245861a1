// MLP regression: learn z = sin(x)·cos(y) on [-2, 2]² from noisy samples with a three-layer MLP,
// SGD with Nesterov momentum on random mini-batches, a step schedule and gradient clipping;
// then save the weights, load them into a freshly built model and check it predicts the same.
// Exits non-zero unless the held-out error is small and the reloaded model agrees bit for bit.
#include <depthgrad/depthgrad.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

// n samples: inputs [n, 2] uniform on [-2, 2]², targets [n, 1] = sin(x)·cos(y) + noise.
std::pair<dg::Tensor, dg::Tensor> samples(int64_t n, double noise, dg::TorchGenerator& gen) {
  const dg::Tensor inputs = dg::rand({n, 2}, dg::DType::f32, &gen) * 4.0 - 2.0;
  const dg::Tensor eps = dg::randn({n}, dg::DType::f32, &gen);
  std::vector<float> z(n);
  const float* xy = inputs.data<float>();
  for (int64_t i = 0; i < n; ++i)
    z[i] = std::sin(xy[2 * i]) * std::cos(xy[2 * i + 1]) +
           static_cast<float>(noise) * eps.data<float>()[i];
  return {inputs, dg::Tensor::from_vector(z, {n, 1})};
}

std::unique_ptr<dg::Sequential> make_model() {
  return std::make_unique<dg::Sequential>(std::make_unique<dg::Linear>(2, 64), dg::tanh,
                                          std::make_unique<dg::Linear>(64, 64), dg::tanh,
                                          std::make_unique<dg::Linear>(64, 1));
}

int main() {
  dg::manual_seed(0);
  dg::TorchGenerator data_gen(1);
  const auto [train_x, train_z] = samples(2048, 0.05, data_gen);
  const auto [test_x, test_z] = samples(512, 0.0, data_gen);

  std::unique_ptr<dg::Sequential> net = make_model();
  dg::SGD optimizer(net->parameters(), {.lr = 0.05, .momentum = 0.9, .nesterov = true});
  dg::StepLR schedule(optimizer, /*step_size=*/20, /*gamma=*/0.5);  // per epoch

  const int64_t batch = 64, rows = train_x.shape()[0];
  for (int epoch = 0; epoch < 60; ++epoch) {
    double epoch_loss = 0;
    for (int64_t start = 0; start < rows; start += batch) {
      const dg::Tensor idx =
          dg::randint(rows, {batch}, dg::DType::i64, &data_gen);  // drawn with replacement
      const dg::Tensor loss = dg::mse_loss(net->forward(dg::index_select(train_x, 0, idx)),
                                           dg::index_select(train_z, 0, idx));
      optimizer.zero_grad();
      dg::backward(loss);
      dg::clip_grad_norm(net->parameters(), 1.0);
      optimizer.step();
      epoch_loss += loss.item() * batch / rows;
    }
    schedule.step();
    if (epoch % 10 == 0) std::printf("epoch %2d  train mse %.5f\n", epoch, epoch_loss);
  }

  dg::NoGradGuard no_grad;
  const dg::Tensor prediction = net->forward(test_x);
  const double test_mse = dg::mse_loss(prediction, test_z).item();
  const dg::Tensor centred = test_z - dg::mean(test_z);
  std::printf("held-out mse %.5f (target variance %.3f)\n", test_mse,
              dg::mean(centred * centred).item());

  // Save, rebuild, load: the same predictions bit for bit.
  const std::string path =
      (std::filesystem::temp_directory_path() / "depthgrad_mlp_regression.safetensors").string();
  dg::save_weights(path, *net);
  std::unique_ptr<dg::Sequential> reloaded = make_model();
  dg::load_weights(path, *reloaded);
  std::filesystem::remove(path);
  const bool same = reloaded->forward(test_x).to_floats() == prediction.to_floats();
  std::printf("reloaded model predicts the same: %s\n", same ? "yes" : "NO");
  if (!(test_mse < 0.01) || !same) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("example passed\n");
  return 0;
}
