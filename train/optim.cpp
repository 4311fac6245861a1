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
  throw std::invalid_argument(fmt::format("unknown weight-decay policy '{}' (expected all or matrices)", text));
}

namespace {
bool decays_under(DecayPolicy policy, const FlatParameters::Slot& slot) {
  if (policy == DecayPolicy::all) return true;
  const std::string& n = slot.name;
  bool route = n.find("_route") != std::string::npos || n.find("_query") != std::string::npos;
  return slot.parameter.dim() >= 2 && !route;
}
}  // namespace

AdamW::AdamW(FlatParameters& params, const AdamWConfig& config) : params_(params), config_(config) {
  m_ = Tensor::zeros({params.total}, params.values.dtype());
  v_ = Tensor::zeros({params.total}, params.values.dtype());
  for (const auto& slot : params.slots) slot_decay_.push_back(decays_under(config.decay, slot) ? config.weight_decay : 0.0);
}

// torch 1.13 AdamW (single-tensor path), per element, in the parameter's precision:
//   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
//   p ← p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + eps)
void AdamW::step(double lr) {
  ScopedOpTimer op_timer(OpFamily::optimizer);
  ++step_;
  const double bc1 = 1.0 - std::pow(config_.beta1, static_cast<double>(step_));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(config_.beta2, static_cast<double>(step_)));
  dispatch_float(params_.values.dtype(), "AdamW", [&]<class T>() {
    T* p_all = params_.values.data<T>();
    const T* g_all = params_.gradients.data<T>();
    T* m_all = m_.data<T>();
    T* v_all = v_.data<T>();
    const T beta1 = static_cast<T>(config_.beta1), beta2 = static_cast<T>(config_.beta2);
    const T one_minus_beta1 = static_cast<T>(1.0 - config_.beta1), one_minus_beta2 = static_cast<T>(1.0 - config_.beta2);
    const T step_size = static_cast<T>(lr / bc1), bc2 = static_cast<T>(bc2_sqrt), eps = static_cast<T>(config_.eps);
    for (size_t s = 0; s < params_.slots.size(); ++s) {
      const auto& slot = params_.slots[s];
      const T decay = static_cast<T>(1.0 - lr * slot_decay_[s]);
      T* p = p_all + slot.offset;
      const T* g = g_all + slot.offset;
      T* m = m_all + slot.offset;
      T* v = v_all + slot.offset;
      const int64_t n = slot.numel;
      auto update = [&](int64_t i) {
        p[i] = p[i] * decay;
        m[i] = m[i] * beta1 + one_minus_beta1 * g[i];
        v[i] = v[i] * beta2 + one_minus_beta2 * g[i] * g[i];
        T denom = std::sqrt(v[i]) / bc2 + eps;
        p[i] = p[i] + (-step_size) * (m[i] / denom);
      };
      // Elements are independent, so splitting across threads cannot change any bit. Small slots
      // stay out of OpenMP entirely (even a disabled parallel region costs microseconds).
      if (n > kParallelGrain) {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) update(i);
      } else {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) update(i);
      }
    }
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
    const T wd = static_cast<T>(weight_decay_), mom = static_cast<T>(momentum_), rate = static_cast<T>(lr);
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

ClipResult clip_grad_norm(FlatParameters& params, double max_norm) {
  ScopedOpTimer op_timer(OpFamily::optimizer);
  ClipResult r;
  dispatch_float(params.gradients.dtype(), "clip_grad_norm", [&]<class T>() {
    T* g = params.gradients.data<T>();
    // Per-parameter norms, then the norm of the norms (torch's order), each accumulated in double.
    // A slot is summed in fixed blocks of kClipBlock elements (blocks in parallel, then the block
    // sums in order), so the result does not depend on the thread count; a slot of one block is
    // a plain serial sum.
    constexpr int64_t kClipBlock = 8192;
    thread_local std::vector<double> partial;  // reused across steps: no allocation per step
    double total_sq = 0;
    for (const auto& slot : params.slots) {
      const T* gs = g + slot.offset;
      const int64_t blocks = (slot.numel + kClipBlock - 1) / kClipBlock;
      if (static_cast<int64_t>(partial.size()) < blocks) partial.resize(blocks);
      double* block_sums = partial.data();  // the calling thread's buffer, shared with the team
      auto block_sum = [&](int64_t b) {
        double sq = 0;
        const int64_t end = std::min(slot.numel, (b + 1) * kClipBlock);
        for (int64_t i = b * kClipBlock; i < end; ++i) sq += static_cast<double>(gs[i]) * gs[i];
        block_sums[b] = sq;
      };
      if (blocks > 1) {
#pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < blocks; ++b) block_sum(b);
      } else {
        block_sum(0);
      }
      double sq = 0;
      for (int64_t b = 0; b < blocks; ++b) sq += block_sums[b];
      double norm = static_cast<double>(static_cast<T>(std::sqrt(sq)));
      total_sq += norm * norm;
    }
    r.total_norm = static_cast<double>(static_cast<T>(std::sqrt(total_sq)));
    const double coef = std::min(1.0, max_norm / (r.total_norm + 1e-6));
    r.clipped = r.total_norm > max_norm;
    const T c = static_cast<T>(coef);
    for (const auto& slot : params.slots) {
      T* gs = g + slot.offset;
      if (slot.numel > kParallelGrain) {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < slot.numel; ++i) gs[i] *= c;
      } else {
#pragma omp simd
        for (int64_t i = 0; i < slot.numel; ++i) gs[i] *= c;
      }
    }
  });
  return r;
}

double Schedule::at(int64_t step) const {
  if (kind == Kind::constant) return lr;
  if (step < warmup_steps) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return lr * (min_lr_ratio + (1.0 - min_lr_ratio) * cosine);
}

Schedule Schedule::parse(const std::string& kind, double lr, int64_t warmup, int64_t total) {
  Schedule s;
  s.lr = lr;
  s.warmup_steps = warmup;
  s.total_steps = total;
  if (kind == "constant") s.kind = Kind::constant;
  else if (kind == "cosine" || kind == "warmup_cosine") s.kind = Kind::warmup_cosine;
  else throw std::invalid_argument(fmt::format("unknown schedule '{}' (expected constant or cosine)", kind));
  if (lr <= 0 || !std::isfinite(lr)) throw std::invalid_argument(fmt::format("learning rate must be positive, got {}", lr));
  if (warmup < 0 || total < 1) throw std::invalid_argument("schedule: warmup must be >= 0 and total steps >= 1");
  return s;
}

}  // namespace dg
