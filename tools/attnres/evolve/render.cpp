// result.json of `depthgrad evolve` -> report.md and index.html (see render.h).
#include "tools/attnres/evolve/render.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

#include "tools/attnres/evolve/records.h"
#include "tools/attnres/report/charts.h"
#include "tools/attnres/report/page.h"
#include "tools/attnres/report/seed_curves.h"
#include "tools/attnres/report/text.h"

namespace dg {

using json::Array;
using json::Value;

namespace {

const char* kGenerationColors[] = {"#4c4c4c", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd",
                                   "#8c564b", "#e377c2", "#17becf", "#bcbd22"};
const char* generation_color(int64_t g) {
  return kGenerationColors[static_cast<size_t>(g) %
                           (sizeof(kGenerationColors) / sizeof(*kGenerationColors))];
}

std::string num(const Value& v, const char* spec = "{:.4f}") {
  if (v.is_null()) return "—";
  return fmt::format(fmt::runtime(spec), v.as_double());
}

std::string joined(const Value& list, const char* sep) {
  std::vector<std::string> parts;
  for (const Value& v : list.as_array()) parts.push_back(v.as_string());
  return fmt::format("{}", fmt::join(parts, sep));
}

// A direction in Chinese (any non-ASCII text, as the rules know only English and Chinese) is
// marked so, so the browser picks a CJK font and line breaking.
std::string lang_attribute(const std::string& text) {
  const bool ascii = std::all_of(text.begin(), text.end(),
                                 [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  return ascii ? "" : " lang=\"zh\"";
}

// The lowest and highest seed NLL of a trial (NaN when it has fewer than two seeds).
std::pair<double, double> seed_range(const Value& trial) {
  double lo = INFINITY, hi = -INFINITY;
  size_t n = 0;
  for (const Value& s : trial.at("seeds").as_array())
    if (const Value* nll = s.find("nll"); nll && nll->is_number()) {
      lo = std::min(lo, nll->as_double());
      hi = std::max(hi, nll->as_double());
      ++n;
    }
  if (n < 2) return {NAN, NAN};
  return {lo, hi};
}

size_t seeds_of(const Value& r) { return r.at("protocol").at("training_seeds").size(); }

std::string seed_bar_label(const Value& r) {
  return fmt::format("lowest–highest of the {} seeds", seeds_of(r));
}

// Mean validation NLL of every trial (x = trial, labelled with its id), coloured by generation,
// with the lowest and highest seed as an error bar; the champion's mean NLL after each generation
// as a dashed step line. Failed trials are not drawn (the table lists them).
std::string svg_trials(const Value& r) {
  const Array& trials = r.at("trials").as_array();
  std::map<int64_t, IntervalSeries> generations;
  std::vector<std::pair<double, std::string>> ticks;
  std::map<std::string, size_t> index_of;
  int64_t last_generation = -1;
  for (size_t i = 0; i < trials.size(); ++i) {
    const Value& t = trials[i];
    const std::string id = t.at("trial_id").as_string();
    const int64_t g = t.at("generation").as_int();
    index_of[id] = i;
    // Many trials: label the first of each generation only.
    if (trials.size() <= 30 || g != last_generation) ticks.emplace_back(i, id);
    last_generation = g;
    if (t.at("mean_nll").is_null()) continue;
    IntervalSeries& s = generations[g];
    s.label = g == 0 ? "baseline (generation 0)" : fmt::format("generation {}", g);
    s.color = generation_color(g);
    const auto [lo, hi] = seed_range(t);
    s.points.push_back({static_cast<double>(i), t.at("mean_nll").as_double(), lo, hi,
                        fmt::format("{} (generation {}): mean NLL {:.4f}, score {:.4f}\n{}", id, g,
                                    t.at("mean_nll").as_double(), t.at("score").as_double(),
                                    t.at("genome_summary").as_string())});
  }
  std::vector<IntervalSeries> series;
  if (!trials.empty() && !trials[0].at("mean_nll").is_null()) {
    IntervalSeries champion;
    champion.label = "champion after each generation";
    champion.color = "#6b7280";
    champion.markers = false;
    champion.dashed = true;
    champion.line = IntervalLine::steps;
    champion.points.push_back({0, trials[0].at("mean_nll").as_double(), NAN, NAN, ""});
    for (const Value& round : r.at("rounds").as_array()) {
      if (round.at("champion").is_null()) continue;
      const auto it = index_of.find(round.at("champion").as_string());
      if (it == index_of.end() || trials[it->second].at("mean_nll").is_null()) continue;
      size_t end = 0;  // the generation's last trial
      for (size_t i = 0; i < trials.size(); ++i)
        if (trials[i].at("generation").as_int() == round.at("generation").as_int()) end = i;
      champion.points.push_back(
          {static_cast<double>(end), trials[it->second].at("mean_nll").as_double(), NAN, NAN, ""});
    }
    champion.points.push_back(
        {static_cast<double>(trials.size() - 1), champion.points.back().y, NAN, NAN, ""});
    series.push_back(std::move(champion));
  }
  for (auto& [g, s] : generations) series.push_back(std::move(s));
  IntervalChartOptions o;
  o.x_tick_labels = ticks;
  o.error_bar_label = seed_bar_label(r);
  o.width = 760;
  o.height = 340;
  return svg_interval_chart("Validation NLL per trial (mean over seeds; lower is better)", "trial",
                            "validation NLL (nats/token)", series, o);
}

// The champion after each generation and the best child of each generation (x = generation).
std::string svg_lineage(const Value& r) {
  const Array& trials = r.at("trials").as_array();
  if (trials.empty() || trials[0].at("mean_nll").is_null() || r.at("rounds").size() == 0) return "";
  auto find = [&](const std::string& id) -> const Value* {
    for (const Value& t : trials)
      if (t.at("trial_id").as_string() == id) return t.at("mean_nll").is_null() ? nullptr : &t;
    return nullptr;
  };
  auto point = [&](double x, const Value& t) {
    const auto [lo, hi] = seed_range(t);
    return IntervalPoint{x, t.at("mean_nll").as_double(), lo, hi,
                         t.at("trial_id").as_string() + ": " + t.at("genome_summary").as_string()};
  };
  IntervalSeries champion, best;
  champion.label = "champion after the generation";
  champion.color = "#d62728";
  champion.line = IntervalLine::straight;
  best.label = "best child of the generation";
  best.color = "#1f77b4";
  best.line = IntervalLine::straight;
  champion.points.push_back(point(0, trials[0]));
  for (const Value& round : r.at("rounds").as_array()) {
    const double g = static_cast<double>(round.at("generation").as_int());
    if (!round.at("champion").is_null())
      if (const Value* t = find(round.at("champion").as_string()))
        champion.points.push_back(point(g, *t));
    const Array& obs = round.at("observations").as_array();
    if (!obs.empty())
      if (const Value* t = find(obs[0].at("trial_id").as_string()))
        best.points.push_back(point(g, *t));
  }
  IntervalChartOptions o;
  o.integer_x = true;
  o.error_bar_label = seed_bar_label(r);
  // The champion is drawn last, on top where the two coincide.
  return svg_interval_chart("Champion lineage: validation NLL after each generation", "generation",
                            "validation NLL (nats/token)", {best, champion}, o);
}

// A trial's record by id, or nullptr.
const Value* trial_by_id(const Value& r, const std::string& id) {
  for (const Value& t : r.at("trials").as_array())
    if (t.at("trial_id").as_string() == id) return &t;
  return nullptr;
}

// The champion's training curves beside the baseline's (mean over seeds, band min–max, seeds
// faint) and the champion's routes on the validation windows; "" when the trials recorded none.
std::string champion_training_html(const Value& r) {
  const Value& ch = r.at("champion");
  if (ch.is_null()) return "";
  const Value* champion = trial_by_id(r, ch.at("trial_id").as_string());
  const Value& baseline = r.at("trials").at(size_t{0});
  if (!champion) return "";
  std::vector<Series> series;
  size_t steps = 0;
  std::vector<std::pair<const Value*, const char*>> shown{{&baseline, "#4c4c4c"}};
  if (champion != &baseline) shown.emplace_back(champion, "#d62728");
  for (const auto& [t, color] : shown)
    for (const Value& s : t->at("seeds").as_array())
      if (const Value* l = s.find("losses")) steps = std::max(steps, l->size());
  if (steps == 0) return "";
  const size_t window = smoothing_window(steps);
  for (const auto& [t, color] : shown) {
    std::vector<std::vector<double>> curves;
    for (const Value& s : t->at("seeds").as_array())
      if (const Value* l = s.find("losses")) {
        std::vector<double> y;
        for (const Value& x : l->as_array()) y.push_back(x.as_double());
        curves.push_back(moving_average(y, window));
      }
    if (curves.empty()) continue;
    for (const auto& c : curves) {
      Series faint("", c, color);
      faint.faint = true;
      series.push_back(std::move(faint));
    }
    const SeedBand band = min_max_band(curves);
    Series mean(fmt::format("{} {} (mean of {} seeds{})", t == &baseline ? "baseline" : "champion",
                            t->at("trial_id").as_string(), curves.size(),
                            curves.size() > 1 ? ", band min–max" : ""),
                band.mean, color);
    if (curves.size() > 1) {
      mean.band_lo = band.lo;
      mean.band_hi = band.hi;
    }
    series.push_back(std::move(mean));
  }
  std::string h =
      "<h2>Champion: training and routes</h2>\n<figure>" +
      svg_line_chart("Training loss per step", "step", "training-batch loss (nats/token)", series,
                     900, 320) +
      "<figcaption>" +
      (window > 1 ? fmt::format("Smoothed with a centred moving average over {} steps. ", window)
                  : std::string()) +
      "Thick lines: the mean over the trial seeds; shaded: the lowest to the highest "
      "seed; faint: each seed. Trials with other step counts end at their own last "
      "step.</figcaption></figure>\n";
  // Routes of the champion's first seed.
  const Value& first = champion->at("seeds").at(size_t{0});
  if (const Value* routes = first.find("routes_validation")) {
    std::string row;
    for (const char* which : {"mean_alpha_qk", "mean_alpha_v"}) {
      std::vector<std::vector<double>> m;
      size_t widest = 0;
      for (const Value& line : routes->at(which).as_array()) {
        m.emplace_back();
        for (const Value& x : line.as_array()) m.back().push_back(x.as_double());
        widest = std::max(widest, m.back().size());
      }
      std::vector<std::string> rows, cols;
      for (size_t l = 0; l < m.size(); ++l) rows.push_back(fmt::format("layer {}", l));
      for (size_t j = 0; j < widest; ++j)
        cols.push_back(j == 0 ? "emb" : fmt::format("B{}", j - 1));
      row += "<figure>" +
             svg_heatmap(fmt::format("{} · {}", champion->at("trial_id").as_string(),
                                     std::string(which) == "mean_alpha_qk" ? "QK" : "V"),
                         rows, cols, m, 40) +
             "</figure>";
    }
    h += "<p>Mean routing weight per layer (rows) and residual source (columns: emb = token "
         "embedding, Bk = output of block k) on the validation windows, seed " +
         std::to_string(first.at("seed").as_int()) +
         ". A block_attnres model has one router, so its QK and V maps are the same.</p>\n"
         "<div class=\"figrow\">" +
         row + "</div>\n";
  }
  return h;
}

// The ablation's verdict and its single-gene variants (result.json["ablation"]), or "" when the
// result has none (the champion is the baseline, or an older result).
struct AblationRows {
  std::string verdict, parent, champion;
  bool confounded = false;
  struct Row {
    std::string change, trial_id, mean_nll, nll_change, paired;
  };
  std::vector<Row> rows;
};
std::optional<AblationRows> ablation_rows(const Value& r) {
  const Value* ab = r.find("ablation");
  if (!ab || !ab->is_object() || ab->at("verdict").is_null()) return std::nullopt;
  AblationRows a;
  a.verdict = ab->at("verdict").as_string();
  a.parent = ab->at("parent").as_string();
  a.champion = ab->at("champion").as_string();
  a.confounded = ab->at("confounded").as_bool();
  for (const Value& v : ab->at("variants").as_array()) {
    const Value& t = v.at("trial");
    const Value* paired = v.find("paired_mean_difference_vs_parent");
    a.rows.push_back(
        {v.at("change").as_string(), t.at("trial_id").as_string(), num(t.at("mean_nll")),
         v.at("nll_change_alone").is_null() ? "—"
                                            : signed_delta(v.at("nll_change_alone").as_double()),
         paired ? fmt::format("{} (lower on {} of {} seeds)", signed_delta(paired->as_double()),
                              v.at("seeds_lower_than_parent").as_int(), t.at("seeds").size())
                : "—"});
  }
  return a;
}

}  // namespace

std::string render_evolve_markdown(const Value& r) {
  const Value& cfg = r.at("config");
  const Value& dir = r.at("direction");
  std::string md;
  md += fmt::format("# depthgrad evolve: {} on {}\n\n", cfg.at("model").as_string(),
                    cfg.at("dataset").as_string());
  md += fmt::format("Run `{}`, status **{}**.\n\n", r.at("run_id").as_string(),
                    r.at("status").as_string());
  md += fmt::format("## Direction\n\n> {}\n\nNormalized: `{}`\n\n", dir.at("text").as_string(),
                    dir.at("normalized").as_string());
  if (dir.at("fallback_full_space").as_bool())
    md += fmt::format("No rule matched: {}.\n\n", dir.at("note").as_string());
  for (const Value& m : dir.at("matched_rules").as_array())
    md += fmt::format("- rule `{}` matched {}: {}\n", m.at("rule").as_string(),
                      joined(m.at("keywords"), ", "), m.at("effect").as_string());
  md += "\n| gene | chance a mutation picks it | values (weight) |\n|---|---:|---|\n";
  for (const auto& [gene, g] : dir.at("search_space").as_object()) {
    std::vector<std::string> vals;
    for (const auto& [v, w] : g.at("values").as_object())
      vals.push_back(fmt::format("{} ({:g})", v, w.as_double()));
    md += fmt::format("| {} | {:.0f}% | {} |\n", gene, 100 * g.at("probability").as_double(),
                      fmt::join(vals, ", "));
  }
  md += "\n## Result\n\n";
  const Value& ch = r.at("champion");
  const Value& test = r.at("test");
  if (!ch.is_null()) {
    md += fmt::format("Champion{}: **{}** — {}\n\n", ch.at("final").as_bool() ? "" : " so far",
                      ch.at("trial_id").as_string(), ch.at("genome_summary").as_string());
    std::vector<std::string> diff;
    for (const Value& d : ch.at("changes_from_baseline").as_array()) diff.push_back(d.as_string());
    md += fmt::format("Changes from the baseline: {}. Lineage: {}.\n\n",
                      diff.empty() ? std::string("none") : fmt::format("{}", fmt::join(diff, ", ")),
                      joined(ch.at("lineage"), " → "));
    const Value& base = r.at("trials").at(size_t{0});
    md +=
        "| | trial | validation NLL (mean ± std) | score | validation PPL | test NLL | test PPL "
        "|\n|---|---|---:|---:|---:|---:|---:|\n";
    auto row = [&](const char* role, const Value& t) {
      const Value* tt = test.is_object() ? test.find(role) : nullptr;
      md += fmt::format("| {} | {} | {} ± {} | {} | {} | {} | {} |\n", role,
                        t.at("trial_id").as_string(), num(t.at("mean_nll")), num(t.at("std_nll")),
                        num(t.at("score")), num(t.at("perplexity"), "{:.2f}"),
                        tt ? num(tt->at("mean_nll")) : "—",
                        tt ? num(tt->at("perplexity"), "{:.2f}") : "—");
    };
    row("baseline", base);
    row("champion", ch);
    if (!test.is_object()) md += "\nThe test split is evaluated when the search finishes.\n";
  }
  if (const auto ab = ablation_rows(r)) {
    md += fmt::format("\n## Attribution\n\nThe champion {} against its parent {}: **{}**.\n",
                      ab->champion, ab->parent, ab->verdict);
    if (!ab->rows.empty()) {
      md +=
          "\n| gene applied alone to the parent | trial | mean NLL | NLL change vs parent | paired "
          "|\n|---|---|---:|---:|---|\n";
      for (const auto& row : ab->rows)
        md += fmt::format("| {} | {} | {} | {} | {} |\n", md_cell(row.change), row.trial_id,
                          row.mean_nll, row.nll_change, row.paired);
    }
  }
  md += "\n## Rounds\n\n";
  for (const Value& round : r.at("rounds").as_array()) {
    md += fmt::format("### Generation {} (parent {}{})\n\n", round.at("generation").as_int(),
                      round.at("parent").as_string(),
                      round.at("runner_up").is_null()
                          ? ""
                          : fmt::format(", runner-up {}", round.at("runner_up").as_string()));
    for (const Value& p : round.at("proposals").as_array())
      md += fmt::format(
          "- {} {}: {}{}{}\n", p.at("trial_id").as_string(), p.at("origin").as_string(),
          joined(p.at("changes"), ", "),
          p.at("draws").as_int() > 1 ? fmt::format(" ({} draws)", p.at("draws").as_int()) : "",
          p.at("note").is_null() ? "" : "; " + p.at("note").as_string());
    for (const Value& s : round.at("skipped").as_array())
      md += fmt::format("- skipped {}\n", s.as_string());
    md +=
        "\n| trial | status | mean NLL | score | paired Δ vs parent | seeds lower "
        "|\n|---|---|---:|---:|---:|---:|\n";
    for (const Value& ob : round.at("observations").as_array()) {
      const Value* d = ob.find("paired_mean_difference_vs_parent");
      const Value* w = ob.find("seeds_lower_than_parent");
      md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", ob.at("trial_id").as_string(),
                        ob.at("status").as_string(), num(ob.at("mean_nll")), num(ob.at("score")),
                        d ? signed_delta(d->as_double()) : "—",
                        w ? std::to_string(w->as_int()) : "—");
    }
    md += fmt::format("\nDecision: {}\n\n", round.at("decision").is_null()
                                                ? std::string("(running)")
                                                : round.at("decision").as_string());
  }
  md +=
      "## All trials\n\n| trial | gen | origin | changes | genome | mean NLL | std | score | PPL | "
      "params | seconds | status |\n"
      "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|\n";
  for (const Value& t : r.at("trials").as_array()) {
    md += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1f} | {}{} |\n",
        t.at("trial_id").as_string(), t.at("generation").as_int(), t.at("origin").as_string(),
        md_cell(joined(t.at("changes"), ", ")), t.at("genome_summary").as_string(),
        num(t.at("mean_nll")), num(t.at("std_nll")), num(t.at("score")),
        num(t.at("perplexity"), "{:.2f}"),
        t.at("parameters").is_null() ? "—" : std::to_string(t.at("parameters").as_int()),
        t.at("duration_seconds").as_double(), t.at("status").as_string(),
        t.at("error").is_null() ? "" : ": " + md_cell(t.at("error").as_string()));
  }
  const Value& p = r.at("protocol");
  md += "\n## Protocol\n\n";
  std::vector<std::string> seeds;
  for (const Value& s : p.at("training_seeds").as_array())
    seeds.push_back(std::to_string(s.as_int()));
  md += fmt::format("- Training seeds (every trial): {}.\n", fmt::join(seeds, ", "));
  for (const char* k :
       {"score", "validation", "test", "training", "budget", "proposals", "ablation"})
    if (const Value* v = p.find(k)) md += fmt::format("- {}: {}.\n", k, v->as_string());
  md +=
      "- Scale: micro models and short budgets. Differences smaller than the seed-to-seed spread "
      "are noise, not findings.\n";
  const Value& prov = r.at("provenance");
  md += fmt::format(
      "\n## Provenance\n\ndepthgrad {} ({}), {}, BLAS {}, {} thread(s), {}; wall time {:.1f} s "
      "over {} invocation(s).\n",
      prov.at("version").as_string(), prov.at("code_commit").as_string(),
      prov.at("compiler").as_string(), prov.at("blas").as_string(), prov.at("threads").as_int(),
      prov.at("created_at").as_string(), r.at("runtime").at("wall_seconds").as_double(),
      r.at("runtime").at("sessions").as_int());
  return md;
}

