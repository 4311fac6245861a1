// Shape ops: reshape, transpose, permute, slice, contiguous, expand, squeeze, unsqueeze, flatten,
// cat, stack, and split/chunk, which return slices.
// transpose/permute/slice/expand (and reshape of a contiguous tensor) return views that share
// storage; their backwards add g into the matching view of the input's gradient buffer
// (add_strided), or sum it over broadcast axes (expand). Copies happen only in reshape of a
// non-contiguous tensor, contiguous() of a view, cat and stack.
// squeeze/unsqueeze/flatten are views too (flatten copies first when its axes do not merge).
// Under create_graph (autograd/tape.h) reshape, expand, contiguous, to_dtype, squeeze, unsqueeze
// and flatten run their backward (itself a shape op) recorded; transpose, permute, slice, cat and
// stack keep the strided add above and run a recorded twin instead (the inverse view; slice pads g
// with zeros by a cat, cat and stack slice g). None saves an input for the version check: they read
// only shapes. Does not support negative steps, strided slices or in-place writes through views.
// Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them), views and copies in
// tests/test_kernels_matmul.cpp, split/chunk in tests/test_kernels_index.cpp, squeeze, unsqueeze
// and flatten in tests/test_elementary_ops.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "autograd/grad_sink.h"
#include "autograd/op_trace.h"
#include "autograd/ops.h"
#include "tensor/kernels_matmul.h"
#include "tensor/profile.h"

namespace dg {

namespace {
// grad(a) seen through `view` (a function that makes the same view of any tensor of a's shape)
// += g. The view maps each gradient element to the input element it came from. A view that
// covers every element (transpose, permute) writes all of a's gradient (GradSink: g is copied
// into a fresh buffer instead of added onto zeros); a slice accumulates into its part of it.
template <class View>
void add_into_view_of_grad(const Tensor& a, const Tensor& g, View view, bool covers_all) {
  if (!covers_all) {
    Tensor target = view(grad_of(a));
    add_strided(target, g);
    return;
  }
  GradSink sink(a);
  Tensor target = view(sink.buffer);
  if (sink.fresh)
    copy_strided(target, g);
  else
    add_strided(target, g);
  sink.finish();
}

// A contiguous copy of a (any layout).
Tensor copy_of(const Tensor& a) {
  Tensor c = Tensor::empty(a.shape(), a.dtype());
  copy_strided(c, a);
  return c;
}

// g with `before` zeros ahead of it and `after` zeros behind it along axis ax, as a recorded cat
// with constant zeros: slice's backward under create_graph (its own backward slices g back).
Tensor pad_axis(const Tensor& g, int64_t ax, int64_t before, int64_t after);
// t viewed with a size-1 axis inserted at `axis` (0 ≤ axis ≤ rank).
Tensor unsqueeze_view(const Tensor& t, int64_t axis);
}  // namespace

// ---- reshape: a view when contiguous, else a copy; backward reshapes g back -----------------
Tensor reshape(const Tensor& a, const Shape& shape) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = raw::view_reshape(a.is_contiguous() ? a : copy_of(a), shape);
  if (tracing()) trace_op("reshape", {a}, {out});
  if (should_record({a}))
    record("reshape", {a}, out, [a](const Tensor& g) { accumulate_grad(a, reshape(g, a.shape())); })
        .saves({})
        .composed();
  return out;
}

// ---- transpose / permute: views; backward adds g into the same view of grad(a) --------------
Tensor transpose(const Tensor& a, int64_t axis0, int64_t axis1) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = raw::view_transpose(a, axis0, axis1);
  if (tracing()) trace_op("transpose", {a}, {out}, {{"axis0", axis0}, {"axis1", axis1}});
  if (should_record({a}))
    record("transpose", {a}, out,
           [a, axis0, axis1](const Tensor& g) {
             add_into_view_of_grad(
                 a, g, [&](const Tensor& t) { return raw::view_transpose(t, axis0, axis1); }, true);
           })
        .saves({})
        .differentiable([a, axis0, axis1](const Tensor& g, const Tensor&) {
          accumulate_grad(a, transpose(g, axis0, axis1));
        });
  return out;
}

