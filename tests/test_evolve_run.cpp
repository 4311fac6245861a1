// `depthgrad evolve` with real training and the page it writes: a tiny end-to-end search on
// WikiText-2 (when DEPTHGRAD_TEST_DATA names the data directory), the real trainer against a plain
// Trainer loop bit for bit, and index.html (the shared page shell, chart ticks, error bars,
// champion curves). The search logic itself is tests/test_evolve.cpp's.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "tests/evolve_test_helpers.h"
#include "tests/temp_dir.h"
#include "tests/test_data.h"
#include "tools/attnres/evolve.h"
#include "tools/attnres/evolve/records.h"
#include "tools/attnres/report.h"
#include "train/io/files.h"
#include "train/lm/batches.h"
#include "train/lm/data/corpus.h"
#include "train/lm/micro_lm_training.h"

using namespace dg;
using dg::test::TempDir;
using namespace dg::evolve_test;

TEST_CASE("evolve end to end on WikiText-2 (tiny budget)") {
  const std::optional<std::string> data_dir = dg::test::data_dir_or_skip();
  if (!data_dir) return;
  TempDir dir("evolve-e2e");
  CorpusOptions co;
  co.data_dir = *data_dir;
  co.cache_dir = "";  // no cache: the test writes nothing outside its temporary directory
  co.train_limit = 0;
  co.eval_limit = 0;
  Corpus corpus = load_wikitext_corpus(co);
  EvolveOptions o;
  o.generations = 1;
  o.population = 2;
  o.trial_seeds = 1;
  set_gene(o.baseline, Gene::steps, "3");
  set_gene(o.baseline, Gene::dim, "32");
  o.eval_windows = 8;
  o.run_dir = (dir.path / "run").string();
  TrialTrainer trainer = make_micro_lm_trainer(corpus.train, corpus.validation, corpus.test,
                                               corpus.tokenizer.vocab_size(), o.eval_windows);
  EvolveOutput out = run_evolution(o, trainer);
  const json::Value& r = out.result;
  CHECK(r.at("status").as_string() == "complete");
  CHECK(r.at("trials").size() == 3);
  for (const json::Value& t : r.at("trials").as_array()) {
    CHECK(t.at("status").as_string() == "completed");
    const double nll = t.at("mean_nll").as_double();
    CHECK(nll > 5.0);
    CHECK(nll < 7.0);  // ln 512 = 6.24 at the start; 3 steps barely move it
  }
  for (const char* role : {"baseline", "champion"}) {
    const json::Value& t = r.at("test").at(role);
    CHECK(t.at("status").as_string() == "completed");
    CHECK(std::isfinite(t.at("mean_nll").as_double()));
    CHECK(t.at("seeds").at(size_t{0}).at("weights").as_string() == "kept in memory");
  }
  CHECK(out.summary.find("Champion: ") == 0);
  CHECK(read_file(o.run_dir + "/index.html").find("<svg") != std::string::npos);
}

namespace {
// Token ids with some structure (no data files needed).
std::vector<int32_t> synthetic_ids(size_t n, uint32_t seed) {
  std::vector<int32_t> ids(n);
  uint32_t x = seed;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    ids[i] = static_cast<int32_t>((x >> 24) % 48 + (i % 7 == 0 ? 0 : 16) % 64);
  }
  return ids;
}
}  // namespace

