// Module registry, paths, forward hooks, state loading and flat parameter buffers (see
// module.h). It defines no layer (nn/layers.h) and no container (nn/containers.h).
#include "nn/module.h"

#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <typeinfo>
#include <unordered_map>
#include <utility>

#include "tensor/exercise.h"
#include "tensor/profile.h"

namespace dg {

struct ForwardHooks {
  std::vector<std::pair<uint64_t, ForwardPreHook>> pre;
  std::vector<std::pair<uint64_t, ForwardHook>> post;
  uint64_t next_id = 0;
};

std::string Module::path() const {
  std::string out;
  for (const Module* m = this; m->parent_; m = m->parent_)
    out = out.empty() ? m->name_in_parent_ : m->name_in_parent_ + "." + out;
  return out;
}

std::string Module::describe_scope(const void* module) {
  std::string p = static_cast<const Module*>(module)->path();
  return p.empty() ? "(root)" : p;
}

bool Module::has_forward_hooks() const {
  return hooks_ && (!hooks_->pre.empty() || !hooks_->post.empty());
}

namespace {
// The handle of hook `id` in the list `member` of `hooks`: removes it while the module lives.
template <class List>
HookHandle hook_handle(const std::shared_ptr<ForwardHooks>& hooks, List ForwardHooks::*member,
                       uint64_t id) {
  return HookHandle([weak = std::weak_ptr<ForwardHooks>(hooks), member, id] {
    if (auto h = weak.lock())
      std::erase_if((*h).*member, [id](const auto& entry) { return entry.first == id; });
  });
}
std::string module_label(const Module& m) {
  std::string p = m.path();
  return p.empty() ? "the root module" : "module '" + p + "'";
}
}  // namespace

HookHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  if (!hook)
    throw std::invalid_argument(
        fmt::format("register_forward_pre_hook on {}: the hook is empty", module_label(*this)));
  if (!hooks_) hooks_ = std::make_shared<ForwardHooks>();
  const uint64_t id = hooks_->next_id++;
  hooks_->pre.emplace_back(id, std::move(hook));
  return hook_handle(hooks_, &ForwardHooks::pre, id);
}

HookHandle Module::register_forward_hook(ForwardHook hook) {
  if (!hook)
    throw std::invalid_argument(
        fmt::format("register_forward_hook on {}: the hook is empty", module_label(*this)));
  if (!hooks_) hooks_ = std::make_shared<ForwardHooks>();
  const uint64_t id = hooks_->next_id++;
  hooks_->post.emplace_back(id, std::move(hook));
  return hook_handle(hooks_, &ForwardHooks::post, id);
}

// ---- module(x): hooks around the subclass's forward -------------------------------------
namespace {
// The module whose hooks operator() is running a forward inside (hooked() then skips them), and
// the module whose default forward is looking for the subclass's other one (so that a module
// declaring neither throws instead of bouncing between the two defaults).
thread_local const Module* called_module = nullptr;
thread_local const Module* defaulting_module = nullptr;

// Sets `slot` to `module` for one scope, then puts the previous value back.
struct ScopedModule {
  const Module*& slot;
  const Module* previous;
  ScopedModule(const Module*& s, const Module* module) : slot(s), previous(s) { s = module; }
  ~ScopedModule() { slot = previous; }
  ScopedModule(const ScopedModule&) = delete;
  ScopedModule& operator=(const ScopedModule&) = delete;
};

std::string type_name(const Module& m) {
  int status = 0;
  const char* mangled = typeid(m).name();
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && demangled ? demangled.get() : mangled;
}

[[noreturn]] void throw_no_forward(const Module& m) {
  throw std::logic_error(fmt::format(
      "{} ({}) was called as module(x), but its class declares no forward(x) for it: declare "
      "`dg::Tensor forward(const dg::Tensor& x) const override` (or without const). A forward "
      "taking the tensor by value, or taking other arguments, is another function: call it "
      "directly, or give the class an operator() with those arguments",
      module_label(m), type_name(m)));
}
}  // namespace