Tensor permute(const Tensor& a, const Shape& order) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = raw::view_permute(a, order);
  if (tracing()) trace_op("permute", {a}, {out}, {{"order", order}});
  if (should_record({a}))
    record("permute", {a}, out,
           [a, order](const Tensor& g) {
             add_into_view_of_grad(
                 a, g, [&](const Tensor& t) { return raw::view_permute(t, order); }, true);
           })
        .saves({})
        .differentiable([a, order](const Tensor& g, const Tensor&) {
          Shape inverse(order.size());  // out axis k is a's axis order[k]
          for (size_t k = 0; k < order.size(); ++k)
            inverse[static_cast<size_t>(normalize_axis(order[k], a.dim(), "permute"))] =
                static_cast<int64_t>(k);
          accumulate_grad(a, permute(g, inverse));
        });
  return out;
}

// ---- slice [start, end) of one axis (negative indices count from the end): a view -----------
Tensor slice(const Tensor& a, int64_t axis, int64_t start, int64_t end) {
  ScopedOpTimer op_timer(OpFamily::other);
  const int64_t ax = normalize_axis(axis, a.dim(), "slice");
  const int64_t size = a.shape()[ax];
  const int64_t s = start < 0 ? start + size : start, e = end < 0 ? end + size : end;
  if (s < 0 || e > size || s > e)
    throw std::out_of_range(fmt::format("slice: [{}, {}) is out of range for axis {} of {}", start,
                                        end, axis, a.describe()));
  Tensor out = raw::view_narrow(a, ax, s, e - s);
  if (tracing()) trace_op("slice", {a}, {out}, {{"axis", ax}, {"start", s}, {"end", e}});
  if (should_record({a}))
    record("slice", {a}, out,
           [a, ax, s, e](const Tensor& g) {
             add_into_view_of_grad(
                 a, g, [&](const Tensor& t) { return raw::view_narrow(t, ax, s, e - s); }, false);
           })
        .saves({})
        .differentiable([a, ax, s, e](const Tensor& g, const Tensor&) {
          accumulate_grad(a, pad_axis(g, ax, s, a.shape()[ax] - e));
        });
  return out;
}

// ---- contiguous: the input itself when already contiguous, else a recorded copy -------------
Tensor contiguous(const Tensor& a) {
  ScopedOpTimer op_timer(OpFamily::other);
  if (a.is_contiguous()) return a;
  Tensor out = copy_of(a);
  if (tracing()) trace_op("contiguous", {a}, {out});
  if (should_record({a}))
    record("contiguous", {a}, out, [a](const Tensor& g) { accumulate_grad(a, g); })
        .saves({})
        .composed();
  return out;
}

// ---- to_dtype: an elementwise conversion; backward converts g back to a's dtype ---------------
Tensor to_dtype(const Tensor& a, DType dtype) {
  ScopedOpTimer op_timer(OpFamily::other);
  if (a.dtype() == dtype) return a;
  const Tensor in = a.is_contiguous() ? a : copy_of(a);
  Tensor out = Tensor::empty(a.shape(), dtype);
  dispatch_any(in.dtype(), [&]<class From>() {
    dispatch_any(dtype, [&]<class To>() {
      const From* src = in.data<From>();  // [n] -> [n]
      To* dst = out.data<To>();
      for (int64_t i = 0; i < in.numel(); ++i) dst[i] = convert_element<To>(src[i]);
    });
  });
  if (tracing()) trace_op("to_dtype", {a}, {out});
  if (is_floating(a.dtype()) && is_floating(dtype) && should_record({a}))
    record("to_dtype", {a}, out,
           [a](const Tensor& g) { accumulate_grad(a, to_dtype(g, a.dtype())); })
        .saves({})
        .composed();
  return out;
}

