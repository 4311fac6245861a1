// Batches and evaluation windows (see batches.h).
#include "train/lm/batches.h"

#include <fmt/format.h>

#include <algorithm>

namespace dg {

void make_lm_batch(const std::vector<int32_t>& ids, const std::vector<int64_t>& starts,
                   int64_t seq_len, LmBatch& out) {
  const int64_t B = static_cast<int64_t>(starts.size());
  if (!out.inputs.defined() || out.inputs.shape() != Shape{B, seq_len}) {
    out.inputs = Tensor::empty({B, seq_len}, DType::i64);
    out.targets = Tensor::empty({B, seq_len}, DType::i64);
  }
  int64_t* in = out.inputs.data<int64_t>();
  int64_t* tg = out.targets.data<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = starts[b];
    if (s < 0 || s + seq_len + 1 > static_cast<int64_t>(ids.size()))
      throw std::out_of_range(fmt::format("batch window [{}, {}) is outside the {} token ids", s,
                                          s + seq_len + 1, ids.size()));
    std::copy(ids.data() + s, ids.data() + s + seq_len, in + b * seq_len);  // widened to int64
    std::copy(ids.data() + s + 1, ids.data() + s + seq_len + 1, tg + b * seq_len);
  }
  out.starts = starts;
}

void sample_lm_batch(NumpyGenerator& rng, const std::vector<int32_t>& ids, int64_t batch,
                     int64_t seq_len, LmBatch& out) {
  const int64_t high =
      static_cast<int64_t>(ids.size()) - seq_len - 1;  // exclusive, as the reference
  if (high <= 0)
    throw std::invalid_argument(
        fmt::format("sampling windows of {} tokens needs more than {} ids, got {}", seq_len,
                    seq_len + 1, ids.size()));
  std::vector<int64_t> starts(batch);
  rng.integers(0, high, starts.data(), batch);
  make_lm_batch(ids, starts, seq_len, out);
}

std::vector<int64_t> reference_eval_starts(int64_t length, int64_t seq_len, int64_t max_windows) {
  const int64_t maximum = std::min(length - seq_len - 1, seq_len * max_windows);
  std::vector<int64_t> starts;
  for (int64_t s = 0; s < maximum; s += seq_len) starts.push_back(s);
  return starts;
}

std::vector<int64_t> full_eval_starts(int64_t length, int64_t seq_len) {
  std::vector<int64_t> starts;
  for (int64_t s = 0; s + seq_len + 1 <= length; s += seq_len) starts.push_back(s);
  return starts;
}

std::vector<int64_t> eval_window_starts(int64_t length, int64_t seq_len, int64_t max_windows) {
  return max_windows > 0 ? reference_eval_starts(length, seq_len, max_windows)
                         : full_eval_starts(length, seq_len);
}

}  // namespace dg
