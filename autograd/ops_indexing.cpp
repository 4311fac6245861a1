// Indexing as torch writes it: select (x[i]), strided slices (x[a:b:c]), libtorch's index({...})
// and the assignment y[...] = v as index_put (a new tensor) or index_put_ (in place, recorded).
// select and slice are views of a's storage (no copy); each backward places g into zeros of a's
// shape at the same view (a recorded op whose backward takes the view again), so every op here
// supports create_graph, and none saves an input for the version check (they read only shapes).
// Does not do: boolean masks, several tensor indices at once (torch's advanced indexing), negative
// steps, writes through a view into its base's history.
// Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them), torch 1.13 goldens and
// refusals in tests/test_torch_ops_b.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/kernels_matmul.h"  // copy_strided
#include "tensor/profile.h"

namespace dg {

namespace {
// One axis of a view: elements start, start + step, .. (length of them) of `axis`; `drop` removes
// the axis (select). Axes count in the tensor the view is taken of.
struct AxisView {
  int64_t axis, start, step, length;
  bool drop;
};

// t's elements seen through v: a view over t's storage (records nothing).
Tensor raw_view(const Tensor& t, const AxisView& v) {
  Shape shape = t.shape(), strides = t.strides();
  const int64_t offset = t.offset() + v.start * strides[v.axis];
  if (v.drop) {
    shape.erase(shape.begin() + v.axis);
    strides.erase(strides.begin() + v.axis);
  } else {
    shape[v.axis] = v.length;
    strides[v.axis] *= v.step;
  }
  return Tensor::from_storage(t.storage(), shape, strides, offset, t.dtype());
}

Tensor raw_views(Tensor t, const std::vector<AxisView>& views) {
  for (const AxisView& v : views) t = raw_view(t, v);
  return t;
}

Tensor recorded_view(const Tensor& a, const AxisView& v, const char* op);

// zeros of `shape` with g placed at the view v of them: the backward of a view, itself recorded
// (its backward takes the view of gg again).
Tensor place_into_zeros(const Tensor& g, const Shape& shape, const AxisView& v, const char* op) {
  Tensor out = Tensor::zeros(shape, g.dtype());
  Tensor target = raw_view(out, v);
  copy_strided(target, g);
  if (should_record({g}))
    record(op, {g}, out,
           [g, v](const Tensor& gg) {
             accumulate_grad(g, recorded_view(gg, v, v.drop ? "select" : "slice"));
           })
        .saves({})
        .composed();
  return out;
}

// The view v of a, recorded as `op` ("select" or "slice").
Tensor recorded_view(const Tensor& a, const AxisView& v, const char* op) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = raw_view(a, v);
  if (tracing() && v.drop) trace_op("select", {a}, {out}, {{"axis", v.axis}, {"index", v.start}});
  if (tracing() && !v.drop)
    trace_op("slice", {a}, {out},
             {{"axis", v.axis},
              {"start", v.start},
              {"end", v.length ? v.start + v.step * (v.length - 1) + 1 : v.start},
              {"step", v.step}});
  if (should_record({a})) {
    const char* back = v.drop ? "select_backward" : "slice_backward";
    record(op, {a}, out,
           [a, v, back](const Tensor& g) {
             accumulate_grad(a, place_into_zeros(g, a.shape(), v, back));
           })
        .saves({})
        .composed();
  }
  return out;
}

// An integer index of an axis of `size`, negative counting from the end; out of range throws as
// torch's IndexError does.
int64_t checked_position(int64_t index, int64_t size, int64_t axis, const char* op) {
  const int64_t i = index < 0 ? index + size : index;
  if (i < 0 || i >= size)
    throw std::out_of_range(fmt::format("{}: index {} is out of bounds for axis {} with size {}",
                                        op, index, axis, size));
  return i;
}

// Python's slice of an axis of `size`: None as the default, negatives from the end, start and
// stop clamped to [0, size]; step >= 1.
AxisView python_slice(const Slice& s, int64_t axis, int64_t size, const char* op) {
  const int64_t step = s.step.value_or(1);
  if (step <= 0)
    throw std::invalid_argument(fmt::format(
        "{}: slice step must be greater than zero, got {} (negative steps are not supported, "
        "as in torch; use flip)",
        op, step));
  auto clamp = [size](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    return std::clamp(*v < 0 ? *v + size : *v, int64_t{0}, size);
  };
  const int64_t start = clamp(s.start, 0), stop = std::max(clamp(s.stop, size), start);
  return {axis, start, step, (stop - start + step - 1) / step, false};
}

// The parts of an index list: the views (integers, slices) in order, and at most one tensor index
// with the axis (of the viewed tensor) it applies to.
struct ResolvedIndex {
  std::vector<AxisView> views;
  Tensor tensor;
  int64_t tensor_axis = -1;
};

ResolvedIndex resolve(const Tensor& a, const std::vector<TensorIndex>& indices, const char* op) {
  check_arg(a.defined(), op, a, "a defined tensor");
  int64_t consumed = 0, ellipses = 0;  // axes of a the entries name
  for (const TensorIndex& t : indices) {
    ellipses += t.kind() == TensorIndex::Kind::ellipsis;
    consumed += t.kind() != TensorIndex::Kind::ellipsis;
  }
  if (ellipses > 1)
    throw std::invalid_argument(fmt::format("{}: an index can only have a single ellipsis", op));
  if (consumed > a.dim())
    throw std::out_of_range(fmt::format("{}: too many indices for {}: {} indices for {} axes", op,
                                        a.describe(), consumed, a.dim()));
  ResolvedIndex r;
  int64_t in_axis = 0, out_axis = 0;  // the axis of a, and of the view taken so far
  for (const TensorIndex& t : indices) {
    switch (t.kind()) {
      case TensorIndex::Kind::ellipsis:
        in_axis += a.dim() - consumed;
        out_axis += a.dim() - consumed;
        continue;
      case TensorIndex::Kind::integer:
        r.views.push_back(
            {out_axis, checked_position(t.integer(), a.size(in_axis), in_axis, op), 1, 1, true});
        ++in_axis;
        continue;
      case TensorIndex::Kind::slice:
        r.views.push_back(python_slice(t.slice(), out_axis, a.size(in_axis), op));
        ++in_axis, ++out_axis;
        continue;
      case TensorIndex::Kind::tensor:
        if (r.tensor.defined())
          throw std::invalid_argument(fmt::format(
              "{}: more than one tensor index (torch's advanced indexing) is not supported; "
              "index one axis at a time, or use gather",
              op));
        if (t.tensor().dtype() == DType::b8)
          throw std::invalid_argument(fmt::format(
              "{}: a bool index (torch's x[mask]) is not taken here: use masked_select(x, mask) "
              "to read, where or masked_fill to write",
              op));
        check_arg(t.tensor().dim() == 1, op, t.tensor(), "a one-axis int64 or int32 index [J]");
        r.tensor = t.tensor();
        r.tensor_axis = out_axis;
        ++in_axis, ++out_axis;
        continue;
    }
  }
  return r;
}
}  // namespace