Tensor Module::operator()(const Tensor& x) const {
  const CreationScope scope = creation_scope();
  const ScopedModule called(called_module, this);
  if (!has_forward_hooks()) [[likely]]
    return forward(x);
  return run_with_hooks({x}, [this](const std::vector<Tensor>& in) { return forward(in[0]); });
}

bool Module::hooks_ran_for_this_call() const { return called_module == this; }

// Reached when the subclass declares no const forward(x): its non-const one, if it has it.
Tensor Module::forward(const Tensor& x) const {
  if (defaulting_module == this) throw_no_forward(*this);
  const ScopedModule looking(defaulting_module, this);
  return const_cast<Module&>(*this).forward(x);
}

// Reached when the subclass declares no non-const forward(x): its const one, if it has it.
Tensor Module::forward(const Tensor& x) {
  if (defaulting_module == this) throw_no_forward(*this);
  const ScopedModule looking(defaulting_module, this);
  return std::as_const(*this).forward(x);
}

Tensor Module::run_with_hooks(std::vector<Tensor> inputs,
                              const std::function<Tensor(const std::vector<Tensor>&)>& body) const {
  // Copies of the lists: a hook may register or remove hooks (itself included) while they run.
  std::shared_ptr<ForwardHooks> keep = hooks_;
  const auto pre = keep->pre;
  const auto post = keep->post;
  for (const auto& [id, hook] : pre) {
    std::optional<std::vector<Tensor>> replaced = hook(*this, inputs);
    if (!replaced) continue;
    if (replaced->size() != inputs.size())
      throw std::invalid_argument(
          fmt::format("forward pre-hook on {}: it returned {} inputs, the forward takes {}",
                      module_label(*this), replaced->size(), inputs.size()));
    inputs = std::move(*replaced);
  }
  Tensor output = body(inputs);
  for (const auto& [id, hook] : post) {
    Tensor replaced = hook(*this, inputs, output);
    if (replaced.defined()) output = std::move(replaced);
  }
  return output;
}

void Module::check_new_entry(const std::string& name, const char* op) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw std::invalid_argument(
        fmt::format("{}: name '{}' must be non-empty and contain no '.'", op, name));
  for (const Entry& e : entries_)
    if (e.name == name)
      throw std::invalid_argument(
          fmt::format("{}: the module already has an entry '{}'", op, name));
  for (const Module* m = this; m; m = m->parent_)
    if (m->flat_)
      throw std::logic_error(fmt::format(
          "{}: '{}' is registered after flat_parameters() was made; register everything first", op,
          name));
}

bool Module::has_flat_parameters() const {
  const std::function<bool(const Module&)> flattened_below = [&](const Module& m) {
    if (m.flat_) return true;
    for (const Entry& e : m.entries_)
      if (e.child && flattened_below(*e.child)) return true;
    return false;
  };
  for (const Module* m = parent_; m; m = m->parent_)
    if (m->flat_) return true;
  return flattened_below(*this);
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
  if (!value.is_leaf())
    throw std::invalid_argument(fmt::format(
        "register_parameter: '{}' {} is not a leaf (it is the result of a recorded op); a "
        "parameter must be a leaf, as torch's nn.Parameter: register t.detach() or "
        "t.detach().clone()",
        name, value.describe()));
  if (!is_floating(value.dtype()))
    throw std::invalid_argument(
        fmt::format("parameter '{}' must be floating point, got {}", name, value.describe()));
  Tensor p = value;
  p.set_requires_grad(true);
  if (p.name().empty()) p.set_name(name);
  entries_.push_back(Entry{name, p, nullptr, EntryKind::parameter});
  return p;
}

