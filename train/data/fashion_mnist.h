// Fashion-MNIST (Zalando's 28x28 grey images of clothes, 10 classes; 60,000 training and 10,000
// test examples) from its four IDX files, as tensors ready for a TensorDataset.
// The files are looked for in the folder given, else in $DEPTHGRAD_FASHION_MNIST, else where
// Debian's package dataset-fashion-mnist puts them (/usr/share/datasets/fashion-mnist); each may
// be gzip'd (as shipped) or raw. Their contents (decompressed) are checked against the SHA-256
// of the published data set, so a truncated or different file is refused naming it; a missing
// file is refused with how to install the package. Does not download or normalise (images are
// in [0, 1]; subtract and divide in the model or over the tensor). For augmentation, FashionMNIST
// below is torchvision's dataset: uint8 images through a transform, one example at a time.
#pragma once
#include <array>
#include <string>

#include "tensor/tensor.h"
#include "train/data/example.h"
#include "train/data/transform.h"

namespace dg {

struct FashionMnistSplit {
  Tensor images;  // float32 [N, 1, 28, 28], pixel / 255
  Tensor labels;  // int64 [N], in [0, 10)
  Tensor pixels;  // uint8 [N, 1, 28, 28], the file's bytes (torchvision's .data)
};

struct FashionMnist {
  FashionMnistSplit train;  // 60,000 examples
  FashionMnistSplit test;   // 10,000 examples
  std::string directory;    // where the files were read
  // The classes in label order: "T-shirt/top", "Trouser", ..., "Ankle boot".
  static const std::array<const char*, 10>& class_names();
};

// The folder searched when none is given: $DEPTHGRAD_FASHION_MNIST when set, else Debian's.
std::string fashion_mnist_default_directory();
// Reads, checks and converts both splits. Throws std::runtime_error naming the file.
FashionMnist load_fashion_mnist(const std::string& directory = "");

// torchvision.datasets.FashionMNIST over a loaded split: example i is {transform(pixels[i]),
// labels[i]}, the image uint8 [1, 28, 28] before the transform (torchvision's is a PIL image: its
// ToTensor gives the [1, 28, 28] float32 that dg::transforms::ToTensor gives from this tensor).
// The first `count` examples (-1: all). The split is copied by reference (tensors share storage).
//   dg::FashionMNIST train(data.train, T::Compose({T::RandomCrop(28, {.padding = 2}),
//                                                   T::RandomHorizontalFlip(), T::ToTensor()}));
class FashionMNIST final : public MapDataset {
 public:
  explicit FashionMNIST(const FashionMnistSplit& split, transforms::Transform transform = {},
                        int64_t count = -1);
  int64_t size() const override { return count_; }
  Example get(int64_t index, ExampleRng& rng) const override;

 private:
  Tensor pixels_, labels_;
  transforms::Transform transform_;
  int64_t count_;
};

}  // namespace dg
