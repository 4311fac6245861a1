// The cross-scale machinery: the preset table (sizes, exact parameter counts, the help text made
// from it), the pair a paired reproduction compares (parsing, refusals, the resume key), the
// effect in perplexity and the verdict, and the cross-scale report of `reproduce --combine` from
// synthetic result.json files (table rows, chart points, determinism, refusals naming the file).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nn/lm/micro_lm.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "tools/attnres/reproduce.h"
#include "tools/attnres/scales.h"
#include "tools/attnres/stats.h"
#include "train/io/files.h"
#include "train/lm/run_config.h"

using namespace dg;
using dg::test::contains;
using dg::test::error_of;
using json::Array;
using json::Value;

namespace {

// The attributes of every <g class="point" ...> of a chart, in document order.
std::vector<std::map<std::string, std::string>> chart_points(const std::string& svg) {
  std::vector<std::map<std::string, std::string>> points;
  for (size_t at = svg.find("<g class=\"point\""); at != std::string::npos;
       at = svg.find("<g class=\"point\"", at + 1)) {
    const std::string tag = svg.substr(at, svg.find('>', at) - at);
    std::map<std::string, std::string> attributes;
    for (size_t a = tag.find(" data-"); a != std::string::npos; a = tag.find(" data-", a + 1)) {
      const size_t eq = tag.find("=\"", a), end = tag.find('"', eq + 2);
      attributes[tag.substr(a + 6, eq - a - 6)] = tag.substr(eq + 2, end - eq - 2);
    }
    points.push_back(attributes);
  }
  return points;
}

// A finished paired run's result.json with the keys the combine reads (the shape reproduce
// writes), for a preset and a pair, with a mean NLL difference and its interval.
Value synthetic_result(const std::string& preset, const std::string& baseline,
                       const std::string& method, double mean, double low, double high,
                       int64_t wins = 9) {
  const RunConfig sizes = run_preset(preset);
  MicroLMConfig model = sizes.model;
  model.mode = parse_residual_mode(method);
  const int64_t params = model.parameter_count();
  model.mode = parse_residual_mode(baseline);
  const int64_t base_params = model.parameter_count();
  Value r;
  r["protocol"] = "paired";
  Value config = to_json(sizes);
  config["training"]["steps"] = 1000;
  r["config"] = config;
  r["setup"]["seeds"] = Array{Value(1), Value(2)};
  r["baseline"]["name"] = baseline;
  r["baseline"]["parameters"] = base_params;
  r["method"]["name"] = method;
  r["method"]["parameters"] = params;
  Value& p = r["paired"];
  p["metric"] = "full validation NLL (nats/token)";
  p["n"] = 10;
  p["seeds_total"] = 10;
  p["wins_method"] = wins;
  p["ties"] = 0;
  p["mean_difference"] = mean;
  p["ci95"] = Array{Value(low), Value(high)};
  p["sign_test_p"] = sign_test_p(wins, 10);
  Array js;
  for (int64_t l = 0; l < sizes.model.layers; ++l) {
    Value layer;
    layer["layer"] = l;
    layer["mean_over_seeds"] = 0.001 * static_cast<double>(l + 1);
    js.push_back(layer);
  }
  p["validation_js_per_layer"] = Value(std::move(js));
  p["diverged"] = Array{};
  r["scale"]["preset"] = preset;
  r["scale"]["compute_seconds"] = 5400.0;
  r["scale"]["threads"] = Array{Value(1)};
  r["runtime"]["wall_seconds"] = 100.0;
  r["runtime"]["cpu_threads"] = 1;
  r["provenance"]["version"] = "0.9.0";
  return r;
}

std::string write_run(const test::TempDir& dir, const std::string& name, const Value& result) {
  const std::string run = dir.file(name);
  make_dirs(run);
  write_file_atomic(run + "/result.json", json::dump(result, 2) + "\n");
  return run;
}

}  // namespace

// ---- presets ------------------------------------------------------------------------------------

