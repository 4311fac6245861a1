// The SVG charts of every report (see charts.h): axes with "nice" ticks and a shared power of ten,
// legends laid out in rows, polylines split at non-finite values, bars hanging from zero, and a
// sequential blue scale for heatmaps.
#include "train/experiments/report/charts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "train/experiments/report/text.h"

namespace dg {

namespace {

const char* const kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

// Coordinates with one decimal: small output, still sub-pixel.
std::string px(double v) { return fmt::format("{:.1f}", v); }

double text_width(const std::string& s, double font_px) {
  return 0.6 * font_px * static_cast<double>(s.size());
}

}  // namespace

std::string svg_chart_open(int width, int height, const std::string& title) {
  const std::string t = html_escape(title);
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"'DejaVu Sans', Verdana, sans-serif\" font-size=\"11\" "
      "role=\"img\" aria-label=\"{2}\">\n<title>{2}</title>\n<rect width=\"{0}\" height=\"{1}\" "
      "fill=\"#ffffff\"/>\n"
      "<text x=\"12\" y=\"20\" font-size=\"13\" font-weight=\"bold\" fill=\"#1d2330\">{2}</text>\n",
      width, height, t);
}

std::string svg_no_data(const std::string& title, int width) {
  return svg_chart_open(width, 80, title) +
         fmt::format(
             "<text class=\"no-data\" x=\"{}\" y=\"52\" text-anchor=\"middle\" "
             "fill=\"#6b7280\">no data</text>\n</svg>\n",
             width / 2);
}

namespace {

size_t widest_row(const std::vector<std::vector<double>>& m) {
  size_t w = 0;
  for (const auto& row : m) w = std::max(w, row.size());
  return w;
}

// An axis range [lo, hi] with a "nice" tick step (1, 2 or 5 × 10^k) and about `ticks` ticks.
struct Axis {
  double lo, hi, step;
};
Axis nice_axis(double lo, double hi, int ticks) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.05;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double step = (norm < 1.5 ? 1.0 : norm < 3.0 ? 2.0 : norm < 7.0 ? 5.0 : 10.0) * magnitude;
  return {std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step, step};
}

std::vector<double> axis_ticks(const Axis& a) {
  std::vector<double> t;
  const int n = static_cast<int>(std::llround((a.hi - a.lo) / a.step));
  for (int k = 0; k <= n && k <= 100; ++k) {
    double v = a.lo + k * a.step;
    if (std::abs(v) < a.step * 1e-9) v = 0;  // no "-0.00"
    t.push_back(v);
  }
  return t;
}

// Tick labels of one axis share a format; very small or very large ranges show a common power
// of ten in the axis title instead ("-14 … 0" with "×1e-5", not "-0.00014 … 0").
struct TickFormat {
  int exponent = 0;
  int decimals = 0;
};
TickFormat tick_format(const Axis& a) {
  TickFormat f;
  const double largest = std::max(std::abs(a.lo), std::abs(a.hi));
  if (a.step < 1e-3 || largest >= 1e6)
    f.exponent = static_cast<int>(std::floor(std::log10(a.step) + 1e-9));
  const double scaled_step = a.step / std::pow(10.0, f.exponent);
  f.decimals = std::max(0, static_cast<int>(-std::floor(std::log10(scaled_step) + 1e-9)));
  return f;
}
std::string tick_text(double v, const TickFormat& f) {
  return fmt::format("{:.{}f}", v / std::pow(10.0, f.exponent), f.decimals);
}
std::string axis_title(const std::string& label, const TickFormat& f) {
  return f.exponent == 0 ? label : fmt::format("{} ×1e{}", label, f.exponent);
}

// Value labels on bars: three significant digits, in one style for tiny and huge values.
std::string value_label(double v) {
  const double a = std::abs(v);
  if (a != 0 && (a < 1e-3 || a >= 1e6)) return fmt::format("{:.2e}", v);
  return fmt::format("{:.3g}", v);
}

