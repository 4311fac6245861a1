// AdamW, Adam, SGD, RMSprop, Adagrad, clipping and schedules, over flat buffers and over tensors
// (see optim.h).
#include "train/optim.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tensor/bf16_weights.h"
#include "tensor/exercise.h"
#include "tensor/gemm_kernels.h"  // to_bf16
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

// ---- what every optimiser shares

namespace {
// f(lo, hi) over [0, n): one call up to 4·kParallelGrain elements (a micro model's 140k
// parameters update faster on one thread than with a passive thread woken), else chunks of kChunk
// in one parallel region (small enough that the threads get even shares). For elementwise updates
// only, so the cut cannot change a bit.
template <class F>
void for_chunks(int64_t n, F&& f) {
  if (n <= 4 * kParallelGrain) return f(int64_t{0}, n);
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) f(c * kChunk, std::min(n, (c + 1) * kChunk));
}

void check_rate(double value, const char* who, const char* what) {
  if (!(value >= 0) || !std::isfinite(value))
    throw std::invalid_argument(
        fmt::format("{}: {} must be finite and >= 0, got {}", who, what, value));
}

// Parameter p's gradient, contiguous, or undefined when p has none; throws when it does not match.
Tensor gradient_of(const Tensor& p, const char* who) {
  Tensor g = p.grad();
  if (!g.defined()) return g;
  if (g.shape() != p.shape() || g.dtype() != p.dtype())
    throw std::invalid_argument(fmt::format("{}: the gradient {} does not match its parameter {}",
                                            who, g.describe(), p.describe()));
  return g.contiguous();
}

std::vector<ParamGroup> one_group(std::vector<Tensor> params) {
  return {ParamGroup{std::move(params), std::nullopt, std::nullopt}};
}

std::vector<ParamGroup> flat_group(const FlatParameters& params, double lr, double weight_decay) {
  ParamGroup group{{}, lr, weight_decay};
  for (const auto& slot : params.slots) group.params.push_back(slot.parameter);
  return {group};
}
}  // namespace

void Optimizer::set_groups(std::vector<ParamGroup> groups, double lr, double weight_decay,
                           const char* who) {
  // torch: "optimizer got an empty parameter list" for an empty list; a list of groups that are
  // all empty torch accepts (an optimiser that never changes anything), here it is refused too.
  // One empty group beside others is accepted, as torch does (a split with nothing to decay).
  const bool none = std::all_of(groups.begin(), groups.end(),
                                [](const ParamGroup& g) { return g.params.empty(); });
  if (none)
    throw std::invalid_argument(fmt::format(
        "{}: optimizer got an empty parameter list ({}; was the model's parameters() taken "
        "before its layers were registered, or a layer kept as a plain member instead of through "
        "register_module?)",
        who,
        groups.empty() ? std::string("no tensors and no groups")
                       : fmt::format("{} parameter group(s), every one empty", groups.size())));
  std::unordered_set<const TensorImpl*> seen;
  for (size_t i = 0; i < groups.size(); ++i) {
    ParamGroup& group = groups[i];
    if (!group.lr) group.lr = lr;
    if (!group.weight_decay) group.weight_decay = weight_decay;
    check_rate(*group.lr, who, "lr");
    check_rate(*group.weight_decay, who, "weight_decay");
    for (size_t j = 0; j < group.params.size(); ++j) {
      const Tensor& p = group.params[j];
      if (!p.defined())
        throw std::invalid_argument(
            fmt::format("{}: parameter {} of group {} is an undefined tensor", who, j, i));
      if (p.dtype() != DType::f32 && p.dtype() != DType::f64)
        throw std::invalid_argument(
            fmt::format("{}: parameter {} is not float32 or float64", who, p.describe()));
      if (!p.is_contiguous())
        throw std::invalid_argument(
            fmt::format("{}: parameter {} is not contiguous", who, p.describe()));
      // torch: "can't optimize a non-leaf Tensor". A tensor that does not require grad torch
      // accepts and skips at every step; here it is refused, since it is almost always a mistake.
      if (!p.is_leaf())
        throw std::invalid_argument(fmt::format(
            "{}: parameter {} of group {}, {}, is not a leaf (it is the result of a recorded op, "
            "so a step would change a temporary, not the model); pass the leaf tensors you "
            "created, or detach(t) as a new parameter",
            who, j, i, p.describe()));
      if (!p.requires_grad())
        throw std::invalid_argument(fmt::format(
            "{}: parameter {} of group {}, {}, does not require grad, so no gradient would ever "
            "reach it; set_requires_grad(true) on it or leave it out",
            who, j, i, p.describe()));
      if (!seen.insert(p.impl()).second)
        throw std::invalid_argument(
            fmt::format("{}: parameter {} appears in more than one place", who, p.describe()));
    }
  }
  groups_ = std::move(groups);
}

std::vector<ParamGroup> weight_decay_groups(const Module& module, double weight_decay) {
  std::vector<ParamGroup> groups{ParamGroup{{}, std::nullopt, weight_decay},
                                 ParamGroup{{}, std::nullopt, 0.0}};
  for (const auto& [name, p] : module.named_parameters())
    groups[p.dim() >= 2 ? 0 : 1].params.push_back(p);
  return groups;
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> all;
  for (const ParamGroup& group : groups_)
    all.insert(all.end(), group.params.begin(), group.params.end());
  return all;
}

void Optimizer::zero_grad() {
  for (ParamGroup& group : groups_)
    for (Tensor& p : group.params) p.zero_grad();
}

double Optimizer::lr(size_t group) const {
  if (group >= groups_.size())
    throw std::out_of_range(
        fmt::format("optimizer: group {} asked for, it has {}", group, groups_.size()));
  return *groups_[group].lr;
}

void Optimizer::set_lr(double lr) {
  for (size_t g = 0; g < groups_.size(); ++g) set_lr(g, lr);
}

void Optimizer::set_lr(size_t group, double lr) {
  if (group >= groups_.size())
    throw std::out_of_range(
        fmt::format("optimizer: group {} asked for, it has {}", group, groups_.size()));
  check_rate(lr, "optimizer", "lr");
  groups_[group].lr = lr;
}

// ---- what the Trainer drives

FlatOptimizer::FlatOptimizer(FlatParameters& params, double lr, double weight_decay,
                             const char* who)
    : params_(&params), shard_begin_(0), shard_end_(params.total) {
  if (params.slots.empty())
    throw std::invalid_argument(fmt::format(
        "{}: optimizer got an empty parameter list (the module passed has no parameters: register "
        "each layer with register_module and each tensor with register_parameter before the "
        "optimiser is made)",
        who));
  check_rate(lr, who, "lr");
  check_rate(weight_decay, who, "weight_decay");
  groups_ = flat_group(params, lr, weight_decay);
}

void FlatOptimizer::shard(int64_t begin, int64_t end) {
  if (!params_)
    throw std::invalid_argument(fmt::format(
        "{}: only an optimiser over a module's flat buffers can be sharded (this one is over "
        "tensors)",
        name()));
  if (!shardable())
    throw std::invalid_argument(
        fmt::format("{}: this optimiser's state cannot be sharded over ranks", name()));
  if (begin < 0 || end < begin || end > params_->total)
    throw std::invalid_argument(fmt::format("{}: shard [{}, {}) is outside the {} parameters",
                                            name(), begin, end, params_->total));
  shard_begin_ = begin;
  shard_end_ = end;
  reset_state();
}

