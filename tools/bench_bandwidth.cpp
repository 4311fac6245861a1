// bench_bandwidth: how close depthgrad's memory-bound kernels run to this machine's memory
// bandwidth. It first measures the machine (STREAM-style copy, scale and triad loops over float32
// arrays at three working-set sizes: L2-resident, last-level-cache-resident and far larger than
// any cache, at 1 thread and at every thread), then times the float32 kernels a language-model
// training step spends its non-GEMM time in, at the shapes of the small and base presets
// (train/lm/run_config.cpp): elementwise add and mul and their backward, SwiGLU (the LM's FFN) and
// GELU, RMSNorm (the LM's norm) and LayerNorm, softmax, the depth mix (the LM's routing),
// cross-entropy, the flat AdamW step and the gradient clip. Each row gives the bytes it assumes
// the kernel must move per element (each input read once, each output written once, an output
// that is added into read and written: no write-allocate traffic, no reuse between calls), its
// GB/s, and that as a fraction of the triad's GB/s at the same thread count and size class.
// Times are medians of --repeat samples, each sample at least 2 ms of back-to-back calls, so a
// working set that fits a cache is timed warm (as it is in a step, where the op before produced
// it). It checks no values (tests/test_kernels_*.cpp do) and times no GEMM or attention.
//   bench_bandwidth [--repeat N] [--quick] [--json] [--only TEXT] [--threads N]
// --quick: 3 samples and no row larger than 64 MB (the 152M-parameter AdamW step, the base
// preset's [1024, 50304] logits, the DRAM STREAM size shrinks to 192 MB). --json: one JSON
// object instead of the table. --only: kernel rows whose name contains TEXT (the STREAM rows
// always run). --threads N: that count alone (default: 1, then every physical core).
#include <fmt/core.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "nn/module.h"
#include "tensor/kernels_elementwise.h"
#include "tensor/kernels_loss.h"
#include "tensor/kernels_norm.h"
#include "tensor/kernels_softmax.h"
#include "tensor/threads.h"
#include "train/optim.h"

using namespace dg;

namespace {

using Clock = std::chrono::steady_clock;

// Working-set classes: the STREAM loops run at one size of each, and a kernel row is compared with
// the class its bytes fall in. The limits are this machine family's (1 MB L2 per core, 32 MB L3
// per core complex); a VM's reported L3 size is the host's, so it is not read from sysconf.
constexpr double kL2Limit = 768.0 * 1024;
constexpr double kLlcLimit = 16.0 * 1024 * 1024;
const char* size_class(double bytes) {
  return bytes <= kL2Limit ? "L2" : bytes <= kLlcLimit ? "LLC" : "DRAM";
}

// Seconds per call of f, the median and the best of `repeat` samples (each a run of calls
// lasting >= 2 ms). On a machine shared with other work, the best shows what the kernel can do
// and the median what it did.
struct Timing {
  double median = 0, best = 0;
};
Timing median_seconds(int repeat, const std::function<void()>& f) {
  f();  // warm-up: first touch, storage cache
  auto t0 = Clock::now();
  f();
  const double once = std::chrono::duration<double>(Clock::now() - t0).count();
  const int calls = std::max(1, static_cast<int>(2e-3 / std::max(once, 1e-9)));
  std::vector<double> samples;
  for (int r = 0; r < repeat; ++r) {
    t0 = Clock::now();
    for (int c = 0; c < calls; ++c) f();
    samples.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / calls);
  }
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front()};
}

// A float32 tensor of `shape` with values in [−1, 1) from a fixed integer hash (fast at 152M).
Tensor filled(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::empty(shape, DType::f32);
  float* p = t.data<float>();
  const int64_t n = t.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed * 40503u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
  return t;
}

struct Row {
  std::string kernel, shape;
  double bytes_per_element = 0;
  double arrays = 0;  // distinct buffers of `elements` floats the kernel touches: its working set
  int64_t elements = 0;
  int threads = 1;
  Timing seconds;
  double bytes() const { return bytes_per_element * static_cast<double>(elements); }
  double gbs() const { return bytes() / seconds.median / 1e9; }
  double best_gbs() const { return bytes() / seconds.best / 1e9; }
  double working_set() const { return arrays * 4.0 * static_cast<double>(elements); }
};

