// Data parallelism's parts (see data_parallel.h): shard bounds and the start-up checks. The
// Trainer's step, whose bits do not depend on how a step's micro-batches are spread over
// processes, is in train/trainer.cpp.
#include "train/data_parallel.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>

#include "train/io/json.h"

namespace dg {

void SingleProcess::gather_to_root(const float* mine, float* full,
                                   const std::vector<int64_t>& bounds) {
  std::memcpy(full, mine, static_cast<size_t>(bounds[1] - bounds[0]) * sizeof(float));
}

int64_t Collectives::start_send(const float*, int64_t, int, int) {
  throw std::logic_error("this process group has no point-to-point messages");
}
int64_t Collectives::start_receive(float*, int64_t, int, int) {
  throw std::logic_error("this process group has no point-to-point messages");
}
bool Collectives::done(int64_t) {
  throw std::logic_error("this process group has no point-to-point messages");
}

std::vector<int64_t> shard_bounds(const FlatParameters& params, int ranks) {
  const GradientNormBlocks blocks = gradient_norm_blocks(params);
  std::vector<int64_t> bounds(ranks + 1, params.total);
  bounds[0] = 0;
  size_t b = 0;
  for (int r = 1; r < ranks; ++r) {
    // Rank r starts at the first block boundary at or after its even share total·r/ranks.
    const int64_t target = params.total * r / ranks;
    while (b < blocks.begin.size() && blocks.begin[b] < target) ++b;
    bounds[r] = b < blocks.begin.size() ? blocks.begin[b] : params.total;
  }
  return bounds;
}

std::pair<size_t, size_t> blocks_within(const GradientNormBlocks& blocks, int64_t begin,
                                        int64_t end) {
  size_t first = 0;
  while (first < blocks.begin.size() && blocks.begin[first] < begin) ++first;
  size_t last = first;
  while (last < blocks.begin.size() && blocks.end[last] <= end && blocks.begin[last] < end) ++last;
  return {first, last};
}

namespace {
// The first leaf where `a` and `b` differ, as "training.lr" (or "" when equal); `mine` and
// `theirs` get the two values ("missing" for an absent key).
std::string first_difference(const json::Value& a, const json::Value& b, const std::string& path,
                             std::string& mine, std::string& theirs) {
  if (a == b) return "";
  if (a.is_object() && b.is_object()) {
    auto name = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
    for (const auto& [key, value] : a.as_object()) {
      const json::Value* other = b.find(key);
      if (!other) {
        mine = json::dump(value), theirs = "missing";
        return name(key);
      }
      std::string at = first_difference(value, *other, name(key), mine, theirs);
      if (!at.empty()) return at;
    }
    for (const auto& [key, value] : b.as_object())
      if (!a.find(key)) {
        mine = "missing", theirs = json::dump(value);
        return name(key);
      }
  }
  mine = json::dump(a), theirs = json::dump(b);
  return path.empty() ? "(all)" : path;
}
}  // namespace

void check_same_settings(Collectives& world, const std::string& settings_json) {
  const std::vector<std::string> all = world.all_gather(settings_json);
  const json::Value root = json::parse(all[0], "rank 0's settings");
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const json::Value other = json::parse(all[r], fmt::format("rank {}'s settings", r));
    std::string mine, theirs;
    const std::string key = first_difference(root, other, "", mine, theirs);
    if (key.empty()) continue;
    throw CollectiveError(
        fmt::format("rank {} was started with setting '{}' = {} but rank 0 with {}: every rank "
                    "must run the same settings (refused before any work)",
                    r, key, theirs, mine));
  }
}

std::string parameter_checksum(const FlatParameters& params) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(params.values.data<float>());
  const size_t n = static_cast<size_t>(params.total) * sizeof(float);
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

std::string check_same_parameters(Collectives& world, const FlatParameters& params) {
  const std::string mine = parameter_checksum(params);
  const std::vector<std::string> all = world.all_gather(mine);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw CollectiveError(
          fmt::format("rank {} starts from other parameters (checksum {}) than rank 0 ({})", r,
                      all[r], all[0]));
  return all[0];
}

int64_t checkpoint_global_batch(const SafetensorsFile& file, const json::Value& saved,
                                const std::string& path) {
  if (auto it = file.metadata.find("depthgrad.global_batch"); it != file.metadata.end()) {
    const std::string& text = it->second;
    int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < 1)
      throw std::runtime_error(
          fmt::format("{}: metadata 'depthgrad.global_batch' is '{}', expected a positive integer",
                      path, text));
    return value;
  }
  const json::Value* training = saved.is_object() ? saved.find("training") : nullptr;
  const json::Value* batch = training && training->is_object() ? training->find("batch") : nullptr;
  const json::Value* accum = training && training->is_object() ? training->find("accum") : nullptr;
  if (!batch || !batch->is_integer() || (accum && !accum->is_integer()))
    throw std::runtime_error(
        fmt::format("{}: the checkpoint's config has no integer 'training.batch'", path));
  return batch->as_int() * (accum ? accum->as_int() : 1);
}

}  // namespace dg
