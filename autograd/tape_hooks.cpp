// Hooks on gradients: Tensor::register_hook (a function of the gradient that may replace it) and
// Tensor::register_post_accumulate_grad_hook (a call once a leaf's gradient is final in a
// backward). The core (tape.cpp) calls in here at named points: run_step passes a non-leaf's
// gradient through hooked_gradient before its node reads it; backward() sets aside the gradients
// of hooked leaves before the walk and puts back hooked(the walk's sum) after it, and runs
// post-accumulate hooks as leaves finish; grad() hooks the gradients it returns.
// See tensor/tensor.h for the contract of both hooks.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "autograd/ops.h"  // add: a hooked leaf's gradient under create_graph
#include "autograd/tape_internal.h"

namespace dg {

struct GradHooks {
  std::vector<std::pair<uint64_t, std::function<Tensor(const Tensor&)>>> hooks;
  // register_post_accumulate_grad_hook's: run on a leaf once its gradient is final in a walk
  std::vector<std::pair<uint64_t, std::function<void(const Tensor&)>>> post_accumulate;
  uint64_t next_id = 0;
  uint64_t applied_in_walk = 0;  // the walk that last ran them (they run once per walk)
};

namespace {
// Post-accumulate hooks registered and not removed, over all tensors: while none is, a backward
// does not look for leaves that have them.
std::atomic<int64_t> g_post_accumulate_hooks{0};
}  // namespace

HookHandle Tensor::register_hook(std::function<Tensor(const Tensor& grad)> hook) const {
  if (!defined()) throw std::invalid_argument("register_hook: the tensor is undefined");
  if (!requires_grad())
    throw std::invalid_argument(fmt::format(
        "register_hook: tensor {} does not require grad, so no gradient will reach a hook on it",
        describe()));
  if (!hook) throw std::invalid_argument("register_hook: the hook is empty");
  if (!impl_->hooks) impl_->hooks = std::make_shared<GradHooks>();
  GradHooks& h = *impl_->hooks;
  const uint64_t id = h.next_id++;
  h.hooks.emplace_back(id, std::move(hook));
  return HookHandle([weak = std::weak_ptr<GradHooks>(impl_->hooks), id] {
    if (auto h = weak.lock())
      std::erase_if(h->hooks, [id](const auto& entry) { return entry.first == id; });
  });
}

HookHandle Tensor::register_post_accumulate_grad_hook(
    std::function<void(const Tensor& leaf)> hook) const {
  if (!defined())
    throw std::invalid_argument("register_post_accumulate_grad_hook: the tensor is undefined");
  if (!requires_grad() || impl_->grad_fn)
    throw std::invalid_argument(fmt::format(
        "register_post_accumulate_grad_hook: tensor {} is not a leaf that requires grad (only a "
        "leaf's gradient is accumulated)",
        describe()));
  if (!hook) throw std::invalid_argument("register_post_accumulate_grad_hook: the hook is empty");
  if (!impl_->hooks) impl_->hooks = std::make_shared<GradHooks>();
  GradHooks& h = *impl_->hooks;
  const uint64_t id = h.next_id++;
  h.post_accumulate.emplace_back(id, std::move(hook));
  g_post_accumulate_hooks.fetch_add(1, std::memory_order_relaxed);
  return HookHandle([weak = std::weak_ptr<GradHooks>(impl_->hooks), id] {
    auto h = weak.lock();
    if (h && std::erase_if(h->post_accumulate, [id](const auto& e) { return e.first == id; }))
      g_post_accumulate_hooks.fetch_sub(1, std::memory_order_relaxed);
  });
}

// ---- register_hook's hooks ---------------------------------------------------------------------

bool has_hooks(const Tensor& t) {
  return t.defined() && t.impl()->hooks && !t.impl()->hooks->hooks.empty();
}

namespace {
// g after every hook registered on `t` (each on the previous one's result); once per walk.
Tensor apply_hooks(const Tensor& t, Tensor g) {
  GradHooks& h = *t.impl()->hooks;
  if (h.applied_in_walk == g_current_walk) return g;
  h.applied_in_walk = g_current_walk;
  auto hooks = h.hooks;  // a hook may remove itself (or another) while they run
  for (auto& [id, hook] : hooks) {
    Tensor r = hook(g);
    if (!r.defined()) continue;
    if (r.shape() != t.shape() || r.dtype() != t.dtype())
      throw std::invalid_argument(
          fmt::format("hook on tensor {}: it returned gradient {}, which does not match the tensor",
                      t.describe(), r.describe()));
    g = r;
  }
  return g;
}
}  // namespace

Tensor hooked_gradient(const Tensor& t, Tensor g) {
  GradModeScope mode(g_create_graph);
  return apply_hooks(t, std::move(g));
}

// The leaves a walk over `steps` (from `roots`) may reach that have register_hook's hooks: their
// gradients are set aside, so that the walk's sum can be hooked before it is added back.
std::vector<HookedLeaf> set_aside_hooked_leaves(const std::vector<Step>& steps,
                                                const std::vector<Tensor>& roots) {
  std::vector<HookedLeaf> leaves;
  std::unordered_set<const TensorImpl*> seen;
  auto consider = [&](const Tensor& t) {
    if (!has_hooks(t) || t.impl()->grad_fn || !seen.insert(t.impl()).second) return;
    leaves.push_back(HookedLeaf{t, t.impl()->grad});
    t.impl()->grad = Tensor();
  };
  for (const Tensor& r : roots) consider(r);
  for (const Step& s : steps)
    for (const Tensor& in : s.node->inputs) consider(in);
  return leaves;
}

void put_back_hooked_leaves(std::vector<HookedLeaf>& leaves) {
  for (HookedLeaf& h : leaves) {
    TensorImpl* impl = h.leaf.impl();
    Tensor fresh = impl->grad;
    impl->grad = h.old_grad;
    if (!fresh.defined()) continue;
    Tensor hooked = hooked_gradient(h.leaf, fresh);
    if (!h.old_grad.defined()) {
      impl->grad = (hooked.same(fresh) || g_create_graph) ? hooked : raw::clone(hooked);
    } else if (g_create_graph) {
      GradModeScope on(true);
      impl->grad = add(h.old_grad, hooked);
    } else {
      accumulate_grad(h.leaf, hooked);
    }
  }
}

void restore_hooked_leaves(std::vector<HookedLeaf>& leaves) {
  for (HookedLeaf& h : leaves) h.leaf.impl()->grad = h.old_grad;
}

// ---- post-accumulate hooks ---------------------------------------------------------------------

void run_post_accumulate_hooks(const Tensor& leaf) {
  GradModeScope off(false);
  auto hooks = leaf.impl()->hooks->post_accumulate;  // a hook may remove itself while they run
  for (auto& [id, hook] : hooks) hook(leaf);
}

void run_post_accumulate_hooks_at_end(const std::vector<FinishedLeaf>& finished, size_t steps) {
  for (const FinishedLeaf& f : finished)  // the root, and leaves whose hooks ran just now
    if (f.after_step == steps) run_post_accumulate_hooks(f.leaf);
}

// A leaf's gradient is final after the oldest node that takes it as input, or, for the root and
// a leaf whose gradient is set aside for register_hook's hooks (set_aside_hooked_leaves), after
// the whole walk (steps.size()).
std::vector<FinishedLeaf> leaves_with_post_accumulate_hooks(const std::vector<Step>& steps,
                                                            const Tensor& root) {
  std::vector<FinishedLeaf> leaves;
  if (g_post_accumulate_hooks.load(std::memory_order_relaxed) == 0) return leaves;
  std::unordered_map<const TensorImpl*, size_t> index;  // leaf -> its entry in `leaves`
  auto note = [&](const Tensor& t, size_t after) {
    if (!t.defined() || t.impl()->grad_fn || !t.impl()->hooks) return;
    const GradHooks& h = *t.impl()->hooks;
    if (h.post_accumulate.empty()) return;
    if (!h.hooks.empty()) after = steps.size();
    auto [it, added] = index.emplace(t.impl(), leaves.size());
    if (added)
      leaves.push_back(FinishedLeaf{after, t});
    else
      leaves[it->second].after_step = std::max(leaves[it->second].after_step, after);
  };
  for (size_t i = 0; i < steps.size(); ++i)
    for (const Tensor& in : steps[i].node->inputs) note(in, i);
  note(root, steps.size());
  std::stable_sort(leaves.begin(), leaves.end(), [](const FinishedLeaf& a, const FinishedLeaf& b) {
    return a.after_step < b.after_step;
  });
  return leaves;
}

}  // namespace dg
