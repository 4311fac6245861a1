// Reports people read: Markdown and a self-contained HTML page (no network, no scripts needed)
// with SVG charts drawn by depthgrad — loss curves, paired differences per seed, route heatmaps
// (QK beside V), and the run's provenance. Renders from the result JSON the commands write, so a
// report can be re-drawn from result.json alone. It computes no statistics of its own.
#pragma once
#include <string>
#include <vector>

#include "train/io/json.h"

namespace dg {

// `depthgrad reproduce` (both protocols): result.json -> report.md / report.html
std::string render_reproduce_markdown(const json::Value& result);
std::string render_reproduce_html(const json::Value& result);

// SVG building blocks (each returns one <svg> element); evolve's report (train/evolve.cpp) uses them too.
struct Series {
  std::string label;
  std::vector<double> y;  // x = 0, 1, …
  std::string color;      // CSS colour; empty picks from a palette
};
std::string svg_line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Series>& series, int width = 640, int height = 320);
std::string svg_bar_chart(const std::string& title, const std::vector<std::string>& labels,
                          const std::vector<double>& values, const std::string& y_label, int width = 640, int height = 280);
// rows × columns matrix of values in [0, 1] (e.g. mean routing weight per layer and source).
std::string svg_heatmap(const std::string& title, const std::vector<std::string>& row_labels,
                        const std::vector<std::string>& column_labels, const std::vector<std::vector<double>>& values,
                        int cell = 36);
// Escapes &, <, >, " and ' for HTML/SVG text.
std::string html_escape(const std::string& text);

}  // namespace dg
