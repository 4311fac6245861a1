// The resumable trainer and checkpoints: resume equals an uninterrupted run bit for bit; bad
// checkpoint files are refused with errors naming the file and tensor; configs round-trip.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <type_traits>

#include "nn/lm/decode.h"
#include "tests/temp_dir.h"
#include "train/checkpoint.h"
#include "train/io/files.h"
#include "train/lm/batches.h"
#include "train/lm/micro_lm_training.h"

using namespace dg;
using dg::test::TempDir;
namespace fs = std::filesystem;

namespace {
std::vector<int32_t> synthetic_ids(int64_t n, int64_t vocab) {
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * i + 3 * i) % vocab);
  return ids;
}

RunConfig small_config(ResidualMode mode, bool sequential) {
  RunConfig c;
  c.model.vocab = 97;
  c.model.dim = 32;
  c.model.layers = 3;
  c.model.heads = 4;
  c.model.kv_heads = 2;
  c.model.seq_len = 16;
  c.model.mode = mode;
  c.training.steps = 12;
  c.training.batch = 3;
  c.training.adamw.lr = 3e-3;
  c.training.schedule = Schedule::parse("cosine", c.training.adamw.lr, 3, c.training.steps);
  c.training.sequential = sequential;
  c.training.seed = 7;
  return c;
}

std::vector<float> weights_of(Trainer& t) { return t.parameters().values.to_floats(); }
}  // namespace

TEST_CASE("resume from a checkpoint equals the uninterrupted run, bit for bit") {
  TempDir dir("trainer");
  std::vector<int32_t> ids = synthetic_ids(5000, 97);
  for (ResidualMode mode : {residual_mode("rd_attnres"), residual_mode("paper_block_attnres")}) {
    for (bool sequential : {false, true}) {
      CAPTURE(residual_mode_name(mode));
      CAPTURE(sequential);
      RunConfig cfg = small_config(mode, sequential);
      MicroLMTrainer full(cfg, ids);
      full.run(cfg.training.steps);

      MicroLMTrainer first(cfg, ids);
      first.run(5);
      const std::string ckpt = (dir.path / "ckpt.safetensors").string();
      first.save_checkpoint(ckpt);
      MicroLMTrainer resumed(cfg, ids);  // a fresh process would start exactly like this
      resumed.load_checkpoint(ckpt);
      CHECK(resumed.step() == 5);
      resumed.run(cfg.training.steps);

      REQUIRE(resumed.losses().size() == full.losses().size());
      for (size_t i = 0; i < full.losses().size(); ++i)
        CHECK(resumed.losses()[i] == full.losses()[i]);
      std::vector<float> a = weights_of(full), b = weights_of(resumed);
      REQUIRE(a.size() == b.size());
      CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
      CHECK(resumed.clipped_steps() == full.clipped_steps());
    }
  }
}

