// Containers (see containers.h): lookups with errors that name the index or key.
#include "nn/containers.h"

#include <fmt/format.h>

namespace dg {

namespace {
template <class Items>
void check_index(const Items& items, size_t index, const char* container) {
  if (index >= items.size())
    throw std::out_of_range(
        fmt::format("{}: index {} is out of range for {} items", container, index, items.size()));
}
}  // namespace

Tensor Sequential::forward(const Tensor& x) const {
  return hooked(
      [&](const Tensor& x) {
        Tensor h = x;
        for (const UnaryFunction& step : steps_) h = step(h);
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
