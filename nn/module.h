// Module: the base of every layer. It keeps a hierarchical, ordered registry of parameters and
// child modules, so names come out as "blocks.0.attention.q.weight" in registration order, and
// a tensor registered under two names (a tied head, a route shared by Q/K and V) is counted and
// listed once, under its first name, as torch's named_parameters() does.
//
// flatten_parameters() moves every trainable parameter (requires_grad true) into one flat value
// buffer and gives each one a gradient that is a view into one flat gradient buffer: zeroing is a
// memset, the optimizer one loop over flat memory, a checkpoint one walk. A frozen parameter
// (requires_grad false: a LoRA model's base, nn/lora.h) stays outside: no gradient, no optimiser
// state, never written by a step. A module knows its parent and its dotted path.
// Called as module(x) (torch's __call__), it runs its forward hooks (torch's
// register_forward_pre_hook / register_forward_hook) around its forward, whatever module it is;
// the built-in modules run them however they are called (their forwards go through hooked()).
// Buffers (register_buffer, as torch's: BatchNorm's running statistics) are state that is not
// trained: never requiring grad, outside the flat buffers and so unseen by optimisers, but in
// state_dict() and checkpoints. Modules do not own optimisers or data.
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tape.h"
#include "tensor/tensor.h"

namespace dg {

using NamedTensor = std::pair<std::string, Tensor>;

// One flat buffer of parameter values and one of gradients; the trainable parameters become views
// into them (slots in named_parameters() order; frozen ones are left out).
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

class Module;
// Forward hooks (torch.nn.Module's), run by hooked() below:
//  - a pre-hook sees the inputs before the forward; a returned list (same count) replaces them
//    (torch's pre-hook returning a tuple); std::nullopt keeps them;
//  - a hook sees the inputs the forward ran on (after pre-hooks) and its output; a defined
//    result replaces the output (torch's hook returning a value); an undefined one keeps it.
// Hooks get the module as const Module& (forwards are const here; torch passes the module).
using ForwardPreHook =
    std::function<std::optional<std::vector<Tensor>>(const Module&, const std::vector<Tensor>&)>;
using ForwardHook =
    std::function<Tensor(const Module&, const std::vector<Tensor>& inputs, const Tensor& output)>;
struct ForwardHooks;  // a module's registered hooks (module.cpp)

class Module {
 public:
  explicit Module(DType dtype = get_default_dtype()) : dtype_(dtype) {}
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
  // that requires grad then becomes a view into them) and the same object afterwards. Optimisers
  // built on a module use it, so a model that was constructed, initialised or loaded from a
  // checkpoint trains with no other call. Call it on the model you train (the root module), once
  // its parameters are all registered and frozen (set_requires_grad(false)) as they will be:
  // freezing or unfreezing one afterwards does not move it in or out of the buffers.
  FlatParameters& flat_parameters();
  // True once flat_parameters() was made on this module, an ancestor or a descendant.
  bool has_flat_parameters() const;
  // Zeroes every parameter's gradient (one memset over the flat gradient buffer).
  void zero_grad() { flat_parameters().zero_grad(); }

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Buffers (every one, persistent or not) with full dotted names, in torch's named_buffers()
  // order: a module's own buffers in registration order, then its children's, depth first.
  std::vector<NamedTensor> named_buffers() const;
  std::vector<Tensor> buffers() const;

  // Copies values from `tensors` (matched by name, shapes and dtypes checked; float32/float64
  // converted, an integer buffer takes int32 or int64), each write a version bump. strict: every
  // parameter and persistent buffer must be present and no unknown name may appear.
  void load_state_dict(const std::vector<NamedTensor>& tensors, bool strict = true);
  // The parameters and persistent buffers by full name, sharing their storage (clone() a tensor to
  // keep a copy), in torch's state_dict() order: per module, its own parameters, then its own
  // persistent buffers, then each child's entries recursively; so a torch state dict's keys line
  // up. A shared parameter is listed once (torch lists it under every name).
  std::vector<NamedTensor> state_dict() const;