TEST_CASE("presets: mini is d128 L4 seq 128, about 1M parameters; counts agree with the model") {
  const RunConfig mini = run_preset("mini");
  CHECK((mini.model.vocab == 512 && mini.model.dim == 128 && mini.model.layers == 4 &&
         mini.model.heads == 4 && mini.model.kv_heads == 4 && mini.model.seq_len == 128 &&
         mini.model.expansion == 3 && mini.training.batch == 8));
  CHECK(mini.model.parameter_count() == 921728);  // rd_attnres (the default mode)
  // The table's counts (help text, result.json) are the model's own count, in every mode and with
  // the options that change it. base is left out: building it allocates 600 MB.
  for (const char* name : {"micro", "mini", "small"})
    for (const char* mode :
         {"standard", "block_attnres", "rd_attnres", "paper_block_attnres", "paper_rd_attnres"}) {
      CAPTURE(name);
      CAPTURE(mode);
      MicroLMConfig c = run_preset(name).model;
      c.mode = parse_residual_mode(mode);
      CHECK(c.parameter_count() == MicroLM(c).parameter_count());
    }
  MicroLMConfig odd = run_preset("micro").model;
  odd.kv_heads = 2, odd.bias = true, odd.norm = Norm::Kind::layer,
  odd.ffn = FeedForward::Kind::gelu;
  odd.learned_positions = true, odd.tied_head = false, odd.mode = residual_mode("paper_rd_attnres");
  CHECK(odd.parameter_count() == MicroLM(odd).parameter_count());
  odd.mode = residual_mode("block_attnres");
  CHECK(odd.parameter_count() == MicroLM(odd).parameter_count());
}

TEST_CASE("presets: apply sets sizes and batch only; the help is generated from the table") {
  RunConfig c = protocol_run_config("paired");
  apply_run_preset(c, "small");
  CHECK(c.preset == "small");
  CHECK((c.model.dim == 256 && c.model.layers == 8 && c.model.seq_len == 256));
  CHECK(c.training.batch == 8);
  CHECK(c.training.steps == 1000);  // the protocol's, untouched
  CHECK(c.training.init == InitScheme::identical);
  const std::string help = run_preset_help();
  for (const RunPreset& p : run_presets()) {
    CAPTURE(p.name);
    CHECK(contains(help, std::string("  ") + p.name));
    CHECK(contains(help, fmt::format("dim {}, {} layers", p.dim, p.layers)));
  }
  CHECK(contains(help, "140,096 parameters (rd_attnres; block_attnres 139,904)"));
  CHECK(contains(help, "921,728 parameters"));
  CHECK(contains(error_of([] { find_run_preset("tiny"); }), "micro, mini, small or base"));
}

// ---- the pair ----------------------------------------------------------------------------------

TEST_CASE("--pair: any two different residual modes, refused otherwise naming the flag") {
  const auto pair = parse_reproduce_pair("paper_block_attnres,paper_rd_attnres");
  REQUIRE(pair.size() == 2);
  CHECK(pair[0].mode == residual_mode("paper_block_attnres"));
  CHECK(pair[1].name == "paper_rd_attnres");
  CHECK(parse_reproduce_pair("block_attnres,rd_attnres") == reproduce_arms());
  CHECK(contains(error_of([] { parse_reproduce_pair("rd_attnres,rd_attnres"); }),
                 "--pair: the two modes must differ, got rd_attnres twice"));
  const std::string unknown = error_of([] { parse_reproduce_pair("block_attnres,rd_atnres"); });
  CHECK(contains(unknown, "--pair"));
  CHECK(contains(unknown, "rd_atnres"));
  CHECK(contains(error_of([] { parse_reproduce_pair("rd_attnres"); }), "expected two"));
  CHECK(contains(error_of([] { parse_reproduce_pair("standard,rd_attnres,block_attnres"); }),
                 "expected two"));
  // The parity protocol is the reference's pair only.
  ReproduceOptions o;
  o.pair = pair;
  CHECK(contains(error_of([&] { check_reproduce_options(o); }), "--protocol paired"));
  o.protocol = "paired";
  o.config = protocol_run_config("paired");
  CHECK(error_of([&] { check_reproduce_options(o); }).empty());
}

TEST_CASE("the resume key covers the pair and the preset, and a refusal names what differs") {
  ReproduceOptions o;
  o.protocol = "paired";
  o.config = protocol_run_config("paired");
  const Value key = reproduce_resume_key(o, "abc");
  CHECK(key.find("pair") == nullptr);  // the default pair: state files from before --pair fit
  ReproduceOptions other = o;
  other.pair = parse_reproduce_pair("paper_block_attnres,paper_rd_attnres");
  const Value other_key = reproduce_resume_key(other, "abc");
  CHECK(!(other_key == key));
  std::vector<std::string> diff = json_differences(key, other_key);
  REQUIRE(diff.size() == 1);
  CHECK(contains(diff[0], "pair: absent vs"));
  CHECK(contains(diff[0], "paper_rd_attnres"));
  other = o;
  apply_run_preset(other.config, "mini");
  diff = json_differences(key, reproduce_resume_key(other, "abc"));
  CHECK(contains(diff[0], "config.preset: absent vs \"mini\""));
  CHECK(diff.size() == 4);  // limited to four; the preset, then the first sizes that differ
}

