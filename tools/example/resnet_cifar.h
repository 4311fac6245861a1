// A ResNet-18 for 32x32 images (CIFAR-style), written as a user writes one with depthgrad's
// layers, as torchvision's resnet18 with the stem of the CIFAR papers: a 3x3 convolution (stride
// 1, no max-pool), then four stages of two BasicBlocks each at 64, 128, 256 and 512 channels (the
// last three halve the image in their first block), global average pooling and a linear head.
// Convolutions carry no bias (batch norm follows each); a block whose input and output shapes
// differ takes its shortcut through a 1x1 convolution with stride and a batch norm. tools/
// bench_families.cpp times its training step; tools/torch_bench_families.py builds the same
// network in torch (11,173,962 parameters for 10 classes in both).
#pragma once
#include <depthgrad/depthgrad.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace resnet_cifar {

// relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)): [N, in, H, W] -> [N, out, H/s, W/s].
class BasicBlock : public dg::Module {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride)
      : conv1(register_module("conv1", conv3x3(in, out, stride))),
        bn1(register_module("bn1", std::make_unique<dg::BatchNorm2d>(out))),
        conv2(register_module("conv2", conv3x3(out, out, 1))),
        bn2(register_module("bn2", std::make_unique<dg::BatchNorm2d>(out))) {
    if (stride == 1 && in == out) return;  // the identity shortcut
    auto down = std::make_unique<dg::Sequential>();
    down->emplace<dg::Conv2d>(in, out, 1, stride, 0, 1, 1, /*with_bias=*/false);
    down->emplace<dg::BatchNorm2d>(out);
    downsample = &register_module("downsample", std::move(down));
  }
  dg::Tensor forward(const dg::Tensor& x) const override {
    const dg::Tensor h = dg::relu(bn1(conv1(x)));
    const dg::Tensor shortcut = downsample ? (*downsample)(x) : x;
    return dg::relu(dg::add(bn2(conv2(h)), shortcut));
  }
  static std::unique_ptr<dg::Conv2d> conv3x3(int64_t in, int64_t out, int64_t stride) {
    return std::make_unique<dg::Conv2d>(in, out, 3, stride, 1, 1, 1, /*with_bias=*/false);
  }
  dg::Conv2d& conv1;
  dg::BatchNorm2d& bn1;
  dg::Conv2d& conv2;
  dg::BatchNorm2d& bn2;
  dg::Sequential* downsample = nullptr;  // null: the identity
};

// [N, 3, 32, 32] -> [N, classes] logits.
class ResNet18 : public dg::Module {
 public:
  explicit ResNet18(int64_t classes = 10)
      : conv1(register_module("conv1", BasicBlock::conv3x3(3, 64, 1))),
        bn1(register_module("bn1", std::make_unique<dg::BatchNorm2d>(64))) {
    int64_t in = 64;
    for (int64_t stage = 0; stage < 4; ++stage) {
      const int64_t out = 64 << stage;
      auto& layer =
          register_module("layer" + std::to_string(stage + 1), std::make_unique<dg::Sequential>());
      layer.emplace<BasicBlock>(in, out, stage == 0 ? 1 : 2);
      layer.emplace<BasicBlock>(out, out, 1);
      layers.push_back(&layer);
      in = out;
    }
    pool = &register_module("avgpool", std::make_unique<dg::AdaptiveAvgPool2d>(1));
    fc = &register_module("fc", std::make_unique<dg::Linear>(512, classes));
  }
  dg::Tensor forward(const dg::Tensor& x) const override {
    dg::Tensor h = dg::relu(bn1(conv1(x)));
    for (const dg::Sequential* layer : layers) h = (*layer)(h);
    return (*fc)(dg::flatten((*pool)(h), 1));
  }
  dg::Conv2d& conv1;
  dg::BatchNorm2d& bn1;
  std::vector<dg::Sequential*> layers;  // layer1..layer4
  dg::AdaptiveAvgPool2d* pool = nullptr;
  dg::Linear* fc = nullptr;
};

}  // namespace resnet_cifar
