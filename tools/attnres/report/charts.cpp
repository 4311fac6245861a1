// The SVG charts of every report (see charts.h): axes with "nice" ticks and a shared power of ten,
// legends laid out in rows with a swatch per kind of mark, polylines split at non-finite values,
// shaded bands, bars hanging from zero with error bars, points with intervals on a linear or log
// axis, and a sequential blue scale for heatmaps.
#include "tools/attnres/report/charts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "tools/attnres/report/page.h"
#include "tools/attnres/report/text.h"

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
      "viewBox=\"0 0 {0} {1}\" font-family=\"{3}\" font-size=\"11\" "
      "role=\"img\" aria-label=\"{2}\">\n<title>{2}</title>\n<rect width=\"{0}\" height=\"{1}\" "
      "fill=\"#ffffff\"/>\n"
      "<text x=\"12\" y=\"20\" font-size=\"13\" font-weight=\"bold\" fill=\"#1d2330\">{2}</text>\n",
      width, height, t, kReportFontStack);
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

// A legend entry: how its swatch is drawn.
enum class Swatch { line, band_line, dashed, marker, error_bar, band_dashed };
struct LegendItem {
  std::string label, color;
  Swatch swatch = Swatch::line;
};

// Legend entries laid out in rows of at most `avail` pixels; returns the SVG and the height.
std::pair<std::string, int> svg_legend(const std::vector<LegendItem>& items, double x0, double y0,
                                       double avail) {
  std::string out = "<g class=\"legend\">\n";
  double x = x0, y = y0;
  int rows = items.empty() ? 0 : 1;
  for (const LegendItem& item : items) {
    const double w = 24 + text_width(item.label, 11) + 14;
    if (x > x0 && x + w > x0 + avail) {
      x = x0;
      y += 18;
      ++rows;
    }
    const double my = y - 4;
    std::string swatch;
    switch (item.swatch) {
      case Swatch::band_line:
      case Swatch::band_dashed:
        swatch = fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"18\" height=\"10\" fill=\"{}\" fill-opacity=\"0.22\"/>"
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"{}/>",
            px(x), px(my - 5), item.color, px(x), px(my), px(x + 18), px(my), item.color,
            item.swatch == Swatch::band_dashed ? " stroke-dasharray=\"4 2\"" : "");
        break;
      case Swatch::dashed:
        swatch = fmt::format(
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\" "
            "stroke-dasharray=\"4 2\"/>",
            px(x), px(my), px(x + 18), px(my), item.color);
        break;
      case Swatch::marker:
        swatch = fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"/>", px(x + 9), px(my),
                             item.color);
        break;
      case Swatch::error_bar:
        swatch = fmt::format(
            "<path d=\"M{0} {1}V{2}M{3} {1}H{4}M{3} {2}H{4}\" stroke=\"{5}\" fill=\"none\"/>",
            px(x + 9), px(my - 6), px(my + 6), px(x + 5), px(x + 13), item.color);
        break;
      case Swatch::line:
        swatch = fmt::format(
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2.5\"/>",
            px(x), px(my), px(x + 18), px(my), item.color);
        break;
    }
    out += "<g class=\"legend-entry\">" + swatch +
           fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#333\">{}</text></g>\n", px(x + 23), px(y),
                       html_escape(item.label));
    x += w;
  }
  return {out + "</g>\n", rows * 18};
}