struct StreamRow {
  std::string test, size;
  int threads = 1;
  double bytes = 0;
  Timing seconds;
  double gbs() const { return bytes / seconds.median / 1e9; }
  double best_gbs() const { return bytes / seconds.best / 1e9; }
};

// STREAM's copy (c = a), scale (b = s·c) and triad (a = b + s·c) over n floats per array; bytes
// counted as STREAM does (8, 8 and 12 per element).
void stream_rows(std::vector<StreamRow>& out, int64_t n, const char* size, int threads,
                 int repeat) {
  Tensor ta = filled({n}, 1), tb = filled({n}, 2), tc = filled({n}, 3);
  float* a = ta.data<float>();
  float* b = tb.data<float>();
  float* c = tc.data<float>();
  const float s = 0.5f;
  const double bytes = 4.0 * static_cast<double>(n);
  const bool par = threads > 1;
  out.push_back({"copy", size, threads, 2 * bytes, median_seconds(repeat, [&] {
#pragma omp parallel for simd if (parallel : par) schedule(static)
                   for (int64_t i = 0; i < n; ++i) c[i] = a[i];
                 })});
  out.push_back({"scale", size, threads, 2 * bytes, median_seconds(repeat, [&] {
#pragma omp parallel for simd if (parallel : par) schedule(static)
                   for (int64_t i = 0; i < n; ++i) b[i] = s * c[i];
                 })});
  out.push_back({"triad", size, threads, 3 * bytes, median_seconds(repeat, [&] {
#pragma omp parallel for simd if (parallel : par) schedule(static)
                   for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
                 })});
}

struct Preset {
  const char* name;
  int64_t tokens, dim, hidden, vocab;
};

// add(kernel, shape, buffers touched, bytes moved per element, elements, one call)
using Add = std::function<void(const std::string&, const std::string&, double, double, int64_t,
                               const std::function<void()>&)>;

// add, mul and their backward; SwiGLU and GELU forward and backward.
void elementwise_rows(const Preset& p, bool quick, const Add& add) {
  const int64_t T = p.tokens, D = p.dim, H = p.hidden;
  const std::string td = fmt::format("[{}, {}]", T, D), th = fmt::format("[{}, {}]", T, H);
  Tensor a = filled({T, D}, 11), b = filled({T, D}, 12), out = Tensor::empty({T, D});
  Tensor grad = Tensor::zeros({T, D});
  add("add", td, 3, 12, T * D,
      [&] { binary_kernel<float>(a, b, out, [](float x, float y) { return x + y; }); });
  add("add backward (grad += g)", td, 2, 12, T * D, [&] { add_reduced_into(grad, a); });
  add("mul", td, 3, 12, T * D,
      [&] { binary_kernel<float>(a, b, out, [](float x, float y) { return x * y; }); });
  add("mul backward (g·b, grad +=)", td, 4, 24, T * D, [&] {
    binary_kernel<float>(a, b, out, [](float x, float y) { return x * y; });
    add_reduced_into(grad, out);
  });
  // a bias broadcast along rows, and its gradient: the sum of g over the rows
  Tensor bias = filled({D}, 16), dbias = Tensor::zeros({D});
  add("add, broadcast (x + bias[D])", td, 2, 8, T * D,
      [&] { binary_kernel<float>(a, bias, out, [](float x, float y) { return x + y; }); });
  add("add backward, bias (sum rows)", td, 1, 4, T * D, [&] { add_reduced_into(dbias, a); });
  Tensor row_scale = filled({T, 1}, 17);  // a per-row factor broadcast along the last axis
  add("mul, broadcast (x * s[T, 1])", td, 2, 8, T * D,
      [&] { binary_kernel<float>(a, row_scale, out, [](float x, float y) { return x * y; }); });
  add("sum over the last axis", td, 1, 4, T * D, [&] { Tensor s = sum_axes(a, {1}, false); });
  Tensor gate = filled({T, H}, 13), up = filled({T, H}, 14), hout = Tensor::empty({T, H});
  Tensor dgate = Tensor::empty({T, H}), dup = Tensor::empty({T, H});
  const int64_t n = T * H;
  add("swiglu forward", th, 3, 12, n,
      [&] { swiglu_forward<float>(hout.data<float>(), gate.data<float>(), up.data<float>(), n); });
  add("swiglu backward", th, 5, 20, n, [&] {
    swiglu_backward<float>(dgate.data<float>(), true, dup.data<float>(), true, hout.data<float>(),
                           gate.data<float>(), up.data<float>(), n);
  });
  if (quick) return;
  // GELU through the op (its kernels are lambdas in autograd/ops_activation.cpp): the forward
  // alone, then forward + backward (8 + 12 bytes; the leaf's fresh gradient is taken, not copied).
  Tensor x = filled({T, H}, 15);
  add("gelu forward (op)", th, 2, 8, n, [&] { Tensor y = gelu(x); });
  Tensor xg = filled({T, H}, 15);
  xg.set_requires_grad(true);
  add("gelu forward+backward (op)", th, 4, 20, n, [&] {
    xg.impl()->grad = Tensor();
    backward(gelu(xg), hout);
  });
}

