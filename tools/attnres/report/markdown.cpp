// result.json of `depthgrad reproduce` -> report.md: the reference's report.md layout (§6.4), then
// depthgrad's sections (route divergence, training, the reference's recorded values, paired
// statistics, omitted parts, setup, provenance). Pure string building: it computes no statistics
// (the only arithmetic is plain differences for display) and reads no files.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tools/attnres/report.h"
#include "tools/attnres/report/lookup.h"
#include "tools/attnres/report/paired_scale.h"
#include "tools/attnres/report/reproduce_parts.h"
#include "tools/attnres/stats.h"

namespace dg {

using json::Value;

namespace {

// The reference's body (§6.4), in English and with the baseline named as what it is: the arms'
// losses, perplexities and sizes, the relative change and the paper's claim.
std::string reference_body_md(const Value& r, const std::vector<Arm>& arms, size_t n_seeds) {
  const std::string& b = arms[0].name;
  const std::string& m = arms[1].name;
  std::string md;
  md += budget_line(r) + "\n\n";
  // Every loss column says what it was computed on.
  const bool full = optional_value_at(r, "baseline.full_validation_lm_loss") &&
                    optional_value_at(r, "method.full_validation_lm_loss");
  md += "LM loss and perplexity: " + lm_loss_scope(r) +
        (full ? "; validation NLL: every window of the validation split" : "") +
        (n_seeds > 1 ? "; means over seeds" : "") + ".\n\n";
  md += std::string("| Variant | LM loss | Perplexity |") + (full ? " Validation NLL |" : "") +
        " Parameters |\n|---|---:|---:|" + (full ? "---:|" : "") + "---:|\n";
  for (const Arm& a : arms)
    md += fmt::format("| {} | {} | {} |{} {} |\n", a.name,
                      format_number(number_at(r, a.key + ".lm_loss"), {Style::fixed, 4}),
                      format_number(number_at(r, a.key + ".perplexity"), {Style::fixed, 2}),
                      full ? " " +
                                 format_number(number_at(r, a.key + ".full_validation_lm_loss"),
                                               {Style::fixed, 4}) +
                                 " |"
                           : "",
                      format_number(number_at(r, a.key + ".parameters"), {Style::integer}));
  if (n_seeds > 1)
    md += fmt::format(
        "\nSample std over seeds: {} LM loss {}, perplexity {}; {} LM loss {}, perplexity {}.\n", b,
        format_number(number_at(r, "baseline.lm_loss_std"), {Style::fixed, 4}),
        format_number(number_at(r, "baseline.perplexity_std"), {Style::fixed, 2}), m,
        format_number(number_at(r, "method.lm_loss_std"), {Style::fixed, 4}),
        format_number(number_at(r, "method.perplexity_std"), {Style::fixed, 2}));
  md += "\n" + relative_line(r, b) + "\n";
  if (const std::string windows = windows_relative_line(r); !windows.empty())
    md += "\n" + windows + "\n";
  md += "\n" + paper_line(r) + "\n";
  if (const std::string scope = string_at(r, "scope"); !scope.empty())
    md += "\n## Reproduction scope\n\n" + scope + "\n";
  return md;
}

// The QK/V route divergence: the reference's statistic, then per layer.
std::string route_divergence_md(const Value& r, const std::vector<Arm>& arms, size_t n_seeds) {
  const std::string& b = arms[0].name;
  const std::string& m = arms[1].name;
  std::string md;
  md += "\n## QK/V route divergence\n\n";
  md += fmt::format(
      "Jensen–Shannon divergence (natural log) between the QK and V routing distributions, "
      "averaged over tokens and layers on the last training batch (the reference's statistic)"
      "{}: {} {}, {} {}. The baseline has one router, so its divergence is 0 by construction.\n",
      n_seeds > 1 ? ", mean over seeds" : "", b,
      format_number(number_at(r, "baseline.architecture_stats.qk_v_route_js_divergence"),
                    {Style::fixed, 10}),
      m,
      format_number(number_at(r, "method.architecture_stats.qk_v_route_js_divergence"),
                    {Style::fixed, 10}));
  if (const json::Array* layers = paired_js_layers(r)) {
    md += fmt::format("\nPer layer, {} on the validation data after training, over seeds:\n\n", m);
    md += "| Layer | Mean over seeds | Std over seeds | Per seed |\n|---:|---:|---:|---|\n";
    for (size_t l = 0; l < layers->size(); ++l) {
      const std::string p = fmt::format("paired.validation_js_per_layer[{}]", l);
      std::string per_seed;
      for (double v : numbers_at(r, p + ".per_seed"))
        per_seed += (per_seed.empty() ? "" : ", ") + format_number(v, {Style::fixed, 6});
      md += fmt::format(
          "| {} | {} | {} | {} |\n", format_number(number_at(r, p + ".layer"), {Style::integer}),
          format_number(number_at(r, p + ".mean_over_seeds"), {Style::fixed, 6}),
          format_number(number_at(r, p + ".std_over_seeds"), {Style::fixed, 6}), per_seed);
    }
  } else {
    const std::vector<double> train = numbers_at(r, "method.routes_last_train_batch.js_per_layer");
    const std::vector<double> valid = numbers_at(r, "method.routes_validation.js_per_layer");
    if (!train.empty() || !valid.empty()) {
      md += fmt::format(
          "\nPer layer ({}); the validation columns summarise the per-token divergence:\n\n", m);
      md +=
          "| Layer | Last train batch | Validation mean | p10 | p50 | p90 | max "
          "|\n|---:|---:|---:|---:|---:|---:|---:|\n";
      for (size_t l = 0; l < std::max(train.size(), valid.size()); ++l) {
        md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", l,
                          format_number(l < train.size() ? train[l] : kNaN, {Style::fixed, 6}),
                          format_number(l < valid.size() ? valid[l] : kNaN, {Style::fixed, 6}),
                          format_number(validation_js_quantile(r, l, "p10"), {Style::fixed, 6}),
                          format_number(validation_js_quantile(r, l, "p50"), {Style::fixed, 6}),
                          format_number(validation_js_quantile(r, l, "p90"), {Style::fixed, 6}),
                          format_number(validation_js_quantile(r, l, "max"), {Style::fixed, 6}));
      }
    }
  }
  return md;
}

// Training: clipping, and each arm's steps and losses per seed.
std::string training_md(const Value& r, const std::vector<Arm>& arms, size_t n_seeds) {
  std::string md;
  md += "\n## Training\n\nGradient clipping at norm " +
        format_number(number_at(r, "setup.gradient_clip"), {Style::general, 4}) +
        "; a step is clipped when the gradient norm before clipping exceeds it.\n\n";
  md +=
      "Initial and final loss: mean training-batch loss of the first and the last 10 steps.\n\n"
      "| Seed | Variant | Steps | Clipped steps | Initial loss | Final loss | Train seconds "
      "|\n|---:|---|---:|---:|---:|---:|---:|\n";
  for (size_t s = 0; s < std::max<size_t>(n_seeds, 1); ++s)
    for (const Arm& a : arms) {
      const std::string p = arm_path(r, s, a);
      md +=
          fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", n_seeds ? seed_label(r, s) : "—",
                      a.name, numbers_at(r, p + ".training.losses").size(),
                      format_number(number_at(r, p + ".training.clipped_steps"), {Style::integer}),
                      format_number(number_at(r, p + ".initial_loss"), {Style::fixed, 4}),
                      format_number(number_at(r, p + ".final_loss"), {Style::fixed, 4}),
                      format_number(number_at(r, p + ".training.seconds"), {Style::fixed, 2}));
    }
  return md;
}