// The frame of an x–y plot: grid, tick labels, axis titles and the plot rectangle.
struct Frame {
  double ml = 66, mr = 16, mt = 34, mb = 46;
  double pw = 0, ph = 0;
};
std::string svg_y_grid(const Frame& f, const Axis& ya, const std::function<double(double)>& Y) {
  const TickFormat yf = tick_format(ya);
  std::string out = "<g stroke=\"#e5e7eb\" stroke-width=\"1\">\n";
  for (double t : axis_ticks(ya))
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>", px(f.ml), px(Y(t)),
                       px(f.ml + f.pw), px(Y(t)));
  out += "\n</g>\n<g class=\"y-ticks\" fill=\"#4b5563\">\n";
  for (double t : axis_ticks(ya))
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", px(f.ml - 6),
                       px(Y(t) + 4), tick_text(t, yf));
  return out + "\n</g>\n";
}
std::string svg_axis_titles(const Frame& f, const std::string& x_title,
                            const std::string& y_title) {
  std::string out = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#9ca3af\"/>\n",
      px(f.ml), px(f.mt), px(f.pw), px(f.ph));
  if (!x_title.empty())
    out +=
        fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#374151\">{}</text>\n",
                    px(f.ml + f.pw / 2), px(f.mt + f.ph + f.mb - 10), html_escape(x_title));
  out += fmt::format(
      "<text x=\"14\" y=\"{0}\" transform=\"rotate(-90 14 {0})\" text-anchor=\"middle\" "
      "fill=\"#374151\">{1}</text>\n",
      px(f.mt + f.ph / 2), html_escape(y_title));
  return out;
}

// Whole-number ticks: a step of at least 1.
Axis integer_axis(double lo, double hi, int ticks) {
  Axis a = nice_axis(lo, hi, ticks);
  if (a.step < 1) a = {std::floor(lo), std::ceil(hi) > std::floor(lo) ? std::ceil(hi) : lo + 1, 1};
  return a;
}

// Polylines through (x, y) split at non-finite values; a lone point becomes a dot.
std::string svg_polylines(const std::vector<std::pair<double, double>>& points,
                          const std::string& color, const std::string& stroke_attributes) {
  std::string out;
  std::vector<std::pair<double, double>> run;
  auto flush = [&] {
    if (run.size() == 1) {
      out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"{}\"/>\n", px(run[0].first),
                         px(run[0].second), color);
    } else if (run.size() > 1) {
      out += fmt::format(
          "<polyline fill=\"none\" stroke=\"{}\" {} stroke-linejoin=\"round\" points=\"", color,
          stroke_attributes);
      for (size_t k = 0; k < run.size(); ++k)
        out += (k ? " " : "") + px(run[k].first) + "," + px(run[k].second);
      out += "\"/>\n";
    }
    run.clear();
  };
  for (const auto& [x, y] : points) {
    if (std::isfinite(x) && std::isfinite(y))
      run.emplace_back(x, y);
    else
      flush();
  }
  flush();
  return out;
}

// A closed band between lo(x) and hi(x), split where either end is not finite.
std::string svg_band(const std::vector<double>& lo, const std::vector<double>& hi,
                     const std::function<double(double)>& X, const std::function<double(double)>& Y,
                     const std::string& color) {
  std::string out;
  const size_t n = std::min(lo.size(), hi.size());
  size_t k = 0;
  while (k < n) {
    while (k < n && !(std::isfinite(lo[k]) && std::isfinite(hi[k]))) ++k;
    const size_t first = k;
    while (k < n && std::isfinite(lo[k]) && std::isfinite(hi[k])) ++k;
    if (k - first < 2) continue;
    std::string d = fmt::format("M{} {}", px(X(static_cast<double>(first))), px(Y(hi[first])));
    for (size_t i = first + 1; i < k; ++i)
      d += fmt::format("L{} {}", px(X(static_cast<double>(i))), px(Y(hi[i])));
    for (size_t i = k; i-- > first;)
      d += fmt::format("L{} {}", px(X(static_cast<double>(i))), px(Y(lo[i])));
    out += fmt::format(
        "<path class=\"band\" d=\"{}Z\" fill=\"{}\" fill-opacity=\"0.22\" stroke=\"none\"/>\n", d,
        color);
  }
  return out;
}

}  // namespace