Tensor Module::unregister_parameter(const std::string& name) {
  for (const Module* m = this; m; m = m->parent_)
    if (m->flat_)
      throw std::logic_error(fmt::format(
          "unregister_parameter: '{}' is in the flat buffers flat_parameters() made; remove it "
          "before building the optimiser",
          name));
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->name == name && it->kind == EntryKind::parameter) {
      Tensor p = it->parameter;
      entries_.erase(it);
      return p;
    }
  throw std::invalid_argument(
      fmt::format("unregister_parameter: the module has no parameter '{}'", name));
}

Tensor Module::register_buffer(const std::string& name, const Tensor& value, bool persistent) {
  check_new_entry(name, "register_buffer");
  if (!value.defined())
    throw std::invalid_argument(fmt::format("register_buffer: '{}' is undefined", name));
  if (!value.is_leaf() || value.requires_grad())
    throw std::invalid_argument(fmt::format(
        "register_buffer: '{}' {} requires grad or is the result of a recorded op; a buffer is "
        "not trained: register t.detach() or t.detach().clone()",
        name, value.describe()));
  Tensor b = value;
  if (b.name().empty()) b.set_name(name);
  entries_.push_back(
      Entry{name, b, nullptr, persistent ? EntryKind::buffer : EntryKind::transient_buffer});
  return b;
}

void Module::register_alias(const std::string& name, const Tensor& existing) {
  check_new_entry(name, "register_alias");
  entries_.push_back(Entry{name, existing, nullptr,
                           existing.requires_grad() ? EntryKind::parameter : EntryKind::buffer});
}

// named_parameters' walk: this module's entries in registration order, a child's under
// "prefix.child", each parameter tensor once (`seen` holds those already listed).
DG_EXERCISE void Module::collect(const std::string& prefix, std::vector<NamedTensor>& out,
                                 std::vector<const TensorImpl*>& seen) const {
  for (const Entry& e : entries_) {
    std::string full = prefix.empty() ? e.name : prefix + "." + e.name;
    if (e.child) {
      e.child->collect(full, out, seen);
    } else if (e.kind == EntryKind::parameter &&
               std::find(seen.begin(), seen.end(), e.parameter.impl()) == seen.end()) {
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

void Module::collect_state(const std::string& prefix, std::vector<NamedTensor>& out,
                           std::vector<const TensorImpl*>& seen, bool with_parameters,
                           bool all) const {
  auto full = [&](const Entry& e) { return prefix.empty() ? e.name : prefix + "." + e.name; };
  auto add = [&](const Entry& e) {
    if (std::find(seen.begin(), seen.end(), e.parameter.impl()) != seen.end()) return;
    seen.push_back(e.parameter.impl());
    out.emplace_back(full(e), e.parameter);
  };
  if (with_parameters)
    for (const Entry& e : entries_)
      if (e.kind == EntryKind::parameter) add(e);
  for (const Entry& e : entries_)
    if (e.kind == EntryKind::buffer || (all && e.kind == EntryKind::transient_buffer)) add(e);
  for (const Entry& e : entries_)
    if (e.child) e.child->collect_state(full(e), out, seen, with_parameters, all);
}

std::vector<NamedTensor> Module::named_buffers() const {
  std::vector<NamedTensor> out;
  std::vector<const TensorImpl*> seen;
  collect_state("", out, seen, /*with_parameters=*/false, /*all=*/true);
  return out;
}

std::vector<Tensor> Module::buffers() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers()) out.push_back(t);
  return out;
}

std::vector<NamedTensor> Module::state_dict() const {
  std::vector<NamedTensor> out;
  std::vector<const TensorImpl*> seen;
  collect_state("", out, seen, /*with_parameters=*/true, /*all=*/false);
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
  std::vector<NamedTensor> own = state_dict();
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
    if (is_floating(src.dtype()) != is_floating(p.dtype()))
      throw std::invalid_argument(fmt::format("state dict: tensor '{}' is {}, the model holds {}",
                                              name, dtype_name(src.dtype()),
                                              dtype_name(p.dtype())));
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
  NoGradGuard no_grad;
  for (auto& [p, src] : copies) p.copy_from(*src);  // each a version bump
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
    if (!p.requires_grad()) continue;  // frozen: no slot, no gradient, keeps its own storage
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

// ---- print(model) and model.to(dtype) ----------------------------------------------------------
namespace {
// "dg::detail::Foo<dg::Bar>" -> "Foo<dg::Bar>": the name after the last "::" outside template
// arguments.
std::string strip_namespaces(const std::string& name) {
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    if (name[i] == '>') --depth;
    if (depth == 0 && name[i] == ':' && i + 1 < name.size() && name[i + 1] == ':') start = i + 2;
  }
  return name.substr(start);
}
// torch's _addindent: every line but the first indented by two spaces.
std::string indent_tail(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out += "  ";
  }
  return out;
}
// Converts t's values to `dtype` in place: the same TensorImpl (every handle sees it) over new
// contiguous storage; its gradient likewise.
void convert_in_place(const Tensor& t, DType dtype) {
  NoGradGuard no_grad;
  const Tensor converted = raw::clone(t.to(dtype).contiguous());
  TensorImpl* impl = t.impl();
  impl->storage = converted.storage();
  impl->offset = converted.offset();
  impl->strides = converted.strides();
  impl->dtype = dtype;
  if (impl->grad.defined() && impl->grad.dtype() != dtype)
    impl->grad = raw::clone(impl->grad.to(dtype));
}
}  // namespace

