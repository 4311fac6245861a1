// The cross-scale page of `depthgrad reproduce --combine` (see tools/attnres/scales.h): the
// Markdown table, the Markdown page, and the HTML page in the shared shell with the effect chart
// (points with interval bars on a log parameter axis, one series per pair). Pure string building
// from sorted rows: no clock, no paths but the inputs', so the same rows give the same bytes.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>

#include "tools/attnres/report/charts.h"
#include "tools/attnres/report/page.h"
#include "tools/attnres/report/text.h"
#include "tools/attnres/scales.h"

namespace dg {

namespace {

const char* const kSeriesColors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                     "#b07aa1", "#76b7b2", "#9c755f", "#edc948"};

std::string px(double v) { return fmt::format("{:.1f}", v); }

// 140096 -> "140k", 7012352 -> "7.01M": three significant digits with a k/M/G suffix.
std::string short_count(double v) {
  const char* suffix[] = {"", "k", "M", "G"};
  int k = 0;
  while (std::fabs(v) >= 1000 && k < 3) v /= 1000, ++k;
  std::string s = fmt::format("{:.3g}", v);
  return s + suffix[k];
}

std::string group_digits(int64_t v) {
  const std::string s = std::to_string(v);
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && s[i - 1] != '-' && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

std::string duration(double seconds) {
  if (seconds >= 3600) return fmt::format("{:.2f} h", seconds / 3600);
  if (seconds >= 60) return fmt::format("{:.1f} min", seconds / 60);
  return fmt::format("{:.1f} s", seconds);
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string js_text(const std::vector<double>& js) {
  std::vector<std::string> parts;
  for (double v : js) parts.push_back(fmt::format("{:.2e}", v));
  return parts.empty() ? "—" : join(parts, ", ");
}

std::string threads_text(const std::vector<int64_t>& threads) {
  std::vector<std::string> parts;
  for (int64_t t : threads) parts.push_back(std::to_string(t));
  return parts.empty() ? "?" : join(parts, ", ");
}

std::string seeds_text(const ScaleRow& r) {
  return r.n == r.seeds_total ? std::to_string(r.n) : fmt::format("{} of {}", r.n, r.seeds_total);
}

// The columns of the table, one function per cell so Markdown and HTML show the same text.
struct Column {
  const char* title;
  bool numeric;
  std::string (*cell)(const ScaleRow&);
};
// Two tables with the same first two columns: the effect, then the budget, routes and divergences.
const Column kEffectColumns[] = {
    {"Scale", false, [](const ScaleRow& r) { return r.label; }},
    {"Pair (B − A)", false, [](const ScaleRow& r) { return r.pair_label(); }},
    {"Params A / B", true,
     [](const ScaleRow& r) {
       return group_digits(r.parameters_baseline) + " / " + group_digits(r.parameters);
     }},
    {"Seeds", true, seeds_text},
    {"ΔNLL nats/token [95% CI]", true,
     [](const ScaleRow& r) {
       return fmt::format("{} [{}, {}]", format_number(r.mean_difference, {Style::signed_sci, 2}),
                          format_number(r.ci95_low, {Style::signed_sci, 2}),
                          format_number(r.ci95_high, {Style::signed_sci, 2}));
     }},
    {"Perplexity [95% CI]", true,
     [](const ScaleRow& r) {
       return fmt::format("{} [{}, {}]", format_number(r.ppl_percent, {Style::signed_percent, 3}),
                          format_number(r.ppl_ci95_low, {Style::signed_percent, 3}),
                          format_number(r.ppl_ci95_high, {Style::signed_percent, 3}));
     }},
    {"B wins", true,
     [](const ScaleRow& r) {
       return fmt::format("{}/{}", r.wins, r.n) + (r.ties ? fmt::format(" ({} ties)", r.ties) : "");
     }},
    {"Sign test p", true,
     [](const ScaleRow& r) {
       return format_number(r.sign_test_p, {Style::general, 3});
     }},
    {"Verdict", false, [](const ScaleRow& r) { return r.verdict; }},
};
const Column kBudgetColumns[] = {
    {"Scale", false, [](const ScaleRow& r) { return r.label; }},
    {"Pair (B − A)", false, [](const ScaleRow& r) { return r.pair_label(); }},
    {"Size", false,
     [](const ScaleRow& r) {
       return fmt::format("d{} L{} seq {} batch {}", r.dim, r.layers, r.seq_len, r.batch);
     }},
    {"Steps", true, [](const ScaleRow& r) { return group_digits(r.steps); }},
    {"Tokens per arm", true, [](const ScaleRow& r) { return group_digits(r.tokens_seen); }},
    {"B's QK/V JS per layer", false, [](const ScaleRow& r) { return js_text(r.js_per_layer); }},
    {"Compute", true, [](const ScaleRow& r) { return duration(r.compute_seconds); }},
    {"Threads", true, [](const ScaleRow& r) { return threads_text(r.threads); }},
    {"Diverged", false,
     [](const ScaleRow& r) {
       return r.diverged.empty() ? std::string("none") : join(r.diverged, "; ");
     }},
};

const char* const kDefinitions =
    "ΔNLL is the mean over seeds of the paired difference B − A in validation NLL (nats/token; "
    "the full validation split unless the run's metric says otherwise), with a 95% Student-t "
    "interval across seeds. Perplexity is 100·(exp(ΔNLL) − 1) percent, the ratio of the "
    "perplexities the mean difference implies; its interval is the same map of the NLL interval. "
    "Negative means B is better. Wins count seeds where B's NLL is lower; the sign test is the "
    "exact two-sided binomial test over seeds without ties. Verdict: better/worse when the "
    "interval excludes zero, bounded when it lies within ±0.2% perplexity, else inconclusive. "
    "Tokens per arm = steps × batch × sequence length. Compute is the training and evaluation time "
    "of every arm of every seed. A seed where an arm diverged is listed under Diverged and left "
    "out of the statistics.";

// Series in order of first appearance in the sorted rows (so: sorted by pair).
std::vector<std::string> series_of(const std::vector<ScaleRow>& rows) {
  std::vector<std::string> out;
  for (const ScaleRow& r : rows)
    if (std::find(out.begin(), out.end(), r.pair_label()) == out.end())
      out.push_back(r.pair_label());
  return out;
}

}  // namespace

std::string scales_effect_chart(const std::vector<ScaleRow>& rows, int width, int height) {
  const std::string title = "Effect on validation perplexity against model size";
  if (rows.empty()) return svg_no_data(title, width);
  const std::vector<std::string> series = series_of(rows);
  const double left = 92, right = 20, top = 40;
  const double legend_rows = static_cast<double>((series.size() + 1) / 2);
  const double bottom = 52 + 18 * legend_rows;
  const double plot_w = width - left - right, plot_h = height - top - bottom;

  // x: log10(parameters), padded a fifth of a decade (half a decade for a single size).
  double lo_x = 1e300, hi_x = -1e300, lo_y = 0, hi_y = 0;  // y always shows zero
  for (const ScaleRow& r : rows) {
    const double lx = std::log10(static_cast<double>(std::max<int64_t>(r.parameters, 1)));
    lo_x = std::min(lo_x, lx), hi_x = std::max(hi_x, lx);
    for (double y : {r.ppl_percent, r.ppl_ci95_low, r.ppl_ci95_high})
      if (std::isfinite(y)) lo_y = std::min(lo_y, y), hi_y = std::max(hi_y, y);
  }
  const double pad_x = hi_x - lo_x < 0.5 ? 0.5 : 0.2;
  lo_x -= pad_x, hi_x += pad_x;
  // y: a nice step (1, 2 or 5 × 10^k) giving about five ticks.
  if (hi_y - lo_y <= 0) hi_y = lo_y + 1;
  const double raw = (hi_y - lo_y) / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = (raw / mag < 1.5 ? 1 : raw / mag < 3 ? 2 : raw / mag < 7 ? 5 : 10) * mag;
  lo_y = std::floor(lo_y / step - 1e-9) * step, hi_y = std::ceil(hi_y / step + 1e-9) * step;
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  auto X = [&](double params) {
    return left + (std::log10(params) - lo_x) / (hi_x - lo_x) * plot_w;
  };
  auto Y = [&](double v) { return top + (hi_y - v) / (hi_y - lo_y) * plot_h; };

  std::string svg = svg_chart_open(width, height, title);
  // y grid and ticks
  for (int k = 0; lo_y + k * step <= hi_y + step * 1e-9 && k <= 40; ++k) {
    double v = lo_y + k * step;
    if (std::fabs(v) < step * 1e-9) v = 0;
    const double y = Y(v);
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"1\"{}/>\n",
        px(left), px(y), px(left + plot_w), px(y), v == 0 ? "#6b7280" : "#eceef2",
        v == 0 ? " stroke-dasharray=\"4 3\"" : "");
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#4b5563\">{:+.{}f}%</text>\n",
        px(left - 6), px(y + 4), v, decimals);
  }
  // x ticks at 1, 2 and 5 × 10^k inside the range
  for (int e = static_cast<int>(std::floor(lo_x)); e <= static_cast<int>(std::ceil(hi_x)); ++e)
    for (int m : {1, 2, 5}) {
      const double v = m * std::pow(10.0, e);
      if (std::log10(v) < lo_x || std::log10(v) > hi_x) continue;
      const double x = X(v);
      svg += fmt::format(
          "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"1\"/>\n",
          px(x), px(top), px(top + plot_h), m == 1 ? "#e3e6eb" : "#f3f4f7");
      svg +=
          fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#4b5563\">{}</text>\n",
                      px(x), px(top + plot_h + 16), short_count(v));
    }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#c8ccd4\"/>\n",
      px(left), px(top), px(plot_w), px(plot_h));
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#1d2330\">parameters (method arm B, "
      "log scale)</text>\n",
      px(left + plot_w / 2), px(top + plot_h + 34));
  svg += fmt::format(
      "<text x=\"18\" y=\"{0}\" text-anchor=\"middle\" fill=\"#1d2330\" transform=\"rotate(-90 18 "
      "{0})\">perplexity B vs A (%), 95% CI</text>\n",
      px(top + plot_h / 2));

  // One series per pair: a line through its points, interval bars with caps, the points.
  for (size_t s = 0; s < series.size(); ++s) {
    const char* color = kSeriesColors[s % std::size(kSeriesColors)];
    // Pairs at the same size sit side by side, 7 px apart, so their bars do not overlap.
    const double dx = (static_cast<double>(s) - (static_cast<double>(series.size()) - 1) / 2) * 7;
    std::string line, marks;
    for (const ScaleRow& r : rows) {
      if (r.pair_label() != series[s]) continue;
      const double x = X(static_cast<double>(r.parameters)) + dx;
      line += (line.empty() ? "" : " ") + px(x) + "," + px(Y(r.ppl_percent));
      marks += fmt::format(
          "<g class=\"point\" data-series=\"{}\" data-label=\"{}\" data-x=\"{}\" data-y=\"{:.6g}\" "
          "data-low=\"{:.6g}\" data-high=\"{:.6g}\">\n",
          html_escape(series[s]), html_escape(r.label), r.parameters, r.ppl_percent, r.ppl_ci95_low,
          r.ppl_ci95_high);
      marks += fmt::format(
          "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\" "
          "stroke-width=\"1.5\"/>\n"
          "<line x1=\"{4}\" y1=\"{1}\" x2=\"{5}\" y2=\"{1}\" stroke=\"{3}\" "
          "stroke-width=\"1.5\"/>\n"
          "<line x1=\"{4}\" y1=\"{2}\" x2=\"{5}\" y2=\"{2}\" stroke=\"{3}\" "
          "stroke-width=\"1.5\"/>\n",
          px(x), px(Y(r.ppl_ci95_low)), px(Y(r.ppl_ci95_high)), color, px(x - 4), px(x + 4));
      marks += fmt::format(
          "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\" stroke=\"#ffffff\" stroke-width=\"1\">"
          "<title>{}: {} at {} parameters, {:+.3f}% [{:+.3f}%, {:+.3f}%]</title></circle>\n</g>\n",
          px(x), px(Y(r.ppl_percent)), color, html_escape(series[s]), html_escape(r.label),
          group_digits(r.parameters), r.ppl_percent, r.ppl_ci95_low, r.ppl_ci95_high);
    }
    svg += fmt::format(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" "
        "stroke-opacity=\"0.6\"/>\n",
        line, color);
    svg += marks;
    // legend: two entries per row under the axis title
    const double lx = left + static_cast<double>(s % 2) * (plot_w / 2);
    const double ly = top + plot_h + 52 + 18 * static_cast<double>(s / 2);
    svg += fmt::format(
        "<g class=\"legend\"><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" "
        "stroke-width=\"3\"/><text x=\"{}\" y=\"{}\" fill=\"#1d2330\">{}</text></g>\n",
        px(lx), px(ly - 4), px(lx + 18), px(ly - 4), color, px(lx + 24), px(ly),
        html_escape(series[s]));
  }
  svg += "</svg>\n";
  return svg;
}

