// depthgrad's SVG chart library: line charts, bar charts and heatmaps drawn as self-contained
// <svg> elements (no scripts, no fonts to fetch), with "nice" axis ticks, a legend, gaps at
// non-finite values and a "no data" note when there is nothing to draw. Every report page uses it
// (reproduce's report.html, evolve's index.html). It reads no results and computes no statistics.
#pragma once
#include <string>
#include <vector>

namespace dg {

struct Series {
  std::string label;
  std::vector<double> y;  // x = 0, 1, …
  std::string color;      // CSS colour; empty picks from a palette
};
std::string svg_line_chart(const std::string& title, const std::string& x_label,
                           const std::string& y_label, const std::vector<Series>& series,
                           int width = 640, int height = 320);
std::string svg_bar_chart(const std::string& title, const std::vector<std::string>& labels,
                          const std::vector<double>& values, const std::string& y_label,
                          int width = 640, int height = 280);
// rows × columns matrix of values in [0, 1] (e.g. mean routing weight per layer and source).
std::string svg_heatmap(const std::string& title, const std::vector<std::string>& row_labels,
                        const std::vector<std::string>& column_labels,
                        const std::vector<std::vector<double>>& values, int cell = 36);

// Building blocks for a chart drawn elsewhere (evolve's trial scatter): the opening <svg> of a
// chart (class "chart", white background, the title in bold at the top left), and a whole chart
// that says "no data".
std::string svg_chart_open(int width, int height, const std::string& title);
std::string svg_no_data(const std::string& title, int width);

}  // namespace dg
