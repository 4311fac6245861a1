// scaling_model: the step time of depthgrad's data-parallel training on N machines, modelled from
// what one machine measures: the step time of a preset in one process (`depthgrad bench --json`),
// its parameter count and its optimizer time, and a network's latency alpha and inverse bandwidth
// beta. It prints, per preset, rank count and network, the step time, the scaling efficiency and
// the exposed communication share of the two gradient reductions (A: reduce-scatter after backward;
// B: bucketed chains overlapped with backward) in each ZeRO mode where they differ; --check
// predicts this machine's 2- and 4-rank steps from mpi_collectives_bench's measurements.
// It measures nothing itself and knows no MPI: every number comes from its inputs or is a stated
// assumption below. `--self-check` replays the chain schedule bucket by bucket and compares.
//
// The model (one rank per machine; full-duplex links; no contention in the switch; per-rank batch
// fixed, i.e. weak scaling; every rank computes as fast as the measured process; B = 4P bytes, the
// float32 gradient of P parameters; C = the measured one-process step; O = its optimizer family
// (zero_grad, clip, AdamW); F + G = C - O the forward and backward, G = share * (C - O)):
//   small(z)  = k(z) * ceil(log2 N) * alpha: the loss gather, and for zero 1/2 the clip's block
//               sums, each an MPI_Allgather of counts and an MPI_Allgatherv (k = 2, or 4 for
//               zero 1/2), recursive doubling at this size
//   opt(z)    = O for zero 0 (every rank steps everything), O / N for zero 1/2 (its shard)
//   allgather = (N-1) * alpha + (N-1)/N * B * beta                     (ring)
//   (A) T = F + G + [ (N-1) * alpha + (N-1)/N * B * beta ]              (MPI_Alltoallv, pairwise)
//                 + (N-1)/N * B * add                                  (owner adds N copies)
//                 + allgather + opt(z) + small(z)
//   (B) buckets: every shard (P/N elements) is cut into k = ceil(P / (N b)) buckets of e = P/(N k)
//       elements, nb = N k buckets in all, ready one after another as backward produces them:
//       bucket j (launch order) at F + G (j + 1) / nb. A hop moves and adds one bucket:
//         h = alpha + 4e * beta * f + 4e * add,  f = 1 + 1/N for N > 2 (ranks 1..N-2 also receive
//         the finished sums of their own buckets, 1/N of all), else 1.
//       Each bucket passes N hops (rank 0 -> 1 -> ... -> N-1 -> owner); every rank forwards the
//       buckets in launch order, so the chains form a pipeline of N stages of time h, and the
//       last sum arrives at (a tandem queue of identical stages; a_j = bucket j's ready time)
//         R = max_j (a_j + (nb - j) h) + (N-1) h
//           = F + G + max( (N + nb - 1) h - G (nb - 1)/nb ,  N h1 )
//       (the first term when the chains are the bottleneck, the second when backward is: then
//       the last bucket crosses idle links, h1 = h with f = 1); T = R + allgather + opt(z) +
//       small(z). `--self-check` replays the schedule hop by hop (each rank's outgoing link in
//       launch order, incoming links shared by chain and finished sums): R agrees within 1.5% at 64
//       and 512 ranks and wherever backward or the chains clearly dominate; near the crossover at
//       4 to 8 ranks the formula is up to 21% low (the owners' sums arrive in bursts).
//   efficiency = C / T (throughput against N independent processes: 1 is perfect weak scaling; it
//   can pass 1 for zero 1/2, whose ranks step 1/N of the optimizer), communication share =
//   (T - F - G - opt(z)) / T (the time no rank computes). zero 1 and zero 2 time the same here
//   (zero 2 only keeps less gradient memory).
// Networks (--networks; assumed, not measured here): 10 Gb/s Ethernet with MPI over kernel TCP,
// alpha 25 us (typical one-way small-message latency of osu_latency over TCP through one switch),
// and a 100 Gb/s RDMA-class fabric (InfiniBand EDR/HDR100 or RoCE), alpha 3 us (osu_latency over
// verbs is 1-2 us; a switch hop and MPI's matching on top); beta = 8 / line rate in bits/s (large
// messages reach 90-95% of the line rate, so beta is a little optimistic).
// The owner's add: --add-ns-per-byte (by default 0.1; measure_scaling.sh passes this machine's).
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/io/json.h"