TEST_CASE("evolve's real trainer trains and evaluates through train_and_evaluate, bit for bit") {
  // The reference is the loop evolve carried privately before it used train_and_evaluate: build a
  // Trainer from the genome's config, run every step, average the first and last ≤10 losses,
  // evaluate the kept model on the first windows of each split. Results must equal it exactly.
  const std::vector<int32_t> train = synthetic_ids(6000, 1), validation = synthetic_ids(1500, 2),
                             test = synthetic_ids(1500, 3);
  const int64_t vocab = 64;
  Genome g;
  for (auto [gene, value] : {std::pair{Gene::mode, "rd_attnres"},
                             {Gene::dim, "32"},
                             {Gene::layers, "2"},
                             {Gene::heads, "2"},
                             {Gene::kv_heads, "2"},
                             {Gene::steps, "12"},
                             {Gene::batch, "2"}})
    set_gene(g, gene, value);
  g.run.model.seq_len = 16;
  const int64_t seq_len = g.run.model.seq_len;
  for (int64_t windows : {int64_t{5}, int64_t{0}}) {
    INFO("eval windows " << windows);
    const RunConfig config = genome_run_config(g, 7, vocab, windows);
    MicroLMTrainer reference(config, train);
    reference.run(config.training.steps);
    const std::vector<double>& losses = reference.losses();
    double first = 0, last = 0;
    for (size_t i = 0; i < 10; ++i) first += losses[i], last += losses[losses.size() - 10 + i];
    auto starts = [&](const std::vector<int32_t>& ids) {
      const int64_t n = static_cast<int64_t>(ids.size());
      return windows > 0 ? reference_eval_starts(n, seq_len, windows)
                         : full_eval_starts(n, seq_len);
    };
    const double ref_validation =
        evaluate_windows(reference.model(), validation, starts(validation), seq_len);
    const double ref_test = evaluate_windows(reference.model(), test, starts(test), seq_len);

    TrialTrainer trainer = make_micro_lm_trainer(train, validation, test, vocab, windows);
    SeedMetrics m = trainer(TrialRun{"g0-t0", g, 7, 0, 1, EvalSplit::validation});
    CHECK(m.seed == 7);
    CHECK(m.nll == ref_validation);
    CHECK(m.perplexity == std::exp(ref_validation));
    CHECK(m.initial_loss == first / 10);
    CHECK(m.final_loss == last / 10);
    CHECK(m.parameters == reference.model().parameter_count());
    REQUIRE(m.evaluate_test);
    CHECK(m.evaluate_test() == ref_test);  // the kept model, on the test windows
    // Re-training for the test split (a resumed run) gives the same number.
    SeedMetrics t = trainer(TrialRun{"g0-t0", g, 7, 0, 1, EvalSplit::test});
    CHECK(t.nll == ref_test);
    CHECK_FALSE(t.evaluate_test);
  }
}

TEST_CASE("evolve's index.html is the shared page shell with the one stylesheet") {
  FakeTrainer fake;
  EvolveOutput out = run_evolution(fake_options(), fake.fn());
  const std::string html = render_evolve_html(out.result);
  const size_t style = html.find("<style>"), style_end = html.find("</style>");
  REQUIRE(style != std::string::npos);
  CHECK(html.substr(style + 7, style_end - style - 7) == report_stylesheet());
  CHECK(html.find("<style", style + 1) == std::string::npos);  // one stylesheet, no other
  // The same head and header as reproduce's report.html (tests/test_report.cpp checks that one).
  PageShell shell;
  shell.title = "Evolutionary search: micro-llm on wikitext-2";
  shell.command = "evolve";
  const std::string reference = render_page(shell, "");
  const std::string head = reference.substr(0, reference.find("<div class=\"meta\">"));
  CHECK(html.rfind(head, 0) == 0);
  CHECK(
      html.find("<div class=\"meta\">depthgrad evolve · run in-memory · status <b>complete</b>") !=
      std::string::npos);
  CHECK(html.find("<footer>Rendered from result.json by depthgrad ") != std::string::npos);
  CHECK(html.find("</footer>\n</main>\n</body>\n</html>\n") != std::string::npos);
  // The Chinese direction is marked as such (the stylesheet's font stack has CJK fonts).
  CHECK(html.find("<blockquote lang=\"zh\">比较 Block AttnRes 与 RD-AttnRes 的 QK/V 深度路由") !=
        std::string::npos);
  CHECK(html.find("class=\"chart\"") != std::string::npos);  // charts from report/charts.h
  CHECK(html.find("<svg") != std::string::npos);
  CHECK(html == render_evolve_html(out.result));  // deterministic
}

