// result.json of `depthgrad evolve` -> report.md and index.html (see render.h).
#include "train/experiments/evolve/render.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "train/experiments/evolve/records.h"
#include "train/experiments/report/charts.h"
#include "train/experiments/report/page.h"
#include "train/experiments/report/text.h"

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

// Score of every trial in order, coloured by generation; failed trials as red crosses on the x
// axis.
std::string svg_trial_scatter(const Value& result) {
  const Array& trials = result.at("trials").as_array();
  const int width = 640, height = 300, left = 64, right = 16, top = 34, bottom = 46;
  double lo = INFINITY, hi = -INFINITY;
  for (const Value& t : trials)
    if (!t.at("score").is_null()) {
      lo = std::min(lo, t.at("score").as_double());
      hi = std::max(hi, t.at("score").as_double());
    }
  std::string svg =
      svg_chart_open(width, height, "Score per trial (lower is better), coloured by generation");
  if (!std::isfinite(lo))
    return svg + "<text x=\"64\" y=\"60\">no completed trial yet</text></svg>";
  const double pad = std::max((hi - lo) * 0.08, 1e-3);
  lo -= pad;
  hi += pad;
  const double pw = width - left - right, ph = height - top - bottom;
  const size_t n = trials.size();
  auto x_of = [&](size_t i) {
    return left + pw * (n == 1 ? 0.5 : (static_cast<double>(i) + 0.5) / static_cast<double>(n));
  };
  auto y_of = [&](double v) { return top + ph * (hi - v) / (hi - lo); };
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>", left, top,
                     left, top + ph);
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>", left,
                     top + ph, left + pw, top + ph);
  for (int k = 0; k <= 4; ++k) {
    const double v = lo + (hi - lo) * k / 4.0;
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/><text x=\"{}\" "
        "y=\"{:.1f}\" text-anchor=\"end\">{:.3f}</text>",
        left, y_of(v), left + pw, y_of(v), left - 4, y_of(v) + 4, v);
  }
  // The champion's score after each generation, as a step line.
  const Value& rounds = result.at("rounds");
  if (!trials.empty() && !trials[0].at("score").is_null()) {
    double level = trials[0].at("score").as_double();
    double x0 = x_of(0);
    for (const Value& r : rounds.as_array()) {
      if (r.at("champion_score").is_null()) continue;
      double x1 = x0;
      for (size_t i = 0; i < n; ++i)
        if (trials[i].at("generation").as_int() == r.at("generation").as_int()) x1 = x_of(i);
      svg += fmt::format(
          "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\" "
          "stroke-dasharray=\"4 3\"/>",
          x0, y_of(level), x1, y_of(level));
      level = r.at("champion_score").as_double();
      x0 = x1;
    }
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\" "
        "stroke-dasharray=\"4 3\"/>",
        x0, y_of(level), x_of(n - 1), y_of(level));
  }
  int64_t max_gen = 0;
  for (size_t i = 0; i < n; ++i) {
    const Value& t = trials[i];
    const int64_t g = t.at("generation").as_int();
    max_gen = std::max(max_gen, g);
    const std::string id = t.at("trial_id").as_string();
    if (n <= 24)
      svg += fmt::format(
          "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"end\" transform=\"rotate(-40 {:.1f} "
          "{})\">{}</text>",
          x_of(i), top + ph + 14, x_of(i), top + ph + 14, html_escape(id));
    if (t.at("score").is_null()) {
      svg += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#d62728\" "
          "font-size=\"14\">×<title>{} failed: {}</title></text>",
          x_of(i), top + ph - 4, html_escape(id),
          html_escape(t.at("error").is_null() ? "" : t.at("error").as_string()));
      continue;
    }
    svg += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\"><title>{} (generation {}): score "
        "{:.4f}, NLL {:.4f} ± {:.4f}\n{}</title></circle>",
        x_of(i), y_of(t.at("score").as_double()), generation_color(g), html_escape(id), g,
        t.at("score").as_double(), t.at("mean_nll").as_double(), t.at("std_nll").as_double(),
        html_escape(t.at("genome_summary").as_string()));
  }
  for (int64_t g = 0; g <= max_gen; ++g)
    svg += fmt::format(
        "<circle cx=\"{}\" cy=\"28\" r=\"4\" fill=\"{}\"/><text x=\"{}\" y=\"31\">gen {}</text>",
        width - right - 60 * (max_gen + 1 - g) + 4, generation_color(g),
        width - right - 60 * (max_gen + 1 - g) + 12, g);
  svg += fmt::format(
      "<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">score "
      "(nats)</text>",
      top + ph / 2, top + ph / 2);
  return svg + "</svg>";
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
  for (const char* k : {"score", "validation", "test", "training", "proposals"})
    md += fmt::format("- {}: {}.\n", k, p.at(k).as_string());
  md +=
      "- Scale: micro models and short budgets. Differences smaller than the seed-to-seed spread "
      "are noise, not findings.\n";
  const Value& prov = r.at("provenance");
  md += fmt::format(
      "\n## Provenance\n\ndepthgrad {} ({}), {}, BLAS {}, {} thread(s), {}; wall time {:.1f} s "
      "over {} session(s).\n",
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
  h += "<h2>Search</h2>\n" + svg_trial_scatter(r);
  // Champion lineage: the champion's score after each generation, and the best child of each
  // generation.
  std::vector<double> champ, best_child;
  bool all_children = true;
  if (!trials.as_array().empty() && !trials.at(size_t{0}).at("score").is_null()) {
    champ.push_back(trials.at(size_t{0}).at("score").as_double());
    best_child.push_back(champ.back());
    for (const Value& round : r.at("rounds").as_array()) {
      if (round.at("champion_score").is_null()) continue;
      champ.push_back(round.at("champion_score").as_double());
      const Array& obs = round.at("observations").as_array();
      if (!obs.empty() && !obs[0].at("score").is_null())
        best_child.push_back(obs[0].at("score").as_double());
      else
        all_children = false;
    }
  }
  if (champ.size() > 1) {
    std::vector<Series> series;
    if (all_children) series.push_back({"best child of the generation", best_child, "#1f77b4"});
    series.push_back({"champion after the generation", champ,
                      "#d62728"});  // drawn last: on top where they coincide
    h += svg_line_chart("Champion lineage: score after each generation", "generation",
                        "score (nats)", series);
  }
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
  for (const char* k : {"score", "validation", "test", "training", "proposals"})
    h += fmt::format("<li>{}: {}</li>", k, html_escape(r.at("protocol").at(k).as_string()));
  h += "</ul>\n<h2>result.json</h2><details><summary>show</summary><pre>" +
       html_escape(json::dump(r, 2)) + "</pre></details>\n";
  return render_page(shell, h);
}

}  // namespace dg