void FlatOptimizer::use_flat_buffer(FlatParameters& params) {
  if (params_)
    throw std::invalid_argument(
        fmt::format("{}: use_flat_buffer: the optimiser is already over a flat buffer", name()));
  if (tensor_steps_ > 0)
    throw std::invalid_argument(fmt::format(
        "{}: use_flat_buffer: the optimiser has taken {} step(s) over its tensors; its state "
        "cannot move to the flat buffer (give the trainer a fresh optimiser)",
        name(), tensor_steps_));
  std::unordered_map<const TensorImpl*, size_t> slot_of;
  for (size_t s = 0; s < params.slots.size(); ++s) slot_of[params.slots[s].parameter.impl()] = s;
  std::vector<size_t> groups(params.slots.size(), SIZE_MAX);
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t j = 0; j < groups_[g].params.size(); ++j) {
      auto it = slot_of.find(groups_[g].params[j].impl());
      if (it == slot_of.end())
        throw std::invalid_argument(fmt::format(
            "{}: parameter {} of group {}, {}, is not a parameter of the model being trained "
            "(make the groups from that model's named_parameters())",
            name(), j, g, groups_[g].params[j].describe()));
      groups[it->second] = g;
    }
  params_ = &params;
  shard_begin_ = 0;
  shard_end_ = params.total;
  slot_group_ = std::move(groups);
  reset_state();
}

std::vector<FlatOptimizer::SlotRate> FlatOptimizer::slot_rates(
    const std::vector<bool>* decays) const {
  std::vector<SlotRate> rates(params_->slots.size());
  for (size_t s = 0; s < rates.size(); ++s) {
    if (slot_group_.empty()) {
      const ParamGroup& g = groups_[0];
      rates[s] = {*g.lr, !decays || (*decays)[s] ? *g.weight_decay : 0.0, true};
    } else if (slot_group_[s] == SIZE_MAX) {
      rates[s].active = false;
    } else {
      const ParamGroup& g = groups_[slot_group_[s]];
      rates[s] = {*g.lr, *g.weight_decay, true};
    }
  }
  return rates;
}

void FlatOptimizer::for_each_run(
    const std::function<void(int64_t, int64_t, const SlotRate&)>& fn) const {
  if (slot_group_.empty()) {
    if (shard_end_ > shard_begin_)
      fn(shard_begin_, shard_end_, SlotRate{*groups_[0].lr, *groups_[0].weight_decay, true});
    return;
  }
  const std::vector<SlotRate> rates = slot_rates(nullptr);
  for (size_t s = 0; s < rates.size(); ++s) {
    const FlatParameters::Slot& slot = params_->slots[s];
    const int64_t a = std::max(shard_begin_, slot.offset),
                  b = std::min(shard_end_, slot.offset + slot.numel);
    if (rates[s].active && a < b) fn(a, b, rates[s]);
  }
}

void FlatOptimizer::zero_grad() {
  if (params_)
    params_->zero_grad();
  else
    Optimizer::zero_grad();
}

namespace {
// A scalar of `scalars` by name, or a throw naming the optimiser and the scalar.
int64_t scalar_named(const std::map<std::string, int64_t>& scalars, const char* key,
                     const std::string& who) {
  auto it = scalars.find(key);
  if (it == scalars.end())
    throw std::invalid_argument(fmt::format("{}: scalar state '{}' is missing", who, key));
  if (it->second < 0)
    throw std::invalid_argument(
        fmt::format("{}: scalar state '{}' must be >= 0, got {}", who, key, it->second));
  return it->second;
}
}  // namespace

// ---- AdamW and Adam

// torch 1.13 AdamW (single-tensor path), per element, in the parameter's precision:
//   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
//   p ← p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + eps)
// kL2 (torch Adam): g ← g + wd·p first, and decay = 1.
// p, g, m, v [n] (one slot's span); vectorised, no aliasing between the four buffers.
template <class T, bool kL2 = false>
static void adamw_span(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v,
                       int64_t n, T decay, T beta1, T one_minus_beta1, T beta2, T one_minus_beta2,
                       T step_size, T bc2, T eps, T l2 = T(0)) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    T gi = g[i];
    if constexpr (kL2) gi = gi + l2 * p[i];
    const T pi = p[i] * decay;
    const T mi = m[i] * beta1 + one_minus_beta1 * gi;
    const T vi = v[i] * beta2 + one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const T denom = std::sqrt(vi) / bc2 + eps;
    p[i] = pi + (-step_size) * (mi / denom);
  }
}

DG_EXERCISE AdamStepScales adam_step_scales(double lr, double beta1, double beta2, int64_t step) {
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step)));
  return AdamStepScales{lr / bc1, bc2_sqrt};
}

