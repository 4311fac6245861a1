// The pieces both renderings of a `depthgrad reproduce` result share (report.md and report.html):
// the two arms and their paths in result.json, seed labels, the fidelity and tier
// banners and the lines of the reference's report body. Every read goes through report/lookup.h,
// so a missing or mistyped key throws naming it. Internal to the report renderers.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/attnres/report/text.h"
#include "train/io/json.h"

namespace dg {

// ---- what a reproduce result holds --------------------------------------------------------------

struct Arm {
  std::string key;   // "baseline" / "method"
  std::string name;  // "block_attnres" / "rd_attnres"
};
std::vector<Arm> arms_of(const json::Value& r);
size_t seed_count(const json::Value& r);
std::string seed_label(const json::Value& r, size_t i);
// Path of one seed's arm when there are seed results, else the aggregate arm.
std::string arm_path(const json::Value& r, size_t seed_index, const Arm& arm);
// The per-seed value the paired statistics used: full-validation NLL when the run measured it.
std::string nll_path(const json::Value& r, const std::string& arm);
// The routes drawn for an arm and where they were taken: the validation windows, else the last
// training batch; {"", ""} when the arm records neither.
std::pair<std::string, std::string> routes_of(const json::Value& r, const std::string& arm);
// Column labels for routing sources: S_0 is the embedding, S_{k+1} the output of block k.
std::vector<std::string> source_labels(size_t n);
size_t widest_row(const std::vector<std::vector<double>>& m);
// The rd arm's validation JS per layer over seeds ("paired.validation_js_per_layer"), or nullptr
// when the result has no paired statistics or they hold no layers.
const json::Array* paired_js_layers(const json::Value& r);
// One statistic ("p10", "p50", "p90", "max") of the method's per-token validation JS in `layer`;
// NaN when that layer has no distribution (no tokens, or fewer validation layers).
double validation_js_quantile(const json::Value& r, size_t layer, const char* statistic);

// The reference's recorded numbers (result "reference_recorded.<arm>.<name>") and where the
// same number sits in an arm of this run.
struct ReferenceMetric {
  const char* name;
  const char* path;
};
extern const ReferenceMetric kReferenceMetrics[3];

// ---- the reference's report body (§6.4), shared by Markdown and HTML

std::string fidelity_banner_text(const json::Value& r, bool html);
std::string tier_banner_text(const json::Value& r, bool html);
std::string budget_line(const json::Value& r);
// What the LM loss column was computed on: "32 validation windows of 64 tokens" (from the result's
// run config; older results say "the reference's validation windows").
std::string lm_loss_scope(const json::Value& r);
// A relative change in percent with enough decimals to show its first two significant digits
// (at least 2, at most 6): "-0.0095%", not "-0.01%" or "-0.00%".
Fmt percent_format(double percent);
// "1 seed", "6 seeds".
std::string seeds_text(double n);
// The headline uses the metric of the paired statistics (paired.relative_percent, e.g. the full
// validation NLL) when the run has them, else the LM loss; either way it names the metric.
bool headline_is_paired(const json::Value& r);
std::string relative_line(const json::Value& r, const std::string& baseline_name);
// With a paired headline: the same comparison on the LM loss column, named as such; else "".
std::string windows_relative_line(const json::Value& r);
std::string paper_line(const json::Value& r);

}  // namespace dg