  // Registration, public so that a model can be assembled without subclassing. A name is
  // non-empty, has no '.', and is not used twice in one module (torch would replace the old
  // entry; here that is an error, since references to it are held). Registering after
  // flat_parameters() was made is an error: the new parameter would be outside the buffers.
  // A new parameter: requires_grad set, named by its full path lazily.
  Tensor register_parameter(const std::string& name, const Tensor& value);
  // An existing tensor under a second name (a shared parameter, listed once).
  void register_alias(const std::string& name, const Tensor& existing);
  // A buffer (torch's register_buffer): a tensor of any dtype that never requires grad, is not a
  // parameter (optimisers never see it) and, when persistent, is saved in state_dict() and in
  // checkpoints. The module keeps `value` (a leaf; a recorded tensor is refused) and returns it;
  // a forward updates it in place (copy_from, or an op's in-place write), which bumps its version.
  Tensor register_buffer(const std::string& name, const Tensor& value, bool persistent = true);
  // Removes this module's own parameter `name` and returns it: for a weight stored in another form
  // from then on (quantize_frozen, nn/quantize.h). Throws std::invalid_argument when the module has
  // no parameter of that name, std::logic_error once flat_parameters() was made on this module or
  // one it belongs to (the flat buffers would keep it).
  Tensor unregister_parameter(const std::string& name);
  // A child module; returns a reference to it (the module owns it). The child records this
  // module as its parent and `name` as its name, from which path() is computed.
  template <class M>
  M& register_module(const std::string& name, std::unique_ptr<M> child) {
    check_new_entry(name, "register_module");
    if (!child) throw std::invalid_argument("register_module: module '" + name + "' is null");
    M& ref = *child;
    ref.Module::parent_ = this;
    ref.Module::name_in_parent_ = name;
    entries_.push_back(Entry{name, Tensor(), std::move(child), EntryKind::child});
    return ref;
  }

  // The direct children in registration order, with their own (not dotted) names.
  std::vector<std::pair<std::string, Module*>> named_children() const;
  // This module's dotted path from its root ("blocks.0.attention"), computed by walking up the
  // parents; "" for a root (a module registered in no other). Its parameters' names start with
  // it only when the root is the model whose names you read.
  std::string path() const;
  const Module* parent() const { return parent_; }

  // ---- Calling a module: module(x), torch's __call__ ------------------------------------
  // module(x) runs the forward pre-hooks, the module's forward and its forward hooks (below), for
  // every module: a user's module only declares
  //   dg::Tensor forward(const dg::Tensor& x) const override;   // or without const
  // and module(x) calls it, with its hooks. Library code, containers and examples call modules
  // this way. A module without such a forward refuses module(x), naming itself and the forward to
  // declare (a forward taking the tensor by value is another function: it is not called; clang
  // warns that it hides this one). A module whose forward takes other arguments (several inputs,
  // a state) declares its own operator() with them (the built-in ones do: MultiheadAttention,
  // RNN/LSTM/GRU, the encoder layers) and is declared between DG_OTHER_FORWARD_BEGIN and _END.
  Tensor operator()(const Tensor& x) const;
  // What module(x) calls. The defaults make either constness of a subclass's forward the one
  // called; when the subclass declares neither, they throw (std::logic_error, naming the module).
  virtual Tensor forward(const Tensor& x) const;
  virtual Tensor forward(const Tensor& x);

  // ---- Forward hooks (torch's register_forward_pre_hook / register_forward_hook) ----------------
  // They fire when a module is called as module(x); every forward of the built-in modules (nn/
  // and the language model's) also runs through hooked(), so theirs fire however the forward is
  // called: directly (layer.forward(x)), by a container or by a parent. Hooks run once per call
  // (module(x) on a built-in module does not run them twice). One call runs, in this order:
  //   1. the pre-hooks, in registration order, each on the inputs the previous one left;
  //   2. the forward body on the resulting inputs;
  //   3. the hooks, in registration order, each on the output the previous one left.
  // Ops recorded in all three are part of the graph, so the gradient follows a replaced input or
  // output (a hook that zeroes part of the output cuts the gradient there). A hook registered or
  // removed while hooks run takes effect on the next forward. The returned handle removes the
  // hook; removing twice, or after the module is gone, does nothing; dropping it keeps the hook.
  // Differences from torch: hooks are never called with keyword arguments (there are none),
  // there is no always_call/prepend/with_kwargs, and fused paths call a child's forward instead of
  // reading its weights only when that child has hooks (attention's RoPE projections, the
  // residual added inside a projection, the language model's head).
  HookHandle register_forward_pre_hook(ForwardPreHook hook);
  HookHandle register_forward_hook(ForwardHook hook);
  bool has_forward_hooks() const;

  // ---- print(model) and model.to(dtype), as torch.nn.Module's ----------------------------------
  // The name repr() prints for this module: torch prints the class name, so by default the
  // dynamic type's name without its namespaces ("Linear", a user's "MyNet"); override to print
  // another (Functional prints the function's name, ReLU for dg::relu).
  virtual std::string type_name() const;
  // torch's extra_repr(): the module's settings inside the parentheses ("in_features=2,
  // out_features=16, bias=True"); empty by default. Every built-in layer gives torch 1.13's text.
  virtual std::string extra_repr() const { return {}; }
  // torch's module.to(dtype) (.double() is to(DType::f64), .float() to(DType::f32)): converts
  // every floating parameter and buffer of this module and its descendants in place, and sets
  // every module's dtype(). The tensors keep their identity (as torch keeps its Parameter objects:
  // it replaces param.data): a handle held in a layer's field or by the caller sees the new dtype,
  // and a gradient already there is converted too. Integer buffers (num_batches_tracked) stay.
  // Refused (std::logic_error) once flat_parameters() was made on this module or a module it
  // belongs to: an optimiser built on those buffers would keep the old ones, so convert first and
  // build the optimiser after, as torch's docs say. A non-floating dtype throws invalid_argument.
  Module& to(DType dtype);

