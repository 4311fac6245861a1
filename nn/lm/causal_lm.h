// CausalLM: what generation needs from a language model, and nothing more. A model that reads
// token ids left to right keeps its own cache of the positions it has read and returns the logits
// of the next id; the generation loop (train/lm/generate.h) samples from them and decides when the
// window moves. Two implementations are in nn/: the MicroLM's K/V-cached Decoder (nn/lm/decode.h)
// and RecomputingCausalLM below, which turns any full forward into a CausalLM. Inference only:
// no gradients, one sequence at a time, no sampling and no tokenizer here.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "tensor/tensor.h"

namespace dg {

// The contract an implementation keeps (tests/test_generate.cpp checks both of depthgrad's):
//  - forward_tokens(ids) reads ids at positions cached_length() .. cached_length() + n − 1, adds
//    them to the cache and returns the logits of the last of them, [vocab_size()] float32 or
//    float64: the model's full forward over every cached id followed by ids, at its last
//    position, to within float rounding. (So a cache may be a recomputation: nothing may depend
//    on how the ids were split into calls, except through rounding.)
//  - cached_length() counts the positions read since construction or the last reset(), and
//    never exceeds context_length(), the positions the model can attend over (fixed, >= 1).
//  - reset() forgets every cached position; the next forward_tokens starts at position 0.
//  - the returned tensor may be a view of a buffer the next forward_tokens or reset overwrites.
//  - no autograd graph is left behind (run the forward under NoGradGuard, or on raw buffers).
// forward_tokens checks its arguments before calling forward_new, so an implementation sees only
// non-empty ids in [0, vocab) that fit in the context; it checks the result's shape after.
class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t context_length() const = 0;  // positions the cache holds
  virtual int64_t cached_length() const = 0;   // positions in the cache now
  virtual void reset() = 0;                    // forget them

  // new_tokens -> logits [vocab] of the last new position (the contract above). Throws
  // std::invalid_argument naming the problem when new_tokens is empty, an id is outside
  // [0, vocab) or cached_length() + n > context_length(), and std::logic_error when the
  // implementation returns another shape than [vocab] or a non-float tensor.
  const Tensor& forward_tokens(std::span<const int32_t> new_tokens);

 protected:
  // The implementation's forward: the arguments are already checked.
  virtual const Tensor& forward_new(std::span<const int32_t> new_tokens) = 0;
};

// The slow path that is always right: any model with a full forward, ids int32 [1, T] ->
// logits [1, T, vocab] (MicroLM::forward, a Sequential, a user's Module), as a CausalLM. The
// "cache" is the list of ids; each forward_tokens runs the forward over all of them, under
// NoGradGuard, and keeps the last row. T-fold the work of a K/V cache, so a generation of n ids
// in a context of C costs O(n·C) forwards' worth of positions; use it for models without their
// own incremental forward, and as the reference a cached implementation is checked against.
class RecomputingCausalLM : public CausalLM {
 public:
  using Forward = std::function<Tensor(const Tensor& ids)>;  // [1, T] int32 -> [1, T, vocab]
  // Throws std::invalid_argument when vocab or context_length is < 1 or forward is empty.
  RecomputingCausalLM(Forward forward, int64_t vocab, int64_t context_length);

  int64_t vocab_size() const override { return vocab_; }
  int64_t context_length() const override { return context_; }
  int64_t cached_length() const override { return static_cast<int64_t>(ids_.size()); }
  void reset() override { ids_.clear(); }

 protected:
  // Throws std::logic_error when the forward's result is not [1, T, vocab]; the ids are then
  // not added to the cache.
  const Tensor& forward_new(std::span<const int32_t> new_tokens) override;

 private:
  Forward forward_;
  int64_t vocab_, context_;
  std::vector<int32_t> ids_;
  Tensor last_;  // the logits forward_new returns
};

}  // namespace dg