TEST_CASE("checkpoints of another configuration or damaged files are refused, naming the problem") {
  TempDir dir("trainer");
  std::vector<int32_t> ids = synthetic_ids(3000, 97);
  RunConfig cfg = small_config(residual_mode("rd_attnres"), false);
  MicroLMTrainer t(cfg, ids);
  t.run(2);
  const std::string ckpt = (dir.path / "a.safetensors").string();
  t.save_checkpoint(ckpt);

  RunConfig other = cfg;
  other.training.batch = 4;
  MicroLMTrainer u(other, ids);
  std::vector<float> before = weights_of(u);
  CHECK_THROWS_WITH(u.load_checkpoint(ckpt), doctest::Contains("'training.batch'"));
  CHECK(weights_of(u) == before);  // nothing half-loaded

  RunConfig wider = cfg;
  wider.model.dim = 64;
  MicroLMTrainer w(wider, ids);
  CHECK_THROWS_WITH(w.load_checkpoint(ckpt), doctest::Contains("'model'"));

  // Truncated file.
  std::string bytes = read_file(ckpt);
  const std::string truncated = (dir.path / "truncated.safetensors").string();
  write_file_atomic(truncated, bytes.substr(0, bytes.size() / 2));
  MicroLMTrainer v(cfg, ids);
  CHECK_THROWS_WITH(v.load_checkpoint(truncated), doctest::Contains("truncated.safetensors"));
  MicroLMTrainer pristine(cfg, ids);
  CHECK(weights_of(v) == weights_of(pristine));

  // Metadata and state the trainer restores are checked before anything changes: a damaged
  // sampler or generator state, or another data stream, is refused with the file's name and the
  // weights are untouched.
  const SafetensorsFile good = load_safetensors(ckpt);
  const auto rewritten = [&](const std::string& name, const std::string& key,
                             const std::string& value) {
    SafetensorsFile f = good;
    f.metadata[key] = value;
    const std::string out = (dir.path / name).string();
    save_safetensors(out, f.tensors, f.metadata);
    return out;
  };
  CHECK_THROWS_WITH(v.load_checkpoint(rewritten(
                        "p.safetensors", "depthgrad.sampler",
                        R"({"kind":"sequential","size":2935,"seed":0,"drop_last":true})")),
                    doctest::Contains("p.safetensors: the checkpoint's data stream"));
  CHECK_THROWS_WITH(v.load_checkpoint(rewritten("s.safetensors", "depthgrad.step", "2x")),
                    doctest::Contains("'depthgrad.step' is '2x'"));
  CHECK_THROWS_WITH(v.load_checkpoint(rewritten("o.safetensors", "depthgrad.optimizer_step", "-3")),
                    doctest::Contains("o.safetensors: metadata 'depthgrad.optimizer_step'"));
  for (const char* blob : {"state.sampler", "state.generator"}) {
    SafetensorsFile bad_rng = good;
    for (TensorEntry& e : bad_rng.tensors)
      if (e.name == blob) e.bytes[20] ^= 1;
    const std::string rng_path = (dir.path / "rng.safetensors").string();
    save_safetensors(rng_path, bad_rng.tensors, bad_rng.metadata);
    CHECK_THROWS_WITH(
        v.load_checkpoint(rng_path),
        doctest::Contains((std::string("rng.safetensors: tensor '") + blob + "'").c_str()));
    CHECK(weights_of(v) == weights_of(pristine));  // nothing half-loaded
  }

  // A weights-only file is not a training checkpoint.
  const std::string weights = (dir.path / "weights.safetensors").string();
  save_weights(weights, t.model());
  CHECK_THROWS_WITH(v.load_checkpoint(weights), doctest::Contains("depthgrad.config"));
  // ...but loads as weights, and a model of another shape refuses it, naming the tensor.
  MicroLM same(cfg.model);
  load_weights(weights, same);
  CHECK(same.parameter("token.weight").to_floats() ==
        t.model().parameter("token.weight").to_floats());
  MicroLMConfig narrow = cfg.model;
  narrow.dim = 16;
  narrow.heads = 2;
  narrow.kv_heads = 1;
  MicroLM different(narrow);
  CHECK_THROWS_WITH(load_weights(weights, different), doctest::Contains("token.weight"));
}

TEST_CASE("training configs round-trip through JSON and bad fields are named") {
  RunConfig cfg = small_config(residual_mode("paper_rd_attnres"), true);
  json::Value v = to_json(cfg);
  RunConfig back = run_config_from_json(v, "cfg.json");
  CHECK(to_json(back) == v);
  json::Value bad = v;
  bad["model"]["mode"] = "sideways";
  CHECK_THROWS_WITH(run_config_from_json(bad, "cfg.json"), doctest::Contains("sideways"));
  json::Value unknown = v;
  unknown["stepz"] = 3;
  CHECK_THROWS_WITH(run_config_from_json(unknown, "cfg.json"), doctest::Contains("stepz"));
  json::Value heads = v;
  heads["model"]["kv_heads"] = 3;
  CHECK_THROWS_WITH(run_config_from_json(heads, "cfg.json"), doctest::Contains("kv_heads"));
  // Found by fuzz_train_config: a model that is not an object gave "JSON value: expected object,
  // got number", without the file.
  json::Value not_object = v;
  not_object["model"] = 3;
  CHECK_THROWS_WITH(run_config_from_json(not_object, "cfg.json"),
                    doctest::Contains("cfg.json: model: expected an object, got number"));
}

TEST_CASE("after the first steps, training takes every tensor buffer from the storage cache") {
  std::vector<int32_t> ids = synthetic_ids(4000, 97);
  for (ResidualMode mode : {residual_mode("rd_attnres"), residual_mode("paper_rd_attnres"),
                            residual_mode("standard")}) {
    CAPTURE(residual_mode_name(mode));
    RunConfig cfg = small_config(mode, false);
    MicroLMTrainer t(cfg, ids);
    t.run(2);  // the first steps size the cache
    const uint64_t before = storage_fresh_allocations();
    t.run(8);
    CHECK(storage_fresh_allocations() == before);
  }
}