// RMSNorm, LayerNorm, the depth mix over J = 5 sources.
void norm_rows(const Preset& p, const Add& add) {
  const int64_t T = p.tokens, D = p.dim;
  const std::string td = fmt::format("[{}, {}]", T, D);
  Tensor x = filled({T, D}, 21), w = filled({D}, 22), bias = filled({D}, 23);
  Tensor out = Tensor::empty({T, D}), dout = filled({T, D}, 24), dx = Tensor::zeros({T, D});
  Tensor dw = Tensor::zeros({D}), db = Tensor::zeros({D});
  Tensor rstd = Tensor::empty({T}), mean = Tensor::empty({T});
  float *o = out.data<float>(), *rs = rstd.data<float>(), *mu = mean.data<float>();
  const float *xp = x.data<float>(), *wp = w.data<float>(), *g = dout.data<float>();
  add("rmsnorm forward", td, 2, 8, T * D,
      [&] { rmsnorm_forward<float>(o, rs, xp, wp, T, D, 1e-5); });
  add("rmsnorm backward", td, 3, 16, T * D,
      [&] { rmsnorm_backward<float>(dx.data<float>(), dw.data<float>(), g, xp, wp, rs, T, D); });
  add("layernorm forward", td, 2, 8, T * D,
      [&] { layernorm_forward<float>(o, mu, rs, xp, wp, bias.data<float>(), T, D, 1e-5); });
  add("layernorm backward", td, 3, 16, T * D, [&] {
    layernorm_backward<float>(dx.data<float>(), dw.data<float>(), db.data<float>(), g, xp, wp, mu,
                              rs, T, D);
  });
  constexpr int64_t J = 5;
  std::vector<Tensor> sources, dsources;
  std::vector<const float*> S;
  std::vector<float*> dS;
  for (int64_t j = 0; j < J; ++j) {
    sources.push_back(filled({T, D}, 30 + j));
    dsources.push_back(Tensor::zeros({T, D}));
    S.push_back(sources.back().data<float>());
    dS.push_back(dsources.back().data<float>());
  }
  Tensor alpha = filled({T, J}, 29), dalpha = Tensor::zeros({T, J});
  // forward: J sources read, out written; backward: per source S_j read, dS_j read and written,
  // dout read once (its row stays in L1 across the J sources).
  add("depth mix forward (J=5)", td, J + 1, 4 * (J + 1), T * D,
      [&] { depth_mix_forward<float>(o, S.data(), alpha.data<float>(), T, J, D); });
  add("depth mix backward (J=5)", td, 2 * J + 1, 4 * (3 * J + 1), T * D, [&] {
    depth_mix_backward<float>(dS.data(), dalpha.data<float>(), g, S.data(), alpha.data<float>(), T,
                              J, D);
  });
}

