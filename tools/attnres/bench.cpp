// The training-speed benchmark (see bench.h).
#include "tools/attnres/bench.h"

#include <cblas.h>
#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>

#include "autograd/tape.h"
#include "tensor/gemm_kernels.h"
#include "tensor/kernels_matmul.h"
#include "tensor/rng.h"
#include "tensor/threads.h"
#include "tools/attnres/stats.h"
#include "train/checkpoint.h"
#include "train/io/files.h"
#include "train/lm/batches.h"
#include "train/lm/micro_lm_training.h"

namespace dg {

// ---- configs

const std::vector<std::string>& bench_config_names() { return run_preset_names(); }

BenchSpec bench_spec(const std::string& name, ResidualMode mode) {
  BenchSpec s;
  s.name = name;
  s.run = run_preset(name);  // throws listing the names
  s.run.model.mode = mode;
  s.run.model.validate();
  // Warm-up and timed steps: from the preset table, fewer for the larger models.
  const RunPreset& preset = find_run_preset(name);
  s.warmup = preset.bench_warmup;
  s.timed = preset.bench_timed;
  return s;
}

// ---- FLOPs and the sgemm rate

GemmShape largest_gemm(const MicroLMConfig& c, int64_t batch) {
  const int64_t M = batch * c.seq_len, hidden = c.expansion * c.dim;
  const GemmShape candidates[] = {{M, c.dim, c.dim, "attention projection"},
                                  {M, c.dim, hidden, "ffn up/gate"},
                                  {M, hidden, c.dim, "ffn down"},
                                  {M, c.dim, c.vocab, "head"}};
  GemmShape best = candidates[0];
  for (const GemmShape& g : candidates)
    if (g.flops() > best.flops()) best = g;
  return best;
}

int64_t matmul_parameters(const MicroLM& model) {
  int64_t n = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    if (p.dim() != 2) continue;
    if (name == "token.weight" && !model.config().tied_head) continue;  // looked up only
    if (name == "position.weight") continue;
    n += p.numel();
  }
  return n;
}

double training_step_flops(int64_t matmul_params, const MicroLMConfig& c, int64_t batch) {
  const double tokens = double(batch) * double(c.seq_len);
  const double attention = 12.0 * double(c.layers) * double(batch) * double(c.seq_len) *
                           double(c.seq_len) * double(c.dim);
  return 6.0 * double(matmul_params) * tokens + attention;
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
int64_t status_field_kib(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(f, line))
    if (line.rfind(prefix, 0) == 0)
      return std::stoll(line.substr(prefix.size()));  // "VmHWM:   1234 kB"
  return 0;
}
}  // namespace

namespace {
// Random operands of a Linear's forward GEMM: A [M, K], B [N, K] (used transposed), C [M, N].
struct GemmOperands {
  std::vector<float> a, b, c;
  explicit GemmOperands(const GemmShape& g)
      : a(size_t(g.M * g.K)), b(size_t(g.N * g.K)), c(size_t(g.M * g.N)) {
    TorchGenerator gen(1);
    gen.uniform_(a.data(), int64_t(a.size()), -1, 1);
    gen.uniform_(b.data(), int64_t(b.size()), -1, 1);
  }
};

// GFLOP/s of `run` on `g`: one warm-up call (buffers, the threads' first touch, primitive
// creation), then the median of at least min_runs calls and min_seconds.
template <class Run>
double timed_gflops(const GemmShape& g, Run&& run, int min_runs, double min_seconds) {
  run();
  std::vector<double> times;
  double total = 0;
  while (int(times.size()) < min_runs || total < min_seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    times.push_back(seconds_since(t0));
    total += times.back();
  }
  return g.flops() / median_of(times) * 1e-9;
}

// A oneDNN matmul on operands already in bf16, B reordered once into the layout the primitive
// prefers (as inference packs its weights): the bf16 kernel's rate without depthgrad's rounding
// pass. Runs on the OpenMP threads.
KernelRate onednn_bf16_matmul(const GemmShape& g, GemmOperands& x, int min_runs,
                              double min_seconds) {
  using dnnl::memory;
  using dt = memory::data_type;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  std::vector<uint16_t> a(x.a.size()), b(x.b.size());
  to_bf16(x.a.data(), int64_t(a.size()), a.data());
  to_bf16(x.b.data(), int64_t(b.size()), b.data());
  const memory::desc a_desc({g.M, g.K}, dt::bf16, memory::dims{g.K, 1});
  const memory::desc b_plain_desc({g.K, g.N}, dt::bf16, memory::dims{1, g.K});  // B [N, K], used ᵀ
  const memory::desc b_any({g.K, g.N}, dt::bf16, memory::format_tag::any);
  const memory::desc c_desc({g.M, g.N}, dt::f32, memory::dims{g.N, 1});
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_desc, b_any, c_desc), engine);
  const dnnl::matmul matmul(pd);
  memory a_mem(a_desc, engine, a.data()), b_plain(b_plain_desc, engine, b.data()),
      b_mem(pd.weights_desc(), engine), c_mem(c_desc, engine, x.c.data());
  dnnl::reorder(b_plain, b_mem).execute(stream, b_plain, b_mem);
  stream.wait();
  const double gflops = timed_gflops(
      g,
      [&] {
        matmul.execute(stream,
                       {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
        stream.wait();
      },
      min_runs, min_seconds);
  return {fmt::format("oneDNN matmul, bf16 operands ({})", pd.impl_info_str()), gflops};
}
}  // namespace