// ---- clone: always a fresh contiguous copy; the gradient passes straight through ---------------
Tensor clone(const Tensor& a) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = copy_of(a);
  if (tracing()) trace_op("clone", {a}, {out});
  if (should_record({a}))
    record("clone", {a}, out, [a](const Tensor& g) { accumulate_grad(a, g); }).saves({}).composed();
  return out;
}

// ---- view: a reshape that never copies (torch's view) ------------------------------------------
namespace {
// The strides that show a tensor of (shape, strides) as new_shape without moving an element, or
// nothing when there are none: each run of axes that are contiguous with one another in memory
// may be split or merged, never two runs into one (torch's rule for view).
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides,
                                  const Shape& new_shape) {
  if (shape.empty() || shape_numel(shape) == 0) return contiguous_strides(new_shape);
  Shape out(new_shape.size());
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t run_stride = strides.back(), run_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    run_numel *= shape[d];
    const bool run_ends = d == 0 || (shape[d - 1] != 1 && strides[d - 1] != run_numel * run_stride);
    if (!run_ends) continue;
    while (view_d >= 0 && (view_numel < run_numel || new_shape[view_d] == 1)) {
      out[view_d] = view_numel * run_stride;
      view_numel *= new_shape[view_d--];
    }
    if (view_numel != run_numel) return std::nullopt;
    if (d > 0) run_stride = strides[d - 1], run_numel = 1, view_numel = 1;
  }
  if (view_d != -1) return std::nullopt;
  return out;
}
}  // namespace

Tensor view(const Tensor& a, const Shape& shape) {
  if (a.is_contiguous()) return reshape(a, shape);
  const Shape target = resolve_reshape(shape, a.numel(), a.describe());
  const std::optional<Shape> strides = view_strides(a.shape(), a.strides(), target);
  if (!strides)
    throw std::invalid_argument(fmt::format(
        "view: tensor {} cannot be viewed as shape {}: its strides {} do not allow it without a "
        "copy; use reshape (copies when needed) or contiguous() first",
        a.describe(), shape_str(shape), shape_str(a.strides())));
  Tensor out = Tensor::from_storage(a.storage(), target, *strides, a.offset(), a.dtype());
  if (tracing()) trace_op("reshape", {a}, {out});
  if (should_record({a}))
    record("view", {a}, out, [a](const Tensor& g) { accumulate_grad(a, reshape(g, a.shape())); })
        .saves({})
        .composed();
  return out;
}

// ---- narrow: `length` elements of one axis from `start` (negative counts from the end) --------
Tensor narrow(const Tensor& a, int64_t axis, int64_t start, int64_t length) {
  const int64_t size = a.shape()[normalize_axis(axis, a.dim(), "narrow")];
  const int64_t s = start < 0 ? start + size : start;
  if (length < 0 || s < 0 || s + length > size)
    throw std::out_of_range(
        fmt::format("narrow: start {} and length {} are out of range for axis {} of {}", start,
                    length, axis, a.describe()));
  return slice(a, axis, s, s + length);
}

// The Tensor methods (declared in tensor/tensor.h) are these ops, recorded as torch's methods are.
Tensor Tensor::contiguous() const { return dg::contiguous(*this); }
Tensor Tensor::clone() const { return dg::clone(*this); }
Tensor Tensor::to(DType dtype) const { return to_dtype(*this, dtype); }
Tensor Tensor::reshape(const Shape& shape) const { return dg::reshape(*this, shape); }
Tensor Tensor::view(const Shape& shape) const { return dg::view(*this, shape); }
Tensor Tensor::transpose(int64_t axis0, int64_t axis1) const {
  return dg::transpose(*this, axis0, axis1);
}
Tensor Tensor::permute(const Shape& order) const { return dg::permute(*this, order); }
Tensor Tensor::narrow(int64_t axis, int64_t start, int64_t length) const {
  return dg::narrow(*this, axis, start, length);
}
Tensor Tensor::expand(const Shape& shape) const { return dg::expand(*this, shape); }
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  return dg::flatten(*this, start_dim, end_dim);
}
Tensor Tensor::squeeze(int64_t axis) const { return dg::squeeze(*this, axis); }
Tensor Tensor::unsqueeze(int64_t axis) const { return dg::unsqueeze(*this, axis); }
Tensor Tensor::detach() const { return dg::detach(*this); }

