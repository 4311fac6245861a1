// Tensor creation, metadata, element access, copies and views (see tensor.h).
#include "tensor/tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <numeric>
#include <unordered_map>
#include <utility>

#include "tensor/threads.h"

namespace dg {

// ---- dtypes ----------------------------------------------------------------------------------

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
    case DType::b8:
    case DType::u8:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::b8:
      return "bool";
    case DType::u8:
      return "uint8";
  }
  return "?";
}

bool is_floating(DType dtype) { return dtype == DType::f32 || dtype == DType::f64; }

namespace {
std::atomic<DType> default_dtype{DType::f32};
}
DType get_default_dtype() { return default_dtype.load(std::memory_order_relaxed); }
void set_default_dtype(DType dtype) {
  if (!is_floating(dtype))
    throw std::invalid_argument(fmt::format(
        "set_default_dtype: only floating-point types are supported as the default type, got {}",
        dtype_name(dtype)));
  default_dtype.store(dtype, std::memory_order_relaxed);
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  auto rank = [](DType d) {  // bool, then the integers by width, then the floats by width
    switch (d) {
      case DType::b8:
        return 0;
      case DType::u8:
        return 1;
      case DType::i32:
        return 2;
      case DType::i64:
        return 3;
      case DType::f32:
        return 4;
      case DType::f64:
        return 5;
    }
    return 0;
  };
  // an integer with a float gives the float, whatever the widths (int64 with float32: float32)
  if (is_floating(a) != is_floating(b)) return is_floating(a) ? a : b;
  return rank(a) >= rank(b) ? a : b;
}

// ---- storage cache ---------------------------------------------------------------------------
// Freed buffers are kept by rounded size and handed out again. A training loop allocates the
// same sizes every step, so after the first step it stops calling malloc.

namespace {
constexpr size_t kAlign = 64;
constexpr size_t kCacheLimit = size_t(8) << 30;  // never hoard more than 8 GiB

struct StorageCache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_by_size;
  size_t cached_bytes = 0;
};

StorageCache& cache() {
  static StorageCache* c = new StorageCache();  // leaked on purpose: outlives static tensors
  return *c;
}

std::atomic<uint64_t> g_fresh_allocations{0};
// Bytes (rounded) of cache-managed buffers in use, and their peak; updated under the cache lock.
size_t g_live_bytes = 0;
size_t g_peak_live_bytes = 0;

size_t round_bytes(size_t bytes) {
  return (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
}
}  // namespace

Storage::Storage(size_t bytes) : bytes_(bytes), pooled_(true) {
  apply_thread_environment_once();  // the library's first use applies DEPTHGRAD_THREADS
  size_t rounded = round_bytes(bytes);
  {
    StorageCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.free_by_size.find(rounded);
    if (it != c.free_by_size.end() && !it->second.empty()) {
      data_ = it->second.back();
      it->second.pop_back();
      c.cached_bytes -= rounded;
      g_live_bytes += rounded;
      g_peak_live_bytes = std::max(g_peak_live_bytes, g_live_bytes);
      return;
    }
  }
  data_ = std::aligned_alloc(kAlign, rounded);
  if (!data_) throw std::bad_alloc();
  g_fresh_allocations.fetch_add(1, std::memory_order_relaxed);
  StorageCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  g_live_bytes += rounded;
  g_peak_live_bytes = std::max(g_peak_live_bytes, g_live_bytes);
}

Storage::Storage(void* data, size_t bytes, std::shared_ptr<void> owner)
    : data_(data), bytes_(bytes), pooled_(false), owner_(std::move(owner)) {}

Storage::~Storage() {
  if (!pooled_ || !data_) return;
  size_t rounded = round_bytes(bytes_);
  StorageCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  g_live_bytes -= rounded;
  if (c.cached_bytes + rounded > kCacheLimit) {
    std::free(data_);
    return;
  }
  // Keeping the buffer may allocate (a map node, a longer list). A destructor runs while an
  // exception unwinds, and a bad_alloc thrown from here would terminate the program: when the
  // cache cannot grow, the buffer goes back to the system instead.
  try {
    c.free_by_size[rounded].push_back(data_);
  } catch (...) {
    std::free(data_);
    return;
  }
  c.cached_bytes += rounded;
}