namespace detail {

void AdamMoments::reset(int64_t n, DType dtype) {
  m = v = Tensor();
  n_ = n;
  dtype_ = dtype;
  deferred_ = true;
  steps = 0;
}

void AdamMoments::made() {
  if (!deferred_) return;
  deferred_ = false;
  m = Tensor::zeros({n_}, dtype_);
  v = Tensor::zeros({n_}, dtype_);
}

namespace {
// One span of Adam: decoupled decay (AdamW), L2 added to the gradient (Adam with wd > 0), or
// neither.
template <class T>
void adam_span(T* p, const T* g, T* m, T* v, int64_t n, double lr, double wd, bool decoupled,
               T beta1, T one_minus_beta1, T beta2, T one_minus_beta2, T step_size, T bc2, T eps) {
  if (decoupled)
    adamw_span<T>(p, g, m, v, n, static_cast<T>(1.0 - lr * wd), beta1, one_minus_beta1, beta2,
                  one_minus_beta2, step_size, bc2, eps);
  else if (wd != 0)
    adamw_span<T, true>(p, g, m, v, n, T(1), beta1, one_minus_beta1, beta2, one_minus_beta2,
                        step_size, bc2, eps, static_cast<T>(wd));
  else
    adamw_span<T>(p, g, m, v, n, T(1), beta1, one_minus_beta1, beta2, one_minus_beta2, step_size,
                  bc2, eps);
}
}  // namespace

void AdamMoments::step_flat(FlatParameters& params, int64_t begin, int64_t end,
                            const std::vector<FlatOptimizer::SlotRate>& rates, const Betas& c,
                            bool decoupled) {
  made();
  ++steps;
  std::vector<AdamStepScales> scales(rates.size());
  for (size_t s = 0; s < rates.size(); ++s)
    scales[s] = adam_step_scales(rates[s].lr, c.beta1, c.beta2, steps);
  dispatch_float(params.values.dtype(), decoupled ? "AdamW" : "Adam", [&]<class T>() {
    T* p = params.values.mutable_data<T>();  // a backward that saved a parameter now refuses
    const T* g = params.gradients.data<T>();
    T* mp = m.data<T>();  // element i of the flat buffer is m[i - begin]
    T* vp = v.data<T>();
    const T beta1 = static_cast<T>(c.beta1), beta2 = static_cast<T>(c.beta2);
    const T one_minus_beta1 = static_cast<T>(1.0 - c.beta1),
            one_minus_beta2 = static_cast<T>(1.0 - c.beta2);
    const T eps = static_cast<T>(c.eps);
    // Elements are independent, so how the flat buffer is cut across threads cannot change a bit:
    // one parallel region over fixed chunks of the whole buffer (a chunk may span slots), and
    // none at all below kParallelGrain elements.
    // A bf16 copy of the weights (tensor/bf16_weights.h) is written in the same pass, chunk by
    // chunk while the chunk is in cache, when this step rewrites the whole buffer (not a ZeRO
    // shard: the all-gather that follows makes the copy stale and the next GEMM rounds it).
    uint16_t* copy = nullptr;
    if constexpr (std::is_same_v<T, float>)
      if (begin == 0 && end == params.values.numel()) copy = bf16_copy_to_write(params.values);
    const std::vector<FlatParameters::Slot>& slots = params.slots;
    for_chunks(end - begin, [&](int64_t lo, int64_t hi) {
      lo += begin, hi += begin;  // elements [lo, hi) of the flat buffer
      for (size_t s = 0; s < slots.size(); ++s) {
        const int64_t a = std::max(lo, slots[s].offset),
                      b = std::min(hi, slots[s].offset + slots[s].numel);
        if (a >= b || !rates[s].active) continue;
        adam_span<T>(p + a, g + a, mp + (a - begin), vp + (a - begin), b - a, rates[s].lr,
                     rates[s].weight_decay, decoupled, beta1, one_minus_beta1, beta2,
                     one_minus_beta2, static_cast<T>(scales[s].step_size),
                     static_cast<T>(scales[s].bc2_sqrt), eps);
      }
      if constexpr (std::is_same_v<T, float>)
        if (copy) to_bf16(p + lo, hi - lo, copy + lo);  // padding between slots too
    });
    if (copy) bf16_copy_written(params.values);
  });
}

// Each tensor as one slot of the flat path (the same constants, the same kernel), with its own
// step count: the same bits as the flat path on the same parameters.
void AdamMoments::step_tensors(const std::vector<ParamGroup>& groups, const Betas& c,
                               bool decoupled, const char* who) {
  ++steps;
  size_t k = 0;
  for (const ParamGroup& group : groups) {
    const double lr = *group.lr, wd = *group.weight_decay;
    for (const Tensor& param : group.params) {
      TensorState& state = tensor_state_[k++];
      Tensor grad = gradient_of(param, who);
      if (!grad.defined()) continue;
      if (!state.m.defined()) {
        state.m = Tensor::zeros(param.shape(), param.dtype());
        state.v = Tensor::zeros(param.shape(), param.dtype());
      }
      ++state.steps;
      const AdamStepScales scales = adam_step_scales(lr, c.beta1, c.beta2, state.steps);
      dispatch_float(param.dtype(), who, [&]<class T>() {
        T* p = param.mutable_data<T>();
        const T* g = grad.data<T>();
        T* mp = state.m.data<T>();
        T* vp = state.v.data<T>();
        const T beta1 = static_cast<T>(c.beta1), beta2 = static_cast<T>(c.beta2);
        const T one_minus_beta1 = static_cast<T>(1.0 - c.beta1),
                one_minus_beta2 = static_cast<T>(1.0 - c.beta2);
        const T step_size = static_cast<T>(scales.step_size), bc2 = static_cast<T>(scales.bc2_sqrt),
                eps = static_cast<T>(c.eps);
        for_chunks(param.numel(), [&](int64_t lo, int64_t hi) {
          adam_span<T>(p + lo, g + lo, mp + lo, vp + lo, hi - lo, lr, wd, decoupled, beta1,
                       one_minus_beta1, beta2, one_minus_beta2, step_size, bc2, eps);
        });
      });
    }
  }
}

}  // namespace detail

AdamW::AdamW(FlatParameters& params, const AdamWConfig& config)
    : FlatOptimizer(params, config.lr, config.weight_decay, "AdamW"), config_(config) {
  for (const auto& slot : params.slots) slot_decays_.push_back(decays_under(config.decay, slot));
  reset_state();
}

AdamW::AdamW(FlatParameters& params, const AdamWConfig& config, int64_t shard_begin,
             int64_t shard_end)
    : AdamW(params, config) {
  shard(shard_begin, shard_end);
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWConfig& config)
    : AdamW(one_group(std::move(params)), config) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWConfig& config) : config_(config) {
  set_groups(std::move(groups), config.lr, config.weight_decay, "AdamW");
  adam_.resize_tensors(parameters().size());
}

void AdamW::reset_state() {
  if (params_) adam_.reset(shard_end_ - shard_begin_, params_->values.dtype());
}

void AdamW::step() {
  ScopedOpTimer op_timer(OpFamily::optimizer);
  const detail::AdamMoments::Betas betas{config_.beta1, config_.beta2, config_.eps};
  if (!params_) {
    ++tensor_steps_;
    return adam_.step_tensors(groups_, betas, true, "AdamW");
  }
  adam_.step_flat(*params_, shard_begin_, shard_end_, slot_rates(&slot_decays_), betas, true);
}

std::vector<NamedTensor> AdamW::element_state() {
  adam_.made();
  return {{"exp_avg", adam_.m}, {"exp_avg_sq", adam_.v}};
}
std::map<std::string, int64_t> AdamW::scalar_state() const { return {{"step", adam_.steps}}; }
void AdamW::set_scalar_state(const std::map<std::string, int64_t>& scalars) {
  adam_.steps = scalar_named(scalars, "step", name());
}

Adam::Adam(FlatParameters& params, const AdamConfig& config)
    : FlatOptimizer(params, config.lr, config.weight_decay, "Adam"), config_(config) {
  slot_decays_.assign(params.slots.size(), true);
  reset_state();
}

Adam::Adam(std::vector<Tensor> params, const AdamConfig& config)
    : Adam(one_group(std::move(params)), config) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamConfig& config) : config_(config) {
  set_groups(std::move(groups), config.lr, config.weight_decay, "Adam");
  adam_.resize_tensors(parameters().size());
}

void Adam::reset_state() {
  if (params_) adam_.reset(shard_end_ - shard_begin_, params_->values.dtype());
}

void Adam::step() {
  ScopedOpTimer op_timer(OpFamily::optimizer);
  const detail::AdamMoments::Betas betas{config_.beta1, config_.beta2, config_.eps};
  if (!params_) {
    ++tensor_steps_;
    return adam_.step_tensors(groups_, betas, false, "Adam");
  }
  adam_.step_flat(*params_, shard_begin_, shard_end_, slot_rates(&slot_decays_), betas, false);
}

std::vector<NamedTensor> Adam::element_state() {
  adam_.made();
  return {{"exp_avg", adam_.m}, {"exp_avg_sq", adam_.v}};
}
std::map<std::string, int64_t> Adam::scalar_state() const { return {{"step", adam_.steps}}; }
void Adam::set_scalar_state(const std::map<std::string, int64_t>& scalars) {
  adam_.steps = scalar_named(scalars, "step", name());
}

// ---- SGD

