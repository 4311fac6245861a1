// The tensor type: a shape, strides and an offset over shared storage, plus autograd metadata.
//
// Tensor is a cheap handle (a shared pointer); copying it aliases the same tensor. Views share
// storage and only change metadata (shape, strides, offset); contiguous() and clone() copy.
// float32 is the training type; float64 runs through the same kernels (templated on T) so
// gradient checks can use it; int32/int64 hold ids; bool (C++ bool, 1 byte, 0/1) holds masks and
// comparison results; uint8 holds bytes.
// Every method that returns a tensor means what torch's does: reshape, view, transpose, permute,
// narrow, expand, clone, contiguous and to are recorded on autograd's tape (they are the ops of
// autograd/ops.h, defined in autograd/ops_shape.cpp), and detach() is the one way out of the
// graph. The unrecorded views and copy the library's kernels, backwards and optimisers use are
// the free functions of dg::raw below: this file records nothing itself.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensor/shape.h"

namespace dg {

// b8 is torch.bool (C++ bool: one byte, always 0 or 1), u8 torch.uint8 (uint8_t).
enum class DType : uint8_t { f32, f64, i32, i64, b8, u8 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "float32", "float64", "int32", "int64", "bool", "uint8"
bool is_floating(DType dtype);
// torch's type promotion of two tensors (torch.promote_types): bool < integers < floating; within
// a kind the wider (uint8 with int32 gives int32, int32 with int64 int64, float32 with float64
// float64); an integer with a floating type gives the floating type.
DType promote_types(DType a, DType b);

// torch.set_default_dtype / torch.get_default_dtype: the dtype of a floating tensor or module made
// without one (Tensor::zeros/ones/full/empty, from_vector of doubles, dg::zeros/rand/randn/
// linspace, a float arange, every nn module's constructor). float32 at start; float32 or float64
// only (anything else throws std::invalid_argument). Process-wide, as torch's: set it before
// building a model, not while other threads build tensors. Library code names its dtypes, so
// only a caller's defaults follow it.
DType get_default_dtype();
void set_default_dtype(DType dtype);
// Sets the default dtype for a scope and restores the previous one (tests, one model's build).
class DefaultDTypeGuard {
 public:
  explicit DefaultDTypeGuard(DType dtype) : previous_(get_default_dtype()) {
    set_default_dtype(dtype);
  }
  ~DefaultDTypeGuard() { set_default_dtype(previous_); }
  DefaultDTypeGuard(const DefaultDTypeGuard&) = delete;
  DefaultDTypeGuard& operator=(const DefaultDTypeGuard&) = delete;

 private:
  DType previous_;
};

// C++ type -> DType.
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::b8;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}

// One element converted as torch's to(dtype): to bool, nonzero (NaN too) is true; a floating
// value to uint8 goes through int64 and wraps modulo 256 as on torch's x86 build (-1.0 -> 255);
// every other conversion is C++'s static_cast (float to integer truncates toward zero).
template <class D, class S>
constexpr D convert_element(S value) {
  if constexpr (std::is_same_v<D, bool>)
    return value != S(0);
  else if constexpr (std::is_same_v<D, uint8_t> && std::is_floating_point_v<S>)
    return static_cast<uint8_t>(static_cast<int64_t>(value));
  else
    return static_cast<D>(value);
}

// A flat, 64-byte aligned byte buffer. Buffers come from a size-keyed cache: a training step
// that allocates the same sizes as the step before reuses them instead of calling malloc.
class Storage {
 public:
  explicit Storage(size_t bytes);
  // Wraps memory owned elsewhere (e.g. a slice of a flat parameter buffer kept alive by `owner`).
  Storage(void* data, size_t bytes, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // The version counter every tensor over this storage shares (views included, as PyTorch's
  // views share their base's): each in-place write adds one. Autograd records it when an op
  // saves a tensor for backward and refuses a backward that would read a changed value.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }
  // Set when a recorded op said its backward reads a tensor over this storage (autograd's
  // RecordedNode::saves): its values stay alive for that backward. Never cleared. An op that
  // could keep a smaller copy instead (linear in bf16) does not when the values stay anyway.
  bool read_by_backward() const { return read_by_backward_; }
  void mark_read_by_backward() { read_by_backward_ = true; }

 private:
  uint64_t version_ = 0;
  bool read_by_backward_ = false;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool pooled_ = false;
  std::shared_ptr<void> owner_;
};

// Bytes held in the storage cache but not in use (for benchmarks and tests).
size_t storage_cache_bytes();
void storage_cache_clear();
// Bytes of cache-managed buffers (rounded to 64) in use by tensors now, their peak since the
// start or the last storage_reset_peak(), and bytes held in the cache unused. Buffers that wrap
// memory owned elsewhere (from_storage over a caller's pointer) are not counted.
struct StorageStats {
  size_t live_bytes = 0, peak_live_bytes = 0, cached_bytes = 0;
};
StorageStats storage_stats();
void storage_reset_peak();  // peak_live_bytes = live_bytes
// Buffers obtained from the system (not from the cache) since the program started.
uint64_t storage_fresh_allocations();

class Tensor;
struct TensorImpl;
struct GraphNode;  // autograd's record of the op that made a tensor (autograd/tape_internal.h)
struct GradHooks;  // the hooks registered on a tensor's gradient (autograd/tape_hooks.cpp)

// What register_hook (and Module's hooks) return: remove() unregisters the hook; removing twice,
// or after the tensor or module is gone, does nothing. Dropping the handle keeps the hook
// (PyTorch's RemovableHandle).
class HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(std::function<void()> remove) : remove_(std::move(remove)) {}
  void remove() {
    if (remove_) std::exchange(remove_, nullptr)();
  }

