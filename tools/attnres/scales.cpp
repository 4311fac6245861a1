// Reading finished paired runs into the cross-scale table (see scales.h); the page itself is
// rendered by report/scales_page.cpp.
#include "tools/attnres/scales.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "tools/attnres/report/lookup.h"
#include "tools/attnres/stats.h"
#include "train/io/files.h"

namespace dg {

using json::Value;

namespace {

int64_t integer_at(const Value& r, std::string_view path) {
  const Value& v = value_at(r, path);
  if (!v.is_integer())
    throw std::runtime_error(fmt::format("{}: expected an integer", std::string(path)));
  return v.as_int();
}

// Sum of every arm's training and evaluation seconds (results written before "scale" existed).
double arm_seconds(const Value& r, const std::string& baseline, const std::string& method) {
  double total = 0;
  for (size_t s = 0; s < array_at(r, "seed_results").size(); ++s)
    for (const std::string& arm : {baseline, method}) {
      const std::string p = fmt::format("seed_results[{}].{}", s, arm);
      total += number_at(r, p + ".training.seconds") + number_at(r, p + ".eval_seconds");
    }
  return total;
}

ScaleRow read_row(const Value& r, const std::string& source) {
  if (!r.is_object()) throw std::runtime_error("expected a JSON object");
  const std::string protocol = string_at(r, "protocol");
  if (protocol != "paired" || !optional_value_at(r, "paired"))
    throw std::runtime_error(fmt::format(
        "protocol {}: not a paired run (--combine takes runs of --protocol paired)", protocol));
  ScaleRow row;
  row.source = source;
  row.baseline = string_at(r, "baseline.name");
  row.method = string_at(r, "method.name");
  row.preset = optional_string_at(r, "config.preset").value_or("");
  row.dim = integer_at(r, "config.model.dim");
  row.layers = integer_at(r, "config.model.layers");
  row.seq_len = integer_at(r, "config.model.seq_len");
  row.batch = integer_at(r, "config.training.batch");
  row.steps = integer_at(r, "config.training.steps");
  row.label = row.preset.empty() ? fmt::format("d{} L{}", row.dim, row.layers) : row.preset;
  row.parameters = integer_at(r, "method.parameters");
  row.parameters_baseline = integer_at(r, "baseline.parameters");
  row.tokens_seen = row.steps * row.batch * row.seq_len;
  row.n = integer_at(r, "paired.n");
  row.seeds_total = optional_value_at(r, "paired.seeds_total")
                        ? integer_at(r, "paired.seeds_total")
                        : static_cast<int64_t>(array_at(r, "setup.seeds").size());
  row.wins = integer_at(r, "paired.wins_method");
  row.ties = integer_at(r, "paired.ties");
  row.metric = string_at(r, "paired.metric");
  row.mean_difference = number_at(r, "paired.mean_difference");
  row.ci95_low = number_at(r, "paired.ci95[0]");
  row.ci95_high = number_at(r, "paired.ci95[1]");
  row.ppl_percent = perplexity_percent(row.mean_difference);
  row.ppl_ci95_low = perplexity_percent(row.ci95_low);
  row.ppl_ci95_high = perplexity_percent(row.ci95_high);
  row.sign_test_p = number_at(r, "paired.sign_test_p");
  PairedSummary summary;
  summary.n = row.n;
  summary.ci95_low = row.ci95_low;
  summary.ci95_high = row.ci95_high;
  row.verdict = paired_verdict(summary, kEffectBoundPercent);
  for (size_t l = 0; l < array_at(r, "paired.validation_js_per_layer").size(); ++l)
    row.js_per_layer.push_back(
        number_at(r, fmt::format("paired.validation_js_per_layer[{}].mean_over_seeds", l)));
  if (optional_value_at(r, "paired.diverged"))
    for (size_t i = 0; i < array_at(r, "paired.diverged").size(); ++i) {
      const std::string p = fmt::format("paired.diverged[{}]", i);
      row.diverged.push_back(fmt::format("seed {} {} at step {}", integer_at(r, p + ".seed"),
                                         string_at(r, p + ".arm"), integer_at(r, p + ".step")));
    }
  if (optional_value_at(r, "scale")) {
    row.compute_seconds = number_at(r, "scale.compute_seconds");
    for (size_t i = 0; i < array_at(r, "scale.threads").size(); ++i)
      row.threads.push_back(integer_at(r, fmt::format("scale.threads[{}]", i)));
  } else {
    row.compute_seconds = arm_seconds(r, row.baseline, row.method);
    row.threads.push_back(integer_at(r, "runtime.cpu_threads"));
  }
  row.wall_seconds = number_at(r, "runtime.wall_seconds");
  row.version = optional_string_at(r, "provenance.version").value_or("");
  return row;
}

}  // namespace

ScaleRow scale_row_from_result(const Value& result, const std::string& source) {
  try {
    return read_row(result, source);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("--combine: {}: {}", source, e.what()));
  }
}

