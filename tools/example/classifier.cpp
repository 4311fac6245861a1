// A classifier on a synthetic dataset: three interleaved spirals in the plane, an MLP with dropout
// trained by AdamW on cross-entropy in mini-batches, then accuracy in eval mode (dropout off).
// Exits non-zero unless the held-out accuracy passes 90%. Data, model and loop all in one file.
#include <depthgrad/depthgrad.h>

#include <cmath>
#include <cstdio>
#include <memory>

// n points per class on `classes` spiral arms with a little noise: x [n·classes, 2] float32,
// labels [n·classes] int32 (what cross_entropy takes).
struct Dataset {
  dg::Tensor x, labels;
};
Dataset spirals(int64_t n, int64_t classes, dg::TorchGenerator& gen) {
  std::vector<float> xs;
  std::vector<int32_t> ys;
  const dg::Tensor noise = dg::randn({n * classes, 2}, dg::DType::f32, &gen);
  for (int64_t c = 0; c < classes; ++c)
    for (int64_t i = 0; i < n; ++i) {
      const double r = static_cast<double>(i) / static_cast<double>(n);
      const double angle = 4.0 * r + 2.0 * M_PI * static_cast<double>(c) / classes;
      const float* e = noise.data<float>() + 2 * (c * n + i);
      xs.push_back(static_cast<float>(r * std::cos(angle) + 0.02 * e[0]));
      xs.push_back(static_cast<float>(r * std::sin(angle) + 0.02 * e[1]));
      ys.push_back(static_cast<int32_t>(c));
    }
  return {dg::Tensor::from_vector(xs, {n * classes, 2}), dg::Tensor::from_ids(ys, {n * classes})};
}

// The share of rows whose largest logit is the label (argmax gives int64 indices).
double accuracy(dg::Sequential& net, const Dataset& d) {
  dg::NoGradGuard no_grad;
  const dg::Tensor predicted = dg::argmax(net.forward(d.x), 1);
  return dg::mean(dg::eq(predicted, dg::to_dtype(d.labels, dg::DType::i64))).item();
}

int main() {
  dg::manual_seed(0);
  dg::TorchGenerator data_gen(1);
  const Dataset train = spirals(300, 3, data_gen), test = spirals(100, 3, data_gen);

  dg::Sequential net(std::make_unique<dg::Linear>(2, 64), dg::relu,
                     std::make_unique<dg::Dropout>(0.1), std::make_unique<dg::Linear>(64, 64),
                     dg::relu, std::make_unique<dg::Dropout>(0.1),
                     std::make_unique<dg::Linear>(64, 3));
  dg::AdamW optimizer(net, {.lr = 1e-2, .weight_decay = 1e-4});
  dg::CosineAnnealingLR schedule(optimizer, /*total_steps=*/1500);

  const int64_t rows = train.x.shape()[0], batch = 64;
  for (int64_t step = 0; step < 1500; ++step) {
    const dg::Tensor rows_picked = dg::randint(rows, {batch});  // a batch drawn with replacement
    const dg::Tensor logits = net.forward(dg::index_select(train.x, 0, rows_picked));
    const dg::Tensor loss =
        dg::cross_entropy(logits, dg::index_select(train.labels, 0, rows_picked));
    optimizer.zero_grad();
    dg::backward(loss);
    optimizer.step();
    schedule.step();
    if (step % 300 == 0)
      std::printf("step %4lld  loss %.4f\n", static_cast<long long>(step), loss.item());
  }

  net.eval();  // dropout off
  const double train_accuracy = accuracy(net, train), test_accuracy = accuracy(net, test);
  std::printf("accuracy: train %.3f, held out %.3f\n", train_accuracy, test_accuracy);
  if (!(test_accuracy > 0.9)) {
    std::printf("FAILED: the classifier did not learn the spirals\n");
    return 1;
  }
  std::printf("example passed\n");
  return 0;
}