 private:
  std::function<void()> remove_;
};

// Calls f.template operator()<T>() with T = float or double; throws naming `op` for other types.
template <class F>
decltype(auto) dispatch_float(DType dtype, const char* op, F&& f);

class Tensor {
 public:
  Tensor() = default;

  // --- creation ---------------------------------------------------------------------------
  // Without a dtype, the default dtype (get_default_dtype(), float32 unless set), as torch's.
  static Tensor empty(const Shape& shape, DType dtype = get_default_dtype());  // uninitialised
  static Tensor zeros(const Shape& shape, DType dtype = get_default_dtype());
  static Tensor full(const Shape& shape, double value, DType dtype = get_default_dtype());
  static Tensor ones(const Shape& shape, DType dtype = get_default_dtype()) {
    return full(shape, 1.0, dtype);
  }
  // Values in row-major order; their count must equal the shape's numel.
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                            DType dtype = get_default_dtype());
  // Indices (token ids, targets, gather indices): int64 by default, as torch.tensor of Python
  // ints; DType::i32 or DType::u8 on request (a value outside its range then throws); DType::b8
  // gives nonzero = true, as torch.tensor(ints, dtype=torch.bool). A floating dtype throws. A
  // std::vector of int32_t (or another integer type) takes the template below.
  static Tensor from_ids(const std::vector<int64_t>& ids, const Shape& shape,
                         DType dtype = DType::i64);
  template <class I>
  requires(std::is_integral_v<I> && !std::is_same_v<I, int64_t>) static Tensor
      from_ids(const std::vector<I>& ids, const Shape& shape, DType dtype = DType::i64) {
    return from_ids(std::vector<int64_t>(ids.begin(), ids.end()), shape, dtype);
  }
  // Values of another element type (float, int32_t, int64_t, uint8_t, bool), stored as `dtype`:
  // by default their own (a std::vector<int64_t> gives int64; a std::vector<bool> gives bool, as
  // torch.tensor([True, False])). A std::vector<double> takes the overload above (the default
  // dtype unless told, like torch.tensor of Python floats).
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape,
                            DType dtype = dtype_of<T>()) {
    if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> has no data(): bytes first
      const std::vector<uint8_t> bytes(values.begin(), values.end());
      return from_buffer(bytes.data(), DType::u8, static_cast<int64_t>(bytes.size()), shape, dtype,
                         "from_vector");
    } else {
      return from_buffer(values.data(), dtype_of<T>(), static_cast<int64_t>(values.size()), shape,
                         dtype, "from_vector");
    }
  }
  // Copies numel(shape) elements from `data` (or all of `values`, whose size must fit the shape).
  template <class T>
  static Tensor from_data(const T* data, const Shape& shape, DType dtype = dtype_of<T>()) {
    return from_buffer(data, dtype_of<T>(), shape_numel(shape), shape, dtype, "from_data");
  }
  template <class T, size_t N>
  static Tensor from_span(std::span<T, N> values, const Shape& shape,
                          DType dtype = dtype_of<std::remove_const_t<T>>()) {
    return from_buffer(values.data(), dtype_of<std::remove_const_t<T>>(),
                       static_cast<int64_t>(values.size()), shape, dtype, "from_span");
  }
  // A tensor over existing storage (used for views into flat parameter buffers).
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& shape,
                             const Shape& strides, int64_t offset, DType dtype);

  // --- metadata -----------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t offset() const;
  DType dtype() const;
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t axis) const;  // negative axes count from the end
  int64_t numel() const;
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const;
  // A short description for error messages: "'name' [4, 64] float32" or "[4, 64] float32".
  std::string describe() const;

  // --- element access -------------------------------------------------------------------------
  // Pointer to the element at the tensor's offset; checks that T matches the dtype. Raw access,
  // as libtorch's data_ptr(): a write through it is not seen by autograd's version check.
  template <class T>
  T* data() const;
  // data() for a write into a tensor that already exists: adds one to its version first, so a
  // backward that saved this tensor (or a view of its storage) refuses to run. Library code
  // writes existing tensors in place through this, fill() or copy_from().
  template <class T>
  T* mutable_data() const;
  // The in-place write count of this tensor's storage (PyTorch's tensor._version).
  uint64_t version() const;
  double item() const;  // the one element of a 1-element tensor
  // The same as T (float, double, int32_t, int64_t, bool, uint8_t), as libtorch's item<T>():
  // floats to integers truncate toward zero; a value T cannot hold (out of range, NaN to an
  // integer) throws; item<bool>() is nonzero, as Python's bool(t).
  template <class T>
  T item() const;
  double at(const Shape& index) const;    // element at a multi-index
  std::vector<double> to_vector() const;  // all elements in row-major logical order
  std::vector<float> to_floats() const;

  // --- copies and views (recorded, as torch's methods) ------------------------------------------
  // Each is its op in autograd/ops.h: recorded on the tape when grad mode is on and this tensor
  // requires grad, so a gradient flows through it as through torch's method.
  //   contiguous()  itself when already contiguous, else a row-major copy (dg::contiguous)
  //   clone()       always a fresh contiguous copy; the gradient passes through (dg::clone)
  //   to(dtype)     itself when already dtype, else a converted copy (dg::to_dtype)
  //   reshape(s)    a view when contiguous, else a copy; one size may be -1 (dg::reshape)
  //   view(s)       a view or a refusal: needs a contiguous tensor (dg::view)
  //   transpose(a, b), permute(order), narrow(axis, start, length), expand(shape): views
  //   flatten(start, end), squeeze(axis), unsqueeze(axis)
  // detach() shares the values without the graph (dg::detach): the one way to leave it.
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  Tensor reshape(const Shape& shape) const;
  Tensor view(const Shape& shape) const;
  Tensor transpose(int64_t axis0, int64_t axis1) const;
  Tensor permute(const Shape& order) const;
  Tensor narrow(int64_t axis, int64_t start, int64_t length) const;
  Tensor expand(const Shape& shape) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor squeeze(int64_t axis) const;
  Tensor unsqueeze(int64_t axis) const;
  Tensor detach() const;
  // In-place writes (each adds one to the version; never recorded: a backward that saved this
  // tensor then refuses): an elementwise copy of an equal-shaped tensor into this one, and every
  // element set to `value`.
  void copy_from(const Tensor& source);
  void fill(double value);

  // --- autograd metadata ------------------------------------------------------------------------
  bool requires_grad() const;
  Tensor& set_requires_grad(bool value);
  bool is_leaf() const;            // not produced by a recorded op
  Tensor grad() const;             // undefined until a backward reaches this tensor
  void set_grad(const Tensor& g);  // e.g. a view into a flat gradient buffer
  void zero_grad();                // zeroes the gradient in place if present
  const std::string& name() const;
  Tensor& set_name(std::string name);
  // A hook on this tensor's gradient (PyTorch's Tensor.register_hook), defined in
  // autograd/tape_hooks.cpp: each backward or grad() that reaches this tensor calls hook(g) with
  // the gradient this walk computed for it, and a defined result replaces g. Hooks run in
  // registration order, each on the previous one's result. A non-leaf's hooks run before its op's
  // backward reads the gradient (a retained gradient is the replaced one); a leaf's run once the
  // walk is over, on the walk's sum, before it is added into grad(). The tensor must require grad.
  // The hook must not capture this tensor (a cycle): capture nothing or a detach().
  HookHandle register_hook(std::function<Tensor(const Tensor& grad)> hook) const;
  // A hook on a leaf (PyTorch's register_post_accumulate_grad_hook), defined in
  // autograd/tape_hooks.cpp: each backward() that reaches this leaf calls hook(leaf) once its
  // gradient is final for that walk (after the last node that adds to it, or after register_hook's
  // hooks when it has them), with grad mode off, while the rest of the walk is still to run; grad()
  // never calls it. Hooks run in registration order. What it is for: starting work on a finished
  // gradient early (the data-parallel trainer sends gradient buckets while backward goes on). The
  // tensor must be a leaf that requires grad; the hook must not capture it (take `leaf`).
  HookHandle register_post_accumulate_grad_hook(std::function<void(const Tensor& leaf)> hook) const;

  TensorImpl* impl() const { return impl_.get(); }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }
  // How many handles share this tensor's metadata, and how many tensors (views included) share
  // its storage. Autograd uses them to tell a gradient buffer nobody else holds (tape.cpp).
  long handle_count() const { return impl_.use_count(); }
  long storage_holders() const;

 private:
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  // count elements of type `source` at `data` -> a new tensor of `dtype`; `op` names errors.
  static Tensor from_buffer(const void* data, DType source, int64_t count, const Shape& shape,
                            DType dtype, const char* op);
  std::shared_ptr<TensorImpl> impl_;
  friend struct TensorAccess;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  int64_t offset = 0;
  DType dtype = DType::f32;
  // autograd
  bool requires_grad = false;
  bool is_leaf = true;
  bool retain_grad = false;
  Tensor grad;
  std::shared_ptr<GraphNode> grad_fn;  // the recorded op that made this tensor; null for leaves
  std::shared_ptr<GradHooks> hooks;    // register_hook's hooks; null when none was registered
  bool made_without_grad = false;      // made while grad mode was off (for error messages)
  std::string name;
};