std::string Module::type_name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  return strip_namespaces(name);
}

std::string repr(const Module& module) {
  std::vector<std::string> extra, children;
  const std::string extra_text = module.extra_repr();
  for (size_t start = 0; !extra_text.empty() && start <= extra_text.size();) {
    const size_t end = std::min(extra_text.find('\n', start), extra_text.size());
    extra.push_back(extra_text.substr(start, end - start));
    start = end + 1;
  }
  for (const auto& [name, child] : module.named_children())
    children.push_back("(" + name + "): " + indent_tail(repr(*child)));
  std::string out = module.type_name() + "(";
  if (extra.size() == 1 && children.empty()) {
    out += extra[0];
  } else if (!extra.empty() || !children.empty()) {
    for (const auto* lines : {&extra, &children})
      for (const std::string& line : *lines) out += "\n  " + line;
    out += "\n";
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& out, const Module& module) { return out << repr(module); }

std::string repr_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // fmt's shortest round trip writes Python's repr ("1e-05", "0.1", "1e+16") but for integral
  // values, where Python adds ".0" (and 1e15 and the like, which Python writes out in full).
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

Module& Module::to(DType dtype) {
  if (!is_floating(dtype))
    throw std::invalid_argument(
        fmt::format("Module::to only accepts floating point dtypes (float32, float64), got {}",
                    dtype_name(dtype)));
  if (has_flat_parameters())
    throw std::logic_error(fmt::format(
        "Module::to({}) on {}: flat_parameters() was already made (an optimiser or zero_grad() "
        "holds the flat buffers, which would go stale); call to() before building the "
        "optimiser, as torch's docs say",
        dtype_name(dtype), module_label(*this)));
  std::vector<const TensorImpl*> seen;
  const std::function<void(Module&)> convert = [&](Module& m) {
    m.dtype_ = dtype;
    for (Entry& e : m.entries_) {
      if (e.child) {
        convert(*e.child);
        continue;
      }
      const Tensor& t = e.parameter;
      if (std::find(seen.begin(), seen.end(), t.impl()) != seen.end()) continue;
      seen.push_back(t.impl());
      if (is_floating(t.dtype()) && t.dtype() != dtype) convert_in_place(t, dtype);
    }
  };
  convert(*this);
  return *this;
}

}  // namespace dg
