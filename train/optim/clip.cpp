// Gradient clipping by global norm (see clip.h): fixed blocks, their sums of squares, the total
// norm from them in torch's order, and the scale.
#include "train/optim/clip.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_set>
#include <vector>

#include "tensor/exercise.h"
#include "tensor/kernels_elementwise.h"
#include "tensor/profile.h"

namespace dg {

// Σ x² over x [n] in double, in a fixed order that vectorises: 8 interleaved partial sums
// (element i goes to sum i mod 8), then added in order. The same bits on every thread.
template <class T>
static double sum_of_squares(const T* x, int64_t n) {
  double part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
#pragma omp simd
    for (int j = 0; j < 8; ++j) part[j] += static_cast<double>(x[i + j]) * x[i + j];
  for (int j = 0; i < n; ++i, ++j) part[j] += static_cast<double>(x[i]) * x[i];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

namespace {
constexpr int64_t kClipBlock = 8192;
// The clip's loops (a sum of squares, a scale) stream at a fraction of a nanosecond per element, so
// they open a parallel region only above 4 · kParallelGrain elements (some 100 µs on one core).
constexpr int64_t kClipParallelMin = 4 * kParallelGrain;

void fill_norm_blocks(const FlatParameters& params, GradientNormBlocks& out) {
  out.begin.clear();
  out.end.clear();
  out.slot_first_block.clear();
  for (const auto& slot : params.slots) {
    out.slot_first_block.push_back(out.begin.size());
    for (int64_t b = slot.offset; b < slot.offset + slot.numel; b += kClipBlock) {
      out.begin.push_back(b);
      out.end.push_back(std::min(slot.offset + slot.numel, b + kClipBlock));
    }
  }
  out.slot_first_block.push_back(out.begin.size());
}
}  // namespace

GradientNormBlocks gradient_norm_blocks(const FlatParameters& params) {
  GradientNormBlocks blocks;
  fill_norm_blocks(params, blocks);
  return blocks;
}

double gradient_sum_of_squares(const FlatParameters& params, int64_t begin, int64_t end) {
  double sum = 0;
  dispatch_float(params.gradients.dtype(), "gradient_sum_of_squares", [&]<class T>() {
    sum = sum_of_squares(params.gradients.data<T>() + begin, end - begin);
  });
  return sum;
}

DG_EXERCISE double total_norm_from_block_sums(const FlatParameters& params,
                                              const GradientNormBlocks& blocks,
                                              const double* block_sums) {
  double total = 0;
  dispatch_float(params.gradients.dtype(), "total_norm_from_block_sums", [&]<class T>() {
    // Per-parameter norms (rounded to the parameter's precision, as torch), then the norm of norms.
    double total_sq = 0;
    for (size_t s = 0; s < params.slots.size(); ++s) {
      double sq = 0;
      for (size_t b = blocks.slot_first_block[s]; b < blocks.slot_first_block[s + 1]; ++b)
        sq += block_sums[b];
      double norm = static_cast<double>(static_cast<T>(std::sqrt(sq)));
      total_sq += norm * norm;
    }
    total = static_cast<double>(static_cast<T>(std::sqrt(total_sq)));
  });
  return total;
}

DG_EXERCISE ClipResult scale_gradients_for_clip(FlatParameters& params, double total_norm,
                                                double max_norm, int64_t begin, int64_t end) {
  ClipResult r;
  r.total_norm = total_norm;
  r.clipped = total_norm > max_norm;
  const double coef = std::min(1.0, max_norm / (total_norm + 1e-6));
  dispatch_float(params.gradients.dtype(), "clip_grad_norm", [&]<class T>() {
    const T c = static_cast<T>(coef);
    if (c == T(1)) return;  // nothing to scale (multiplying by one changes no bit)
    T* g = params.gradients.data<T>();
#pragma omp parallel for simd schedule(static) if (parallel : end - begin > kClipParallelMin)
    for (int64_t i = begin; i < end; ++i) g[i] *= c;
  });
  return r;
}

ClipResult clip_grad_norm(FlatParameters& params, double max_norm) {
  ScopedOpTimer op_timer(OpFamily::optimizer);
  // Every slot is cut into blocks of at most kClipBlock elements; block sums (sum_of_squares) run
  // in one parallel region over all blocks of all slots, then each slot adds its block sums in
  // order. Block boundaries depend only on the slot sizes, so the result does not depend on the
  // thread count (nor on which process computed a block: train/data_parallel.cpp).
  thread_local GradientNormBlocks blocks;  // reused across steps: no allocation per step
  thread_local std::vector<double> block_sums;
  fill_norm_blocks(params, blocks);
  block_sums.resize(blocks.begin.size());
  const int64_t nblocks = static_cast<int64_t>(blocks.begin.size());
  // Plain pointers: inside the parallel region a thread_local name would mean the worker's own.
  const int64_t* lo = blocks.begin.data();
  const int64_t* hi = blocks.end.data();
  double* sums = block_sums.data();
  dispatch_float(params.gradients.dtype(), "clip_grad_norm", [&]<class T>() {
    const T* g = params.gradients.data<T>();
#pragma omp parallel for schedule(static) if (params.total > kClipParallelMin)
    for (int64_t b = 0; b < nblocks; ++b) sums[b] = sum_of_squares(g + lo[b], hi[b] - lo[b]);
  });
  const double total = total_norm_from_block_sums(params, blocks, block_sums.data());
  return scale_gradients_for_clip(params, total, max_norm, 0, params.total);
}

ClipResult clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  ScopedOpTimer op_timer(OpFamily::optimizer);
  if (!(max_norm >= 0) || !std::isfinite(max_norm))
    throw std::invalid_argument(
        fmt::format("clip_grad_norm: max_norm must be finite and >= 0, got {}", max_norm));
  // The flat overload's arithmetic per tensor: blocks of kClipBlock elements, each block's sum of
  // squares, each tensor's norm from its block sums in order rounded to its dtype, then the norm
  // of the norms. Tensors of both float dtypes: the total is rounded to the first one's, as torch.
  std::vector<Tensor> grads;
  std::unordered_set<const TensorImpl*> seen;
  for (const Tensor& p : params) {
    if (!p.defined() || !seen.insert(p.impl()).second || !p.grad().defined()) continue;
    Tensor g = p.grad();
    if (g.dtype() != DType::f32 && g.dtype() != DType::f64)
      throw std::invalid_argument(
          fmt::format("clip_grad_norm: gradient {} is not floating point", g.describe()));
    if (!g.is_contiguous())
      throw std::invalid_argument(fmt::format("clip_grad_norm: gradient {} of {} is not contiguous",
                                              g.describe(), p.describe()));
    grads.push_back(g);
  }
  ClipResult r;
  if (grads.empty()) return r;
  double total_sq = 0;
  for (const Tensor& g : grads)
    dispatch_float(g.dtype(), "clip_grad_norm", [&]<class T>() {
      const T* x = g.data<T>();
      const int64_t n = g.numel(), nblocks = (n + kClipBlock - 1) / kClipBlock;
      std::vector<double> sums(nblocks);
      double* out = sums.data();
#pragma omp parallel for schedule(static) if (n > kClipParallelMin)
      for (int64_t b = 0; b < nblocks; ++b)
        out[b] =
            sum_of_squares(x + b * kClipBlock, std::min(n, (b + 1) * kClipBlock) - b * kClipBlock);
      double sq = 0;
      for (double v : sums) sq += v;
      const double norm = static_cast<double>(static_cast<T>(std::sqrt(sq)));
      total_sq += norm * norm;
    });
  dispatch_float(grads[0].dtype(), "clip_grad_norm", [&]<class T>() {
    r.total_norm = static_cast<double>(static_cast<T>(std::sqrt(total_sq)));
  });
  r.clipped = r.total_norm > max_norm;
  const double coef = std::min(1.0, max_norm / (r.total_norm + 1e-6));
  for (const Tensor& g : grads)
    dispatch_float(g.dtype(), "clip_grad_norm", [&]<class T>() {
      const T c = static_cast<T>(coef);
      if (c == T(1)) return;
      T* x = g.data<T>();
      const int64_t n = g.numel();
#pragma omp parallel for simd schedule(static) if (parallel : n > kClipParallelMin)
      for (int64_t i = 0; i < n; ++i) x[i] *= c;
    });
  return r;
}

}  // namespace dg