// ---- expand: a broadcast view (stride 0); backward sums g over the broadcast axes -----------
Tensor expand(const Tensor& a, const Shape& shape) {
  ScopedOpTimer op_timer(OpFamily::other);
  Shape target = shape;  // -1 keeps a's size on that axis (axes aligned from the right), as torch
  const int64_t lead = static_cast<int64_t>(target.size()) - a.dim();
  for (int64_t k = 0; k < static_cast<int64_t>(target.size()); ++k)
    if (target[k] == -1) {
      if (k < lead)
        throw std::invalid_argument(
            fmt::format("expand: size -1 is not allowed on a new leading axis ({} to {})",
                        a.describe(), shape_str(shape)));
      target[k] = a.shape()[k - lead];
    }
  Tensor out = raw::view_expand(a, target);
  if (tracing()) trace_op("expand", {a}, {out});
  if (should_record({a}))
    record("expand", {a}, out, [a](const Tensor& g) { accumulate_grad(a, g); })
        .saves({})
        .composed();
  return out;
}

// ---- squeeze / unsqueeze / flatten: views of a with other sizes; backward reshapes g back ------
namespace {
// axis in [−rank, rank) made non-negative, or an error naming the op, the axis and a's shape.
int64_t axis_of(const Tensor& a, int64_t axis, int64_t rank, const char* op) {
  const int64_t ax = axis < 0 ? axis + rank : axis;
  if (ax < 0 || ax >= rank)
    throw std::invalid_argument(fmt::format("{}: axis {} is out of range [{}, {}) for {}", op, axis,
                                            -rank, rank, a.describe()));
  return ax;
}

// out (a view of a's storage with `shape` and `strides`), recorded as `op`: g reshaped to a's
// shape goes to a (reshape copies g when it is not contiguous).
// src is a itself or a contiguous copy of it.
Tensor shape_view(const Tensor& a, const Tensor& src, const Shape& shape, const Shape& strides,
                  const char* op) {
  Tensor out = Tensor::from_storage(src.storage(), shape, strides, src.offset(), a.dtype());
  if (tracing()) trace_op("reshape", {a}, {out});
  if (should_record({a}))
    record(op, {a}, out, [a](const Tensor& g) { accumulate_grad(a, reshape(g, a.shape())); })
        .saves({})
        .composed();
  return out;
}

Tensor squeeze_axes(const Tensor& a, std::optional<int64_t> axis) {
  check_arg(a.defined(), "squeeze", a, "a defined tensor");
  const int64_t only = axis ? axis_of(a, *axis, std::max<int64_t>(a.dim(), 1), "squeeze") : -1;
  Shape shape, strides;
  for (int64_t k = 0; k < a.dim(); ++k) {
    if (a.size(k) == 1 && (!axis || k == only)) continue;
    shape.push_back(a.size(k));
    strides.push_back(a.strides()[k]);
  }
  return shape_view(a, a, shape, strides, "squeeze");
}
}  // namespace

Tensor squeeze(const Tensor& a) { return squeeze_axes(a, std::nullopt); }
Tensor squeeze(const Tensor& a, int64_t axis) { return squeeze_axes(a, axis); }

Tensor unsqueeze(const Tensor& a, int64_t axis) {
  check_arg(a.defined(), "unsqueeze", a, "a defined tensor");
  const Tensor v = unsqueeze_view(a, axis_of(a, axis, a.dim() + 1, "unsqueeze"));
  return shape_view(a, a, v.shape(), v.strides(), "unsqueeze");
}

