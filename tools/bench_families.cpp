// bench_families: the family benchmark of `make bench`. One markdown table, one row per workload x
// matmul precision x thread count, each with depthgrad's figure, PyTorch's at the same shape,
// threads and precision (tools/torch_bench_families.py, run as a child process right after
// depthgrad's measurement of the same row), the ratio of their speeds and depthgrad's step split
// by op family (tensor/profile.h, as `depthgrad bench` prints it). The workloads:
//   gemm      a square float32 matmul (1024), the rate the conv rows are set against
//   conv      conv2d forward + backward (ones gradient) at bench_conv's three shapes, GFLOP/s
//             counted as bench_conv counts them (2·N·O·Ho·Wo·C·k·k per GEMM pass)
//   cnn       a training step of tools/example/fashion_cnn.cpp's network (batch 128, Adam 1e-3,
//             cross-entropy, dropout on) on one synthetic batch (N(0, 1) images, uniform labels)
//   lstm      bench_recurrent's step: a 2-layer LSTM, seq 64, batch 32, input 128, hidden 256,
//             forward, sum(output * W), backward (no optimizer)
//   encoder   bench_encoder's step: a TransformerEncoderLayer (batch 32, seq 128, d 256, 8 heads,
//             ff 1024, dropout 0, post-norm), forward, sum(y * W), backward (no optimizer)
//   resnet    a training step of tools/example/resnet_cifar.h's ResNet-18 on 32x32 inputs (batch
//             32, SGD lr 0.1 momentum 0.9 weight decay 5e-4) on one synthetic batch
// Timing: per row, --warmup untimed steps then --steps timed ones in this process, the median step
// (ms/step, or GFLOP/s from it; --statistic best: the fastest, the figure to compare on a shared
// machine); the op families are the mean per timed step. Precisions: float32,
// and bf16 when the CPU has it (dg::bf16_unsupported_reason): depthgrad's bf16 matmul precision,
// PyTorch's torch.autocast('cpu', dtype=torch.bfloat16). The "check" column is a value of
// depthgrad's state after the row's steps (the last loss, or a gradient's sum): with the same
// --seed and thread count it is the same on every run, as are all the columns but the timings.
// Without a Python that imports torch the PyTorch columns say n/a and the command still succeeds.
//   bench_families [--warmup 2] [--steps 10] [--threads 1,2] [--precision float32,bf16]
//                  [--workloads gemm,conv,cnn,lstm,encoder,resnet] [--seed 0] [--out FILE]
//                  [--python /usr/bin/python3] [--torch-script tools/torch_bench_families.py]
//                  [--statistic median|best] [--no-torch] [--quick]
// --quick: every batch (and sequence) cut to a few items, 1 warm-up and 2 timed steps: the shape
// of the table in seconds, for the test (tests/bench_families_table.sh), not a measurement.
// It does not pin threads, time float64 or the first step's allocations, or check PyTorch's losses.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "tensor/cpu_features.h"
#include "tensor/gemm_kernels.h"
#include "tensor/profile.h"
#include "tensor/threads.h"
#include "tools/example/fashion_cnn_model.h"
#include "tools/example/resnet_cifar.h"
#include "train/io/files.h"

using namespace dg;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The shapes; --quick shrinks them.
struct Sizes {
  int64_t gemm = 1024, conv_batch = 64, cnn_batch = 128, resnet_batch = 32;
  int64_t lstm_seq = 64, lstm_batch = 32, encoder_batch = 32, encoder_seq = 128;
};

