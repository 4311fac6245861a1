// Arms, seeds, paths and banner lines of a reproduce result (see reproduce_parts.h).
#include "tools/attnres/report/reproduce_parts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tools/attnres/report/lookup.h"

namespace dg {

using json::Value;

// ---- what a reproduce result holds --------------------------------------------------------------

std::vector<Arm> arms_of(const Value& r) {
  return {{"baseline", string_at(r, "baseline.name")}, {"method", string_at(r, "method.name")}};
}

size_t seed_count(const Value& r) { return array_at(r, "seed_results").size(); }

std::string seed_label(const Value& r, size_t i) {
  return scalar_text(value_at(r, fmt::format("seed_results[{}].seed", i)));
}

std::string arm_path(const Value& r, size_t seed_index, const Arm& arm) {
  if (seed_count(r) > 0) return fmt::format("seed_results[{}].{}", seed_index, arm.name);
  return arm.key;
}

std::string nll_path(const Value& r, const std::string& arm) {
  const std::string full = arm + ".full_validation_lm_loss";  // only with --eval full
  return optional_value_at(r, full) ? full : arm + ".lm_loss";
}

std::pair<std::string, std::string> routes_of(const Value& r, const std::string& arm) {
  // Both are optional: trimmed or older results may leave either out.
  if (optional_value_at(r, arm + ".routes_validation"))
    return {arm + ".routes_validation", "validation windows"};
  if (optional_value_at(r, arm + ".routes_last_train_batch"))
    return {arm + ".routes_last_train_batch", "last training batch"};
  return {"", ""};
}

std::vector<std::string> source_labels(size_t n) {
  std::vector<std::string> labels;
  for (size_t j = 0; j < n; ++j) labels.push_back(j == 0 ? "emb" : fmt::format("B{}", j - 1));
  return labels;
}

size_t widest_row(const std::vector<std::vector<double>>& m) {
  size_t w = 0;
  for (const auto& row : m) w = std::max(w, row.size());
  return w;
}

const json::Array* paired_js_layers(const Value& r) {
  if (!optional_value_at(r, "paired")) return nullptr;  // parity runs of one seed
  const json::Array& layers = array_at(r, "paired.validation_js_per_layer");
  return layers.empty() ? nullptr : &layers;
}

double validation_js_quantile(const Value& r, size_t layer, const char* statistic) {
  const std::string d =
      fmt::format("method.routes_validation.js_distribution_per_layer[{}]", layer);
  if (!optional_value_at(r, d)) return std::numeric_limits<double>::quiet_NaN();
  // An empty distribution (no tokens) has no statistics.
  return optional_number_at(r, d + "." + statistic)
      .value_or(std::numeric_limits<double>::quiet_NaN());
}

const ReferenceMetric kReferenceMetrics[3] = {
    {"lm_loss", "lm_loss"},
    {"perplexity", "perplexity"},
    {"qk_v_route_js_divergence", "architecture_stats.qk_v_route_js_divergence"}};

// ---- the reference's report body ----------------------------------------------------------------

namespace {

std::string fidelity_label(const std::string& level) {
  if (level == "core_mechanism") return "core mechanism reproduction";
  return level.empty() ? "not recorded" : level;
}
std::string tier_label(const std::string& tier) {
  if (tier == "l2_public_dataset") return "L2 public-dataset training";
  return tier.empty() ? "not recorded" : tier;
}

}  // namespace

std::string fidelity_banner_text(const Value& r, bool html) {
  auto esc = [&](const std::string& s) { return html ? html_escape(s) : s; };
  const std::string label = fidelity_label(string_at(r, "reproduction_fidelity.level"));
  std::string text = html ? "Reproduction fidelity: <b>" + esc(label) + "</b>."
                          : "Reproduction fidelity: **" + label + "**.";
  if (const auto description = optional_string_at(r, "reproduction_fidelity.description");
      description && !description->empty())
    text += " " + esc(*description);
  text += " Missing core: " +
          esc(scalar_text(value_at(r, "reproduction_fidelity.omitted_core_components"))) + ".";
  return text;
}

std::string tier_banner_text(const Value& r, bool html) {
  auto esc = [&](const std::string& s) { return html ? html_escape(s) : s; };
  const std::string label = tier_label(string_at(r, "evaluation_protocol.tier"));
  std::string text =
      html ? "Evaluation tier: <b>" + esc(label) + "</b>." : "Evaluation tier: **" + label + "**.";
  const std::string& policy = string_at(r, "evaluation_protocol.claim_policy");
  if (!policy.empty()) text += " Claim policy: " + esc(policy) + ".";
  return text;
}

std::string budget_line(const Value& r) {
  std::string line =
      fmt::format("Public data: {}; {} steps per variant", string_at(r, "dataset.name"),
                  format_number(number_at(r, "setup.steps_per_variant"), {Style::integer}));
  const size_t n = seed_count(r);
  if (n > 1) {
    std::string seeds;
    for (size_t i = 0; i < n; ++i) seeds += (i ? ", " : "") + seed_label(r, i);
    line += fmt::format("; {} seeds ({}), table values are means over seeds", n, seeds);
  } else if (n == 1) {
    line += "; seed " + seed_label(r, 0);
  }
  return line + ".";
}

std::string lm_loss_scope(const Value& r) {
  // Results written before result.json recorded the run config do not say.
  if (!optional_value_at(r, "config")) return "the reference's validation windows";
  const std::optional<double> windows = optional_number_at(r, "config.data.eval_windows");
  if (!windows) return "the reference's validation windows";
  const std::string tokens =
      format_number(number_at(r, "config.model.seq_len"), {Style::integer}) + " tokens";
  return *windows > 0
             ? format_number(*windows, {Style::integer}) + " validation windows of " + tokens
             : "every validation window of " + tokens;
}

Fmt percent_format(double percent) {
  const double a = std::abs(percent);
  const int first = a > 0 && std::isfinite(a) ? static_cast<int>(std::floor(std::log10(a))) : 0;
  return {Style::signed_percent, std::clamp(1 - first, 2, 6)};
}

std::string seeds_text(double n) {
  return format_number(n, {Style::integer}) + (n == 1 ? " seed" : " seeds");
}

bool headline_is_paired(const Value& r) {
  return optional_value_at(r, "paired") && optional_value_at(r, "paired.relative_percent");
}

std::string relative_line(const Value& r, const std::string& baseline_name) {
  if (headline_is_paired(r))
    return fmt::format(
        "Relative to the same-budget {} baseline, on the {} (the paired statistics' metric; mean "
        "over {}): {} NLL, {} perplexity (of the mean NLL).",
        baseline_name, string_at(r, "paired.metric"), seeds_text(number_at(r, "paired.n")),
        format_number(number_at(r, "paired.relative_percent"),
                      percent_format(number_at(r, "paired.relative_percent"))),
        format_number(number_at(r, "paired.perplexity_relative_percent"),
                      percent_format(number_at(r, "paired.perplexity_relative_percent"))));
  return fmt::format(
      "Relative to the same-budget {} baseline, on the LM loss over {}: LM loss {}, perplexity {}.",
      baseline_name, lm_loss_scope(r),
      format_number(number_at(r, "relative.lm_loss_percent"),
                    percent_format(number_at(r, "relative.lm_loss_percent"))),
      format_number(number_at(r, "relative.perplexity_percent"),
                    percent_format(number_at(r, "relative.perplexity_percent"))));
}

std::string windows_relative_line(const Value& r) {
  if (!headline_is_paired(r)) return "";
  return fmt::format(
      "On the LM loss column ({}), the same comparison gives {} LM loss, {} perplexity.",
      lm_loss_scope(r),
      format_number(number_at(r, "relative.lm_loss_percent"),
                    percent_format(number_at(r, "relative.lm_loss_percent"))),
      format_number(number_at(r, "relative.perplexity_percent"),
                    percent_format(number_at(r, "relative.perplexity_percent"))));
}

std::string paper_line(const Value& r) {
  return fmt::format(
      "For scale: the paper reports {} (120M) and {} (343M) perplexity against Block AttnRes, "
      "with {}/{} paired wins; this run is a micro-budget mechanism check, not that scale.",
      format_number(number_at(r, "paper_results.120m_perplexity_percent"),
                    {Style::signed_percent, 2}),
      format_number(number_at(r, "paper_results.343m_perplexity_percent"),
                    {Style::signed_percent, 2}),
      format_number(number_at(r, "paper_results.paired_training_wins"), {Style::integer}),
      format_number(number_at(r, "paper_results.paired_training_runs"), {Style::integer}));
}

}  // namespace dg