namespace {
void check_sgd(const SGDConfig& c) {
  check_rate(c.lr, "SGD", "lr");
  check_rate(c.momentum, "SGD", "momentum");
  check_rate(c.weight_decay, "SGD", "weight_decay");
  if (!std::isfinite(c.dampening))
    throw std::invalid_argument(fmt::format("SGD: dampening must be finite, got {}", c.dampening));
  if (c.nesterov && (c.momentum <= 0 || c.dampening != 0))
    throw std::invalid_argument(
        fmt::format("SGD: Nesterov momentum needs momentum > 0 and dampening 0, got momentum {} "
                    "and dampening {}",
                    c.momentum, c.dampening));
}

// torch SGD on one span: d = g + wd·p; buf = d (first) or momentum·buf + (1 − dampening)·d;
// d = d + momentum·buf (Nesterov) or buf; p −= lr·d. p, g, b [n].
template <class T>
void sgd_span(T* __restrict p, const T* __restrict g, T* __restrict b, int64_t n,
              const SGDConfig& c, double lr, double weight_decay, bool first) {
  const T wd = static_cast<T>(weight_decay), mom = static_cast<T>(c.momentum),
          damp = static_cast<T>(1.0 - c.dampening), rate = static_cast<T>(lr);
  const bool nesterov = c.nesterov, plain_damp = c.dampening == 0;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    T d = g[i] + wd * p[i];
    if (mom != T(0)) {
      b[i] = first ? d : mom * b[i] + (plain_damp ? d : damp * d);
      d = nesterov ? d + mom * b[i] : b[i];
    }
    p[i] -= rate * d;
  }
}
}  // namespace

DG_EXERCISE void sgd_update(float* p, const float* g, float* momentum_buffer, int64_t n,
                            const SGDConfig& config, double lr, double weight_decay, bool first) {
  sgd_span<float>(p, g, momentum_buffer, n, config, lr, weight_decay, first);
}
DG_EXERCISE void sgd_update(double* p, const double* g, double* momentum_buffer, int64_t n,
                            const SGDConfig& config, double lr, double weight_decay, bool first) {
  sgd_span<double>(p, g, momentum_buffer, n, config, lr, weight_decay, first);
}

SGD::SGD(FlatParameters& params, const SGDConfig& config)
    : FlatOptimizer((check_sgd(config), params), config.lr, config.weight_decay, "SGD"),
      config_(config) {
  reset_state();
}

SGD::SGD(std::vector<Tensor> params, const SGDConfig& config)
    : SGD(one_group(std::move(params)), config) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDConfig& config) : config_(config) {
  check_sgd(config);
  set_groups(std::move(groups), config.lr, config.weight_decay, "SGD");
  buffers_.resize(parameters().size());
}

void SGD::reset_state() {
  if (params_)
    buf_ = config_.momentum != 0
               ? Tensor::zeros({shard_end_ - shard_begin_}, params_->values.dtype())
               : Tensor();
  steps_ = 0;
}

std::vector<NamedTensor> SGD::element_state() {
  if (!buf_.defined()) return {};
  return {{"momentum_buffer", buf_}};
}
std::map<std::string, int64_t> SGD::scalar_state() const { return {{"step", steps_}}; }
void SGD::set_scalar_state(const std::map<std::string, int64_t>& scalars) {
  steps_ = scalar_named(scalars, "step", name());
}

void SGD::step() {
  ScopedOpTimer op_timer(OpFamily::optimizer);
  if (params_) {
    dispatch_float(params_->values.dtype(), "SGD", [&]<class T>() {
      const int64_t sb = shard_begin_;
      T* b = buf_.defined() ? buf_.data<T>() : nullptr;
      T* p = params_->values.mutable_data<T>();
      const T* g = params_->gradients.data<T>();
      for_each_run([&](int64_t lo, int64_t hi, const SlotRate& r) {
        sgd_update(p + lo, g + lo, b ? b + (lo - sb) : nullptr, hi - lo, config_, r.lr,
                   r.weight_decay, steps_ == 0);
      });
    });
    ++steps_;
    return;
  }
  ++tensor_steps_;
  size_t k = 0;
  for (const ParamGroup& group : groups_)
    for (const Tensor& param : group.params) {
      Tensor& buf = buffers_[k++];
      Tensor grad = gradient_of(param, "SGD");
      if (!grad.defined()) continue;
      const bool first = !buf.defined();
      if (first && config_.momentum != 0) buf = Tensor::zeros(param.shape(), param.dtype());
      dispatch_float(param.dtype(), "SGD", [&]<class T>() {
        T* b = config_.momentum != 0 ? buf.data<T>() : nullptr;
        T* p = param.mutable_data<T>();  // once, before the threads: the version counts writes
        for_chunks(param.numel(), [&](int64_t lo, int64_t hi) {
          sgd_update(p + lo, grad.data<T>() + lo, b ? b + lo : nullptr, hi - lo, config_, *group.lr,
                     *group.weight_decay, first);
        });
      });
    }
}

// ---- RMSprop and Adagrad

namespace {
void check_rmsprop(const RMSpropConfig& c) {
  check_rate(c.lr, "RMSprop", "lr");
  check_rate(c.eps, "RMSprop", "eps");
  check_rate(c.weight_decay, "RMSprop", "weight_decay");
  check_rate(c.momentum, "RMSprop", "momentum");
  if (!(c.alpha >= 0 && c.alpha <= 1))
    throw std::invalid_argument(fmt::format("RMSprop: alpha must be in [0, 1], got {}", c.alpha));
}

// torch 1.13 RMSprop (single-tensor path) on one span, in torch's order of operations:
//   g ← g + wd·p;  v ← v·α + (1 − α)·g·g
//   centered: ḡ ← ḡ·α + (1 − α)·g;  d = √(v − ḡ·ḡ) + eps;  otherwise d = √v + eps
//   momentum: b ← b·μ + g/d;  p ← p − lr·b;  otherwise p ← p − lr·(g/d)
// p, g, v [n]; a (centered) and b (momentum) [n] or null.
template <class T>
void rmsprop_span(T* __restrict p, const T* __restrict g, T* __restrict v, T* __restrict a,
                  T* __restrict b, int64_t n, const RMSpropConfig& c, double lr,
                  double weight_decay) {
  const T wd = static_cast<T>(weight_decay), alpha = static_cast<T>(c.alpha),
          one_minus_alpha = static_cast<T>(1.0 - c.alpha), eps = static_cast<T>(c.eps),
          mom = static_cast<T>(c.momentum), rate = static_cast<T>(lr);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T gi = wd != T(0) ? g[i] + wd * p[i] : g[i];
    v[i] = v[i] * alpha + one_minus_alpha * gi * gi;
    T d;
    if (a) {
      a[i] = a[i] * alpha + one_minus_alpha * gi;
      d = std::sqrt(v[i] - a[i] * a[i]) + eps;
    } else {
      d = std::sqrt(v[i]) + eps;
    }
    if (b) {
      b[i] = b[i] * mom + gi / d;
      p[i] = p[i] + (-rate) * b[i];
    } else {
      p[i] = p[i] + (-rate) * (gi / d);
    }
  }
}
}  // namespace

RMSprop::RMSprop(FlatParameters& params, const RMSpropConfig& config)
    : FlatOptimizer((check_rmsprop(config), params), config.lr, config.weight_decay, "RMSprop"),
      config_(config) {
  reset_state();
}

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropConfig& config)
    : RMSprop(one_group(std::move(params)), config) {}

RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropConfig& config) : config_(config) {
  check_rmsprop(config);
  set_groups(std::move(groups), config.lr, config.weight_decay, "RMSprop");
  tensor_state_.resize(parameters().size());
}