double measure_sgemm_gflops(const GemmShape& g, int min_runs, double min_seconds) {
  select_gemm_kernels();  // OpenBLAS on the core depthgrad chose
  GemmOperands x(g);
  return timed_gflops(
      g,
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(g.M), int(g.N), int(g.K), 1.0f,
                    x.a.data(), int(g.K), x.b.data(), int(g.K), 0.0f, x.c.data(), int(g.N));
      },
      min_runs, min_seconds);
}

GemmShape square_gemm(int64_t n) { return {n, n, n, "square"}; }

GemmPeak measure_gemm_peak(const GemmShape& g, MatmulPrecision precision, int min_runs,
                           double min_seconds) {
  GemmPeak p;
  p.precision = precision_name(precision);
  p.shape = g;
  if (precision == MatmulPrecision::float32) {
    p.kernels.push_back({"openblas sgemm (" + select_gemm_kernels().blas_core + ")",
                         measure_sgemm_gflops(g, min_runs, min_seconds)});
    GemmOperands x(g);
    dnnl_status_t status = dnnl_success;
    const double gflops = timed_gflops(
        g,
        [&] {
          // row-major, as cblas_sgemm above: C = A · Bᵀ
          status = dnnl_sgemm('N', 'T', g.M, g.N, g.K, 1.0f, x.a.data(), g.K, x.b.data(), g.K, 0.0f,
                              x.c.data(), g.N);
        },
        min_runs, min_seconds);
    if (status != dnnl_success)
      throw std::runtime_error(
          fmt::format("dnnl_sgemm {}x{}x{} failed (status {})", g.M, g.K, g.N, int(status)));
    p.kernels.push_back({"dnnl_sgemm", gflops});
  } else {
    MatmulPrecisionScope bf16(MatmulPrecision::bf16);  // throws why on a CPU without bf16
    GemmOperands x(g);
    p.kernels.push_back(
        {fmt::format("depthgrad gemm bf16 ({}, rounding included)", bf16_kernel_name()),
         timed_gflops(
             g,
             [&] {
               gemm(false, true, g.M, g.N, g.K, 1.0f, x.a.data(), g.K, x.b.data(), g.K, 0.0f,
                    x.c.data(), g.N);
             },
             min_runs, min_seconds)});
    p.kernels.push_back(onednn_bf16_matmul(g, x, min_runs, min_seconds));
  }
  for (const KernelRate& k : p.kernels)
    if (k.gflops > p.gflops) {
      p.gflops = k.gflops;
      p.kernel = k.kernel;
    }
  return p;
}

json::Value GemmShape::to_json() const {
  json::Value v;
  v["M"] = M;
  v["K"] = K;
  v["N"] = N;
  v["what"] = what;
  return v;
}

json::Value GemmPeak::to_json() const {
  json::Value v;
  v["precision"] = precision;
  v["shape"] = shape.to_json();
  json::Array k;
  for (const KernelRate& r : kernels) {
    json::Value e;
    e["kernel"] = r.kernel;
    e["gflops"] = r.gflops;
    k.push_back(e);
  }
  v["kernels"] = json::Value(std::move(k));
  v["gflops"] = gflops;
  v["kernel"] = kernel;
  return v;
}