ScalesReport combine_scale_rows(std::vector<ScaleRow> rows) {
  if (rows.empty()) throw std::runtime_error("--combine: no runs to combine");
  auto key = [](const ScaleRow& r) {
    return std::tie(r.baseline, r.method, r.parameters, r.label, r.steps, r.source);
  };
  std::sort(rows.begin(), rows.end(),
            [&](const ScaleRow& a, const ScaleRow& b) { return key(a) < key(b); });
  for (size_t i = 1; i < rows.size(); ++i) {
    const ScaleRow &a = rows[i - 1], &b = rows[i];
    if (a.baseline == b.baseline && a.method == b.method && a.parameters == b.parameters &&
        a.label == b.label && a.steps == b.steps && a.tokens_seen == b.tokens_seen)
      throw std::runtime_error(fmt::format(
          "--combine: {} and {} are the same pair ({}) at the same size ({}, {} steps): give one",
          a.source, b.source, a.pair_label(), a.label, a.steps));
  }
  ScalesReport report;
  report.rows = std::move(rows);
  report.table = render_scales_table(report.rows);
  report.markdown = render_scales_markdown(report.rows);
  report.chart_svg = scales_effect_chart(report.rows);
  report.html = render_scales_html(report.rows, report.chart_svg);
  json::Array out;
  for (const ScaleRow& r : report.rows) {
    Value v;
    v["source"] = r.source;
    v["label"] = r.label;
    v["preset"] = r.preset;
    v["baseline"] = r.baseline;
    v["method"] = r.method;
    v["parameters"] = r.parameters;
    v["parameters_baseline"] = r.parameters_baseline;
    v["dim"] = r.dim;
    v["layers"] = r.layers;
    v["seq_len"] = r.seq_len;
    v["batch"] = r.batch;
    v["steps"] = r.steps;
    v["tokens_seen_per_arm"] = r.tokens_seen;
    v["n"] = r.n;
    v["seeds_total"] = r.seeds_total;
    v["wins_method"] = r.wins;
    v["ties"] = r.ties;
    v["metric"] = r.metric;
    v["mean_difference"] = r.mean_difference;
    v["ci95"] = json::Array{Value(r.ci95_low), Value(r.ci95_high)};
    v["perplexity_percent"] = r.ppl_percent;
    v["perplexity_percent_ci95"] = json::Array{Value(r.ppl_ci95_low), Value(r.ppl_ci95_high)};
    v["sign_test_p"] = r.sign_test_p;
    v["verdict"] = r.verdict;
    json::Array js, diverged, threads;
    for (double x : r.js_per_layer) js.emplace_back(x);
    for (const std::string& d : r.diverged) diverged.emplace_back(d);
    for (int64_t t : r.threads) threads.emplace_back(t);
    v["validation_js_per_layer"] = Value(std::move(js));
    v["diverged"] = Value(std::move(diverged));
    v["compute_seconds"] = r.compute_seconds;
    v["wall_seconds"] = r.wall_seconds;
    v["threads"] = Value(std::move(threads));
    v["version"] = r.version;
    out.push_back(std::move(v));
  }
  report.json["perplexity_percent_definition"] =
      "100·(exp(mean NLL difference) − 1), the interval's ends mapped the same way";
  report.json["rows"] = Value(std::move(out));
  return report;
}

ScalesReport combine_scales(const std::vector<std::string>& inputs) {
  std::vector<ScaleRow> rows;
  for (std::string input : inputs) {
    while (input.size() > 1 && input.back() == '/') input.pop_back();
    const std::string path =
        input.size() >= 11 && input.compare(input.size() - 11, 11, "result.json") == 0
            ? input
            : input + "/result.json";
    if (!file_exists(path))
      throw std::runtime_error(fmt::format(
          "--combine: {} does not exist: the run has not finished (run its command again; the "
          "state file resumes it)",
          path));
    Value result;
    try {
      result = json::parse(read_file(path), path);
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("--combine: {}", e.what()));
    }
    rows.push_back(scale_row_from_result(result, path));
  }
  return combine_scale_rows(std::move(rows));
}

void write_scales_report(const ScalesReport& report, const std::string& dir) {
  make_dirs(dir);
  write_file_atomic(dir + "/scales.md", report.markdown);
  write_file_atomic(dir + "/scales.html", report.html);
  write_file_atomic(dir + "/scales.json", json::dump(report.json, 2) + "\n");
  write_file_atomic(dir + "/scales.svg", report.chart_svg);
}

}  // namespace dg
