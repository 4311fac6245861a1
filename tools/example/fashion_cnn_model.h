// The networks of fashion_cnn.cpp, in a header of their own so that tools/bench_families.cpp
// times the very model the example trains (make_model; make_wide_model is --model wide).
// torch.nn.Sequential(Conv2d(1, 32, 3, padding=1), BatchNorm2d(32), ReLU(), MaxPool2d(2),
//   Conv2d(32, 64, 3, padding=1), BatchNorm2d(64), ReLU(), MaxPool2d(2), Flatten(), Dropout(0.25),
//   Linear(3136, 128), ReLU(), Dropout(0.25), Linear(128, 10)): [N, 1, 28, 28] -> [N, 10].
#pragma once
#include <depthgrad/depthgrad.h>

#include <memory>

namespace fashion_cnn {

inline std::unique_ptr<dg::Sequential> make_model() {
  auto net = std::make_unique<dg::Sequential>();
  net->emplace<dg::Conv2d>(1, 32, 3, /*stride=*/1, /*padding=*/1);
  net->emplace<dg::BatchNorm2d>(32);
  net->add(dg::relu);
  net->emplace<dg::MaxPool2d>(2);
  net->emplace<dg::Conv2d>(32, 64, 3, 1, 1);
  net->emplace<dg::BatchNorm2d>(64);
  net->add(dg::relu);
  net->emplace<dg::MaxPool2d>(2);
  net->emplace<dg::Flatten>();
  net->emplace<dg::Dropout>(0.25);
  net->emplace<dg::Linear>(64 * 7 * 7, 128);
  net->add(dg::relu);
  net->emplace<dg::Dropout>(0.25);
  net->emplace<dg::Linear>(128, 10);
  return net;
}

// Two conv layers per stage (a small VGG), what augmentation needs to reach 93%:
// torch.nn.Sequential(Conv2d(1, 32, 3, padding=1), BatchNorm2d(32), ReLU(),
//   Conv2d(32, 32, 3, padding=1), BatchNorm2d(32), ReLU(), MaxPool2d(2),
//   Conv2d(32, 64, 3, padding=1), BatchNorm2d(64), ReLU(),
//   Conv2d(64, 64, 3, padding=1), BatchNorm2d(64), ReLU(), MaxPool2d(2), Flatten(), Dropout(0.25),
//   Linear(3136, 256), ReLU(), Dropout(0.25), Linear(256, 10)).
inline std::unique_ptr<dg::Sequential> make_wide_model() {
  auto net = std::make_unique<dg::Sequential>();
  for (int64_t channels : {32, 64}) {
    net->emplace<dg::Conv2d>(channels == 32 ? 1 : 32, channels, 3, 1, 1);
    net->emplace<dg::BatchNorm2d>(channels);
    net->add(dg::relu);
    net->emplace<dg::Conv2d>(channels, channels, 3, 1, 1);
    net->emplace<dg::BatchNorm2d>(channels);
    net->add(dg::relu);
    net->emplace<dg::MaxPool2d>(2);
  }
  net->emplace<dg::Flatten>();
  net->emplace<dg::Dropout>(0.25);
  net->emplace<dg::Linear>(64 * 7 * 7, 256);
  net->add(dg::relu);
  net->emplace<dg::Dropout>(0.25);
  net->emplace<dg::Linear>(256, 10);
  return net;
}

}  // namespace fashion_cnn
