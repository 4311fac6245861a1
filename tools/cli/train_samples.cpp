// Samples during training (see train_samples.h).
#include "tools/cli/train_samples.h"

#include <fmt/core.h>

#include "train/lm/generate.h"

namespace dg::cli {

namespace {
constexpr int64_t kSampleTokens = 48;
}

Flags& add_train_sample_flags(Flags& f) {
  return f
      .add("sample-every", "0",
           "steps between generated samples printed during training (0 = none)")
      .add("sample-prompt", "The",
           "prompt of those samples (48 tokens, temperature 0.8, top-k 40)");
}

TrainSamples::TrainSamples(const Flags& f, const BpeTokenizer& tokenizer, uint64_t seed)
    : tokenizer_(tokenizer),
      every_(f.get_int("sample-every")),
      prompt_(f.get("sample-prompt")),
      seed_(seed) {
  if (every_ < 0) throw UsageError(fmt::format("--sample-every must be >= 0, got {}", every_));
  if (every_ > 0 && tokenizer.encode(prompt_).empty())
    throw UsageError("--sample-prompt encodes to no tokens (it is empty)");
}

void TrainSamples::after_step(int64_t steps_done, const MicroLM& model, Progress& progress) {
  if (every_ == 0 || steps_done % every_ != 0) return;
  SamplingOptions o;
  o.temperature = 0.8;
  o.top_k = 40;
  o.seed = seed_ + static_cast<uint64_t>(steps_done / every_);
  Decoder decoder(model);
  std::string text = sample_text(decoder, tokenizer_, prompt_, kSampleTokens, o);
  std::string shown;  // one line: newlines and tabs escaped
  for (char c : prompt_ + text)
    shown += c == '\n' ? std::string("\\n") : c == '\t' ? std::string("\\t") : std::string(1, c);
  progress.message(fmt::format("step {} sample: {}", steps_done, shown));
}

}  // namespace dg::cli