// softmax over rows, cross-entropy over logits [tokens, vocab].
void softmax_rows(const Preset& p, bool quick, const Add& add) {
  const int64_t N = p.tokens, V = p.vocab;
  if (quick && N * V > (int64_t(1) << 24)) return;
  const std::string nv = fmt::format("[{}, {}]", N, V);
  Tensor x = filled({N, V}, 41), y = Tensor::empty({N, V}), dy = filled({N, V}, 42);
  Tensor dx = Tensor::zeros({N, V});
  Tensor targets = Tensor::empty({N}, DType::i64);
  for (int64_t n = 0; n < N; ++n) targets.data<int64_t>()[n] = (n * 7919) % V;
  Tensor losses = Tensor::empty({N}), lse = Tensor::empty({N});
  add("softmax forward", nv, 2, 8, N * V,
      [&] { softmax_forward<float>(y.data<float>(), x.data<float>(), N, V, 1, false); });
  add("softmax backward", nv, 3, 16, N * V, [&] {
    softmax_backward<float>(dx.data<float>(), dy.data<float>(), y.data<float>(), N, V, 1, false);
  });
  add("cross-entropy forward", nv, 1, 4, N * V, [&] {
    cross_entropy_forward<float, int64_t>(losses.data<float>(), lse.data<float>(), x.data<float>(),
                                          targets.data<int64_t>(), N, V, -100);
  });
  add("cross-entropy backward", nv, 2, 12, N * V, [&] {
    cross_entropy_backward<float, int64_t>(dx.data<float>(), x.data<float>(), lse.data<float>(),
                                           targets.data<int64_t>(), 1.0f / N, N, V, -100);
  });
}

