// A Transform: one step of preparing an example's tensor (decode's output to the model's input),
// torchvision's transforms.* as values. It is a function of the tensor and of the example's
// random draws (ExampleRng, see example.h), so a random crop is the same for the same example in
// the same epoch whichever loader worker makes it. The everyday ones (ToTensor, Normalize, Resize,
// the crops, flips, ColorJitter, RandomErasing, Compose) are in train/data/transforms.h.
//   dg::transforms::Transform halve("Halve()", [](const dg::Tensor& x, dg::ExampleRng&) {
//     return dg::scale(x, 0.5);
//   });
#pragma once
#include <functional>
#include <string>

#include "tensor/tensor.h"
#include "train/data/example.h"

namespace dg::transforms {

class Transform {
 public:
  using Function = std::function<Tensor(const Tensor&, ExampleRng&)>;
  Transform() = default;  // no transform: operator() gives its input
  Transform(std::string name, Function function)
      : name_(std::move(name)), function_(std::move(function)) {}
  // Applies it. Runs on loader worker threads, several at once: the function must only read
  // what it captured. Must not record on the tape (the loaders run it without grad).
  Tensor operator()(const Tensor& x, ExampleRng& rng) const {
    return function_ ? function_(x, rng) : x;
  }
  // torchvision's repr, e.g. "RandomCrop(size=(28, 28), padding=4)": for messages and logs.
  const std::string& name() const { return name_; }
  bool empty() const { return !function_; }

 private:
  std::string name_ = "Identity()";
  Function function_;
};

}  // namespace dg::transforms
