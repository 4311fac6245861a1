// Text generation from any causal language model (nn/lm/causal_lm.h: the MicroLM's K/V-cached
// Decoder, a RecomputingCausalLM over any full forward, or a user's own): sampling (temperature,
// top-k, top-p) with a seeded RNG, the generation loop with a sliding context window, UTF-8-safe
// streaming of decoded text, a short sample for training logs, and a timing of decode steps for
// a generation benchmark. Not here: a model's incremental forward (nn/lm/decode.h,
// nn/lm/causal_lm.h), finding checkpoints and tokenizer files (train/lm/trained_model.h), printing
// (tools/cli/cmd_generate.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nn/lm/causal_lm.h"
#include "nn/lm/decode.h"
#include "tensor/rng.h"
#include "train/lm/text/bpe.h"

namespace dg {

struct SamplingOptions {
  double temperature = 1.0;  // logits / temperature before the softmax; 0 = greedy (argmax)
  int64_t top_k = 0;         // keep only the k most likely ids (0 = all; 1 = greedy)
  double top_p = 1.0;  // keep the fewest most likely ids whose probability reaches p, in (0, 1]
  uint64_t seed = 0;   // same seed, same options, same model: same ids
  // Throws std::invalid_argument naming the field: temperature < 0 or not finite, top_k < 0,
  // top_p outside (0, 1].
  void validate() const;
};

// Draws one id per call from logits [vocab] (float32 or float64). Ties are broken towards the
// lower id (argmax and ordering), and the draw walks the kept ids in a fixed order, so results
// depend only on the logits and the seed. Buffers are reused between calls.
class TokenSampler {
 public:
  explicit TokenSampler(const SamplingOptions& options);  // validates
  // Throws std::runtime_error when a logit is NaN or infinite (a diverged model).
  int32_t sample(const Tensor& logits);

 private:
  SamplingOptions options_;
  NumpyGenerator rng_;
  std::vector<double> values_;  // logits, then unnormalised probabilities
  std::vector<int32_t> order_;  // candidate ids, most likely first when filtered
};

struct GenerationOptions {
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;
  int32_t stop_token = -1;  // stop once this id has been generated (-1: never)
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids, the stop token included when reached
  // prompt ids the model saw (a longer prompt keeps its last context_length())
  int64_t prompt_tokens_kept = 0;
  int64_t context_resets = 0;  // times the context was full and its last half re-read
  double seconds = 0;          // wall time, prompt included
};

// Generates up to max_new_tokens ids after `prompt` (non-empty, ids in the vocabulary). With
// C = model.context_length(), the model sees at most C ids: a longer prompt keeps its last C, and
// when the cache is full the window moves on: reset(), then its last max(1, C/2) ids (the newest
// included) are re-read as a fresh context. So every id is drawn from the logits the model's full
// forward gives on the current window (for a MicroLM: MicroLM::forward, with Decoder or
// RecomputingCausalLM alike). The calls on the model: reset(), forward_tokens(window) for the
// prompt, then forward_tokens of one id per step, or reset() and forward_tokens(window) when the
// window moves. on_token (optional) is called with each id as soon as it is drawn.
GenerationResult generate_tokens(CausalLM& model, std::span<const int32_t> prompt,
                                 const GenerationOptions& options,
                                 const std::function<void(int32_t)>& on_token = {});

// Turns decoded bytes, token by token, into printable UTF-8: a character split across tokens is
// held back until its remaining bytes arrive; bytes that cannot form a valid character (a model
// can emit any byte token) become U+FFFD, one per maximal invalid subpart as Unicode recommends.
// So the output is valid UTF-8, does not depend on how the bytes were cut into tokens, and equals
// the tokenizer's decode whenever that is valid UTF-8.
class Utf8Stream {
 public:
  std::string push(std::string_view bytes);  // what can be printed now
  std::string finish();                      // whatever is still held back
 private:
  std::string pending_;
};

// `tokens` ids generated after `prompt` (encoded with `tokenizer`), decoded: the sample that
// `depthgrad train --sample-every` prints (for a MicroLM: sample_text(Decoder(model), ...)).
// Throws when the prompt encodes to no ids or the tokenizer's vocabulary is not the model's.
std::string sample_text(CausalLM& model, const BpeTokenizer& tokenizer, const std::string& prompt,
                        int64_t tokens, const SamplingOptions& options);

// Throws naming both sizes when the tokenizer's vocabulary does not match the model's
// (model_vocab: CausalLM::vocab_size(), or MicroLMConfig::vocab).
void check_tokenizer_vocab(int64_t model_vocab, const BpeTokenizer& tokenizer,
                           const std::string& tokenizer_source);

struct DecodeTiming {
  int64_t tokens = 0;
  double seconds = 0;
  double tokens_per_second = 0;
};
// Times `tokens` greedy generation steps (context moves included) of `model` after the one-id
// prompt {0}, at the current thread count.
DecodeTiming time_decode(CausalLM& model, int64_t tokens);
// The same for a MicroLM of `config` initialised with init_identical(seed), through its Decoder;
// model construction is not timed. For a generation benchmark over the micro/small/base presets
// (tools/attnres/bench.h's bench_spec(name).model).
DecodeTiming time_decode(const MicroLMConfig& config, int64_t tokens, uint64_t seed = 0);

}  // namespace dg
