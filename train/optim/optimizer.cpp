// Optimizer (groups and rates), FlatOptimizer (the flat buffer, its shard and groups moved onto
// it) and ElementwiseOptimizer (one update over spans, run over every path): see optimizer.h.
#include "train/optim/optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tensor/bf16_weights.h"
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

namespace detail {
void check_rate(double value, const char* who, const char* what) {
  if (!(value >= 0) || !std::isfinite(value))
    throw std::invalid_argument(
        fmt::format("{}: {} must be finite and >= 0, got {}", who, what, value));
}

std::vector<ParamGroup> one_group(std::vector<Tensor> params) {
  return {ParamGroup{std::move(params), std::nullopt, std::nullopt}};
}
}  // namespace detail

using detail::check_rate;

namespace {
std::vector<ParamGroup> flat_group(const FlatParameters& params, double lr, double weight_decay) {
  ParamGroup group{{}, lr, weight_decay};
  for (const auto& slot : params.slots) group.params.push_back(slot.parameter);
  return {group};
}
}  // namespace

// ---- Optimizer: groups and rates ------------------------------------------------------------

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
    if (p.requires_grad()) groups[p.dim() >= 2 ? 0 : 1].params.push_back(p);  // frozen: left out
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

// ---- FlatOptimizer: the flat buffer the Trainer drives -------------------------------------