RMSprop::State RMSprop::fresh_state(const Shape& shape, DType dtype) const {
  State s;
  s.square_avg = Tensor::zeros(shape, dtype);
  if (config_.momentum > 0) s.momentum_buffer = Tensor::zeros(shape, dtype);
  if (config_.centered) s.grad_avg = Tensor::zeros(shape, dtype);
  return s;
}

void RMSprop::reset_state() {
  if (params_) flat_ = fresh_state({shard_end_ - shard_begin_}, params_->values.dtype());
}

std::vector<NamedTensor> RMSprop::element_state() {
  std::vector<NamedTensor> state{{"square_avg", flat_.square_avg}};
  if (flat_.momentum_buffer.defined()) state.emplace_back("momentum_buffer", flat_.momentum_buffer);
  if (flat_.grad_avg.defined()) state.emplace_back("grad_avg", flat_.grad_avg);
  return state;
}

void RMSprop::set_scalar_state(const std::map<std::string, int64_t>& scalars) {
  flat_.steps = scalar_named(scalars, "step", name());
}

void RMSprop::update(State& state, const Tensor& values, const Tensor& gradients, int64_t offset,
                     double lr, double weight_decay) const {
  dispatch_float(values.dtype(), "RMSprop", [&]<class T>() {
    T* p =
        values.mutable_data<T>() + offset;  // once, before the threads: the version counts writes
    const T* g = gradients.data<T>() + offset;
    T* v = state.square_avg.data<T>();
    T* a = state.grad_avg.defined() ? state.grad_avg.data<T>() : nullptr;
    T* b = state.momentum_buffer.defined() ? state.momentum_buffer.data<T>() : nullptr;
    for_chunks(state.square_avg.numel(), [&](int64_t lo, int64_t hi) {
      rmsprop_span<T>(p + lo, g + lo, v + lo, a ? a + lo : nullptr, b ? b + lo : nullptr, hi - lo,
                      config_, lr, weight_decay);
    });
  });
}

void RMSprop::update_range(State& state, const Tensor& values, const Tensor& gradients,
                           int64_t origin, int64_t begin, int64_t end, double lr,
                           double weight_decay) const {
  dispatch_float(values.dtype(), "RMSprop", [&]<class T>() {
    T* p = values.mutable_data<T>() + begin;  // once, before the threads: the version counts writes
    const T* g = gradients.data<T>() + begin;
    const int64_t at = begin - origin;  // state element of `begin`
    T* v = state.square_avg.data<T>() + at;
    T* a = state.grad_avg.defined() ? state.grad_avg.data<T>() + at : nullptr;
    T* b = state.momentum_buffer.defined() ? state.momentum_buffer.data<T>() + at : nullptr;
    for_chunks(end - begin, [&](int64_t lo, int64_t hi) {
      rmsprop_span<T>(p + lo, g + lo, v + lo, a ? a + lo : nullptr, b ? b + lo : nullptr, hi - lo,
                      config_, lr, weight_decay);
    });
  });
}

void RMSprop::step() {
  ScopedOpTimer op_timer(OpFamily::optimizer);
  if (params_) {
    ++flat_.steps;
    if (slot_group_.empty())  // made from the module: one pass over the shard
      return update(flat_, params_->values, params_->gradients, shard_begin_, *groups_[0].lr,
                    *groups_[0].weight_decay);
    for_each_run([&](int64_t lo, int64_t hi, const SlotRate& r) {
      update_range(flat_, params_->values, params_->gradients, shard_begin_, lo, hi, r.lr,
                   r.weight_decay);
    });
    return;
  }
  ++tensor_steps_;
  size_t k = 0;
  for (const ParamGroup& group : groups_)
    for (const Tensor& param : group.params) {
      State& state = tensor_state_[k++];
      Tensor grad = gradient_of(param, "RMSprop");
      if (!grad.defined()) continue;
      if (!state.square_avg.defined()) state = fresh_state(param.shape(), param.dtype());
      ++state.steps;
      update(state, param, grad, 0, *group.lr, *group.weight_decay);
    }
}

namespace {
void check_adagrad(const AdagradConfig& c) {
  check_rate(c.lr, "Adagrad", "lr");
  check_rate(c.lr_decay, "Adagrad", "lr_decay");
  check_rate(c.weight_decay, "Adagrad", "weight_decay");
  check_rate(c.initial_accumulator_value, "Adagrad", "initial_accumulator_value");
  check_rate(c.eps, "Adagrad", "eps");
}

// torch 1.13 Adagrad (single-tensor path, dense) on one span, in torch's order of operations:
//   g ← g + wd·p;  s ← s + g·g;  p ← p − clr·(g / (√s + eps))
// p, g, s [n]; clr the step's decayed rate.
template <class T>
void adagrad_span(T* __restrict p, const T* __restrict g, T* __restrict s, int64_t n,
                  double weight_decay, double clr, double epsilon) {
  const T wd = static_cast<T>(weight_decay), rate = static_cast<T>(clr),
          eps = static_cast<T>(epsilon);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T gi = wd != T(0) ? g[i] + wd * p[i] : g[i];
    s[i] = s[i] + gi * gi;
    p[i] = p[i] + (-rate) * (gi / (std::sqrt(s[i]) + eps));
  }
}
}  // namespace

Adagrad::Adagrad(FlatParameters& params, const AdagradConfig& config)
    : FlatOptimizer((check_adagrad(config), params), config.lr, config.weight_decay, "Adagrad"),
      config_(config) {
  reset_state();
}

Adagrad::Adagrad(std::vector<Tensor> params, const AdagradConfig& config)
    : Adagrad(one_group(std::move(params)), config) {}

Adagrad::Adagrad(std::vector<ParamGroup> groups, const AdagradConfig& config) : config_(config) {
  check_adagrad(config);
  set_groups(std::move(groups), config.lr, config.weight_decay, "Adagrad");
  tensor_state_.resize(parameters().size());
}

void Adagrad::reset_state() {
  if (params_)
    flat_ = State{Tensor::full({shard_end_ - shard_begin_}, config_.initial_accumulator_value,
                               params_->values.dtype())};
}

void Adagrad::set_scalar_state(const std::map<std::string, int64_t>& scalars) {
  flat_.steps = scalar_named(scalars, "step", name());
}

void Adagrad::update(State& state, const Tensor& values, const Tensor& gradients, int64_t offset,
                     double lr, double weight_decay) const {
  // torch: clr = lr / (1 + (step − 1)·lr_decay), the step counted from 1 after the increment.
  const double clr = lr / (1 + static_cast<double>(state.steps - 1) * config_.lr_decay);
  dispatch_float(values.dtype(), "Adagrad", [&]<class T>() {
    T* p =
        values.mutable_data<T>() + offset;  // once, before the threads: the version counts writes
    const T* g = gradients.data<T>() + offset;
    T* s = state.sum.data<T>();
    for_chunks(state.sum.numel(), [&](int64_t lo, int64_t hi) {
      adagrad_span<T>(p + lo, g + lo, s + lo, hi - lo, weight_decay, clr, config_.eps);
    });
  });
}