// Grad mode's flag (autograd/tape.h's grad_enabled and NoGradGuard set it). It lives here so
// that a tensor made while it was off can say so in backward's error.
namespace detail {
inline thread_local bool grad_mode = true;
// Throws std::logic_error "<accessor>: the tensor is undefined: ..." with its usual causes.
[[noreturn]] void throw_undefined(const char* accessor);
// Throws std::logic_error "<accessor>: the tensor's values were released: ..." (autograd's tape
// frees an input's values once only the op that kept its own copy of them holds the input).
[[noreturn]] void throw_released(const char* accessor);
}  // namespace detail

// Throws std::invalid_argument "op: expected <what>, got <tensor>" unless cond holds.
void check_arg(bool cond, const char* op, const Tensor& t, const std::string& what);
// Throws std::invalid_argument "op: dtypes differ: <a> and <b>" (ops never promote silently).
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);

// ---- unrecorded views and copies (library-internal) -------------------------------------------
// What kernels, backward closures, optimisers and checkpoints use to look at values without
// growing the graph. They record nothing and never require grad, whatever the input: a user's
// program wants Tensor's methods (recorded) or detach(). Views share storage and change metadata.
namespace raw {
Tensor view_reshape(const Tensor& t, const Shape& shape);  // needs contiguous; one size may be -1
Tensor view_transpose(const Tensor& t, int64_t a, int64_t b);
Tensor view_permute(const Tensor& t, const Shape& order);
Tensor view_narrow(const Tensor& t, int64_t axis, int64_t start, int64_t length);
Tensor view_expand(const Tensor& t, const Shape& shape);  // broadcast: stride 0 on new sizes
Tensor clone(const Tensor& t);                            // a fresh contiguous copy
}  // namespace raw

