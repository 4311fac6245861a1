// A convolutional classifier on Fashion-MNIST (28x28 grey images of clothes, 10 classes), trained
// by the generic loop: two conv layers with batch norm, ReLU and max-pooling, then dropout and two
// linear layers (torch.nn.Sequential's layout, so its state dict has torch's keys), Adam on
// cross-entropy over shuffled epochs. After each epoch: its time, the mean training loss and the
// test accuracy (eval mode: batch norm's running statistics, no dropout).
// With --check-resume it also stops half-way at a training checkpoint and resumes a freshly built
// model from it, which must end with the same losses, weights and batch-norm buffers, bit for bit.
// Exits non-zero when the test accuracy is below --min-accuracy or the resume differs.
// --precision bf16 trains and measures the accuracy in the bf16 matmul precision (float32 master
// weights; tensor/gemm_kernels.h says which kernels honour it), on a CPU with AVX512_BF16 or AMX;
// --seed N draws the weights and dropout from seed N and shuffles from seed N + 1 (the default, 0,
// is what the example always did).
// --augment trains on torchvision's recipe of augmentation: each training image (uint8, through
// dg::FashionMNIST) randomly cropped back to 28x28 from a 2-pixel zero padding and flipped
// left-right with probability 1/2, then scaled to [0, 1] and normalised (dg::transforms), drawn
// afresh each epoch; --workers N makes the batches on N loader threads ahead of the step (the same
// bits with any N); --cosine anneals the rate from 1e-3 to 0 over the run (CosineAnnealingLR).
// --pixels takes the uint8 path without augmentation (ToTensor, Normalize each step: the images
// the default path holds precomputed, up to rounding, as Normalize divides by the std where the
// precomputed path multiplies by its reciprocal): what making the batches costs the step.
// tools/torch_fashion_cnn.py has the same flags. The recipe that reaches 93%:
//   fashion_cnn --augment --cosine --epochs 15 --workers 1 --min-accuracy 0.93
//   fashion_cnn [--epochs 4] [--batch 128] [--train-examples 60000] [--test-examples 10000]
//               [--min-accuracy 0.90] [--check-resume] [--data DIR] [--threads T]
//               [--precision float32|bf16] [--seed N] [--augment] [--pixels] [--workers N]
//               [--cosine]
// The data: Debian's dataset-fashion-mnist (tools/install-deps.sh installs it) or --data DIR.
#include <depthgrad/depthgrad.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "fashion_cnn_model.h"

namespace {

struct Options {
  int64_t epochs = 4, batch = 128, train_examples = 60000, test_examples = 10000;
  double min_accuracy = 0.90;
  bool check_resume = false;
  std::string data;  // empty: the default folder
  int threads = 0;   // 0: the library's default
  dg::MatmulPrecision precision = dg::MatmulPrecision::float32;
  uint64_t seed = 0;  // the weights' and dropout's draws; the shuffle's is seed + 1
  bool augment = false, pixels = false, cosine = false;
  int64_t workers = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--epochs")
      o.epochs = std::stoll(value());
    else if (flag == "--batch")
      o.batch = std::stoll(value());
    else if (flag == "--train-examples")
      o.train_examples = std::stoll(value());
    else if (flag == "--test-examples")
      o.test_examples = std::stoll(value());
    else if (flag == "--min-accuracy")
      o.min_accuracy = std::stod(value());
    else if (flag == "--check-resume")
      o.check_resume = true;
    else if (flag == "--data")
      o.data = value();
    else if (flag == "--threads")
      o.threads = std::stoi(value());
    else if (flag == "--precision")
      o.precision = dg::parse_precision(value(), "--precision");
    else if (flag == "--augment")
      o.augment = true;
    else if (flag == "--pixels")
      o.pixels = true;
    else if (flag == "--cosine")
      o.cosine = true;
    else if (flag == "--workers")
      o.workers = std::stoll(value());
    else if (flag == "--seed")
      o.seed = std::stoull(value());
    else
      throw std::invalid_argument("unknown flag " + flag + " (see the comment at the top)");
  }
  if (o.epochs < 1 || o.batch < 1 || o.train_examples < o.batch || o.train_examples > 60000 ||
      o.test_examples < 1 || o.test_examples > 10000 || o.workers < 0)
    throw std::invalid_argument(
        "flags out of range: epochs >= 1, batch >= 1, batch <= "
        "train-examples <= 60000, 1 <= test-examples <= 10000, workers >= 0");
  return o;
}