void Adagrad::update_range(State& state, const Tensor& values, const Tensor& gradients,
                           int64_t origin, int64_t begin, int64_t end, double lr,
                           double weight_decay) const {
  // torch: clr = lr / (1 + (step − 1)·lr_decay), the step counted from 1 after the increment.
  const double clr = lr / (1 + static_cast<double>(state.steps - 1) * config_.lr_decay);
  dispatch_float(values.dtype(), "Adagrad", [&]<class T>() {
    T* p = values.mutable_data<T>() + begin;  // once, before the threads: the version counts writes
    const T* g = gradients.data<T>() + begin;
    T* s = state.sum.data<T>() + (begin - origin);
    for_chunks(end - begin, [&](int64_t lo, int64_t hi) {
      adagrad_span<T>(p + lo, g + lo, s + lo, hi - lo, weight_decay, clr, config_.eps);
    });
  });
}

void Adagrad::step() {
  ScopedOpTimer op_timer(OpFamily::optimizer);
  if (params_) {
    ++flat_.steps;
    if (slot_group_.empty())  // made from the module: one pass over the shard
      return update(flat_, params_->values, params_->gradients, shard_begin_, *groups_[0].lr,
                    *groups_[0].weight_decay);
    for_each_run([&](int64_t lo, int64_t hi, const SlotRate& r) {
      update_range(flat_, params_->values, params_->gradients, shard_begin_, lo, hi, r.lr,
                   r.weight_decay);
    });
    return;
  }
  ++tensor_steps_;
  size_t k = 0;
  for (const ParamGroup& group : groups_)
    for (const Tensor& param : group.params) {
      State& state = tensor_state_[k++];
      Tensor grad = gradient_of(param, "Adagrad");
      if (!grad.defined()) continue;
      if (!state.sum.defined())
        state.sum = Tensor::full(param.shape(), config_.initial_accumulator_value, param.dtype());
      ++state.steps;
      update(state, param, grad, 0, *group.lr, *group.weight_decay);
    }
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

DG_EXERCISE double Schedule::at(int64_t step) const {
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

namespace dg {

// ---- schedules as objects

LrScheduler::LrScheduler(Optimizer& optimizer, Rule rule) : LrScheduler(optimizer) {
  if (!rule) throw std::invalid_argument("LrScheduler: no rule");
  rule_ = std::move(rule);
  apply(0);
}

LrScheduler::LrScheduler(Optimizer& optimizer) : optimizer_(&optimizer) {
  for (size_t g = 0; g < optimizer.param_groups().size(); ++g) base_lrs_.push_back(optimizer.lr(g));
}

LrScheduler::LrScheduler(Optimizer& optimizer, Rule rule, std::vector<double> base_lrs)
    : optimizer_(&optimizer), rule_(std::move(rule)), base_lrs_(std::move(base_lrs)) {
  if (!rule_) throw std::invalid_argument("LrScheduler: no rule");
  if (base_lrs_.size() != optimizer.param_groups().size())
    throw std::invalid_argument(
        fmt::format("LrScheduler: {} base rates for an optimiser of {} parameter groups",
                    base_lrs_.size(), optimizer.param_groups().size()));
  apply(0);
}

double LrScheduler::rate(int64_t step, double base) const {
  if (!rule_)
    throw std::invalid_argument(
        "learning-rate schedule: this one's rates follow a metric, not the step (it has no rule "
        "of the step)");
  return rule_(step, base);
}

std::vector<double> LrScheduler::get_last_lr() const {
  std::vector<double> rates;
  for (size_t g = 0; g < optimizer_->param_groups().size(); ++g) rates.push_back(optimizer_->lr(g));
  return rates;
}

void LrScheduler::step() {
  apply(step_ + 1);
  ++step_;
}

void LrScheduler::set_step(int64_t step) {
  if (step < 0)
    throw std::invalid_argument(fmt::format("learning-rate schedule: step {} is negative", step));
  apply(step);
  step_ = step;
}

double LrScheduler::lr_at(int64_t step, size_t group) const {
  if (!rule_)
    throw std::invalid_argument(
        "learning-rate schedule: this one's rates follow a metric, not the step (lr_at needs a "
        "rule of the step)");
  return rule_(step, base_lrs_.at(group));
}

void LrScheduler::load_state(const std::map<std::string, double>& state) {
  if (!state.empty())
    throw std::invalid_argument(fmt::format(
        "learning-rate schedule: this schedule is a rule of the step and keeps no state, but "
        "'{}' was given (state of a ReduceLROnPlateau?)",
        state.begin()->first));
}

// Every group's rate at `step`, all computed (and checked) before any is set.
void LrScheduler::apply(int64_t step) {
  if (!rule_) return;
  std::vector<double> rates;
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    const double lr = rule_(step, base_lrs_[g]);
    if (!(lr >= 0) || !std::isfinite(lr))
      throw std::invalid_argument(
          fmt::format("learning-rate schedule: step {} gives group {} the rate {}", step, g, lr));
    rates.push_back(lr);
  }
  for (size_t g = 0; g < rates.size(); ++g) optimizer_->set_lr(g, rates[g]);
}

namespace {
void check_steps(int64_t value, int64_t least, const char* who, const char* what) {
  if (value < least)
    throw std::invalid_argument(
        fmt::format("{}: {} must be >= {}, got {}", who, what, least, value));
}
}  // namespace

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LrScheduler(optimizer, [step_size, gamma](int64_t step, double base) {
        check_steps(step_size, 1, "StepLR", "step_size");
        return base * std::pow(gamma, static_cast<double>(step / step_size));
      }) {}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t total_steps,
                                     int64_t warmup_steps, double min_lr_ratio)
    : LrScheduler(optimizer, [=](int64_t step, double base) {
        check_steps(total_steps, 1, "CosineAnnealingLR", "total_steps");
        check_steps(warmup_steps, 0, "CosineAnnealingLR", "warmup_steps");
        Schedule s;
        s.kind = Schedule::Kind::warmup_cosine;
        s.lr = base;
        s.warmup_steps = warmup_steps;
        s.total_steps = total_steps;
        s.min_lr_ratio = min_lr_ratio;
        return s.at(step);
      }) {}

LinearWarmupLR::LinearWarmupLR(Optimizer& optimizer, int64_t warmup_steps)
    : LrScheduler(optimizer, [warmup_steps](int64_t step, double base) {
        check_steps(warmup_steps, 1, "LinearWarmupLR", "warmup_steps");
        if (step >= warmup_steps) return base;
        return base * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
      }) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> factor)
    : LrScheduler(optimizer, [factor = std::move(factor)](int64_t step, double base) {
        return base * factor(step);
      }) {}

// ---- torch's chainable schedules: MultiStepLR, ExponentialLR, LinearLR; SequentialLR