// A view when axes [start, end] can be merged in place (each stride is the next one's span), else
// a copy first (as torch.flatten, which reshapes).
Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim) {
  const char* op = "flatten";
  check_arg(a.defined(), op, a, "a defined tensor");
  const int64_t rank = std::max<int64_t>(a.dim(), 1);
  const int64_t start = axis_of(a, start_dim, rank, op), end = axis_of(a, end_dim, rank, op);
  if (start > end)
    throw std::invalid_argument(fmt::format("flatten: start_dim {} comes after end_dim {} for {}",
                                            start_dim, end_dim, a.describe()));
  if (a.dim() == 0) return shape_view(a, a, {1}, {1}, op);
  bool mergeable = true;  // consecutive axes of size > 1: each stride is the next one's span
  for (int64_t k = start, prev = -1; k <= end; ++k) {
    if (a.size(k) == 1) continue;
    if (prev >= 0) mergeable = mergeable && a.strides()[prev] == a.strides()[k] * a.size(k);
    prev = k;
  }
  const Tensor src = mergeable ? a : copy_of(a);
  Shape shape, strides;
  for (int64_t k = 0; k < a.dim(); ++k) {
    if (k > start &&
        k <= end) {  // merged into axis `start`: the innermost size > 1 sets the stride
      shape.back() *= a.size(k);
      if (a.size(k) != 1) strides.back() = src.strides()[k];
      continue;
    }
    shape.push_back(a.size(k));
    strides.push_back(src.strides()[k]);
  }
  return shape_view(a, src, shape, strides, op);
}

// ---- cat / stack ----------------------------------------------------------------------------
namespace {
// parts[i] viewed with a size-1 axis inserted at `axis` (0 ≤ axis ≤ rank).
Tensor unsqueeze_view(const Tensor& t, int64_t axis) {
  Shape shape = t.shape(), strides = t.strides();
  const int64_t stride = axis < t.dim() ? strides[axis] * shape[axis] : 1;
  shape.insert(shape.begin() + axis, 1);
  strides.insert(strides.begin() + axis, stride);
  return Tensor::from_storage(t.storage(), shape, strides, t.offset(), t.dtype());
}

// out [.., Σ sizes, ..] with pieces[i] copied into its range of `axis`; pieces already checked.
Tensor join_pieces(const std::vector<Tensor>& pieces, int64_t axis) {
  Shape shape = pieces[0].shape();
  shape[axis] = 0;
  for (const Tensor& p : pieces) shape[axis] += p.shape()[axis];
  Tensor out = Tensor::empty(shape, pieces[0].dtype());
  int64_t offset = 0;
  for (const Tensor& p : pieces) {
    Tensor region = raw::view_narrow(out, axis, offset, p.shape()[axis]);
    copy_strided(region, p);
    offset += p.shape()[axis];
  }
  return out;
}

void check_parts(const std::vector<Tensor>& parts, int64_t axis, bool same_size_on_axis,
                 const char* op) {
  if (parts.empty()) throw std::invalid_argument(fmt::format("{}: needs at least one tensor", op));
  const Tensor& first = parts[0];
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& p = parts[i];
    if (!p.defined()) throw std::invalid_argument(fmt::format("{}: part {} is undefined", op, i));
    bool ok = p.dtype() == first.dtype() && p.dim() == first.dim();
    for (int64_t k = 0; ok && k < p.dim(); ++k)
      if ((k != axis || same_size_on_axis) && p.shape()[k] != first.shape()[k]) ok = false;
    if (!ok)
      throw std::invalid_argument(fmt::format(
          "{}: part {} {} does not match part 0 {}{}", op, i, p.describe(), first.describe(),
          same_size_on_axis ? "" : fmt::format(" outside axis {}", axis)));
  }
}
}  // namespace

