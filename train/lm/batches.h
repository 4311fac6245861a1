// Language-model batches and evaluation windows over a token-id array.
//  - sample_lm_batch: the reference's random windows (tools/attnres/PROTOCOL.md §1.5): starts are
//    numpy default_rng(seed).integers(0, len − T − 1, size=B), with replacement; inputs are
//    ids[s : s+T], targets ids[s+1 : s+T+1].
//  - evaluation windows (§1.6): starts 0, T, 2T, … below min(len − T − 1, T·max_windows).
// It does not tokenize or read files (train/lm/text/bpe.h, train/lm/data/data_files.h do).
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace dg {

struct LmBatch {
  Tensor inputs;   // int64 [B, T] (the int32 ids widened)
  Tensor targets;  // int64 [B, T]
  std::vector<int64_t> starts;
};

// Fills `batch` (allocated on first use, reused after) from random starts drawn from `rng`.
void sample_lm_batch(NumpyGenerator& rng, const std::vector<int32_t>& ids, int64_t batch,
                     int64_t seq_len, LmBatch& out);
// The batch for explicit starts.
void make_lm_batch(const std::vector<int32_t>& ids, const std::vector<int64_t>& starts,
                   int64_t seq_len, LmBatch& out);

// Window starts of the reference evaluation: 0, T, … < min(len − T − 1, T·max_windows).
std::vector<int64_t> reference_eval_starts(int64_t length, int64_t seq_len,
                                           int64_t max_windows = 32);
// Every full non-overlapping window of a split: starts 0, T, … with s + T + 1 <= len.
std::vector<int64_t> full_eval_starts(int64_t length, int64_t seq_len);
// The first max_windows reference windows, or every full window when max_windows is 0.
std::vector<int64_t> eval_window_starts(int64_t length, int64_t seq_len, int64_t max_windows);

}  // namespace dg
