// Fashion-MNIST's four IDX files, found, hashed and converted. See fashion_mnist.h.
#include "train/data/fashion_mnist.h"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "train/io/files.h"
#include "train/io/idx.h"
#include "train/io/sha256.h"

namespace dg {

namespace {
struct ExpectedFile {
  const char* name;
  const char* sha256;  // of the decompressed IDX file, as published by Zalando Research
  int64_t examples;
};
constexpr ExpectedFile kTrainImages{
    "train-images-idx3-ubyte", "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    60000};
constexpr ExpectedFile kTrainLabels{
    "train-labels-idx1-ubyte", "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    60000};
constexpr ExpectedFile kTestImages{
    "t10k-images-idx3-ubyte", "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    10000};
constexpr ExpectedFile kTestLabels{
    "t10k-labels-idx1-ubyte", "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    10000};

// How to get the files, said by every refusal of a missing folder or file.
constexpr const char* kInstallHint =
    "Install Debian's data set with `apt-get install dataset-fashion-mnist` (tools/install-deps.sh "
    "does), or give the folder that holds train-images-idx3-ubyte, train-labels-idx1-ubyte, "
    "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (gzip'd or raw), or set "
    "DEPTHGRAD_FASHION_MNIST to it";

IdxFile read_checked(const std::string& directory, const ExpectedFile& expected) {
  std::string path = directory + "/" + expected.name + ".gz";
  if (!file_exists(path)) path = directory + "/" + expected.name;
  if (!file_exists(path))
    throw std::runtime_error(fmt::format("Fashion-MNIST: {}/{}(.gz) is missing. {}", directory,
                                         expected.name, kInstallHint));
  std::string bytes = gunzip_if_compressed(read_file(path), path);
  const std::string digest = sha256_hex(bytes);
  if (digest != expected.sha256)
    throw std::runtime_error(
        fmt::format("Fashion-MNIST: {} is not the published file (SHA-256 of its contents {}, "
                    "expected {}): a truncated download or another data set",
                    path, digest, expected.sha256));
  IdxFile file = parse_idx(std::move(bytes), path);
  if (file.shape.at(0) != expected.examples)
    throw std::runtime_error(fmt::format("Fashion-MNIST: {} holds {} examples, expected {}", path,
                                         file.shape.at(0), expected.examples));
  return file;
}

FashionMnistSplit read_split(const std::string& directory, const ExpectedFile& images,
                             const ExpectedFile& labels) {
  FashionMnistSplit split;
  const IdxFile image_file = read_checked(directory, images);
  split.images =
      raw::view_reshape(idx_bytes_to_unit_float(image_file), {images.examples, 1, 28, 28});
  split.pixels = Tensor::from_data(
      reinterpret_cast<const uint8_t*>(image_file.bytes.data() + image_file.header_bytes),
      {images.examples, 1, 28, 28});
  split.labels = idx_to_int64(read_checked(directory, labels));
  return split;
}
}  // namespace

const std::array<const char*, 10>& FashionMnist::class_names() {
  static const std::array<const char*, 10> names = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

std::string fashion_mnist_default_directory() {
  const char* env = std::getenv("DEPTHGRAD_FASHION_MNIST");
  if (env && *env) return env;
  return "/usr/share/datasets/fashion-mnist";
}

FashionMnist load_fashion_mnist(const std::string& directory) {
  FashionMnist data;
  data.directory = directory.empty() ? fashion_mnist_default_directory() : directory;
  if (!dir_exists(data.directory))
    throw std::runtime_error(
        fmt::format("Fashion-MNIST: folder {} does not exist. {}", data.directory, kInstallHint));
  data.train = read_split(data.directory, kTrainImages, kTrainLabels);
  data.test = read_split(data.directory, kTestImages, kTestLabels);
  return data;
}

FashionMNIST::FashionMNIST(const FashionMnistSplit& split, transforms::Transform transform,
                           int64_t count)
    : pixels_(split.pixels), labels_(split.labels), transform_(std::move(transform)) {
  if (!pixels_.defined() || pixels_.dtype() != DType::u8 || pixels_.dim() != 4 ||
      !labels_.defined() || labels_.dim() != 1 || labels_.size(0) != pixels_.size(0))
    throw std::invalid_argument(
        "FashionMNIST: the split needs uint8 pixels [N, 1, 28, 28] and int64 labels [N] (a split "
        "from load_fashion_mnist)");
  const int64_t n = pixels_.size(0);
  if (count < -1 || count > n)
    throw std::invalid_argument(
        fmt::format("FashionMNIST: count {} is outside [0, {}] (or -1 for all)", count, n));
  count_ = count < 0 ? n : count;
}

Example FashionMNIST::get(int64_t index, ExampleRng& rng) const {
  const Tensor image = raw::view_reshape(raw::view_narrow(pixels_, 0, index, 1), {1, 28, 28});
  const Tensor label = raw::view_reshape(raw::view_narrow(labels_, 0, index, 1), {});
  return {transform_(image, rng), label};
}

}  // namespace dg