// Sequential blue scale for [0, 1] (clamped), interpolated between five stops.
std::string heat_color(double v) {
  static const int stops[5][3] = {
      {247, 251, 255}, {198, 219, 239}, {107, 174, 214}, {33, 113, 181}, {8, 48, 107}};
  v = std::clamp(v, 0.0, 1.0) * 4.0;
  const int i = std::min(3, static_cast<int>(v));
  const double f = v - i;
  int c[3];
  for (int k = 0; k < 3; ++k)
    c[k] = static_cast<int>(std::lround(stops[i][k] + f * (stops[i + 1][k] - stops[i][k])));
  return fmt::format("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]);
}

// Legend entries laid out in rows of at most `avail` pixels; returns the SVG and the height.
std::pair<std::string, int> svg_legend(
    const std::vector<std::pair<std::string, std::string>>& items, double x0, double y0,
    double avail) {
  std::string out;
  double x = x0, y = y0;
  int rows = items.empty() ? 0 : 1;
  for (const auto& [label, color] : items) {
    const double w = 24 + text_width(label, 11) + 14;
    if (x > x0 && x + w > x0 + avail) {
      x = x0;
      y += 18;
      ++rows;
    }
    out += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2.5\"/>"
        "<text x=\"{}\" y=\"{}\" fill=\"#333\">{}</text>\n",
        px(x), px(y - 4), px(x + 18), px(y - 4), color, px(x + 23), px(y), html_escape(label));
    x += w;
  }
  return {out, rows * 18};
}

}  // namespace

std::string svg_line_chart(const std::string& title, const std::string& x_label,
                           const std::string& y_label, const std::vector<Series>& series, int width,
                           int height) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  size_t longest = 0;
  for (const Series& s : series) {
    longest = std::max(longest, s.y.size());
    for (double v : s.y)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (!std::isfinite(lo)) return svg_no_data(title, width);

  const double ml = 66, mr = 16, mt = 34, mb = 46;
  const double pw = width - ml - mr, ph = height - mt - mb;
  // Legend below the x-axis label.
  std::vector<std::pair<std::string, std::string>> items;
  for (size_t i = 0; i < series.size(); ++i)
    items.emplace_back(series[i].label,
                       series[i].color.empty() ? kPalette[i % 10] : series[i].color);
  auto [legend, legend_h] = svg_legend(items, ml, height + 6, pw);
  const int total_h = height + (legend_h > 0 ? legend_h + 8 : 0);

  const Axis ya = nice_axis(lo, hi, 5);
  const Axis xa = nice_axis(0, std::max<double>(1, static_cast<double>(longest) - 1), 8);
  const double x_hi = std::max(xa.hi, 1.0);
  auto X = [&](double x) { return ml + x / x_hi * pw; };
  auto Y = [&](double y) { return mt + (ya.hi - y) / (ya.hi - ya.lo) * ph; };

  const TickFormat yf = tick_format(ya), xf = tick_format(xa);
  std::string out = svg_chart_open(width, total_h, title);
  out += "<g stroke=\"#e5e7eb\" stroke-width=\"1\">\n";
  for (double t : axis_ticks(ya))
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>", px(ml), px(Y(t)),
                       px(ml + pw), px(Y(t)));
  out += "\n</g>\n<g fill=\"#4b5563\">\n";
  for (double t : axis_ticks(ya))
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", px(ml - 6),
                       px(Y(t) + 4), tick_text(t, yf));
  for (double t : axis_ticks(xa)) {
    if (t > x_hi + 1e-9) break;
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#9ca3af\"/>"
        "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>",
        px(X(t)), px(mt + ph), px(mt + ph + 5), px(mt + ph + 18), tick_text(t, xf));
  }
  out += "\n</g>\n";
  if (ya.lo < 0 && ya.hi > 0)
    out += fmt::format(
        "<line class=\"zero\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#6b7280\"/>\n",
        px(ml), px(Y(0)), px(ml + pw), px(Y(0)));
  out += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#9ca3af\"/>\n",
      px(ml), px(mt), px(pw), px(ph));
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#374151\">{}</text>\n",
                     px(ml + pw / 2), px(mt + ph + 36), html_escape(axis_title(x_label, xf)));
  out += fmt::format(
      "<text x=\"14\" y=\"{0}\" transform=\"rotate(-90 14 {0})\" text-anchor=\"middle\" "
      "fill=\"#374151\">{1}</text>\n",
      px(mt + ph / 2), html_escape(axis_title(y_label, yf)));

  // One polyline per run of finite points; a lone point becomes a dot. Long or many curves get
  // thinner, slightly transparent strokes so overlapping curves stay visible.
  const std::string stroke = longest > 150 || series.size() > 4
                                 ? "stroke-width=\"1.1\" stroke-opacity=\"0.8\""
                                 : "stroke-width=\"1.6\"";
  for (size_t i = 0; i < series.size(); ++i) {
    const std::string& color = items[i].second;
    std::vector<std::pair<double, double>> run;
    auto flush = [&] {
      if (run.size() == 1) {
        out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"{}\"/>\n",
                           px(run[0].first), px(run[0].second), color);
      } else if (run.size() > 1) {
        out += fmt::format(
            "<polyline fill=\"none\" stroke=\"{}\" {} stroke-linejoin=\"round\" points=\"", color,
            stroke);
        for (size_t k = 0; k < run.size(); ++k)
          out += (k ? " " : "") + px(run[k].first) + "," + px(run[k].second);
        out += "\"/>\n";
      }
      run.clear();
    };
    for (size_t k = 0; k < series[i].y.size(); ++k) {
      const double v = series[i].y[k];
      if (std::isfinite(v))
        run.emplace_back(X(static_cast<double>(k)), Y(v));
      else
        flush();
    }
    flush();
  }
  out += legend;
  return out + "</svg>\n";
}

