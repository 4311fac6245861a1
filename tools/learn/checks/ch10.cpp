// Chapter 10's exercises and their checks (nn/lm/learn-10-depth-routing.md): attnres_route,
// graded through the route on fixed tensors against PyTorch's values, through block_attnres and
// rd_attnres MicroBlocks (the gradient check, the routes each block records) and a tiny
// rd_attnres model that must learn; pseudo_query_mix (the paper form), graded the same way
// through the paper modes' models; and paired_summary, graded on five fixed seed pairs against
// values computed offline with mpmath (Student's t quantile, not the normal's 1.96) and through
// paired_verdict. The goldens come from tools/learn/goldens_ch10.py. It does not run the
// experiment itself (depthgrad reproduce does).
#include <fmt/format.h>

#include <cmath>

#include "nn/lm/micro_lm.h"
#include "tools/attnres/stats.h"
#include "tools/learn/checks/sentence_lm.h"
#include "tools/learn/grade.h"
#include "train/optim.h"

namespace dg::learn {

namespace {

// float64 [shape] with x[i] = sin(0.37·i + offset), row-major (the golden script's inputs).
Tensor filled(const Shape& shape, double offset) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = std::sin(0.37 * static_cast<double>(i) + offset);
  return Tensor::from_vector(values, shape, DType::f64);
}

// PyTorch 1.13, tools/learn/goldens_ch10.py: z [1,2,4] (offset 0), W [3,4] (offset 0.5), sources
// S_j [1,2,4] (offset 1 + j).
const std::vector<double> kAlphaGolden = {0.756331615511911, 0.221128613129356, 0.022539771358733,
                                          0.627607038883141, 0.366238152161582, 0.0061548089552767};
const std::vector<double> kMixGolden = {0.840683600978022,  0.890219904327816, 0.8192691198372,
                                        0.637434103341801,  0.25801060539599,  -0.0639571485684938,
                                        -0.377268602510778, -0.639518520950251};

Verdict route_against_torch() {
  Linear route(4, 3, false, DType::f64);
  route.weight.copy_from(filled({3, 4}, 0.5));
  std::vector<Tensor> sources;
  for (int j = 0; j < 3; ++j) sources.push_back(filled({1, 2, 4}, 1.0 + j));
  Tensor alpha;
  const Tensor h = attnres_route(route, filled({1, 2, 4}, 0.0), sources, alpha);
  const Verdict a = expect_values(alpha, kAlphaGolden, {1, 2, 3}, 1e-12, 1e-10,
                                  "alpha = softmax(z·Wᵀ) over the sources");
  if (!a.passed) return a;
  const Verdict m = expect_values(h, kMixGolden, {1, 2, 4}, 1e-12, 1e-10, "h = Σ_j α_j S_j");
  return {m.passed, a.detail + "; " + m.detail};
}

MicroLMConfig tiny_config(const char* mode, int64_t vocab) {
  MicroLMConfig c;
  c.vocab = vocab, c.dim = 8, c.layers = 3, c.heads = 2, c.kv_heads = 2, c.seq_len = 16;
  c.expansion = 2;
  c.mode = residual_mode(mode);
  return c;
}

// Block 2 of a mode reads three sources; every parameter and every source is checked.
Verdict block_gradients(const char* mode) {
  const MicroLMConfig config = tiny_config(mode, 11);
  MicroBlock block(config, 2, DType::f64);
  std::vector<Tensor> inputs;
  for (int j = 0; j < 3; ++j) inputs.push_back(random_tensor({2, 4, 8}, 60 + j));
  uint64_t seed = 70;
  for (const NamedTensor& named : block.named_parameters()) {
    const std::string& name = named.first;
    Tensor p = named.second;
    // routes ±0.8 (clearly non-uniform weights over depth), gains near one, matrices small
    const bool route = name.find("_route") != std::string::npos, gain = p.dim() == 1;
    const double lo = route ? -0.8 : gain ? 0.7 : -0.4, hi = route ? 0.8 : gain ? 1.3 : 0.4;
    p.copy_from(random_tensor(p.shape(), seed++, lo, hi, false));
    inputs.push_back(p);
  }
  GradcheckOptions options;
  options.jacobian_max_entries = 0;  // random-weighted loss on every element: enough, and fast
  return from_gradcheck(gradcheck(
      fmt::format("{} MicroBlock 2 (three sources and every parameter)", mode),
      [&](const std::vector<Tensor>& in) {
        return block.forward(std::vector<Tensor>(in.begin(), in.begin() + 3));
      },
      inputs, options));
}

// rd_attnres's two routes: after a forward, each is a distribution over the three sources per
// token, and with different route weights they differ.
Verdict routes_are_distributions() {
  const MicroLMConfig config = tiny_config("rd_attnres", 11);
  MicroBlock block(config, 2, DType::f64);
  uint64_t seed = 80;
  for (Tensor p : block.parameters())
    p.copy_from(random_tensor(p.shape(), seed++, p.dim() == 1 ? 0.9 : -0.8,
                              p.dim() == 1 ? 1.1 : 0.8, false));
  std::vector<Tensor> sources;
  for (int j = 0; j < 3; ++j) sources.push_back(filled({1, 3, 8}, 0.4 * j));
  block.forward(sources);
  for (const Tensor* a : {&block.last_alpha_qk, &block.last_alpha_v}) {
    if (!a->defined() || a->shape() != Shape{1, 3, 3})
      return {false, fmt::format("a route is {}, expected [1, 3, 3] (tokens × sources)",
                                 a->defined() ? a->describe() : "undefined")};
    const std::vector<double> v = a->to_vector();
    for (int t = 0; t < 3; ++t) {
      const double sum = v[t * 3] + v[t * 3 + 1] + v[t * 3 + 2];
      if (std::abs(sum - 1) > 1e-12 || v[t * 3] < 0 || v[t * 3 + 1] < 0 || v[t * 3 + 2] < 0)
        return {false, fmt::format("token {}: the weights over the sources {:.6g}, {:.6g}, "
                                   "{:.6g} are not a distribution (sum {:.9g})",
                                   t, v[t * 3], v[t * 3 + 1], v[t * 3 + 2], sum)};
    }
  }
  const double gap = dg::max(abs(sub(block.last_alpha_qk, block.last_alpha_v))).item();
  return expect_true(gap > 1e-3, fmt::format("every token's QK and V routes sum to one; they "
                                             "differ by up to {:.4f}",
                                             gap));
}

// A tiny rd_attnres model on a repeated sentence: from about ln(28) = 3.3 below 0.6 within 60
// AdamW steps (the library's route: about 0.1).
Verdict tiny_rd_attnres_learns() {
  MicroLMConfig config = tiny_config("rd_attnres", 28);
  config.dim = 32, config.layers = 2;
  const double last = train_on_sentence(config).last;
  return expect_true(std::isfinite(last) && last < 0.6,
                     fmt::format("loss {:.4f} at step 60 (must be below 0.6)", last));
}

// PyTorch 1.13, tools/learn/goldens_ch10.py: the same sources, w [1,4] (offset 2.5), eps 1e-6.
const std::vector<double> kPaperAlphaGolden = {0.199333383164286, 0.449611332609011,
                                               0.351055284226703, 0.731708712560649,
                                               0.18229261747965,  0.0859986699597006};
const std::vector<double> kPaperMixGolden = {
    0.626104610588912, 0.429344135208396,  0.174473945271812,  -0.104010474663033,
    0.305337610014289, 0.0065603224406659, -0.293104873999437, -0.553099700760838};

Verdict pseudo_query_against_torch() {
  std::vector<Tensor> sources;
  for (int j = 0; j < 3; ++j) sources.push_back(filled({1, 2, 4}, 1.0 + j));
  Tensor alpha;
  const Tensor h =
      pseudo_query_mix(sources, filled({1, 4}, 2.5), Tensor::ones({4}, DType::f64), 1e-6, alpha);
  const Verdict a = expect_values(alpha, kPaperAlphaGolden, {1, 2, 3}, 1e-12, 1e-10,
                                  "alpha = softmax_j(w · RMSNorm(S_j))");
  if (!a.passed) return a;
  const Verdict m = expect_values(h, kPaperMixGolden, {1, 2, 4}, 1e-12, 1e-10, "h = Σ_j α_j S_j");
  return {m.passed, a.detail + "; " + m.detail};
}

// A zero pseudo-query (the paper modes' initialisation) scores every source 0: uniform weights,
// and h is the plain mean of the sources.
Verdict zero_query_is_uniform() {
  std::vector<Tensor> sources;
  for (int j = 0; j < 4; ++j) sources.push_back(filled({2, 3, 5}, 0.7 * j));
  Tensor alpha;
  const Tensor h = pseudo_query_mix(sources, Tensor::zeros({1, 5}, DType::f64),
                                    Tensor::ones({5}, DType::f64), 1e-6, alpha);
  const Verdict a =
      expect_values(alpha, std::vector<double>(24, 0.25), {2, 3, 4}, 1e-15, 0, "alpha");
  if (!a.passed) return a;
  const Tensor mean = scale(add(add(sources[0], sources[1]), add(sources[2], sources[3])), 0.25);
  return expect_close(h, mean, 1e-14, 1e-12, "h with a zero query vs the mean of the sources");
}

// The paper mode with a V pseudo-query, found in the registry (the paper family with a V route;
// a file outside nn/lm/residual/ does not spell the modes out). Its whole model's loss: every
// pseudo-query (attention QK and V, feed-forward, final) and the embedding reach the loss
// through the mixtures.
Verdict paper_model_gradients() {
  const char* mode = nullptr;
  for (const ResidualModeInfo& info : residual_modes())
    if (info.family == ResidualFamily::paper_attnres && info.v_route) mode = info.name;
  if (!mode) return {false, "no paper mode with a V pseudo-query is registered"};
  MicroLMConfig config = tiny_config(mode, 11);
  config.layers = 2, config.attnres_block_size = 1;
  MicroLM model(config, DType::f64);
  model.init_identical(5);
  std::vector<Tensor> inputs;
  uint64_t seed = 90;
  for (const NamedTensor& named : model.named_parameters())
    if (named.first.find("_query") != std::string::npos || named.first == "token.weight") {
      Tensor p = named.second;
      const double range = named.first == "token.weight" ? 0.5 : 0.8;
      p.copy_from(random_tensor(p.shape(), seed++, -range, range, false));
      inputs.push_back(p);
    }
  const Tensor ids = Tensor::from_ids({1, 4, 2, 9, 3, 0, 7, 7, 5, 10}, {2, 5});
  const Tensor targets = Tensor::from_ids({4, 2, 9, 3, 6, 7, 7, 5, 10, 1}, {2, 5});
  GradcheckOptions options;
  options.jacobian_max_entries = 0;
  options.full_max_numel = 32;
  options.sampled_elements = 16;
  options.directions = 6;
  return from_gradcheck(gradcheck(
      fmt::format("{} MicroLM loss (pseudo-queries, token embedding)", mode),
      [&](const std::vector<Tensor>&) { return model.loss(ids, targets); }, inputs, options));
}

// A tiny paper_block_attnres model (Full AttnRes: block size 1) on a repeated sentence.
Verdict tiny_paper_model_learns() {
  MicroLMConfig config = tiny_config("paper_block_attnres", 28);
  config.dim = 32, config.layers = 2, config.attnres_block_size = 1;
  const double last = train_on_sentence(config).last;
  return expect_true(std::isfinite(last) && last < 0.6,
                     fmt::format("loss {:.4f} at step 60 (must be below 0.6)", last));
}

// Five seeds' validation losses of a baseline and a method (lower is better); mpmath's values.
const std::vector<double> kBaseline = {5.7570, 5.7712, 5.7498, 5.7655, 5.7601};
const std::vector<double> kMethod = {5.7431, 5.7650, 5.7502, 5.7519, 5.7488};

Verdict near(const char* what, double got, double expected, double tolerance) {
  const bool ok = std::abs(got - expected) <= tolerance;
  return {ok, fmt::format("{} {:.12g}, expected {:.12g}{}", what, got, expected,
                          ok ? "" : fmt::format(" (off by {:.3g})", std::abs(got - expected)))};
}

Verdict first_failure(const std::vector<Verdict>& verdicts) {
  std::string details;
  for (const Verdict& v : verdicts) {
    if (!v.passed) return v;
    details += (details.empty() ? "" : "; ") + v.detail;
  }
  return {true, details};
}

Verdict paired_values() {
  const PairedSummary s = paired_summary(kBaseline, kMethod);
  if (s.n != 5 || s.differences.size() != 5)
    return {false,
            fmt::format("n {} and {} differences, expected 5 and 5", s.n, s.differences.size())};
  return first_failure(
      {near("differences[0] (method − baseline)", s.differences[0], -0.0139, 1e-12),
       near("mean difference", s.mean_difference, -0.0089199999999999946, 1e-12),
       near("std of the differences (ddof 1)", s.std_difference, 0.0060545024568500279, 1e-12),
       near("95% interval, low", s.ci95_low, -0.016437657727706916, 1e-9),
       near("95% interval, high", s.ci95_high, -0.0014023422722930734, 1e-9)});
}

Verdict paired_tests() {
  const PairedSummary s = paired_summary(kBaseline, kMethod);
  return first_failure(
      {near("t statistic", s.t_statistic, -3.2943625841181444, 1e-9),
       near("two-sided p of the paired t-test", s.t_test_p, 0.030092059882089957, 1e-9),
       near("wins (method lower)", static_cast<double>(s.wins), 4, 0),
       near("sign test p", s.sign_test_p, 0.375, 1e-12)});
}

// The verdicts a report prints: this method's interval excludes zero ("better"); the same
// numbers with the arms swapped are "worse"; a tiny symmetric difference is "bounded".
Verdict paired_verdicts() {
  const std::string better = paired_verdict(paired_summary(kBaseline, kMethod), 0.2);
  const std::string worse = paired_verdict(paired_summary(kMethod, kBaseline), 0.2);
  const std::string bounded =
      paired_verdict(paired_summary({5.0, 5.0, 5.0, 5.0}, {5.0001, 4.9999, 5.0002, 4.9998}), 0.2);
  const bool ok = better == "better" && worse == "worse" && bounded == "bounded";
  return expect_true(ok, fmt::format("method vs baseline: {} (expected better); swapped: {} "
                                     "(expected worse); ±1e-4 nats: {} (expected bounded)",
                                     better, worse, bounded));
}

}  // namespace

