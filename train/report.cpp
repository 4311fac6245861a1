// PLACEHOLDER being replaced by the full report renderer: minimal Markdown/HTML so runs work.
#include "train/report.h"

#include <fmt/format.h>

namespace dg {
std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}
std::string render_reproduce_markdown(const json::Value& result) { return "# Role-Decoupled Attention Residuals\n\n```json\n" + json::dump(result.at("relative"), 2) + "\n```\n"; }
std::string render_reproduce_html(const json::Value& result) { return "<!doctype html><pre>" + html_escape(json::dump(result, 2)) + "</pre>"; }
std::string svg_line_chart(const std::string&, const std::string&, const std::string&, const std::vector<Series>&, int, int) { return "<svg/>"; }
std::string svg_bar_chart(const std::string&, const std::vector<std::string>&, const std::vector<double>&, const std::string&, int, int) { return "<svg/>"; }
std::string svg_heatmap(const std::string&, const std::vector<std::string>&, const std::vector<std::string>&, const std::vector<std::vector<double>>&, int) { return "<svg/>"; }
}  // namespace dg