namespace {

template <size_t N>
std::string markdown_table(const std::vector<ScaleRow>& rows, const Column (&columns)[N]) {
  std::string md = "|", rule = "|";
  for (const Column& c : columns) {
    md += fmt::format(" {} |", c.title);
    rule += c.numeric ? "---:|" : "---|";
  }
  md += "\n" + rule + "\n";
  for (const ScaleRow& r : rows) {
    md += "|";
    for (const Column& c : columns) md += " " + md_cell(c.cell(r)) + " |";
    md += "\n";
  }
  return md;
}

template <size_t N>
std::string html_table(const std::vector<ScaleRow>& rows, const Column (&columns)[N]) {
  std::string h = "<table>\n<tr>";
  for (const Column& c : columns)
    h += fmt::format("<th{}>{}</th>", c.numeric ? " class=\"num\"" : "", html_escape(c.title));
  h += "</tr>\n";
  for (const ScaleRow& r : rows) {
    h += "<tr>";
    for (const Column& c : columns) {
      // "value [low, high]": the interval on its own line, so the numeric cells stay narrow.
      std::string text = html_escape(c.cell(r));
      if (const size_t bracket = text.find(" ["); c.numeric && bracket != std::string::npos)
        text.replace(bracket, 1, "<br>");
      h += fmt::format("<td{}>{}</td>", c.numeric ? " class=\"num\"" : "", text);
    }
    h += "</tr>\n";
  }
  return h + "</table>\n";
}

}  // namespace

