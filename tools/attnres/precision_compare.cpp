// bf16 against float32 training over paired runs (see precision_compare.h).
#include "tools/attnres/precision_compare.h"

#include <fmt/format.h>

#include <stdexcept>

#include "train/io/files.h"

namespace dg {

namespace {
using json::Array;
using json::Object;
using json::Value;

std::string result_path(std::string input) {
  while (input.size() > 1 && input.back() == '/') input.pop_back();
  const bool is_file =
      input.size() >= 11 && input.compare(input.size() - 11, 11, "result.json") == 0;
  return is_file ? input : input + "/result.json";
}

Value read_result(const std::string& input) {
  const std::string path = result_path(input);
  if (!file_exists(path))
    throw std::runtime_error(fmt::format(
        "--compare-precision: {} does not exist: the run has not finished (run its command again; "
        "the state file resumes it)",
        path));
  Value v = json::parse(read_file(path), path);
  const Value* protocol = v.find("protocol");
  if (!protocol || !protocol->is_string() || protocol->as_string() != "paired")
    throw std::runtime_error(fmt::format("--compare-precision: {} is not a paired run", path));
  return v;
}

// The run's config with training.precision taken out (and returned).
std::string take_precision(Value& config) {
  std::string precision = "float32";
  Value& training = config["training"];
  if (const Value* p = training.find("precision")) {
    precision = p->as_string();
    Object kept;
    for (const auto& [key, value] : training.as_object())
      if (key != "precision") kept.emplace_back(key, value);
    training = Value(std::move(kept));
  }
  return precision;
}

struct Effect {
  double mean = 0, low = 0, high = 0;
};
Effect paired_effect(const Value& result) {
  const Value& p = result.at("paired");
  return {p.at("mean_difference").as_double(), p.at("ci95").at(0).as_double(),
          p.at("ci95").at(1).as_double()};
}

void fill(PrecisionArm& a) {
  a.summary = paired_summary(a.float32_nll, a.bf16_nll);
  a.ppl_percent = perplexity_percent(a.summary.mean_difference);
  a.ppl_ci95_low = perplexity_percent(a.summary.ci95_low);
  a.ppl_ci95_high = perplexity_percent(a.summary.ci95_high);
  a.verdict = paired_verdict(a.summary, kEffectBoundPercent);
}

json::Value arm_json(const PrecisionArm& a) {
  Value v;
  v["arm"] = a.arm;
  v["n"] = a.summary.n;
  Array seeds, f32, b16, diff;
  for (int64_t s : a.seeds) seeds.push_back(Value(s));
  for (double x : a.float32_nll) f32.push_back(Value(x));
  for (double x : a.bf16_nll) b16.push_back(Value(x));
  for (double x : a.summary.differences) diff.push_back(Value(x));
  v["seeds"] = Value(std::move(seeds));
  v["float32_nll"] = Value(std::move(f32));
  v["bf16_nll"] = Value(std::move(b16));
  v["differences_bf16_minus_float32"] = Value(std::move(diff));
  v["mean_difference"] = a.summary.mean_difference;
  v["std_difference"] = a.summary.std_difference;
  v["ci95"] = Value(Array{Value(a.summary.ci95_low), Value(a.summary.ci95_high)});
  v["t_test_p"] = a.summary.t_test_p;
  v["bf16_lower"] = a.summary.wins;
  v["sign_test_p"] = a.summary.sign_test_p;
  v["perplexity_percent"] = a.ppl_percent;
  v["perplexity_percent_ci95"] = Value(Array{Value(a.ppl_ci95_low), Value(a.ppl_ci95_high)});
  v["verdict"] = a.verdict;
  return v;
}
}  // namespace

PrecisionReport compare_precisions(const std::string& float32_run, const std::string& bf16_run) {
  PrecisionReport r;
  r.float32_source = result_path(float32_run);
  r.bf16_source = result_path(bf16_run);
  Value f = read_result(float32_run), b = read_result(bf16_run);
  Value fc = f.at("config"), bc = b.at("config");
  const std::string fp = take_precision(fc), bp = take_precision(bc);
  if (fp != "float32")
    throw std::runtime_error(
        fmt::format("--compare-precision: {} trained in {}; the first run must be the float32 one",
                    r.float32_source, fp));
  if (bp != "bf16")
    throw std::runtime_error(
        fmt::format("--compare-precision: {} trained in {}; the second run must be the bf16 one",
                    r.bf16_source, bp));
  for (const char* section : {"model", "training", "data"})
    if (!(fc.at(section) == bc.at(section)))
      throw std::runtime_error(fmt::format(
          "--compare-precision: the runs' config.{} differ beyond the precision ({} and {}): "
          "compare runs of the same command",
          section, r.float32_source, r.bf16_source));
  if (!(f.at("setup") == b.at("setup")) || !(f.at("pair") == b.at("pair")))
    throw std::runtime_error(fmt::format(
        "--compare-precision: the runs' setup (seeds, sizes, steps) or pair differ ({} and {})",
        r.float32_source, r.bf16_source));
  const std::string baseline = f.at("pair").at("baseline").as_string();
  const std::string method = f.at("pair").at("method").as_string();
  const Array& fs = f.at("seed_results").as_array();
  const Array& bs = b.at("seed_results").as_array();
  if (fs.size() != bs.size())
    throw std::runtime_error("--compare-precision: the runs hold different numbers of seeds");
  PrecisionArm pooled;
  pooled.arm = "pooled";
  for (const std::string& arm : {baseline, method}) {
    PrecisionArm a;
    a.arm = arm;
    for (size_t i = 0; i < fs.size(); ++i) {
      const int64_t seed = fs[i].at("seed").as_int();
      if (bs[i].at("seed").as_int() != seed)
        throw std::runtime_error("--compare-precision: the runs list their seeds differently");
      const Value* fv = fs[i].at(arm).find("full_validation_lm_loss");
      const Value* bv = bs[i].at(arm).find("full_validation_lm_loss");
      if (!fv || !bv || !fv->is_number() || !bv->is_number())
        throw std::runtime_error(fmt::format(
            "--compare-precision: seed {} {} has no full_validation_lm_loss (run with --eval "
            "full, the paired protocol's default)",
            seed, arm));
      a.seeds.push_back(seed);
      a.float32_nll.push_back(fv->as_double());
      a.bf16_nll.push_back(bv->as_double());
    }
    pooled.seeds.insert(pooled.seeds.end(), a.seeds.begin(), a.seeds.end());
    pooled.float32_nll.insert(pooled.float32_nll.end(), a.float32_nll.begin(), a.float32_nll.end());
    pooled.bf16_nll.insert(pooled.bf16_nll.end(), a.bf16_nll.begin(), a.bf16_nll.end());
    fill(a);
    r.arms.push_back(std::move(a));
  }
  fill(pooled);
  r.arms.push_back(std::move(pooled));
  const Effect ef = paired_effect(f), eb = paired_effect(b);
  r.effect_float32 = ef.mean, r.effect_float32_low = ef.low, r.effect_float32_high = ef.high;
  r.effect_bf16 = eb.mean, r.effect_bf16_low = eb.low, r.effect_bf16_high = eb.high;
  r.seconds_float32 = f.at("runtime").at("wall_seconds").as_double();
  r.seconds_bf16 = b.at("runtime").at("wall_seconds").as_double();
  const Value& setup = f.at("setup");
  const std::string preset =
      fc.find("preset")
          ? fc.at("preset").as_string()
          : fmt::format("d{} L{}", setup.at("dimensions").as_int(), setup.at("layers").as_int());
  r.label = fmt::format("{}, {} steps, {} seeds", preset, setup.at("steps_per_variant").as_int(),
                        fs.size());

  // ---- the page
  std::string md = fmt::format(
      "# bf16 against float32 training\n\n{} per arm; the same seeds, initial weights and "
      "batches in both runs; the only difference is `training.precision` (bf16: matmul inputs "
      "rounded to bf16, float32 accumulation; weights, gradients, AdamW, norms, softmax and the "
      "loss in float32; evaluation in the run's precision).\n\nMetric: full validation NLL "
      "(nats/token), difference bf16 − float32 per seed, 95% t interval; the verdict bounds the "
      "effect when the whole interval lies within ±{}% perplexity.\n\n"
      "| arm | n | float32 NLL | bf16 NLL | bf16 − float32 (95% CI) | perplexity % (95% CI) | "
      "bf16 lower | verdict |\n|---|---:|---:|---:|---|---|---:|---|\n",
      r.label, kEffectBoundPercent);
  for (const PrecisionArm& a : r.arms)
    md += fmt::format(
        "| {} | {} | {:.5f} | {:.5f} | {:+.5f} [{:+.5f}, {:+.5f}] | {:+.3f} [{:+.3f}, {:+.3f}] | "
        "{}/{} | {} |\n",
        a.arm, a.summary.n, mean_of(a.float32_nll), mean_of(a.bf16_nll), a.summary.mean_difference,
        a.summary.ci95_low, a.summary.ci95_high, a.ppl_percent, a.ppl_ci95_low, a.ppl_ci95_high,
        a.summary.wins, a.summary.n, a.verdict);
  md += fmt::format(
      "\nThe paired comparison itself ({} − {}, nats/token, 95% CI): float32 {:+.5f} [{:+.5f}, "
      "{:+.5f}]; bf16 {:+.5f} [{:+.5f}, {:+.5f}].\n\nWall time of each run (both arms, every "
      "seed): float32 {:.0f} s, bf16 {:.0f} s.\n\nSources: `{}` (float32), `{}` (bf16).\n",
      method, baseline, r.effect_float32, r.effect_float32_low, r.effect_float32_high,
      r.effect_bf16, r.effect_bf16_low, r.effect_bf16_high, r.seconds_float32, r.seconds_bf16,
      r.float32_source, r.bf16_source);
  r.markdown = std::move(md);

  Value j;
  j["comparison"] = "bf16 - float32 training, paired over seeds";
  j["label"] = r.label;
  j["metric"] = "full validation NLL (nats/token)";
  j["effect_bound_percent"] = kEffectBoundPercent;
  Array arms;
  for (const PrecisionArm& a : r.arms) arms.push_back(arm_json(a));
  j["arms"] = Value(std::move(arms));
  Value effect;
  effect["difference"] = method + " - " + baseline;
  effect["float32"] = Value(
      Array{Value(r.effect_float32), Value(r.effect_float32_low), Value(r.effect_float32_high)});
  effect["bf16"] =
      Value(Array{Value(r.effect_bf16), Value(r.effect_bf16_low), Value(r.effect_bf16_high)});
  j["paired_effect_mean_ci95"] = std::move(effect);
  j["wall_seconds"] = Value(Array{Value(r.seconds_float32), Value(r.seconds_bf16)});
  j["sources"] = Value(Array{Value(r.float32_source), Value(r.bf16_source)});
  r.json = std::move(j);
  return r;
}

void write_precision_report(const PrecisionReport& report, const std::string& dir) {
  make_dirs(dir);
  write_file_atomic(dir + "/precision.md", report.markdown);
  write_file_atomic(dir + "/precision.json", json::dump(report.json, 2) + "\n");
}

}  // namespace dg
