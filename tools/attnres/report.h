// Reports people read, rendered from the result.json the commands write (so a report can be
// re-drawn from result.json alone): `depthgrad reproduce`'s report.md and report.html. The pieces
// live in tools/attnres/report/: lookup.h (path reads that throw naming a missing or mistyped
// key), charts.h (the SVG chart library), page.h (the one page shell and stylesheet, shared with
// evolve's page), markdown.cpp and html.cpp (the two renderings). It computes no statistics.
#pragma once
#include <string>

#include "tools/attnres/report/charts.h"
#include "tools/attnres/report/page.h"
#include "train/io/json.h"

namespace dg {

// `depthgrad reproduce` (both protocols): result.json -> report.md / report.html. Both throw
// std::runtime_error naming the path when the result lacks a key they need.
std::string render_reproduce_markdown(const json::Value& result);
std::string render_reproduce_html(const json::Value& result);

}  // namespace dg
