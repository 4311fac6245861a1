// Module registry, state loading and flat parameter buffers (see module.h).
#include "nn/module.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "tensor/profile.h"

namespace dg {

void Module::check_new_entry(const std::string& name, const char* op) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw std::invalid_argument(
        fmt::format("{}: name '{}' must be non-empty and contain no '.'", op, name));
  for (const Entry& e : entries_)
    if (e.name == name)
      throw std::invalid_argument(
          fmt::format("{}: the module already has an entry '{}'", op, name));
  if (flat_)
    throw std::logic_error(fmt::format(
        "{}: '{}' is registered after flat_parameters() was made; register everything first", op,
        name));
}

std::vector<std::pair<std::string, Module*>> Module::named_children() const {
  std::vector<std::pair<std::string, Module*>> out;
  for (const Entry& e : entries_)
    if (e.child) out.emplace_back(e.name, e.child.get());
  return out;
}

Tensor Module::register_parameter(const std::string& name, const Tensor& value) {
  check_new_entry(name, "register_parameter");
  if (!value.defined())
    throw std::invalid_argument(fmt::format("register_parameter: '{}' is undefined", name));
  if (!is_floating(value.dtype()))
    throw std::invalid_argument(
        fmt::format("parameter '{}' must be floating point, got {}", name, value.describe()));
  Tensor p = value;
  p.set_requires_grad(true);
  if (p.name().empty()) p.set_name(name);
  entries_.push_back(Entry{name, p, nullptr});
  return p;
}

void Module::register_alias(const std::string& name, const Tensor& existing) {
  check_new_entry(name, "register_alias");
  entries_.push_back(Entry{name, existing, nullptr});
}

void Module::collect(const std::string& prefix, std::vector<NamedTensor>& out,
                     std::vector<const TensorImpl*>& seen) const {
  for (const Entry& e : entries_) {
    std::string full = prefix.empty() ? e.name : prefix + "." + e.name;
    if (e.child) {
      e.child->collect(full, out, seen);
    } else if (std::find(seen.begin(), seen.end(), e.parameter.impl()) == seen.end()) {
      seen.push_back(e.parameter.impl());
      out.emplace_back(full, e.parameter);
    }
  }
}

std::vector<NamedTensor> Module::named_parameters() const {
  std::vector<NamedTensor> out;
  std::vector<const TensorImpl*> seen;
  collect("", out, seen);
  // Name each tensor by its full path (the first name wins for shared tensors).
  for (auto& [name, t] : out) t.set_name(name);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

Tensor Module::parameter(const std::string& name) const {
  for (auto& [n, t] : named_parameters())
    if (n == name) return t;
  throw std::invalid_argument(fmt::format("module has no parameter named '{}'", name));
}

void Module::train(bool on) {
  training_ = on;
  for (Entry& e : entries_)
    if (e.child) e.child->train(on);
}

void Module::load_state_dict(const std::vector<NamedTensor>& tensors, bool strict) {
  std::unordered_map<std::string, const Tensor*> given;
  for (auto& [name, t] : tensors) {
    if (!given.emplace(name, &t).second)
      throw std::invalid_argument(fmt::format("state dict: tensor '{}' appears twice", name));
  }
  // Check everything before copying anything, so a failed load leaves the module unchanged.
  std::vector<NamedTensor> own = named_parameters();
  std::vector<std::pair<Tensor, const Tensor*>> copies;
  for (auto& [name, p] : own) {
    auto it = given.find(name);
    if (it == given.end()) {
      if (strict)
        throw std::invalid_argument(fmt::format("state dict: missing tensor '{}' {} {}", name,
                                                shape_str(p.shape()), dtype_name(p.dtype())));
      continue;
    }
    const Tensor& src = *it->second;
    if (src.shape() != p.shape())
      throw std::invalid_argument(
          fmt::format("state dict: tensor '{}' has shape {}, the model expects {}", name,
                      shape_str(src.shape()), shape_str(p.shape())));
    if (!is_floating(src.dtype()))
      throw std::invalid_argument(fmt::format(
          "state dict: tensor '{}' is {}, expected floating point", name, dtype_name(src.dtype())));
    copies.emplace_back(p, &src);
  }
  if (strict && copies.size() != given.size()) {
    for (auto& named : tensors) {
      const std::string& name =
          named.first;  // a plain variable: clang < 16 cannot capture a structured binding
      bool known = std::any_of(own.begin(), own.end(),
                               [&](const NamedTensor& o) { return o.first == name; });
      if (!known)
        throw std::invalid_argument(fmt::format("state dict: unexpected tensor '{}'", name));
    }
  }
  for (auto& [p, src] : copies) p.copy_from(*src);
}

void FlatParameters::zero_grad() {
  ScopedOpTimer op_timer(OpFamily::optimizer);
  if (gradients.defined())
    std::memset(gradients.storage()->data(), 0, total * dtype_size(gradients.dtype()));
}

FlatParameters flatten_parameters(Module& module) { return module.flat_parameters(); }

FlatParameters& Module::flat_parameters() {
  if (flat_) return *flat_;
  Module& module = *this;
  auto made = std::make_unique<FlatParameters>();  // kept only when every check passed
  FlatParameters& flat = *made;
  std::vector<NamedTensor> params = module.named_parameters();
  DType dtype = module.dtype();
  for (auto& [name, p] : params) {
    if (p.dtype() != dtype)
      throw std::invalid_argument(fmt::format("flatten_parameters: '{}' is {}, the module is {}",
                                              name, dtype_name(p.dtype()), dtype_name(dtype)));
    // Keep every slot 16-element aligned so vector loops start on a boundary.
    flat.total = (flat.total + 15) / 16 * 16;
    flat.slots.push_back({name, p, flat.total, p.numel()});
    flat.total += p.numel();
  }
  flat.values = Tensor::zeros({flat.total}, dtype);
  flat.gradients = Tensor::zeros({flat.total}, dtype);
  for (auto& slot : flat.slots) {
    Tensor view =
        Tensor::from_storage(flat.values.storage(), slot.parameter.shape(),
                             contiguous_strides(slot.parameter.shape()), slot.offset, dtype);
    view.copy_from(slot.parameter);
    TensorImpl* impl = slot.parameter.impl();
    impl->storage = flat.values.storage();
    impl->offset = slot.offset;
    impl->strides = contiguous_strides(impl->shape);
    impl->grad = Tensor::from_storage(flat.gradients.storage(), impl->shape, impl->strides,
                                      slot.offset, dtype);
  }
  flat_ = std::move(made);
  return *flat_;
}

}  // namespace dg