TEST_CASE("a seed with a diverged arm is split off, listed with its step, and not in the stats") {
  auto arm = [](const char* name, double seconds, int threads) {
    Value a;
    a["name"] = name;
    a["training"]["seconds"] = seconds;
    a["eval_seconds"] = 1.0;
    a["threads"] = threads;
    return a;
  };
  Value diverged_arm;
  diverged_arm["name"] = "rd_attnres";
  diverged_arm["diverged"] = true;
  diverged_arm["diverged_at_step"] = 412;
  diverged_arm["diverged_loss"] = "nan";
  diverged_arm["threads"] = 2;
  std::vector<Value> seeds(3);
  for (int s = 0; s < 3; ++s) {
    seeds[s]["seed"] = s + 1;
    seeds[s]["block_attnres"] = arm("block_attnres", 10.0, 1);
    seeds[s]["rd_attnres"] = s == 1 ? diverged_arm : arm("rd_attnres", 20.0, 1);
  }
  const SeedSplit split = split_seed_results(seeds, reproduce_arms());
  REQUIRE(split.finished.size() == 2);
  CHECK(split.finished[0].at("seed").as_int() == 1);
  CHECK(split.finished[1].at("seed").as_int() == 3);
  REQUIRE(split.diverged_seeds.size() == 1);
  CHECK(split.diverged_seeds[0].at("seed").as_int() == 2);
  REQUIRE(split.diverged.size() == 1);
  CHECK(split.diverged[0].at("seed").as_int() == 2);
  CHECK(split.diverged[0].at("arm").as_string() == "rd_attnres");
  CHECK(split.diverged[0].at("step").as_int() == 412);
  CHECK(split.compute_seconds == 3 * 11.0 + 2 * 21.0);  // every finished arm, diverged seed too
  CHECK(split.threads == std::vector<int64_t>{1, 2});
  // Another pair reads its own arms' records.
  CHECK_THROWS(split_seed_results(seeds, parse_reproduce_pair("standard,rd_attnres")));
}

// ---- statistics --------------------------------------------------------------------------------

TEST_CASE("the effect in perplexity and the verdict of a paired comparison") {
  CHECK(perplexity_percent(0.0) == 0.0);
  CHECK(perplexity_percent(-5.3e-3) == doctest::Approx(-0.52860).epsilon(1e-4));
  CHECK(perplexity_percent(std::log(1.03)) == doctest::Approx(3.0));
  PairedSummary s;
  s.n = 10;
  s.ci95_low = -7.7e-3, s.ci95_high = -2.8e-3;
  CHECK(paired_verdict(s, 0.2) == "better");
  s.ci95_low = 1e-4, s.ci95_high = 3e-4;
  CHECK(paired_verdict(s, 0.2) == "worse");
  s.ci95_low = -1.5e-3, s.ci95_high = 1.5e-3;  // ±0.150%: inside ±0.2%
  CHECK(paired_verdict(s, 0.2) == "bounded");
  s.ci95_low = -3e-3, s.ci95_high = 1e-3;  // includes zero, reaches −0.30%
  CHECK(paired_verdict(s, 0.2) == "inconclusive");
  s.n = 1;
  s.ci95_low = s.ci95_high = -1.0;
  CHECK(paired_verdict(s, 0.2) == "inconclusive");  // one seed has no interval
}

// ---- the cross-scale report ---------------------------------------------------------------------

