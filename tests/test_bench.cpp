// The bench harness (tools/attnres/bench.h) and the op-family timers (tensor/profile.h): the FLOP
// formula on a config small enough to count by hand, timers that nest and follow ops into backward,
// a whole tiny bench in this process (no subprocess, no torch), its JSON, and the equivalence-check
// files reloading to the same loss.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "autograd/ops.h"
#include "tensor/cpu_features.h"
#include "tensor/gemm_bf16_small.h"
#include "tensor/gemm_kernels.h"
#include "tensor/threads.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "tools/attnres/bench.h"
#include "tools/attnres/bench_generate.h"
#include "train/checkpoint.h"
#include "train/io/files.h"
#include "train/io/run_record.h"
#include "train/lm/batches.h"

using namespace dg;
namespace fs = std::filesystem;
using dg::test::TempDir;
using dg::test::ThreadsGuard;

namespace {
// vocab 16, d 8, 1 layer, 2 heads, seq 4, batch 2, FFN width 16.
BenchSpec tiny_spec(int64_t vocab = 16) {
  BenchSpec s;
  s.name = "tiny";
  s.run.model.vocab = vocab;
  s.run.model.dim = 8;
  s.run.model.layers = 1;
  s.run.model.heads = 2;
  s.run.model.kv_heads = 2;
  s.run.model.seq_len = 4;
  s.run.model.expansion = 2;
  s.run.training.batch = 2;
  s.warmup = 1;
  s.timed = 3;
  return s;
}

}  // namespace

TEST_CASE("training FLOPs of a tiny config, counted by hand") {
  // GEMM weights: qk_route 1×8 + v_route 1×8 + q, k, v, output 4·8·8 + up, gate 2·16·8 + down 8·16
  // + tied head 16·8 = 8 + 8 + 256 + 256 + 128 + 128 = 784.
  BenchSpec s = tiny_spec();
  MicroLM model(s.run.model);
  CHECK(matmul_parameters(model) == 784);
  // Untied: token.weight is only looked up, head.weight [16, 8] multiplies: the same 784.
  MicroLMConfig untied = s.run.model;
  untied.tied_head = false;
  MicroLM model_untied(untied);
  CHECK(matmul_parameters(model_untied) == 784);
  // 6·784·(2·4) + 12·layers·B·T²·d = 37632 + 12·1·2·16·8 = 37632 + 3072
  CHECK(training_step_flops(784, s.run.model, s.run.training.batch) == doctest::Approx(40704.0));

  // Largest GEMM, M = B·T = 8: attention 8·8·8, ffn 8·8·16 (up wins ties over down), head 8·8·V.
  GemmShape g = largest_gemm(s.run.model, s.run.training.batch);
  CHECK(g.what == "ffn up/gate");
  CHECK((g.M == 8 && g.K == 8 && g.N == 16));
  GemmShape h = largest_gemm(tiny_spec(32).run.model, s.run.training.batch);
  CHECK(h.what == "head");
  CHECK((h.M == 8 && h.K == 8 && h.N == 32));
  CHECK(h.flops() == doctest::Approx(2.0 * 8 * 8 * 32));
}

TEST_CASE("the issue's configs") {
  BenchSpec micro = bench_spec("micro");
  CHECK(micro.run.model.mode == residual_mode("rd_attnres"));
  CHECK(MicroLM(micro.run.model).parameter_count() == 140096);  // the reference's rd_attnres count
  CHECK(bench_spec("small").run.model.dim == 256);
  CHECK(bench_spec("small").run.training.batch == 8);
  CHECK(bench_spec("base").run.model.vocab == 50304);
  CHECK(bench_spec("base").run.training.batch == 4);
  CHECK(bench_spec("micro", residual_mode("standard")).run.model.mode == residual_mode("standard"));
  // The bench measures the presets: the same model and batch as run_preset.
  for (const std::string& name : bench_config_names())
    CHECK(to_json(bench_spec(name).run) == to_json(run_preset(name)));
  CHECK(bench_spec("micro").timed == 50);
  CHECK_THROWS_WITH_AS(bench_spec("huge"), doctest::Contains("micro, mini, small or base"),
                       std::invalid_argument);
}

