// The classes of bad input and crash safety, at the library level: non-regular files,
// sizes that cannot fit in memory, checkpoints whose metadata or tensors are not to be trusted,
// divergence (stop or skip), exclusive run folders and the clean-up of killed writers' temporaries.
// The command-line side (messages, exit codes, resume of a run folder) is tests/cli_hardening.sh.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <span>
#include <thread>

#include "tests/temp_dir.h"
#include "train/checkpoint.h"
#include "train/io/files.h"
#include "train/lm/memory_budget.h"
#include "train/lm/micro_lm_training.h"

using namespace dg;
using dg::test::TempDir;

namespace {
std::vector<int32_t> synthetic_ids(int64_t n, int64_t vocab) {
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * i + 3 * i) % vocab);
  return ids;
}

RunConfig tiny_config() {
  RunConfig c;
  c.model.vocab = 61;
  c.model.dim = 16;
  c.model.layers = 2;
  c.model.heads = 2;
  c.model.kv_heads = 2;
  c.model.seq_len = 8;
  c.training.steps = 6;
  c.training.batch = 2;
  c.training.adamw.lr = 3e-3;
  c.training.schedule = Schedule::parse("constant", c.training.adamw.lr, 0, c.training.steps);
  c.training.seed = 3;
  return c;
}

// The checkpoint at `from` with `edit` applied, written to `to`.
template <class Edit>
std::string edited(const std::string& from, const std::string& to, Edit edit) {
  SafetensorsFile f = load_safetensors(from);
  edit(f);
  save_safetensors(to, f.tensors, f.metadata);
  return to;
}

void set_first_float(TensorEntry& e, float value) {
  REQUIRE(e.dtype == "F32");
  std::memcpy(e.bytes.data(), &value, sizeof value);
}
}  // namespace

TEST_CASE("read_file refuses FIFOs, devices and directories by name, without reading or hanging") {
  TempDir dir("harden");
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // A FIFO without a writer: the old open() blocked forever; now refused at once.
  const std::string fifo_error = fifo + ": it is a FIFO (named pipe), not a regular file";
  CHECK_THROWS_WITH(read_file(fifo), doctest::Contains(fifo_error.c_str()));
  // /dev/zero never ends: the old loop read until memory ran out.
  CHECK_THROWS_WITH(read_file("/dev/zero"),
                    doctest::Contains("/dev/zero: it is a character device, not a regular file"));
  CHECK_THROWS_WITH(read_file(dir.path.string()), doctest::Contains("it is a directory"));
  // Every reader goes through read_file: a FIFO as a checkpoint is refused the same way.
  CHECK_THROWS_WITH(load_safetensors(fifo), doctest::Contains("FIFO"));
}

TEST_CASE("memory estimates: parameters exact, absurd sizes refused before allocating") {
  for (ResidualMode mode : all_residual_modes()) {
    for (bool tied : {true, false}) {
      CAPTURE(residual_mode_name(mode));
      MicroLMConfig c = tiny_config().model;
      c.mode = mode;
      c.tied_head = tied;
      c.layers = 3;
      c.kv_heads = 1;
      MicroLM model(c);
      CHECK(micro_lm_parameter_count(c) == static_cast<double>(model.parameter_count()));
    }
  }
  CHECK(machine_memory_bytes() > 0);
  RunConfig huge = tiny_config();
  huge.model.dim = 1 << 20;
  huge.model.heads = 1;
  huge.model.kv_heads = 1;
  huge.model.layers = 64;
  huge.model.vocab = 50000;
  const std::vector<int32_t> ids = synthetic_ids(100, 61);
  const uint64_t allocations = storage_fresh_allocations();
  auto build = [&] { MicroLMTrainer t(huge, ids); };
  CHECK_THROWS_WITH(build(), doctest::Contains("needs about"));
  CHECK_THROWS_WITH(build(), doctest::Contains("but this machine has"));
  CHECK(storage_fresh_allocations() == allocations);  // refused before any tensor was made
  CHECK(format_bytes(1536.0 * 1024 * 1024) == "1.5 GiB");
}