namespace {

namespace json = dg::json;

struct Preset {
  std::string name;
  int threads = 0;
  int64_t parameters = 0;
  double step = 0, optimizer = 0;  // seconds: C and O
  double untimed = 0;  // the step outside every op family: under mpirun, mostly the collectives
};

struct Network {
  std::string name;
  double alpha = 0, beta = 0;  // seconds, seconds per byte
};

struct Inputs {
  double backward_share = 2.0 / 3.0;  // of forward + backward: 4 of the 6 FLOPs per parameter-token
  int64_t bucket_elements = int64_t(1) << 18;
  double add = 0.1e-9;  // seconds per byte of an out += in pass (--add-ns-per-byte; measured here)
};

struct Step {
  double seconds = 0, compute = 0;  // T and F + G + opt(z)
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);)
    if (!part.empty()) out.push_back(part);
  return out;
}

double number(const std::string& text, const std::string& what) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= 0))
    throw std::invalid_argument(fmt::format("{}: '{}' is not a non-negative number", what, text));
  return v;
}

json::Value read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("cannot read '{}'", path));
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str(), path);
}

double log2_rounds(int N) { return std::ceil(std::log2(static_cast<double>(N))); }

double small_collectives(int N, int zero, const Network& net) {
  return (zero == 0 ? 2 : 4) * log2_rounds(N) * net.alpha;
}

double optimizer_time(const Preset& p, int N, int zero) {
  return zero == 0 ? p.optimizer : p.optimizer / N;
}

double ring_all_gather(int N, double bytes, const Network& net) {
  return (N - 1) * net.alpha + (N - 1.0) / N * bytes * net.beta;
}

double reduce_scatter_in_rank_order(int N, double bytes, const Network& net, const Inputs& in) {
  return (N - 1) * net.alpha + (N - 1.0) / N * bytes * (net.beta + in.add);
}

Step model_a(const Preset& p, int N, int zero, const Network& net, const Inputs& in) {
  const double bytes = 4.0 * p.parameters, opt = optimizer_time(p, N, zero);
  const double fg = p.step - p.optimizer;
  return {fg + reduce_scatter_in_rank_order(N, bytes, net, in) + ring_all_gather(N, bytes, net) +
              opt + small_collectives(N, zero, net),
          fg + opt};
}

struct Buckets {
  int64_t count = 0;    // nb
  double elements = 0;  // e
  double hop = 0;       // h, with the owners' extra incoming share f
  double lone_hop = 0;  // h with f = 1: one bucket on idle links
};

Buckets buckets(const Preset& p, int N, const Network& net, const Inputs& in) {
  const double shard = static_cast<double>(p.parameters) / N;
  const int64_t per_shard =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(shard / in.bucket_elements)));
  Buckets b;
  b.count = per_shard * N;
  b.elements = shard / static_cast<double>(per_shard);
  const double f = N > 2 ? 1.0 + 1.0 / N : 1.0;
  b.hop = net.alpha + 4 * b.elements * (net.beta * f + in.add);
  b.lone_hop = net.alpha + 4 * b.elements * (net.beta + in.add);
  return b;
}

// R - (F + G): how long after backward's end the last bucket's sum arrives (closed form).
double chain_tail(const Preset& p, int N, const Network& net, const Inputs& in) {
  const Buckets b = buckets(p, N, net, in);
  const double g = in.backward_share * (p.step - p.optimizer), nb = static_cast<double>(b.count);
  return std::max((N + nb - 1) * b.hop - g * (nb - 1) / nb, N * b.lone_hop);
}

