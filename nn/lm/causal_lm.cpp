// The checks every CausalLM call gets, and the recomputing CausalLM over a full forward (see
// causal_lm.h).
#include "nn/lm/causal_lm.h"

#include <fmt/format.h>

#include <stdexcept>

#include "autograd/tape.h"

namespace dg {

const Tensor& CausalLM::forward_tokens(std::span<const int32_t> new_tokens) {
  const int64_t n = static_cast<int64_t>(new_tokens.size()), vocab = vocab_size();
  if (n == 0) throw std::invalid_argument("CausalLM::forward_tokens: no token ids");
  if (cached_length() + n > context_length())
    throw std::invalid_argument(fmt::format(
        "CausalLM::forward_tokens: {} cached + {} new positions exceed the context of {}",
        cached_length(), n, context_length()));
  for (int32_t id : new_tokens)
    if (id < 0 || id >= vocab)
      throw std::invalid_argument(fmt::format(
          "CausalLM::forward_tokens: token id {} is outside the vocabulary [0, {})", id, vocab));
  const Tensor& logits = forward_new(new_tokens);
  if (!logits.defined() || logits.dim() != 1 || logits.size(0) != vocab ||
      !is_floating(logits.dtype()))
    throw std::logic_error(
        fmt::format("CausalLM::forward_tokens: the model returned {}, not float logits [{}]",
                    logits.describe(), vocab));
  return logits;
}

RecomputingCausalLM::RecomputingCausalLM(Forward forward, int64_t vocab, int64_t context_length)
    : forward_(std::move(forward)), vocab_(vocab), context_(context_length) {
  if (!forward_) throw std::invalid_argument("RecomputingCausalLM: no forward function");
  if (vocab < 1 || context_length < 1)
    throw std::invalid_argument(
        fmt::format("RecomputingCausalLM: vocab ({}) and context_length ({}) must be >= 1", vocab,
                    context_length));
  ids_.reserve(static_cast<size_t>(context_length));
}

const Tensor& RecomputingCausalLM::forward_new(std::span<const int32_t> new_tokens) {
  std::vector<int32_t> ids = ids_;
  ids.insert(ids.end(), new_tokens.begin(), new_tokens.end());
  const int64_t T = static_cast<int64_t>(ids.size());
  NoGradGuard no_grad;
  const Tensor all = forward_(Tensor::from_ids(ids, {1, T}));
  if (!all.defined() || all.shape() != Shape{1, T, vocab_})
    throw std::logic_error(fmt::format(
        "RecomputingCausalLM: the forward of ids [1, {}] returned {}, not logits [1, {}, {}]", T,
        all.describe(), T, vocab_));
  last_ = raw::view_reshape(raw::view_narrow(all, 1, T - 1, 1).contiguous(), {vocab_});
  ids_ = std::move(ids);
  return last_;
}

}  // namespace dg