std::string svg_line_chart(const std::string& title, const std::string& x_label,
                           const std::string& y_label, const std::vector<Series>& series, int width,
                           int height) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  size_t longest = 0;
  auto extend = [&](const std::vector<double>& v) {
    for (double y : v)
      if (std::isfinite(y)) lo = std::min(lo, y), hi = std::max(hi, y);
  };
  for (const Series& s : series) {
    longest = std::max(longest, s.y.size());
    extend(s.y);
    extend(s.band_lo);
    extend(s.band_hi);
  }
  if (!std::isfinite(lo)) return svg_no_data(title, width);

  Frame f;
  f.pw = width - f.ml - f.mr;
  f.ph = height - f.mt - f.mb;
  std::vector<std::string> colors;
  std::vector<LegendItem> items;
  size_t palette = 0;
  for (const Series& s : series) {
    colors.push_back(s.color.empty() ? kPalette[palette++ % 10] : s.color);
    if (!s.faint && !s.label.empty())
      items.push_back(
          {s.label, colors.back(), s.band_lo.empty() ? Swatch::line : Swatch::band_line});
  }
  auto [legend, legend_h] = svg_legend(items, f.ml, height + 6, f.pw);
  const int total_h = height + (legend_h > 0 ? legend_h + 8 : 0);

  const Axis ya = nice_axis(lo, hi, 5);
  const Axis xa = integer_axis(0, std::max<double>(1, static_cast<double>(longest) - 1), 8);
  const double x_hi = std::max(xa.hi, 1.0);
  const std::function<double(double)> X = [&](double x) { return f.ml + x / x_hi * f.pw; };
  const std::function<double(double)> Y = [&](double y) {
    return f.mt + (ya.hi - y) / (ya.hi - ya.lo) * f.ph;
  };

  const TickFormat yf = tick_format(ya), xf = tick_format(xa);
  std::string out = svg_chart_open(width, total_h, title);
  out += svg_y_grid(f, ya, Y);
  out += "<g class=\"x-ticks\" fill=\"#4b5563\">\n";
  for (double t : axis_ticks(xa)) {
    if (t > x_hi + 1e-9) break;
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#9ca3af\"/>"
        "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>",
        px(X(t)), px(f.mt + f.ph), px(f.mt + f.ph + 5), px(f.mt + f.ph + 18), tick_text(t, xf));
  }
  out += "\n</g>\n";
  if (ya.lo < 0 && ya.hi > 0)
    out += fmt::format(
        "<line class=\"zero\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#6b7280\"/>\n",
        px(f.ml), px(Y(0)), px(f.ml + f.pw), px(Y(0)));
  out += svg_axis_titles(f, axis_title(x_label, xf), axis_title(y_label, yf));

  // Faint lines first, then bands, then the lines that carry the legend. Long or many curves get
  // thinner, slightly transparent strokes so overlapping curves stay visible.
  size_t bold = 0;
  for (const Series& s : series) bold += s.faint ? 0 : 1;
  const std::string stroke = longest > 150 || bold > 4
                                 ? "stroke-width=\"1.3\" stroke-opacity=\"0.85\""
                                 : "stroke-width=\"1.7\"";
  auto points_of = [&](const std::vector<double>& y) {
    std::vector<std::pair<double, double>> p;
    for (size_t k = 0; k < y.size(); ++k)
      p.emplace_back(X(static_cast<double>(k)), std::isfinite(y[k]) ? Y(y[k]) : y[k]);
    return p;
  };
  for (size_t i = 0; i < series.size(); ++i)
    if (series[i].faint)
      out += "<g class=\"faint\">" +
             svg_polylines(points_of(series[i].y), colors[i],
                           "stroke-width=\"0.8\" stroke-opacity=\"0.3\"") +
             "</g>\n";
  for (size_t i = 0; i < series.size(); ++i)
    if (!series[i].faint) out += svg_band(series[i].band_lo, series[i].band_hi, X, Y, colors[i]);
  for (size_t i = 0; i < series.size(); ++i)
    if (!series[i].faint) out += svg_polylines(points_of(series[i].y), colors[i], stroke);
  out += legend;
  return out + "</svg>\n";
}

