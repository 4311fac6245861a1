// Report renderers: result.json -> report.md (the reference's report.md layout, §6.4, then
// depthgrad's additions) and report.html (one offline page: inline CSS, inline SVG, no scripts).
// Pure string building from the result: it computes no statistics (the only arithmetic is
// plain differences for display) and reads no files.
#include "train/experiments/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

namespace dg {

using json::Value;

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- reading the result ------------------------------------------------------------------------

// Follows a path like "seed_results[1].rd_attnres.lm_loss"; nullptr when any step is missing
// or has the wrong kind. (Keys containing '.' or '[' cannot be addressed; none of ours do.)
const Value* lookup(const Value& root, std::string_view path) {
  const Value* v = &root;
  size_t i = 0;
  while (v && i < path.size()) {
    if (path[i] == '.') {
      ++i;
    } else if (path[i] == '[') {
      const size_t close = path.find(']', i);
      size_t index = 0;
      if (close == std::string_view::npos || !v->is_array()) return nullptr;
      auto [end, ec] = std::from_chars(path.data() + i + 1, path.data() + close, index);
      if (ec != std::errc() || end != path.data() + close || index >= v->size()) return nullptr;
      v = &v->as_array()[index];
      i = close + 1;
    } else {
      size_t end = path.find_first_of(".[", i);
      if (end == std::string_view::npos) end = path.size();
      if (!v->is_object()) return nullptr;
      v = v->find(path.substr(i, end - i));
      i = end;
    }
  }
  return v;
}

double number_at(const Value& root, std::string_view path) {
  const Value* v = lookup(root, path);
  return v && v->is_number() ? v->as_double() : kNaN;
}

std::string string_at(const Value& root, std::string_view path, const std::string& fallback = "") {
  const Value* v = lookup(root, path);
  return v && v->is_string() ? v->as_string() : fallback;
}

// Numbers of an array (NaN for elements that are not numbers); empty when absent.
std::vector<double> numbers_at(const Value& root, std::string_view path) {
  std::vector<double> out;
  const Value* v = lookup(root, path);
  if (!v || !v->is_array()) return out;
  for (const Value& x : v->as_array()) out.push_back(x.is_number() ? x.as_double() : kNaN);
  return out;
}

std::vector<std::vector<double>> matrix_at(const Value& root, std::string_view path) {
  std::vector<std::vector<double>> out;
  const Value* v = lookup(root, path);
  if (!v || !v->is_array()) return out;
  for (size_t i = 0; i < v->size(); ++i) out.push_back(numbers_at(*v, fmt::format("[{}]", i)));
  return out;
}

// A scalar as text (strings as-is, arrays of scalars joined by ", ").
std::string scalar_text(const Value& v) {
  switch (v.kind()) {
    case json::Kind::null:
      return "null";
    case json::Kind::boolean:
      return v.as_bool() ? "true" : "false";
    case json::Kind::number:
      if (v.is_integer()) return fmt::format("{}", v.as_int());
      return std::isfinite(v.as_double()) ? fmt::format("{}", v.as_double()) : "n/a";
    case json::Kind::string:
      return v.as_string();
    case json::Kind::array: {
      std::string s;
      for (const Value& x : v.as_array()) s += (s.empty() ? "" : ", ") + scalar_text(x);
      return s;
    }
    case json::Kind::object:
      return json::dump(v);
  }
  return "";
}

// ---- number formats ----------------------------------------------------------------------------

enum class Style { fixed, sci, signed_sci, general, integer, signed_percent };
struct Fmt {
  Style style;
  int digits = 0;
};

std::string format_number(double v, Fmt f) {
  if (!std::isfinite(v)) return "n/a";
  switch (f.style) {
    case Style::fixed:
      return fmt::format("{:.{}f}", v, f.digits);
    case Style::sci:
      return fmt::format("{:.{}e}", v, f.digits);
    case Style::signed_sci:
      return fmt::format("{:+.{}e}", v, f.digits);
    case Style::general:
      return fmt::format("{:.{}g}", v, f.digits);
    case Style::integer:
      return fmt::format("{:.0f}", v);
    case Style::signed_percent:
      return fmt::format("{:+.{}f}%", v, f.digits);
  }
  return "n/a";
}

// The exact text of a JSON number (shortest round-trip form), for data-value attributes.
std::optional<std::string> exact_number_text(const Value* v) {
  if (!v || !v->is_number()) return std::nullopt;
  if (v->is_integer()) return fmt::format("{}", v->as_int());
  const double d = v->as_double();
  if (!std::isfinite(d)) return std::nullopt;
  return fmt::format("{}", d);
}

// ---- what a result holds -----------------------------------------------------------------------

struct Arm {
  std::string key;   // "baseline" / "method"
  std::string name;  // "block_attnres" / "rd_attnres"
};

std::vector<Arm> arms_of(const Value& r) {
  return {{"baseline", string_at(r, "baseline.name", "block_attnres")},
          {"method", string_at(r, "method.name", "rd_attnres")}};
}

size_t seed_count(const Value& r) {
  const Value* s = lookup(r, "seed_results");
  return s && s->is_array() ? s->size() : 0;
}

std::string seed_label(const Value& r, size_t i) {
  const Value* s = lookup(r, fmt::format("seed_results[{}].seed", i));
  return s ? scalar_text(*s) : fmt::format("#{}", i);
}

// Path of one seed's arm when there are seed results, else the aggregate arm.
std::string arm_path(const Value& r, size_t seed_index, const Arm& arm) {
  if (seed_count(r) > 0) return fmt::format("seed_results[{}].{}", seed_index, arm.name);
  return arm.key;
}

// The per-seed value the paired statistics used: full-validation NLL when present.
std::string nll_path(const Value& r, const std::string& arm) {
  const std::string full = arm + ".full_validation_lm_loss";
  return lookup(r, full) ? full : arm + ".lm_loss";
}

// The routes drawn for an arm: validation windows, else the last training batch.
std::pair<std::string, std::string> routes_of(const Value& r, const std::string& arm) {
  if (lookup(r, arm + ".routes_validation.mean_alpha_qk"))
    return {arm + ".routes_validation", "validation windows"};
  if (lookup(r, arm + ".routes_last_train_batch.mean_alpha_qk"))
    return {arm + ".routes_last_train_batch", "last training batch"};
  return {"", ""};
}

std::string fidelity_label(const std::string& level) {
  if (level == "core_mechanism") return "core mechanism reproduction";
  return level.empty() ? "not recorded" : level;
}
std::string tier_label(const std::string& tier) {
  if (tier == "l2_public_dataset") return "L2 public-dataset training";
  return tier.empty() ? "not recorded" : tier;
}

std::string fidelity_banner_text(const Value& r, bool html) {
  auto esc = [&](const std::string& s) { return html ? html_escape(s) : s; };
  const std::string level = string_at(r, "reproduction_fidelity.level");
  const std::string label = fidelity_label(level);
  std::string text = html ? "Reproduction fidelity: <b>" + esc(label) + "</b>."
                          : "Reproduction fidelity: **" + label + "**.";
  const std::string description = string_at(r, "reproduction_fidelity.description");
  if (!description.empty()) text += " " + esc(description);
  if (const Value* missing = lookup(r, "reproduction_fidelity.omitted_core_components"))
    text += " Missing core: " + esc(scalar_text(*missing)) + ".";
  return text;
}

std::string tier_banner_text(const Value& r, bool html) {
  auto esc = [&](const std::string& s) { return html ? html_escape(s) : s; };
  const std::string label = tier_label(string_at(r, "evaluation_protocol.tier"));
  std::string text =
      html ? "Evaluation tier: <b>" + esc(label) + "</b>." : "Evaluation tier: **" + label + "**.";
  const std::string policy = string_at(r, "evaluation_protocol.claim_policy");
  if (!policy.empty()) text += " Claim policy: " + esc(policy) + ".";
  return text;
}

std::string budget_line(const Value& r) {
  std::string line = fmt::format(
      "Public data: {}; {} steps per variant", string_at(r, "dataset.name", "WikiText-2"),
      format_number(number_at(r, "setup.steps_per_variant"), {Style::integer}));
  const size_t n = seed_count(r);
  if (n > 1) {
    std::string seeds;
    for (size_t i = 0; i < n; ++i) seeds += (i ? ", " : "") + seed_label(r, i);
    line += fmt::format("; {} seeds ({}), table values are means over seeds", n, seeds);
  } else if (n == 1) {
    line += "; seed " + seed_label(r, 0);
  }
  return line + ".";
}

std::string relative_line(const Value& r, const std::string& baseline_name) {
  return fmt::format(
      "Relative to the same-budget {} baseline: LM loss {}, perplexity {}.", baseline_name,
      format_number(number_at(r, "relative.lm_loss_percent"), {Style::signed_percent, 2}),
      format_number(number_at(r, "relative.perplexity_percent"), {Style::signed_percent, 2}));
}

std::string paper_line(const Value& r) {
  if (!lookup(r, "paper_results")) return "";
  return fmt::format(
      "For scale: the paper reports {} (120M) and {} (343M) perplexity against Block AttnRes, "
      "with {}/{} paired wins; this run is a micro-budget mechanism check, not that scale.",
      format_number(number_at(r, "paper_results.120m_perplexity_percent"),
                    {Style::signed_percent, 2}),
      format_number(number_at(r, "paper_results.343m_perplexity_percent"),
                    {Style::signed_percent, 2}),
      format_number(number_at(r, "paper_results.paired_training_wins"), {Style::integer}),
      format_number(number_at(r, "paper_results.paired_training_runs"), {Style::integer}));
}

// The reference's recorded numbers (result "reference_recorded.<arm>.<name>") and where the
// same number sits in an arm of this run.
const std::pair<const char*, const char*> kReferenceMetrics[] = {
    {"lm_loss", "lm_loss"},
    {"perplexity", "perplexity"},
    {"qk_v_route_js_divergence", "architecture_stats.qk_v_route_js_divergence"}};

// Text for a Markdown table cell: '|' would end the cell.
std::string md_cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

// Column labels for routing sources: S_0 is the embedding, S_{k+1} the output of block k.
std::vector<std::string> source_labels(size_t n) {
  std::vector<std::string> labels;
  for (size_t j = 0; j < n; ++j) labels.push_back(j == 0 ? "emb" : fmt::format("B{}", j - 1));
  return labels;
}

size_t widest_row(const std::vector<std::vector<double>>& m) {
  size_t w = 0;
  for (const auto& row : m) w = std::max(w, row.size());
  return w;
}

// ---- SVG helpers -------------------------------------------------------------------------------

const char* const kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

// Coordinates with one decimal: small output, still sub-pixel.
std::string px(double v) { return fmt::format("{:.1f}", v); }

double text_width(const std::string& s, double font_px) {
  return 0.6 * font_px * static_cast<double>(s.size());
}

std::string svg_open(int width, int height, const std::string& title) {
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
  return svg_open(width, 80, title) +
         fmt::format(
             "<text class=\"no-data\" x=\"{}\" y=\"52\" text-anchor=\"middle\" "
             "fill=\"#6b7280\">no data</text>\n</svg>\n",
             width / 2);
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

// ---- SVG charts --------------------------------------------------------------------------------

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
  std::string out = svg_open(width, total_h, title);
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
  std::string out = svg_open(width, height, title);
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

  std::string out = svg_open(width, height, title);
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

// ---- Markdown ----------------------------------------------------------------------------------

std::string render_reproduce_markdown(const Value& r) {
  const std::vector<Arm> arms = arms_of(r);
  const std::string b = arms[0].name, m = arms[1].name;
  const size_t n_seeds = seed_count(r);
  std::string md =
      "# " + string_at(r, "paper.title", "Role-Decoupled Attention Residuals") + "\n\n";
  md += "> " + fidelity_banner_text(r, false) + "\n\n";
  md += "> " + tier_banner_text(r, false) + "\n\n";

  // The reference's body (§6.4), in English and with the baseline named as what it is.
  md += budget_line(r) + "\n\n";
  md += "| Variant | LM loss | Perplexity | Parameters |\n|---|---:|---:|---:|\n";
  for (const Arm& a : arms)
    md += fmt::format("| {} | {} | {} | {} |\n", a.name,
                      format_number(number_at(r, a.key + ".lm_loss"), {Style::fixed, 4}),
                      format_number(number_at(r, a.key + ".perplexity"), {Style::fixed, 2}),
                      format_number(number_at(r, a.key + ".parameters"), {Style::integer}));
  if (n_seeds > 1)
    md += fmt::format(
        "\nSample std over seeds: {} LM loss {}, perplexity {}; {} LM loss {}, perplexity {}.\n", b,
        format_number(number_at(r, "baseline.lm_loss_std"), {Style::fixed, 4}),
        format_number(number_at(r, "baseline.perplexity_std"), {Style::fixed, 2}), m,
        format_number(number_at(r, "method.lm_loss_std"), {Style::fixed, 4}),
        format_number(number_at(r, "method.perplexity_std"), {Style::fixed, 2}));
  md += "\n" + relative_line(r, b) + "\n";
  if (const std::string p = paper_line(r); !p.empty()) md += "\n" + p + "\n";
  if (const std::string scope = string_at(r, "scope"); !scope.empty())
    md += "\n## Reproduction scope\n\n" + scope + "\n";

  // ---- depthgrad's additions ----
  md += "\n## QK/V route divergence\n\n";
  md += fmt::format(
      "Jensen–Shannon divergence (natural log) between the QK and V routing distributions, "
      "averaged over tokens and layers on the last training batch (the reference's statistic)"
      "{}: {} {}, {} {}. The baseline has one router, so its divergence is 0 by construction.\n",
      n_seeds > 1 ? ", mean over seeds" : "", b,
      format_number(number_at(r, "baseline.architecture_stats.qk_v_route_js_divergence"),
                    {Style::fixed, 10}),
      m,
      format_number(number_at(r, "method.architecture_stats.qk_v_route_js_divergence"),
                    {Style::fixed, 10}));
  if (const Value* layers = lookup(r, "paired.validation_js_per_layer");
      layers && layers->is_array() && layers->size() > 0) {
    md += fmt::format("\nPer layer, {} on the validation data after training, over seeds:\n\n", m);
    md += "| Layer | Mean over seeds | Std over seeds | Per seed |\n|---:|---:|---:|---|\n";
    for (size_t l = 0; l < layers->size(); ++l) {
      const std::string p = fmt::format("paired.validation_js_per_layer[{}]", l);
      std::string per_seed;
      for (double v : numbers_at(r, p + ".per_seed"))
        per_seed += (per_seed.empty() ? "" : ", ") + format_number(v, {Style::fixed, 6});
      md += fmt::format(
          "| {} | {} | {} | {} |\n", format_number(number_at(r, p + ".layer"), {Style::integer}),
          format_number(number_at(r, p + ".mean_over_seeds"), {Style::fixed, 6}),
          format_number(number_at(r, p + ".std_over_seeds"), {Style::fixed, 6}), per_seed);
    }
  } else {
    const std::vector<double> train = numbers_at(r, "method.routes_last_train_batch.js_per_layer");
    const std::vector<double> valid = numbers_at(r, "method.routes_validation.js_per_layer");
    if (!train.empty() || !valid.empty()) {
      md += fmt::format(
          "\nPer layer ({}); the validation columns summarise the per-token divergence:\n\n", m);
      md +=
          "| Layer | Last train batch | Validation mean | p10 | p50 | p90 | max "
          "|\n|---:|---:|---:|---:|---:|---:|---:|\n";
      for (size_t l = 0; l < std::max(train.size(), valid.size()); ++l) {
        const std::string d =
            fmt::format("method.routes_validation.js_distribution_per_layer[{}]", l);
        md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", l,
                          format_number(l < train.size() ? train[l] : kNaN, {Style::fixed, 6}),
                          format_number(l < valid.size() ? valid[l] : kNaN, {Style::fixed, 6}),
                          format_number(number_at(r, d + ".p10"), {Style::fixed, 6}),
                          format_number(number_at(r, d + ".p50"), {Style::fixed, 6}),
                          format_number(number_at(r, d + ".p90"), {Style::fixed, 6}),
                          format_number(number_at(r, d + ".max"), {Style::fixed, 6}));
      }
    }
  }

  md += "\n## Training\n\nGradient clipping at norm " +
        format_number(number_at(r, "setup.gradient_clip"), {Style::general, 4}) +
        "; a step is clipped when the gradient norm before clipping exceeds it.\n\n";
  md +=
      "| Seed | Variant | Steps | Clipped steps | Initial loss | Final loss | Train seconds "
      "|\n|---:|---|---:|---:|---:|---:|---:|\n";
  for (size_t s = 0; s < std::max<size_t>(n_seeds, 1); ++s)
    for (const Arm& a : arms) {
      const std::string p = arm_path(r, s, a);
      md +=
          fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", n_seeds ? seed_label(r, s) : "—",
                      a.name, numbers_at(r, p + ".training.losses").size(),
                      format_number(number_at(r, p + ".training.clipped_steps"), {Style::integer}),
                      format_number(number_at(r, p + ".initial_loss"), {Style::fixed, 4}),
                      format_number(number_at(r, p + ".final_loss"), {Style::fixed, 4}),
                      format_number(number_at(r, p + ".training.seconds"), {Style::fixed, 2}));
    }

