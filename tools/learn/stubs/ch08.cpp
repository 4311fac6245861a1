// Chapter 8's exercises (train/learn-08-training-loop.md): write each function below, then run
// `make learn CHAPTER=8`. Each has the library's signature; each body is yours to write (the
// stub only says it is not written). Read the chapter's "Exercises" section first.
#include <cstdint>

#include "tools/learn/grade.h"
#include "train/checkpoint.h"
#include "train/optim.h"

namespace dg {

// The total gradient norm from every norm block's sum of squares (torch's order).
double total_norm_from_block_sums(const FlatParameters& params, const GradientNormBlocks& blocks,
                                  const double* block_sums) {
  dg::learn::not_written("total_norm_from_block_sums");
}

// Scales gradient elements [begin, end) as clip_grad_norm does; returns the norm and whether it
// clipped.
ClipResult scale_gradients_for_clip(FlatParameters& params, double total_norm, double max_norm,
                                    int64_t begin, int64_t end) {
  dg::learn::not_written("scale_gradients_for_clip");
}

// What a training checkpoint saves of an optimiser and loads back into it.
OptimizerState optimizer_state(FlatOptimizer& optimizer) {
  dg::learn::not_written("optimizer_state");
}

}  // namespace dg
