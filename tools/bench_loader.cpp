// bench_loader: images per second of a DataLoader alone (decode, transform, collate; no model) over
// an ImageFolder, at 0, 1 and 2 loader workers; tools/torch_bench_loader.py times torch's
// DataLoader over torchvision's ImageFolder with the same transforms and flags. The folder:
// `example_image_folder --write-fashion-mnist DIR` writes Fashion-MNIST as PNG files.
// Transforms: ToTensor and Normalize(0.5, 0.5), after RandomCrop(28, padding=2) and
// RandomHorizontalFlip with --augment. Each worker count runs --batches batches (default: one
// epoch) after one batch of warm-up, in grey (--mode gray, default) or rgb.
//   bench_loader --folder DIR/train [--workers 0,1,2] [--batch 64] [--batches N] [--augment]
//                [--mode gray|rgb] [--threads T]
#include <fmt/core.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/threads.h"
#include "train/data/image_folder.h"
#include "train/data/transforms.h"
#include "train/dataset.h"

using namespace dg;

namespace {
struct Options {
  std::string folder;
  std::vector<int64_t> workers = {0, 1, 2};
  int64_t batch = 64, batches = 0;
  bool augment = false;
  ImageReadMode mode = ImageReadMode::gray;
  int threads = 0;
};

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) out.push_back(std::stoll(part));
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--folder")
      o.folder = value();
    else if (flag == "--workers")
      o.workers = parse_list(value());
    else if (flag == "--batch")
      o.batch = std::stoll(value());
    else if (flag == "--batches")
      o.batches = std::stoll(value());
    else if (flag == "--augment")
      o.augment = true;
    else if (flag == "--mode") {
      const std::string mode = value();
      if (mode != "gray" && mode != "rgb")
        throw std::invalid_argument("--mode: gray or rgb, got '" + mode + "'");
      o.mode = mode == "gray" ? ImageReadMode::gray : ImageReadMode::rgb;
    } else if (flag == "--threads")
      o.threads = std::stoi(value());
    else
      throw std::invalid_argument("unknown flag " + flag);
  }
  if (o.folder.empty()) throw std::invalid_argument("--folder DIR is required");
  return o;
}

transforms::Transform pipeline(const Options& o) {
  namespace T = transforms;
  const std::vector<double> half(o.mode == ImageReadMode::gray ? 1 : 3, 0.5);
  if (!o.augment) return T::Compose({T::ToTensor(), T::Normalize(half, half)});
  return T::Compose({T::RandomCrop(28, {.padding = 2}), T::RandomHorizontalFlip(), T::ToTensor(),
                     T::Normalize(half, half)});
}
}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (o.threads > 0) set_threads(o.threads);
    const ImageFolder data(o.folder, {.mode = o.mode, .transform = pipeline(o)});
    fmt::print("{} images in {} classes, batch {}, {}, {} threads\n", data.size(),
               data.classes().size(), o.batch, o.augment ? "augmented" : "not augmented",
               threads());
    fmt::print("{:>8} {:>10} {:>12}\n", "workers", "batches", "images/s");
    for (int64_t workers : o.workers) {
      TorchGenerator g(0);
      DataLoader loader(data, {.batch_size = o.batch,
                               .shuffle = true,
                               .drop_last = true,
                               .generator = &g,
                               .num_workers = workers});
      const int64_t batches =
          o.batches > 0 ? std::min(o.batches, loader.size() - 1) : loader.size() - 1;
      Batch batch;
      loader.next(batch);  // warm-up: the workers start
      const auto start = std::chrono::steady_clock::now();
      for (int64_t k = 0; k < batches; ++k) loader.next(batch);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      fmt::print("{:>8} {:>10} {:>12.0f}\n", workers, batches,
                 static_cast<double>(batches * o.batch) / seconds);
    }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_loader: {}\n", e.what());
    return 2;
  }
}