namespace {
// A rule replaying torch's recurrence rate(s) = rate(s − 1)·factor(s), rate(−1) = base, in
// torch's order of multiplications. The last rate reached for each base is kept, so the steps of
// a run cost one multiplication each; a step before it (a resume, lr_at) replays from step 0.
LrScheduler::Rule chained(std::function<double(int64_t step)> factor) {
  struct Reached {
    int64_t step;
    double rate;
  };
  auto reached = std::make_shared<std::map<double, Reached>>();
  return [factor = std::move(factor), reached](int64_t step, double base) {
    auto it = reached->find(base);
    Reached r = it != reached->end() && it->second.step <= step ? it->second : Reached{-1, base};
    while (r.step < step) {
      ++r.step;
      r.rate = r.rate * factor(r.step);
    }
    (*reached)[base] = r;
    return r.rate;
  };
}

void check_factor(double value, double low, bool low_open, const char* who, const char* what) {
  if (!(low_open ? value > low : value >= low) || !(value <= 1.0))
    throw std::invalid_argument(fmt::format("{}: {} must be in {}{}, 1], got {}", who, what,
                                            low_open ? "(" : "[", low, value));
}
}  // namespace

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LrScheduler(optimizer, [&] {
        for (int64_t m : milestones)
          if (m < 0)
            throw std::invalid_argument(
                fmt::format("MultiStepLR: milestones must be >= 0, got {}", m));
        if (!std::isfinite(gamma))
          throw std::invalid_argument(
              fmt::format("MultiStepLR: gamma must be finite, got {}", gamma));
        return chained([milestones, gamma](int64_t step) {
          // torch: lr · gamma ** milestones[step], the Counter's count of this step
          const auto count = std::count(milestones.begin(), milestones.end(), step);
          return count == 0 ? 1.0 : std::pow(gamma, static_cast<double>(count));
        });
      }()) {}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma)
    : LrScheduler(optimizer, [&] {
        if (!std::isfinite(gamma))
          throw std::invalid_argument(
              fmt::format("ExponentialLR: gamma must be finite, got {}", gamma));
        return chained([gamma](int64_t step) { return step == 0 ? 1.0 : gamma; });
      }()) {}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters)
    : LrScheduler(optimizer, [&] {
        // torch: "Starting multiplicative factor expected to be greater than 0 and less or equal
        // to 1." and "Ending multiplicative factor expected to be between 0 and 1."
        check_factor(start_factor, 0.0, true, "LinearLR", "start_factor");
        check_factor(end_factor, 0.0, false, "LinearLR", "end_factor");
        check_steps(total_iters, 1, "LinearLR", "total_iters");
        const double s = start_factor, e = end_factor, n = static_cast<double>(total_iters);
        return chained([s, e, n, total_iters](int64_t step) {
          if (step == 0) return s;
          if (step > total_iters) return 1.0;
          return 1. + (e - s) / (n * s + static_cast<double>(step - 1) * (e - s));
        });
      }()) {}

namespace {
std::vector<double> sequential_bases(Optimizer& optimizer,
                                     const std::vector<LrScheduler*>& schedulers,
                                     const std::vector<int64_t>& milestones) {
  constexpr const char* who = "SequentialLR";
  if (schedulers.empty()) throw std::invalid_argument("SequentialLR: no schedulers given");
  // torch's message: "Sequential Schedulers expects number of schedulers provided to be one more
  // than the number of milestone points"
  if (milestones.size() != schedulers.size() - 1)
    throw std::invalid_argument(fmt::format(
        "SequentialLR: expects one more scheduler than milestones, got {} schedulers and {} "
        "milestones",
        schedulers.size(), milestones.size()));
  for (size_t i = 0; i < schedulers.size(); ++i) {
    if (!schedulers[i])
      throw std::invalid_argument(fmt::format("{}: scheduler {} is null", who, i));
    if (&schedulers[i]->optimizer() != &optimizer)
      throw std::invalid_argument(fmt::format(
          "{}: expects all schedulers to belong to the same optimizer, but scheduler {} is over "
          "another one",
          who, i));
    if (!schedulers[i]->has_rule())
      throw std::invalid_argument(fmt::format(
          "{}: scheduler {} follows a metric (ReduceLROnPlateau), not the step", who, i));
  }
  for (size_t i = 0; i < milestones.size(); ++i)
    if (milestones[i] < 1 || (i > 0 && milestones[i] <= milestones[i - 1]))
      throw std::invalid_argument(
          fmt::format("{}: milestones must be increasing and >= 1, got {} at position {}", who,
                      milestones[i], i));
  return schedulers[0]->base_lrs();
}
}  // namespace

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<LrScheduler*> schedulers,
                           std::vector<int64_t> milestones)
    : LrScheduler(
          optimizer,
          [schedulers, milestones](int64_t step, double base) {
            // torch: bisect_right(milestones, step) picks the schedule; at its milestone it is
            // restarted at step 0 (step(0)), so it runs on the steps since the milestone.
            const size_t i = static_cast<size_t>(
                std::upper_bound(milestones.begin(), milestones.end(), step) - milestones.begin());
            return schedulers[i]->rate(i == 0 ? step : step - milestones[i - 1], base);
          },
          sequential_bases(optimizer, schedulers, milestones)) {}

ScheduleLR::ScheduleLR(Optimizer& optimizer, const Schedule& schedule)
    : LrScheduler(optimizer, [schedule](int64_t step, double base) {
        const double lr = schedule.at(step);
        return base == schedule.lr ? lr : base * (lr / schedule.lr);
      }) {}

// ---- OneCycleLR