FlatOptimizer::FlatOptimizer(FlatParameters& params, double lr, double weight_decay,
                             const char* who)
    : params_(&params), shard_begin_(0), shard_end_(params.total) {
  if (params.slots.empty())
    throw std::invalid_argument(fmt::format(
        "{}: optimizer got an empty parameter list (the module passed has no parameters to train: "
        "register each layer with register_module and each tensor with register_parameter before "
        "the optimiser is made; a frozen one, requires_grad false, does not count)",
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

std::vector<FlatOptimizer::Run> FlatOptimizer::runs(const std::vector<bool>& decays) const {
  std::vector<Run> out;
  for (size_t s = 0; s < params_->slots.size(); ++s) {
    const FlatParameters::Slot& slot = params_->slots[s];
    if (!slot.parameter.requires_grad())  // a step would still decay it
      throw std::logic_error(fmt::format(
          "{}: parameter '{}' was frozen (requires_grad false) after the flat buffers were made; "
          "freeze parameters before building the optimiser",
          name(), slot.name));
    const int64_t a = std::max(shard_begin_, slot.offset),
                  b = std::min(shard_end_, slot.offset + slot.numel);
    if (a >= b) continue;
    if (slot_group_.empty()) {  // made from the module: group 0, decay as `decays` says
      const ParamGroup& g = groups_[0];
      out.push_back({a, b, *g.lr, decays.empty() || decays[s] ? *g.weight_decay : 0.0});
    } else if (slot_group_[s] != SIZE_MAX) {
      const ParamGroup& g = groups_[slot_group_[s]];
      out.push_back({a, b, *g.lr, *g.weight_decay});
    }
  }
  return out;
}

void FlatOptimizer::zero_grad() {
  if (params_)
    params_->zero_grad();
  else
    Optimizer::zero_grad();
}

// ---- ElementwiseOptimizer: one update, run over every path ----------------------------------

namespace {
// f(lo, hi) over [0, n): one call up to 2·kParallelGrain elements (a micro model's 140k
// parameters update faster on one thread than with a passive thread woken; the Fashion-MNIST
// CNN's 422k, 0.2 ms of Adam, were on one thread under the earlier 4·kParallelGrain), else chunks
// of kChunk in one parallel region (small enough that the threads get even shares). For
// elementwise updates only, so the cut cannot change a bit.
template <class F>
void for_chunks(int64_t n, F&& f) {
  if (n <= 2 * kParallelGrain) return f(int64_t{0}, n);
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) f(c * kChunk, std::min(n, (c + 1) * kChunk));
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

// Where one buffer's step reads and writes: elements [begin, end) of p and g, the runs (sorted,
// disjoint) within them, the state tensors' data (state element i is buffer element origin + i)
// and, when not null, the bf16 copy of the whole buffer to write in the same pass.
template <class T>
struct BufferStep {
  T* p;
  const T* g;
  std::array<T*, UpdateSpan<T>::kMaxStates> state;
  int64_t origin, begin, end;
  const std::vector<FlatOptimizer::Run>* runs;
  int64_t step;
  uint16_t* copy;
};

// The one loop every step runs: chunks of [begin, end) on the threads; in each, update() on its
// part of every run it meets, then the chunk's bf16 copy while it is in cache.
template <class T, class Update>
void run_buffer_step(const BufferStep<T>& s, const Update& update) {
  const std::vector<FlatOptimizer::Run>& runs = *s.runs;
  for_chunks(s.end - s.begin, [&](int64_t lo, int64_t hi) {
    lo += s.begin, hi += s.begin;  // elements [lo, hi) of the buffer
    auto run = std::upper_bound(runs.begin(), runs.end(), lo,
                                [](int64_t at, const FlatOptimizer::Run& r) { return at < r.end; });
    for (; run != runs.end() && run->begin < hi; ++run) {
      const int64_t a = std::max(lo, run->begin), b = std::min(hi, run->end);
      UpdateSpan<T> span{s.p + a, s.g + a, {}, b - a, run->lr, run->weight_decay, s.step};
      for (size_t k = 0; k < span.state.size(); ++k)
        span.state[k] = s.state[k] ? s.state[k] + (a - s.origin) : nullptr;
      update(span);
    }
    if constexpr (std::is_same_v<T, float>)
      if (s.copy) to_bf16(s.p + lo, hi - lo, s.copy + lo);  // padding between slots too
  });
}

template <class T>
std::array<T*, UpdateSpan<T>::kMaxStates> state_data(const std::vector<Tensor>& tensors) {
  std::array<T*, UpdateSpan<T>::kMaxStates> data = {};
  for (size_t k = 0; k < tensors.size(); ++k) data[k] = tensors[k].data<T>();
  return data;
}

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

ElementwiseOptimizer::ElementwiseOptimizer(std::vector<ParamGroup> groups, double lr,
                                           double weight_decay, const char* who) {
  set_groups(std::move(groups), lr, weight_decay, who);
  per_tensor_.resize(parameters().size());
}

ElementwiseOptimizer::State ElementwiseOptimizer::fresh_state(const Shape& shape,
                                                              DType dtype) const {
  const std::vector<StateTensor> layout = state_layout();
  if (layout.size() > UpdateSpan<float>::kMaxStates)
    throw std::logic_error(fmt::format("{}: {} state tensors, at most {}", name(), layout.size(),
                                       UpdateSpan<float>::kMaxStates));
  State state;
  for (const StateTensor& s : layout)
    state.tensors.push_back(Tensor::full(shape, s.initial, dtype));
  return state;
}

void ElementwiseOptimizer::reset_state() {
  flat_ = State{};
  flat_made_ = false;
}

void ElementwiseOptimizer::make_flat_state() {
  if (flat_made_ || !params_) return;
  const int64_t steps = flat_.steps;  // set_scalar_state may have come first
  flat_ = fresh_state({shard_end_ - shard_begin_}, params_->values.dtype());
  flat_.steps = steps;
  flat_made_ = true;
}

Tensor& ElementwiseOptimizer::flat_state(size_t k) {
  make_flat_state();
  static thread_local Tensor none;  // over tensors: no flat state
  if (!params_) return none = Tensor();
  return flat_.tensors.at(k);
}

const Tensor& ElementwiseOptimizer::tensor_state(size_t i, size_t k) const {
  static const Tensor kNone;
  const State& state = per_tensor_.at(i);
  return state.tensors.empty() ? kNone : state.tensors.at(k);
}

std::vector<NamedTensor> ElementwiseOptimizer::element_state() {
  make_flat_state();
  std::vector<NamedTensor> named;
  const std::vector<StateTensor> layout = state_layout();
  // Over tensors there is no flat state: the names with undefined tensors.
  for (size_t k = 0; k < layout.size(); ++k)
    named.emplace_back(layout[k].name, k < flat_.tensors.size() ? flat_.tensors[k] : Tensor());
  return named;
}

std::map<std::string, int64_t> ElementwiseOptimizer::scalar_state() const {
  return {{"step", flat_.steps}};
}

void ElementwiseOptimizer::set_scalar_state(const std::map<std::string, int64_t>& scalars) {
  flat_.steps = scalar_named(scalars, "step", name());
}

void ElementwiseOptimizer::step() {
  ScopedOpTimer op_timer(OpFamily::optimizer);
  if (params_)
    step_flat();
  else
    step_tensors();
}

// The flat buffer (or this rank's shard of it): one step count, a run per slot.
void ElementwiseOptimizer::step_flat() {
  const std::vector<Run> slot_runs = runs(slot_decays_);  // first: it may refuse
  make_flat_state();
  ++flat_.steps;
  const std::string who = name();
  dispatch_float(params_->values.dtype(), who.c_str(), [&]<class T>() {
    // A bf16 copy of the weights is written in the same pass when this step rewrites the whole
    // buffer (not a ZeRO shard: the all-gather that follows makes the copy stale).
    uint16_t* copy = nullptr;
    if constexpr (std::is_same_v<T, float>)
      if (shard_begin_ == 0 && shard_end_ == params_->values.numel())
        copy = bf16_copy_to_write(params_->values);
    // mutable_data once, before the threads: the version counts writes (a backward that saved a
    // parameter now refuses).
    const BufferStep<T> s{params_->values.mutable_data<T>(),
                          params_->gradients.data<T>(),
                          state_data<T>(flat_.tensors),
                          shard_begin_,
                          shard_begin_,
                          shard_end_,
                          &slot_runs,
                          flat_.steps,
                          copy};
    run_buffer_step(s, [this](const UpdateSpan<T>& span) { update(span); });
    if (copy) bf16_copy_written(params_->values);
  });
}

// Tensors or groups: each tensor that has a gradient is one run, with its own state and count.
void ElementwiseOptimizer::step_tensors() {
  ++tensor_steps_;
  const std::string who = name();
  size_t i = 0;
  for (const ParamGroup& group : groups_)
    for (const Tensor& param : group.params) {
      State& state = per_tensor_[i++];
      const Tensor grad = gradient_of(param, who.c_str());
      if (!grad.defined()) continue;
      if (state.tensors.empty() && !state_layout().empty())
        state = fresh_state(param.shape(), param.dtype());
      ++state.steps;
      const std::vector<Run> whole{{0, param.numel(), *group.lr, *group.weight_decay}};
      dispatch_float(param.dtype(), who.c_str(), [&]<class T>() {
        const BufferStep<T> s{param.mutable_data<T>(),
                              grad.data<T>(),
                              state_data<T>(state.tensors),
                              0,
                              0,
                              param.numel(),
                              &whole,
                              state.steps,
                              nullptr};
        run_buffer_step(s, [this](const UpdateSpan<T>& span) { update(span); });
      });
    }
}
}  // namespace dg