TEST_CASE("resume refuses checkpoints whose counts, tensors or values cannot be trusted") {
  TempDir dir("harden");
  const std::vector<int32_t> ids = synthetic_ids(2000, 61);
  const RunConfig cfg = tiny_config();
  MicroLMTrainer t(cfg, ids);
  t.run(3);
  const std::string good = dir.file("good.safetensors");
  t.save_checkpoint(good);
  MicroLMTrainer fresh(cfg, ids);
  const std::vector<float> before = fresh.parameters().values.to_floats();
  auto refused = [&](const std::string& name, auto edit, const std::string& message) {
    CAPTURE(name);
    const std::string path = edited(good, dir.file(name), edit);
    CHECK_THROWS_WITH(fresh.load_checkpoint(path), doctest::Contains(message.c_str()));
    CHECK(fresh.step() == 0);
    CHECK(fresh.parameters().values.to_floats() == before);  // nothing half-loaded
  };
  // Counts: a step past the run's steps (was accepted up to INT64_MAX), or counts that disagree.
  refused(
      "step.safetensors", [](SafetensorsFile& f) { f.metadata["depthgrad.step"] = "7"; },
      "'depthgrad.step' is '7', expected an integer in [0, 6]");
  refused(
      "optstep.safetensors",
      [](SafetensorsFile& f) { f.metadata["depthgrad.optimizer_step"] = "2"; },
      "'depthgrad.optimizer_step' is 2, expected 3");
  refused(
      "losses.safetensors",
      [](SafetensorsFile& f) {
        f.metadata["depthgrad.step"] = "2";
        f.metadata["depthgrad.clipped_steps"] = "0";
        f.metadata["depthgrad.optimizer_step"] = "2";
      },
      "'state.losses' holds 3 values, expected 2");
  refused(
      "wall.safetensors", [](SafetensorsFile& f) { f.metadata["depthgrad.wall_seconds"] = "nan"; },
      "'depthgrad.wall_seconds' is 'nan'");
  // Tensors: an extra one (was accepted on resume; eval refused it).
  refused(
      "extra.safetensors",
      [](SafetensorsFile& f) {
        TensorEntry e = f.tensors.front();
        e.name = "blocks.9.extra.weight";
        f.tensors.push_back(e);
      },
      "unexpected tensor 'blocks.9.extra.weight'");
  refused(
      "extra-state.safetensors",
      [](SafetensorsFile& f) {
        TensorEntry e;
        e.name = "state.other";
        e.dtype = "U8";
        e.shape = {1};
        e.bytes = {0};
        f.tensors.push_back(e);
      },
      "unexpected tensor 'state.other'");
  // Values: a NaN weight, an infinite moment, a negative second moment.
  refused(
      "nan.safetensors",
      [](SafetensorsFile& f) {
        for (TensorEntry& e : f.tensors)
          if (e.name == "token.weight") set_first_float(e, std::nanf(""));
      },
      "tensor 'token.weight' holds nan at element 0");
  refused(
      "inf.safetensors",
      [](SafetensorsFile& f) {
        for (TensorEntry& e : f.tensors)
          if (e.name == "optimizer.exp_avg.token.weight")
            set_first_float(e, std::numeric_limits<float>::infinity());
      },
      "'optimizer.exp_avg.token.weight' holds inf");
  refused(
      "negative.safetensors",
      [](SafetensorsFile& f) {
        for (TensorEntry& e : f.tensors)
          if (e.name == "optimizer.exp_avg_sq.token.weight") set_first_float(e, -1.0f);
      },
      "expected finite values >= 0");
  // Weights for eval/generate: a NaN weight is an error, not `loss nan`.
  const std::string weights = dir.file("weights.safetensors");
  save_weights(weights, t.model());
  const std::string bad = edited(weights, dir.file("bad-weights.safetensors"), [](auto& f) {
    for (TensorEntry& e : f.tensors)
      if (e.name == "final_norm.weight") set_first_float(e, std::nanf(""));
  });
  MicroLM model(cfg.model);
  CHECK_THROWS_WITH(load_weights(bad, model), doctest::Contains("'final_norm.weight' holds nan"));
  // The checkpoint itself still resumes, with the run's wall time carried over.
  fresh.load_checkpoint(good);
  CHECK(fresh.step() == 3);
  const double saved = std::stod(load_safetensors(good).metadata.at("depthgrad.wall_seconds"));
  CHECK(saved > 0);
  CHECK(fresh.wall_seconds() >= saved);
}

TEST_CASE(
    "divergence: stops naming the step, loss and tensor with the weights untouched, or skips") {
  const std::vector<int32_t> ids = synthetic_ids(2000, 61);
  RunConfig cfg = tiny_config();
  cfg.training.adamw.lr = 1e30;  // the first update throws the weights far past float's range
  cfg.training.schedule = Schedule::parse("constant", cfg.training.adamw.lr, 0, cfg.training.steps);
  cfg.training.clip = 0;
  MicroLMTrainer t(cfg, ids);
  bool diverged = false;
  std::vector<float> last_good;
  try {
    while (t.step() < cfg.training.steps) {
      last_good = t.parameters().values.to_floats();
      t.train_step();
    }
  } catch (const TrainingDiverged& e) {
    diverged = true;
    const std::string message = e.what();
    CHECK(message.find(fmt::format("training diverged at step {}", t.step())) != std::string::npos);
    CHECK(message.find("loss ") != std::string::npos);
    CHECK((message.find("parameter '") != std::string::npos ||
           message.find("the gradient of '") != std::string::npos ||
           message.find("the forward overflowed") != std::string::npos));
    CHECK(t.parameters().values.to_floats() == last_good);  // no optimizer step was taken
  }
  CHECK(diverged);

  MicroLMTrainer skipping(cfg, ids);
  skipping.set_skip_nonfinite(true);
  skipping.run(cfg.training.steps);
  CHECK(skipping.step() == cfg.training.steps);
  CHECK(skipping.skipped_steps() > 0);
  CHECK(static_cast<int64_t>(skipping.losses().size()) ==
        cfg.training.steps - skipping.skipped_steps());
  for (double loss : skipping.losses()) CHECK(std::isfinite(loss));
}