// ---- template definitions ------------------------------------------------------------------

template <class F>
decltype(auto) dispatch_float(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f.template operator()<float>();
    case DType::f64:
      return f.template operator()<double>();
    default:
      throw std::invalid_argument(std::string(op) + ": expected a float32 or float64 tensor, got " +
                                  dtype_name(dtype));
  }
}

// Runs f.template operator()<T>() for every element type: float, double, int32_t, int64_t, bool,
// uint8_t.
template <class F>
decltype(auto) dispatch_any(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f.template operator()<float>();
    case DType::f64:
      return f.template operator()<double>();
    case DType::i32:
      return f.template operator()<int32_t>();
    case DType::i64:
      return f.template operator()<int64_t>();
    case DType::b8:
      return f.template operator()<bool>();
    case DType::u8:
      return f.template operator()<uint8_t>();
  }
  throw std::logic_error("dispatch_any: unknown dtype");
}

template <class T>
T* Tensor::data() const {
  if (!impl_) detail::throw_undefined("data()");
  if (!impl_->storage) [[unlikely]]
    detail::throw_released("data()");
  if (impl_->dtype != dtype_of<T>())
    throw std::invalid_argument(std::string("data(): tensor ") + describe() + " is not " +
                                dtype_name(dtype_of<T>()));
  return static_cast<T*>(impl_->storage->data()) + impl_->offset;
}

template <class T>
T* Tensor::mutable_data() const {
  T* p = data<T>();
  impl_->storage->bump_version();
  return p;
}

}  // namespace dg