struct Options {
  int64_t warmup = 2, steps = 10;
  std::vector<int> threads{1, 2};
  std::vector<MatmulPrecision> precisions;  // default: float32, and bf16 where the CPU has it
  std::vector<std::string> workloads{"gemm", "conv", "cnn", "lstm", "encoder", "resnet"};
  uint64_t seed = 0;
  std::string out, python = "/usr/bin/python3", torch_script = "tools/torch_bench_families.py";
  bool torch = true, quick = false;
  bool best = false;  // --statistic best: the fastest timed step instead of the median
  Sizes sizes;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

void apply_quick(Options& o) {
  o.quick = true;
  o.warmup = 1;
  o.steps = 2;
  o.sizes = {.gemm = 128,
             .conv_batch = 2,
             .cnn_batch = 8,
             .resnet_batch = 2,
             .lstm_seq = 4,
             .lstm_batch = 4,
             .encoder_batch = 2,
             .encoder_seq = 16};
}

bool parse_statistic(const std::string& text) {
  if (text != "median" && text != "best")
    throw std::invalid_argument("--statistic: median or best, not " + text);
  return text == "best";
}

Options parse(int argc, char** argv) {
  Options o;
  bool precision_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--warmup")
      o.warmup = std::stoll(value());
    else if (flag == "--steps")
      o.steps = std::stoll(value());
    else if (flag == "--seed")
      o.seed = std::stoull(value());
    else if (flag == "--out")
      o.out = value();
    else if (flag == "--python")
      o.python = value();
    else if (flag == "--torch-script")
      o.torch_script = value();
    else if (flag == "--no-torch")
      o.torch = false;
    else if (flag == "--statistic")
      o.best = parse_statistic(value());
    else if (flag == "--quick")
      apply_quick(o);
    else if (flag == "--workloads")
      o.workloads = split_list(value());
    else if (flag == "--threads") {
      o.threads.clear();
      for (const std::string& t : split_list(value())) o.threads.push_back(std::stoi(t));
    } else if (flag == "--precision") {
      precision_given = true;
      for (const std::string& p : split_list(value()))
        o.precisions.push_back(parse_precision(p, "--precision"));
    } else
      throw std::invalid_argument("unknown flag " + flag + " (see the comment at the top)");
  }
  if (o.warmup < 0 || o.steps < 1 || o.threads.empty())
    throw std::invalid_argument("--warmup >= 0, --steps >= 1 and at least one --threads count");
  if (!precision_given) {
    o.precisions = {MatmulPrecision::float32};
    if (bf16_unsupported_reason().empty()) o.precisions.push_back(MatmulPrecision::bf16);
  }
  for (MatmulPrecision p : o.precisions) check_precision_supported(p, "--precision");
  return o;
}

// ---- the workloads: each builds its state from the seed and gives one step and a check value --

struct Measurable {
  std::function<void()> step;
  std::function<double()> check;  // a value of the state after the steps
};

struct Workload {
  std::string key;    // what tools/torch_bench_families.py calls it (--workload)
  std::string label;  // the table's first column
  double flops = 0;   // per step, for the GFLOP/s rows; 0: a ms/step row
  std::function<Measurable()> make;
};

Tensor random_f32(const Shape& shape, uint64_t seed) {
  return random_tensor(shape, seed, -1, 1, false).to(DType::f32);
}

Workload gemm_workload(int64_t n, uint64_t seed) {
  auto make = [n, seed] {
    auto a = std::make_shared<Tensor>(random_f32({n, n}, seed + 1));
    auto b = std::make_shared<Tensor>(random_f32({n, n}, seed + 2));
    auto c = std::make_shared<Tensor>();
    return Measurable{[=] {
                        NoGradGuard no_grad;
                        *c = matmul(*a, *b);
                      },
                      [=] {
                        NoGradGuard no_grad;
                        return sum(*c).item();
                      }};
  };
  return {"gemm", fmt::format("matmul {0}x{0}x{0}", n), 2.0 * n * n * n, make};
}

struct ConvShape {
  int64_t N, C, H, W, O;
  bool input_grad;  // the first layer's input (the images) needs no gradient
};

// conv2d 3x3, padding 1, bias; forward, backward of a ones gradient, as bench_conv.
Workload conv_workload(const ConvShape& s, int index, uint64_t seed) {
  auto make = [s, seed] {
    auto x = std::make_shared<Tensor>(random_f32({s.N, s.C, s.H, s.W}, seed + 3));
    auto w = std::make_shared<Tensor>(random_f32({s.O, s.C, 3, 3}, seed + 4));
    auto b = std::make_shared<Tensor>(random_f32({s.O}, seed + 5));
    x->set_requires_grad(s.input_grad);
    w->set_requires_grad(true);
    b->set_requires_grad(true);
    return Measurable{[=] {
                        for (Tensor* t : {x.get(), w.get(), b.get()}) t->zero_grad();
                        Tensor y = conv2d(*x, *w, *b, {1, 1}, {1, 1});
                        backward(y, Tensor::ones(y.shape(), DType::f32));
                      },
                      [=] {
                        NoGradGuard no_grad;
                        return sum(w->grad()).item();
                      }};
  };
  const double pass = 2.0 * s.N * s.O * s.H * s.W * s.C * 9;
  return {fmt::format("conv{}", index),
          fmt::format("conv2d fwd+bwd N={} {}->{} {}x{}", s.N, s.C, s.O, s.H, s.W),
          pass * (s.input_grad ? 3 : 2), make};
}