namespace {
// A spike at one step, as an overflow would make it: the first gradient element NaN after the
// reduction. Counts the callbacks it sees.
struct SpikeAt : StepObserver {
  explicit SpikeAt(int64_t step) : step(step) {}
  int64_t step, draws = 0, steps = 0;
  void after_draw(const Trainer&, std::span<const int64_t> examples) override {
    draws += examples.empty() ? 0 : 1;
  }
  void after_reduce(const Trainer& trainer, Tensor& gradients) override {
    if (trainer.step() == step && trainer.rank() == 0)
      gradients.mutable_data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  }
  void after_step(const Trainer&, const StepLog&) override { ++steps; }
};
}  // namespace

TEST_CASE("a spike (a NaN gradient at step 3, from a StepObserver) names the step and tensor") {
  const std::vector<int32_t> ids = synthetic_ids(2000, 61);
  const RunConfig cfg = tiny_config();
  // An observer that writes nothing changes no bit; it sees every step's draw and end.
  MicroLMTrainer plain(cfg, ids), observed(cfg, ids);
  SpikeAt never(-1);
  observed.set_observer(&never);
  plain.run(cfg.training.steps);
  observed.run(cfg.training.steps);
  CHECK(plain.losses() == observed.losses());
  CHECK(plain.parameters().values.to_floats() == observed.parameters().values.to_floats());
  CHECK(never.draws == cfg.training.steps);
  CHECK(never.steps == cfg.training.steps);

  MicroLMTrainer t(cfg, ids);
  SpikeAt spike(3);
  t.set_observer(&spike);
  t.run(3);
  const std::vector<float> before = t.parameters().values.to_floats();
  CHECK_THROWS_WITH_AS(t.train_step(),
                       doctest::Contains("training diverged at step 3 (0-based): loss"),
                       TrainingDiverged);
  CHECK(t.parameters().values.to_floats() == before);  // stopped before the optimizer step
  MicroLMTrainer named(cfg, ids);
  named.set_observer(&spike);
  named.run(3);
  CHECK_THROWS_WITH(named.train_step(),
                    doctest::Contains("the gradient of 'token.weight' is not finite"));

  // Skipping: step 3 is skipped and counted, the others are taken.
  MicroLMTrainer skipping(cfg, ids);
  SpikeAt skip(3);
  skipping.set_observer(&skip);
  skipping.set_skip_nonfinite(true);
  std::vector<StepLog> logs;
  skipping.run(cfg.training.steps, [&](const StepLog& log) { logs.push_back(log); });
  REQUIRE(logs.size() == 6);
  for (const StepLog& log : logs) CHECK(log.skipped == (log.step == 3));
  CHECK(logs[5].skipped_steps == 1);
  CHECK(skipping.skipped_steps() == 1);
  CHECK(skipping.losses().size() == 5);
  CHECK(skip.steps == 6);
}

TEST_CASE("run folders are created exclusively: a taken name gets a suffix, never shared") {
  TempDir dir("harden");
  const std::string base = dir.file("runs/20261203-120000-000001");
  std::filesystem::create_directories(base);  // another run got there first
  CHECK(make_unique_dir(base) == base + "-2");
  CHECK(make_unique_dir(base) == base + "-3");
  // Many at once: every one gets its own folder.
  const std::string race = dir.file("runs/race");
  std::vector<std::string> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] { got[i] = make_unique_dir(race); });
  for (std::thread& th : threads) th.join();
  CHECK(std::set<std::string>(got.begin(), got.end()).size() == got.size());
}

TEST_CASE("temporaries of killed writers are removed by the next write into their folder") {
  TempDir dir("harden");
  // A child that dies with its temporary on disk, as a SIGKILL during a checkpoint write leaves.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::string dead = fmt::format(".checkpoint.safetensors.tmp-{}-0123456789abcdef", child);
  const std::string alive =
      fmt::format(".checkpoint.safetensors.tmp-{}-0123456789abcdef", ::getppid());
  const std::string other = ".notes.tmp-x";  // not a temporary of ours: left alone
  for (const std::string& name : {dead, alive, other}) {
    std::FILE* file = std::fopen(dir.file(name).c_str(), "w");
    REQUIRE(file);
    std::fclose(file);
  }
  CHECK(is_stale_temporary(dead));
  CHECK_FALSE(is_stale_temporary(alive));
  CHECK_FALSE(is_stale_temporary(other));
  write_file_atomic(dir.file("checkpoint.safetensors"), "data");
  CHECK_FALSE(std::filesystem::exists(dir.file(dead)));
  CHECK(std::filesystem::exists(dir.file(alive)));
  CHECK(std::filesystem::exists(dir.file(other)));
  CHECK(read_file(dir.file("checkpoint.safetensors")) == "data");
}