GemmPeak GemmPeak::from_json(const json::Value& v) {
  GemmPeak p;
  p.precision = v.at("precision").as_string();
  const json::Value& s = v.at("shape");
  p.shape = {s.at("M").as_int(), s.at("K").as_int(), s.at("N").as_int(), s.at("what").as_string()};
  for (const json::Value& e : v.at("kernels").as_array())
    p.kernels.push_back({e.at("kernel").as_string(), e.at("gflops").as_double()});
  p.gflops = v.at("gflops").as_double();
  p.kernel = v.at("kernel").as_string();
  return p;
}

int64_t peak_rss_kib() { return status_field_kib("VmHWM"); }
int64_t current_rss_kib() { return status_field_kib("VmRSS"); }

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  if (!(f >> a >> b >> c)) return "?";
  return a + " " + b + " " + c;
}

// ---- one measurement

namespace {
// Random token ids, seed 0: numpy.random.default_rng(0).integers(0, vocab, size=n), which the
// torch script draws too.
std::vector<int32_t> random_tokens(int64_t n, int64_t vocab) {
  NumpyGenerator rng(0);
  std::vector<int64_t> draws(n);
  rng.integers(0, vocab, draws.data(), n);
  return std::vector<int32_t>(draws.begin(), draws.end());
}
constexpr int64_t kBenchTokens = 100000;
}  // namespace

BenchResult run_bench(const BenchSpec& spec, const BenchOptions& options) {
  if (spec.warmup < 0 || spec.timed < 1)
    throw std::invalid_argument(
        fmt::format("bench {}: warm-up must be >= 0 and timed steps >= 1 (got {} and {})",
                    spec.name, spec.warmup, spec.timed));
  set_threads(options.threads);
  auto say = [&](const std::string& line) {
    if (options.on_message) options.on_message(line);
  };
  BenchResult r;
  const MicroLMConfig& model = spec.run.model;
  const int64_t batch = spec.run.training.batch;
  r.config = spec.name;
  r.mode = residual_mode_name(model.mode);
  r.threads = options.threads;
  r.precision = precision_name(spec.run.training.precision);
  r.accum = spec.run.training.accum;
  r.blas_core = select_gemm_kernels().blas_core;
  r.batch = batch;
  r.seq_len = model.seq_len;
  r.warmup = spec.warmup;
  r.timed = spec.timed;
  r.baseline_rss_kib = current_rss_kib();

  const std::vector<int32_t> ids =
      random_tokens(std::max(kBenchTokens, 4 * batch * (model.seq_len + 1)), model.vocab);
  RunConfig run = spec.run;
  run.training.steps = spec.warmup + spec.timed;
  run.training.seed = 0;
  const LMTrainingConfig& tc = run.training;
  MicroLMTrainer trainer(run, ids, options.world);
  r.ranks = trainer.ranks();
  r.parameters = trainer.model().parameter_count();
  r.matmul_params = matmul_parameters(trainer.model());
  // FLOPs of the global step (every rank's micro-batches), as tokens/s counts its tokens
  r.step_flops =
      double(trainer.global_batch() / batch) * training_step_flops(r.matmul_params, model, batch);
  r.gemm = largest_gemm(model, batch);
  trainer.model().train();
  r.state_tensor_kib = int64_t(storage_stats().live_bytes / 1024);
  storage_reset_peak();

  std::vector<std::array<double, kOpFamilies>> families;
  for (int64_t s = 0; s < tc.steps; ++s) {
    const bool timed = s >= spec.warmup;
    const bool profiled = timed && options.profile;
    set_op_profiling(profiled);
    const auto t0 = std::chrono::steady_clock::now();
    StepLog log = trainer.train_step();
    const double seconds = seconds_since(t0);
    if (profiled) families.push_back(op_profile().seconds);
    set_op_profiling(false);
    r.losses.push_back(log.loss);
    if (timed) r.step_seconds.push_back(seconds);
    say(fmt::format("{} t{} step {}/{}{}: {:.1f} ms, loss {:.4f}", spec.name, options.threads,
                    s + 1, tc.steps, timed ? "" : " (warm-up)", seconds * 1e3, log.loss));
  }
  r.peak_rss_kib = peak_rss_kib();  // before the peak measurements allocate their operands
  const StorageStats tensors = storage_stats();
  r.peak_tensor_kib = int64_t(tensors.peak_live_bytes / 1024);
  r.cached_tensor_kib = int64_t(tensors.cached_bytes / 1024);
  say(
      fmt::format("{} t{}: peak RSS {} MiB; tensors: parameter state {} MiB, peak in use {} MiB, "
                  "cached unused {} MiB",
                  spec.name, options.threads, r.peak_rss_kib / 1024, r.state_tensor_kib / 1024,
                  r.peak_tensor_kib / 1024, r.cached_tensor_kib / 1024));
  r.median_step_seconds = median_of(r.step_seconds);
  r.mean_step_seconds = mean_of(r.step_seconds);
  r.tokens_per_second = double(trainer.global_batch() * model.seq_len) / r.median_step_seconds;
  r.achieved_gflops = r.step_flops / r.median_step_seconds * 1e-9;
  if (options.profile) {
    r.profiled = true;
    double sum = 0;
    for (int f = 0; f < kOpFamilies; ++f) {
      std::vector<double> v;
      for (const auto& step : families) v.push_back(step[f]);
      r.family_seconds[f] = mean_of(v);
      sum += r.family_seconds[f];
    }
    r.untimed_seconds = r.mean_step_seconds - sum;
  }
  if (options.measure_peak) {
    for (GemmPeak* p : {&r.peak, &r.gemm_peak}) {
      const GemmShape shape = p == &r.peak ? square_gemm(options.peak_square) : r.gemm;
      say(fmt::format("{} t{}: {} GEMM peak on {}x{}x{} ({})", spec.name, options.threads,
                      r.precision, shape.M, shape.K, shape.N, shape.what));
      *p = measure_gemm_peak(shape, tc.precision);
    }
    r.peak_fraction = r.achieved_gflops / r.peak.gflops;
    r.gemm_peak_fraction = r.achieved_gflops / r.gemm_peak.gflops;
    if (tc.precision == MatmulPrecision::float32) {  // the OpenBLAS candidate alone
      r.sgemm_gflops = r.gemm_peak.kernels.at(0).gflops;
      r.sgemm_fraction = r.achieved_gflops / r.sgemm_gflops;
    }
  }
  return r;
}