  if (lookup(r, "reference_recorded")) {
    md += "\n## Against the reference's recorded values\n\n";
    md +=
        "The reference run's recorded numbers (upstream-protocol.md) beside this run's; Δ = "
        "depthgrad − reference.\n\n";
    md += "| Variant | Metric | Reference | depthgrad | Δ |\n|---|---|---:|---:|---:|\n";
    for (const Arm& a : arms)
      for (const auto& [name, path] : kReferenceMetrics) {
        const double ref = number_at(r, fmt::format("reference_recorded.{}.{}", a.name, name));
        const double got = number_at(r, a.key + "." + path);
        const int digits = std::string(name) == "perplexity" ? 8 : 10;
        md += fmt::format("| {} | {} | {} | {} | {} |\n", a.name, name,
                          format_number(ref, {Style::fixed, digits}),
                          format_number(got, {Style::fixed, digits}),
                          format_number(got - ref, {Style::signed_sci, 3}));
      }
  }

  if (lookup(r, "paired")) {
    const int64_t n = static_cast<int64_t>(number_at(r, "paired.n"));
    md += "\n## Paired statistics\n\n";
    md += fmt::format("Metric: {}. Difference = {} − {} per seed; negative means {} is better.\n\n",
                      string_at(r, "paired.metric", "validation NLL"), m, b, m);
    md += fmt::format("| Seed | {} | {} | Difference | Lower |\n|---:|---:|---:|---:|---|\n", b, m);
    const std::vector<double> diffs = numbers_at(r, "paired.differences_method_minus_baseline");
    for (size_t s = 0; s < n_seeds; ++s) {
      const double d = s < diffs.size() ? diffs[s] : kNaN;
      md += fmt::format(
          "| {} | {} | {} | {} | {} |\n", seed_label(r, s),
          format_number(number_at(r, nll_path(r, arm_path(r, s, arms[0]))), {Style::fixed, 6}),
          format_number(number_at(r, nll_path(r, arm_path(r, s, arms[1]))), {Style::fixed, 6}),
          format_number(d, {Style::signed_sci, 3}),
          !std::isfinite(d) ? "n/a"
          : d < 0           ? m
          : d > 0           ? b
                            : "tie");
    }
    md += "\n";
    md += fmt::format("- {} wins: {} of {} (ties: {})\n", m,
                      format_number(number_at(r, "paired.wins_method"), {Style::integer}), n,
                      format_number(number_at(r, "paired.ties"), {Style::integer}));
    md += fmt::format("- Mean difference: {} nats/token (std over seeds {})\n",
                      format_number(number_at(r, "paired.mean_difference"), {Style::signed_sci, 3}),
                      format_number(number_at(r, "paired.std_difference"), {Style::sci, 3}));
    md += fmt::format("- 95% CI of the mean difference: [{}, {}]\n",
                      format_number(number_at(r, "paired.ci95[0]"), {Style::signed_sci, 3}),
                      format_number(number_at(r, "paired.ci95[1]"), {Style::signed_sci, 3}));
    md += fmt::format("- Paired t-test: t = {}, two-sided p = {}\n",
                      format_number(number_at(r, "paired.t_statistic"), {Style::general, 4}),
                      format_number(number_at(r, "paired.t_test_p"), {Style::general, 4}));
    md += fmt::format("- Exact sign test: two-sided p = {}\n",
                      format_number(number_at(r, "paired.sign_test_p"), {Style::general, 4}));
  }