namespace {
std::string chart_of(const std::string& html, const std::string& title) {
  const size_t at = html.find("aria-label=\"" + title);
  if (at == std::string::npos) return "";
  const size_t open = html.rfind("<svg", at);
  return html.substr(open, html.find("</svg>", at) + 6 - open);
}
size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}
// The texts of the y-axis tick labels of a chart.
std::vector<double> y_ticks(const std::string& svg) {
  std::vector<double> ticks;
  const size_t group = svg.find("<g class=\"y-ticks\"");
  const size_t end = svg.find("</g>", group);
  for (size_t at = svg.find("<text", group); at < end; at = svg.find("<text", at + 1)) {
    const size_t open = svg.find('>', at) + 1;
    ticks.push_back(std::stod(svg.substr(open, svg.find('<', open) - open)));
  }
  return ticks;
}
}  // namespace

TEST_CASE("evolve's page: nice score ticks, whole generations, seed error bars, champion curves") {
  FakeTrainer fake;
  fake.custom = [](const TrialRun& run) {
    SeedMetrics m;
    m.seed = run.seed;
    m.nll = FakeTrainer::base_nll(run);
    m.perplexity = std::exp(m.nll);
    for (int k = 0; k < 120; ++k) m.losses.push_back(6.5 - 0.01 * k + 0.001 * (run.seed - 42));
    m.routes_qk = {{1.0}, {0.4, 0.6}};
    m.routes_v = {{1.0}, {0.3, 0.7}};
    return m;
  };
  EvolveOptions o = fake_options();
  o.generations = 3;
  const json::Value r = run_evolution(o, fake.fn()).result;
  const std::string html = render_evolve_html(r);
  // Trials: one legend entry per generation drawn, the champion line and the error bars.
  const std::string trials = chart_of(html, "Validation NLL per trial");
  REQUIRE_FALSE(trials.empty());
  std::set<int64_t> generations;
  for (const json::Value& t : r.at("trials").as_array())
    if (!t.at("mean_nll").is_null()) generations.insert(t.at("generation").as_int());
  CHECK(occurrences(trials, "class=\"legend-entry\"") == generations.size() + 2);
  CHECK(trials.find(">champion after each generation</text>") != std::string::npos);
  CHECK(trials.find(">lowest–highest of the 2 seeds</text>") != std::string::npos);
  CHECK(occurrences(trials, "class=\"error-bar\"") == occurrences(trials, "class=\"point\""));
  // Readable ticks: evenly spaced by 1, 2 or 5 × 10^k.
  const std::vector<double> ticks = y_ticks(trials);
  REQUIRE(ticks.size() >= 3);
  const double step = std::abs(ticks[1] - ticks[0]);
  const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  CHECK((std::abs(mantissa - 1) < 1e-6 || std::abs(mantissa - 2) < 1e-6 ||
         std::abs(mantissa - 5) < 1e-6));
  // Lineage: x ticks are whole generations.
  const std::string lineage = chart_of(html, "Champion lineage");
  REQUIRE_FALSE(lineage.empty());
  CHECK(lineage.find(">0.5</text>") == std::string::npos);
  CHECK(lineage.find(">3</text>") != std::string::npos);
  // The champion's training curves and routes.
  CHECK(html.find("<h2>Champion: training and routes</h2>") != std::string::npos);
  const std::string curves = chart_of(html, "Training loss per step");
  CHECK(occurrences(curves, "class=\"legend-entry\"") ==
        (r.at("champion").at("trial_id").as_string() == "g0-t0" ? 1u : 2u));
  CHECK(occurrences(curves, "class=\"band\"") >= 1);
  CHECK(html.find("aria-label=\"" + r.at("champion").at("trial_id").as_string() + " · QK\"") !=
        std::string::npos);
  // result.json keeps the curves and routes with each trial's seeds, not with the test split.
  CHECK(r.at("trials").at(size_t{0}).at("seeds").at(size_t{0}).at("losses").size() == 120);
  CHECK(r.at("test").at("baseline").at("seeds").at(size_t{0}).find("losses") == nullptr);
  // A resumed run reads them back.
  const TrialRecord back = trial_from_json(r.at("trials").at(size_t{0}), 1.0);
  CHECK(back.seeds[0].losses.size() == 120);
  CHECK(back.seeds[0].routes_v[1][1] == 0.7);
}