std::string render_evolve_html(const Value& r) {
  const Value& cfg = r.at("config");
  const Value& dir = r.at("direction");
  const Value& trials = r.at("trials");
  const Value& prov = r.at("provenance");
  PageShell shell;
  shell.title = fmt::format("Evolutionary search: {} on {}", cfg.at("model").as_string(),
                            cfg.at("dataset").as_string());
  shell.command = "evolve";
  shell.meta_html = fmt::format(
      "run {} · status <b>{}</b> · {} · {}", html_escape(r.at("run_id").as_string()),
      html_escape(r.at("status").as_string()), html_escape(prov.at("created_at").as_string()),
      html_escape(prov.at("code_commit").as_string()));
  shell.version = prov.at("version").as_string();
  shell.footer_html =
      "Scores are the mean validation NLL over a trial's seeds plus z standard errors; the test "
      "split is evaluated once, for the baseline and the champion.";
  std::string h;
  const std::string& direction = dir.at("text").as_string();
  h += "<h2>Direction</h2><blockquote" + lang_attribute(direction) + ">" + html_escape(direction) +
       "</blockquote><ul>";
  for (const Value& m : dir.at("matched_rules").as_array())
    h += fmt::format(
        "<li><code>{}</code> matched {}: {}</li>", html_escape(m.at("rule").as_string()),
        html_escape(joined(m.at("keywords"), ", ")), html_escape(m.at("effect").as_string()));
  if (dir.at("fallback_full_space").as_bool())
    h += "<li>" + html_escape(dir.at("note").as_string()) + "</li>";
  h += "</ul>\n";
  const Value& ch = r.at("champion");
  const Value& test = r.at("test");
  std::string champion_id;
  if (!ch.is_null()) {
    champion_id = ch.at("trial_id").as_string();
    h += fmt::format("<h2>Champion{}: {}</h2><p>{}<br>lineage: {}</p>\n",
                     ch.at("final").as_bool() ? "" : " so far", html_escape(champion_id),
                     html_escape(ch.at("genome_summary").as_string()),
                     html_escape(joined(ch.at("lineage"), " → ")));
    h += "<table><tr><th></th><th>trial</th><th>validation NLL</th><th>score</th><th>validation "
         "PPL</th><th>test NLL</th><th>test PPL</th></tr>";
    auto row = [&](const char* role, const Value& t) {
      const Value* tt = test.is_object() ? test.find(role) : nullptr;
      h += fmt::format(
          "<tr><td>{}</td><td>{}</td><td class=\"num\">{} ± {}</td><td class=\"num\">{}</td><td "
          "class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
          role, html_escape(t.at("trial_id").as_string()), num(t.at("mean_nll")),
          num(t.at("std_nll")), num(t.at("score")), num(t.at("perplexity"), "{:.2f}"),
          tt ? num(tt->at("mean_nll")) : "—", tt ? num(tt->at("perplexity"), "{:.2f}") : "—");
    };
    row("baseline", trials.at(size_t{0}));
    row("champion", ch);
    h += "</table>\n";
  }
  h += champion_training_html(r);
  if (const auto ab = ablation_rows(r)) {
    h += fmt::format(
        "<h2>Attribution</h2>\n<p class=\"{}\">The champion {} against its parent "
        "{}: <b>{}</b>.</p>\n",
        ab->confounded ? "verdict confounded" : "verdict", html_escape(ab->champion),
        html_escape(ab->parent), html_escape(ab->verdict));
    if (!ab->rows.empty()) {
      h += "<table><tr><th>gene applied alone to the parent</th><th>trial</th><th "
           "class=\"num\">mean NLL</th><th class=\"num\">NLL change vs parent</th><th>paired over "
           "seeds</th></tr>\n";
      for (const auto& row : ab->rows)
        h += fmt::format(
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td "
            "class=\"num\">{}</td><td>{}</td></tr>\n",
            html_escape(row.change), html_escape(row.trial_id), row.mean_nll, row.nll_change,
            html_escape(row.paired));
      h += "</table>\n";
    }
  }
  h += "<h2>Search</h2>\n<figure>" + svg_trials(r) +
       "<figcaption>Each point is a trial's mean validation NLL over its seeds; the error bar "
       "spans its lowest and highest seed. The search selects by score = mean + z·stderr (in "
       "the table below). Failed trials are not drawn.</figcaption></figure>\n";
  if (const std::string lineage = svg_lineage(r); !lineage.empty())
    h += "<figure>" + lineage + "</figure>\n";
  std::vector<std::string> labels;
  std::vector<double> values;
  const Value& base_nll = trials.as_array().empty() ? Value() : trials.at(size_t{0}).at("mean_nll");
  if (!base_nll.is_null()) {
    for (const Value& t : trials.as_array()) {
      labels.push_back(t.at("trial_id").as_string());
      values.push_back(
          t.at("mean_nll").is_null() ? NAN : t.at("mean_nll").as_double() - base_nll.as_double());
    }
    h += svg_bar_chart("Mean validation NLL minus the baseline's (negative = better; n/a = failed)",
                       labels, values, "Δ NLL (nats)");
  }
  h += "<h2>Rounds</h2>\n";
  for (const Value& round : r.at("rounds").as_array()) {
    h += fmt::format("<h3>Generation {} (parent {})</h3><ul>", round.at("generation").as_int(),
                     html_escape(round.at("parent").as_string()));
    for (const Value& p : round.at("proposals").as_array())
      h += fmt::format(
          "<li>{} {}: {}{}</li>", html_escape(p.at("trial_id").as_string()),
          html_escape(p.at("origin").as_string()), html_escape(joined(p.at("changes"), ", ")),
          p.at("note").is_null() ? "" : " <i>(" + html_escape(p.at("note").as_string()) + ")</i>");
    for (const Value& s : round.at("skipped").as_array())
      h += "<li>skipped " + html_escape(s.as_string()) + "</li>";
    h += fmt::format("</ul><p>{}</p>\n", html_escape(round.at("decision").is_null()
                                                         ? std::string("(running)")
                                                         : round.at("decision").as_string()));
  }
  h += "<h2>All "
       "trials</h2>\n<table><tr><th>trial</th><th>gen</th><th>origin</th><th>changes</"
       "th><th>genome</th><th>mean NLL</th><th>std</th>"
       "<th>score</th><th>PPL</th><th>params</th><th>s</th><th>status</th></tr>\n";
  for (const Value& t : trials.as_array()) {
    const std::string id = t.at("trial_id").as_string();
    const bool failed = t.at("status").as_string() != "completed";
    h += fmt::format(
        "<tr class=\"{}\"><td><span style=\"color:{}\">●</span> {}</td><td "
        "class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td "
        "class=\"num\">{}</td><td "
        "class=\"num\">{:.1f}</td><td>{}</td></tr>\n",
        id == champion_id ? "champion"
        : failed          ? "failed"
                          : "",
        generation_color(t.at("generation").as_int()), html_escape(id), t.at("generation").as_int(),
        html_escape(t.at("origin").as_string()), html_escape(joined(t.at("changes"), ", ")),
        html_escape(t.at("genome_summary").as_string()), num(t.at("mean_nll")),
        num(t.at("std_nll")), num(t.at("score")), num(t.at("perplexity"), "{:.2f}"),
        t.at("parameters").is_null() ? "—" : std::to_string(t.at("parameters").as_int()),
        t.at("duration_seconds").as_double(),
        html_escape(t.at("status").as_string() +
                    (t.at("error").is_null() ? "" : ": " + t.at("error").as_string())));
  }
  h += "</table>\n<h2>Protocol</h2><ul>";
  for (const char* k :
       {"score", "validation", "test", "training", "budget", "proposals", "ablation"})
    if (const Value* v = r.at("protocol").find(k))
      h += fmt::format("<li>{}: {}</li>", k, html_escape(v->as_string()));
  h += "</ul>\n<h2>result.json</h2><details><summary>show</summary><pre>" +
       html_escape(json::dump(r, 2)) + "</pre></details>\n";
  return render_page(shell, h);
}

}  // namespace dg
