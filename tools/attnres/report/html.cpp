// result.json of `depthgrad reproduce` -> report.html: one offline page in the shared shell
// (report/page.h) with inline SVG charts (report/charts.h) and no scripts. Every number in a table
// cell carries its result.json path and exact value (data-json, data-value), so tests and
// tools/check_report.sh can compare the page with the result. It computes no statistics.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "tools/attnres/report.h"
#include "tools/attnres/report/charts.h"
#include "tools/attnres/report/lookup.h"
#include "tools/attnres/report/page.h"
#include "tools/attnres/report/paired_scale.h"
#include "tools/attnres/report/reproduce_parts.h"
#include "tools/attnres/report/seed_curves.h"
#include "tools/attnres/stats.h"

namespace dg {

using json::Value;

namespace {

// Emits table cells for numbers of the result with id, data-json (the path) and data-value (the
// exact JSON number), so tests and tools/check_report.sh can compare the page with result.json.
class Cells {
 public:
  explicit Cells(const Value& root) : root_(root) {}

  // A number the result must hold (a missing or mistyped path throws, naming it).
  std::string td(const std::string& path, Fmt f) { return element("td", path, f, false); }
  std::string span(const std::string& path, Fmt f) { return element("span", path, f, false); }
  // A number the writer may leave out: "n/a" when the path's last step is absent.
  std::string optional_td(const std::string& path, Fmt f) { return element("td", path, f, true); }
  std::string na_td() const { return "<td class=\"num na\">n/a</td>"; }