namespace {
int64_t total_calls(const OpProfile& p) {
  int64_t n = 0;
  for (int64_t c : p.calls) n += c;
  return n;
}
}  // namespace

TEST_CASE(
    "op timers: off costs nothing, nesting counts once, backward inherits the forward's family") {
  set_op_profiling(false);
  Tensor a = Tensor::full({16, 16}, 0.5).set_requires_grad(true);
  Tensor b = Tensor::full({16, 16}, 0.25).set_requires_grad(true);
  {
    Tensor y = matmul(a, b);
    backward(sum(y));
  }
  CHECK(total_calls(op_profile()) == 0);
  CHECK(op_profile().total() == 0);

  set_op_profiling(true);
  {
    ScopedOpTimer outer(OpFamily::mixing);
    ScopedOpTimer inner(OpFamily::matmul);  // nested: its time belongs to mixing
    CHECK(current_op_family() == OpFamily::mixing);
  }
  OpProfile p = op_profile();
  CHECK(p.calls[int(OpFamily::mixing)] == 1);
  CHECK(total_calls(p) == 1);  // the inner timer counted nowhere, not even under `other`
  CHECK(p.seconds[int(OpFamily::mixing)] == p.total());
  CHECK(current_op_family() == OpFamily::other);

  // A timer opened while profiling was off stays inert when profiling starts before it closes
  // (run_bench switches profiling on and off between steps): it neither counts nor unbalances
  // the nesting, so the next timer is outermost again.
  set_op_profiling(false);
  {
    ScopedOpTimer opened_while_off(OpFamily::norms);
    set_op_profiling(true);
    CHECK(current_op_family() == OpFamily::other);
  }
  {
    ScopedOpTimer next(OpFamily::attention);
    CHECK(current_op_family() == OpFamily::attention);
  }
  p = op_profile();
  CHECK(p.calls[int(OpFamily::norms)] == 0);
  CHECK(p.calls[int(OpFamily::attention)] == 1);
  CHECK(total_calls(p) == 1);

  reset_op_profile();
  CHECK(total_calls(op_profile()) == 0);
  Tensor y = matmul(a, b);  // matmul forward
  Tensor l = sum(y);        // other forward
  backward(l);              // other backward (sum), matmul backward
  p = op_profile();
  CHECK(p.calls[int(OpFamily::matmul)] == 2);
  CHECK(p.calls[int(OpFamily::other)] == 2);
  CHECK(total_calls(p) == 4);
  CHECK(p.seconds[int(OpFamily::matmul)] > 0);
  set_op_profiling(false);  // also resets
  CHECK(total_calls(op_profile()) == 0);
  CHECK(op_profile().total() == 0);
}