TEST_CASE("combine: the table across scales and pairs, sorted, with the effect in perplexity") {
  test::TempDir dir("scales");
  const std::string a =
      write_run(dir, "small-ref",
                synthetic_result("small", "block_attnres", "rd_attnres", -2e-3, -3e-3, -1e-3));
  const std::string b = write_run(
      dir, "micro-ref",
      synthetic_result("micro", "block_attnres", "rd_attnres", -5.3e-3, -7.7e-3, -2.8e-3, 10));
  const std::string c = write_run(
      dir, "mini-paper",
      synthetic_result("mini", "paper_block_attnres", "paper_rd_attnres", 1e-3, -1e-3, 3e-3, 4));
  const ScalesReport report = combine_scales({a, b + "/", c + "/result.json"});
  REQUIRE(report.rows.size() == 3);
  // Sorted by pair (block_attnres before paper_block_attnres), then by parameters.
  CHECK(report.rows[0].label == "micro");
  CHECK(report.rows[1].label == "small");
  CHECK(report.rows[2].label == "mini");
  CHECK(report.rows[2].pair_label() == "paper_rd_attnres − paper_block_attnres");
  CHECK(report.rows[0].parameters == 140096);
  CHECK(report.rows[0].tokens_seen == 1000 * 4 * 64);
  CHECK(report.rows[0].verdict == "better");
  CHECK(report.rows[2].verdict == "inconclusive");
  CHECK(report.rows[0].ppl_percent == doctest::Approx(100 * std::expm1(-5.3e-3)));
  CHECK(report.rows[1].js_per_layer.size() == 8);
  // The Markdown table: one row per run, with its numbers.
  CHECK(contains(report.table, "| micro | rd_attnres − block_attnres | 139,904 / 140,096 |"));
  CHECK(contains(report.table,
                 "| -5.30e-03 [-7.70e-03, -2.80e-03] | -0.529% [-0.767%, -0.280%] | 10/10 |"));
  CHECK(contains(report.table, "| small | rd_attnres − block_attnres |"));
  CHECK(contains(report.table, "| 1.50 h | 1 | none |"));
  CHECK(contains(report.markdown, report.table));
  CHECK(contains(report.markdown, c + "/result.json"));
  // The page: the shared shell, the table and the chart.
  CHECK(contains(report.html, "<!DOCTYPE html>"));
  CHECK(contains(report.html, "depthgrad reproduce --combine"));
  CHECK(contains(report.html, "<td>micro</td>"));
  CHECK(report.json.at("rows").as_array().size() == 3);
}

TEST_CASE("combine: the chart has one point per run at (parameters, perplexity %), per pair") {
  std::vector<ScaleRow> rows;
  for (const char* preset : {"micro", "mini", "small"}) {
    rows.push_back(scale_row_from_result(
        synthetic_result(preset, "block_attnres", "rd_attnres", -4e-3, -6e-3, -2e-3), preset));
    rows.push_back(scale_row_from_result(
        synthetic_result(preset, "paper_block_attnres", "paper_rd_attnres", 2e-3, -1e-3, 5e-3),
        std::string(preset) + "-paper"));
  }
  const ScalesReport report = combine_scale_rows(rows);
  const auto points = chart_points(scales_effect_chart(report.rows));
  REQUIRE(points.size() == 6);
  std::map<std::string, int> per_series;
  for (size_t i = 0; i < points.size(); ++i) {
    const ScaleRow& r = report.rows[i];
    CAPTURE(r.label);
    CHECK(points[i].at("x") == std::to_string(r.parameters));
    CHECK(std::stod(points[i].at("y")) == doctest::Approx(r.ppl_percent).epsilon(1e-5));
    CHECK(std::stod(points[i].at("low")) ==
          doctest::Approx(100 * std::expm1(r.ci95_low)).epsilon(1e-5));
    CHECK(std::stod(points[i].at("high")) ==
          doctest::Approx(100 * std::expm1(r.ci95_high)).epsilon(1e-5));
    per_series[points[i].at("series")]++;
  }
  CHECK(per_series["rd_attnres − block_attnres"] == 3);
  CHECK(per_series["paper_rd_attnres − paper_block_attnres"] == 3);
  CHECK(contains(report.html, "class=\"legend\""));
  CHECK(contains(report.html, "log scale"));
}

TEST_CASE("combine: the same inputs give the same bytes, in any order") {
  test::TempDir dir("scales-det");
  const std::string a = write_run(
      dir, "a", synthetic_result("micro", "block_attnres", "rd_attnres", -5e-3, -7e-3, -3e-3));
  const std::string b = write_run(
      dir, "b", synthetic_result("mini", "block_attnres", "rd_attnres", -8e-3, -1.1e-2, -5e-3));
  const ScalesReport one = combine_scales({a, b}), two = combine_scales({b, a});
  CHECK(one.html == two.html);
  CHECK(one.markdown == two.markdown);
  CHECK(json::dump(one.json) == json::dump(two.json));
  write_scales_report(one, dir.file("out"));
  const std::string first = read_file(dir.file("out/scales.html"));
  write_scales_report(two, dir.file("out"));
  CHECK(read_file(dir.file("out/scales.html")) == first);
  CHECK(read_file(dir.file("out/scales.md")) == one.markdown);
  CHECK(file_exists(dir.file("out/scales.json")));
  // The chart alone, for Markdown viewers: the same chart as the page's, embedded by scales.md.
  const std::string svg = read_file(dir.file("out/scales.svg"));
  CHECK(svg == one.chart_svg);
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(contains(one.html, svg));
  CHECK(chart_points(svg).size() == 2);
  CHECK(contains(one.markdown, "](scales.svg)"));
}

