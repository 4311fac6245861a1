// bench_cnn_ops: the Fashion-MNIST CNN step of bench_families (tools/example/fashion_cnn_model.h,
// batch 128, Adam) split op by op: each layer's forward and backward timed alone on its own input
// (best of --repeat runs), at each thread count, with the 2-thread speed-up per op and each
// thread's CPU time per op at 2 threads (see --steps for how to read it). What it is
// for: finding the ops where a second thread idles. With --steps 1 it times the whole step instead
// (the fastest step, and each thread's CPU time per step: under OMP_WAIT_POLICY=passive, the
// serial work and the share of each thread, which a busy machine does not spoil as it spoils wall
// times). In the op-by-op table an op's backward includes backward()'s copy of the seed gradient
// (one serial copy of the op's output; the step's seed is the loss, one value), and the tape walk
// between ops is not timed.
//   bench_cnn_ops [--threads 1,2] [--repeat 30] [--batch 128] [--precision float32|bf16]
//                 [--steps 1]   (the whole step instead: wall time and CPU time per thread)
#include <fmt/core.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tensor/gemm_kernels.h"
#include "tensor/threads.h"
#include "tools/example/fashion_cnn_model.h"

using namespace dg;

namespace {

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

// Each OpenMP thread's CPU time so far (the team of `threads` threads, which libgomp keeps).
std::vector<double> team_cpu_ms(int threads) {
  std::vector<double> ms(threads, 0.0);
#pragma omp parallel num_threads(threads)
  ms[omp_get_thread_num()] = thread_cpu_ms();
  return ms;
}

struct OpTimes {
  std::string name;
  double forward = std::numeric_limits<double>::infinity();
  double backward = std::numeric_limits<double>::infinity();
  std::vector<double> cpu;  // each thread's CPU ms per forward + backward (mean over the runs)
};

// One stage of the network: its forward from an input that needs a gradient (except the images).
using Stage = std::function<Tensor(const Tensor&)>;

OpTimes time_stage(const std::string& name, const Stage& stage, const Tensor& input,
                   bool input_grad, int repeat) {
  OpTimes t;
  t.name = name;
  Tensor x = input.detach().clone();
  x.set_requires_grad(input_grad);
  Tensor g;
  const int threads = omp_get_max_threads();
  const std::vector<double> cpu0 = team_cpu_ms(threads);
  for (int r = 0; r < repeat + 2; ++r) {
    if (input_grad) x.set_grad(Tensor());  // a fresh gradient each run, as in the step
    const double t0 = now_ms();
    Tensor y = stage(x);
    const double t1 = now_ms();
    if (!g.defined()) g = randn(y.shape(), DType::f32);
    if (y.requires_grad()) backward(y, g);
    const double t2 = now_ms();
    if (r >= 2)
      t.forward = std::min(t.forward, t1 - t0), t.backward = std::min(t.backward, t2 - t1);
  }
  const std::vector<double> cpu1 = team_cpu_ms(threads);
  for (int i = 0; i < threads; ++i) t.cpu.push_back((cpu1[i] - cpu0[i]) / (repeat + 2));
  return t;
}

std::vector<OpTimes> time_network(int64_t batch, int repeat) {
  manual_seed(0);
  auto net = fashion_cnn::make_model();
  Sequential& seq = *net;
  std::vector<OpTimes> out;
  Tensor h = randn({batch, 1, 28, 28}, DType::f32);
  auto run = [&](const std::string& name, const Stage& stage, bool input_grad) {
    out.push_back(time_stage(name, stage, h, input_grad, repeat));
    NoGradGuard no_grad;
    h = stage(h.detach());
  };
  const char* names[] = {"conv 1->32 28x28",
                         "bn+relu 32x28x28",
                         "",
                         "maxpool 32x28x28",
                         "conv 32->64 14x14",
                         "bn+relu 64x14x14",
                         "",
                         "maxpool 64x14x14",
                         "flatten",
                         "dropout 3136",
                         "linear 3136->128",
                         "relu 128",
                         "dropout 128",
                         "linear 128->10"};
  for (size_t i = 0; i < 14; ++i) {
    if (names[i][0] == 0) continue;
    Module* m = &seq[i];
    if (auto* bn = dynamic_cast<BatchNorm*>(m))
      run(
          names[i], [bn](const Tensor& x) { return bn->forward_relu(x); }, true);
    else
      run(
          names[i], [m](const Tensor& x) { return (*m)(x); }, i > 0);
  }
  Tensor target = randint(10, {batch});
  run(
      "cross_entropy", [&](const Tensor& x) { return cross_entropy(x, target); }, true);
  Adam adam(*net, AdamConfig{.lr = 1e-3});
  OpTimes opt;
  opt.name = "adam step + zero_grad";
  for (int r = 0; r < repeat + 2; ++r) {
    const double t0 = now_ms();
    adam.step();
    adam.zero_grad();
    if (r >= 2) opt.forward = std::min(opt.forward, now_ms() - t0);
  }
  opt.backward = 0;
  opt.cpu.assign(omp_get_max_threads(), 0.0);
  out.push_back(opt);
  return out;
}

// The whole step (zero_grad, forward, cross-entropy, backward, Adam), as bench_families times it:
// the fastest step's wall time and each thread's CPU time per step. Under OMP_WAIT_POLICY=passive
// a waiting thread sleeps, so thread 0's CPU time is the serial work plus its share of the
// parallel work: what the step would take with no waiting at all, a bound a busy machine cannot
// spoil as it spoils wall times.
void time_steps(int64_t batch, int repeat, int threads) {
  manual_seed(0);
  auto net = fashion_cnn::make_model();
  Adam adam(*net, AdamConfig{.lr = 1e-3});
  Tensor x = randn({batch, 1, 28, 28}, DType::f32), y = randint(10, {batch});
  auto step = [&] {
    adam.zero_grad();
    Tensor l = cross_entropy((*net)(x), y);
    backward(l);
    adam.step();
  };
  for (int r = 0; r < 2; ++r) step();
  const std::vector<double> before = team_cpu_ms(threads);
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < repeat; ++r) {
    const double t0 = now_ms();
    step();
    best = std::min(best, now_ms() - t0);
  }
  const std::vector<double> after = team_cpu_ms(threads);
  fmt::print("step, {} thread(s): best {:.2f} ms; CPU ms per step by thread:", threads, best);
  for (int t = 0; t < threads; ++t) fmt::print(" {:.2f}", (after[t] - before[t]) / repeat);
  fmt::print("\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads{1, 2};
  int repeat = 30;
  int64_t batch = 128;
  bool steps_only = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--threads") {
      threads.clear();
      for (char c : value)
        if (c >= '1' && c <= '9') threads.push_back(c - '0');
    } else if (key == "--repeat") {
      repeat = std::atoi(value.c_str());
    } else if (key == "--batch") {
      batch = std::atoll(value.c_str());
    } else if (key == "--steps") {
      steps_only = value == "1";
    } else if (key == "--precision") {
      set_matmul_precision(value == "bf16" ? MatmulPrecision::bf16 : MatmulPrecision::float32);
    } else {
      fmt::print(stderr, "bench_cnn_ops: unknown flag {}\n", key);
      return 2;
    }
  }
  if (steps_only) {
    for (int t : threads) {
      set_threads(t);
      time_steps(batch, repeat, t);
    }
    return 0;
  }
  std::vector<std::vector<OpTimes>> runs;
  for (int t : threads) {
    set_threads(t);
    runs.push_back(time_network(batch, repeat));
  }
  fmt::print("| op |");
  for (int t : threads) fmt::print(" fwd {0}t ms | bwd {0}t ms |", t);
  if (threads.size() == 2) fmt::print(" speed-up | 2t CPU ms by thread |");
  fmt::print("\n");
  std::vector<double> totals(threads.size(), 0.0);
  for (size_t k = 0; k < runs[0].size(); ++k) {
    fmt::print("| {} |", runs[0][k].name);
    for (size_t j = 0; j < runs.size(); ++j) {
      fmt::print(" {:.3f} | {:.3f} |", runs[j][k].forward, runs[j][k].backward);
      totals[j] += runs[j][k].forward + runs[j][k].backward;
    }
    if (runs.size() == 2) {
      fmt::print(" {:.2f} |", (runs[0][k].forward + runs[0][k].backward) /
                                  (runs[1][k].forward + runs[1][k].backward));
      for (double ms : runs[1][k].cpu) fmt::print(" {:.3f}", ms);
      fmt::print(" |");
    }
    fmt::print("\n");
  }
  fmt::print("| total |");
  for (double t : totals) fmt::print(" {:.2f} | |", t);
  if (totals.size() == 2) fmt::print(" {:.2f} |", totals[0] / totals[1]);
  fmt::print("\n");
}
