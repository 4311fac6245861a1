// Gradient accumulation and the pieces of data parallelism that need no second process: shard
// bounds on norm-block boundaries, ZeRO-1's sharded AdamW and clip-norm-by-parts giving the
// unsharded bits, --accum against the whole batch at once, and resume with accumulation.
// The multi-rank runs themselves (mpirun) are tests/mpi_train.sh.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tests/temp_dir.h"
#include "train/data_parallel.h"
#include "train/lm/micro_lm_training.h"

using namespace dg;

namespace {
std::vector<int32_t> synthetic_ids(int64_t n, int64_t vocab) {
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * i + 7 * i) % vocab);
  return ids;
}

RunConfig tiny_config(ResidualMode mode) {
  RunConfig c;
  c.model.vocab = 61;
  c.model.dim = 32;
  c.model.layers = 2;
  c.model.heads = 2;
  c.model.kv_heads = 2;
  c.model.seq_len = 16;
  c.model.mode = mode;
  c.training.steps = 8;
  c.training.batch = 2;
  c.training.clip = 0.5;
  c.training.adamw.lr = 3e-3;
  c.training.schedule = Schedule::parse("cosine", c.training.adamw.lr, 2, c.training.steps);
  c.training.seed = 11;
  return c;
}

// Random-ish gradients and parameters of a real model's flat buffers.
void fill(Tensor& t, uint32_t seed) {
  float* x = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
  }
}
}  // namespace

TEST_CASE("shard bounds cover the flat buffer in order, cut only at norm-block boundaries") {
  MicroLM model(tiny_config(residual_mode("rd_attnres")).model);
  FlatParameters flat = flatten_parameters(model);
  const GradientNormBlocks blocks = gradient_norm_blocks(flat);
  for (int ranks : {1, 2, 3, 5, 64}) {
    CAPTURE(ranks);
    std::vector<int64_t> b = shard_bounds(flat, ranks);
    REQUIRE(b.size() == static_cast<size_t>(ranks + 1));
    CHECK(b.front() == 0);
    CHECK(b.back() == flat.total);
    size_t covered = 0;
    for (int r = 0; r < ranks; ++r) {
      CHECK(b[r] <= b[r + 1]);
      const bool at_block =
          b[r] == flat.total ||
          std::find(blocks.begin.begin(), blocks.begin.end(), b[r]) != blocks.begin.end();
      CHECK(at_block);
      auto [first, last] = blocks_within(blocks, b[r], b[r + 1]);
      CHECK(first == covered);  // the ranks' blocks, in rank order, are all blocks in order
      covered = last;
    }
    CHECK(covered == blocks.begin.size());
  }
}

TEST_CASE("ZeRO-1 pieces give the unsharded bits: clip norm by blocks, sharded AdamW") {
  MicroLM model_a(tiny_config(residual_mode("standard")).model),
      model_b(tiny_config(residual_mode("standard")).model);
  FlatParameters a = flatten_parameters(model_a), b = flatten_parameters(model_b);
  fill(a.values, 1), fill(b.values, 1), fill(a.gradients, 2), fill(b.gradients, 2);
  AdamWConfig cfg;
  cfg.weight_decay = 0.1;
  cfg.decay = DecayPolicy::matrices_only;
  AdamW whole(a, cfg);
  const int ranks = 3;
  const std::vector<int64_t> bounds = shard_bounds(b, ranks);
  std::vector<std::unique_ptr<AdamW>> shards;
  for (int r = 0; r < ranks; ++r)
    shards.push_back(std::make_unique<AdamW>(b, cfg, bounds[r], bounds[r + 1]));
  const GradientNormBlocks blocks = gradient_norm_blocks(b);
  for (int step = 0; step < 3; ++step) {
    const ClipResult ca = clip_grad_norm(a, 0.3);
    std::vector<double> sums;  // each rank's block sums, concatenated in rank order
    for (int r = 0; r < ranks; ++r) {
      auto [first, last] = blocks_within(blocks, bounds[r], bounds[r + 1]);
      for (size_t k = first; k < last; ++k)
        sums.push_back(gradient_sum_of_squares(b, blocks.begin[k], blocks.end[k]));
    }
    const double total = total_norm_from_block_sums(b, blocks, sums.data());
    CHECK(total == ca.total_norm);
    CHECK(ca.clipped);
    for (int r = 0; r < ranks; ++r)
      scale_gradients_for_clip(b, total, 0.3, bounds[r], bounds[r + 1]);
    whole.step(1e-2);
    for (auto& s : shards) s->step(1e-2);
    CHECK(std::memcmp(a.values.data<float>(), b.values.data<float>(), a.total * sizeof(float)) ==
          0);
    CHECK(std::memcmp(a.gradients.data<float>(), b.gradients.data<float>(),
                      a.total * sizeof(float)) == 0);
    fill(a.gradients, 10 + step), fill(b.gradients, 10 + step);
  }
  // The shards' moments are the whole optimizer's, piece by piece.
  for (int r = 0; r < ranks; ++r)
    CHECK(std::memcmp(shards[r]->exp_avg_sq().data<float>(),
                      whole.exp_avg_sq().data<float>() + bounds[r],
                      (bounds[r + 1] - bounds[r]) * sizeof(float)) == 0);
}

