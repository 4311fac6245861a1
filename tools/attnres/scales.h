// The cross-scale report of `depthgrad reproduce --combine`: several finished paired runs'
// result.json -> one table across scales and pairs, and one chart of the effect (perplexity %)
// against parameter count (log x axis, 95% interval bars, one series per pair), as scales.md,
// scales.html (the shared page shell), scales.json and scales.svg (the chart alone, which
// scales.md and the README embed, since a Markdown viewer does not show the HTML page).
// Deterministic: rows are sorted by pair, then parameter count, then label, then source, and
// nothing is taken from the clock or the machine, so the same inputs give the same bytes whatever
// their order on the command line. It trains nothing and recomputes no paired statistics beyond
// mapping NLL differences to perplexity percent (stats.h's perplexity_percent), which older results
// did not record.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/io/json.h"

namespace dg {

struct ScaleRow {
  std::string source;  // the result.json read
  std::string preset;  // "" when the sizes came from flags
  std::string label;   // the preset, else "d<dim> L<layers>"
  std::string baseline, method;
  int64_t parameters = 0, parameters_baseline = 0;  // the method arm's count is the x axis
  int64_t dim = 0, layers = 0, seq_len = 0, batch = 0, steps = 0;
  int64_t tokens_seen = 0;  // per arm: steps · batch · seq_len
  int64_t n = 0, seeds_total = 0, wins = 0, ties = 0;
  std::string metric;
  double mean_difference = 0, ci95_low = 0, ci95_high = 0;      // nats/token, method − baseline
  double ppl_percent = 0, ppl_ci95_low = 0, ppl_ci95_high = 0;  // 100·(exp(d) − 1)
  double sign_test_p = 1;
  std::string verdict;                // stats.h paired_verdict
  std::vector<double> js_per_layer;   // the method's validation QK/V JS, mean over seeds
  std::vector<std::string> diverged;  // "seed 3 rd_attnres at step 512"
  double compute_seconds = 0;         // training + evaluation of every arm
  double wall_seconds = 0;            // of the invocation that finished the run
  std::vector<int64_t> threads;       // thread counts the arms ran with
  std::string version;                // provenance.version of the run

  std::string pair_label() const { return method + " − " + baseline; }
};

// One finished paired run. Throws std::runtime_error naming `source` when it is not a paired run
// or lacks a key the table needs (the key is named too).
ScaleRow scale_row_from_result(const json::Value& result, const std::string& source);

struct ScalesReport {
  std::vector<ScaleRow> rows;  // sorted (see above)
  std::string table;           // the Markdown table, also printed by the command
  std::string markdown, html;
  std::string chart_svg;  // scales_effect_chart of the rows, the same chart the HTML page shows
  json::Value json;
};

// Reads each input (a run directory holding result.json, or a result.json) and builds the report.
// Refuses, naming the file: a missing result.json (the run has not finished: resume it), a run
// that is not paired, and two inputs with the same pair and sizes (the same run given twice).
ScalesReport combine_scales(const std::vector<std::string>& inputs);
ScalesReport combine_scale_rows(std::vector<ScaleRow> rows);

// The renderings of sorted rows (report/scales_page.cpp): the Markdown table alone, the whole
// Markdown page and the whole HTML page (the shared shell and stylesheet, report/page.h) around
// `chart_svg`, scales_effect_chart(rows) (drawn once, for the page and scales.svg alike).
std::string render_scales_table(const std::vector<ScaleRow>& rows);
std::string render_scales_markdown(const std::vector<ScaleRow>& rows);
std::string render_scales_html(const std::vector<ScaleRow>& rows, const std::string& chart_svg);

// Writes scales.md, scales.html, scales.json and scales.svg into dir (created), each atomically.
void write_scales_report(const ScalesReport& report, const std::string& dir);

// The chart: one point per row at (parameters, ppl_percent) with its interval as a bar, log10 x
// axis, one series (colour and legend entry) per pair; each point carries data-x, data-y, data-low,
// data-high and data-series so tests can read the plotted values back.
std::string scales_effect_chart(const std::vector<ScaleRow>& rows, int width = 720,
                                int height = 380);

}  // namespace dg