// ---- JSON

json::Value BenchResult::to_json() const {
  json::Value v;
  v["impl"] = impl;
  v["config"] = config;
  v["mode"] = mode;
  v["threads"] = threads;
  if (ranks > 1) v["ranks"] = ranks;
  v["precision"] = precision;
  if (accum > 1) v["accum"] = accum;
  v["parameters"] = parameters;
  v["matmul_params"] = matmul_params;
  v["batch"] = batch;
  v["seq_len"] = seq_len;
  v["warmup"] = warmup;
  v["timed"] = timed;
  json::Array steps, losses_json;
  for (double s : step_seconds) steps.emplace_back(s);
  for (double l : losses) losses_json.emplace_back(l);
  v["step_seconds"] = json::Value(std::move(steps));
  v["losses"] = json::Value(std::move(losses_json));
  v["median_step_seconds"] = median_step_seconds;
  v["mean_step_seconds"] = mean_step_seconds;
  v["tokens_per_second"] = tokens_per_second;
  v["step_flops"] = step_flops;
  v["achieved_gflops"] = achieved_gflops;
  v["largest_gemm"] = gemm.to_json();
  if (peak.gflops > 0) {
    v["peak"] = peak.to_json();
    v["peak_fraction"] = peak_fraction;
  }
  if (gemm_peak.gflops > 0) {
    v["largest_gemm_peak"] = gemm_peak.to_json();
    v["largest_gemm_peak_fraction"] = gemm_peak_fraction;
  }
  v["sgemm_gflops"] = sgemm_gflops;
  v["sgemm_fraction"] = sgemm_fraction;
  if (!blas_core.empty()) v["blas_core"] = blas_core;
  if (blas_core_forced) v["blas_core_forced"] = true;
  v["peak_rss_kib"] = peak_rss_kib;
  v["baseline_rss_kib"] = baseline_rss_kib;
  v["state_tensor_kib"] = state_tensor_kib;
  v["peak_tensor_kib"] = peak_tensor_kib;
  v["cached_tensor_kib"] = cached_tensor_kib;
  if (profiled) {
    json::Value b;
    for (int f = 0; f < kOpFamilies; ++f)
      b[op_family_name(static_cast<OpFamily>(f))] = family_seconds[f];
    b["untimed"] = untimed_seconds;
    v["breakdown_seconds"] = b;
  }
  return v;
}