dg::Tensor loss(dg::Sequential& model, const dg::Batch& batch) {
  return dg::cross_entropy(model(batch[0]), batch[1]);
}

// The share of test images whose largest logit is the label, in eval mode (the model is put back
// in training mode after).
double accuracy(dg::Sequential& net, const dg::TensorDataset& data, dg::MatmulPrecision precision) {
  dg::NoGradGuard no_grad;
  const dg::MatmulPrecisionScope in_precision(precision);
  net.eval();
  double correct = 0;
  dg::for_each_batch(data, 1000, [&](const dg::Batch& batch) {
    const dg::Tensor predicted = dg::argmax(net(batch[0]), 1);
    correct += dg::sum(dg::eq(predicted, batch[1])).item();
  });
  net.train();
  return correct / static_cast<double>(data.size());
}

// The first n examples of a split, normalised by the training images' mean and std.
dg::TensorDataset examples(const dg::FashionMnistSplit& split, int64_t n, double mean,
                           double stddev) {
  dg::NoGradGuard no_grad;
  const dg::Tensor images = split.images.narrow(0, 0, n);
  const dg::Tensor normalised = dg::scale(dg::add_scalar(images, -mean), 1.0 / stddev);
  return dg::TensorDataset({normalised, split.labels.narrow(0, 0, n)});
}

// The training images one at a time from their uint8 pixels: cropped from a zero padding of 2 and
// flipped when augmenting, then scaled and normalised as the test images (torchvision's
// transforms, dg::transforms).
dg::FashionMNIST from_pixels(const dg::FashionMnistSplit& split, int64_t n, double mean,
                             double stddev, bool augment) {
  namespace T = dg::transforms;
  if (!augment)
    return dg::FashionMNIST(split, T::Compose({T::ToTensor(), T::Normalize({mean}, {stddev})}), n);
  return dg::FashionMNIST(split,
                          T::Compose({T::RandomCrop(28, {.padding = 2}), T::RandomHorizontalFlip(),
                                      T::ToTensor(), T::Normalize({mean}, {stddev})}),
                          n);
}

struct Run {
  std::unique_ptr<dg::Sequential> net;
  std::unique_ptr<dg::Adam> optimizer;
  std::unique_ptr<dg::CosineAnnealingLR> schedule;
  std::unique_ptr<dg::Trainer> trainer;
};

Run make_run(const dg::Dataset& train, const dg::TrainingConfig& settings, uint64_t init_seed,
             const Options& o) {
  dg::manual_seed(init_seed);  // the weights' draws, then dropout's masks
  Run run;
  run.net = fashion_cnn::make_model();
  run.optimizer = std::make_unique<dg::Adam>(*run.net, dg::AdamConfig{.lr = 1e-3});
  if (o.cosine)
    run.schedule = std::make_unique<dg::CosineAnnealingLR>(*run.optimizer, settings.steps);
  dg::json::Value model_config;
  model_config["model"] = "fashion_cnn";
  model_config["augment"] = o.augment;
  model_config["pixels"] = o.pixels;
  run.trainer = std::make_unique<dg::Trainer>(
      *run.net, train, dg::Sampler::shuffled(train.size(), settings.seed), loss, settings,
      *run.optimizer, run.schedule.get(), model_config);
  run.trainer->set_loader_workers(o.workers);
  return run;
}

bool same_state(dg::Sequential& a, dg::Sequential& b) {
  const auto sa = a.state_dict(), sb = b.state_dict();  // parameters and buffers, in order
  if (sa.size() != sb.size()) return false;
  for (size_t i = 0; i < sa.size(); ++i)
    if (sa[i].first != sb[i].first || sa[i].second.to_vector() != sb[i].second.to_vector())
      return false;
  return true;
}