TEST_CASE("--accum K over batch b: the examples of batch K*b, losses equal to 1e-6 relative") {
  std::vector<int32_t> ids = synthetic_ids(4000, 61);
  for (ResidualMode mode : {residual_mode("standard"), residual_mode("rd_attnres"),
                            residual_mode("paper_block_attnres")}) {
    CAPTURE(residual_mode_name(mode));
    RunConfig whole_cfg = tiny_config(mode);
    whole_cfg.training.batch = 6;
    whole_cfg.training.clip = 0;  // per-micro-batch clipping does not exist; compare without it
    RunConfig accum_cfg = whole_cfg;
    accum_cfg.training.batch = 2;
    accum_cfg.training.accum = 3;
    MicroLMTrainer whole(whole_cfg, ids), accumulated(accum_cfg, ids);
    CHECK(accumulated.global_batch() == 6);
    whole.run(whole_cfg.training.steps);
    accumulated.run(accum_cfg.training.steps);
    for (size_t i = 0; i < whole.losses().size(); ++i) {
      CAPTURE(i);
      CHECK(std::abs(whole.losses()[i] - accumulated.losses()[i]) <=
            1e-6 * std::abs(whole.losses()[i]));
      CHECK(std::abs(whole.grad_norms()[i] - accumulated.grad_norms()[i]) <=
            1e-4 * whole.grad_norms()[i]);
    }
    // Not the same bits (another summation), so the comparison above is not vacuous.
    CHECK(whole.parameters().values.to_floats() != accumulated.parameters().values.to_floats());
  }
}

TEST_CASE("accumulation resumes bit for bit, also with sequential windows") {
  test::TempDir dir("accum");
  std::vector<int32_t> ids = synthetic_ids(4000, 61);
  for (bool sequential : {false, true}) {
    CAPTURE(sequential);
    RunConfig cfg = tiny_config(residual_mode("rd_attnres"));
    cfg.training.accum = 3;
    cfg.training.sequential = sequential;
    MicroLMTrainer full(cfg, ids);
    full.run(cfg.training.steps);
    CHECK(full.clipped_steps() > 0);
    MicroLMTrainer first(cfg, ids);
    first.run(3);
    const std::string path = dir.file("ckpt.safetensors");
    first.save_checkpoint(path);
    // The global batch may be split another way on resume: accum 3 x batch 2 -> accum 6 x batch 1.
    RunConfig other = cfg;
    other.training.accum = 6;
    other.training.batch = 1;
    MicroLMTrainer resumed_other(other, ids);
    resumed_other.load_checkpoint(path);
    MicroLMTrainer resumed(cfg, ids);
    resumed.load_checkpoint(path);
    resumed.run(cfg.training.steps);
    resumed_other.run(cfg.training.steps);
    CHECK(resumed.losses() == full.losses());
    CHECK(resumed.grad_norms() == full.grad_norms());
    CHECK(resumed.parameters().values.to_floats() == full.parameters().values.to_floats());
    CHECK(resumed_other.step() == cfg.training.steps);
    // another global batch is refused, naming it
    RunConfig bigger = cfg;
    bigger.training.batch = 3;
    MicroLMTrainer wrong(bigger, ids);
    CHECK_THROWS_WITH_AS(wrong.load_checkpoint(path), doctest::Contains("global batch 6"),
                         std::runtime_error);
  }
}