  if (const Value* omitted = lookup(r, "omitted");
      omitted && omitted->is_object() && omitted->size() > 0) {
    md += "\n## Omitted\n\n";
    for (const auto& [key, why] : omitted->as_object())
      md += fmt::format("- `{}`: {}\n", key, scalar_text(why));
  }

  if (const Value* setup = lookup(r, "setup"); setup && setup->is_object()) {
    md += "\n## Setup\n\n| Setting | Value |\n|---|---|\n";
    for (const auto& [key, v] : setup->as_object())
      md += fmt::format("| {} | {} |\n", md_cell(key), md_cell(scalar_text(v)));
  }

  md += "\n## Provenance\n\n| Item | Value |\n|---|---|\n";
  if (const Value* prov = lookup(r, "provenance"); prov && prov->is_object())
    for (const auto& [key, v] : prov->as_object()) {
      if (v.is_object()) {
        for (const auto& [k2, v2] : v.as_object())
          md += fmt::format("| {} `{}` | `{}` |\n", md_cell(key), md_cell(k2),
                            md_cell(scalar_text(v2)));
      } else {
        md += fmt::format("| {} | {} |\n", md_cell(key), md_cell(scalar_text(v)));
      }
    }
  if (const std::string t = string_at(r, "dataset.tokenizer_sha256"); !t.empty())
    md += fmt::format("| tokenizer sha256 | `{}` |\n", t);
  if (const double w = number_at(r, "runtime.wall_seconds"); std::isfinite(w))
    md += fmt::format("| wall seconds | {:.2f} |\n", w);
  return md;
}