int run_example(const Options& o) {
  if (o.threads > 0) dg::set_threads(o.threads);
  const auto t_load = std::chrono::steady_clock::now();
  const dg::FashionMnist data = dg::load_fashion_mnist(o.data);
  const double mean = dg::mean(data.train.images).item();
  const double stddev =
      std::sqrt(dg::mean(dg::square(dg::add_scalar(data.train.images, -mean))).item());
  const dg::TensorDataset plain_train = examples(data.train, o.train_examples, mean, stddev);
  const dg::FashionMNIST pixel_train =
      from_pixels(data.train, o.train_examples, mean, stddev, o.augment);
  const dg::Dataset& train =
      o.augment || o.pixels ? static_cast<const dg::Dataset&>(pixel_train) : plain_train;
  const dg::TensorDataset test = examples(data.test, o.test_examples, mean, stddev);
  std::printf(
      "Fashion-MNIST from %s: %lld training, %lld test images (read in %.1f s), %d threads\n",
      data.directory.c_str(), static_cast<long long>(train.size()),
      static_cast<long long>(test.size()),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count(),
      dg::threads());

  const int64_t steps_per_epoch = o.train_examples / o.batch;  // drop_last, as torch's
  const dg::TrainingConfig settings{.steps = o.epochs * steps_per_epoch,
                                    .batch = o.batch,
                                    .seed = o.seed + 1,
                                    .precision = o.precision};
  Run run = make_run(train, settings, o.seed, o);
  std::printf("%lld parameters; %lld epochs of %lld steps of %lld images\n",
              static_cast<long long>(run.net->parameter_count()), static_cast<long long>(o.epochs),
              static_cast<long long>(steps_per_epoch), static_cast<long long>(o.batch));
  if (o.precision != dg::MatmulPrecision::float32 || o.seed != 0)
    std::printf("precision %s, seed %llu\n", dg::precision_name(o.precision),
                static_cast<unsigned long long>(o.seed));
  if (o.augment || o.pixels || o.cosine || o.workers > 0)
    std::printf("images %s, augmentation %s, cosine schedule %s, %lld loader workers\n",
                o.augment || o.pixels ? "from uint8 pixels" : "precomputed",
                o.augment ? "on" : "off", o.cosine ? "on" : "off",
                static_cast<long long>(o.workers));

  double epoch_loss = 0, last_accuracy = 0;
  auto epoch_start = std::chrono::steady_clock::now();
  const auto on_step = [&](const dg::StepLog& log) {
    epoch_loss += log.loss;
    if ((log.step + 1) % steps_per_epoch != 0) return;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    last_accuracy = accuracy(*run.net, test, o.precision);
    std::printf("epoch %lld: %.1f s (%.1f ms/step), train loss %.4f, test accuracy %.4f\n",
                static_cast<long long>((log.step + 1) / steps_per_epoch), seconds,
                1e3 * seconds / static_cast<double>(steps_per_epoch),
                epoch_loss / static_cast<double>(steps_per_epoch), last_accuracy);
    std::fflush(stdout);
    epoch_loss = 0;
    epoch_start = std::chrono::steady_clock::now();
  };

  bool resumed_same = true;
  if (o.check_resume) {
    const std::string path =
        (std::filesystem::temp_directory_path() /
         ("depthgrad_fashion_cnn_" + std::to_string(std::random_device{}()) + ".safetensors"))
            .string();
    const int64_t half = settings.steps / 2;
    run.trainer->run(half, on_step);
    run.trainer->save_checkpoint(path);
    run.trainer->run(settings.steps, on_step);
    Run fresh =
        make_run(train, settings, o.seed + 7, o);  // other weights, until the checkpoint is loaded
    fresh.trainer->load_checkpoint(path);
    std::filesystem::remove(path);
    fresh.trainer->run();
    resumed_same =
        fresh.trainer->losses() == run.trainer->losses() && same_state(*fresh.net, *run.net);
    std::printf(
        "resumed from step %lld: the same losses, weights and batch-norm buffers bit for "
        "bit: %s\n",
        static_cast<long long>(half), resumed_same ? "yes" : "NO");
  } else {
    run.trainer->run(settings.steps, on_step);
  }
  if (!(last_accuracy >= o.min_accuracy) || !resumed_same) {
    std::printf("FAILED (test accuracy %.4f, required %.2f)\n", last_accuracy, o.min_accuracy);
    return 1;
  }
  std::printf("example passed: test accuracy %.4f >= %.2f\n", last_accuracy, o.min_accuracy);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_example(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_cnn: %s\n", e.what());
    return 2;
  }
}
