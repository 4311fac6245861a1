// `depthgrad train --sample-every N [--sample-prompt TEXT]`: a short generated sample printed
// every N steps, so a run shows what the model writes as it learns. The flags and the step hook
// live here; cmd_train.cpp only registers the flags and calls the hook. Samples draw from their
// own RNG and do not touch the training state (same losses with and without them).
#pragma once
#include <cstdint>
#include <string>

#include "nn/lm/micro_lm.h"
#include "tools/cli/flags.h"
#include "tools/cli/progress.h"
#include "train/lm/text/bpe.h"

namespace dg::cli {

Flags& add_train_sample_flags(Flags& f);

class TrainSamples {
 public:
  // Reads and checks the flags (a negative interval or, when sampling, a prompt that encodes to
  // nothing is a UsageError). `seed` is the training seed; sample k uses seed + k.
  TrainSamples(const Flags& f, const BpeTokenizer& tokenizer, uint64_t seed);
  // After `steps_done` steps: prints a sample through progress when steps_done is a multiple of
  // the interval (nothing when it is 0).
  void after_step(int64_t steps_done, const MicroLM& model, Progress& progress);

 private:
  const BpeTokenizer& tokenizer_;
  int64_t every_;
  std::string prompt_;
  uint64_t seed_;
};

}  // namespace dg::cli
