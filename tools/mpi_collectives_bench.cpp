// mpi_collectives_bench: the cost of the collectives data-parallel training runs, at the rank count
// it was started with, over message sizes from 4 KiB to 64 MiB (a factor of 4 apart): the library's
// MPI_Allreduce (the reference), depthgrad's fixed-order reduce-scatter (Collectives::
// reduce_scatter_in_rank_order: one MPI_Alltoallv, then each owner adds the copies in rank order),
// the all-gather (Collectives::all_gather: MPI_Allgatherv), a point-to-point ping-pong between
// ranks 2i and 2i+1 (one-way time: the per-hop cost of a chain) and the owner's local add. Each
// point is the median of repeats, every repeat after a barrier; each operation is fitted by
// t = alpha + beta * bytes (alpha from every size, beta from the sizes beyond the caches: see
// fit_alpha_beta) and alpha and beta are printed; --json prints one JSON document instead, which
// tools/scaling_model.cpp reads.
// Sizes are the bytes of the whole float32 buffer (a flat gradient), cut into equal shards; --bytes
// adds sizes (a preset's gradient, 4 bytes a parameter).
// It does not check the sums (mpi_reduction_bench does) and does not model anything.
#include <fmt/core.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/kernels_elementwise.h"
#include "tensor/threads.h"
#include "train/dist/world.h"
#include "train/io/json.h"

namespace {

struct Options {
  bool json = false;
  int64_t min_bytes = 4 << 10, max_bytes = int64_t(64) << 20;
  int repeats = 0;                   // 0: by size (see repeats_for)
  int64_t bandwidth_from = 4 << 20;  // bytes: beta's sizes (see fit_alpha_beta)
  std::vector<int64_t> extra_bytes;  // --bytes: sizes timed besides the geometric ones
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> int64_t {
      if (i + 1 >= argc) throw std::invalid_argument(fmt::format("{} needs a value", a));
      const int64_t v = std::atoll(argv[++i]);
      if (v <= 0) throw std::invalid_argument(fmt::format("{} must be positive", a));
      return v;
    };
    if (a == "--json")
      o.json = true;
    else if (a == "--min-kib")
      o.min_bytes = value() << 10;
    else if (a == "--max-mib")
      o.max_bytes = value() << 20;
    else if (a == "--bytes") {  // a comma-separated list (the model's exact gradient sizes)
      if (i + 1 >= argc) throw std::invalid_argument("--bytes needs a value");
      const std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        const int64_t b = std::atoll(list.substr(at, comma - at).c_str()) / 4 * 4;
        if (b <= 0) throw std::invalid_argument(fmt::format("--bytes: '{}' is not a size", list));
        o.extra_bytes.push_back(b);
        at = comma + 1;
      }
    } else if (a == "--beta-from-mib")
      o.bandwidth_from = value() << 20;
    else if (a == "--repeats")
      o.repeats = static_cast<int>(value());
    else
      throw std::invalid_argument(fmt::format(
          "unknown argument '{}' (usage: mpirun -np N mpi_collectives_bench [--json] "
          "[--min-kib 4] [--max-mib 64] [--bytes B,...] [--beta-from-mib 4] [--repeats R])",
          a));
  }
  if (o.min_bytes > o.max_bytes) throw std::invalid_argument("--min-kib above --max-mib");
  return o;
}

// Enough repeats for a stable median at small sizes, few at the large ones (about 1 GiB moved).
int repeats_for(int64_t bytes, const Options& o) {
  if (o.repeats > 0) return o.repeats;
  return static_cast<int>(std::clamp<int64_t>((int64_t(1) << 30) / bytes, 7, 101));
}

// One operation's medians over the sizes and its fit.
struct Series {
  std::string name, what;
  std::vector<double> seconds;
  double alpha = 0, beta = 0;
};

// alpha: the intercept of the fit minimising sum(((alpha + beta * x - t) / t)^2) over every size
// (weights 1/t^2, so the small sizes set it); beta: the least-squares slope of t - alpha over the
// sizes from `bandwidth_from` bytes on, where the buffers no longer fit the caches (a fit over
// every size takes its slope from the cached sizes and predicts the large ones several times too
// fast on this machine).
void fit_alpha_beta(const std::vector<double>& bytes, double bandwidth_from, Series& s) {
  double sw = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const double w = 1.0 / (s.seconds[i] * s.seconds[i]), x = bytes[i], t = s.seconds[i];
    sw += w, sx += w * x, sxx += w * x * x, st += w * t, sxt += w * x * t;
  }
  const double slope = (sw * sxt - sx * st) / (sw * sxx - sx * sx);
  s.alpha = (st - slope * sx) / sw;
  double xt = 0, xx = 0;
  for (size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] >= bandwidth_from)
      xt += bytes[i] * (s.seconds[i] - s.alpha), xx += bytes[i] * bytes[i];
  s.beta = xx > 0 ? xt / xx : slope;
}

}  // namespace