BenchResult BenchResult::from_json(const json::Value& v, const std::string& source) {
  BenchResult r;
  try {
    auto num = [&](const char* key, double fallback = 0) {
      const json::Value* x = v.find(key);
      return x && !x->is_null() ? x->as_double() : fallback;
    };
    auto integer = [&](const char* key) {
      const json::Value* x = v.find(key);
      return x && !x->is_null() ? x->as_int() : int64_t(0);
    };
    r.impl = v.at("impl").as_string();
    r.config = v.at("config").as_string();
    r.mode = v.at("mode").as_string();
    r.threads = int(v.at("threads").as_int());
    if (const json::Value* n = v.find("ranks")) r.ranks = int(n->as_int());
    if (const json::Value* p = v.find("precision")) r.precision = p->as_string();
    if (const json::Value* n = v.find("accum")) r.accum = n->as_int();
    r.parameters = integer("parameters");
    r.matmul_params = integer("matmul_params");
    r.batch = integer("batch");
    r.seq_len = integer("seq_len");
    r.warmup = integer("warmup");
    r.timed = integer("timed");
    if (const json::Value* s = v.find("step_seconds"))
      for (const json::Value& x : s->as_array()) r.step_seconds.push_back(x.as_double());
    if (const json::Value* s = v.find("losses"))
      for (const json::Value& x : s->as_array()) r.losses.push_back(x.as_double());
    r.median_step_seconds = v.at("median_step_seconds").as_double();
    r.mean_step_seconds = num("mean_step_seconds");
    r.tokens_per_second = v.at("tokens_per_second").as_double();
    r.step_flops = num("step_flops");
    r.achieved_gflops = num("achieved_gflops");
    if (const json::Value* g = v.find("largest_gemm")) {
      r.gemm.M = g->at("M").as_int();
      r.gemm.K = g->at("K").as_int();
      r.gemm.N = g->at("N").as_int();
      r.gemm.what = g->at("what").as_string();
    }
    if (const json::Value* p = v.find("peak")) r.peak = GemmPeak::from_json(*p);
    r.peak_fraction = num("peak_fraction");
    if (const json::Value* p = v.find("largest_gemm_peak")) r.gemm_peak = GemmPeak::from_json(*p);
    r.gemm_peak_fraction = num("largest_gemm_peak_fraction");
    r.sgemm_gflops = num("sgemm_gflops");
    r.sgemm_fraction = num("sgemm_fraction");
    if (const json::Value* c = v.find("blas_core"); c && !c->is_null())
      r.blas_core = c->as_string();
    if (const json::Value* f = v.find("blas_core_forced")) r.blas_core_forced = f->as_bool();
    r.peak_rss_kib = integer("peak_rss_kib");
    r.baseline_rss_kib = integer("baseline_rss_kib");
    r.state_tensor_kib = integer("state_tensor_kib");
    r.peak_tensor_kib = integer("peak_tensor_kib");
    r.cached_tensor_kib = integer("cached_tensor_kib");
    if (const json::Value* b = v.find("breakdown_seconds")) {
      r.profiled = true;
      for (int f = 0; f < kOpFamilies; ++f)
        r.family_seconds[f] = b->at(op_family_name(static_cast<OpFamily>(f))).as_double();
      r.untimed_seconds = b->at("untimed").as_double();
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("{}: not a bench result: {}", source, e.what()));
  }
  return r;
}

// ---- the equivalence check's files

