// Shared helpers of the evolve tests (test_evolve.cpp, test_evolve_run.cpp): the seed direction,
// a deterministic stand-in trainer (no data) and the small search options the tests start from.
// Test-only; nothing here is part of the library.
#pragma once
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "tools/attnres/evolve.h"

namespace dg::evolve_test {

inline const std::string kSeedDirection = "比较 Block AttnRes 与 RD-AttnRes 的 QK/V 深度路由";

// A deterministic stand-in for training: NLL from the genome and the seed, no data.
struct FakeTrainer {
  std::map<std::string, int> validation_calls;  // genome key -> calls
  int test_calls = 0;
  std::function<SeedMetrics(const TrialRun&)> custom;

  static double base_nll(const TrialRun& run) {
    const MicroLMConfig& g = run.genome.run.model;
    const LMTrainingConfig& t = run.genome.run.training;
    double nll = 6.0;
    if (g.mode == residual_mode("rd_attnres")) nll -= 0.04;
    if (g.mode == residual_mode("paper_rd_attnres")) nll -= 0.02;
    if (g.mode == residual_mode("standard")) nll += 0.05;
    nll += 0.01 * std::abs(std::log2(static_cast<double>(g.dim) / 64.0)) +
           0.002 * std::abs(static_cast<double>(g.layers) - 4);
    nll += 0.003 * std::abs(std::log2(t.adamw.lr / 6e-4)) +
           (t.schedule.kind == Schedule::Kind::constant ? 0.004 : 0.0) +
           0.001 * static_cast<double>(g.heads - g.kv_heads);
    nll += 0.001 * static_cast<double>(run.seed - 42);
    return nll;
  }
  TrialTrainer fn() {
    return [this](const TrialRun& run) {
      if (run.split == EvalSplit::test)
        ++test_calls;
      else
        ++validation_calls[genome_key(run.genome)];
      if (custom) return custom(run);
      SeedMetrics m;
      m.seed = run.seed;
      m.nll = base_nll(run) + (run.split == EvalSplit::test ? 0.1 : 0.0);
      m.perplexity = std::exp(m.nll);
      m.initial_loss = 6.3;
      m.final_loss = base_nll(run) -
                     0.05;  // training does not depend on the split: a re-training "reproduces" it
      m.parameters = run.genome.run.model.dim * 1000;
      m.seconds = 0.5;
      return m;
    };
  }
};

inline EvolveOptions fake_options(const std::string& direction = kSeedDirection) {
  EvolveOptions o;
  o.direction = direction;
  o.generations = 2;
  o.population = 4;
  o.trial_seeds = 2;
  o.write_files = false;
  set_gene(o.baseline, Gene::steps, "50");
  return o;
}

}  // namespace dg::evolve_test