std::string svg_bar_chart(const std::string& title, const std::vector<std::string>& labels,
                          const std::vector<double>& values, const std::string& y_label, int width,
                          int height) {
  double lo = 0, hi = 0;
  bool any = false;
  for (double v : values)
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v), any = true;
  if (!any) return svg_no_data(title, width);

  const double ml = 66, mr = 16, mt = 40, mb = 40;
  const double pw = width - ml - mr, ph = height - mt - mb;
  const double room = 0.12 * (hi - lo);  // space for the value labels beyond the longest bars
  const Axis ya = nice_axis(lo < 0 ? lo - room : lo, hi > 0 ? hi + room : hi, 5);
  auto Y = [&](double y) { return mt + (ya.hi - y) / (ya.hi - ya.lo) * ph; };
  const double slot = pw / static_cast<double>(values.size());
  const double bar = std::min(56.0, slot * 0.6);

  const TickFormat yf = tick_format(ya);
  std::string out = svg_chart_open(width, height, title);
  out += "<g stroke=\"#e5e7eb\">";
  for (double t : axis_ticks(ya))
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>", px(ml), px(Y(t)),
                       px(ml + pw), px(Y(t)));
  out += "</g>\n<g fill=\"#4b5563\">";
  for (double t : axis_ticks(ya))
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", px(ml - 6),
                       px(Y(t) + 4), tick_text(t, yf));
  out += "</g>\n";
  out += fmt::format(
      "<text x=\"14\" y=\"{0}\" transform=\"rotate(-90 14 {0})\" text-anchor=\"middle\" "
      "fill=\"#374151\">{1}</text>\n",
      px(mt + ph / 2), html_escape(axis_title(y_label, yf)));
  const double zero = Y(0);
  const size_t max_chars = static_cast<size_t>(std::max(3.0, slot / 6.6));
  for (size_t i = 0; i < values.size(); ++i) {
    const double cx = ml + slot * (static_cast<double>(i) + 0.5);
    std::string label = i < labels.size() ? labels[i] : "";
    if (label.size() > max_chars) label = label.substr(0, max_chars - 1) + "…";
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#374151\">{}</text>",
                       px(cx), px(mt + ph + 16), html_escape(label));
    const double v = values[i];
    if (!std::isfinite(v)) {
      out += fmt::format(
          "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#6b7280\">n/a</text>\n", px(cx),
          px(zero - 4));
      continue;
    }
    const double top = std::min(Y(v), zero), h = std::max(std::abs(Y(v) - zero), 0.5);
    out += fmt::format(
        "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}: "
        "{}</title></rect>",
        v < 0 ? "bar neg" : "bar pos", px(cx - bar / 2), px(top), px(bar), px(h),
        v < 0 ? "#f28e2b" : "#4e79a7", html_escape(i < labels.size() ? labels[i] : ""),
        fmt::format("{}", v));
    const double ly = v < 0 ? top + h + 13 : top - 4;
    out +=
        fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#111827\">{}</text>\n",
                    px(cx), px(ly), value_label(v));
  }
  out += fmt::format(
      "<line class=\"zero\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#111827\" "
      "stroke-width=\"1.2\"/>\n",
      px(ml), px(zero), px(ml + pw), px(zero));
  return out + "</svg>\n";
}