// parts [.., n_i, ..] -> [.., Σ n_i, ..]; backward: part i gets its range of g along `axis`.
Tensor cat(const std::vector<Tensor>& parts, int64_t axis) {
  ScopedOpTimer op_timer(OpFamily::other);
  if (parts.empty()) throw std::invalid_argument("cat: needs at least one tensor");
  const int64_t ax = normalize_axis(axis, parts[0].dim(), "cat");
  check_parts(parts, ax, false, "cat");
  Tensor out = join_pieces(parts, ax);
  if (tracing()) trace_op("cat", parts, {out}, {{"axis", ax}});
  if (should_record(parts))
    record("cat", parts, out,
           [parts, ax](const Tensor& g) {
             int64_t offset = 0;
             for (const Tensor& p : parts) {
               const int64_t n = p.shape()[ax];
               if (p.requires_grad())
                 add_into_view_of_grad(
                     p, raw::view_narrow(g, ax, offset, n), [](const Tensor& t) { return t; },
                     true);
               offset += n;
             }
           })
        .saves({})
        .differentiable([parts, ax](const Tensor& g, const Tensor&) {
          int64_t offset = 0;
          for (const Tensor& p : parts) {
            const int64_t n = p.shape()[ax];
            if (p.requires_grad()) accumulate_grad(p, slice(g, ax, offset, offset + n));
            offset += n;
          }
        });
  return out;
}

namespace {
Tensor pad_axis(const Tensor& g, int64_t ax, int64_t before, int64_t after) {
  std::vector<Tensor> parts;
  for (int64_t n : {before, int64_t(-1), after}) {
    if (n < 0) {
      parts.push_back(g);
    } else if (n > 0) {
      Shape zeros = g.shape();
      zeros[ax] = n;
      parts.push_back(Tensor::zeros(zeros, g.dtype()));
    }
  }
  return parts.size() == 1 ? g : cat(parts, ax);
}
}  // namespace

// parts (all [..]) -> [.., n, ..] with the new axis at `axis`; backward: part i gets g's slice i.
Tensor stack(const std::vector<Tensor>& parts, int64_t axis) {
  ScopedOpTimer op_timer(OpFamily::other);
  if (parts.empty()) throw std::invalid_argument("stack: needs at least one tensor");
  const int64_t ax = normalize_axis(axis, parts[0].dim() + 1, "stack");
  check_parts(parts, ax, true, "stack");
  std::vector<Tensor> pieces;
  for (const Tensor& p : parts) pieces.push_back(unsqueeze_view(p, ax));
  Tensor out = join_pieces(pieces, ax);
  if (tracing()) trace_op("stack", parts, {out}, {{"axis", ax}});
  if (should_record(parts))
    record("stack", parts, out,
           [parts, ax](const Tensor& g) {
             for (size_t i = 0; i < parts.size(); ++i)
               if (parts[i].requires_grad())
                 add_into_view_of_grad(
                     parts[i], raw::view_narrow(g, ax, static_cast<int64_t>(i), 1),
                     [ax](const Tensor& t) { return unsqueeze_view(t, ax); }, true);
           })
        .saves({})
        .differentiable([parts, ax](const Tensor& g, const Tensor&) {
          for (size_t i = 0; i < parts.size(); ++i) {
            const int64_t k = static_cast<int64_t>(i);
            if (parts[i].requires_grad())
              accumulate_grad(parts[i], reshape(slice(g, ax, k, k + 1), parts[i].shape()));
          }
        });
  return out;
}

