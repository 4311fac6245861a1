// AdamW, SGD, clipping and schedules over flat buffers (see optim.h).
#include "train/optim.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "tensor/kernels_elementwise.h"
#include "tensor/profile.h"

namespace dg {

DecayPolicy parse_decay_policy(const std::string& text) {
  if (text == "all") return DecayPolicy::all;
  if (text == "matrices") return DecayPolicy::matrices_only;
  throw std::invalid_argument(
      fmt::format("unknown weight-decay policy '{}' (expected all or matrices)", text));
}
const char* decay_policy_name(DecayPolicy policy) {
  return policy == DecayPolicy::all ? "all" : "matrices";
}

namespace {
bool decays_under(DecayPolicy policy, const FlatParameters::Slot& slot) {
  if (policy == DecayPolicy::all) return true;
  const std::string& n = slot.name;
  bool route = n.find("_route") != std::string::npos || n.find("_query") != std::string::npos;
  return slot.parameter.dim() >= 2 && !route;
}
}  // namespace

AdamW::AdamW(FlatParameters& params, const AdamWConfig& config)
    : AdamW(params, config, 0, params.total) {}

AdamW::AdamW(FlatParameters& params, const AdamWConfig& config, int64_t shard_begin,
             int64_t shard_end)
    : params_(params), config_(config), shard_begin_(shard_begin), shard_end_(shard_end) {
  if (shard_begin < 0 || shard_end < shard_begin || shard_end > params.total)
    throw std::invalid_argument(fmt::format("AdamW: shard [{}, {}) is outside the {} parameters",
                                            shard_begin, shard_end, params.total));
  m_ = Tensor::zeros({shard_end - shard_begin}, params.values.dtype());
  v_ = Tensor::zeros({shard_end - shard_begin}, params.values.dtype());
  for (const auto& slot : params.slots)
    slot_decay_.push_back(decays_under(config.decay, slot) ? config.weight_decay : 0.0);
}

// torch 1.13 AdamW (single-tensor path), per element, in the parameter's precision:
//   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
//   p ← p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + eps)
// p, g, m, v [n] (one slot's span); vectorised, no aliasing between the four buffers.
template <class T>
static void adamw_span(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v,
                       int64_t n, T decay, T beta1, T one_minus_beta1, T beta2, T one_minus_beta2,
                       T step_size, T bc2, T eps) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T pi = p[i] * decay;
    const T mi = m[i] * beta1 + one_minus_beta1 * g[i];
    const T vi = v[i] * beta2 + one_minus_beta2 * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    const T denom = std::sqrt(vi) / bc2 + eps;
    p[i] = pi + (-step_size) * (mi / denom);
  }
}

void AdamW::step(double lr) {
  ScopedOpTimer op_timer(OpFamily::optimizer);
  ++step_;
  const double bc1 = 1.0 - std::pow(config_.beta1, static_cast<double>(step_));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(config_.beta2, static_cast<double>(step_)));
  dispatch_float(params_.values.dtype(), "AdamW", [&]<class T>() {
    T* p = params_.values.data<T>();
    const T* g = params_.gradients.data<T>();
    T* m = m_.data<T>();  // element i of the flat buffer is m[i - shard_begin_]
    T* v = v_.data<T>();
    const int64_t sb = shard_begin_;
    const T beta1 = static_cast<T>(config_.beta1), beta2 = static_cast<T>(config_.beta2);
    const T one_minus_beta1 = static_cast<T>(1.0 - config_.beta1),
            one_minus_beta2 = static_cast<T>(1.0 - config_.beta2);
    const T step_size = static_cast<T>(lr / bc1), bc2 = static_cast<T>(bc2_sqrt),
            eps = static_cast<T>(config_.eps);
    // Elements are independent, so how the flat buffer is cut across threads cannot change a bit:
    // one parallel region over fixed chunks of the whole buffer (a chunk may span slots), and
    // none at all below kParallelGrain elements.
    const std::vector<FlatParameters::Slot>& slots = params_.slots;
    auto update_range = [&](int64_t lo, int64_t hi) {  // elements [lo, hi) of the flat buffer
      for (size_t s = 0; s < slots.size(); ++s) {
        const int64_t a = std::max(lo, slots[s].offset),
                      b = std::min(hi, slots[s].offset + slots[s].numel);
        if (a >= b) continue;
        const T decay = static_cast<T>(1.0 - lr * slot_decay_[s]);
        adamw_span<T>(p + a, g + a, m + (a - sb), v + (a - sb), b - a, decay, beta1,
                      one_minus_beta1, beta2, one_minus_beta2, step_size, bc2, eps);
      }
    };
    const int64_t begin = shard_begin_, end = shard_end_, count = end - begin;
    if (count <= kParallelGrain) return update_range(begin, end);
    const int64_t chunks = (count + kParallelGrain - 1) / kParallelGrain;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c)
      update_range(begin + c * kParallelGrain, std::min(end, begin + (c + 1) * kParallelGrain));
  });
}

