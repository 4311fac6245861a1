// The tiny training run chapters 9 and 10 grade with: a float32 MicroLM of a given configuration,
// 60 AdamW steps (lr 1e-2, no weight decay) on windows of a repeated sentence, "the cat sat on
// the mat. ", over a 28-token alphabet (space, full stop, a to z). A model whose blocks are right
// falls from about ln(28) = 3.3 to well below 0.6; the checks state their own bound. It does not
// judge the losses itself.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "nn/lm/micro_lm.h"
#include "train/optim.h"

namespace dg::learn {

struct SentenceLosses {
  double first = 0, last = 0;  // the loss of the first and of the last step
};

inline SentenceLosses train_on_sentence(const MicroLMConfig& config) {
  const std::string text = "the cat sat on the mat. ";
  std::vector<int64_t> stream;
  for (int r = 0; r < 8; ++r)
    for (char ch : text) stream.push_back(ch == ' ' ? 0 : ch == '.' ? 1 : ch - 'a' + 2);
  MicroLM model(config, DType::f32);
  model.init_identical(3);
  AdamW optimizer(model, AdamWConfig{.lr = 1e-2, .weight_decay = 0.0});
  const int64_t B = 4, T = 16;
  SentenceLosses losses;
  for (int step = 0; step < 60; ++step) {
    std::vector<int64_t> ids, targets;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t start = (step * 7 + b * 11) % (static_cast<int64_t>(stream.size()) - T - 1);
      for (int64_t t = 0; t < T; ++t) {
        ids.push_back(stream[start + t]);
        targets.push_back(stream[start + t + 1]);
      }
    }
    model.zero_grad();
    const Tensor loss =
        model.loss(Tensor::from_ids(ids, {B, T}), Tensor::from_ids(targets, {B, T}));
    backward(loss);
    optimizer.step();
    (step == 0 ? losses.first : losses.last) = loss.item();
  }
  return losses;
}

}  // namespace dg::learn