Step model_b(const Preset& p, int N, int zero, const Network& net, const Inputs& in) {
  const double fg = p.step - p.optimizer, opt = optimizer_time(p, N, zero);
  return {fg + chain_tail(p, N, net, in) + ring_all_gather(N, 4.0 * p.parameters, net) + opt +
              small_collectives(N, zero, net),
          fg + opt};
}

// Busy intervals of one incoming link: messages from different senders arrive in any order
// (each receive is posted ahead), so a message takes the first gap long enough from its time on.
class IncomingLink {
 public:
  double book(double from, double length) {
    double t = from;
    auto it = std::lower_bound(busy_.begin(), busy_.end(), std::pair{t, 0.0});
    if (it != busy_.begin() && std::prev(it)->second > t) t = std::prev(it)->second;
    while (it != busy_.end() && it->first < t + length) t = std::max(t, (it++)->second);
    busy_.insert(it, {t, t + length});
    return t;
  }

 private:
  std::vector<std::pair<double, double>> busy_;  // [start, end), sorted, disjoint
};

// The same chains replayed hop by hop: bucket j of the launch order (from the end of the flat
// buffer, so the last shard's buckets first) goes 0 -> 1 -> ... -> N-1 -> owner; a hop holds the
// sender's outgoing link (which sends in launch order) and a gap of the receiver's incoming link
// for its time. Returns R - (F + G).
double simulate_chain_tail(const Preset& p, int N, const Network& net, const Inputs& in) {
  const Buckets b = buckets(p, N, net, in);
  const double g = in.backward_share * (p.step - p.optimizer), f = p.step - p.optimizer - g;
  const double move = b.lone_hop;  // the owners' extra incoming share comes from the replay
  std::vector<double> out_free(N, 0);
  std::vector<IncomingLink> incoming(N);
  const int64_t per_shard = b.count / N;
  double last = 0;
  for (int64_t j = 0; j < b.count; ++j) {
    const int owner = N - 1 - static_cast<int>(j / per_shard);
    double ready = f + g * static_cast<double>(j + 1) / static_cast<double>(b.count);
    for (int from = 0; from < N; ++from) {
      const int to = from + 1 < N ? from + 1 : owner;
      if (to == from) break;  // rank N-1 owns the bucket: its sum is already there
      // the earliest start both links allow (the incoming one may move it later)
      double start = std::max(ready, out_free[from]);
      start = incoming[to].book(start, move);
      ready = out_free[from] = start + move;
    }
    last = std::max(last, ready);
  }
  return last - (f + g);
}

void print_self_check() {
  Inputs in;
  const std::vector<Network> nets = {{"10 Gb/s", 25e-6, 0.8e-9}, {"100 Gb/s", 3e-6, 0.08e-9}};
  double worst = 0;
  fmt::print(
      "After backward's end, until the last bucket's sum has arrived (B), by the formula and\n"
      "replayed hop by hop (add {:.3f} ns/byte, backward {:.0f}%):\n",
      in.add * 1e9, 100 * in.backward_share);
  fmt::print("{:>12} {:>5} {:>9} {:>10} {:>16} {:>16} {:>8}\n", "parameters", "N", "network",
             "step ms", "formula tail ms", "replayed tail ms", "ratio");
  for (int64_t params : {int64_t(7'000'000), int64_t(152'000'000)})
    for (int N : {2, 4, 8, 64, 512})
      for (const Network& net : nets) {
        for (double step : {0.5, 0.005}) {  // backward the bottleneck, then the chains
          const Preset p{"x", 1, params, step * params / 7e6, 0.1 * step * params / 7e6};
          const double formula = chain_tail(p, N, net, in);
          const double replay = simulate_chain_tail(p, N, net, in);
          worst = std::max(worst, std::abs(formula / replay - 1));
          fmt::print("{:>12} {:>5} {:>9} {:>10.0f} {:>16.3f} {:>16.3f} {:>8.3f}\n", params, N,
                     net.name, p.step * 1e3, formula * 1e3, replay * 1e3, formula / replay);
        }
      }
  fmt::print("largest |formula / replay - 1|: {:.3f}\n", worst);
  // Near the crossover (chains as fast as backward) with 4 to 8 ranks the owners' finished sums
  // arrive in bursts the average share f does not see: the formula is up to about 21% low there.
  if (worst > 0.25) throw std::runtime_error("the chain formula and its replay differ by > 25%");
}