std::string svg_bar_chart(const std::string& title, const std::vector<std::string>& labels,
                          const std::vector<double>& values, const std::string& y_label, int width,
                          int height, const BarErrors& errors, const ReferenceBand& band) {
  double lo = 0, hi = 0;
  bool any = false;
  for (double v : values)
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v), any = true;
  if (!any) return svg_no_data(title, width);
  for (const std::vector<double>* v : {&errors.lo, &errors.hi})
    for (double y : *v)
      if (std::isfinite(y)) lo = std::min(lo, y), hi = std::max(hi, y);
  for (double y : {band.lo, band.hi, band.at})
    if (std::isfinite(y)) lo = std::min(lo, y), hi = std::max(hi, y);

  std::vector<LegendItem> items;
  const bool has_errors = !errors.lo.empty() && !errors.hi.empty();
  if (has_errors && !errors.label.empty())
    items.push_back({errors.label, "#111827", Swatch::error_bar});
  const bool has_band = std::isfinite(band.lo) && std::isfinite(band.hi);
  if ((has_band || std::isfinite(band.at)) && !band.label.empty())
    items.push_back({band.label, "#6b7280", has_band ? Swatch::band_dashed : Swatch::dashed});

  Frame f;
  f.mt = 40;
  f.mb = 40;
  f.pw = width - f.ml - f.mr;
  f.ph = height - f.mt - f.mb;
  auto [legend, legend_h] = svg_legend(items, f.ml, height + 4, f.pw);
  const int total_h = height + (legend_h > 0 ? legend_h + 6 : 0);
  const double room = 0.12 * (hi - lo);  // space for the value labels beyond the longest bars
  const Axis ya = nice_axis(lo < 0 ? lo - room : lo, hi > 0 ? hi + room : hi, 5);
  const std::function<double(double)> Y = [&](double y) {
    return f.mt + (ya.hi - y) / (ya.hi - ya.lo) * f.ph;
  };
  const double slot = f.pw / static_cast<double>(values.size());
  const double bar = std::min(56.0, slot * 0.6);

  const TickFormat yf = tick_format(ya);
  std::string out = svg_chart_open(width, total_h, title);
  out += svg_y_grid(f, ya, Y);
  out += fmt::format(
      "<text x=\"14\" y=\"{0}\" transform=\"rotate(-90 14 {0})\" text-anchor=\"middle\" "
      "fill=\"#374151\">{1}</text>\n",
      px(f.mt + f.ph / 2), html_escape(axis_title(y_label, yf)));
  if (has_band)
    out += fmt::format(
        "<rect class=\"reference-band\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
        "fill=\"#6b7280\" fill-opacity=\"0.16\"/>\n",
        px(f.ml), px(Y(std::max(band.lo, band.hi))), px(f.pw),
        px(std::max(0.5, std::abs(Y(band.lo) - Y(band.hi)))));
  const double zero = Y(0);
  const size_t max_chars = static_cast<size_t>(std::max(3.0, slot / 6.6));
  for (size_t i = 0; i < values.size(); ++i) {
    const double cx = f.ml + slot * (static_cast<double>(i) + 0.5);
    std::string label = i < labels.size() ? labels[i] : "";
    if (label.size() > max_chars) label = label.substr(0, max_chars - 1) + "…";
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#374151\">{}</text>",
                       px(cx), px(f.mt + f.ph + 16), html_escape(label));
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
    double label_y = v < 0 ? top + h + 13 : top - 4;
    if (has_errors && i < errors.lo.size() && i < errors.hi.size() && std::isfinite(errors.lo[i]) &&
        std::isfinite(errors.hi[i])) {
      const double y_lo = Y(errors.lo[i]), y_hi = Y(errors.hi[i]);
      out += fmt::format(
          "<path class=\"error-bar\" d=\"M{0} {1}V{2}M{3} {1}H{4}M{3} {2}H{4}\" stroke=\"#111827\" "
          "stroke-width=\"1.2\" fill=\"none\"/>",
          px(cx), px(y_lo), px(y_hi), px(cx - 6), px(cx + 6));
      // The value label goes beyond the error bar's far end.
      label_y = v < 0 ? std::max(label_y, std::max(y_lo, y_hi) + 13)
                      : std::min(label_y, std::min(y_lo, y_hi) - 4);
    }
    out +=
        fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#111827\">{}</text>\n",
                    px(cx + (has_errors ? 10 : 0)), px(label_y), value_label(v));
  }
  out += fmt::format(
      "<line class=\"zero\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#111827\" "
      "stroke-width=\"1.2\"/>\n",
      px(f.ml), px(zero), px(f.ml + f.pw), px(zero));
  if (std::isfinite(band.at))
    out += fmt::format(
        "<line class=\"reference-line\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#374151\" "
        "stroke-width=\"1.2\" stroke-dasharray=\"5 3\"/>\n",
        px(f.ml), px(Y(band.at)), px(f.ml + f.pw), px(Y(band.at)));
  out += legend;
  return out + "</svg>\n";
}