Chapter chapter() {
  return {
      10,
      "depth routing: Block AttnRes, RD-AttnRes and the paired protocol",
      "nn/lm/learn-10-depth-routing.md",
      {{"attnres_route",
        "nn/lm/residual/reference_attnres.cpp",
        {{"the route on fixed tensors against PyTorch 1.13 (alpha and the mixture)",
          route_against_torch},
         {"gradcheck a block_attnres block over three sources",
          [] { return block_gradients("block_attnres"); }},
         {"gradcheck an rd_attnres block over three sources",
          [] { return block_gradients("rd_attnres"); }},
         {"rd_attnres's QK and V routes are two distributions over depth",
          routes_are_distributions},
         {"a tiny rd_attnres model learns a repeated sentence: loss below 0.6 in 60 steps",
          tiny_rd_attnres_learns}}},
       {"pseudo_query_mix",
        "nn/lm/residual/paper_attnres.cpp",
        {{"the paper mixture on fixed tensors against PyTorch 1.13 (alpha and the mixture)",
          pseudo_query_against_torch},
         {"a zero pseudo-query mixes uniformly: h is the mean of the sources",
          zero_query_is_uniform},
         {"gradcheck the paper RD-AttnRes model's loss w.r.t. its pseudo-queries",
          paper_model_gradients},
         {"a tiny paper_block_attnres model learns: loss below 0.6 in 60 steps",
          tiny_paper_model_learns}}},
       {"paired_summary",
        "tools/attnres/stats.cpp",
        {{"five seed pairs: differences, mean, std and the 95% t interval (mpmath)", paired_values},
         {"five seed pairs: t statistic, its p, wins and the sign test (mpmath)", paired_tests},
         {"paired_verdict reads the summary: better, worse, bounded", paired_verdicts}}}}};
}

}  // namespace dg::learn