std::string svg_heatmap(const std::string& title, const std::vector<std::string>& row_labels,
                        const std::vector<std::string>& column_labels,
                        const std::vector<std::vector<double>>& values, int cell) {
  const size_t rows = values.size(), cols = std::max(widest_row(values), column_labels.size());
  if (rows == 0 || cols == 0) return svg_no_data(title, 320);
  const double c = cell;
  double label_w = 0, col_label_w = 0;
  for (const std::string& s : row_labels) label_w = std::max(label_w, text_width(s, 11));
  for (const std::string& s : column_labels) col_label_w = std::max(col_label_w, text_width(s, 11));
  const bool rotate = col_label_w > c - 4;
  const double ml = 12 + label_w + 8, mt = 34 + (rotate ? col_label_w * 0.75 + 6 : 16);
  const double grid_w = c * cols, grid_h = c * rows;
  const double scale_y = mt + grid_h + 14;
  const int width = static_cast<int>(
      std::ceil(std::max({ml + grid_w + 16, text_width(title, 13) + 28, ml + 10 * 14 + 40.0})));
  const int height = static_cast<int>(std::ceil(scale_y + 30));

  std::string out = svg_chart_open(width, height, title);
  for (size_t j = 0; j < column_labels.size(); ++j) {
    const double x = ml + c * (static_cast<double>(j) + 0.5);
    if (rotate)
      out += fmt::format(
          "<text x=\"{0}\" y=\"{1}\" transform=\"rotate(-45 {0} {1})\" fill=\"#374151\">{2}</text>",
          px(x - 2), px(mt - 6), html_escape(column_labels[j]));
    else
      out +=
          fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#374151\">{}</text>",
                      px(x), px(mt - 6), html_escape(column_labels[j]));
  }
  out += "\n";
  for (size_t i = 0; i < rows; ++i) {
    const double y = mt + c * static_cast<double>(i);
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#374151\">{}</text>",
                       px(ml - 6), px(y + c / 2 + 4),
                       html_escape(i < row_labels.size() ? row_labels[i] : ""));
    for (size_t j = 0; j < cols; ++j) {
      const double x = ml + c * static_cast<double>(j);
      if (j >= values[i].size()) {  // ragged rows: layer l has l + 1 sources
        out += fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f3f4f6\" "
            "stroke=\"#ffffff\"/>",
            px(x), px(y), px(c), px(c));
        continue;
      }
      const double v = values[i][j];
      if (!std::isfinite(v)) {
        out += fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#d1d5db\" "
            "stroke=\"#ffffff\"/>"
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\" "
            "fill=\"#374151\">n/a</text>",
            px(x), px(y), px(c), px(c), px(x + c / 2), px(y + c / 2 + 4));
        continue;
      }
      out += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" "
          "stroke=\"#ffffff\"><title>{}</title></rect>"
          "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{}\" "
          "fill=\"{}\">{:.2f}</text>",
          px(x), px(y), px(c), px(c), heat_color(v), fmt::format("{}", v), px(x + c / 2),
          px(y + c / 2 + 4), c >= 30 ? 11 : 9, v > 0.55 ? "#ffffff" : "#111827", v);
    }
    out += "\n";
  }
  // Colour scale: ten swatches from 0 to 1.
  for (int k = 0; k < 10; ++k)
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"10\" fill=\"{}\"/>",
                       px(ml + 14.0 * k), px(scale_y), heat_color((k + 0.5) / 10.0));
  out += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#4b5563\">0</text>"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#4b5563\">1</text>\n",
      px(ml), px(scale_y + 22), px(ml + 140), px(scale_y + 22));
  return out + "</svg>\n";
}

}  // namespace dg
