// reproduce --compare-precision: bf16 − float32 NLL per arm and pooled, from two paired runs'
// result.json (built here with known numbers), and the refusals: an unfinished run, the runs in
// the wrong order, runs that differ beyond the precision.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "tests/temp_dir.h"
#include "tools/attnres/precision_compare.h"
#include "train/io/files.h"

using namespace dg;
using json::Array;
using json::Value;

namespace {
// A paired result.json with two seeds; the arms' full validation NLL are `block` and `rd`.
Value paired_result(const std::string& precision, const std::vector<double>& block,
                    const std::vector<double>& rd, int64_t steps = 1000) {
  Value r;
  r["protocol"] = "paired";
  Value config;
  config["preset"] = "mini";
  config["model"]["dim"] = int64_t(128);
  config["training"]["steps"] = steps;
  if (precision != "float32") config["training"]["precision"] = precision;
  config["data"]["dataset"] = "wikitext-2";
  r["config"] = config;
  r["setup"]["seeds"] = Value(Array{Value(int64_t(1)), Value(int64_t(2))});
  r["setup"]["steps_per_variant"] = steps;
  r["setup"]["dimensions"] = int64_t(128);
  r["setup"]["layers"] = int64_t(4);
  r["pair"]["baseline"] = "block_attnres";
  r["pair"]["method"] = "rd_attnres";
  Array seeds;
  for (size_t i = 0; i < block.size(); ++i) {
    Value s;
    s["seed"] = int64_t(i + 1);
    s["block_attnres"]["full_validation_lm_loss"] = block[i];
    s["rd_attnres"]["full_validation_lm_loss"] = rd[i];
    seeds.push_back(s);
  }
  r["seed_results"] = Value(std::move(seeds));
  r["paired"]["mean_difference"] = -0.02;
  r["paired"]["ci95"] = Value(Array{Value(-0.03), Value(-0.01)});
  r["runtime"]["wall_seconds"] = 100.0;
  return r;
}
void write(const test::TempDir& dir, const std::string& name, const Value& v) {
  make_dirs(dir.file(name));
  write_file_atomic(dir.file(name + "/result.json"), json::dump(v, 2));
}
}  // namespace

TEST_CASE("compare_precisions: per-arm and pooled paired differences, bf16 minus float32") {
  test::TempDir dir("precision");
  write(dir, "f32", paired_result("float32", {3.10, 3.20}, {3.00, 3.05}));
  write(dir, "bf16", paired_result("bf16", {3.11, 3.22}, {3.00, 3.06}));
  const PrecisionReport r = compare_precisions(dir.file("f32"), dir.file("bf16") + "/");
  REQUIRE(r.arms.size() == 3);
  CHECK(r.arms[0].arm == "block_attnres");
  CHECK(r.arms[1].arm == "rd_attnres");
  CHECK(r.arms[2].arm == "pooled");
  CHECK(r.arms[0].summary.mean_difference == doctest::Approx(0.015).epsilon(1e-9));
  CHECK(r.arms[1].summary.mean_difference == doctest::Approx(0.005).epsilon(1e-9));
  CHECK(r.arms[2].summary.n == 4);
  CHECK(r.arms[2].summary.mean_difference == doctest::Approx(0.01).epsilon(1e-9));
  // Two seeds with differences 0.01 and 0.02: the t interval 0.015 ± 12.706·0.00707/√2.
  CHECK(r.arms[0].summary.ci95_low ==
        doctest::Approx(0.015 - 12.7062 * 0.0070711 / std::sqrt(2.0)).epsilon(1e-4));
  CHECK(r.label == "mini, 1000 steps, 2 seeds");
  CHECK(r.markdown.find("| pooled | 4 |") != std::string::npos);
  CHECK(r.json.at("arms").at(2).at("n").as_int() == 4);
  write_precision_report(r, dir.file("out"));
  CHECK(file_exists(dir.file("out/precision.md")));
  CHECK(
      json::parse(read_file(dir.file("out/precision.json")), "precision.json").at("arms").size() ==
      3);
}

TEST_CASE("compare_precisions refuses runs it cannot pair") {
  test::TempDir dir("precision");
  write(dir, "f32", paired_result("float32", {3.1, 3.2}, {3.0, 3.1}));
  write(dir, "bf16", paired_result("bf16", {3.1, 3.2}, {3.0, 3.1}));
  write(dir, "bf16_short", paired_result("bf16", {3.1, 3.2}, {3.0, 3.1}, 500));
  CHECK_THROWS_WITH_AS(compare_precisions(dir.file("missing"), dir.file("bf16")),
                       doctest::Contains("does not exist: the run has not finished"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(compare_precisions(dir.file("bf16"), dir.file("f32")),
                       doctest::Contains("trained in bf16; the first run must be the float32 one"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(compare_precisions(dir.file("f32"), dir.file("bf16_short")),
                       doctest::Contains("config.training differ beyond the precision"),
                       std::runtime_error);
}
