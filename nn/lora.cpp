// LoRA adapters on Linears (see lora.h): PEFT's target matching, attaching A and B, freezing the
// base, merge and unmerge. The adapter's forward is Linear::forward's (nn/layers.cpp).
#include "nn/lora.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <unordered_set>

#include "nn/init.h"

namespace dg {

LoRALinear::LoRALinear(int64_t in, int64_t out, int64_t r, double alpha, double dropout,
                       bool use_rslora, bool with_bias, DType dtype)
    : Linear(in, out, with_bias, dtype) {
  lora::attach(*this, "LoRALinear", {{}, r, alpha, dropout, use_rslora});
  weight.set_requires_grad(false);
  if (bias.defined()) bias.set_requires_grad(false);
}

namespace lora {
namespace {
// Every module under `m` with its full name, depth first in registration order (m itself as "").
void walk(Module& m, const std::string& name, std::vector<std::pair<std::string, Module*>>& out) {
  out.emplace_back(name, &m);
  for (auto& [child, c] : m.named_children())
    walk(*c, name.empty() ? child : name + "." + child, out);
}
std::vector<std::pair<std::string, Module*>> named_modules(Module& model) {
  std::vector<std::pair<std::string, Module*>> out;
  walk(model, "", out);
  return out;
}

// PEFT's matching of a list of target_modules: the full name, or its dotted suffix.
bool matches(const std::string& name, const std::string& target) {
  if (name == target) return true;
  return name.size() > target.size() && name.ends_with(target) &&
         name[name.size() - target.size() - 1] == '.';
}

void check_options(const Options& o, const char* who) {
  if (o.r < 1) throw std::invalid_argument(fmt::format("{}: r must be >= 1, got {}", who, o.r));
  if (!std::isfinite(o.alpha))
    throw std::invalid_argument(fmt::format("{}: alpha must be finite, got {}", who, o.alpha));
  if (!(o.dropout >= 0 && o.dropout < 1))
    throw std::invalid_argument(
        fmt::format("{}: dropout must be in [0, 1), got {}", who, o.dropout));
}

void check_not_flattened(const Module& model, const char* who) {
  if (model.has_flat_parameters())
    throw std::logic_error(fmt::format(
        "{}: the model's flat_parameters() were already made (an optimiser or a Trainer holds "
        "them, and the adapters would be outside them); add the adapters before building either",
        who));
}

// The Linear named `name`, checked to take an adapter.
Linear& adaptable(const std::string& name, Module* m, const char* who, const std::string& why) {
  auto* linear = dynamic_cast<Linear*>(m);
  if (!linear)
    throw std::invalid_argument(fmt::format("{}: {} module '{}', a {}, which is not a Linear", who,
                                            why, name, m->type_name()));
  if (linear->lora)
    throw std::invalid_argument(
        fmt::format("{}: {} '{}', which already has a LoRA adapter", who, why, name));
  if (matches(name, "lora_A") || matches(name, "lora_B"))
    throw std::invalid_argument(
        fmt::format("{}: {} '{}', a LoRA adapter's own layer", who, why, name));
  return *linear;
}

Summary summary(Module& model, std::vector<std::string> adapted) {
  Summary s = freeze_base(model);
  s.adapted = std::move(adapted);
  return s;
}

// W ± scale·B·A on every adapted Linear of `model`, after checking them all.
void fold(Module& model, bool merging) {
  const char* who = merging ? "lora::merge" : "lora::unmerge";
  const auto linears = adapted_linears(model);
  if (linears.empty())
    throw std::invalid_argument(fmt::format("{}: the model has no LoRA adapter", who));
  for (const auto& [name, l] : linears)
    if (l->lora->merged == merging)
      throw std::invalid_argument(fmt::format("{}: the adapter of '{}' is {}", who, name,
                                              merging ? "already merged" : "not merged"));
  NoGradGuard no_grad;
  for (const auto& [name, l] : linears) {
    const Tensor delta = scale(matmul(l->lora->B->weight, l->lora->A->weight), l->lora->scale);
    l->weight.copy_from(merging ? add(l->weight, delta) : sub(l->weight, delta));
    l->lora->merged = merging;
  }
}
}  // namespace

double scale_of(const Options& o) {
  const double r = static_cast<double>(o.r);
  return o.use_rslora ? o.alpha / std::sqrt(r) : o.alpha / r;
}

void attach(Linear& linear, const std::string& name, const Options& o, const Linear* share_a_of) {
  check_options(o, "lora::attach");
  if (linear.lora)
    throw std::invalid_argument(fmt::format("lora: '{}' already has a LoRA adapter", name));
  Linear::LoRA adapter;
  adapter.scale = scale_of(o);
  if (share_a_of) {
    if (!share_a_of->lora || share_a_of->in_features != linear.in_features ||
        share_a_of->lora->A->out_features != o.r || share_a_of->dtype() != linear.dtype())
      throw std::invalid_argument(fmt::format(
          "lora: '{}' ({} in, {}) cannot share the adapter A of a Linear ({} in, {}{})", name,
          linear.in_features, dtype_name(linear.dtype()), share_a_of->in_features,
          dtype_name(share_a_of->dtype()), share_a_of->lora ? "" : ", which has no adapter"));
    adapter.A = share_a_of->lora->A;
    adapter.dropout = share_a_of->lora->dropout;
  } else if (o.dropout > 0) {
    adapter.dropout = &linear.register_module("lora_dropout", std::make_unique<Dropout>(o.dropout));
  }
  // PEFT's draws: nn.Linear(in, r) and nn.Linear(r, out) each draw their default init, then A is
  // drawn again and B zeroed.
  auto make = [&](const char* child, int64_t in, int64_t out) -> Linear& {
    return linear.register_module(child, std::make_unique<Linear>(in, out, false, linear.dtype()));
  };
  Linear* A = share_a_of ? nullptr : &make("lora_A", linear.in_features, o.r);
  Linear& B = make("lora_B", o.r, linear.out_features);
  if (A) {
    init::kaiming_uniform_(A->weight, std::sqrt(5.0));
    adapter.A = A;
  }
  B.weight.fill(0.0);
  adapter.B = &B;
  linear.lora = adapter;
}

Summary freeze_base(Module& model) {
  std::unordered_set<const TensorImpl*> adapters;
  for (const auto& [name, l] : adapted_linears(model)) {
    adapters.insert(l->lora->A->weight.impl());
    adapters.insert(l->lora->B->weight.impl());
  }
  Summary s;
  for (auto& [name, p] : model.named_parameters()) {
    const bool trainable = adapters.count(p.impl()) > 0;
    p.set_requires_grad(trainable);
    s.total += p.numel();
    if (trainable) s.trainable += p.numel();
  }
  return s;
}

Summary apply(Module& model, const Options& options) {
  check_options(options, "lora::apply");
  if (options.targets.empty()) throw std::invalid_argument("lora::apply: no targets given");
  check_not_flattened(model, "lora::apply");
  std::vector<std::pair<std::string, Linear*>> chosen;
  const auto modules = named_modules(model);
  for (const std::string& target : options.targets) {
    bool found = false;
    for (const auto& [name, m] : modules)
      if (!name.empty() && matches(name, target)) {
        adaptable(name, m, "lora::apply", fmt::format("target '{}' matches", target));
        found = true;
      }
    if (!found)
      throw std::invalid_argument(
          fmt::format("lora::apply: target '{}' matches no module of the model", target));
  }
  for (const auto& [name, m] : modules)
    for (const std::string& target : options.targets)
      if (!name.empty() && matches(name, target)) {
        chosen.emplace_back(name, static_cast<Linear*>(m));
        break;
      }
  std::vector<std::string> adapted;
  for (const auto& [name, l] : chosen) {
    attach(*l, name, options);
    adapted.push_back(name);
  }
  return summary(model, std::move(adapted));
}

Summary apply_shared(Module& model, const std::vector<std::string>& names, const Options& options) {
  check_options(options, "lora::apply_shared");
  if (names.empty()) throw std::invalid_argument("lora::apply_shared: no Linears named");
  check_not_flattened(model, "lora::apply_shared");
  const auto modules = named_modules(model);
  std::vector<Linear*> members;
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (names[j] == names[i])
        throw std::invalid_argument(
            fmt::format("lora::apply_shared: '{}' is named twice", names[i]));
    Module* found = nullptr;
    for (const auto& [name, m] : modules)
      if (name == names[i] && !name.empty()) found = m;
    if (!found)
      throw std::invalid_argument(
          fmt::format("lora::apply_shared: the model has no module '{}'", names[i]));
    members.push_back(&adaptable(names[i], found, "lora::apply_shared", "member"));
    if (members[i]->in_features != members[0]->in_features ||
        members[i]->dtype() != members[0]->dtype())
      throw std::invalid_argument(fmt::format(
          "lora::apply_shared: '{}' ({} in, {}) does not read the input of '{}' ({} in, {})",
          names[i], members[i]->in_features, dtype_name(members[i]->dtype()), names[0],
          members[0]->in_features, dtype_name(members[0]->dtype())));
  }
  for (size_t i = 0; i < names.size(); ++i)
    attach(*members[i], names[i], options, i == 0 ? nullptr : members[0]);
  return summary(model, names);
}

void merge(Module& model) { fold(model, true); }
void unmerge(Module& model) { fold(model, false); }

std::vector<std::pair<std::string, Linear*>> adapted_linears(Module& model) {
  std::vector<std::pair<std::string, Linear*>> out;
  for (const auto& [name, m] : named_modules(model))
    if (auto* l = dynamic_cast<Linear*>(m); l && l->lora) out.emplace_back(name, l);
  return out;
}

}  // namespace lora
}  // namespace dg