// ---- cat, split, chunk: torch's names; split and chunk return slices (views) -------------------
std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t axis) {
  check_arg(a.defined() && a.dim() >= 1, "split", a, "a tensor with at least one axis");
  const int64_t ax = normalize_axis(axis, a.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw std::invalid_argument(fmt::format("split: negative size {}", s));
    total += s;
  }
  if (total != a.shape()[ax])
    throw std::invalid_argument(fmt::format("split: sizes sum to {}, but axis {} of {} has {}",
                                            total, axis, a.describe(), a.shape()[ax]));
  std::vector<Tensor> pieces;
  int64_t start = 0;
  for (int64_t s : sizes) pieces.push_back(slice(a, ax, start, start + s)), start += s;
  return pieces;
}

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t axis) {
  check_arg(a.defined() && a.dim() >= 1, "split", a, "a tensor with at least one axis");
  const int64_t n = a.shape()[normalize_axis(axis, a.dim(), "split")];
  if (split_size < 1 && !(split_size == 0 && n == 0))
    throw std::invalid_argument(fmt::format("split: split_size must be >= 1, got {}", split_size));
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < n; start += split_size)
    sizes.push_back(std::min(split_size, n - start));
  if (n == 0) sizes.push_back(0);  // torch: one empty piece
  return split(a, sizes, axis);
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t axis) {
  check_arg(a.defined() && a.dim() >= 1, "chunk", a, "a tensor with at least one axis");
  if (chunks < 1)
    throw std::invalid_argument(fmt::format("chunk: chunks must be >= 1, got {}", chunks));
  const int64_t n = a.shape()[normalize_axis(axis, a.dim(), "chunk")];
  if (n == 0) return split(a, std::vector<int64_t>(chunks, 0), axis);  // torch: `chunks` empties
  return split(a, (n + chunks - 1) / chunks, axis);
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) -----------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

