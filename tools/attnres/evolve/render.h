// The reports of `depthgrad evolve`, drawn from its result.json alone: report.md and index.html
// (the shared page shell and stylesheet of report/page.h, SVG charts of report/charts.h plus a
// score-per-trial scatter). Missing keys throw (json::Value::at names them); values the search
// records as null (a failed trial's score, a test not run yet) show as "—". It computes nothing.
#pragma once
#include <string>

#include "train/io/json.h"

namespace dg {

std::string render_evolve_markdown(const json::Value& result);
std::string render_evolve_html(const json::Value& result);

}  // namespace dg
