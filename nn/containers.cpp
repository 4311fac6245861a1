// Containers (see containers.h): lookups with errors that name the index or key.
#include "nn/containers.h"

#include <fmt/format.h>

#include "autograd/ops.h"
#include "nn/vision_layers.h"  // BatchNorm: fused with a following ReLU

namespace dg {

namespace {
template <class Items>
void check_index(const Items& items, size_t index, const char* container) {
  if (index >= items.size())
    throw std::out_of_range(
        fmt::format("{}: index {} is out of range for {} items", container, index, items.size()));
}
}  // namespace

Functional::Functional(UnaryFunction fn, std::string name)
    : fn_(std::move(fn)), name_(std::move(name)) {
  if (!name_.empty()) return;
  name_ = "Functional";
  using Fn = Tensor (*)(const Tensor&);
  const Fn* target = fn_.target<Fn>();
  if (!target) return;
  // torch's activation modules and their extra_repr
  const struct {
    Fn fn;
    const char* name;
    const char* extra;
  } known[] = {{&relu, "ReLU", ""},
               {&tanh, "Tanh", ""},
               {&sigmoid, "Sigmoid", ""},
               {&silu, "SiLU", ""},
               {&gelu, "GELU", "approximate='none'"},
               {&gelu_tanh, "GELU", "approximate='tanh'"}};
  for (const auto& k : known)
    if (*target == k.fn) {
      name_ = k.name;
      extra_ = k.extra;
    }
}

std::string ParameterList::extra_repr() const {  // torch 1.13's ParameterList.extra_repr
  std::string s;
  for (size_t k = 0; k < items_.size(); ++k) {
    std::string size;
    for (int64_t d : items_[k].shape()) size += (size.empty() ? "" : "x") + std::to_string(d);
    s += fmt::format("{}  ({}): Parameter containing: [torch.{} of size {}]", k ? "\n" : "", k,
                     dtype_name(items_[k].dtype()), size);
  }
  return s;
}

bool Functional::is_relu() const {
  using Fn = Tensor (*)(const Tensor&);
  const Fn* target = fn_.target<Fn>();
  return target && *target == &relu;
}

namespace {
// The BatchNorm at step i when step i + 1 is a ReLU and neither has forward hooks: the pair
// Sequential runs as one fused op.
const BatchNorm* batch_norm_before_relu(const std::vector<const Module*>& modules, size_t i) {
  if (i + 1 >= modules.size()) return nullptr;
  const auto* bn = dynamic_cast<const BatchNorm*>(modules[i]);
  const auto* act = dynamic_cast<const Functional*>(modules[i + 1]);
  if (!bn || !act || !act->is_relu() || bn->has_forward_hooks() || act->has_forward_hooks())
    return nullptr;
  return bn;
}
}  // namespace

Tensor Sequential::forward(const Tensor& x) const {
  return hooked(
      [&](const Tensor& x) {
        Tensor h = x;
        for (size_t i = 0; i < steps_.size(); ++i) {
          if (const BatchNorm* bn = batch_norm_before_relu(modules_, i)) {
            h = bn->forward_relu(h);
            ++i;  // the ReLU ran too
            continue;
          }
          h = steps_[i](h);
        }
        return h;
      },
      x);
}

Module& Sequential::operator[](size_t index) const {
  check_index(steps_, index, "Sequential");
  return *named_children()[index].second;
}

Module& ModuleList::operator[](size_t index) const {
  check_index(items_, index, "ModuleList");
  return *items_[index];
}

bool ModuleDict::contains(const std::string& key) const {
  for (const auto& [k, m] : items_)
    if (k == key) return true;
  return false;
}

Module& ModuleDict::operator[](const std::string& key) const {
  for (const auto& [k, m] : items_)
    if (k == key) return *m;
  throw std::out_of_range(
      fmt::format("ModuleDict: no module under key '{}' (keys: {})", key, fmt::join(keys(), ", ")));
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, m] : items_) out.push_back(k);
  return out;
}

Tensor ParameterList::append(const Tensor& value) {
  items_.push_back(register_parameter(std::to_string(items_.size()), value));
  return items_.back();
}

const Tensor& ParameterList::operator[](size_t index) const {
  check_index(items_, index, "ParameterList");
  return items_[index];
}

}  // namespace dg
