// Shared helpers of the nn module tests (test_nn_modules.cpp, test_nn_paper_modes.cpp): seeded
// parameter values away from degenerate points, random ids, the tiny config of the gradient checks
// and a gradcheck expectation. Test-only; nothing here is part of the library.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "nn/lm/micro_lm.h"
#include "tests/test_helpers.h"

namespace dg::nn_test {

using Vec = std::vector<double>;

// ---- helpers ---------------------------------------------------------------------------------

inline void set_values(Tensor p, const Vec& v) {
  p.copy_from(Tensor::from_vector(v, p.shape(), p.dtype()));
}

// Seeded values away from degenerate points: 1-D gains 1 ± 0.3, biases ±0.2, pseudo-queries and
// routes ±0.8 (dotted with RMS-normalised vectors of dim 8: clearly non-uniform routing), other
// matrices ±1.2/√in.
inline void randomize(const Module& m, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (auto& [name, p] : m.named_parameters()) {
    double lo = -0.2, hi = 0.2;
    const bool bias = name == "bias" || name.ends_with(".bias");
    if (name.find("_query") != std::string::npos || name.find("_route") != std::string::npos) {
      lo = -0.8, hi = 0.8;
    } else if (p.dim() == 1 && !bias) {
      lo = 0.7, hi = 1.3;
    } else if (p.dim() == 2) {
      hi = 1.2 / std::sqrt(static_cast<double>(p.size(1)));
      lo = -hi;
    }
    std::uniform_real_distribution<double> dist(lo, hi);
    Vec v(p.numel());
    for (double& x : v) x = dist(rng);
    set_values(p, v);
  }
}

inline std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % vocab);
  return ids;
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  Vec x = a.to_vector(), y = b.to_vector();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

inline void expect_gradcheck(const std::string& name, const GradcheckFn& fn,
                             const std::vector<Tensor>& inputs, const GradcheckOptions& opt = {}) {
  GradcheckResult r = gradcheck(name, fn, inputs, opt);
  INFO(name << ": " << r.message);
  CHECK(r.passed);
  CHECK(r.checks > 0);
}

// Runs `fn`, which must throw std::invalid_argument; returns the message. (Stricter than
// test::error_of, which takes any std::exception and returns "" when nothing is thrown.)
template <class F>
inline std::string invalid_argument_of(F&& fn) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  FAIL("expected std::invalid_argument");
  return "";
}
using dg::test::contains;

// The tiny config of the gradient checks.
inline MicroLMConfig tiny_config(ResidualMode mode, int64_t kv_heads = 2, int64_t block_size = 2) {
  MicroLMConfig c;
  c.vocab = 11, c.dim = 8, c.heads = 2, c.kv_heads = kv_heads, c.layers = 3, c.seq_len = 5,
  c.expansion = 2;
  c.mode = mode;
  c.attnres_block_size = block_size;
  return c;
}

inline GradcheckOptions model_options() {
  GradcheckOptions opt;
  opt.jacobian_max_entries = 0;
  opt.full_max_numel = 32;
  opt.sampled_elements = 16;
  opt.directions = 6;
  return opt;
}

// Every registered mode: a new mode is in every test that loops over these.
inline const std::vector<ResidualMode> kAllModes = all_residual_modes();

}  // namespace dg::nn_test