 private:
  std::string element(const char* tag, const std::string& path, Fmt f, bool optional) {
    const std::optional<double> v =
        optional ? optional_number_at(root_, path) : std::optional<double>(number_at(root_, path));
    // No data-value for an absent or non-finite value (JSON has no NaN; in memory it may occur).
    const std::optional<std::string> exact =
        v ? exact_number_text(value_at(root_, path)) : std::nullopt;
    if (!exact) return fmt::format("<{0} class=\"num na\">n/a</{0}>", tag);
    return fmt::format(
        "<{0} class=\"num\" id=\"{1}\" data-json=\"{2}\" data-value=\"{3}\">{4}</{0}>", tag,
        unique_id(path), html_escape(path), *exact, html_escape(format_number(*v, f)));
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

std::string html_row(const std::string& label, const std::string& value_html) {
  return "<tr><th>" + html_escape(label) + "</th><td>" + value_html + "</td></tr>\n";
}

// The training-loss charts: each arm's mean over seeds with a min–max band and the seeds faint
// behind it, and the per-step difference method − baseline with its 95% interval over seeds.
// Curves are smoothed with a centred moving average (seed_curves.h) whose window the captions give.
std::string training_charts(const Value& r, const std::vector<Arm>& arms, size_t n_seeds) {
  const std::string b = arms[0].name, m = arms[1].name;
  const size_t n = std::max<size_t>(n_seeds, 1);
  std::vector<std::vector<double>> raw[2];
  size_t steps = 0;
  for (size_t a = 0; a < 2; ++a)
    for (size_t s = 0; s < n; ++s) {
      raw[a].push_back(numbers_at(r, arm_path(r, s, arms[a]) + ".training.losses"));
      steps = std::max(steps, raw[a].back().size());
    }
  const size_t window = smoothing_window(steps);
  const std::string smoothing =
      window > 1 ? fmt::format("smoothed with a centred moving average over {} steps", window)
                 : std::string("not smoothed (short run)");
  const char* const colors[2] = {"#2f6db5", "#e0701b"};
  std::string h;

  std::vector<Series> series;
  for (size_t a = 0; a < 2; ++a) {
    std::vector<std::vector<double>> smooth;
    for (const auto& curve : raw[a]) smooth.push_back(moving_average(curve, window));
    if (n > 1) {
      for (const auto& curve : smooth) {
        Series faint("", curve, colors[a]);
        faint.faint = true;
        series.push_back(std::move(faint));
      }
      const SeedBand band = min_max_band(smooth);
      Series mean(fmt::format("{} (mean of {} seeds, band min–max)", arms[a].name, n), band.mean,
                  colors[a]);
      mean.band_lo = band.lo;
      mean.band_hi = band.hi;
      series.push_back(std::move(mean));
    } else {
      if (window > 1) {
        Series faint("", raw[a][0], colors[a]);
        faint.faint = true;
        series.push_back(std::move(faint));
      }
      series.emplace_back(arms[a].name, smooth[0], colors[a]);
    }
  }
  h += figure(svg_line_chart(n > 1 ? fmt::format("Training loss per step, mean over {} seeds", n)
                                   : std::string("Training loss per step"),
                             "step", "training-batch loss (nats/token)", series, 900, 340),
              "Cross-entropy of each training batch before the update, " + smoothing + ". " +
                  (n > 1 ? "Thick lines: the mean over seeds; shaded: the lowest to the highest "
                           "seed at each step; faint lines: the individual seeds."
                         : std::string(window > 1 ? "Faint: the raw losses." : "")) +
                  " The chart below shows the difference between the arms.");

  // Both arms of a seed train on the same batches, so the per-step difference shows where they
  // part.
  std::vector<std::vector<double>> diffs;
  long first_min = -1, first_max = -1;
  size_t never_part = 0;  // seeds whose arms are identical at every step
  bool all_identical = true;
  for (size_t s = 0; s < n; ++s) {
    const auto& lb = raw[0][s];
    const auto& lm = raw[1][s];
    std::vector<double> d(std::min(lb.size(), lm.size()));
    for (size_t k = 0; k < d.size(); ++k) d[k] = lm[k] - lb[k];
    if (d.empty()) continue;
    const long first = first_difference(lb, lm);
    if (first >= 0) {
      all_identical = false;
      first_min = first_min < 0 ? first : std::min(first_min, first);
      first_max = std::max(first_max, first);
    } else {
      ++never_part;
    }
    diffs.push_back(moving_average(d, window));
  }
  if (all_identical) {
    h += "<p class=\"identical\">The two arms' training losses are identical at every step" +
         std::string(n > 1 ? " for every seed" : "") +
         ": their routes have not yet parted within this budget.</p>\n";
    return h;
  }
  std::vector<Series> dseries;
  if (diffs.size() > 1)
    for (const auto& d : diffs) {
      Series faint("", d, "#7a5195");
      faint.faint = true;
      dseries.push_back(std::move(faint));
    }
  const SeedBand band = ci95_band(diffs);
  Series mean(diffs.size() > 1
                  ? fmt::format("{} − {}, mean of {} seeds (band: 95% CI)", m, b, diffs.size())
                  : m + " − " + b,
              band.mean, "#7a5195");
  if (diffs.size() > 1) {
    mean.band_lo = band.lo;
    mean.band_hi = band.hi;
  }
  dseries.push_back(std::move(mean));
  const std::string init = string_at(r, "setup.init");
  // Steps are counted from 0: "the first K steps" are steps 0 … K−1.
  const std::string parted =
      (first_min == first_max
           ? fmt::format("The arms' losses are bit-identical for the first {} steps and differ "
                         "from step {} on",
                         first_min, first_min)
           : fmt::format("The arms' losses are bit-identical for the first {} to {} steps (by "
                         "seed) and differ from there on",
                         first_min, first_max)) +
      (never_part ? fmt::format(" ({} seed(s) never part)", never_part) : "");
  h += figure(
      svg_line_chart(fmt::format("Training loss difference per step: {} − {}", m, b), "step",
                     "difference (nats/token)", dseries, 900, 280),
      "Both arms of a seed see the same batches in the same order" +
          std::string(init == "identical"
                          ? " and start from the same weights, so this is the effect of the "
                            "routing change step by step"
                          : "; their initial weights differ (init " + html_escape(init) + ")") +
          ". " + parted + " (raw losses). Differences " + smoothing +
          (diffs.size() > 1 ? "; thick line: the mean over seeds, shaded: its 95% t interval "
                              "over seeds, faint: each seed"
                            : "") +
          ". Below zero, " + html_escape(m) + " has the lower loss.");
  return h;
}

// What every section of the reproduction page reads: the result, its arms and seed count, and
// the cells that carry each number's path (ids stay unique across sections).
struct ReproducePage {
  const Value& r;
  std::vector<Arm> arms;
  std::string b, m;  // the baseline's and the method's names
  size_t n_seeds = 0;
  Cells cells;
};

// The Comparison section: the arms side by side and the relative change.
std::string comparison_section(ReproducePage& page) {
  const Value& r = page.r;
  const std::vector<Arm>& arms = page.arms;
  const std::string& b = page.b;
  const size_t n_seeds = page.n_seeds;
  Cells& cells = page.cells;
  std::string h;
  h += "<section id=\"comparison\">\n<h2>Comparison</h2>\n<p>" + html_escape(budget_line(r)) +
       "</p>\n";
  const bool spread = n_seeds > 1;  // several seeds: show the sample std beside each mean
  const bool full = optional_value_at(r, "baseline.full_validation_lm_loss") &&
                    optional_value_at(r, "method.full_validation_lm_loss");
  const bool full_spread = spread && optional_value_at(r, "baseline.full_validation_lm_loss_std") &&
                           optional_value_at(r, "method.full_validation_lm_loss_std");
  const std::string over = html_escape(lm_loss_scope(r));
  h += "<table class=\"main\">\n<tr><th>Variant</th><th class=\"num\">LM loss<span "
       "class=\"sub\">" +
       over + "</span></th>" + (spread ? "<th class=\"num\">± std</th>" : "") +
       "<th class=\"num\">Perplexity<span class=\"sub\">exp(LM loss)</span></th>" +
       (spread ? "<th class=\"num\">± std</th>" : "") +
       (full ? "<th class=\"num\">Validation NLL<span class=\"sub\">every window of the "
               "validation split</span></th>"
             : "") +
       (full_spread ? "<th class=\"num\">± std</th>" : "") +
       "<th class=\"num\">Parameters</th><th class=\"num\">QK/V route JS<span "
       "class=\"sub\">last training batch</span></th></tr>\n";
  for (const Arm& a : arms)
    h += "<tr><th>" + html_escape(a.name) + "</th>" +
         cells.td(a.key + ".lm_loss", {Style::fixed, 4}) +
         (spread ? cells.td(a.key + ".lm_loss_std", {Style::fixed, 4}) : "") +
         cells.td(a.key + ".perplexity", {Style::fixed, 2}) +
         (spread ? cells.td(a.key + ".perplexity_std", {Style::fixed, 2}) : "") +
         (full ? cells.td(a.key + ".full_validation_lm_loss", {Style::fixed, 4}) : "") +
         (full_spread ? cells.td(a.key + ".full_validation_lm_loss_std", {Style::fixed, 4}) : "") +
         cells.td(a.key + ".parameters", {Style::integer}) +
         cells.td(a.key + ".architecture_stats.qk_v_route_js_divergence", {Style::fixed, 6}) +
         "</tr>\n";
  h += "</table>\n";
  if (headline_is_paired(r)) {
    // The headline in the metric of the paired statistics; the LM loss column's change beside it.
    h += "<p class=\"relative\">Relative to the same-budget " + html_escape(b) +
         " baseline, on the " + html_escape(string_at(r, "paired.metric")) +
         " (the paired statistics' metric; mean over " + seeds_text(number_at(r, "paired.n")) +
         "): " +
         cells.span("paired.relative_percent",
                    percent_format(number_at(r, "paired.relative_percent"))) +
         " NLL, " +
         cells.span("paired.perplexity_relative_percent",
                    percent_format(number_at(r, "paired.perplexity_relative_percent"))) +
         " perplexity (of the mean NLL).</p>\n";
    h += "<p class=\"relative-windows\">On the LM loss column (" + over +
         "), the same comparison gives " +
         cells.span("relative.lm_loss_percent",
                    percent_format(number_at(r, "relative.lm_loss_percent"))) +
         " LM loss, " +
         cells.span("relative.perplexity_percent",
                    percent_format(number_at(r, "relative.perplexity_percent"))) +
         " perplexity.</p>\n";
  } else {
    h += "<p class=\"relative\">Relative to the same-budget " + html_escape(b) +
         " baseline, on the LM loss over " + over + ": LM loss " +
         cells.span("relative.lm_loss_percent",
                    percent_format(number_at(r, "relative.lm_loss_percent"))) +
         ", perplexity " +
         cells.span("relative.perplexity_percent",
                    percent_format(number_at(r, "relative.perplexity_percent"))) +
         ".</p>\n";
  }
  h += "<p>" + html_escape(paper_line(r)) + "</p>\n";
  if (const std::string scope = string_at(r, "scope"); !scope.empty())
    h += "<p><b>Scope.</b> " + html_escape(scope) + "</p>\n";
  h += "</section>\n";
  return h;
}

// Parity runs: the reference run's recorded numbers beside this run's.
std::string reference_section(ReproducePage& page) {
  const Value& r = page.r;
  const std::vector<Arm>& arms = page.arms;
  Cells& cells = page.cells;
  std::string h;
  if (optional_value_at(r, "reference_recorded")) {  // parity runs only
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
  return h;
}

// Several seeds or --protocol paired: the paired statistics, per seed and charted.
std::string paired_section(ReproducePage& page) {
  const Value& r = page.r;
  const std::vector<Arm>& arms = page.arms;
  const std::string& b = page.b;
  const std::string& m = page.m;
  const size_t n_seeds = page.n_seeds;
  Cells& cells = page.cells;
  std::string h;
  if (optional_value_at(r, "paired")) {  // several seeds or --protocol paired
    h += "<section id=\"paired\">\n<h2>Paired statistics</h2>\n";
    h += fmt::format(
        "<p>Metric: {}. Difference = {} − {} per seed; negative means {} is better.</p>\n",
        html_escape(string_at(r, "paired.metric")), html_escape(m), html_escape(b), html_escape(m));
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
    for (const auto& [label, text] : paired_scale_rows(r, true))
      h += "<tr><th>" + html_escape(label) + "</th><td>" + text + "</td></tr>\n";
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
    ReferenceBand ci;
    ci.at = number_at(r, "paired.mean_difference");
    if (n_seeds > 1) {
      ci.lo = number_at(r, "paired.ci95[0]");
      ci.hi = number_at(r, "paired.ci95[1]");
    }
    ci.label = n_seeds > 1 ? "mean difference and its 95% CI" : "mean difference";
    h += figure(
        svg_bar_chart(fmt::format("{} − {} per seed: {}", m, b, string_at(r, "paired.metric")),
                      labels, diffs, "difference (nats/token)", 640, 280, {}, ci),
        "Bars below zero: " + html_escape(m) +
            " has the lower validation NLL for that seed. Dashed line: the mean "
            "difference" +
            (n_seeds > 1 ? "; shaded: its 95% t confidence interval (paired.ci95)" : "") + ".");
    h += "</section>\n";
  }
  return h;
}

// The training curves and each arm's training per seed.
std::string training_section(ReproducePage& page) {
  const Value& r = page.r;
  const std::vector<Arm>& arms = page.arms;
  const size_t n_seeds = page.n_seeds;
  Cells& cells = page.cells;
  std::string h;
  h += "<section id=\"training\">\n<h2>Training</h2>\n";
  h += training_charts(r, arms, n_seeds);
  h += "<table>\n<tr><th class=\"num\">Seed</th><th>Variant</th><th class=\"num\">Clipped "
       "steps</th><th class=\"num\">Initial loss<span class=\"sub\">mean of the first 10 "
       "training batches</span></th><th class=\"num\">Final loss<span class=\"sub\">mean of the "
       "last 10 training batches</span></th><th class=\"num\">Train seconds</th></tr>\n";
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
  return h;
}

// The routing weights per layer and source, one seed shown, the others folded.
std::string routes_section(ReproducePage& page) {
  const Value& r = page.r;
  const std::vector<Arm>& arms = page.arms;
  const std::string& b = page.b;
  const size_t n_seeds = page.n_seeds;
  std::string h;
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
  return h;
}

// The QK/V route divergence per layer.
std::string js_section(ReproducePage& page) {
  const Value& r = page.r;
  const std::string& b = page.b;
  const std::string& m = page.m;
  const size_t n_seeds = page.n_seeds;
  Cells& cells = page.cells;
  std::string h;
  h += "<section id=\"js\">\n<h2>QK/V route divergence per layer</h2>\n";
  h += "<p>Jensen–Shannon divergence (natural log) between the QK and V routing distributions of " +
       html_escape(m) +
       ". The reference reports the mean over layers on the last training batch; " +
       html_escape(b) + " has one router, so its divergence is 0 by construction.</p>\n";
  if (const json::Array* layers = paired_js_layers(r)) {
    std::vector<std::string> labels;
    std::vector<double> means;
    BarErrors sd;
    sd.label = "±1 sd over seeds";
    // One cell holds every seed's value, so the table wraps at any number of seeds.
    std::string seeds_in_order;
    for (size_t s = 0; s < n_seeds; ++s)
      seeds_in_order += (s ? ", " : "") + html_escape(seed_label(r, s));
    h += "<table>\n<tr><th class=\"num\">Layer</th><th class=\"num\">Validation mean over "
         "seeds</th><th class=\"num\">Std over seeds</th><th>Per seed<span class=\"sub\">seeds " +
         seeds_in_order + "</span></th></tr>\n";
    for (size_t l = 0; l < layers->size(); ++l) {
      const std::string p = fmt::format("paired.validation_js_per_layer[{}]", l);
      h += "<tr><td class=\"num\">" + fmt::format("{}", l) + "</td>" +
           cells.td(p + ".mean_over_seeds", {Style::fixed, 6}) +
           cells.td(p + ".std_over_seeds", {Style::fixed, 6}) + "<td class=\"seedlist\">";
      for (size_t s = 0; s < n_seeds; ++s)
        h += cells.span(fmt::format("{}.per_seed[{}]", p, s), {Style::fixed, 6}) + " ";
      h += "</td></tr>\n";
      labels.push_back(fmt::format("layer {}", l));
      const double mean = number_at(r, p + ".mean_over_seeds"),
                   spread_sd = number_at(r, p + ".std_over_seeds");
      means.push_back(mean);
      sd.lo.push_back(n_seeds > 1 ? mean - spread_sd : kNaN);
      sd.hi.push_back(n_seeds > 1 ? mean + spread_sd : kNaN);
    }
    h += "</table>\n";
    if (n_seeds <= 1) sd = {};
    h += figure(svg_bar_chart("Validation JS per layer, mean over seeds", labels, means,
                              "JS (nats)", 520, 260, sd),
                n_seeds > 1 ? "Error bars: ±1 sample standard deviation over seeds." : "");
  } else {
    const std::vector<double> train = numbers_at(r, "method.routes_last_train_batch.js_per_layer");
    const std::vector<double> valid = numbers_at(r, "method.routes_validation.js_per_layer");
    h += "<table>\n<tr><th class=\"num\">Layer</th><th class=\"num\">Last train batch</th><th "
         "class=\"num\">Validation mean</th>"
         "<th class=\"num\">p10</th><th class=\"num\">p50</th><th class=\"num\">p90</th><th "
         "class=\"num\">max</th></tr>\n";
    std::vector<std::string> labels;
    for (size_t l = 0; l < std::max(train.size(), valid.size()); ++l) {
      // The two lists may differ in length, and a layer's distribution is empty without tokens.
      const std::string d =
          fmt::format("method.routes_validation.js_distribution_per_layer[{}]", l);
      const bool has_distribution = optional_value_at(r, d) != nullptr;
      h += "<tr><td class=\"num\">" + fmt::format("{}", l) + "</td>" +
           cells.optional_td(fmt::format("method.routes_last_train_batch.js_per_layer[{}]", l),
                             {Style::fixed, 6}) +
           cells.optional_td(fmt::format("method.routes_validation.js_per_layer[{}]", l),
                             {Style::fixed, 6});
      for (const char* q : {".p10", ".p50", ".p90", ".max"})
        h += has_distribution ? cells.optional_td(d + q, {Style::fixed, 6}) : cells.na_td();
      h += "</tr>\n";
      labels.push_back(fmt::format("layer {}", l));
    }
    h += "</table>\n";
    if (!valid.empty()) {
      BarErrors spread_over_tokens;
      spread_over_tokens.label = "p10–p90 over validation tokens";
      for (size_t l = 0; l < valid.size(); ++l) {
        spread_over_tokens.lo.push_back(validation_js_quantile(r, l, "p10"));
        spread_over_tokens.hi.push_back(validation_js_quantile(r, l, "p90"));
      }
      h += figure(svg_bar_chart("Validation JS per layer", labels, valid, "JS (nats)", 520, 260,
                                spread_over_tokens),
                  "Bars: the mean over validation tokens; error bars: its 10th to 90th "
                  "percentile over tokens.");
    }
  }
  h += "</section>\n";
  return h;
}

// What the run left out, and why.
std::string omitted_section(ReproducePage& page) {
  const Value& r = page.r;
  std::string h;
  if (const json::Object& omitted = object_at(r, "omitted"); !omitted.empty()) {
    h += "<section id=\"omitted\">\n<h2>Omitted</h2>\n<ul>\n";
    for (const auto& [key, why] : omitted)
      h +=
          "<li><code>" + html_escape(key) + "</code>: " + html_escape(scalar_text(why)) + "</li>\n";
    h += "</ul>\n</section>\n";
  }
  return h;
}

// The run's settings and provenance.
std::string setup_section(ReproducePage& page) {
  const Value& r = page.r;
  std::string h;
  h += "<section id=\"setup\">\n<h2>Setup</h2>\n<table class=\"kv\">\n";
  const json::Object& items = object_at(r, "setup");
  for (size_t i = 0; i < items.size(); i += 2) {  // two settings per row
    h += "<tr>";
    for (size_t k = i; k < std::min(i + 2, items.size()); ++k)
      h += "<th>" + html_escape(items[k].first) + "</th><td>" +
           html_escape(scalar_text(items[k].second)) + "</td>";
    h += "</tr>\n";
  }
  h += "</table>\n</section>\n";
  h += "<section id=\"provenance\">\n<h2>Provenance</h2>\n<table class=\"kv\">\n";
  for (const auto& [key, v] : object_at(r, "provenance")) {
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
  return h;
}

}  // namespace

std::string render_reproduce_html(const Value& r) {
  const std::vector<Arm> arms = arms_of(r);
  ReproducePage page{r, arms, arms[0].name, arms[1].name, seed_count(r), Cells(r)};
  PageShell shell;
  shell.title = string_at(r, "paper.title");
  shell.command = "reproduce";
  shell.meta_html =
      fmt::format("protocol <b>{}</b> · arXiv {} · {} · {}", html_escape(string_at(r, "protocol")),
                  html_escape(string_at(r, "paper.arxiv_id")),
                  html_escape(string_at(r, "provenance.created_at")),
                  html_escape(string_at(r, "provenance.code_commit")));
  shell.version = string_at(r, "provenance.version");
  shell.footer_html =
      "Every number in a table cell carries its result.json path (data-json) and exact value "
      "(data-value).";
  std::string h;
  h += "<div class=\"banner\">" + fidelity_banner_text(r, true) + "</div>\n";
  h += "<div class=\"banner tier\">" + tier_banner_text(r, true) + "</div>\n";
  h += comparison_section(page);
  h += reference_section(page);
  h += paired_section(page);
  h += training_section(page);
  h += routes_section(page);
  h += js_section(page);
  h += omitted_section(page);
  h += setup_section(page);
  return render_page(shell, h);
}

}  // namespace dg
