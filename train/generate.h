// Text generation from a MicroLM: sampling (temperature, top-k, top-p) with a seeded RNG, the
// generation loop over the K/V-cached decoder (nn/decode.h) with a sliding context window,
// UTF-8-safe streaming of decoded text, a short sample for training logs, and a timing of
// decode steps for a generation benchmark. Not here: the model's incremental forward
// (nn/decode.h), finding checkpoints and tokenizer files, printing (tools/cli/cmd_generate.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nn/decode.h"
#include "tensor/rng.h"
#include "train/text/bpe.h"

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
  int64_t prompt_tokens_kept =
      0;                       // prompt ids the model saw (a longer prompt keeps its last seq_len)
  int64_t context_resets = 0;  // times the context was full and its last half re-read
  double seconds = 0;          // wall time, prompt included
};

// Generates up to max_new_tokens ids after `prompt` (non-empty, ids in the vocabulary). The model
// sees at most seq_len ids: a longer prompt keeps its last seq_len, and when the context is full
// the window moves on — its last seq_len/2 ids (the newest included) are re-read as a fresh
// context, so every id is drawn from the logits MicroLM::forward gives on the current window.
// on_token (optional) is called with each id as soon as it is drawn.
GenerationResult generate_tokens(Decoder& decoder, std::span<const int32_t> prompt,
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
// `depthgrad train --sample-every` prints. Throws when the prompt encodes to no ids or the
// tokenizer's vocabulary is not the model's.
std::string sample_text(const MicroLM& model, const BpeTokenizer& tokenizer,
                        const std::string& prompt, int64_t tokens, const SamplingOptions& options);

// Throws naming both sizes when the tokenizer's vocabulary does not match the model's.
void check_tokenizer_vocab(const MicroLMConfig& model, const BpeTokenizer& tokenizer,
                           const std::string& tokenizer_source);

struct DecodeTiming {
  int64_t tokens = 0;
  double seconds = 0;
  double tokens_per_second = 0;
};
// Times `tokens` greedy generation steps (context moves included) of a model of `config`
// initialised with init_identical(seed), after a one-id prompt; model construction is not timed.
// For a generation benchmark over the micro/small/base presets (tools/attnres/bench.h's
// bench_spec(name).model); it runs at the current thread count.
DecodeTiming time_decode(const MicroLMConfig& config, int64_t tokens, uint64_t seed = 0);

}  // namespace dg