struct Options {
  std::vector<std::string> bench_files, check_files, measured_files;
  std::vector<std::string> configs;  // empty: every config found
  std::vector<int> ranks = {8, 64, 512};
  int threads = 2, check_threads = 1, cores = 2;
  std::string check_config = "small";
  std::vector<Network> networks = {{"10 Gb/s", 25e-6, 8.0 / 10e9}, {"100 Gb/s", 3e-6, 8.0 / 100e9}};
  Inputs inputs;
  bool self_check = false;
  std::vector<std::string> add_rate_files;  // --add-rate: print the owner's add rate and stop
  std::vector<Preset> given;                // --preset, besides (or instead of) --bench
};

const char* kUsage =
    "usage: scaling_model --bench FILE[,FILE...] | --preset "
    "NAME:THREADS:PARAMETERS:STEP_MS:OPT_MS,...\n"
    "  [--configs small,base] [--threads 2]\n"
    "  [--ranks 8,64,512] [--networks NAME:ALPHA_US:GBPS,...] [--backward-share 0.667]\n"
    "  [--bucket-elements 262144] [--add-ns-per-byte 0.1]\n"
    "  [--check FILE,... --measured FILE,... --check-config small --check-threads 1 --cores 2]\n"
    "  | --self-check | --add-rate FILE,...\n"
    "--bench: `depthgrad bench --json` outputs (a sweep or --one; the median over files of each\n"
    "config and thread count); --check: `mpi_collectives_bench --json` outputs of this machine\n"
    "(the median alpha and beta over files of a rank count);\n"
    "--measured: `mpirun -np N depthgrad bench --one CONFIG --json` outputs to compare with;\n"
    "--add-rate: prints the median beta of the local add in `mpi_collectives_bench --json` "
    "outputs\n"
    "(ns/byte), for --add-ns-per-byte.";

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--self-check") {
      o.self_check = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(fmt::format("{} needs a value\n{}", a, kUsage));
    const std::string v = argv[++i];
    if (a == "--add-rate")
      o.add_rate_files = split(v, ',');
    else if (a == "--bench")
      o.bench_files = split(v, ',');
    else if (a == "--preset")
      for (const std::string& one : split(v, ',')) {
        const std::vector<std::string> f = split(one, ':');
        if (f.size() != 5)
          throw std::invalid_argument(fmt::format(
              "--preset: '{}' is not NAME:THREADS:PARAMETERS:STEP_MS:OPTIMIZER_MS", one));
        o.given.push_back({f[0], static_cast<int>(number(f[1], a)),
                           static_cast<int64_t>(number(f[2], a)), number(f[3], a) * 1e-3,
                           number(f[4], a) * 1e-3});
      }
    else if (a == "--check")
      o.check_files = split(v, ',');
    else if (a == "--measured")
      o.measured_files = split(v, ',');
    else if (a == "--configs")
      o.configs = split(v, ',');
    else if (a == "--check-config")
      o.check_config = v;
    else if (a == "--threads")
      o.threads = static_cast<int>(number(v, a));
    else if (a == "--check-threads")
      o.check_threads = static_cast<int>(number(v, a));
    else if (a == "--cores")
      o.cores = std::max(1, static_cast<int>(number(v, a)));
    else if (a == "--backward-share")
      o.inputs.backward_share = std::min(1.0, number(v, a));
    else if (a == "--bucket-elements")
      o.inputs.bucket_elements = std::max<int64_t>(1, static_cast<int64_t>(number(v, a)));
    else if (a == "--add-ns-per-byte")
      o.inputs.add = number(v, a) * 1e-9;
    else if (a == "--ranks") {
      o.ranks.clear();
      for (const std::string& r : split(v, ',')) o.ranks.push_back(std::max(2, int(number(r, a))));
    } else if (a == "--networks") {
      o.networks.clear();
      for (const std::string& n : split(v, ',')) {
        const std::vector<std::string> f = split(n, ':');
        if (f.size() != 3)
          throw std::invalid_argument(fmt::format("--networks: '{}' is not NAME:ALPHA_US:GBPS", n));
        o.networks.push_back({f[0], number(f[1], a) * 1e-6, 8.0 / (number(f[2], a) * 1e9)});
      }
    } else
      throw std::invalid_argument(fmt::format("unknown argument '{}'\n{}", a, kUsage));
  }
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Every `depthgrad bench` result in the files (a sweep's "results", or one --one document), the
// median over files of each (config, threads, ranks).
std::map<std::string, Preset> read_bench(const std::vector<std::string>& files, bool by_ranks) {
  std::map<std::string, std::vector<Preset>> found;
  for (const std::string& path : files) {
    const json::Value doc = read_json(path);
    std::vector<const json::Value*> rows;
    if (const json::Value* r = doc.find("results"))
      for (const json::Value& x : r->as_array()) rows.push_back(&x);
    else
      rows.push_back(&doc);
    for (const json::Value* r : rows) {
      Preset p;
      p.name = r->at("config").as_string();
      p.threads = static_cast<int>(r->at("threads").as_int());
      p.parameters = r->at("parameters").as_int();
      p.step = r->at("median_step_seconds").as_double();
      if (const json::Value* b = r->find("breakdown_seconds")) {
        p.optimizer = b->at("optimizer").as_double();
        p.untimed = b->at("untimed").as_double();
      }
      const json::Value* ranks = r->find("ranks");
      const int64_t n = ranks ? ranks->as_int() : 1;
      const std::string key =
          by_ranks ? fmt::format("{}", n) : fmt::format("{}@{}", p.name, p.threads);
      if (by_ranks || n == 1) found[key].push_back(p);
    }
  }
  std::map<std::string, Preset> out;
  for (auto& [key, list] : found) {
    Preset p = list.front();
    std::vector<double> steps, optimizers, untimed;
    for (const Preset& x : list)
      steps.push_back(x.step), optimizers.push_back(x.optimizer), untimed.push_back(x.untimed);
    p.step = median(steps);
    p.optimizer = median(optimizers);
    p.untimed = median(untimed);
    out[key] = p;
  }
  return out;
}

std::string cell(const Step& s, double one_process) {
  return fmt::format("{:.1f} ms {:.0f}% {:.0f}%", s.seconds * 1e3, 100 * one_process / s.seconds,
                     100 * (s.seconds - s.compute) / s.seconds);
}

void print_model(const Options& o, const std::map<std::string, Preset>& presets) {
  fmt::print(
      "Modelled step per rank at {} thread(s) a rank (weak scaling: every rank its own batch). "
      "Each "
      "cell: step ms, efficiency (one process's step / this step), communication share (time no "
      "rank computes / step). A: reduce-scatter + all-gather after backward; B: bucketed chains "
      "overlapped with backward ({} elements a bucket, backward {:.0f}% of forward + backward), "
      "then the all-gather; zero 1 and 2 step 1/N of the optimizer. Owner adds at {:.3f} "
      "ns/byte.\n",
      o.threads, o.inputs.bucket_elements, 100 * o.inputs.backward_share, o.inputs.add * 1e9);
  for (const Network& n : o.networks)
    fmt::print("  network {}: alpha {:.1f} us, beta {:.3f} ns/byte\n", n.name, n.alpha * 1e6,
               n.beta * 1e9);
  fmt::print(
      "| preset (P, one-process step, optimizer) | ranks | network | A zero 0 | A zero 1/2 | "
      "B zero 0 | B zero 1/2 |\n|---|---:|---|---:|---:|---:|---:|\n");
  for (const auto& [key, p] : presets) {
    if (p.threads != o.threads) continue;
    if (!o.configs.empty() &&
        std::find(o.configs.begin(), o.configs.end(), p.name) == o.configs.end())
      continue;
    for (int N : o.ranks)
      for (const Network& net : o.networks)
        fmt::print("| {} ({:.1f}M, {:.1f} ms, {:.1f} ms) | {} | {} | {} | {} | {} | {} |\n", p.name,
                   p.parameters / 1e6, p.step * 1e3, p.optimizer * 1e3, N, net.name,
                   cell(model_a(p, N, 0, net, o.inputs), p.step),
                   cell(model_a(p, N, 1, net, o.inputs), p.step),
                   cell(model_b(p, N, 0, net, o.inputs), p.step),
                   cell(model_b(p, N, 1, net, o.inputs), p.step));
  }
}

struct Fit {
  double alpha = 0, beta = 0;
  double at_size = -1;  // seconds measured at read_fits's `bytes` (-1: not among the sizes)
};

// The fits of every file, by rank count: the median alpha and beta of each operation over the files
// of the same rank count, and the median time measured at `bytes` (mpi_collectives_bench --bytes).
std::map<int, std::map<std::string, Fit>> read_fits(const std::vector<std::string>& files,
                                                    double bytes = 0) {
  std::map<int, std::map<std::string, std::vector<Fit>>> all;
  for (const std::string& path : files) {
    const json::Value doc = read_json(path);
    auto& by_name = all[static_cast<int>(doc.at("ranks").as_int())];
    const json::Array& sizes = doc.at("bytes").as_array();
    for (const json::Value& op : doc.at("operations").as_array()) {
      Fit f{op.at("alpha_seconds").as_double(), op.at("beta_seconds_per_byte").as_double()};
      for (size_t i = 0; i < sizes.size(); ++i)
        if (sizes[i].as_double() == bytes) f.at_size = op.at("median_seconds").at(i).as_double();
      by_name[op.at("name").as_string()].push_back(f);
    }
  }
  std::map<int, std::map<std::string, Fit>> out;
  for (const auto& [ranks, by_name] : all)
    for (const auto& [name, fits] : by_name) {
      std::vector<double> a, b, t;
      for (const Fit& f : fits) a.push_back(f.alpha), b.push_back(f.beta), t.push_back(f.at_size);
      out[ranks][name] = {median(a), median(b), median(t)};
    }
  return out;
}

// This machine at the rank counts of the --check files: compute time-shared over the cores, the
// collectives from their own fits (and from ping-pong alpha/beta through the formulas).
void print_check(const Options& o, const std::map<std::string, Preset>& presets) {
  const auto it = presets.find(fmt::format("{}@{}", o.check_config, o.check_threads));
  if (it == presets.end())
    throw std::invalid_argument(
        fmt::format("--check: no one-process result of {} at {} thread(s) "
                    "in --bench",
                    o.check_config, o.check_threads));
  const Preset& p = it->second;
  const std::map<std::string, Preset> measured = read_bench(o.measured_files, true);
  const double bytes = 4.0 * p.parameters;
  fmt::print(
      "\nCheck on this machine ({} cores): {} at {} thread(s) a rank, zero 0, one-process "
      "step {:.1f} ms (optimizer {:.1f} ms), P = {}\n",
      o.cores, p.name, o.check_threads, p.step * 1e3, p.optimizer * 1e3, p.parameters);
  fmt::print(
      "| ranks | one-process step x time-share | reduce-scatter at 4P, measured (fit) | "
      "all-gather at 4P, measured (fit) | communication: predicted (from ping-pong + formulas) | "
      "step: predicted (A) | step: predicted (B) | step: measured | measured / predicted (A, "
      "B) | communication: measured (outside the op families) | measured / predicted (A) |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& by_ranks : read_fits(o.check_files, bytes)) {
    const int N = by_ranks.first;
    const std::map<std::string, Fit>& fit = by_ranks.second;  // (clang 14: no binding in lambdas)
    const double share = std::max(1.0, double(N) * o.check_threads / o.cores);
    const Network here{"here", fit.at("ping_pong").alpha, fit.at("ping_pong").beta};
    auto cost = [&](const char* name, double& fitted) {
      const Fit& f = fit.at(name);
      fitted = f.alpha + f.beta * bytes;
      return f.at_size >= 0 ? f.at_size : fitted;  // measured at 4P when it was timed there
    };
    double rs_fit = 0, ag_fit = 0;
    const double rs = cost("reduce_scatter", rs_fit), ag = cost("all_gather", ag_fit);
    const double comm = rs + ag + small_collectives(N, 0, here);
    Inputs in = o.inputs;
    in.add = fit.at("add").beta;
    Preset alone = p;
    alone.step = alone.optimizer = 0;  // the formulas' communication alone
    const double comm_formulas = model_a(alone, N, 0, here, in).seconds;
    const double predicted = p.step * share + comm;
    // B: the chains behind the time-shared backward, on this machine's ping-pong alpha and beta
    Preset shared = p;
    shared.step *= share;
    shared.optimizer *= share;
    const double predicted_b = model_b(shared, N, 0, here, in).seconds;
    std::string seen = "-", ratio = "-", seen_comm = "-", comm_ratio = "-";
    if (const auto m = measured.find(fmt::format("{}", N)); m != measured.end()) {
      const double outside = m->second.untimed - p.untimed;  // less one process's own remainder
      seen = fmt::format("{:.1f} ms", m->second.step * 1e3);
      ratio =
          fmt::format("{:.2f}, {:.2f}", m->second.step / predicted, m->second.step / predicted_b);
      seen_comm = fmt::format("{:.1f} ms", outside * 1e3);
      comm_ratio = fmt::format("{:.2f}", outside / comm);
    }
    fmt::print(
        "| {} | {:.1f} ms x {:.1f} | {:.1f} ms ({:.1f}) | {:.1f} ms ({:.1f}) | {:.1f} ms "
        "({:.1f}) | {:.1f} ms | {:.1f} ms | {} | {} | {} | {} |\n",
        N, p.step * 1e3, share, rs * 1e3, rs_fit * 1e3, ag * 1e3, ag_fit * 1e3, comm * 1e3,
        comm_formulas * 1e3, predicted * 1e3, predicted_b * 1e3, seen, ratio, seen_comm,
        comm_ratio);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse_options(argc, argv);
    if (o.self_check) {
      print_self_check();
      return 0;
    }
    if (!o.add_rate_files.empty()) {
      std::vector<double> betas;
      for (const auto& [ranks, fit] : read_fits(o.add_rate_files))
        betas.push_back(fit.at("add").beta);
      fmt::print("{:.4f}\n", median(betas) * 1e9);
      return 0;
    }
    if (o.bench_files.empty() && o.given.empty())
      throw std::invalid_argument(fmt::format("--bench or --preset is needed\n{}", kUsage));
    std::map<std::string, Preset> presets = read_bench(o.bench_files, false);
    for (const Preset& p : o.given) presets[fmt::format("{}@{}", p.name, p.threads)] = p;
    print_model(o, presets);
    if (!o.check_files.empty()) print_check(o, presets);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "scaling_model: {}\n", e.what());
    return 2;
  }
}