// A classifier's training step on one fixed synthetic batch: zero_grad, forward, cross-entropy,
// backward, optimizer step; the check is the last loss.
template <class Net, class Optim>
Measurable classifier_step(std::shared_ptr<Net> net, std::shared_ptr<Optim> optimizer,
                           const Shape& image_shape) {
  auto x = std::make_shared<Tensor>(randn(image_shape, DType::f32));
  auto y = std::make_shared<Tensor>(randint(10, {image_shape[0]}));
  auto loss = std::make_shared<double>(kNaN);
  return {[=] {
            optimizer->zero_grad();
            Tensor l = cross_entropy((*net)(*x), *y);
            backward(l);
            optimizer->step();
            *loss = l.item();
          },
          [=] { return *loss; }};
}

Workload cnn_workload(int64_t batch, uint64_t seed) {
  auto make = [batch, seed] {
    manual_seed(seed);
    std::shared_ptr<Sequential> net = fashion_cnn::make_model();
    auto adam = std::make_shared<Adam>(*net, AdamConfig{.lr = 1e-3});
    return classifier_step(net, adam, {batch, 1, 28, 28});
  };
  const int64_t params = fashion_cnn::make_model()->parameter_count();
  return {"cnn", fmt::format("Fashion-MNIST CNN step, batch {}, {} parameters", batch, params), 0,
          make};
}

Workload resnet_workload(int64_t batch, uint64_t seed) {
  auto make = [batch, seed] {
    manual_seed(seed);
    auto net = std::make_shared<resnet_cifar::ResNet18>(10);
    auto sgd =
        std::make_shared<SGD>(*net, SGDConfig{.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4});
    return classifier_step(net, sgd, {batch, 3, 32, 32});
  };
  const int64_t params = resnet_cifar::ResNet18(10).parameter_count();
  return {"resnet", fmt::format("ResNet-18 step 32x32, batch {}, {} parameters", batch, params), 0,
          make};
}

// forward, sum(output * W), backward, gradients zeroed first; the check is the last loss.
template <class Net, class Forward>
Measurable regression_step(std::shared_ptr<Net> net, Tensor x, Tensor w, Forward forward) {
  auto loss = std::make_shared<double>(kNaN);
  return {[=] {
            net->zero_grad();
            Tensor l = sum(mul(forward(*net, x), w));
            backward(l);
            *loss = l.item();
          },
          [=] { return *loss; }};
}

Workload lstm_workload(int64_t T, int64_t N, uint64_t seed) {
  const int64_t I = 128, H = 256;
  auto make = [=] {
    manual_seed(seed);
    auto lstm = std::make_shared<LSTM>(
        RecurrentOptions{.input_size = I, .hidden_size = H, .num_layers = 2});
    lstm->flat_parameters();
    return regression_step(lstm, random_f32({T, N, I}, seed + 6), random_f32({T, N, H}, seed + 7),
                           [](LSTM& m, const Tensor& x) { return m.forward(x).output; });
  };
  return {"lstm", fmt::format("LSTM step, seq {} batch {} 128->256 x2", T, N), 0, make};
}

Workload encoder_workload(int64_t N, int64_t T, uint64_t seed) {
  const int64_t D = 256;
  auto make = [=] {
    manual_seed(seed);
    auto layer = std::make_shared<TransformerEncoderLayer>(TransformerEncoderLayerOptions{
        .d_model = D, .nhead = 8, .dim_feedforward = 1024, .dropout = 0.0, .batch_first = true});
    layer->flat_parameters();
    return regression_step(
        layer, random_f32({N, T, D}, seed + 8), random_f32({N, T, D}, seed + 9),
        [](TransformerEncoderLayer& m, const Tensor& x) { return m.forward(x); });
  };
  return {"encoder", fmt::format("TransformerEncoderLayer step, batch {} seq {}", N, T), 0, make};
}

std::vector<Workload> workloads(const Options& o) {
  const Sizes& s = o.sizes;
  std::vector<Workload> out;
  for (const std::string& key : o.workloads) {
    if (key == "gemm") {
      out.push_back(gemm_workload(s.gemm, o.seed));
    } else if (key == "conv") {
      const std::vector<ConvShape> shapes{{s.conv_batch, 1, 28, 28, 32, false},
                                          {s.conv_batch, 32, 28, 28, 64, true},
                                          {s.conv_batch, 64, 14, 14, 64, true}};
      for (size_t i = 0; i < shapes.size(); ++i)
        out.push_back(conv_workload(shapes[i], int(i) + 1, o.seed));
    } else if (key == "cnn") {
      out.push_back(cnn_workload(s.cnn_batch, o.seed));
    } else if (key == "lstm") {
      out.push_back(lstm_workload(s.lstm_seq, s.lstm_batch, o.seed));
    } else if (key == "encoder") {
      out.push_back(encoder_workload(s.encoder_batch, s.encoder_seq, o.seed));
    } else if (key == "resnet") {
      out.push_back(resnet_workload(s.resnet_batch, o.seed));
    } else {
      throw std::invalid_argument("--workloads: unknown " + key +
                                  " (gemm, conv, cnn, lstm, encoder, resnet)");
    }
  }
  return out;
}