long Tensor::storage_holders() const {
  return impl_ && impl_->storage ? impl_->storage.use_count() : 0;
}

size_t storage_cache_bytes() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  return cache().cached_bytes;
}

StorageStats storage_stats() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  return {g_live_bytes, g_peak_live_bytes, cache().cached_bytes};
}

void storage_reset_peak() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  g_peak_live_bytes = g_live_bytes;
}

uint64_t storage_fresh_allocations() { return g_fresh_allocations.load(std::memory_order_relaxed); }

void storage_cache_clear() {
  StorageCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& [size, list] : c.free_by_size)
    for (void* p : list) std::free(p);
  c.free_by_size.clear();
  c.cached_bytes = 0;
}

// ---- helpers -----------------------------------------------------------------------------------

void check_arg(bool cond, const char* op, const Tensor& t, const std::string& what) {
  if (!cond)
    throw std::invalid_argument(fmt::format("{}: expected {}, got {}", op, what, t.describe()));
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(
        fmt::format("{}: dtypes differ: {} and {} (depthgrad does not promote: convert one "
                    "with .to(dtype))",
                    op, a.describe(), b.describe()));
}

namespace {
// Calls f(element offset) for every element of (shape, strides) in row-major logical order.
template <class F>
void for_each_offset(const Shape& shape, const Shape& strides, int64_t offset, F&& f) {
  int64_t n = shape_numel(shape);
  if (n == 0) return;
  int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> index(rank, 0);
  int64_t pos = offset;
  for (int64_t i = 0; i < n; ++i) {
    f(pos);
    for (int64_t k = rank - 1; k >= 0; --k) {
      if (++index[k] < shape[k]) {
        pos += strides[k];
        break;
      }
      pos -= strides[k] * (shape[k] - 1);
      index[k] = 0;
    }
  }
}

}  // namespace

// ---- creation ----------------------------------------------------------------------------------

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  for (int64_t s : shape)
    if (s < 0)
      throw std::invalid_argument(
          fmt::format("empty: negative size in shape {}", shape_str(shape)));
  auto impl = std::make_shared<TensorImpl>();
  impl->made_without_grad = !detail::grad_mode;
  impl->storage = std::make_shared<Storage>(shape_numel(shape) * dtype_size(dtype));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.impl_->storage->data(), 0, t.numel() * dtype_size(dtype));
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill(value);
  return t;
}

Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, DType dtype) {
  if (static_cast<int64_t>(values.size()) != shape_numel(shape))
    throw std::invalid_argument(fmt::format("from_vector: {} values do not fill shape {}",
                                            values.size(), shape_str(shape)));
  Tensor t = empty(shape, dtype);
  dispatch_any(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = convert_element<T>(values[i]);
  });
  return t;
}

Tensor Tensor::from_ids(const std::vector<int64_t>& ids, const Shape& shape, DType dtype) {
  if (is_floating(dtype))
    throw std::invalid_argument(fmt::format(
        "from_ids: dtype must be int64, int32, uint8 or bool, got {}", dtype_name(dtype)));
  if (static_cast<int64_t>(ids.size()) != shape_numel(shape))
    throw std::invalid_argument(
        fmt::format("from_ids: {} ids do not fill shape {}", ids.size(), shape_str(shape)));
  Tensor t = empty(shape, dtype);
  if (dtype == DType::i64) {
    std::memcpy(t.data<int64_t>(), ids.data(), ids.size() * sizeof(int64_t));
    return t;
  }
  dispatch_any(dtype, [&]<class T>() {
    T* out = t.data<T>();
    for (size_t i = 0; i < ids.size(); ++i) {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)  // floats: refused above
        if (!std::in_range<T>(ids[i]))
          throw std::out_of_range(fmt::format("from_ids: id {} at position {} does not fit {}",
                                              ids[i], i, dtype_name(dtype)));
      out[i] = convert_element<T>(ids[i]);
    }
  });
  return t;
}

