// Module: the base of every layer. It keeps a hierarchical, ordered registry of parameters and
// child modules, so names come out as "blocks.0.attention.q.weight" in registration order, and
// a tensor registered under two names (a tied head, a route shared by Q/K and V) is counted and
// listed once, under its first name, as torch's named_parameters() does.
//
// flatten_parameters() moves every parameter into one flat value buffer and gives each one a
// gradient that is a view into one flat gradient buffer: zeroing is a memset, the optimizer one
// loop over flat memory, a checkpoint one walk. Modules do not own optimisers or data.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace dg {

using NamedTensor = std::pair<std::string, Tensor>;

// One flat buffer of parameter values and one of gradients; parameters become views into them.
struct FlatParameters {
  struct Slot {
    std::string name;
    Tensor parameter;
    int64_t offset = 0;  // in elements
    int64_t numel = 0;
  };
  Tensor values;     // [total] — every parameter's storage
  Tensor gradients;  // [total] — every parameter's gradient
  std::vector<Slot> slots;
  int64_t total = 0;
  void zero_grad();
};

class Module {
 public:
  explicit Module(DType dtype = DType::f32) : dtype_(dtype) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  DType dtype() const { return dtype_; }

  // Parameters in registration order with full dotted names; shared tensors appear once.
  std::vector<NamedTensor> named_parameters() const;
  std::vector<Tensor> parameters() const;
  // Elements over distinct parameter tensors (a shared tensor counts once).
  int64_t parameter_count() const;
  // The parameter with this full name; throws naming it when absent.
  Tensor parameter(const std::string& name) const;

  // The module's flat parameter and gradient buffers, made on the first call (every parameter
  // becomes a view into them) and the same object afterwards. Optimisers built on a module use
  // it, so a model that was constructed, initialised or loaded from a checkpoint trains with no
  // other call. Call it on the model you train (the root module), once its parameters are all
  // registered.
  FlatParameters& flat_parameters();
  // Zeroes every parameter's gradient (one memset over the flat gradient buffer).
  void zero_grad() { flat_parameters().zero_grad(); }

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Copies values from `tensors` (matched by name, shapes and dtypes checked; float32/float64
  // converted). strict: every parameter must be present and no unknown name may appear.
  void load_state_dict(const std::vector<NamedTensor>& tensors, bool strict = true);
  // The parameters by full name, sharing their storage (torch's state_dict without buffers,
  // which depthgrad modules do not have): clone() a tensor to keep a copy.
  std::vector<NamedTensor> state_dict() const { return named_parameters(); }

  // Registration, public so that a model can be assembled without subclassing. A name is
  // non-empty, has no '.', and is not used twice in one module (torch would replace the old
  // entry; here that is an error, since references to it are held). Registering after
  // flat_parameters() was made is an error: the new parameter would be outside the buffers.
  // A new parameter: requires_grad set, named by its full path lazily.
  Tensor register_parameter(const std::string& name, const Tensor& value);
  // An existing tensor under a second name (a shared parameter, listed once).
  void register_alias(const std::string& name, const Tensor& existing);
  // A child module; returns a reference to it (the module owns it).
  template <class M>
  M& register_module(const std::string& name, std::unique_ptr<M> child) {
    check_new_entry(name, "register_module");
    if (!child) throw std::invalid_argument("register_module: module '" + name + "' is null");
    M& ref = *child;
    entries_.push_back(Entry{name, Tensor(), std::move(child)});
    return ref;
  }

  // The direct children in registration order, with their own (not dotted) names.
  std::vector<std::pair<std::string, Module*>> named_children() const;

 private:
  void check_new_entry(const std::string& name, const char* op) const;
  struct Entry {
    std::string name;
    Tensor parameter;               // set for a parameter entry
    std::unique_ptr<Module> child;  // set for a child-module entry
  };
  void collect(const std::string& prefix, std::vector<NamedTensor>& out,
               std::vector<const TensorImpl*>& seen) const;
  DType dtype_;
  bool training_ = true;
  std::vector<Entry> entries_;
  std::unique_ptr<FlatParameters> flat_;  // made by flat_parameters()
};

// module.flat_parameters(), as a value (it shares the module's buffers): kept for code that holds
// its own FlatParameters. Calling it again returns the same buffers, never new ones.
FlatParameters flatten_parameters(Module& module);

}  // namespace dg