// ---- measuring ----------------------------------------------------------------------------------

struct Row {
  std::string key, label;
  bool rate = false;  // GFLOP/s (else ms/step)
  MatmulPrecision precision = MatmulPrecision::float32;
  int threads = 1;
  double dg = kNaN, torch = kNaN;  // GFLOP/s or ms/step
  double gemm_fraction = kNaN;     // conv rows: dg GFLOP/s over the same run's matmul row
  std::array<double, kOpFamilies> family_share{};
  double untimed_share = 0, check = kNaN;
};

// The median (the lower middle for an even count) or, with best, the smallest.
double typical(std::vector<double> v, bool best) {
  std::sort(v.begin(), v.end());
  return best ? v.front() : v[(v.size() - 1) / 2];
}

// depthgrad's figures of one row: warm-up, then the timed steps with the op families profiled.
Row measure_depthgrad(const Workload& w, MatmulPrecision precision, int threads, const Options& o) {
  set_threads(threads);
  const MatmulPrecisionScope in_precision(precision);
  Measurable m = w.make();
  for (int64_t i = 0; i < o.warmup; ++i) m.step();
  set_op_profiling(true);  // also resets the accumulators
  std::vector<double> seconds;
  for (int64_t i = 0; i < o.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    m.step();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const OpProfile profile = op_profile();
  set_op_profiling(false);
  Row r{.key = w.key,
        .label = w.label,
        .rate = w.flops > 0,
        .precision = precision,
        .threads = threads};
  const double step = typical(seconds, o.best);
  r.dg = r.rate ? w.flops / step * 1e-9 : step * 1e3;
  double mean = 0;
  for (double s : seconds) mean += s / double(seconds.size());
  for (int f = 0; f < kOpFamilies; ++f) r.family_share[f] = profile.seconds[f] / (o.steps * mean);
  r.untimed_share = std::max(0.0, 1.0 - profile.total() / (o.steps * mean));
  r.check = m.check();
  return r;
}

std::string run_capture(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  if (pclose(pipe) != 0) return {};
  return out;
}

// "torch 1.13.1 (/usr/bin/python3)", or "" when that Python cannot import torch or the script is
// missing (why goes to `why`).
std::string torch_version(const Options& o, std::string& why) {
  if (!o.torch) return why = "--no-torch", "";
  if (!std::filesystem::exists(o.torch_script)) return why = o.torch_script + " not found", "";
  std::string v =
      run_capture(o.python + " -c 'import torch; print(torch.__version__)' 2>/dev/null");
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
  if (v.empty()) why = o.python + " cannot import torch";
  return v.empty() ? "" : fmt::format("torch {} ({})", v, o.python);
}

// PyTorch's figure of the row (same unit), from the script's last line {"value": x}; NaN when the
// run fails.
double measure_torch(const Workload& w, const Row& r, const Options& o) {
  const Sizes& s = o.sizes;
  const std::string command = fmt::format(
      "{} {} --workload {} --threads {} --precision {} --warmup {} --steps {} --statistic {} "
      "--seed {} --gemm {} --conv-batch {} --cnn-batch {} --resnet-batch {} --lstm-seq {} "
      "--lstm-batch {} --encoder-batch {} --encoder-seq {}",
      o.python, o.torch_script, w.key, r.threads, precision_name(r.precision), o.warmup, o.steps,
      o.best ? "best" : "median", o.seed, s.gemm, s.conv_batch, s.cnn_batch, s.resnet_batch,
      s.lstm_seq, s.lstm_batch, s.encoder_batch, s.encoder_seq);
  const std::string out = run_capture(command);
  const size_t at = out.rfind("\"value\":");
  if (at == std::string::npos) {
    fmt::print(stderr, "bench_families: `{}` gave no value\n", command);
    return kNaN;
  }
  return std::strtod(out.c_str() + at + 8, nullptr);
}

// ---- the table ----------------------------------------------------------------------------------

std::string cell(double v, const char* format_if_set, const char* if_nan) {
  return std::isnan(v) ? if_nan : fmt::format(fmt::runtime(format_if_set), v);
}

std::string table_header() {
  std::string h =
      "| workload | unit | precision | threads | depthgrad | PyTorch | speed ratio "
      "| of matmul row |";
  std::string rule = "|---|---|---|---:|---:|---:|---:|---:|";
  for (int f = 0; f < kOpFamilies; ++f) {
    h += fmt::format(" {} % |", op_family_name(static_cast<OpFamily>(f)));
    rule += "---:|";
  }
  return h + " untimed % | check |\n" + rule + "---:|---:|\n";
}

std::string table_row(const Row& r) {
  const double ratio = r.rate ? r.dg / r.torch : r.torch / r.dg;
  std::string line = fmt::format(
      "| {} | {} | {} | {} | {:.1f} | {} | {} | {} |", r.label, r.rate ? "GFLOP/s" : "ms/step",
      precision_name(r.precision), r.threads, r.dg, cell(r.torch, "{:.1f}", "n/a"),
      cell(ratio, "{:.2f}", "n/a"), cell(r.gemm_fraction, "{:.2f}", "-"));
  for (int f = 0; f < kOpFamilies; ++f) line += fmt::format(" {:.0f} |", 100 * r.family_share[f]);
  return line + fmt::format(" {:.0f} | {:.6e} |\n", 100 * r.untimed_share, r.check);
}

std::string header_lines(const Options& o, const std::string& torch, const std::string& why_not,
                         const std::string& load_start) {
  const CpuFeatures& cpu = cpu_features();
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  const std::string bf16 = bf16_unsupported_reason();
  std::string h = "# depthgrad family benchmark\n\n";
  h += fmt::format("- CPU: {} ({}); {}; OPENBLAS_CORETYPE {}\n", cpu.model, cpu.summary(),
                   blas_config(), coretype ? fmt::format("set to {}", coretype) : "unset");
  h += fmt::format("- PyTorch: {}\n", torch.empty() ? "n/a (" + why_not + ")" : torch);
  h += fmt::format(
      "- timing: per row depthgrad, then PyTorch in a child process; each {} warm-up and {} timed "
      "steps, the {} step (GFLOP/s rows: FLOPs over it); threads as the row says "
      "(torch.set_num_threads); seed {}{}\n",
      o.warmup, o.steps, o.best ? "fastest" : "median", o.seed,
      o.quick ? "; --quick: shrunken shapes, not a measurement" : "");
  h += fmt::format("- bf16: depthgrad's bf16 matmul precision, PyTorch's autocast to bfloat16{}\n",
                   bf16.empty() ? "" : " (not measured here: " + bf16 + ")");
  h += "- speed ratio: depthgrad's speed over PyTorch's (> 1: depthgrad is faster); of matmul row: "
       "the conv row's GFLOP/s over the same precision and threads' matmul row\n";
  h += "- op families (tensor/profile.h): depthgrad's share of the mean timed step; conv2d counts "
       "as matmul, pooling as other, batch norm as norms; untimed = tape walk, frees, loss read\n";
  h += "- check: a value of depthgrad's state after the row's steps (last loss, or the gradient "
       "sum); the same seed and threads give the same value\n";
  h += fmt::format("- load average at the start: {}\n\n", load_start);
  return h;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  return (in >> a >> b >> c) ? a + " " + b + " " + c : "?";
}

// Each conv row's GFLOP/s over the matmul row of its precision and threads (when measured).
void set_gemm_fractions(std::vector<Row>& rows) {
  for (Row& r : rows) {
    if (r.key.rfind("conv", 0) != 0) continue;
    for (const Row& g : rows)
      if (g.key == "gemm" && g.precision == r.precision && g.threads == r.threads)
        r.gemm_fraction = r.dg / g.dg;
  }
}

int run(const Options& o) {
  const std::vector<Workload> ws = workloads(o);
  std::string why_not;
  const std::string torch = torch_version(o, why_not);
  const std::string load_start = load_average();
  std::vector<Row> rows;
  for (const Workload& w : ws)
    for (MatmulPrecision p : o.precisions)
      for (int t : o.threads) {
        fmt::print(stderr, "{} {} threads {} ...", w.label, precision_name(p), t);
        Row r = measure_depthgrad(w, p, t, o);
        if (!torch.empty()) r.torch = measure_torch(w, r, o);
        fmt::print(stderr, " depthgrad {:.1f}, PyTorch {:.1f}\n", r.dg, r.torch);
        rows.push_back(r);
      }
  set_gemm_fractions(rows);
  std::string text = header_lines(o, torch, why_not, load_start) + table_header();
  for (const Row& r : rows) text += table_row(r);
  text += fmt::format("\n(load average at the end: {})\n", load_average());
  fmt::print("{}", text);
  if (!o.out.empty()) {
    write_file_atomic(o.out, text);
    fmt::print(stderr, "written to {}\n", o.out);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_families: {}\n", e.what());
    return 2;
  }
}