// data table: the shape family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> shape_op_cases() {
  auto one = [](Shape s) {
    return [=] { return std::vector<Tensor>{random_tensor(s, 31).set_name("a")}; };
  };
  auto two = [](Shape sa, Shape sb) {
    return [=] {
      return std::vector<Tensor>{random_tensor(sa, 32).set_name("a"),
                                 random_tensor(sb, 33).set_name("b")};
    };
  };
  auto three = [](Shape sa, Shape sb, Shape sc) {
    return [=] {
      return std::vector<Tensor>{random_tensor(sa, 34).set_name("a"),
                                 random_tensor(sb, 35).set_name("b"),
                                 random_tensor(sc, 36).set_name("c")};
    };
  };
  using V = const std::vector<Tensor>&;
  return {
      {"reshape/view", one({2, 3, 4}),
       [](V in) {
         return reshape(in[0], {4, -1});
       }},
      {"reshape/of a transposed view (copy)", one({2, 3, 4}),
       [](V in) {
         return reshape(transpose(in[0], 0, 2), {12, 2});
       }},
      {"transpose", one({2, 3, 4}), [](V in) { return transpose(in[0], 0, 2); }},
      {"permute", one({2, 3, 4}),
       [](V in) {
         return permute(in[0], {2, 0, 1});
       }},
      {"slice/middle axis", one({3, 5, 4}), [](V in) { return slice(in[0], 1, 1, 4); }},
      {"slice/middle axis, negative end", one({2, 6, 3}),
       [](V in) { return slice(in[0], -2, 2, -1); }},
      {"slice/of a permuted view", one({3, 4, 5}),
       [](V in) {
         return slice(permute(in[0], {1, 2, 0}), 1, 1, 4);
       }},
      {"clone", one({2, 3}), [](V in) { return clone(in[0]); }},
      {"clone/of a transposed view", one({3, 4}),
       [](V in) { return clone(transpose(in[0], 0, 1)); }},
      {"view/of a transposed view (no copy)", one({4, 6}),
       [](V in) {
         return view(transpose(in[0], 0, 1), {2, 3, 4});
       }},
      {"view/merging the axes before a sliced one", one({3, 4, 5}),
       [](V in) {
         return view(slice(in[0], 2, 1, 4), {12, 3});
       }},
      {"narrow/negative start", one({5, 3}), [](V in) { return narrow(in[0], 0, -3, 2); }},
      {"contiguous/of a transposed view", one({3, 4, 2}),
       [](V in) { return contiguous(transpose(in[0], 1, 2)); }},
      {"contiguous/already contiguous", one({3, 4}), [](V in) { return contiguous(in[0]); }},
      {"expand", one({3, 1}),
       [](V in) {
         return expand(in[0], {2, 3, 4});
       }},
      {"mul of a transposed view", two({3, 4}, {4, 3}),
       [](V in) { return mul(in[0], transpose(in[1], 0, 1)); }},
      {"add of two middle-axis slices", one({2, 6, 3}),
       [](V in) { return add(slice(in[0], 1, 0, 3), slice(in[0], 1, 3, 6)); }},
      {"cat/middle axis", three({2, 3, 4}, {2, 1, 4}, {2, 2, 4}),
       [](V in) {
         return cat({in[0], in[1], in[2]}, 1);
       }},
      {"cat/last axis, transposed part", two({3, 2}, {4, 3}),
       [](V in) {
         return cat({in[0], transpose(in[1], 0, 1)}, -1);
       }},
      {"stack/axis 0", three({2, 3}, {2, 3}, {2, 3}),
       [](V in) {
         return stack({in[0], in[1], in[2]}, 0);
       }},
      {"stack/last axis, repeated part", two({3, 4}, {3, 4}),
       [](V in) {
         return stack({in[0], in[1], in[0]}, 2);
       }},
      // ---- squeeze, unsqueeze, flatten: views (of a transposed view too)
      {"squeeze/all size-1 axes", one({2, 1, 3, 1}), [](V in) { return squeeze(in[0]); }},
      {"squeeze/one axis", one({2, 1, 3, 1}), [](V in) { return squeeze(in[0], -1); }},
      {"unsqueeze/middle of a transposed view", one({3, 4}),
       [](V in) { return unsqueeze(transpose(in[0], 0, 1), 1); }},
      {"unsqueeze/last axis", one({3, 4}), [](V in) { return unsqueeze(in[0], -1); }},
      {"flatten/all axes", one({2, 3, 4}), [](V in) { return flatten(in[0]); }},
      {"flatten/axes 1..2 of a permuted view (copy)", one({2, 3, 4}),
       [](V in) {
         return flatten(permute(in[0], {0, 2, 1}), 1, 2);
       }},
      // ---- cat (any axis, negative too), stack at a negative axis, split and chunk
      {"cat/axis 0", two({2, 3}, {1, 3}),
       [](V in) {
         return cat({in[0], in[1]});
       }},
      {"cat/axis -2 of three axes", two({2, 1, 3}, {2, 2, 3}),
       [](V in) {
         return cat({in[0], in[1]}, -2);
       }},
      {"stack/axis -1", two({3, 2}, {3, 2}),
       [](V in) {
         return stack({in[0], in[1]}, -1);
       }},
      {"split/size 2, pieces reused and one unused", one({5, 3}),
       [](V in) {  // pieces [2, 2, 1] along axis 0: p0·p1 + p0, p2 unused
         std::vector<Tensor> p = split(in[0], 2);
         return add(mul(p[0], p[1]), p[0]);
       }},
      {"split/sizes along the last axis", one({2, 6}),
       [](V in) {
         std::vector<Tensor> p = split(in[0], std::vector<int64_t>{1, 3, 2}, -1);
         return cat({p[2], p[0], mul(p[1], p[1])}, 1);
       }},
      {"chunk/3 along axis 1 of a transposed view", one({4, 3}),
       [](V in) {
         std::vector<Tensor> p = chunk(transpose(in[0], 0, 1), 3, 1);  // 2 pieces [3, 2], as torch
         return stack({mul(p[0], p[1]), p[1]}, 0);
       }},
      // float64 -> float32 -> float64 then a product: inputs are multiples of 2⁻¹⁰ in [−2, 2] and
      // the step is 2⁻⁷, so every point the differences visit is exact in float32 and the round
      // trip is the identity there; both conversions' backwards are checked.
      {"to_dtype/float32 and back",
       [] {
         std::vector<double> v(12);
         for (size_t i = 0; i < v.size(); ++i)
           v[i] = static_cast<double>((int(i) * 397) % 4096 - 2048) / 1024.0;
         return std::vector<Tensor>{
             Tensor::from_vector(v, {3, 4}, DType::f64).set_requires_grad(true).set_name("a")};
       },
       [](V in) { return mul(to_dtype(to_dtype(in[0], DType::f32), in[0].dtype()), in[0]); },
       GradcheckOptions{.eps = 1.0 / 128}},
  };
}

}  // namespace dg