// AdamW's flat step (p, g, m, v read; p, m, v written) and the gradient clip over n parameters.
void optimizer_rows(int64_t n, const Add& add) {
  FlatParameters flat;
  flat.values = filled({n}, 51);
  flat.gradients = filled({n}, 52);
  flat.total = n;
  flat.slots.push_back({"weight", flat.values, 0, n});
  AdamW adamw(flat, AdamWConfig{});
  const std::string shape = fmt::format("[{}]", n);
  add("adamw flat step", shape, 4, 28, n, [&] { adamw.step(); });
  add("clip_grad_norm (norm only)", shape, 1, 4, n, [&] { clip_grad_norm(flat, 1e30); });
  // the scale alone (coefficient 0.99: a few thousand calls stay far from float's denormals)
  add("clip scale (g *= c)", shape, 1, 8, n,
      [&] { scale_gradients_for_clip(flat, 1.0, 0.99, 0, n); });
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int repeat = 7;
    bool quick = false, json = false;
    std::string only;
    int only_threads = 0;
    for (int i = 1; i < argc; ++i) {
      if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
        repeat = std::max(1, std::stoi(argv[++i]));
      } else if (!std::strcmp(argv[i], "--quick")) {
        quick = true;
        repeat = 3;
      } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
        only = argv[++i];
      } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
        only_threads = parse_threads(argv[++i], "--threads");
      } else if (!std::strcmp(argv[i], "--json")) {
        json = true;
      } else {
        throw std::invalid_argument(fmt::format(
            "bench_bandwidth: unknown argument '{}' (use --repeat N, --quick, --json, --only TEXT, "
            "--threads N)",
            argv[i]));
      }
    }
    const int all = physical_cores();
    std::vector<int> thread_counts{1};
    if (all > 1) thread_counts.push_back(all);
    if (only_threads) thread_counts = {only_threads};
    // STREAM sizes: three arrays of 32K floats (384 KB), 512K floats (6 MB) and 32M (384 MB)
    const std::vector<std::pair<int64_t, const char*>> stream_sizes{
        {int64_t(1) << 15, "L2"},
        {int64_t(1) << 19, "LLC"},
        {int64_t(1) << (quick ? 24 : 25), "DRAM"}};
    std::vector<StreamRow> stream;
    std::vector<Row> rows;
    const std::vector<Preset> presets{{"small", 2048, 256, 768, 512},
                                      {"base", 1024, 768, 3072, 50304}};
    for (int threads : thread_counts) {
      set_threads(threads);
      for (const auto& [n, size] : stream_sizes) stream_rows(stream, n, size, threads, repeat);
      const Add add = [&](const std::string& kernel, const std::string& shape, double arrays,
                          double bpe, int64_t elements, const std::function<void()>& f) {
        if (kernel.find(only) == std::string::npos) return;
        rows.push_back({kernel, shape, bpe, arrays, elements, threads, median_seconds(repeat, f)});
      };
      for (const Preset& p : presets) {
        elementwise_rows(p, quick, add);
        norm_rows(p, add);
        softmax_rows(p, quick, add);
      }
      Preset routing{"routing", 2048, 0, 0, 9};  // the LM's routing softmax: J ≤ 9 sources a row
      softmax_rows(routing, quick, add);
      optimizer_rows(7'000'000, add);
      if (!quick) optimizer_rows(152'000'000, add);
    }
    const auto triad = [&](int threads, const std::string& size, bool best = false) {
      for (const StreamRow& s : stream)
        if (s.test == "triad" && s.threads == threads && s.size == size)
          return best ? s.best_gbs() : s.gbs();
      return 0.0;
    };
    if (json) {
      fmt::print("{{\"stream\": [");
      for (size_t i = 0; i < stream.size(); ++i)
        fmt::print(
            "{}{{\"test\": \"{}\", \"size\": \"{}\", \"threads\": {}, \"gbs\": {:.2f}, "
            "\"best_gbs\": {:.2f}}}",
            i ? ", " : "", stream[i].test, stream[i].size, stream[i].threads, stream[i].gbs(),
            stream[i].best_gbs());
      fmt::print("], \"kernels\": [");
      for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        const char* cls = size_class(r.working_set());
        fmt::print(
            "{}{{\"kernel\": \"{}\", \"shape\": \"{}\", \"threads\": {}, "
            "\"bytes_per_element\": {}, \"bytes\": {:.0f}, \"us\": {:.2f}, \"gbs\": {:.2f}, "
            "\"class\": \"{}\", \"fraction\": {:.3f}, \"best_us\": {:.2f}, "
            "\"best_fraction\": {:.3f}}}",
            i ? ", " : "", r.kernel, r.shape, r.threads, r.bytes_per_element, r.bytes(),
            r.seconds.median * 1e6, r.gbs(), cls, r.gbs() / triad(r.threads, cls),
            r.seconds.best * 1e6, r.best_gbs() / triad(r.threads, cls, true));
      }
      fmt::print("]}}\n");
      return 0;
    }
    fmt::print(
        "STREAM (float32, median of {}, best in brackets): GB/s\n{:<6} {:>7} {:>15} {:>15} "
        "{:>15}\n",
        repeat, "size", "threads", "copy", "scale", "triad");
    for (size_t i = 0; i + 2 < stream.size(); i += 3) {
      fmt::print("{:<6} {:>7}", stream[i].size, stream[i].threads);
      for (size_t t = i; t < i + 3; ++t)
        fmt::print(" {:>7.1f} ({:>5.1f})", stream[t].gbs(), stream[t].best_gbs());
      fmt::print("\n");
    }
    fmt::print(
        "\nkernels (float32, median of {}; fraction = GB/s over the triad's at the same "
        "threads and size class; best: the best sample over the best triad)\n"
        "{:<30} {:<16} {:>3} {:>4} {:>10} {:>8} {:>5} {:>6} {:>6}\n",
        repeat, "kernel", "shape", "thr", "B/el", "us", "GB/s", "class", "frac", "best");
    for (const Row& r : rows) {
      const char* cls = size_class(r.working_set());
      fmt::print("{:<30} {:<16} {:>3} {:>4} {:>10.1f} {:>8.1f} {:>5} {:>6.2f} {:>6.2f}\n", r.kernel,
                 r.shape, r.threads, r.bytes_per_element, r.seconds.median * 1e6, r.gbs(), cls,
                 r.gbs() / triad(r.threads, cls), r.best_gbs() / triad(r.threads, cls, true));
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
  return 0;
}
