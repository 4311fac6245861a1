// Training on a folder of image files: Fashion-MNIST written out as PNGs, one folder per class,
// then read back by dg::ImageFolder (real PNG decoding, as torchvision's ImageFolder) to train the
// CNN of fashion_cnn_model.h and report its accuracy on the test folder.
//   image_folder --write-fashion-mnist DIR [--count N] [--data FASHION_DIR]
//       writes DIR/train/<class>/<n>.png and DIR/test/<class>/<n>.png (the first N examples of
//       each split; all of them without --count) from Debian's dataset-fashion-mnist
//   image_folder --train DIR [--epochs 1] [--batch 32] [--lr 0.002] [--seed 0] [--threads T]
//                [--workers W] [--min-accuracy 0]
//       trains on ImageFolder(DIR/train) in gray mode (ToTensor, then Normalize by Fashion-MNIST's
//       mean and std) with Adam over shuffled epochs (dg::DataLoader; W loader threads decode
//       ahead, the same bits at any W), and prints each epoch's loss, time and accuracy on
//       ImageFolder(DIR/test)
// Both flags in one call write, then train. Exits non-zero when the accuracy is below
// --min-accuracy. Class folders are named after Fashion-MNIST's classes ("T-shirt/top" becomes
// "T-shirt_top"); ImageFolder numbers them in sorted order, so the labels it gives are not
// Fashion-MNIST's numbers, but train and test agree (checked).
#include <depthgrad/depthgrad.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "fashion_cnn_model.h"

namespace {

struct Options {
  std::string write_dir, train_dir, data;
  int64_t count = 0;  // 0: every example
  int64_t epochs = 1, batch = 32;
  double lr = 2e-3, min_accuracy = 0;
  uint64_t seed = 0;
  int threads = 0;
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
    if (flag == "--write-fashion-mnist")
      o.write_dir = value();
    else if (flag == "--train")
      o.train_dir = value();
    else if (flag == "--data")
      o.data = value();
    else if (flag == "--count")
      o.count = std::stoll(value());
    else if (flag == "--epochs")
      o.epochs = std::stoll(value());
    else if (flag == "--batch")
      o.batch = std::stoll(value());
    else if (flag == "--lr")
      o.lr = std::stod(value());
    else if (flag == "--seed")
      o.seed = std::stoull(value());
    else if (flag == "--threads")
      o.threads = std::stoi(value());
    else if (flag == "--workers")
      o.workers = std::stoll(value());
    else if (flag == "--min-accuracy")
      o.min_accuracy = std::stod(value());
    else
      throw std::invalid_argument("unknown flag " + flag + " (see the comment at the top)");
  }
  if (o.write_dir.empty() && o.train_dir.empty())
    throw std::invalid_argument("give --write-fashion-mnist DIR, --train DIR or both");
  if (o.count < 0 || o.epochs < 1 || o.batch < 1 || !(o.lr > 0) || o.workers < 0)
    throw std::invalid_argument(
        "--count >= 0, --epochs >= 1, --batch >= 1, --lr > 0, --workers >= 0");
  return o;
}

std::string folder_name(std::string class_name) {
  for (char& c : class_name)
    if (c == '/') c = '_';
  return class_name;
}

// One split as DIR/<split>/<class>/<n>.png: each image's uint8 [1, 28, 28], the file's bytes.
void write_split(const dg::FashionMnistSplit& split, int64_t count, const std::string& folder) {
  const int64_t n = count > 0 ? std::min(count, split.pixels.size(0)) : split.pixels.size(0);
  const std::vector<double> labels = split.labels.narrow(0, 0, n).to_vector();
  const auto& names = dg::FashionMnist::class_names();
  for (const char* name : names)
    std::filesystem::create_directories(folder + "/" + folder_name(name));
  for (int64_t i = 0; i < n; ++i) {
    const std::string class_folder = folder_name(names[static_cast<size_t>(labels[size_t(i)])]);
    dg::write_png(folder + "/" + class_folder + "/" + std::to_string(i) + ".png",
                  split.pixels.narrow(0, i, 1).squeeze(0));
  }
  std::printf("wrote %lld PNG files under %s\n", static_cast<long long>(n), folder.c_str());
}

double accuracy(dg::Sequential& net, const dg::ImageFolder& test) {
  dg::NoGradGuard no_grad;
  net.eval();
  double correct = 0;
  dg::for_each_batch(test, 500, [&](const dg::Batch& batch) {
    correct += dg::sum(dg::eq(dg::argmax(net(batch[0]), 1), batch[1])).item();
  });
  net.train();
  return correct / static_cast<double>(test.size());
}

int train(const Options& o) {
  // Fashion-MNIST's training mean and std of pixel / 255 (torchvision examples' 0.2860, 0.3530).
  namespace T = dg::transforms;
  const T::Transform transform = T::Compose({T::ToTensor(), T::Normalize({0.2860}, {0.3530})});
  const dg::ImageFolderOptions folder_options{.mode = dg::ImageReadMode::gray,
                                              .transform = transform};
  const dg::ImageFolder train_data(o.train_dir + "/train", folder_options);
  const dg::ImageFolder test_data(o.train_dir + "/test", folder_options);
  if (train_data.classes() != test_data.classes())
    throw std::runtime_error(
        "the train and test folders have different classes (every class "
        "needs a folder in both: write more examples with --count)");
  std::printf(
      "ImageFolder %s/train: %lld images of %zu classes; test: %lld images; %d threads, "
      "%lld loader workers\n",
      o.train_dir.c_str(), static_cast<long long>(train_data.size()), train_data.classes().size(),
      static_cast<long long>(test_data.size()), dg::threads(), static_cast<long long>(o.workers));
  dg::manual_seed(o.seed);
  auto net = fashion_cnn::make_model();
  dg::Adam optimizer(*net, dg::AdamConfig{.lr = o.lr});
  const dg::TorchGenerator shuffle(o.seed + 1);
  dg::DataLoader loader(
      train_data,
      {.batch_size = o.batch, .shuffle = true, .generator = &shuffle, .num_workers = o.workers});
  double last_accuracy = 0;
  for (int64_t epoch = 1; epoch <= o.epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    for (const dg::Batch& batch : loader) {
      optimizer.zero_grad();
      const dg::Tensor loss = dg::cross_entropy((*net)(batch[0]), batch[1]);
      dg::backward(loss);
      optimizer.step();
      loss_sum += loss.item();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    last_accuracy = accuracy(*net, test_data);
    std::printf(
        "epoch %lld: %.1f s (%lld batches, decoding included), train loss %.4f, test "
        "accuracy %.4f\n",
        static_cast<long long>(epoch), seconds, static_cast<long long>(loader.size()),
        loss_sum / static_cast<double>(loader.size()), last_accuracy);
    std::fflush(stdout);
  }
  if (!(last_accuracy >= o.min_accuracy)) {
    std::printf("FAILED: test accuracy %.4f < %.2f\n", last_accuracy, o.min_accuracy);
    return 1;
  }
  return 0;
}

int run(const Options& o) {
  if (o.threads > 0) dg::set_threads(o.threads);
  if (!o.write_dir.empty()) {
    const dg::FashionMnist data = dg::load_fashion_mnist(o.data);
    write_split(data.train, o.count, o.write_dir + "/train");
    write_split(data.test, o.count, o.write_dir + "/test");
  }
  return o.train_dir.empty() ? 0 : train(o);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "image_folder: %s\n", e.what());
    return 2;
  }
}
