// Chapter 7's exercises (train/learn-07-optimisers.md): write each function below, then run
// `make learn CHAPTER=7`. Each has the library's signature; each body is yours to write (the
// stub only says it is not written). Read the chapter's "Exercises" section first.
#include <cstdint>

#include "tools/learn/grade.h"
#include "train/optim.h"

namespace dg {

// torch.optim.SGD's update of n float32 elements (the float64 one below is the same).
void sgd_update(float* p, const float* g, float* momentum_buffer, int64_t n,
                const SGDConfig& config, double lr, double weight_decay, bool first) {
  dg::learn::not_written("sgd_update");
}
void sgd_update(double* p, const double* g, double* momentum_buffer, int64_t n,
                const SGDConfig& config, double lr, double weight_decay, bool first) {
  dg::learn::not_written("sgd_update");
}

// Adam's bias corrections at step `step` (from 1): lr / (1 − β1^step) and √(1 − β2^step).
AdamStepScales adam_step_scales(double lr, double beta1, double beta2, int64_t step) {
  dg::learn::not_written("adam_step_scales");
}

// The learning rate at `step` (from 0): constant, or linear warm-up then cosine decay.
double Schedule::at(int64_t step) const { dg::learn::not_written("Schedule::at"); }

}  // namespace dg