TEST_CASE(
    "a tiny bench in process: steps, throughput, memory, and families that add up to the step") {
  BenchSpec s = tiny_spec(32);
  BenchOptions o;
  o.threads = threads();  // keep this test process's thread setting
  o.peak_square = 128;    // the test checks the figures' relations, not the machine's limit
  BenchResult r = run_bench(s, o);
  CHECK(r.step_seconds.size() == 3);
  CHECK(r.losses.size() == 4);
  for (double l : r.losses) CHECK(std::isfinite(l));
  CHECK(r.parameters == MicroLM(s.run.model).parameter_count());
  CHECK(r.tokens_per_second == doctest::Approx(8.0 / r.median_step_seconds));
  CHECK(r.achieved_gflops == doctest::Approx(r.step_flops / r.median_step_seconds * 1e-9));
  CHECK(r.precision == "float32");
  CHECK(r.blas_core == select_gemm_kernels().blas_core);
  // The peaks: both float32 candidates on both shapes, the best of them standing for the peak.
  CHECK(r.peak.shape.M == 128);
  CHECK(r.peak.shape.what == "square");
  CHECK(r.gemm_peak.shape.what == r.gemm.what);
  for (const GemmPeak* p : {&r.peak, &r.gemm_peak}) {
    CHECK(p->precision == "float32");
    REQUIRE(p->kernels.size() == 2);
    CHECK(p->kernels[0].kernel == "openblas sgemm (" + select_gemm_kernels().blas_core + ")");
    CHECK(p->kernels[1].kernel == "dnnl_sgemm");
    CHECK(p->gflops == std::max(p->kernels[0].gflops, p->kernels[1].gflops));
    CHECK((p->kernel == p->kernels[0].kernel || p->kernel == p->kernels[1].kernel));
  }
  CHECK(r.peak_fraction == doctest::Approx(r.achieved_gflops / r.peak.gflops));
  CHECK(r.gemm_peak_fraction == doctest::Approx(r.achieved_gflops / r.gemm_peak.gflops));
  // The old figure: OpenBLAS's sgemm on the largest GEMM.
  CHECK(r.sgemm_gflops == r.gemm_peak.kernels[0].gflops);
  CHECK(r.sgemm_fraction == doctest::Approx(r.achieved_gflops / r.sgemm_gflops));
  CHECK(r.peak_rss_kib > 0);
  CHECK(r.peak_rss_kib >= r.baseline_rss_kib);
  REQUIRE(r.profiled);
  for (OpFamily f : {OpFamily::matmul, OpFamily::attention, OpFamily::norms, OpFamily::mixing,
                     OpFamily::optimizer, OpFamily::other}) {
    CAPTURE(op_family_name(f));
    CHECK(r.family_seconds[int(f)] > 0);
  }
  double families = 0;
  for (double x : r.family_seconds) families += x;
  // The timers cover the ops and the optimizer; what they miss (tape walk, frees, sampling,
  // waking threads) is reported as untimed. How large a share that is depends on the machine and
  // its load (at this size, at 2 threads, it has passed half the step), so only the sum is checked.
  CHECK(families <= r.mean_step_seconds * 1.0001);
  CHECK(r.untimed_seconds == doctest::Approx(r.mean_step_seconds - families));
  CHECK_FALSE(op_profiling());

  SUBCASE("JSON shape and round trip") {
    json::Value v = r.to_json();
    for (const char* key : {"impl",
                            "config",
                            "mode",
                            "threads",
                            "parameters",
                            "matmul_params",
                            "batch",
                            "seq_len",
                            "warmup",
                            "timed",
                            "step_seconds",
                            "losses",
                            "median_step_seconds",
                            "mean_step_seconds",
                            "tokens_per_second",
                            "step_flops",
                            "achieved_gflops",
                            "largest_gemm",
                            "precision",
                            "peak",
                            "peak_fraction",
                            "largest_gemm_peak",
                            "largest_gemm_peak_fraction",
                            "blas_core",
                            "sgemm_gflops",
                            "sgemm_fraction",
                            "peak_rss_kib",
                            "baseline_rss_kib",
                            "breakdown_seconds"}) {
      CAPTURE(key);
      CHECK(v.find(key) != nullptr);
    }
    const json::Value& b = v.at("breakdown_seconds");
    CHECK(b.size() == size_t(kOpFamilies) + 1);
    CHECK(b.find("untimed") != nullptr);
    CHECK(v.at("step_seconds").size() == 3);
    BenchResult back = BenchResult::from_json(json::parse(json::dump(v), "test"), "test");
    CHECK(back.config == "tiny");
    CHECK(back.tokens_per_second == r.tokens_per_second);
    CHECK(back.family_seconds == r.family_seconds);
    CHECK(back.gemm.what == r.gemm.what);
    CHECK(back.step_seconds == r.step_seconds);
    CHECK(back.precision == "float32");
    CHECK(back.peak.gflops == r.peak.gflops);
    CHECK(back.peak.kernel == r.peak.kernel);
    CHECK(back.gemm_peak.kernels.size() == 2);
    CHECK(back.gemm_peak.shape.N == r.gemm.N);
    CHECK(back.gemm_peak_fraction == r.gemm_peak_fraction);
    CHECK(back.blas_core == r.blas_core);
    CHECK(peak_table({r}).find("<- peak") != std::string::npos);
    CHECK_FALSE(bench_table({r, back}).empty());
    CHECK(breakdown_table({r}).find("optimizer") != std::string::npos);
    // A torch record has no breakdown and no sgemm; the tables and the ratio still work.
    back.impl = "torch";
    back.profiled = false;
    std::string cmp = compare_table({r}, {back});
    CHECK(cmp.find("1.00") != std::string::npos);
    // Rows pair by precision too: a bf16 torch row has no float32 depthgrad partner.
    back.precision = "bf16";
    CHECK(compare_table({r}, {back}).find("1.00") == std::string::npos);
    back.precision = "float32";
    back.blas_core_forced = true;  // torch run with depthgrad's OpenBLAS core
    CHECK(compare_table({r}, {back}).find("torch+core") != std::string::npos);
    CHECK(BenchResult::from_json(back.to_json(), "t").blas_core_forced);
    CHECK_THROWS_WITH_AS(BenchResult::from_json(json::parse("{\"impl\": \"x\"}", "t"), "t"),
                         doctest::Contains("not a bench result"), std::runtime_error);
  }
}

