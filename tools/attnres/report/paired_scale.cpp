// The scale lines of a paired report (see paired_scale.h).
#include "tools/attnres/report/paired_scale.h"

#include <fmt/format.h>

#include "tools/attnres/report/lookup.h"
#include "tools/attnres/report/text.h"

namespace dg {

using json::Value;

std::string verdict_text(const std::string& verdict, const std::string& method,
                         double bound_percent) {
  if (verdict == "better") return method + " better: the 95% interval lies below zero";
  if (verdict == "worse") return method + " worse: the 95% interval lies above zero";
  if (verdict == "bounded")
    return fmt::format("no effect beyond ±{}% perplexity: the 95% interval lies within it",
                       bound_percent);
  return fmt::format("inconclusive: the 95% interval includes zero and reaches beyond ±{}%",
                     bound_percent);
}

std::vector<std::pair<std::string, std::string>> paired_scale_rows(const Value& r, bool html) {
  std::vector<std::pair<std::string, std::string>> rows;
  auto esc = [&](const std::string& s) { return html ? html_escape(s) : s; };
  if (!optional_value_at(r, "paired")) return rows;
  const std::string method = string_at(r, "method.name");
  if (const auto pct = optional_number_at(r, "paired.perplexity_percent")) {
    rows.push_back({"Effect in perplexity",
                    esc(fmt::format("{} (95% CI [{}, {}]); {}",
                                    format_number(*pct, {Style::signed_percent, 3}),
                                    format_number(number_at(r, "paired.perplexity_percent_ci95[0]"),
                                                  {Style::signed_percent, 3}),
                                    format_number(number_at(r, "paired.perplexity_percent_ci95[1]"),
                                                  {Style::signed_percent, 3}),
                                    string_at(r, "paired.perplexity_percent_definition")))});
    rows.push_back({"Verdict", esc(verdict_text(string_at(r, "paired.verdict"), method,
                                                number_at(r, "paired.effect_bound_percent")))});
  }
  if (optional_value_at(r, "scale")) {
    const std::string preset = string_at(r, "scale.preset");
    rows.push_back({"Preset", esc(preset.empty() ? "none (sizes from flags)" : preset)});
    rows.push_back(
        {"Parameters",
         esc(fmt::format(
             "{} {}, {} {}", string_at(r, "baseline.name"),
             format_number(number_at(r, "scale.parameters_baseline"), {Style::integer}), method,
             format_number(number_at(r, "scale.parameters_method"), {Style::integer})))});
    rows.push_back({"Tokens seen per arm",
                    esc(format_number(number_at(r, "scale.tokens_seen_per_arm"), {Style::integer}) +
                        " (steps × batch × sequence length)")});
    rows.push_back({"Threads", esc(scalar_text(value_at(r, "scale.threads")))});
    rows.push_back({"Compute seconds",
                    esc(format_number(number_at(r, "scale.compute_seconds"), {Style::fixed, 1}) +
                        " (training and evaluation of every arm, over resumed invocations)")});
  }
  if (optional_value_at(r, "paired.diverged")) {
    std::string text;
    for (size_t i = 0; i < array_at(r, "paired.diverged").size(); ++i) {
      const std::string p = fmt::format("paired.diverged[{}]", i);
      text += fmt::format("{}seed {} {} at step {} (loss {})", text.empty() ? "" : "; ",
                          scalar_text(value_at(r, p + ".seed")), string_at(r, p + ".arm"),
                          scalar_text(value_at(r, p + ".step")), string_at(r, p + ".loss"));
    }
    rows.push_back(
        {"Diverged", esc(text.empty() ? "none" : text + " (left out of the statistics)")});
  }
  return rows;
}

}  // namespace dg