// Parity runs: the reference run's recorded numbers beside this run's.
std::string reference_recorded_md(const Value& r, const std::vector<Arm>& arms) {
  std::string md;
  if (optional_value_at(r, "reference_recorded")) {  // parity runs only
    md += "\n## Against the reference's recorded values\n\n";
    md +=
        "The reference run's recorded numbers (tools/attnres/PROTOCOL.md §0) beside this run's; "
        "Δ = depthgrad − reference.\n\n";
    md += "| Variant | Metric | Reference | depthgrad | Δ |\n|---|---|---:|---:|---:|\n";
    for (const Arm& a : arms)
      for (const auto& [name, path] : kReferenceMetrics) {
        const double ref = number_at(r, fmt::format("reference_recorded.{}.{}", a.name, name));
        const double got = number_at(r, a.key + "." + path);
        const int digits = std::string(name) == "perplexity" ? 8 : 10;
        md += fmt::format("| {} | {} | {} | {} | {} |\n", a.name, name,
                          format_number(ref, {Style::fixed, digits}),
                          format_number(got, {Style::fixed, digits}),
                          format_number(got - ref, {Style::signed_sci, 3}));
      }
  }
  return md;
}

// Several seeds or --protocol paired: the per-seed differences and the paired tests.
std::string paired_md(const Value& r, const std::vector<Arm>& arms, size_t n_seeds) {
  const std::string& b = arms[0].name;
  const std::string& m = arms[1].name;
  std::string md;
  if (optional_value_at(r, "paired")) {  // several seeds or --protocol paired
    const int64_t n = static_cast<int64_t>(number_at(r, "paired.n"));
    md += "\n## Paired statistics\n\n";
    md += fmt::format("Metric: {}. Difference = {} − {} per seed; negative means {} is better.\n\n",
                      string_at(r, "paired.metric"), m, b, m);
    md += fmt::format("| Seed | {} | {} | Difference | Lower |\n|---:|---:|---:|---:|---|\n", b, m);
    const std::vector<double> diffs = numbers_at(r, "paired.differences_method_minus_baseline");
    for (size_t s = 0; s < n_seeds; ++s) {
      const double d = s < diffs.size() ? diffs[s] : kNaN;
      md += fmt::format(
          "| {} | {} | {} | {} | {} |\n", seed_label(r, s),
          format_number(number_at(r, nll_path(r, arm_path(r, s, arms[0]))), {Style::fixed, 6}),
          format_number(number_at(r, nll_path(r, arm_path(r, s, arms[1]))), {Style::fixed, 6}),
          format_number(d, {Style::signed_sci, 3}),
          !std::isfinite(d) ? "n/a"
          : d < 0           ? m
          : d > 0           ? b
                            : "tie");
    }
    md += "\n";
    md += fmt::format("- {} wins: {} of {} (ties: {})\n", m,
                      format_number(number_at(r, "paired.wins_method"), {Style::integer}), n,
                      format_number(number_at(r, "paired.ties"), {Style::integer}));
    md += fmt::format("- Mean difference: {} nats/token (std over seeds {})\n",
                      format_number(number_at(r, "paired.mean_difference"), {Style::signed_sci, 3}),
                      format_number(number_at(r, "paired.std_difference"), {Style::sci, 3}));
    md += fmt::format("- 95% CI of the mean difference: [{}, {}]\n",
                      format_number(number_at(r, "paired.ci95[0]"), {Style::signed_sci, 3}),
                      format_number(number_at(r, "paired.ci95[1]"), {Style::signed_sci, 3}));
    md += fmt::format("- Paired t-test: t = {}, two-sided p = {}\n",
                      format_number(number_at(r, "paired.t_statistic"), {Style::general, 4}),
                      format_number(number_at(r, "paired.t_test_p"), {Style::general, 4}));
    md += fmt::format("- Exact sign test: two-sided p = {}\n",
                      format_number(number_at(r, "paired.sign_test_p"), {Style::general, 4}));
    for (const auto& [label, text] : paired_scale_rows(r, false))
      md += fmt::format("- {}: {}\n", label, text);
  }
  return md;
}