int main(int argc, char** argv) {
  dg::World world;
  dg::init_threads_from_env();  // DEPTHGRAD_THREADS per rank (the adds run on OpenMP threads)
  const Options o = parse_options(argc, argv);
  dg::Collectives& c = world.collectives();
  const int N = world.size(), rank = world.rank();
  if (N < 2) {
    fmt::print(stderr, "mpi_collectives_bench: run it under mpirun with at least 2 ranks\n");
    return 2;
  }
  std::vector<double> sizes;
  for (int64_t b = o.min_bytes; b <= o.max_bytes; b *= 4) sizes.push_back(static_cast<double>(b));
  for (int64_t b : o.extra_bytes) sizes.push_back(static_cast<double>(b));
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<Series> ops = {
      {"allreduce", "MPI_Allreduce(MPI_SUM) of the whole buffer (reference)", {}},
      {"reduce_scatter", "fixed-order reduce-scatter: MPI_Alltoallv + the owner's adds", {}},
      {"all_gather", "MPI_Allgatherv of equal shards into the whole buffer", {}},
      {"ping_pong", "one-way point-to-point, ranks 2i <-> 2i+1, message = whole buffer", {}},
      {"add", "local out += in over the whole buffer (the owner's add, per element x4 bytes)", {}}};
  for (double bytes : sizes) {
    const int64_t n = static_cast<int64_t>(bytes) / 4;
    std::vector<float> buffer(n), other(n);
    for (int64_t i = 0; i < n; ++i) buffer[i] = other[i] = 1e-3f * float((i * 7 + rank) % 1000);
    std::vector<int64_t> bounds(N + 1);
    for (int r = 0; r <= N; ++r) bounds[r] = n * r / N;
    const int reps = repeats_for(static_cast<int64_t>(bytes), o);
    auto median_of = [&](auto&& fn) {
      std::vector<double> s;
      for (int rep = 0; rep < reps + 2; ++rep) {  // 2 warm-up repeats
        c.barrier();
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      s.erase(s.begin(), s.begin() + 2);
      // Every rank's median, then the slowest rank's: a collective ends when its last rank does.
      std::sort(s.begin(), s.end());
      const std::vector<double> all = c.all_gather(std::vector<double>{s[s.size() / 2]});
      return *std::max_element(all.begin(), all.end());
    };
    ops[0].seconds.push_back(median_of([&] { c.all_reduce_sum_any_order(buffer.data(), n); }));
    ops[1].seconds.push_back(
        median_of([&] { c.reduce_scatter_in_rank_order(buffer.data(), bounds); }));
    ops[2].seconds.push_back(median_of([&] { c.all_gather(buffer.data(), bounds); }));
    const int partner = rank % 2 == 0 ? rank + 1 : rank - 1;
    ops[3].seconds.push_back(
        median_of([&] {
          if (partner >= N) return;  // the last rank of an odd count waits at the barrier
          if (rank % 2 == 0) {
            MPI_Send(buffer.data(), int(n), MPI_FLOAT, partner, 0, MPI_COMM_WORLD);
            MPI_Recv(buffer.data(), int(n), MPI_FLOAT, partner, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
          } else {
            MPI_Recv(buffer.data(), int(n), MPI_FLOAT, partner, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            MPI_Send(buffer.data(), int(n), MPI_FLOAT, partner, 0, MPI_COMM_WORLD);
          }
        }) /
        2);  // a round trip is two one-way messages
    ops[4].seconds.push_back(median_of([&] {
      float* out = buffer.data();
      const float* in = other.data();
#pragma omp parallel for simd schedule(static) if (parallel : n > dg::kParallelGrain)
      for (int64_t i = 0; i < n; ++i) out[i] += in[i];
    }));
  }
  for (Series& s : ops) fit_alpha_beta(sizes, static_cast<double>(o.bandwidth_from), s);
  if (rank != 0) return 0;
  if (o.json) {
    dg::json::Value v;
    v["ranks"] = N;
    v["threads"] = dg::threads();
    v["library"] = dg::World::library();
    v["beta_from_bytes"] = o.bandwidth_from;
    dg::json::Array b;
    for (double x : sizes) b.emplace_back(x);
    v["bytes"] = dg::json::Value(std::move(b));
    dg::json::Array list;
    for (const Series& s : ops) {
      dg::json::Value e;
      e["name"] = s.name;
      e["what"] = s.what;
      dg::json::Array t;
      for (double x : s.seconds) t.emplace_back(x);
      e["median_seconds"] = dg::json::Value(std::move(t));
      e["alpha_seconds"] = s.alpha;
      e["beta_seconds_per_byte"] = s.beta;
      list.push_back(std::move(e));
    }
    v["operations"] = dg::json::Value(std::move(list));
    fmt::print("{}\n", dg::json::dump(v));
    return 0;
  }
  fmt::print("{} ranks x {} thread(s), {}; median of repeats (slowest rank), ms:\n{:>10}", N,
             dg::threads(), dg::World::library(), "bytes");
  for (const Series& s : ops) fmt::print(" {:>14}", s.name);
  fmt::print("\n");
  for (size_t i = 0; i < sizes.size(); ++i) {
    fmt::print("{:>10}", static_cast<int64_t>(sizes[i]));
    for (const Series& s : ops) fmt::print(" {:>14.4f}", s.seconds[i] * 1e3);
    fmt::print("\n");
  }
  fmt::print(
      "fit t = alpha + beta * bytes (alpha: least squares on relative error over every size; "
      "beta: least squares over sizes from {} MiB):\n",
      o.bandwidth_from >> 20);
  for (const Series& s : ops)
    fmt::print("{:>14}: alpha {:8.2f} us, beta {:.4f} ns/byte ({:.2f} GB/s); {}\n", s.name,
               s.alpha * 1e6, s.beta * 1e9, 1e-9 / s.beta, s.what);
  return 0;
}
