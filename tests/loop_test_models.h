// The small network the loop tests train (test_loop_models.cpp, test_trainer_optimizers.cpp):
// 3 → 16 → 16 → 2 with tanh, and dropout when asked, the same weights for the same seed.
// Test-only; nothing here is part of the library.
#pragma once
#include <cstdint>
#include <memory>

#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "tensor/factory.h"

namespace dg::loop_test {

// Built from `seed` without touching the default generator's state.
inline std::shared_ptr<Sequential> make_mlp(uint64_t seed, double dropout) {
  TorchGenerator saved = default_generator();
  manual_seed(seed);
  auto net = std::make_shared<Sequential>();
  net->add(std::make_unique<Linear>(3, 16));
  net->add(dg::tanh);
  if (dropout > 0) net->add(std::make_unique<Dropout>(dropout));
  net->add(std::make_unique<Linear>(16, 16));
  net->add(dg::tanh);
  net->add(std::make_unique<Linear>(16, 2));
  default_generator() = saved;
  return net;
}

}  // namespace dg::loop_test