// What was omitted, the setup and the provenance.
std::string appendix_md(const Value& r) {
  std::string md;
  if (const json::Object& omitted = object_at(r, "omitted"); !omitted.empty()) {
    md += "\n## Omitted\n\n";
    for (const auto& [key, why] : omitted) md += fmt::format("- `{}`: {}\n", key, scalar_text(why));
  }

  md += "\n## Setup\n\n| Setting | Value |\n|---|---|\n";
  for (const auto& [key, v] : object_at(r, "setup"))
    md += fmt::format("| {} | {} |\n", md_cell(key), md_cell(scalar_text(v)));

  md += "\n## Provenance\n\n| Item | Value |\n|---|---|\n";
  for (const auto& [key, v] : object_at(r, "provenance")) {
    if (v.is_object()) {
      for (const auto& [k2, v2] : v.as_object())
        md += fmt::format("| {} `{}` | `{}` |\n", md_cell(key), md_cell(k2),
                          md_cell(scalar_text(v2)));
    } else {
      md += fmt::format("| {} | {} |\n", md_cell(key), md_cell(scalar_text(v)));
    }
  }
  if (const std::string t = string_at(r, "dataset.tokenizer_sha256"); !t.empty())
    md += fmt::format("| tokenizer sha256 | `{}` |\n", t);
  if (const double w = number_at(r, "runtime.wall_seconds"); std::isfinite(w))
    md += fmt::format("| wall seconds | {:.2f} |\n", w);
  return md;
}

}  // namespace

std::string render_reproduce_markdown(const Value& r) {
  const std::vector<Arm> arms = arms_of(r);
  const size_t n_seeds = seed_count(r);
  std::string md = "# " + string_at(r, "paper.title") + "\n\n";
  md += "> " + fidelity_banner_text(r, false) + "\n\n";
  md += "> " + tier_banner_text(r, false) + "\n\n";
  md += reference_body_md(r, arms, n_seeds);
  // ---- depthgrad's additions ----
  md += route_divergence_md(r, arms, n_seeds);
  md += training_md(r, arms, n_seeds);
  md += reference_recorded_md(r, arms);
  md += paired_md(r, arms, n_seeds);
  md += appendix_md(r);
  return md;
}

}  // namespace dg
