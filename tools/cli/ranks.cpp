// Errors on several ranks and train's layout flags (see ranks.h).
#include "tools/cli/ranks.h"

#include <fmt/core.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace dg::cli {

int run_on_every_rank(World& world, const char* command,
                      const std::function<int(bool& agreed)>& body) {
  bool agreed = false;
  // An error every rank raises alike: rank 0 says why, then every rank ends with `code` once
  // that line is out (a rank that ended first could make mpirun end rank 0 before it printed).
  // The wait gives up after 30 s, should a rank not have raised it after all.
  const auto refuse_alike = [&](const std::exception& e, int code) {
    if (world.rank() == 0) {
      fmt::print(stderr, "depthgrad {}: error: {}\n", command, e.what());
      std::fflush(stderr);
    }
    if (!world.collectives().barrier_within(30)) world.abort(code);
    return code;
  };
  try {
    return body(agreed);
  } catch (const CollectiveError& e) {
    if (world.size() == 1) throw;
    return refuse_alike(e, 1);
  } catch (const UsageError& e) {
    if (world.size() == 1) throw;
    if (agreed) return refuse_alike(e, 2);
    fmt::print(stderr, "depthgrad {}: rank {} of {}: error: {}\n", command, world.rank(),
               world.size(), e.what());
    std::fflush(stderr);
    world.abort(2);
  } catch (const std::exception& e) {
    if (world.size() == 1) throw;
    fmt::print(stderr, "depthgrad {}: rank {} of {}: error: {}\n", command, world.rank(),
               world.size(), e.what());
    std::fflush(stderr);
    world.abort(1);
  }
}

void check_same_flags(World& world, const Flags& f, const json::Value& extra) {
  if (world.size() == 1) return;
  json::Value settings = extra.is_object() ? extra : json::Value(json::Object{});
  for (const auto& [name, value] : f.values()) settings["--" + name] = value;
  check_same_settings(world.collectives(), json::dump(settings));
}

Flags& add_layout_flags(Flags& f) {
  return f.add("global-batch", "",
               "windows per step over all ranks: sets --batch to it / (ranks x accum)");
}

void apply_layout_flags(const Flags& f, int ranks, RunConfig& run) {
  LMTrainingConfig& t = run.training;
  if (f.given("global-batch")) {
    const int64_t global = f.get_int("global-batch"), split = ranks * t.accum;
    if (global < 1 || global % split != 0)
      throw UsageError(fmt::format(
          "--global-batch {} cannot be split over {} rank(s) x accum {} = {} micro-batches of "
          "equal size",
          global, ranks, t.accum, split));
    if (f.given("batch") && f.get_int("batch") * split != global)
      throw UsageError(fmt::format("--batch {} x {} rank(s) x accum {} = {}, not --global-batch {}",
                                   f.get_int("batch"), ranks, t.accum, f.get_int("batch") * split,
                                   global));
    t.batch = global / split;
  }
  try {
    run.validate();  // e.g. --heads 5 with --dim 64: refused before the data is read
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());  // the same on every rank: said once
  }
}

std::string layout_line(World& world, Trainer& trainer) {
  const TrainingConfig& c = trainer.config();
  std::string line =
      fmt::format("{} rank(s) x accum {} x batch {} = global batch {} windows per step",
                  world.size(), c.accum, c.batch, trainer.global_batch());
  if (world.size() == 1) return line;
  const FlatParameters& flat = trainer.parameters();
  const std::vector<int64_t> bounds = shard_bounds(flat, world.size());
  const int r = world.rank();
  const double total = static_cast<double>(flat.total) * 4 / (1 << 20),
               shard = static_cast<double>(bounds[r + 1] - bounds[r]) * 4 / (1 << 20);
  int64_t state_bytes = 0;  // the optimiser's per-element state as this rank holds it
  for (const auto& [name, tensor] : trainer.optimizer().element_state())
    state_bytes += tensor.numel() * static_cast<int64_t>(dtype_size(tensor.dtype()));
  const char* stage[] = {"ZeRO-0 (every rank holds all state)", "ZeRO-1 (optimiser state sharded)",
                         "ZeRO-2 (optimiser state and gradients sharded)"};
  line += fmt::format(
      ", {}, the gradient summed {}; rank {} holds weights {:.1f} MiB, gradients {:.1f} MiB{}, "
      "optimiser state {:.1f} MiB",
      stage[c.zero], c.overlap ? "while backward runs" : "after backward", r, total,
      c.zero == 2 ? shard : total, c.zero == 2 ? " (its shard; others' only while in flight)" : "",
      static_cast<double>(state_bytes) / (1 << 20));
  if (c.accum > 1) line += fmt::format(", accumulated gradients {:.1f} MiB", total);
  line += fmt::format(", parameters identical on every rank (checksum {})",
                      check_same_parameters(world.collectives(), trainer.parameters()));
  return line;
}

namespace {
// A field of /proc/self/status in KiB: "VmHWM:  1234 kB" (the peak), "VmRSS: …" (now).
int64_t status_kib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  return 0;
}
int64_t peak_resident_kib() { return status_kib("VmHWM"); }
}  // namespace

int64_t restart_peak_resident() {
  const int64_t peak = peak_resident_kib();
  std::ofstream("/proc/self/clear_refs") << "5";  // where unsupported, the peak simply goes on
  return peak;
}

std::string peak_memory_line(World& world, int64_t startup_kib) {
  Collectives& c = world.collectives();
  const std::vector<double> startup = c.all_gather(std::vector<double>{double(startup_kib)});
  const std::vector<double> training =
      c.all_gather(std::vector<double>{double(peak_resident_kib())});
  const std::vector<double> now = c.all_gather(std::vector<double>{double(status_kib("VmRSS"))});
  auto list = [](const std::vector<double>& kib) {
    std::string text;
    for (size_t r = 0; r < kib.size(); ++r)
      text += fmt::format("{}{:.0f}", r ? ", " : "", kib[r] / 1024);
    return text;
  };
  return fmt::format(
      "peak resident memory{} (MiB): start-up {}; training {}; after the last step {}",
      world.size() > 1 ? " per rank" : "", list(startup), list(training), list(now));
}

}  // namespace dg::cli
