// The scale lines of a paired reproduce report, shared by report.md and report.html: the effect
// in perplexity with its interval, the verdict, the preset and parameter counts, the tokens each
// arm saw, threads and compute time, and every seed whose arm diverged (with its step). Results
// written before these fields existed simply show fewer lines. Internal to the report renderers.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "train/io/json.h"

namespace dg {

// (label, value text) rows; `html` escapes the values for HTML.
std::vector<std::pair<std::string, std::string>> paired_scale_rows(const json::Value& result,
                                                                   bool html);
// The verdict code of stats.h's paired_verdict as a sentence naming the method.
std::string verdict_text(const std::string& verdict, const std::string& method,
                         double bound_percent);

}  // namespace dg