std::string render_scales_table(const std::vector<ScaleRow>& rows) {
  return markdown_table(rows, kEffectColumns) + "\n" + markdown_table(rows, kBudgetColumns);
}

std::string render_scales_markdown(const std::vector<ScaleRow>& rows) {
  std::string md = "# Paired comparisons across scales\n\n";
  md += fmt::format(
      "{} runs; pairs: {}. The chart of the effect against parameter count (scales.svg, also in "
      "scales.html):\n\n![Effect on validation perplexity against model size](scales.svg)\n\n",
      rows.size(), join(series_of(rows), ", "));
  md += render_scales_table(rows);
  md += "\n" + std::string(kDefinitions) + "\n\n## Sources\n\n";
  for (const ScaleRow& r : rows)
    md +=
        fmt::format("- {} {}: `{}` ({}; depthgrad {}; wall time of the finishing invocation {})\n",
                    r.label, r.pair_label(), r.source, r.metric,
                    r.version.empty() ? "?" : r.version, duration(r.wall_seconds));
  return md;
}

std::string render_scales_html(const std::vector<ScaleRow>& rows, const std::string& chart_svg) {
  std::set<std::string> versions;
  for (const ScaleRow& r : rows) versions.insert(r.version.empty() ? "?" : r.version);
  PageShell shell;
  shell.title = "Paired comparisons across scales";
  shell.command = "reproduce --combine";
  shell.meta_html =
      html_escape(fmt::format("{} runs; pairs: {}", rows.size(), join(series_of(rows), ", ")));
  shell.version = join(std::vector<std::string>(versions.begin(), versions.end()), ", ");
  std::string h = "<section id=\"effect\">\n<h2>Effect against model size</h2>\n";
  h += "<figure>\n" + chart_svg +
       "<figcaption>Each point is one paired run: the mean effect of B against A on validation "
       "perplexity, with its 95% interval; one line per pair. Below zero, B is better.</figcaption>"
       "\n</figure>\n</section>\n";
  h += "<section id=\"table\">\n<h2>Runs</h2>\n<h3>Effect</h3>\n" +
       html_table(rows, kEffectColumns) + "<h3>Budget, routes and divergences</h3>\n" +
       html_table(rows, kBudgetColumns);
  h += "<p>" + html_escape(kDefinitions) + "</p>\n</section>\n";
  h += "<section id=\"sources\">\n<h2>Sources</h2>\n<ul>\n";
  for (const ScaleRow& r : rows)
    h += fmt::format(
        "<li>{} {}: <code>{}</code> ({}; depthgrad {}; wall time of the finishing "
        "invocation {})</li>\n",
        html_escape(r.label), html_escape(r.pair_label()), html_escape(r.source),
        html_escape(r.metric), html_escape(r.version.empty() ? "?" : r.version),
        duration(r.wall_seconds));
  h += "</ul>\n</section>\n";
  return render_page(shell, h);
}

}  // namespace dg
