// `depthgrad reproduce --compare-precision F32_RUN,BF16_RUN`: does bf16 training change what a
// paired run finds? Two finished paired runs that differ only in training.precision (same seeds,
// so the same initial weights and the same batches) -> per arm and pooled over arms, the paired
// difference of full validation NLL (bf16 − float32) with its 95% t interval, the perplexity
// effect and the stats.h verdict, as precision.md and precision.json. Also the paired
// comparison's own effect (method − baseline) under each precision, so a reader sees whether the
// scientific answer moved. It trains nothing; it refuses inputs that differ in anything but the
// precision (sizes, steps, seeds, data), naming the key.
#pragma once
#include <string>
#include <vector>

#include "tools/attnres/stats.h"
#include "train/io/json.h"

namespace dg {

struct PrecisionArm {
  std::string arm;  // "block_attnres", or "pooled" (every arm's pairs together)
  std::vector<int64_t> seeds;
  std::vector<double> float32_nll, bf16_nll;  // per seed (pooled: arm by arm, seeds in order)
  PairedSummary summary;                      // bf16 as the "method", float32 the "baseline"
  double ppl_percent = 0, ppl_ci95_low = 0, ppl_ci95_high = 0;
  std::string verdict;  // paired_verdict with kEffectBoundPercent
};

struct PrecisionReport {
  std::string float32_source, bf16_source;
  std::string label;  // "mini, 1000 steps, 10 seeds"
  std::vector<PrecisionArm> arms;
  // The method − baseline effect of each run (nats/token, with its 95% interval).
  double effect_float32 = 0, effect_float32_low = 0, effect_float32_high = 0;
  double effect_bf16 = 0, effect_bf16_low = 0, effect_bf16_high = 0;
  double seconds_float32 = 0, seconds_bf16 = 0;  // compute of all arms (runtime.compute_seconds)
  std::string markdown;
  json::Value json;
};

// Reads both runs (a run directory holding result.json, or the file). Throws std::runtime_error
// naming the file and key on a run that is unfinished, not paired, of the wrong precision, or
// different from the other in anything but the precision.
PrecisionReport compare_precisions(const std::string& float32_run, const std::string& bf16_run);
// precision.md and precision.json into dir (atomic writes).
void write_precision_report(const PrecisionReport& report, const std::string& dir);

}  // namespace dg