CheckResult write_check(const std::string& dir, const BenchSpec& spec, int64_t steps) {
  const MicroLMConfig& c = spec.run.model;
  const LMTrainingConfig& training = spec.run.training;
  MicroLM model(c, DType::f32);
  {
    NoGradGuard no_grad;
    TorchGenerator gen(1234);
    for (auto& [name, p] : model.named_parameters()) {
      float* w = p.data<float>();
      if (p.dim() == 1)
        gen.uniform_(w, p.numel(), 0.5, 1.5);  // norm gains
      else if (name == "token.weight")
        gen.normal_(w, p.numel(), 0.0, 1.0 / std::sqrt(double(c.dim)));
      else
        gen.normal_(w, p.numel(), 0.0, 1.0 / std::sqrt(double(p.size(-1))));
    }
  }
  const std::vector<int32_t> ids =
      random_tokens(std::max<int64_t>(4096, 2 * training.batch * (c.seq_len + 1)), c.vocab);
  NumpyGenerator batch_rng(0);
  LmBatch batch;
  sample_lm_batch(batch_rng, ids, training.batch, c.seq_len, batch);

  make_dirs(dir);
  const std::string stem = dir + "/" + spec.name;
  save_weights(stem + ".safetensors", model, {{"depthgrad.config", spec.name}});

  CheckResult out;
  out.config = spec.name;
  out.parameters = model.parameter_count();
  FlatParameters flat = flatten_parameters(model);
  AdamW adamw(flat, training.adamw);
  model.train();
  for (int64_t s = 0; s <= steps; ++s) {
    flat.zero_grad();
    Tensor loss = model.loss(batch.inputs, batch.targets);
    if (s == 0)
      out.loss = loss.item();
    else
      out.losses_after.push_back(loss.item());
    if (s == steps) break;  // no backward: the graph is freed with the loss
    backward(loss);
    clip_grad_norm(flat, training.clip);
    adamw.step(adamw.config().lr);
  }

  json::Value j;
  j["config"] = spec.name;
  j["model"] = model_json(c);
  j["batch"] = training.batch;
  j["parameters"] = out.parameters;
  j["lr"] = training.adamw.lr;
  j["weight_decay"] = training.adamw.weight_decay;
  j["clip"] = training.clip;
  auto ids_json = [](const Tensor& t) {
    json::Array a;
    const int64_t* p = t.data<int64_t>();
    for (int64_t i = 0; i < t.numel(); ++i) a.emplace_back(p[i]);
    return json::Value(std::move(a));
  };
  j["inputs"] = ids_json(batch.inputs.contiguous());
  j["targets"] = ids_json(batch.targets.contiguous());
  j["loss"] = out.loss;
  json::Array after;
  for (double l : out.losses_after) after.emplace_back(l);
  j["losses_after_steps"] = json::Value(std::move(after));
  write_file_atomic(stem + ".tokens.json", json::dump(j) + "\n");
  return out;
}

// ---- tables

namespace {
std::string mib(int64_t kib) { return fmt::format("{:.0f}", double(kib) / 1024.0); }
}  // namespace

std::string bench_label(const BenchResult& r) {
  return r.impl + (r.blas_core_forced ? "+core" : "");
}

std::string bench_table(const std::vector<BenchResult>& results) {
  auto rate = [](double x) { return x > 0 ? fmt::format("{:.1f}", x) : std::string("-"); };
  auto frac = [](double peak, double f) {
    return peak > 0 ? fmt::format("{:.3f}", f) : std::string("-");
  };
  std::string t = fmt::format(
      "{:<10} {:<6} {:>3} {:<7} {:>11} {:>11} {:>10} {:>9} {:>9} {:>6} {:>9} {:>6} {:>9} {:>9} "
      "{:>10}  {}\n",
      "impl", "config", "thr", "prec", "params", "tokens/s", "ms/step", "GFLOP/s", "peak", "frac",
      "GEMM pk", "frac", "peak MiB", "ΔRSS MiB", "tensor MiB", "largest GEMM");
  for (const BenchResult& r : results)
    t += fmt::format(
        "{:<10} {:<6} {:>3} {:<7} {:>11} {:>11.0f} {:>10.2f} {:>9.1f} {:>9} {:>6} {:>9} {:>6} "
        "{:>9} {:>9} {:>10}  {}\n",
        bench_label(r), r.config,
        r.ranks > 1 ? fmt::format("{}x{}", r.ranks, r.threads) : std::to_string(r.threads),
        r.precision, r.parameters, r.tokens_per_second, r.median_step_seconds * 1e3,
        r.achieved_gflops, rate(r.peak.gflops), frac(r.peak.gflops, r.peak_fraction),
        rate(r.gemm_peak.gflops), frac(r.gemm_peak.gflops, r.gemm_peak_fraction),
        mib(r.peak_rss_kib), mib(r.peak_rss_kib - r.baseline_rss_kib),
        r.peak_tensor_kib > 0 ? mib(r.peak_tensor_kib) : "-",
        r.gemm.M ? fmt::format("{}x{}x{} {}", r.gemm.M, r.gemm.K, r.gemm.N, r.gemm.what) : "");
  return t +
         "(GFLOP/s: the step's FLOPs over its median time; peak: the best GEMM kernel of the row's "
         "precision on a\n"
         " square 2048 GEMM at the row's threads, frac = GFLOP/s / peak; GEMM pk: the same on the "
         "largest GEMM\n"
         " shown; torch rows use depthgrad's peaks. tensor MiB: peak bytes of depthgrad tensors in "
         "use, parameters,\n"
         " gradients and moments included; the rest of peak RSS is code, BLAS buffers and the "
         "allocator)\n";
}