namespace {
// A per-group list of `what`: one value for every group, or one per group.
std::vector<double> per_group(const std::vector<double>& values, size_t groups, const char* who,
                              const char* what) {
  if (values.size() == 1) return std::vector<double>(groups, values[0]);
  if (values.size() != groups)
    throw std::invalid_argument(
        fmt::format("{}: expected 1 or {} values of {} (one per group), got {}", who, groups, what,
                    values.size()));
  return values;
}

struct CyclePhase {
  double end_step;
  double start_factor, end_factor;  // of max_lr
};

// a·b rounded, never fused into a following add: torch's phase ends are float(pct·total) − 1, and
// a fused multiply-add would move an end that torch puts on a step (or on the phase's start).
[[gnu::noinline]] double rounded_product(double a, double b) { return a * b; }

// torch's phases: the step each ends at and the rates it anneals between, as factors of max_lr.
std::vector<CyclePhase> one_cycle_phases(const OneCycleConfig& c, int64_t total) {
  const double initial = 1.0 / c.div_factor, final = initial / c.final_div_factor;
  const double rise_end = rounded_product(c.pct_start, static_cast<double>(total)) - 1;
  const double last = static_cast<double>(total - 1);
  if (!c.three_phase) return {{rise_end, initial, 1.0}, {last, 1.0, final}};
  return {{rise_end, initial, 1.0},
          {rounded_product(2 * c.pct_start, static_cast<double>(total)) - 2, 1.0, initial},
          {last, initial, final}};
}

void check_one_cycle(const OneCycleConfig& c, int64_t total) {
  constexpr const char* who = "OneCycleLR";
  if (c.total_steps != 0) check_steps(c.total_steps, 1, who, "total_steps");
  if (c.total_steps == 0) {
    check_steps(c.epochs, 1, who, "epochs (total_steps is 0)");
    check_steps(c.steps_per_epoch, 1, who, "steps_per_epoch (total_steps is 0)");
  }
  if (c.cycle_momentum)
    throw std::invalid_argument(
        "OneCycleLR: cycle_momentum = true is not supported (depthgrad's optimisers keep one "
        "momentum or beta1 for all groups and steps); set it false, the rate still cycles");
  if (!(c.pct_start >= 0 && c.pct_start <= 1))
    throw std::invalid_argument(
        fmt::format("OneCycleLR: pct_start must be in [0, 1], got {}", c.pct_start));
  for (auto [value, what] :
       {std::pair{c.div_factor, "div_factor"}, std::pair{c.final_div_factor, "final_div_factor"}})
    if (!(value > 0) || !std::isfinite(value))
      throw std::invalid_argument(
          fmt::format("OneCycleLR: {} must be finite and > 0, got {}", what, value));
  double start = 0;
  for (const CyclePhase& phase : one_cycle_phases(c, total)) {
    if (phase.end_step == start)
      throw std::invalid_argument(fmt::format(
          "OneCycleLR: pct_start {} over {} steps gives a phase of no length ending at step {} "
          "(torch divides by zero there)",
          c.pct_start, total, phase.end_step));
    start = phase.end_step;
  }
}

double one_cycle_rate(const OneCycleConfig& c, int64_t total, int64_t step, double max_lr) {
  if (step > total)
    throw std::invalid_argument(fmt::format(
        "OneCycleLR: step {} is past total_steps {} (the schedule ends there; torch raises 'Tried "
        "to step {} times')",
        step, total, step + 1));
  const std::vector<CyclePhase> phases = one_cycle_phases(c, total);
  double start = 0;
  for (size_t i = 0; i < phases.size(); ++i) {
    const CyclePhase& phase = phases[i];
    if (static_cast<double>(step) <= phase.end_step || i + 1 == phases.size()) {
      const double pct = (static_cast<double>(step) - start) / (phase.end_step - start);
      const double from = max_lr * phase.start_factor, to = max_lr * phase.end_factor;
      const double rate = c.anneal_strategy == OneCycleConfig::Anneal::cos
                              ? to + (from - to) / 2.0 * (std::cos(M_PI * pct) + 1)
                              : (to - from) * pct + from;
      return std::max(0.0, rate);  // below 0 only past the end of a linear anneal (step total)
    }
    start = phase.end_step;
  }
  return 0;  // not reached: the last phase takes every step
}

int64_t one_cycle_total(const OneCycleConfig& c) {
  const int64_t total = c.total_steps != 0 ? c.total_steps : c.epochs * c.steps_per_epoch;
  check_one_cycle(c, total);
  return total;
}

// Sets each group's rate to its max_lr, so the schedule takes them as its bases; checks every
// setting first, so a refused schedule leaves the optimiser as it was.
Optimizer& with_max_lrs(Optimizer& optimizer, const OneCycleConfig& c) {
  one_cycle_total(c);
  const std::vector<double> max_lrs =
      per_group(c.max_lr, optimizer.param_groups().size(), "OneCycleLR", "max_lr");
  for (double max_lr : max_lrs) check_rate(max_lr, "OneCycleLR", "max_lr");
  for (size_t g = 0; g < max_lrs.size(); ++g) optimizer.set_lr(g, max_lrs[g]);
  return optimizer;
}
}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, const OneCycleConfig& config)
    : LrScheduler(with_max_lrs(optimizer, config),
                  [config, total = one_cycle_total(config)](int64_t step, double max_lr) {
                    return one_cycle_rate(config, total, step, max_lr);
                  }) {}

// ---- ReduceLROnPlateau

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const PlateauConfig& config)
    : LrScheduler(optimizer), config_(config) {
  constexpr const char* who = "ReduceLROnPlateau";
  if (!(config.factor >= 0 && config.factor < 1))
    throw std::invalid_argument(
        fmt::format("ReduceLROnPlateau: factor must be in [0, 1), got {}", config.factor));
  check_steps(config.patience, 0, who, "patience");
  check_steps(config.cooldown, 0, who, "cooldown");
  check_rate(config.threshold, who, "threshold");
  check_rate(config.eps, who, "eps");
  if (config.threshold_mode == PlateauConfig::Threshold::rel &&
      config.mode == PlateauConfig::Mode::min && config.threshold >= 1)
    throw std::invalid_argument(fmt::format(
        "ReduceLROnPlateau: a rel threshold in min mode must be < 1, got {}", config.threshold));
  const size_t groups = optimizer.param_groups().size();
  min_lrs_ = config.min_lr.empty() ? std::vector<double>(groups, 0.0)
                                   : per_group(config.min_lr, groups, who, "min_lr");
  for (double m : min_lrs_) check_rate(m, who, "min_lr");
  best_ = config.mode == PlateauConfig::Mode::min ? HUGE_VAL : -HUGE_VAL;  // torch's mode_worse
}

bool ReduceLROnPlateau::is_better(double a) const {
  const bool rel = config_.threshold_mode == PlateauConfig::Threshold::rel;
  if (config_.mode == PlateauConfig::Mode::min)
    return rel ? a < best_ * (1. - config_.threshold) : a < best_ - config_.threshold;
  return rel ? a > best_ * (config_.threshold + 1.) : a > best_ + config_.threshold;
}

// torch 1.13's step(metrics), line for line.
void ReduceLROnPlateau::step(double metric) {
  if (std::isnan(metric))
    throw std::invalid_argument(
        "ReduceLROnPlateau: the metric is NaN (torch would count it as an evaluation without "
        "improvement; a NaN loss is a diverged run, not a plateau)");
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // bad evaluations in the cooldown are not counted
  }
  if (num_bad_epochs_ > config_.patience) {
    for (size_t g = 0; g < min_lrs_.size(); ++g) {
      const double old_lr = optimizer().lr(g);
      const double new_lr = std::max(old_lr * config_.factor, min_lrs_[g]);
      if (old_lr - new_lr > config_.eps) optimizer().set_lr(g, new_lr);
    }
    cooldown_counter_ = config_.cooldown;
    num_bad_epochs_ = 0;
  }
}

std::map<std::string, double> ReduceLROnPlateau::state() const {
  std::map<std::string, double> state{{"best", best_},
                                      {"num_bad_epochs", static_cast<double>(num_bad_epochs_)},
                                      {"cooldown_counter", static_cast<double>(cooldown_counter_)},
                                      {"last_epoch", static_cast<double>(last_epoch_)}};
  for (size_t g = 0; g < min_lrs_.size(); ++g) state[fmt::format("lr.{}", g)] = optimizer().lr(g);
  return state;
}

void ReduceLROnPlateau::load_state(const std::map<std::string, double>& state) {
  const std::map<std::string, double> mine = this->state();
  for (const auto& [key, value] : state)
    if (!mine.count(key))
      throw std::invalid_argument(fmt::format(
          "ReduceLROnPlateau: unknown state '{}' (another schedule's, or another number of "
          "parameter groups)",
          key));
  for (const auto& [key, value] : mine) {
    auto it = state.find(key);
    if (it == state.end())
      throw std::invalid_argument(fmt::format("ReduceLROnPlateau: state '{}' is missing", key));
    const double v = it->second;
    const bool count = key == "num_bad_epochs" || key == "cooldown_counter" || key == "last_epoch";
    const bool ok = key == "best" ? !std::isnan(v)
                    : count       ? v >= 0 && v <= 9e15 && v == std::floor(v)
                                  : v >= 0 && std::isfinite(v);
    if (!ok)
      throw std::invalid_argument(
          fmt::format("ReduceLROnPlateau: state '{}' has the invalid value {}", key, v));
  }
  best_ = state.at("best");
  num_bad_epochs_ = static_cast<int64_t>(state.at("num_bad_epochs"));
  cooldown_counter_ = static_cast<int64_t>(state.at("cooldown_counter"));
  last_epoch_ = static_cast<int64_t>(state.at("last_epoch"));
  for (size_t g = 0; g < min_lrs_.size(); ++g)
    optimizer().set_lr(g, state.at(fmt::format("lr.{}", g)));
}

}  // namespace dg