// ---- select: the view at one index of an axis, the axis dropped -----------------------------
Tensor select(const Tensor& a, int64_t axis, int64_t index) {
  const char* op = "select";
  check_arg(a.defined() && a.dim() >= 1, op, a, "a tensor with at least one axis");
  const int64_t ax = normalize_axis(axis, a.dim(), op);
  return recorded_view(a, {ax, checked_position(index, a.size(ax), ax, op), 1, 1, true}, op);
}

// ---- slice with a step: a strided view ----------------------------------------------------
Tensor slice(const Tensor& a, int64_t axis, int64_t start, int64_t end, int64_t step) {
  const char* op = "slice";
  check_arg(a.defined() && a.dim() >= 1, op, a, "a tensor with at least one axis");
  if (step <= 0)
    throw std::invalid_argument(
        fmt::format("slice: step must be greater than zero, got {} (as torch)", step));
  if (step == 1) return slice(a, axis, start, end);
  const int64_t ax = normalize_axis(axis, a.dim(), op), size = a.size(ax);
  const int64_t s = start < 0 ? start + size : start, e = end < 0 ? end + size : end;
  if (s < 0 || e > size || s > e)
    throw std::out_of_range(fmt::format("slice: [{}, {}) is out of range for axis {} of {}", start,
                                        end, axis, a.describe()));
  return recorded_view(a, {ax, s, step, (e - s + step - 1) / step, false}, op);
}