std::string peak_table(const std::vector<BenchResult>& results) {
  std::string t = fmt::format("{:<6} {:>3} {:<7} {:<30} {:>9}  {}\n", "config", "thr", "prec",
                              "shape", "GFLOP/s", "kernel");
  for (const BenchResult& r : results)
    for (const GemmPeak* p : {&r.peak, &r.gemm_peak}) {
      if (p->gflops <= 0) continue;
      for (const KernelRate& k : p->kernels)
        t += fmt::format(
            "{:<6} {:>3} {:<7} {:<30} {:>9.1f}  {}{}\n", r.config, r.threads, r.precision,
            fmt::format("{}x{}x{} {}", p->shape.M, p->shape.K, p->shape.N, p->shape.what), k.gflops,
            k.kernel, k.kernel == p->kernel ? "  <- peak" : "");
    }
  return t;
}

std::string breakdown_table(const std::vector<BenchResult>& results) {
  std::string t = fmt::format("{:<6} {:>3} {:<7} {:>10}", "config", "thr", "prec", "ms/step");
  for (int f = 0; f < kOpFamilies; ++f)
    t += fmt::format(" {:>13}", op_family_name(static_cast<OpFamily>(f)));
  t += fmt::format(" {:>13}\n", "untimed");
  for (const BenchResult& r : results) {
    if (!r.profiled) continue;
    const double total = r.mean_step_seconds > 0 ? r.mean_step_seconds : 1;
    t += fmt::format("{:<6} {:>3} {:<7} {:>10.2f}", r.config, r.threads, r.precision,
                     r.mean_step_seconds * 1e3);
    auto cell = [&](double s) {
      return fmt::format(" {:>7.1f} {:>4.0f}%", s * 1e3, 100.0 * s / total);
    };
    for (int f = 0; f < kOpFamilies; ++f) t += cell(r.family_seconds[f]);
    t += cell(r.untimed_seconds) + "\n";
  }
  return t +
         "(mean ms per timed step and share of it; untimed = tape walk, frees, batch sampling, "
         "loss read)\n";
}

std::string compare_table(const std::vector<BenchResult>& dg,
                          const std::vector<BenchResult>& torch) {
  std::string t = fmt::format(
      "{:<6} {:>3} {:<7} {:<10} {:>11} {:>11} {:>8} {:>9} {:>9} {:>8} {:>8} {:>6} {:>6} {:>6}\n",
      "config", "thr", "prec", "vs", "dg tok/s", "torch tok/s", "speed×", "dg ms", "torch ms",
      "dg MiB", "torch MiB", "mem×", "ΔRSS×", "dg frac");
  for (const BenchResult& p : torch)
    for (const BenchResult& d : dg) {
      if (d.config != p.config || d.threads != p.threads || d.precision != p.precision ||
          d.ranks != p.ranks)
        continue;
      const double delta_dg = double(d.peak_rss_kib - d.baseline_rss_kib),
                   delta_torch = double(p.peak_rss_kib - p.baseline_rss_kib);
      t += fmt::format(
          "{:<6} {:>3} {:<7} {:<10} {:>11.0f} {:>11.0f} {:>8.2f} {:>9.2f} {:>9.2f} {:>8} {:>8} "
          "{:>6.2f} {:>6} {:>6}\n",
          d.config, d.threads, d.precision, bench_label(p), d.tokens_per_second,
          p.tokens_per_second, d.tokens_per_second / p.tokens_per_second,
          d.median_step_seconds * 1e3, p.median_step_seconds * 1e3, mib(d.peak_rss_kib),
          mib(p.peak_rss_kib),
          double(d.peak_rss_kib) / double(std::max<int64_t>(p.peak_rss_kib, 1)),
          delta_torch > 0 ? fmt::format("{:.2f}", delta_dg / delta_torch) : "-",
          d.peak.gflops > 0 ? fmt::format("{:.3f}", d.peak_fraction) : "-");
    }
  return t +
         "(speed× = depthgrad/torch tokens/s; mem× = peak RSS ratio; ΔRSS× = ratio of peak minus "
         "RSS before the model;\n"
         " torch+core = torch with OPENBLAS_CORETYPE set to depthgrad's OpenBLAS core)\n";
}

}  // namespace dg