Tensor Tensor::from_buffer(const void* data, DType source, int64_t count, const Shape& shape,
                           DType dtype, const char* op) {
  if (count != shape_numel(shape))
    throw std::invalid_argument(
        fmt::format("{}: {} values do not fill shape {}", op, count, shape_str(shape)));
  if (count > 0 && data == nullptr)
    throw std::invalid_argument(fmt::format("{}: null data for shape {}", op, shape_str(shape)));
  Tensor t = empty(shape, dtype);
  dispatch_any(source, [&]<class S>() {
    const S* in = static_cast<const S*>(data);
    dispatch_any(dtype, [&]<class T>() {
      T* out = t.data<T>();
      for (int64_t i = 0; i < count; ++i) out[i] = convert_element<T>(in[i]);
    });
  });
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, const Shape& shape,
                            const Shape& strides, int64_t offset, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->made_without_grad = !detail::grad_mode;
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

// ---- metadata ----------------------------------------------------------------------------------

namespace {
const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl, const char* accessor) {
  if (!impl) detail::throw_undefined(accessor);
  return *impl;
}
}  // namespace

void detail::throw_released(const char* accessor) {
  throw std::logic_error(fmt::format(
      "{}: the tensor's values were released: the tape frees an op's input once nothing but that "
      "op holds it and the op kept its own copy for backward (linear in bf16 precision keeps its "
      "input rounded to bf16); only its shape, dtype and gradient remain",
      accessor));
}

void detail::throw_undefined(const char* accessor) {
  throw std::logic_error(fmt::format(
      "{}: the tensor is undefined: a default-constructed dg::Tensor, or a gradient read with "
      "grad() before any backward reached its tensor",
      accessor));
}

const Shape& Tensor::shape() const { return checked(impl_, "shape()").shape; }
const Shape& Tensor::strides() const { return checked(impl_, "strides()").strides; }
int64_t Tensor::offset() const { return checked(impl_, "offset()").offset; }
DType Tensor::dtype() const { return checked(impl_, "dtype()").dtype; }
const std::shared_ptr<Storage>& Tensor::storage() const {
  const TensorImpl& t = checked(impl_, "storage()");
  if (!t.storage) [[unlikely]]
    detail::throw_released("storage()");
  return t.storage;
}
uint64_t Tensor::version() const { return storage()->version(); }
int64_t Tensor::numel() const { return shape_numel(shape()); }

int64_t Tensor::size(int64_t axis) const { return shape()[normalize_axis(axis, dim(), "size")]; }

bool Tensor::is_contiguous() const {
  const TensorImpl& t = checked(impl_, "is_contiguous()");
  return is_contiguous_layout(t.shape, t.strides);
}

std::string Tensor::describe() const {
  if (!impl_) return "an undefined tensor";
  std::string base = fmt::format("{} {}", shape_str(impl_->shape), dtype_name(impl_->dtype));
  return impl_->name.empty() ? base : fmt::format("'{}' {}", impl_->name, base);
}

// ---- element access ----------------------------------------------------------------------------

double Tensor::item() const {
  if (!impl_) detail::throw_undefined("item()");
  if (numel() != 1)
    throw std::invalid_argument(
        fmt::format("item: tensor {} has more than one element", describe()));
  return dispatch_any(dtype(), [&]<class T>() { return static_cast<double>(*data<T>()); });
}

namespace {
// value as T, or std::out_of_range when T cannot hold it (item<T>'s check).
template <class T, class S>
T checked_item(S value, const Tensor& t) {
  bool fits = true;
  if constexpr (std::is_integral_v<T> && std::is_floating_point_v<S>) {
    // Truncation toward zero must land in T's range: -2^63 <= value < 2^63 for int64.
    fits = std::isfinite(value) &&
           static_cast<long double>(value) >
               static_cast<long double>(std::numeric_limits<T>::min()) - 1 &&
           static_cast<long double>(value) <
               static_cast<long double>(std::numeric_limits<T>::max()) + 1;
  } else if constexpr (std::is_integral_v<T> && std::is_integral_v<S>) {
    fits = std::in_range<T>(value);
  } else if constexpr (std::is_same_v<T, float> && std::is_same_v<S, double>) {
    fits = !std::isfinite(value) || std::abs(value) <= std::numeric_limits<float>::max();
  }
  if (!fits)
    throw std::out_of_range(fmt::format("item<{}>: the value {} of tensor {} does not fit",
                                        dtype_name(dtype_of<T>()), static_cast<double>(value),
                                        t.describe()));
  return static_cast<T>(value);
}
}  // namespace