// ---- index: each entry in turn, as libtorch's Tensor::index ---------------------------------
Tensor index(const Tensor& a, const std::vector<TensorIndex>& indices) {
  const ResolvedIndex r = resolve(a, indices, "index");
  Tensor out = a;
  for (const AxisView& v : r.views) out = recorded_view(out, v, v.drop ? "select" : "slice");
  if (r.tensor.defined()) {
    int64_t axis = r.tensor_axis;  // integers before it dropped axes
    for (const AxisView& v : r.views) axis -= v.drop && v.axis < r.tensor_axis;
    out = index_select(out, axis, r.tensor);
  }
  return out;
}

// ---- index_put / index_put_: y[indices] = values ----------------------------------------------
namespace {
// The indexed region of a, checked for a write: integers, slices and ellipsis only.
std::vector<AxisView> write_region(const Tensor& a, const std::vector<TensorIndex>& indices,
                                   const Tensor& values, const char* op) {
  ResolvedIndex r = resolve(a, indices, op);
  if (r.tensor.defined())
    throw std::invalid_argument(fmt::format(
        "{}: tensor indices are not supported for writes; use integers and Slices", op));
  check_arg(values.defined(), op, values, "defined values");
  check_same_dtype(a, values, op);
  const Shape region = raw_views(a, r.views).shape();
  bool fits = values.dim() <= static_cast<int64_t>(region.size());
  for (int64_t k = 1; fits && k <= values.dim(); ++k) {
    const int64_t v = values.shape()[values.dim() - k], r = region[region.size() - k];
    fits = v == r || v == 1;
  }
  if (!fits)
    throw std::invalid_argument(
        fmt::format("{}: shape mismatch: values {} cannot be broadcast to the indexed region {}",
                    op, values.describe(), shape_str(region)));
  return r.views;
}

// values (broadcast) copied into the region `views` of t (not recorded; no version bump).
void write_values(const Tensor& t, const std::vector<AxisView>& views, const Tensor& values) {
  Tensor region = raw_views(t, views);
  copy_strided(region, raw::view_expand(values, region.shape()));
}

Tensor put_views(const Tensor& a, const std::vector<AxisView>& views, const Tensor& values,
                 const char* op);

// The backward of both forms: g with the region set to 0 to the written tensor (`base`; itself an
// index_put, whose backward is the same masking), the region of g to values. Recorded ops only.
void index_put_backward(const Tensor& g, const Tensor& base, const std::vector<AxisView>& views,
                        const Tensor& values) {
  if (base.requires_grad())
    accumulate_grad(base, put_views(g, views, Tensor::zeros({}, g.dtype()), "index_put"));
  if (values.requires_grad()) {
    Tensor region = g;
    for (const AxisView& v : views) region = recorded_view(region, v, v.drop ? "select" : "slice");
    accumulate_grad(values, region);  // sums the axes values was broadcast along
  }
}

// A contiguous copy of a with values written into the region `views`, recorded as `op`.
Tensor put_views(const Tensor& a, const std::vector<AxisView>& views, const Tensor& values,
                 const char* op) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  copy_strided(out, a);
  write_values(out, views, values);
  if (should_record({a, values}))
    record(op, {a, values}, out,
           [a, views, values](const Tensor& g) { index_put_backward(g, a, views, values); })
        .saves({})
        .composed();
  return out;
}

Tensor scalar_like(const Tensor& a, double value) {
  check_arg(a.defined(), "index_put", a, "a defined tensor");
  return Tensor::full({}, value, a.dtype());
}

// A new handle on a's storage carrying a's history (its node, requires_grad, leaf flag): the
// input of an in-place write, whose node then becomes a's.
Tensor history_of(const Tensor& a) {
  Tensor old = Tensor::from_storage(a.storage(), a.shape(), a.strides(), a.offset(), a.dtype());
  old.impl()->grad_fn = a.impl()->grad_fn;
  old.impl()->requires_grad = a.requires_grad();
  old.impl()->is_leaf = a.is_leaf();
  old.impl()->name = a.name();
  return old;
}