TEST_CASE("accum 1 in one process is the plain step (same bits as before accumulation existed)") {
  std::vector<int32_t> ids = synthetic_ids(4000, 61);
  RunConfig cfg = tiny_config(residual_mode("block_attnres"));
  SingleProcess one;
  RunConfig zero = cfg;
  zero.training.zero = 1;
  MicroLMTrainer plain(cfg, ids),
      grouped(zero, ids, &one);  // a group of one and ZeRO-1 change nothing
  plain.run(cfg.training.steps);
  grouped.run(cfg.training.steps);
  CHECK(plain.losses() == grouped.losses());
  CHECK(plain.parameters().values.to_floats() == grouped.parameters().values.to_floats());
  CHECK_THROWS_WITH_AS(([&] {
                         RunConfig bad = cfg;
                         bad.training.accum = 0;
                         MicroLMTrainer t(bad, ids);
                       })(),
                       doctest::Contains("accum must be >= 1"), std::invalid_argument);
}

namespace {
// Two ranks seen from rank 0: rank 1's contributions are given, not exchanged. Only what the
// start-up checks call is implemented.
class TwoRanksFromRankZero final : public Collectives {
 public:
  std::string rank1_text;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void reduce_scatter_in_rank_order(float*, const std::vector<int64_t>&) override {}
  void all_gather(float*, const std::vector<int64_t>&) override {}
  void gather_to_root(const float*, float*, const std::vector<int64_t>&) override {}
  std::vector<double> all_gather(const std::vector<double>& mine) override { return mine; }
  std::vector<std::string> all_gather(const std::string& mine) override {
    return {mine, rank1_text};
  }
  void barrier() override {}
  void all_reduce_sum_any_order(float*, int64_t) override {}
};
}  // namespace

TEST_CASE(
    "start-up checks: other settings are refused naming the setting, other parameters by "
    "checksum") {
  TwoRanksFromRankZero world;
  const std::string settings = R"({"training": {"lr": 0.001, "batch": 2}, "--output": "a"})";
  world.rank1_text = settings;
  CHECK_NOTHROW(check_same_settings(world, settings));
  world.rank1_text = R"({"training": {"lr": 0.002, "batch": 2}, "--output": "a"})";
  CHECK_THROWS_WITH_AS(check_same_settings(world, settings),
                       doctest::Contains("rank 1 was started with setting 'training.lr' = 0.002 "
                                         "but rank 0 with 0.001"),
                       CollectiveError);
  world.rank1_text = R"({"training": {"lr": 0.001, "batch": 2}, "--output": "b"})";
  CHECK_THROWS_WITH_AS(check_same_settings(world, settings), doctest::Contains("'--output'"),
                       CollectiveError);
  world.rank1_text = R"({"training": {"lr": 0.001}, "--output": "a"})";
  CHECK_THROWS_WITH_AS(check_same_settings(world, settings),
                       doctest::Contains("'training.batch' = missing"), CollectiveError);

  MicroLM model(tiny_config(residual_mode("rd_attnres")).model);
  FlatParameters flat = flatten_parameters(model);
  const std::string sum = parameter_checksum(flat);
  CHECK(sum.size() == 16);
  world.rank1_text = sum;
  CHECK(check_same_parameters(world, flat) == sum);
  float& x = flat.values.data<float>()[flat.total / 2];
  x = std::nextafter(x, 2.0f * x + 1.0f);  // one value, one ulp away
  CHECK(parameter_checksum(flat) != sum);
  CHECK_THROWS_WITH_AS(check_same_parameters(world, flat),
                       doctest::Contains("rank 1 starts from other parameters"), CollectiveError);
}