std::string svg_interval_chart(const std::string& title, const std::string& x_label,
                               const std::string& y_label,
                               const std::vector<IntervalSeries>& series,
                               const IntervalChartOptions& o) {
  const int width = o.width, height = o.height;
  double ylo = std::numeric_limits<double>::infinity(), yhi = -ylo, xlo = ylo, xhi = -ylo;
  for (const IntervalSeries& s : series)
    for (const IntervalPoint& p : s.points) {
      if (!std::isfinite(p.x) || !std::isfinite(p.y) || (o.log_x && !(p.x > 0))) continue;
      const double x = o.log_x ? std::log10(p.x) : p.x;
      xlo = std::min(xlo, x), xhi = std::max(xhi, x);
      for (double y : {p.y, p.lo, p.hi})
        if (std::isfinite(y)) ylo = std::min(ylo, y), yhi = std::max(yhi, y);
    }
  if (!std::isfinite(ylo)) return svg_no_data(title, width);

  Frame f;
  const bool rotate = o.x_tick_labels.size() > 10;
  if (rotate) {
    double longest = 0;
    for (const auto& [x, label] : o.x_tick_labels)
      longest = std::max(longest, text_width(label, 11));
    f.mb = 30 + 0.7 * longest;
  }
  f.pw = width - f.ml - f.mr;
  f.ph = height - f.mt - f.mb;

  std::vector<std::string> colors;
  std::vector<LegendItem> items;
  size_t palette = 0;
  bool any_bar = false;
  for (const IntervalSeries& s : series) {
    colors.push_back(s.color.empty() ? kPalette[palette++ % 10] : s.color);
    for (const IntervalPoint& p : s.points) any_bar |= std::isfinite(p.lo) && std::isfinite(p.hi);
    if (s.label.empty()) continue;
    items.push_back({s.label, colors.back(),
                     s.markers  ? Swatch::marker
                     : s.dashed ? Swatch::dashed
                                : Swatch::line});
  }
  if (any_bar && !o.error_bar_label.empty())
    items.push_back({o.error_bar_label, "#374151", Swatch::error_bar});
  auto [legend, legend_h] = svg_legend(items, f.ml, height + 6, f.pw);
  const int total_h = height + (legend_h > 0 ? legend_h + 8 : 0);

  const Axis ya = nice_axis(ylo, yhi, 5);
  // x: a little room at both ends so markers and error bars are not cut by the frame.
  Axis xa = o.integer_x ? integer_axis(xlo, xhi, 8) : nice_axis(xlo, xhi, 6);
  if (o.log_x) xa = {std::floor(xlo), std::max(std::ceil(xhi), std::floor(xlo) + 1), 1};
  const double pad = o.x_tick_labels.empty() && !o.integer_x ? 0 : 0.5;
  const double x0 = o.x_tick_labels.empty() ? xa.lo - pad : xlo - 0.5,
               x1 = o.x_tick_labels.empty() ? xa.hi + pad : xhi + 0.5;
  const std::function<double(double)> X = [&](double x) {
    const double v = o.log_x ? std::log10(x) : x;
    return f.ml + (v - x0) / (x1 - x0) * f.pw;
  };
  const std::function<double(double)> Y = [&](double y) {
    return f.mt + (ya.hi - y) / (ya.hi - ya.lo) * f.ph;
  };

  const TickFormat yf = tick_format(ya), xf = tick_format(xa);
  std::string out = svg_chart_open(width, total_h, title);
  out += svg_y_grid(f, ya, Y);
  out += "<g class=\"x-ticks\" fill=\"#4b5563\">\n";
  auto x_tick = [&](double x_screen, const std::string& text) {
    out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#9ca3af\"/>",
                       px(x_screen), px(f.mt + f.ph), px(f.mt + f.ph + 5));
    if (rotate)
      out += fmt::format(
          "<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\" transform=\"rotate(-40 {0} {1})\">{2}"
          "</text>",
          px(x_screen), px(f.mt + f.ph + 16), html_escape(text));
    else
      out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>", px(x_screen),
                         px(f.mt + f.ph + 18), html_escape(text));
  };
  if (!o.x_tick_labels.empty()) {
    for (const auto& [x, label] : o.x_tick_labels) x_tick(X(x), label);
  } else {
    for (double t : axis_ticks(xa)) {
      if (o.log_x)
        x_tick(f.ml + (t - x0) / (x1 - x0) * f.pw, value_label(std::pow(10.0, t)));
      else
        x_tick(X(t), tick_text(t, xf));
    }
  }
  out += "\n</g>\n";
  if (o.zero_line && ya.lo < 0 && ya.hi > 0)
    out += fmt::format(
        "<line class=\"zero\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#6b7280\"/>\n",
        px(f.ml), px(Y(0)), px(f.ml + f.pw), px(Y(0)));
  out += svg_axis_titles(f, o.x_tick_labels.empty() && !o.log_x ? axis_title(x_label, xf) : x_label,
                         axis_title(y_label, yf));

  for (size_t i = 0; i < series.size(); ++i) {
    const IntervalSeries& s = series[i];
    if (s.line == IntervalLine::none) continue;
    std::vector<std::pair<double, double>> pts;
    for (size_t k = 0; k < s.points.size(); ++k) {
      const IntervalPoint& p = s.points[k];
      if (s.line == IntervalLine::steps && k > 0) pts.emplace_back(X(p.x), Y(s.points[k - 1].y));
      pts.emplace_back(X(p.x), Y(p.y));
    }
    out += svg_polylines(
        pts, colors[i],
        std::string("stroke-width=\"1.5\"") + (s.dashed ? " stroke-dasharray=\"5 3\"" : ""));
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const IntervalSeries& s = series[i];
    for (const IntervalPoint& p : s.points) {
      if (!std::isfinite(p.x) || !std::isfinite(p.y) || (o.log_x && !(p.x > 0))) continue;
      const double cx = X(p.x);
      if (std::isfinite(p.lo) && std::isfinite(p.hi))
        out += fmt::format(
            "<path class=\"error-bar\" d=\"M{0} {1}V{2}M{3} {1}H{4}M{3} {2}H{4}\" stroke=\"{5}\" "
            "stroke-width=\"1.2\" fill=\"none\"/>",
            px(cx), px(Y(p.lo)), px(Y(p.hi)), px(cx - 4), px(cx + 4), colors[i]);
      if (s.markers)
        out += fmt::format(
            "<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"4.5\" fill=\"{}\">{}"
            "</circle>\n",
            px(cx), px(Y(p.y)), colors[i],
            p.tooltip.empty() ? "" : "<title>" + html_escape(p.tooltip) + "</title>");
    }
  }
  out += legend;
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