TEST_CASE(
    "storage_stats: live bytes and their peak follow tensors; freed buffers go to the cache") {
  const StorageStats before = storage_stats();
  {
    Tensor a = Tensor::empty({1000, 80});  // 320,000 bytes, a multiple of 64
    const StorageStats held = storage_stats();
    CHECK(held.live_bytes == before.live_bytes + 320000);
    CHECK(held.peak_live_bytes >= held.live_bytes);
  }
  const StorageStats after = storage_stats();
  CHECK(after.live_bytes == before.live_bytes);
  CHECK(after.cached_bytes >= 320000);
  storage_reset_peak();
  CHECK(storage_stats().peak_live_bytes == after.live_bytes);
}

TEST_CASE("a training step never holds the [batch·seq, vocab] logits or their gradient") {
  // A large vocabulary and a tiny model: the logits (256 × 50000 floats, 51 MB) would dwarf
  // everything else a step allocates. The fused head keeps one 16 MiB column chunk.
  RunConfig cfg = small_config(residual_mode("rd_attnres"), false);
  cfg.model.vocab = 50000;
  cfg.model.dim = 8;
  cfg.model.heads = 2;
  cfg.model.kv_heads = 2;
  cfg.model.layers = 2;
  cfg.model.seq_len = 64;
  cfg.training.batch = 4;
  cfg.training.steps = 2;
  std::vector<int32_t> ids = synthetic_ids(4000, cfg.model.vocab);
  MicroLMTrainer t(cfg, ids);
  const size_t state = storage_stats().live_bytes;
  storage_reset_peak();
  t.run(2);
  const double logits_bytes = 4.0 * 64 * 4 * 50000;
  CHECK(double(storage_stats().peak_live_bytes - state) < 0.5 * logits_bytes);
}

TEST_CASE(
    "evaluate_windows: the mean over many batches equals the mean of per-window losses, in every "
    "mode") {
  std::vector<int32_t> ids = synthetic_ids(6000, 97);
  for (ResidualMode mode : {residual_mode("standard"), residual_mode("rd_attnres"),
                            residual_mode("paper_block_attnres")}) {
    CAPTURE(residual_mode_name(mode));
    RunConfig cfg = small_config(mode, false);
    MicroLMTrainer t(cfg, ids);
    std::vector<int64_t> starts =
        full_eval_starts(2000, cfg.model.seq_len);  // 124 windows: several batches
    REQUIRE(starts.size() > 64);
    RouteStats routes;
    double batched = evaluate_windows(t.model(), ids, starts, cfg.model.seq_len, &routes, 32);
    double one_by_one = 0;
    for (int64_t s : starts)
      one_by_one += evaluate_windows(t.model(), ids, {s}, cfg.model.seq_len, nullptr, 1);
    one_by_one /= static_cast<double>(starts.size());
    CHECK(batched == doctest::Approx(one_by_one).epsilon(1e-6));
  }
}

// Objects that keep a reference to a constructor argument refuse a temporary, or own it.
static_assert(!std::is_constructible_v<DataLoader, TokenWindows&&, Sampler, int64_t>);
static_assert(!std::is_constructible_v<Decoder, MicroLM&&>);
static_assert(!std::is_constructible_v<MicroBlock, MicroLMConfig&&, int64_t, DType>);
static_assert(std::is_constructible_v<DataLoader, TokenWindows&, Sampler, int64_t>);

TEST_CASE("a Trainer owns token ids given as a temporary, and shares a shared_ptr's") {
  RunConfig cfg = small_config(residual_mode("rd_attnres"), false);
  cfg.training.steps = 3;
  const std::vector<int32_t> ids = synthetic_ids(3000, 97);
  MicroLMTrainer borrowing(cfg, ids);
  borrowing.run(cfg.training.steps);

  std::vector<int32_t> moved = ids;
  MicroLMTrainer owning(cfg, std::move(moved));
  CHECK(moved.empty());               // moved in, not referenced: the caller's vector may go
  moved.assign(ids.size(), 1 << 30);  // would be out-of-range ids if the trainer still read it
  owning.run(cfg.training.steps);
  CHECK(owning.losses() == borrowing.losses());

  auto shared = std::make_shared<const std::vector<int32_t>>(ids);
  MicroLMTrainer sharing(cfg, shared);
  CHECK(shared.use_count() == 2);
  shared.reset();
  sharing.run(cfg.training.steps);
  CHECK(sharing.losses() == borrowing.losses());
  CHECK_THROWS_WITH(MicroLMTrainer(cfg, std::shared_ptr<const std::vector<int32_t>>()),
                    doctest::Contains("null"));
}