template <class T>
T Tensor::item() const {
  if (!impl_) detail::throw_undefined("item()");
  if (numel() != 1)
    throw std::invalid_argument(
        fmt::format("item: tensor {} has more than one element", describe()));
  return dispatch_any(dtype(), [&]<class S>() {
    if constexpr (std::is_same_v<T, bool>) {
      return *data<S>() != S(0);  // Python's bool(t): nonzero (NaN too) is true
    } else if constexpr (std::is_same_v<S, bool>) {
      return static_cast<T>(*data<S>() ? 1 : 0);
    } else {
      return checked_item<T, S>(*data<S>(), *this);
    }
  });
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int32_t Tensor::item<int32_t>() const;
template int64_t Tensor::item<int64_t>() const;
template bool Tensor::item<bool>() const;
template uint8_t Tensor::item<uint8_t>() const;

double Tensor::at(const Shape& index) const {
  if (!impl_) detail::throw_undefined("at()");
  if (static_cast<int64_t>(index.size()) != dim())
    throw std::invalid_argument(
        fmt::format("at: index {} does not match tensor {}", shape_str(index), describe()));
  int64_t pos = 0;
  for (size_t k = 0; k < index.size(); ++k) {
    if (index[k] < 0 || index[k] >= shape()[k])
      throw std::out_of_range(
          fmt::format("at: index {} is out of range for tensor {}", shape_str(index), describe()));
    pos += index[k] * strides()[k];
  }
  return dispatch_any(dtype(), [&]<class T>() { return static_cast<double>(data<T>()[pos]); });
}

std::vector<double> Tensor::to_vector() const {
  if (!impl_) detail::throw_undefined("to_vector()");
  std::vector<double> out;
  out.reserve(numel());
  dispatch_any(dtype(), [&]<class T>() {
    const T* base = static_cast<const T*>(storage()->data());
    for_each_offset(shape(), strides(), offset(),
                    [&](int64_t pos) { out.push_back(static_cast<double>(base[pos])); });
  });
  return out;
}

std::vector<float> Tensor::to_floats() const {
  std::vector<double> v = to_vector();
  return std::vector<float>(v.begin(), v.end());
}

// ---- copies ------------------------------------------------------------------------------------

Tensor raw::clone(const Tensor& t) {
  Tensor out = Tensor::empty(t.shape(), t.dtype());
  out.copy_from(t);
  return out;
}

void Tensor::copy_from(const Tensor& source) {
  if (source.shape() != shape())
    throw std::invalid_argument(fmt::format("copy_from: source {} does not match destination {}",
                                            source.describe(), describe()));
  storage()->bump_version();
  if (source.dtype() == dtype() && source.is_contiguous() && is_contiguous()) {
    size_t element = dtype_size(dtype());
    std::memmove(static_cast<char*>(storage()->data()) + offset() * element,
                 static_cast<const char*>(source.storage()->data()) + source.offset() * element,
                 numel() * element);
    return;
  }
  dispatch_any(dtype(), [&]<class D>() {
    D* dst_base = static_cast<D*>(storage()->data());
    std::vector<int64_t> dst_offsets;
    dst_offsets.reserve(numel());
    for_each_offset(shape(), strides(), offset(), [&](int64_t p) { dst_offsets.push_back(p); });
    dispatch_any(source.dtype(), [&]<class S>() {
      const S* src_base = static_cast<const S*>(source.storage()->data());
      size_t i = 0;
      for_each_offset(source.shape(), source.strides(), source.offset(), [&](int64_t p) {
        dst_base[dst_offsets[i++]] = convert_element<D>(src_base[p]);
      });
    });
  });
}

void Tensor::fill(double value) {
  storage()->bump_version();
  dispatch_any(dtype(), [&]<class T>() {
    T* base = static_cast<T*>(storage()->data());
    const T v = convert_element<T>(value);
    if (is_contiguous()) {  // one flat pass (memset for +0.0), not an index walk
      T* p = base + offset();
      const int64_t n = numel();
      if (v == T(0) && !std::signbit(static_cast<double>(v)))
        std::memset(p, 0, static_cast<size_t>(n) * sizeof(T));
      else
        std::fill(p, p + n, v);
      return;
    }
    for_each_offset(shape(), strides(), offset(), [&](int64_t p) { base[p] = v; });
  });
}

// ---- unrecorded views (dg::raw) ----------------------------------------------------------

Tensor raw::view_reshape(const Tensor& t, const Shape& new_shape) {
  if (!t.is_contiguous())
    throw std::invalid_argument(
        fmt::format("reshape: tensor {} is not contiguous; call contiguous() first", t.describe()));
  const Shape target = resolve_reshape(new_shape, t.numel(), t.describe());
  return Tensor::from_storage(t.storage(), target, contiguous_strides(target), t.offset(),
                              t.dtype());
}

Tensor raw::view_transpose(const Tensor& t, int64_t a, int64_t b) {
  int64_t r = t.dim();
  a = normalize_axis(a, r, "transpose");
  b = normalize_axis(b, r, "transpose");
  Shape s = t.shape(), st = t.strides();
  std::swap(s[a], s[b]);
  std::swap(st[a], st[b]);
  return Tensor::from_storage(t.storage(), s, st, t.offset(), t.dtype());
}

Tensor raw::view_permute(const Tensor& t, const Shape& order) {
  int64_t r = t.dim();
  if (static_cast<int64_t>(order.size()) != r)
    throw std::invalid_argument(
        fmt::format("permute: order {} does not match tensor {}", shape_str(order), t.describe()));
  std::vector<bool> seen(r, false);
  Shape s(r), st(r);
  for (int64_t k = 0; k < r; ++k) {
    int64_t a = normalize_axis(order[k], r, "permute");
    if (seen[a])
      throw std::invalid_argument(
          fmt::format("permute: order {} repeats an axis", shape_str(order)));
    seen[a] = true;
    s[k] = t.shape()[a];
    st[k] = t.strides()[a];
  }
  return Tensor::from_storage(t.storage(), s, st, t.offset(), t.dtype());
}

Tensor raw::view_narrow(const Tensor& t, int64_t axis, int64_t start, int64_t length) {
  axis = normalize_axis(axis, t.dim(), "narrow");
  if (start < 0 || length < 0 || start + length > t.shape()[axis])
    throw std::out_of_range(fmt::format("narrow: [{}, {}) is out of range for axis {} of tensor {}",
                                        start, start + length, axis, t.describe()));
  Shape s = t.shape();
  s[axis] = length;
  return Tensor::from_storage(t.storage(), s, t.strides(), t.offset() + start * t.strides()[axis],
                              t.dtype());
}

Tensor raw::view_expand(const Tensor& t, const Shape& target) {
  Shape b = broadcast_shapes(t.shape(), target, "expand");
  if (b != target)
    throw std::invalid_argument(
        fmt::format("expand: tensor {} cannot be expanded to {}", t.describe(), shape_str(target)));
  return Tensor::from_storage(t.storage(), target,
                              broadcast_strides(t.shape(), t.strides(), target), t.offset(),
                              t.dtype());
}

// ---- autograd metadata

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }

Tensor& Tensor::set_requires_grad(bool value) {
  checked(impl_, "set_requires_grad()");
  if (value && !is_floating(dtype()))
    throw std::invalid_argument(
        fmt::format("requires_grad: tensor {} is not floating point", describe()));
  impl_->requires_grad = value;
  return *this;
}

bool Tensor::is_leaf() const { return checked(impl_, "is_leaf()").is_leaf; }
Tensor Tensor::grad() const { return checked(impl_, "grad()").grad; }

void Tensor::set_grad(const Tensor& g) {
  checked(impl_, "set_grad()");
  if (g.defined() && (g.shape() != shape() || g.dtype() != dtype()))
    throw std::invalid_argument(
        fmt::format("set_grad: gradient {} does not match tensor {}", g.describe(), describe()));
  impl_->grad = g;
}

void Tensor::zero_grad() {
  if (impl_ && impl_->grad.defined()) impl_->grad.fill(0.0);
}

const std::string& Tensor::name() const { return checked(impl_, "name()").name; }

Tensor& Tensor::set_name(std::string name) {
  checked(impl_, "set_name()");
  impl_->name = std::move(name);
  return *this;
}

}  // namespace dg
