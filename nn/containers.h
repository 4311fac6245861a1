// Containers for building a model without writing a Module subclass, as torch.nn's:
// Functional (a function as a layer), Sequential, ModuleList, ModuleDict, ParameterList.
// Children are named by position ("0", "1", …) or key, so parameters read "0.weight" or
// "encoder.weight" as in torch. Containers own their children; they never copy a module.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace dg {

using UnaryFunction = std::function<Tensor(const Tensor&)>;

// A parameter-free layer that applies a function: Functional(dg::silu), or a lambda. Unnamed, it
// takes torch's module name for dg::relu, tanh, sigmoid, silu, gelu and gelu_tanh (ReLU, Tanh,
// Sigmoid, SiLU, GELU), so print(model) reads as torch's; any other function is "Functional".
class Functional : public Module {
 public:
  explicit Functional(UnaryFunction fn, std::string name = "");
  Tensor forward(const Tensor& x) const override {
    return hooked([&](const Tensor& x) { return fn_(x); }, x);
  }
  const std::string& name() const { return name_; }
  // True when this wraps dg::relu itself (torch's nn.ReLU).
  bool is_relu() const;
  // repr() prints the name: ReLU() for dg::relu in a Sequential (torch's activation modules).
  std::string type_name() const override { return name_; }
  std::string extra_repr() const override { return extra_; }

 private:
  UnaryFunction fn_;
  std::string name_, extra_;
};

namespace detail {
// A module is usable in a Sequential when it has forward(const Tensor&) -> Tensor.
template <class M>
concept UnaryModule = std::derived_from<M, Module> && requires(M& m, const Tensor& x) {
  { m.forward(x) } -> std::convertible_to<Tensor>;
};
template <class F>
concept TensorFunction = std::is_invocable_r_v<Tensor, F, const Tensor&>;
// The child `key` of a container as an M, or an error naming the key.
template <class M>
M& child_as(Module& child, const std::string& key) {
  M* cast = dynamic_cast<M*>(&child);
  if (!cast)
    throw std::invalid_argument("container: child '" + key + "' is not of the requested type");
  return *cast;
}
}  // namespace detail

// Children run in order, each one's output the next one's input: forward(x) [..] -> [..].
//   dg::Sequential net(std::make_unique<dg::Linear>(2, 16), dg::silu,
//                      std::make_unique<dg::Linear>(16, 1));
//   dg::Tensor y = net(x);   // parameters: 0.weight, 0.bias, 2.weight, 2.bias
// An item is a std::unique_ptr to a module with forward(Tensor) -> Tensor, or a function
// Tensor(const Tensor&) (wrapped in a Functional). Built from items, the container takes the
// default dtype (get_default_dtype(), as its layers do); Sequential(DType::f64) names one.
class Sequential : public Module {
 public:
  explicit Sequential(DType dtype = get_default_dtype()) : Module(dtype) {}
  template <class... Items>
  explicit Sequential(Items&&... items) {
    (add(std::forward<Items>(items)), ...);
  }

  // Appends a module (named by its position) and returns it.
  template <detail::UnaryModule M>
  M& add(std::unique_ptr<M> module) {
    M* raw = module.get();
    M& ref = register_module(std::to_string(steps_.size()), std::move(module));
    steps_.push_back([raw](const Tensor& x) { return (*raw)(x); });
    modules_.push_back(raw);
    return ref;
  }
  // Appends a function as a Functional.
  template <detail::TensorFunction F>
  Functional& add(F&& fn) {
    return add(std::make_unique<Functional>(UnaryFunction(std::forward<F>(fn))));
  }
  // Builds a module in place: net.emplace<dg::Linear>(2, 16).
  template <detail::UnaryModule M, class... Args>
  M& emplace(Args&&... args) {
    return add(std::make_unique<M>(std::forward<Args>(args)...));
  }

  // Runs the children in order. A BatchNorm followed by a ReLU (dg::relu), neither with forward
  // hooks, runs as one fused op (BatchNorm::forward_relu): the same values and gradients, one
  // pass each way instead of two, and no saved output for the ReLU.
  Tensor forward(const Tensor& x) const override;
  size_t size() const { return steps_.size(); }
  Module& operator[](size_t index) const;
  // The child at `index` as an M; throws naming the index when it is not one.
  template <class M>
  M& at(size_t index) const {
    return detail::child_as<M>((*this)[index], std::to_string(index));
  }

 private:
  std::vector<UnaryFunction> steps_;
  std::vector<const Module*> modules_;  // each step's module
};

// Modules in a list, named by position; no forward of its own (the owner decides the order).
class ModuleList : public Module {
 public:
  explicit ModuleList(DType dtype = get_default_dtype()) : Module(dtype) {}
  template <class M>
  M& append(std::unique_ptr<M> module) {
    M& ref = register_module(std::to_string(items_.size()), std::move(module));
    items_.push_back(&ref);
    return ref;
  }
  template <class M, class... Args>
  M& emplace(Args&&... args) {
    return append(std::make_unique<M>(std::forward<Args>(args)...));
  }
  size_t size() const { return items_.size(); }
  Module& operator[](size_t index) const;
  template <class M>
  M& at(size_t index) const {
    return detail::child_as<M>((*this)[index], std::to_string(index));
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<Module*> items_;
};

// Modules by key, in insertion order (torch's ModuleDict); keys follow Module's name rules.
class ModuleDict : public Module {
 public:
  explicit ModuleDict(DType dtype = get_default_dtype()) : Module(dtype) {}
  template <class M>
  M& insert(const std::string& key, std::unique_ptr<M> module) {
    M& ref = register_module(key, std::move(module));
    items_.emplace_back(key, &ref);
    return ref;
  }
  template <class M, class... Args>
  M& emplace(const std::string& key, Args&&... args) {
    return insert(key, std::make_unique<M>(std::forward<Args>(args)...));
  }
  bool contains(const std::string& key) const;
  Module& operator[](const std::string& key) const;  // throws naming a missing key
  template <class M>
  M& at(const std::string& key) const {
    return detail::child_as<M>((*this)[key], key);
  }
  std::vector<std::string> keys() const;
  size_t size() const { return items_.size(); }

 private:
  std::vector<std::pair<std::string, Module*>> items_;
};

// Parameters in a list, named "0", "1", … (torch's ParameterList).
class ParameterList : public Module {
 public:
  explicit ParameterList(DType dtype = get_default_dtype()) : Module(dtype) {}
  Tensor append(const Tensor& value);       // registers it; returns the parameter
  std::string extra_repr() const override;  // torch's "(0): Parameter containing: [...]" lines
  size_t size() const { return items_.size(); }
  const Tensor& operator[](size_t index) const;

 private:
  std::vector<Tensor> items_;
};

}  // namespace dg