TEST_CASE("combine: refuses unfinished, unpaired and duplicate runs, naming the file") {
  test::TempDir dir("scales-refuse");
  const std::string good = write_run(
      dir, "good", synthetic_result("micro", "block_attnres", "rd_attnres", -5e-3, -7e-3, -3e-3));
  // Not finished: only a state file, no result.json.
  const std::string unfinished = dir.file("unfinished");
  make_dirs(unfinished);
  write_file_atomic(unfinished + "/state.json", "{}");
  std::string e = error_of([&] { combine_scales({good, unfinished}); });
  CHECK(contains(e, unfinished + "/result.json does not exist"));
  CHECK(contains(e, "has not finished"));
  // A parity run.
  Value parity = synthetic_result("micro", "block_attnres", "rd_attnres", -5e-3, -7e-3, -3e-3);
  parity["protocol"] = "parity";
  const std::string parity_dir = write_run(dir, "parity", parity);
  e = error_of([&] { combine_scales({good, parity_dir}); });
  CHECK(contains(e, parity_dir + "/result.json"));
  CHECK(contains(e, "not a paired run"));
  // A paired run missing a key names the file and the key.
  Value broken = synthetic_result("mini", "block_attnres", "rd_attnres", -5e-3, -7e-3, -3e-3);
  Value partial;
  partial["n"] = 3;
  broken["paired"] = partial;
  const std::string broken_dir = write_run(dir, "broken", broken);
  e = error_of([&] { combine_scales({broken_dir}); });
  CHECK(contains(e, broken_dir + "/result.json"));
  CHECK(contains(e, "wins_method"));
  // The same run twice.
  const std::string copy = write_run(
      dir, "copy", synthetic_result("micro", "block_attnres", "rd_attnres", -5e-3, -7e-3, -3e-3));
  e = error_of([&] { combine_scales({good, copy}); });
  CHECK(contains(e, good + "/result.json"));
  CHECK(contains(e, copy + "/result.json"));
  CHECK(contains(error_of([] { combine_scales({}); }), "no runs"));
}

TEST_CASE("combine: a diverged seed is listed with its step, and older results still read") {
  Value r = synthetic_result("micro", "block_attnres", "rd_attnres", -5e-3, -7e-3, -3e-3);
  Value d;
  d["seed"] = 4;
  d["arm"] = "rd_attnres";
  d["step"] = 512;
  d["loss"] = "nan";
  r["paired"]["diverged"] = Array{d};
  r["paired"]["n"] = 9;
  ScaleRow row = scale_row_from_result(r, "diverged.json");
  REQUIRE(row.diverged.size() == 1);
  CHECK(row.diverged[0] == "seed 4 rd_attnres at step 512");
  CHECK(row.n == 9);
  CHECK(row.seeds_total == 10);
  const ScalesReport report = combine_scale_rows({row});
  CHECK(contains(report.table, "| 9 of 10 |"));
  CHECK(contains(report.table, "seed 4 rd_attnres at step 512"));
  // A result written before the "scale" block: compute time from the seeds' arms.
  Value old = synthetic_result("micro", "block_attnres", "rd_attnres", -5e-3, -7e-3, -3e-3);
  json::Object kept;
  for (const auto& [k, v] : old.as_object())
    if (k != "scale") kept.emplace_back(k, v);
  old = Value(std::move(kept));
  Value seed;
  seed["seed"] = 1;
  for (const char* arm : {"block_attnres", "rd_attnres"}) {
    seed[arm]["training"]["seconds"] = 10.0;
    seed[arm]["eval_seconds"] = 2.0;
  }
  old["seed_results"] = Array{seed};
  row = scale_row_from_result(old, "old.json");
  CHECK(row.compute_seconds == 24.0);
  CHECK(row.threads == std::vector<int64_t>{1});
}