// ---- HTML --------------------------------------------------------------------------------------

namespace {

const char* const kCss = R"(
:root{color-scheme:light}
body{margin:0;background:#eef0f3;color:#1d2330;font:15px/1.5 "DejaVu Sans",system-ui,-apple-system,"Segoe UI",sans-serif}
main{max-width:1080px;margin:0 auto;padding:22px 30px 40px;background:#fff;min-height:100vh}
h1{font-size:26px;margin:0 0 2px}
h2{font-size:19px;margin:30px 0 10px;padding-bottom:4px;border-bottom:1px solid #e3e6eb}
h3{font-size:15px;margin:16px 0 6px}
p{margin:6px 0 10px;max-width:900px}
.meta{color:#5b6475;font-size:13px;margin-bottom:12px}
.banner{border-left:4px solid #c9a227;background:#fff8e1;padding:7px 12px;margin:8px 0;font-size:14px}
.banner.tier{border-color:#4e79a7;background:#eef3fa}
table{border-collapse:collapse;margin:8px 0 12px;font-size:14px}
th,td{border:1px solid #dde1e7;padding:4px 10px;text-align:left;vertical-align:top}
th{background:#f3f4f7;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.na{color:#8a8f99}
table.main td,table.main th{font-size:15px;padding:6px 14px}
code,.mono{font-family:"DejaVu Sans Mono",ui-monospace,monospace;font-size:12.5px}
.hash{word-break:break-all}
.figrow{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}
figure{margin:6px 0}
figcaption{font-size:13px;color:#5b6475;max-width:640px;margin-top:2px}
svg.chart{border:1px solid #e3e6eb;border-radius:4px;max-width:100%;height:auto;display:block}
details{margin:8px 0}
summary{cursor:pointer;color:#35507a}
.better{color:#2e7d32;font-weight:600}
.worse{color:#b23b3b;font-weight:600}
ul{margin:6px 0 10px;padding-left:22px}
table.kv th{white-space:nowrap}
span.num{font-variant-numeric:tabular-nums;font-weight:600}
footer{margin-top:28px;color:#8a8f99;font-size:12px}
)";

// Emits table cells for numbers of the result with id, data-json (the path) and data-value (the
// exact JSON number), so tests and tools/check_report.sh can compare the page with result.json.
class Cells {
 public:
  explicit Cells(const Value& root) : root_(root) {}

  std::string td(const std::string& path, Fmt f) { return element("td", path, f); }
  std::string span(const std::string& path, Fmt f) { return element("span", path, f); }

 private:
  std::string element(const char* tag, const std::string& path, Fmt f) {
    const Value* v = lookup(root_, path);
    const std::optional<std::string> exact = exact_number_text(v);
    if (!exact) return fmt::format("<{0} class=\"num na\">n/a</{0}>", tag);
    return fmt::format(
        "<{0} class=\"num\" id=\"{1}\" data-json=\"{2}\" data-value=\"{3}\">{4}</{0}>", tag,
        unique_id(path), html_escape(path), *exact, html_escape(format_number(v->as_double(), f)));
  }

  std::string unique_id(const std::string& path) {
    std::string id;
    for (char c : path) {
      if (c == '.' || c == '[')
        id += '-';
      else if (c != ']')
        id += c;
    }
    std::string candidate = id;
    for (int k = 2; used_.count(candidate); ++k) candidate = fmt::format("{}-{}", id, k);
    used_.insert(candidate);
    return candidate;
  }
  const Value& root_;
  std::set<std::string> used_;
};

std::string figure(const std::string& svg, const std::string& caption) {
  return "<figure>" + svg + (caption.empty() ? "" : "<figcaption>" + caption + "</figcaption>") +
         "</figure>\n";
}

// Seed i of n in a colour family (hue): darker to lighter.
std::string family_color(int hue, size_t i, size_t n) {
  const double lightness =
      n <= 1 ? 42.0 : 30.0 + 36.0 * static_cast<double>(i) / static_cast<double>(n - 1);
  return fmt::format("hsl({},{}%,{:.0f}%)", hue, hue < 100 ? 85 : 60, lightness);
}

std::string html_row(const std::string& label, const std::string& value_html) {
  return "<tr><th>" + html_escape(label) + "</th><td>" + value_html + "</td></tr>\n";
}

}  // namespace

std::string render_reproduce_html(const Value& r) {
  const std::vector<Arm> arms = arms_of(r);
  const std::string b = arms[0].name, m = arms[1].name;
  const size_t n_seeds = seed_count(r);
  const std::string title = string_at(r, "paper.title", "Role-Decoupled Attention Residuals");
  Cells cells(r);
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<title>" + html_escape(title) + " — depthgrad reproduce</title>\n<style>" + kCss +
       "</style>\n</head>\n<body>\n<main>\n";
  h += "<h1>" + html_escape(title) + "</h1>\n";
  h += fmt::format(
      "<div class=\"meta\">depthgrad reproduce · protocol <b>{}</b> · arXiv {} · {} · {}</div>\n",
      html_escape(string_at(r, "protocol", "parity")),
      html_escape(string_at(r, "paper.arxiv_id", "?")),
      html_escape(string_at(r, "provenance.created_at", "date not recorded")),
      html_escape(string_at(r, "provenance.code_commit", "commit not recorded")));
  h += "<div class=\"banner\">" + fidelity_banner_text(r, true) + "</div>\n";
  h += "<div class=\"banner tier\">" + tier_banner_text(r, true) + "</div>\n";

  // ---- comparison ----
  h += "<section id=\"comparison\">\n<h2>Comparison</h2>\n<p>" + html_escape(budget_line(r)) +
       "</p>\n";
  const bool spread = n_seeds > 1;  // several seeds: show the sample std beside each mean
  h += std::string("<table class=\"main\">\n<tr><th>Variant</th><th class=\"num\">LM loss</th>") +
       (spread ? "<th class=\"num\">± std</th>" : "") + "<th class=\"num\">Perplexity</th>" +
       (spread ? "<th class=\"num\">± std</th>" : "") +
       "<th class=\"num\">Parameters</th><th class=\"num\">QK/V route JS</th></tr>\n";
  for (const Arm& a : arms)
    h += "<tr><th>" + html_escape(a.name) + "</th>" +
         cells.td(a.key + ".lm_loss", {Style::fixed, 4}) +
         (spread ? cells.td(a.key + ".lm_loss_std", {Style::fixed, 4}) : "") +
         cells.td(a.key + ".perplexity", {Style::fixed, 2}) +
         (spread ? cells.td(a.key + ".perplexity_std", {Style::fixed, 2}) : "") +
         cells.td(a.key + ".parameters", {Style::integer}) +
         cells.td(a.key + ".architecture_stats.qk_v_route_js_divergence", {Style::fixed, 6}) +
         "</tr>\n";
  h += "</table>\n";
  h += "<p class=\"relative\">Relative to the same-budget " + html_escape(b) +
       " baseline: LM loss " + cells.span("relative.lm_loss_percent", {Style::signed_percent, 2}) +
       ", perplexity " + cells.span("relative.perplexity_percent", {Style::signed_percent, 2}) +
       ".</p>\n";
  if (const std::string p = paper_line(r); !p.empty()) h += "<p>" + html_escape(p) + "</p>\n";
  if (const std::string scope = string_at(r, "scope"); !scope.empty())
    h += "<p><b>Scope.</b> " + html_escape(scope) + "</p>\n";
  h += "</section>\n";

  // ---- against the reference ----
  if (lookup(r, "reference_recorded")) {
    h += "<section id=\"reference\">\n<h2>Against the reference's recorded values</h2>\n";
    h += "<p>The reference run's recorded numbers beside this run's; Δ = depthgrad − "
         "reference.</p>\n";
    h += "<table>\n<tr><th>Variant</th><th>Metric</th><th class=\"num\">Reference</th><th "
         "class=\"num\">depthgrad</th><th class=\"num\">Δ</th></tr>\n";
    for (const Arm& a : arms)
      for (const auto& [name, path] : kReferenceMetrics) {
        const int digits = std::string(name) == "perplexity" ? 8 : 10;
        const std::string ref_path = fmt::format("reference_recorded.{}.{}", a.name, name),
                          got_path = a.key + "." + path;
        h += fmt::format(
            "<tr><th>{}</th><td>{}</td>{}{}<td class=\"num\">{}</td></tr>\n", html_escape(a.name),
            name, cells.td(ref_path, {Style::fixed, digits}),
            cells.td(got_path, {Style::fixed, digits}),
            format_number(number_at(r, got_path) - number_at(r, ref_path), {Style::signed_sci, 3}));
      }
    h += "</table>\n</section>\n";
  }

  // ---- paired statistics ----
  if (lookup(r, "paired")) {
    h += "<section id=\"paired\">\n<h2>Paired statistics</h2>\n";
    h += fmt::format(
        "<p>Metric: {}. Difference = {} − {} per seed; negative means {} is better.</p>\n",
        html_escape(string_at(r, "paired.metric", "validation NLL")), html_escape(m),
        html_escape(b), html_escape(m));
    h += "<div class=\"figrow\">\n<table>\n";
    h += "<tr><th>" + html_escape(m) + " wins</th>" +
         cells.td("paired.wins_method", {Style::integer}) + "</tr>\n";
    h += "<tr><th>Seeds (n)</th>" + cells.td("paired.n", {Style::integer}) + "</tr>\n";
    h += "<tr><th>Ties</th>" + cells.td("paired.ties", {Style::integer}) + "</tr>\n";
    h += "<tr><th>Mean difference (nats/token)</th>" +
         cells.td("paired.mean_difference", {Style::signed_sci, 3}) + "</tr>\n";
    h += "<tr><th>Std of differences</th>" + cells.td("paired.std_difference", {Style::sci, 3}) +
         "</tr>\n";
    h += "<tr><th>95% CI low</th>" + cells.td("paired.ci95[0]", {Style::signed_sci, 3}) + "</tr>\n";
    h +=
        "<tr><th>95% CI high</th>" + cells.td("paired.ci95[1]", {Style::signed_sci, 3}) + "</tr>\n";
    h += "<tr><th>t statistic</th>" + cells.td("paired.t_statistic", {Style::general, 4}) +
         "</tr>\n";
    h += "<tr><th>Paired t-test p (two-sided)</th>" +
         cells.td("paired.t_test_p", {Style::general, 4}) + "</tr>\n";
    h += "<tr><th>Exact sign test p (two-sided)</th>" +
         cells.td("paired.sign_test_p", {Style::general, 4}) + "</tr>\n";
    h += "</table>\n";
    h += "<table>\n<tr><th class=\"num\">Seed</th><th class=\"num\">" + html_escape(b) +
         "</th><th class=\"num\">" + html_escape(m) +
         "</th><th class=\"num\">Difference</th><th>Lower</th></tr>\n";
    const std::vector<double> diffs = numbers_at(r, "paired.differences_method_minus_baseline");
    std::vector<std::string> labels;
    for (size_t s = 0; s < n_seeds; ++s) {
      const double d = s < diffs.size() ? diffs[s] : kNaN;
      const std::string lower = !std::isfinite(d) ? "<td>n/a</td>"
                                : d < 0 ? "<td class=\"better\">" + html_escape(m) + "</td>"
                                : d > 0 ? "<td class=\"worse\">" + html_escape(b) + "</td>"
                                        : "<td>tie</td>";
      h += "<tr><td class=\"num\">" + html_escape(seed_label(r, s)) + "</td>" +
           cells.td(nll_path(r, arm_path(r, s, arms[0])), {Style::fixed, 6}) +
           cells.td(nll_path(r, arm_path(r, s, arms[1])), {Style::fixed, 6}) +
           cells.td(fmt::format("paired.differences_method_minus_baseline[{}]", s),
                    {Style::signed_sci, 3}) +
           lower + "</tr>\n";
      labels.push_back("seed " + seed_label(r, s));
    }
    h += "</table>\n</div>\n";
    h += figure(
        svg_bar_chart(fmt::format("{} − {} per seed", m, b), labels, diffs,
                      "difference (nats/token)", 640, 280),
        "Bars below zero: " + html_escape(m) + " has the lower validation NLL for that seed.");
    h += "</section>\n";
  }

  // ---- training curves ----
  h += "<section id=\"training\">\n<h2>Training</h2>\n";
  {
    std::vector<Series> series;
    const size_t n = std::max<size_t>(n_seeds, 1);
    for (size_t a = 0; a < arms.size(); ++a)
      for (size_t s = 0; s < n; ++s) {
        std::string label = arms[a].name + (n_seeds > 1 ? " seed " + seed_label(r, s) : "");
        series.push_back({label, numbers_at(r, arm_path(r, s, arms[a]) + ".training.losses"),
                          family_color(a == 0 ? 212 : 24, s, n)});
      }
    h += figure(
        svg_line_chart("Training loss per step", "step", "loss (nats/token)", series, 900, 340),
        "Cross-entropy of each training batch before the update. " + html_escape(b) +
            " in blues, " + html_escape(m) + " in oranges" +
            (n_seeds > 1 ? "; one line per seed" : "") +
            ". Where the curves overlap, the chart below shows their difference.");
    // Both arms of a seed train on the same batches, so the per-step difference shows where they
    // part.
    std::vector<Series> diffs;
    for (size_t s = 0; s < n; ++s) {
      const std::vector<double> lb = numbers_at(r, arm_path(r, s, arms[0]) + ".training.losses");
      const std::vector<double> lm = numbers_at(r, arm_path(r, s, arms[1]) + ".training.losses");
      std::vector<double> d(std::min(lb.size(), lm.size()));
      for (size_t k = 0; k < d.size(); ++k) d[k] = lm[k] - lb[k];
      if (!d.empty())
        diffs.push_back({n_seeds ? "seed " + seed_label(r, s) : m + " − " + b, d, ""});
    }
    if (!diffs.empty())
      h += figure(svg_line_chart(fmt::format("Training loss difference per step: {} − {}", m, b),
                                 "step", "difference (nats/token)", diffs, 900, 260),
                  "Both arms of a seed see the same batches in the same order" +
                      std::string(string_at(r, "setup.init") == "identical"
                                      ? " and start from the same weights, so this is the effect "
                                        "of the routing change step by step"
                                      : "; their initial weights differ (init " +
                                            html_escape(string_at(r, "setup.init", "?")) + ")") +
                      ". Below zero, " + html_escape(m) + " has the lower loss on that batch.");
  }
  h += "<table>\n<tr><th class=\"num\">Seed</th><th>Variant</th><th class=\"num\">Clipped "
       "steps</th><th class=\"num\">Initial loss</th>"
       "<th class=\"num\">Final loss</th><th class=\"num\">Train seconds</th></tr>\n";
  for (size_t s = 0; s < std::max<size_t>(n_seeds, 1); ++s)
    for (const Arm& a : arms) {
      const std::string p = arm_path(r, s, a);
      h += "<tr><td class=\"num\">" + (n_seeds ? html_escape(seed_label(r, s)) : std::string("—")) +
           "</td><td>" + html_escape(a.name) + "</td>" +
           cells.td(p + ".training.clipped_steps", {Style::integer}) +
           cells.td(p + ".initial_loss", {Style::fixed, 4}) +
           cells.td(p + ".final_loss", {Style::fixed, 4}) +
           cells.td(p + ".training.seconds", {Style::fixed, 2}) + "</tr>\n";
    }
  h += "</table>\n</section>\n";

  // ---- routes ----
  h += "<section id=\"routes\">\n<h2>Routing weights</h2>\n";
  h += "<p>Mean routing weight per layer (rows) and residual source (columns: emb = token "
       "embedding, Bk = output of block k), "
       "QK route beside V route. Layer l can route over l + 1 sources; grey cells do not exist. " +
       html_escape(b) + " has one router, so its QK and V maps are the same.</p>\n";
  for (size_t s = 0; s < std::max<size_t>(n_seeds, 1); ++s) {
    std::string body, where_all;
    for (const Arm& a : arms) {
      const auto [path, where] = routes_of(r, arm_path(r, s, a));
      if (path.empty()) continue;
      where_all = where;
      const auto qk = matrix_at(r, path + ".mean_alpha_qk"),
                 v = matrix_at(r, path + ".mean_alpha_v");
      std::vector<std::string> rows;
      for (size_t l = 0; l < std::max(qk.size(), v.size()); ++l)
        rows.push_back(fmt::format("layer {}", l));
      const auto cols = source_labels(std::max(widest_row(qk), widest_row(v)));
      body += figure(svg_heatmap(a.name + " · QK", rows, cols, qk, 40), "") +
              figure(svg_heatmap(a.name + " · V", rows, cols, v, 40), "");
    }
    if (body.empty()) continue;
    body = "<div class=\"figrow\">" + body + "</div>\n";
    const std::string heading =
        "Routes on the " + where_all + (n_seeds ? ", seed " + seed_label(r, s) : "");
    // The first seed is shown; the others fold away in plain <details> (no script needed).
    if (s == 0)
      h += "<h3>" + html_escape(heading) + "</h3>\n" + body;
    else
      h += "<details><summary>" + html_escape(heading) + "</summary>\n" + body + "</details>\n";
  }
  h += "</section>\n";

  // ---- JS per layer ----
  h += "<section id=\"js\">\n<h2>QK/V route divergence per layer</h2>\n";
  h += "<p>Jensen–Shannon divergence (natural log) between the QK and V routing distributions of " +
       html_escape(m) +
       ". The reference reports the mean over layers on the last training batch; " +
       html_escape(b) + " has one router, so its divergence is 0 by construction.</p>\n";
  if (const Value* layers = lookup(r, "paired.validation_js_per_layer");
      layers && layers->is_array() && layers->size() > 0) {
    std::vector<std::string> labels;
    std::vector<double> means;
    h += "<table>\n<tr><th class=\"num\">Layer</th><th class=\"num\">Validation mean over "
         "seeds</th><th class=\"num\">Std over seeds</th>";
    for (size_t s = 0; s < n_seeds; ++s)
      h += "<th class=\"num\">Seed " + html_escape(seed_label(r, s)) + "</th>";
    h += "</tr>\n";
    for (size_t l = 0; l < layers->size(); ++l) {
      const std::string p = fmt::format("paired.validation_js_per_layer[{}]", l);
      h += "<tr><td class=\"num\">" + fmt::format("{}", l) + "</td>" +
           cells.td(p + ".mean_over_seeds", {Style::fixed, 6}) +
           cells.td(p + ".std_over_seeds", {Style::fixed, 6});
      for (size_t s = 0; s < n_seeds; ++s)
        h += cells.td(fmt::format("{}.per_seed[{}]", p, s), {Style::fixed, 6});
      h += "</tr>\n";
      labels.push_back(fmt::format("layer {}", l));
      means.push_back(number_at(r, p + ".mean_over_seeds"));
    }
    h += "</table>\n";
    h += figure(svg_bar_chart("Validation JS per layer, mean over seeds", labels, means,
                              "JS (nats)", 520, 240),
                "");
  } else {
    const std::vector<double> train = numbers_at(r, "method.routes_last_train_batch.js_per_layer");
    const std::vector<double> valid = numbers_at(r, "method.routes_validation.js_per_layer");
    h += "<table>\n<tr><th class=\"num\">Layer</th><th class=\"num\">Last train batch</th><th "
         "class=\"num\">Validation mean</th>"
         "<th class=\"num\">p10</th><th class=\"num\">p50</th><th class=\"num\">p90</th><th "
         "class=\"num\">max</th></tr>\n";
    std::vector<std::string> labels;
    for (size_t l = 0; l < std::max(train.size(), valid.size()); ++l) {
      const std::string d =
          fmt::format("method.routes_validation.js_distribution_per_layer[{}]", l);
      h +=
          "<tr><td class=\"num\">" + fmt::format("{}", l) + "</td>" +
          cells.td(fmt::format("method.routes_last_train_batch.js_per_layer[{}]", l),
                   {Style::fixed, 6}) +
          cells.td(fmt::format("method.routes_validation.js_per_layer[{}]", l), {Style::fixed, 6}) +
          cells.td(d + ".p10", {Style::fixed, 6}) + cells.td(d + ".p50", {Style::fixed, 6}) +
          cells.td(d + ".p90", {Style::fixed, 6}) + cells.td(d + ".max", {Style::fixed, 6}) +
          "</tr>\n";
      labels.push_back(fmt::format("layer {}", l));
    }
    h += "</table>\n";
    if (!valid.empty())
      h += figure(svg_bar_chart("Validation JS per layer", labels, valid, "JS (nats)", 520, 240),
                  "");
  }
  h += "</section>\n";

  // ---- omitted ----
  if (const Value* omitted = lookup(r, "omitted");
      omitted && omitted->is_object() && omitted->size() > 0) {
    h += "<section id=\"omitted\">\n<h2>Omitted</h2>\n<ul>\n";
    for (const auto& [key, why] : omitted->as_object())
      h +=
          "<li><code>" + html_escape(key) + "</code>: " + html_escape(scalar_text(why)) + "</li>\n";
    h += "</ul>\n</section>\n";
  }

  // ---- setup and provenance ----
  if (const Value* setup = lookup(r, "setup"); setup && setup->is_object()) {
    h += "<section id=\"setup\">\n<h2>Setup</h2>\n<table class=\"kv\">\n";
    const json::Object& items = setup->as_object();
    for (size_t i = 0; i < items.size(); i += 2) {  // two settings per row
      h += "<tr>";
      for (size_t k = i; k < std::min(i + 2, items.size()); ++k)
        h += "<th>" + html_escape(items[k].first) + "</th><td>" +
             html_escape(scalar_text(items[k].second)) + "</td>";
      h += "</tr>\n";
    }
    h += "</table>\n</section>\n";
  }
  h += "<section id=\"provenance\">\n<h2>Provenance</h2>\n<table class=\"kv\">\n";
  if (const Value* prov = lookup(r, "provenance"); prov && prov->is_object())
    for (const auto& [key, v] : prov->as_object()) {
      if (v.is_object()) {
        for (const auto& [k2, v2] : v.as_object())
          h += html_row(key + " · " + k2,
                        "<code class=\"hash\">" + html_escape(scalar_text(v2)) + "</code>");
      } else {
        h += html_row(key, html_escape(scalar_text(v)));
      }
    }
  if (const std::string t = string_at(r, "dataset.tokenizer_sha256"); !t.empty())
    h += html_row("tokenizer sha256", "<code class=\"hash\">" + html_escape(t) + "</code>");
  h += "</table>\n</section>\n";
  h += "<footer>Rendered from result.json by depthgrad " +
       html_escape(string_at(r, "provenance.version", "")) +
       ". Every number in a table cell carries its result.json path (data-json) and exact value "
       "(data-value).</footer>\n";
  h += "</main>\n</body>\n</html>\n";
  return h;
}

}  // namespace dg