TEST_CASE("equivalence-check files reload to the same loss") {
  TempDir dir("bench");
  BenchSpec s = tiny_spec(32);
  CheckResult c = write_check(dir.path.string(), s, 2);
  CHECK(c.parameters == MicroLM(s.run.model).parameter_count());
  CHECK(std::isfinite(c.loss));
  CHECK(c.losses_after.size() == 2);
  json::Value t = json::parse(read_file((dir.path / "tiny.tokens.json").string()), "tokens");
  CHECK(t.at("inputs").size() == size_t(s.run.training.batch * s.run.model.seq_len));
  CHECK(t.at("model").at("mode").as_string() == "rd_attnres");
  CHECK(t.at("loss").as_double() == c.loss);

  MicroLM model(s.run.model);
  load_weights((dir.path / "tiny.safetensors").string(), model);
  std::vector<int32_t> in, tg;
  for (const json::Value& x : t.at("inputs").as_array()) in.push_back(int32_t(x.as_int()));
  for (const json::Value& x : t.at("targets").as_array()) tg.push_back(int32_t(x.as_int()));
  NoGradGuard no_grad;
  Tensor loss = model.loss(Tensor::from_ids(in, {s.run.training.batch, s.run.model.seq_len}),
                           Tensor::from_ids(tg, {s.run.training.batch, s.run.model.seq_len}));
  CHECK(loss.item() == doctest::Approx(c.loss).epsilon(1e-6));
  // Training on the one batch lowers its loss (the steps really ran).
  CHECK(c.losses_after.back() < c.loss);
  // The weights are not the N(0, 0.02) init: token.weight has standard deviation about 1/sqrt(8).
  std::vector<double> w = model.parameter("token.weight").to_vector();
  double sq = 0;
  for (double x : w) sq += x * x;
  CHECK(std::sqrt(sq / double(w.size())) == doctest::Approx(1.0 / std::sqrt(8.0)).epsilon(0.2));
}

TEST_CASE("generation bench: rows hold together and the bound follows the weight bytes") {
  ThreadsGuard guard;
  set_threads(1);
  // A small buffer: the figure is only checked to be a positive, finite rate.
  const double bandwidth = measure_read_bandwidth_gbs(size_t(4) << 20, 2);
  CHECK(bandwidth > 0);
  CHECK(std::isfinite(bandwidth));
  const BenchSpec spec = tiny_spec();
  const GenerateBenchRow row = bench_generation(spec, bandwidth, 1);
  MicroLM model(spec.run.model);
  CHECK(row.parameters == model.parameter_count());
  CHECK(row.weight_bytes == matmul_parameters(model) * 4);
  CHECK(row.tokens == spec.run.model.seq_len - 1);
  CHECK(row.tokens_per_second > 0);
  CHECK(row.bound_tokens_per_second == doctest::Approx(bandwidth * 1e9 / row.weight_bytes));
  CHECK(row.fraction_of_bound ==
        doctest::Approx(row.tokens_per_second / row.bound_tokens_per_second));
  const std::string table = generate_bench_table({row}, bandwidth);
  CHECK(table.find("tiny") != std::string::npos);
  const json::Value v = generate_bench_json({row}, bandwidth);
  CHECK(v.at("generation").as_array().size() == 1);
}