 protected:
  // Runs body(inputs...) as this module's forward: opens a dg::CreationScope naming path() (what
  // anomaly mode reports as "in module '...'"), and runs the forward hooks around body when any is
  // registered. Without hooks it costs a branch and the scope (no allocation). A forward with a
  // list of inputs uses hooked_list. In a user's module:
  //   Tensor forward(const Tensor& x) const {
  //     return hooked([&](const Tensor& x) { return mul(x, gain); }, x);  // body reads its own x
  //   }
  // An undefined input (an optional argument not given) is passed to hooks as an undefined tensor.
  template <class Body, class... Inputs>
  requires(std::same_as<Inputs, Tensor>&&...) Tensor hooked(Body&& body, const Inputs&... inputs)
  const {
    const CreationScope scope = creation_scope();
    if (!has_forward_hooks() || hooks_ran_for_this_call()) [[likely]]
      return body(inputs...);
    return run_with_hooks({inputs...}, [&](const std::vector<Tensor>& in) {
      return call_unpacked(body, in, std::index_sequence_for<Inputs...>{});
    });
  }
  template <class Body>
  Tensor hooked_list(Body&& body, const std::vector<Tensor>& inputs) const {
    const CreationScope scope = creation_scope();
    if (!has_forward_hooks() || hooks_ran_for_this_call()) [[likely]]
      return body(inputs);
    return run_with_hooks(inputs, body);
  }
  // The scope alone, for a method that is not the forward but records ops (a loss() beside it).
  CreationScope creation_scope() const { return CreationScope(this, &describe_scope); }

 private:
  static std::string describe_scope(const void* module);
  // True inside the forward that operator() called on this module, whose hooks it ran already.
  bool hooks_ran_for_this_call() const;
  Tensor run_with_hooks(std::vector<Tensor> inputs,
                        const std::function<Tensor(const std::vector<Tensor>&)>& body) const;
  template <class Body, size_t... I>
  static Tensor call_unpacked(Body& body, const std::vector<Tensor>& in,
                              std::index_sequence<I...>) {
    return body(in[I]...);
  }
  const Module* parent_ = nullptr;
  std::string name_in_parent_;
  std::shared_ptr<ForwardHooks> hooks_;  // null until a hook is registered

  void check_new_entry(const std::string& name, const char* op) const;
  enum class EntryKind { parameter, buffer, transient_buffer, child };
  struct Entry {
    std::string name;
    Tensor parameter;               // set for a parameter or buffer entry
    std::unique_ptr<Module> child;  // set for a child-module entry
    EntryKind kind = EntryKind::parameter;
  };
  void collect(const std::string& prefix, std::vector<NamedTensor>& out,
               std::vector<const TensorImpl*>& seen) const;
  // Buffers (persistent only unless `all`), and for state_dict parameters first, in torch's order.
  void collect_state(const std::string& prefix, std::vector<NamedTensor>& out,
                     std::vector<const TensorImpl*>& seen, bool with_parameters, bool all) const;
  DType dtype_;
  bool training_ = true;
  std::vector<Entry> entries_;
  std::unique_ptr<FlatParameters> flat_;  // made by flat_parameters()
};

// A module whose forward takes other arguments than one tensor does not override Module's
// forward(x): clang's -Woverloaded-virtual would report that it hides it. Declared between these
// two, the class says that this is intended (it is called through its own operator()).
#if defined(__clang__)
#define DG_OTHER_FORWARD_BEGIN \
  _Pragma("clang diagnostic push") _Pragma("clang diagnostic ignored \"-Woverloaded-virtual\"")
#define DG_OTHER_FORWARD_END _Pragma("clang diagnostic pop")
#else
#define DG_OTHER_FORWARD_BEGIN
#define DG_OTHER_FORWARD_END
#endif
// torch's repr(module) / print(model): "Linear(in_features=2, out_features=16, bias=True)", or for
// a module with children its type_name(), "(", the extra_repr() lines and one "(name): child" line
// per child (indented two spaces per level), ")": torch 1.13's text for the built-in layers.
std::string repr(const Module& module);
std::ostream& operator<<(std::ostream& out, const Module& module);
// Python's text for a float, bool and int pair as extra_repr() writes them: "1e-05", "0.1", "1.0";
// "True"; "(3, 3)".
std::string repr_float(double value);
inline std::string repr_bool(bool value) { return value ? "True" : "False"; }

// module.flat_parameters(), as a value (it shares the module's buffers): kept for code that holds
// its own FlatParameters. Calling it again returns the same buffers, never new ones.
FlatParameters flatten_parameters(Module& module);

}  // namespace dg