SGD::SGD(FlatParameters& params, double momentum, double weight_decay)
    : params_(params), momentum_(momentum), weight_decay_(weight_decay) {
  buf_ = Tensor::zeros({params.total}, params.values.dtype());
}

// torch SGD: d = g + wd·p; buf = momentum·buf + d (buf = d on the first step); p -= lr·buf
void SGD::step(double lr) {
  ScopedOpTimer op_timer(OpFamily::optimizer);
  dispatch_float(params_.values.dtype(), "SGD", [&]<class T>() {
    T* p = params_.values.data<T>();
    const T* g = params_.gradients.data<T>();
    T* b = buf_.data<T>();
    const T wd = static_cast<T>(weight_decay_), mom = static_cast<T>(momentum_),
            rate = static_cast<T>(lr);
    const bool first = first_;
    const int64_t n = params_.total;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      T d = g[i] + wd * p[i];
      if (mom != T(0)) {
        b[i] = first ? d : mom * b[i] + d;
        d = b[i];
      }
      p[i] -= rate * d;
    }
  });
  first_ = false;
}

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

double total_norm_from_block_sums(const FlatParameters& params, const GradientNormBlocks& blocks,
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

ClipResult scale_gradients_for_clip(FlatParameters& params, double total_norm, double max_norm,
                                    int64_t begin, int64_t end) {
  ClipResult r;
  r.total_norm = total_norm;
  r.clipped = total_norm > max_norm;
  const double coef = std::min(1.0, max_norm / (total_norm + 1e-6));
  dispatch_float(params.gradients.dtype(), "clip_grad_norm", [&]<class T>() {
    const T c = static_cast<T>(coef);
    if (c == T(1)) return;  // nothing to scale (multiplying by one changes no bit)
    T* g = params.gradients.data<T>();
#pragma omp parallel for simd schedule(static) if (end - begin > kParallelGrain)
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
#pragma omp parallel for schedule(static) if (params.total > kParallelGrain)
    for (int64_t b = 0; b < nblocks; ++b) sums[b] = sum_of_squares(g + lo[b], hi[b] - lo[b]);
  });
  const double total = total_norm_from_block_sums(params, blocks, block_sums.data());
  return scale_gradients_for_clip(params, total, max_norm, 0, params.total);
}

double Schedule::at(int64_t step) const {
  if (kind == Kind::constant) return lr;
  if (step < warmup_steps)
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  double progress =
      std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return lr * (min_lr_ratio + (1.0 - min_lr_ratio) * cosine);
}

Schedule::Kind parse_schedule_kind(const std::string& text) {
  if (text == "constant") return Schedule::Kind::constant;
  if (text == "cosine" || text == "warmup_cosine") return Schedule::Kind::warmup_cosine;
  throw std::invalid_argument(
      fmt::format("unknown schedule '{}' (expected constant or cosine)", text));
}
const char* schedule_kind_name(Schedule::Kind kind) {
  return kind == Schedule::Kind::constant ? "constant" : "cosine";
}

Schedule Schedule::parse(const std::string& kind, double lr, int64_t warmup, int64_t total) {
  Schedule s;
  s.lr = lr;
  s.warmup_steps = warmup;
  s.total_steps = total;
  s.kind = parse_schedule_kind(kind);
  if (lr <= 0 || !std::isfinite(lr))
    throw std::invalid_argument(fmt::format("learning rate must be positive, got {}", lr));
  if (warmup < 0 || total < 1)
    throw std::invalid_argument("schedule: warmup must be >= 0 and total steps >= 1");
  return s;
}

}  // namespace dg