// The refusals of an in-place write that would be recorded (see ops.h).
void check_in_place(const Tensor& a, const char* op) {
  if (a.is_leaf() && a.requires_grad())
    throw std::invalid_argument(fmt::format(
        "{}: a leaf tensor that requires grad ({}) cannot be written in place (torch: 'a leaf "
        "Variable that requires grad is being used in an in-place operation'); write under "
        "NoGradGuard, or into a copy with index_put",
        op, a.describe()));
  // After an earlier index_put_ on a, that node's first input is a's own older history (same
  // storage and layout), not a base a is a view of: a may be written again.
  const char* last = recorded_op(a);
  const bool own_history = last && std::string_view(last) == "index_put_";
  for (const Tensor& in : recorded_inputs(a))
    if (in.defined() && in.storage() == a.storage() &&
        !(own_history && in.shape() == a.shape() && in.strides() == a.strides() &&
          in.offset() == a.offset()))
      throw std::invalid_argument(fmt::format(
          "{}: {} is a view (made by '{}') of another tensor of the graph; depthgrad does not "
          "rewrite the base's history as torch does: use the out-of-place index_put on the base",
          op, a.describe(), recorded_op(a)));
  if (a.handle_count() > 1)
    throw std::invalid_argument(fmt::format(
        "{}: {} is held by {} handles (another copy of it, or a recorded op that read it); an "
        "in-place write would change the history they see: use the out-of-place index_put",
        op, a.describe(), a.handle_count()));
}
}  // namespace

Tensor index_put(const Tensor& a, const std::vector<TensorIndex>& indices, const Tensor& values) {
  return put_views(a, write_region(a, indices, values, "index_put"), values, "index_put");
}

Tensor index_put(const Tensor& a, const std::vector<TensorIndex>& indices, double value) {
  return index_put(a, indices, scalar_like(a, value));
}

Tensor& index_put_(Tensor& a, const std::vector<TensorIndex>& indices, const Tensor& values) {
  const char* op = "index_put_";
  const std::vector<AxisView> views = write_region(a, indices, values, op);
  const bool recording = should_record({a, values});
  if (recording) check_in_place(a, op);
  const Tensor old = recording ? history_of(a) : Tensor();
  write_values(a, views, values);
  a.storage()->bump_version();
  if (recording)
    record(op, {old, values}, a,
           [old, views, values](const Tensor& g) { index_put_backward(g, old, views, values); })
        .saves({})
        .composed();
  return a;
}

Tensor& index_put_(Tensor& a, const std::vector<TensorIndex>& indices, double value) {
  return index_put_(a, indices, scalar_like(a, value));
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

// data table: the indexing family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> indexing_op_cases() {
  using V = const std::vector<Tensor>&;
  auto x = [](Shape s, uint64_t seed) {
    return [=] { return std::vector<Tensor>{random_tensor(s, seed).set_name("x")}; };
  };
  auto xv = [](Shape s, Shape vs, uint64_t seed) {
    return [=] {
      return std::vector<Tensor>{random_tensor(s, seed).set_name("x"),
                                 random_tensor(vs, seed + 1).set_name("values")};
    };
  };
  return {
      {"select/axis 1, negative index", x({3, 4, 2}, 71),
       [](V in) { return select(in[0], 1, -1); }},
      {"slice/step 2", x({7, 3}, 72), [](V in) { return slice(in[0], 0, 1, 6, 2); }},
      {"slice/step 3 of a transposed view", x({4, 8}, 73),
       [](V in) { return slice(transpose(in[0], 0, 1), 0, 0, 8, 3); }},
      {"index/{Slice(1, None, 2), 3}", x({6, 5}, 74),
       [](V in) {
         return index(in[0], {Slice(1, None, 2), 3});
       }},
      {"index/{Ellipsis, 0}, then an index tensor", x({2, 5, 3}, 75),
       [](V in) {
         return index(index(in[0], {Ellipsis, 0}), {Slice(), Tensor::from_ids({4, 0, 4}, {3})});
       }},
      {"index_put/[:, 0] = values [3]", xv({3, 4}, {3}, 76),
       [](V in) {
         return index_put(in[0], {Slice(), 0}, in[1]);
       }},
      {"index_put/[1:4:2] = values broadcast [1, 3]", xv({5, 3}, {1, 3}, 78),
       [](V in) { return index_put(in[0], {Slice(1, 4, 2)}, in[1]); }},
      {"index_put_/y = 2x; y[:, 1] = v; y * y", xv({3, 4}, {3}, 80),
       [](V in) {
         Tensor y = scale(in[0], 2.0);
         index_put_(y, {Slice(), 1}, in[1]);
         return mul(y, y);
       }},
      {"index_put_/y[0] = 0 into a copy", x({3, 2}, 82),
       [](V in) {
         Tensor y = exp(in[0]) * 1.0;
         index_put_(y, {0}, 0.0);
         return y;
       }},
  };
}

}  // namespace dg