TEST_CASE(
    "bench with accumulation counts the global step; bf16 runs or is refused with the reason") {
  BenchSpec s = tiny_spec(32);
  s.run.training.accum = 2;
  s.timed = 1;
  BenchOptions o;
  o.threads = threads();
  o.profile = false;
  o.measure_peak = false;
  BenchResult r = run_bench(s, o);
  CHECK(r.accum == 2);
  CHECK(r.peak.gflops == 0);  // not measured: no fraction, and none in the JSON
  CHECK(r.to_json().find("peak") == nullptr);
  CHECK(r.to_json().at("accum").as_int() == 2);
  CHECK(r.step_flops == 2 * training_step_flops(r.matmul_params, s.run.model, 2));
  CHECK(r.tokens_per_second == doctest::Approx(16.0 / r.median_step_seconds));

  const GemmShape g{64, 32, 48, "test"};
  if (!bf16_unsupported_reason().empty()) {
    CHECK_THROWS_WITH_AS(measure_gemm_peak(g, MatmulPrecision::bf16, 1, 0),
                         bf16_unsupported_reason().c_str(), std::runtime_error);
    s.run.training.precision = MatmulPrecision::bf16;
    CHECK_THROWS_WITH_AS(run_bench(s, o), doctest::Contains("bf16"), std::runtime_error);
    return;
  }
  const GemmPeak p = measure_gemm_peak(g, MatmulPrecision::bf16, 1, 0);
  CHECK(matmul_precision() == MatmulPrecision::float32);  // restored
  CHECK(p.precision == "bf16");
  REQUIRE(p.kernels.size() == 2);
  CHECK(p.kernels[0].kernel.find(bf16_kernel_name()) != std::string::npos);
  CHECK(p.kernels[1].kernel.find("oneDNN matmul") == 0);
  CHECK(p.gflops > 0);
  s.run.training.precision = MatmulPrecision::bf16;
  o.measure_peak = true;
  o.peak_square = 64;
  BenchResult b = run_bench(s, o);
  CHECK(b.precision == "bf16");
  CHECK(b.peak.precision == "bf16");
  CHECK(b.sgemm_gflops == 0);  // the OpenBLAS figure belongs to float32 rows
  CHECK(BenchResult::from_json(b.to_json(), "t").precision == "bf16");
  CHECK(matmul_precision() == MatmulPrecision::float32);
}

TEST_CASE("the machine record: CPU, instruction sets and the GEMM kernels, also in provenance") {
  const json::Value m = machine_json();
  CHECK(m.at("cpu").as_string() == cpu_features().model);
  CHECK(m.at("instruction_sets").as_string() == cpu_features().summary());
  CHECK(m.at("blas_core").as_string() == select_gemm_kernels().blas_core);
  CHECK(m.at("blas_core_loaded").as_string() == select_gemm_kernels().blas_core_loaded);
  CHECK_FALSE(m.at("blas_core_reason").as_string().empty());
  // exactly one of: the bf16 kernel's name, or why there is none
  CHECK(m.at("bf16_kernel").as_string().empty() != m.at("bf16_unsupported").as_string().empty());
  CHECK(provenance_json(1).at("machine").at("cpu").as_string() == cpu_features().model);
  const std::string text = machine_text();
  CHECK(text.find(select_gemm_kernels().blas_core) != std::string::npos);
  CHECK(text.find("bf16 GEMM: ") != std::string::npos);
  // the small bf16 kernel is named where it runs, in the text and the record
  const bool small = gemm_bf16_small_available() && !bf16_kernel_name().empty();
  CHECK((text.find(gemm_bf16_small_name()) != std::string::npos) == small);
  CHECK((m.at("bf16_small_kernel").as_string() == gemm_bf16_small_name()) ==
        gemm_bf16_small_available());
}
