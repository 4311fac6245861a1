// Indexing ops: gather(input, dim, index) and index_select(input, dim, index), torch's semantics,
// with int64 (as torch) or int32 indices; each backward scatter-adds g into the input's gradient
// (repeated indices add up). An index outside [0, size) throws naming the op, the index and its
// position; negative indices are refused as torch refuses them. Under create_graph
// (autograd/tape.h) the scatter-add is itself a recorded op whose backward gathers (selects) again,
// so gradients of any order exist; the backwards save nothing for the version check (they read only
// the index). Does not do: scatter as a forward op, index_put, gradients for the
// index (it is integer data). Integer inputs (ids, labels) are gathered too, recording nothing.
// masked_select (a bool mask, torch's x[mask]) comes after index_select; its backward scatters g
// back with a recorded op whose own backward is masked_select again.
// Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them), the kernels and values in
// tests/test_kernels_index.cpp.
#include <fmt/format.h>

#include <algorithm>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/kernels_index.h"
#include "tensor/kernels_matmul.h"  // add_strided
#include "tensor/profile.h"

namespace dg {

namespace {
// The index as a contiguous int64 tensor (an int64 one read in place, an int32 one widened),
// every value checked to lie in [0, size).
Tensor checked_index(const Tensor& index, int64_t size, const Tensor& input, int64_t axis,
                     const char* op) {
  check_arg(index.defined() && (index.dtype() == DType::i64 || index.dtype() == DType::i32), op,
            index, "an int64 or int32 index");
  Tensor idx = kernel_input(index);
  if (idx.dtype() == DType::i32) idx = to_dtype(idx, DType::i64);
  const int64_t* v = idx.data<int64_t>();
  for (int64_t k = 0; k < idx.numel(); ++k)
    if (v[k] < 0 || v[k] >= size)
      throw std::out_of_range(
          fmt::format("{}: index {} at position {} is out of range for axis {} of input {}", op,
                      v[k], k, axis, input.describe()));
  return idx;
}

int64_t prod(const Shape& s, int64_t from, int64_t to) {
  int64_t p = 1;
  for (int64_t k = from; k < to; ++k) p *= s[k];
  return p;
}

// The gathered positions' sizes: O leading, J along the axis, I trailing; C the input's axis.
struct GatherDims {
  int64_t O, C, J, I;
};

// zeros of input_shape with g [O, J, I] scatter-added at the index' positions (not recorded): the
// backward of gather (index [O, J, I], part_shape the input's part it reads) and of index_select
// (a [J] index, part_shape = input_shape).
Tensor scatter_add(const Tensor& g, const Shape& input_shape, const Shape& part_shape,
                   const Tensor& idx, GatherIndex gi, GatherDims d, const char* op) {
  Tensor gc = kernel_input(g);
  Tensor t = Tensor::zeros(input_shape, g.dtype());
  const bool cut = part_shape != input_shape;
  Tensor dpart = cut ? Tensor::zeros(part_shape, g.dtype()) : t;
  gi.idx = idx.data<int64_t>();
  dispatch_float(g.dtype(), op, [&]<class T>() {
    gather_backward<T>(dpart.data<T>(), gc.data<T>(), gi, d.O, d.C, d.J, d.I);
  });
  if (cut) {
    Tensor view = t;
    for (int64_t k = 0; k < t.dim(); ++k)
      if (part_shape[k] < t.shape()[k]) view = raw::view_narrow(view, k, 0, part_shape[k]);
    add_strided(view, dpart);
  }
  return t;
}

// scatter_add as a recorded op, the backward of gather (`select` false) or index_select under
// create_graph: linear in g, its own backward gathers (selects) again along axis ax.
Tensor recorded_scatter_add(const Tensor& g, int64_t ax, const Tensor& idx, bool select,
                            const Shape& input_shape, const Shape& part_shape, GatherIndex gi,
                            GatherDims d) {
  const char* op = select ? "index_select_backward" : "gather_backward";
  Tensor t = scatter_add(g, input_shape, part_shape, idx, gi, d, op);
  if (should_record({g}))
    record(op, {g}, t,
           [g, ax, idx, select](const Tensor& gg) {
             accumulate_grad(g, select ? index_select(gg, ax, idx) : gather(gg, ax, idx));
           })
        .saves({})
        .composed();
  return t;
}
}  // namespace

// ---- gather: out[.., j, ..] = input[.., index[.., j, ..], ..] along `dim` ----------------------
// input [.., C, ..], index [.., J, ..] (same rank; every other axis no longer than input's) ->
// out with index's shape. Backward: grad(input)[.., index[.., j, ..], ..] += g[.., j, ..].
// When index is shorter than input on another axis, the kernel reads a contiguous copy of the
// leading part of input and the backward adds into that part of the gradient.
Tensor gather(const Tensor& input, int64_t dim, const Tensor& index) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "gather";
  check_arg(input.defined(), op, input, "a defined input");
  check_arg(input.dim() >= 1, op, input, "an input with at least one axis");
  const int64_t ax = normalize_axis(dim, input.dim(), op);
  check_arg(index.defined() && index.dim() == input.dim(), op, index,
            fmt::format("an index with the rank of input {}", input.describe()));
  Tensor part = input;  // input cut to index's sizes on the other axes (a view)
  for (int64_t k = 0; k < input.dim(); ++k) {
    if (k == ax) continue;
    check_arg(index.shape()[k] <= input.shape()[k], op, index,
              fmt::format("an index no longer than input {} on axis {}", input.describe(), k));
    if (index.shape()[k] < input.shape()[k]) part = raw::view_narrow(part, k, 0, index.shape()[k]);
  }
  const Shape& is = index.shape();
  const int64_t O = prod(is, 0, ax), J = is[ax], I = prod(is, ax + 1, index.dim());
  const int64_t C = input.shape()[ax];
  Tensor idx = checked_index(index, C, input, ax, op);
  Tensor x = kernel_input(part);
  Tensor out = Tensor::empty(is, input.dtype());
  const GatherIndex gi{idx.data<int64_t>(), J * I, I, 1};
  dispatch_any(input.dtype(),
               [&]<class T>() { gather_forward<T>(out.data<T>(), x.data<T>(), gi, O, C, J, I); });
  if (tracing()) trace_op(op, {input, index}, {out}, {{"axis", ax}});
  if (is_floating(input.dtype()) && should_record({input})) {
    const GatherDims d{O, C, J, I};
    record(op, {input}, out,
           [input, part_shape = part.shape(), idx, gi, d](const Tensor& g) {
             accumulate_grad(input,
                             scatter_add(g, input.shape(), part_shape, idx, gi, d, "gather"));
           })
        .saves({})
        .differentiable(
            [input, ax, part_shape = part.shape(), idx, gi, d](const Tensor& g, const Tensor&) {
              accumulate_grad(
                  input, recorded_scatter_add(g, ax, idx, false, input.shape(), part_shape, gi, d));
            });
  }
  return out;
}

// ---- index_select: out[.., j, ..] = input[.., index[j], ..] along `dim`
// input [.., C, ..], index [J] -> [.., J, ..]. Backward: grad(input)[.., index[j], ..] +=
// g[.., j, ..]. An integer input (ids, labels) is gathered the same way and records nothing.
Tensor index_select(const Tensor& input, int64_t dim, const Tensor& index) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "index_select";
  check_arg(input.defined(), op, input, "a defined input");
  check_arg(input.dim() >= 1, op, input, "an input with at least one axis");
  const int64_t ax = normalize_axis(dim, input.dim(), op);
  check_arg(index.defined() && index.dim() == 1, op, index, "a one-axis index [J]");
  const Shape& s = input.shape();
  const int64_t O = prod(s, 0, ax), C = s[ax], J = index.numel(), I = prod(s, ax + 1, input.dim());
  Tensor idx = checked_index(index, C, input, ax, op);
  Tensor x = kernel_input(input);
  Shape out_shape = s;
  out_shape[ax] = J;
  Tensor out = Tensor::empty(out_shape, input.dtype());
  const GatherIndex gi{idx.data<int64_t>(), 0, 1, 0};
  dispatch_any(input.dtype(),
               [&]<class T>() { gather_forward<T>(out.data<T>(), x.data<T>(), gi, O, C, J, I); });
  if (tracing()) trace_op(op, {input, index}, {out}, {{"axis", ax}});
  if (is_floating(input.dtype()) && should_record({input})) {
    const GatherDims d{O, C, J, I};
    record(op, {input}, out,
           [input, idx, gi, d](const Tensor& g) {
             accumulate_grad(
                 input, scatter_add(g, input.shape(), input.shape(), idx, gi, d, "index_select"));
           })
        .saves({})
        .differentiable([input, ax, idx, gi, d](const Tensor& g, const Tensor&) {
          accumulate_grad(
              input, recorded_scatter_add(g, ax, idx, true, input.shape(), input.shape(), gi, d));
        });
  }
  return out;
}

// ---- masked_select: out = input's elements where mask, in row-major order of the broadcast ------
namespace {
// values [count] -> mask's shape: values at the True positions of mask (contiguous bool) in order,
// 0 elsewhere. Recorded; its backward is masked_select(g, mask), so gradients of any order exist.
Tensor masked_unselect(const Tensor& values, const Tensor& mask) {
  Tensor out = Tensor::zeros(mask.shape(), values.dtype());
  const Tensor v = kernel_input(values);
  dispatch_float(values.dtype(), "masked_select_backward", [&]<class T>() {
    const bool* m = mask.data<bool>();
    const T* src = v.data<T>();
    T* o = out.data<T>();
    int64_t j = 0;
    for (int64_t i = 0; i < mask.numel(); ++i)
      if (m[i]) o[i] = src[j++];
  });
  if (should_record({values}))
    record("masked_select_backward", {values}, out,
           [values, mask](const Tensor& g) { accumulate_grad(values, masked_select(g, mask)); })
        .saves({mask})
        .composed();
  return out;
}
}  // namespace

Tensor masked_select(const Tensor& input, const Tensor& mask) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "masked_select";
  check_arg(input.defined(), op, input, "a defined input");
  require_bool_mask(mask, op, "mask");
  const Shape shape = broadcast_shapes(input.shape(), mask.shape(), op);
  const Tensor m = kernel_input(expand(mask, shape));           // [broadcast] bool
  const Tensor x = kernel_input(expand(detach(input), shape));  // [broadcast]
  const bool* mp = m.data<bool>();
  const int64_t count = std::count(mp, mp + m.numel(), true);
  Tensor out = Tensor::empty({count}, input.dtype());
  dispatch_any(input.dtype(), [&]<class T>() {
    const T* src = x.data<T>();
    T* o = out.data<T>();
    int64_t j = 0;
    for (int64_t i = 0; i < m.numel(); ++i)
      if (mp[i]) o[j++] = src[i];
  });
  if (is_floating(input.dtype()) && should_record({input}))
    record(op, {input}, out,
           [input, m](const Tensor& g) { accumulate_grad(input, masked_unselect(g, m)); })
        .saves({m})
        .composed();
  return out;
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

namespace {
// A bool mask of `shape`: True except at every third element (1, 4, 7, ...).
Tensor bool_pattern(const Shape& shape) {
  std::vector<bool> v(shape_numel(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 3 != 1;
  return Tensor::from_vector(v, shape);
}

Tensor ids64(const std::vector<double>& v, const Shape& s) {
  return Tensor::from_vector(v, s, DType::i64);
}
}  // namespace

// data table: the index family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> index_op_cases() {
  using V = const std::vector<Tensor>&;
  auto with = [](Shape s, uint64_t seed, Tensor index) {
    return [=] { return std::vector<Tensor>{random_tensor(s, seed).set_name("input"), index}; };
  };
  return {
      {"gather/axis 1, repeated indices, int64",
       with({3, 4, 2}, 41,
            ids64({0, 3, 3, 1, 2, 2, 0, 0, 1, 1, 3, 0, 2, 2, 2, 1, 0, 3}, {3, 3, 2})),
       [](V in) { return gather(in[0], 1, in[1]); }},
      {"gather/axis 0, int32", with({4, 3}, 42, Tensor::from_ids({3, 0, 1, 3, 3, 2}, {2, 3})),
       [](V in) { return gather(in[0], 0, in[1]); }},
      {"gather/last axis, index shorter on axis 0",
       with({4, 5}, 43, Tensor::from_ids({4, 0, 4, 1, 2, 2}, {2, 3})),
       [](V in) { return gather(in[0], -1, in[1]); }},
      {"index_select/axis 0, repeated, int32",
       with({5, 3}, 44, Tensor::from_ids({4, 1, 4, 0}, {4})),
       [](V in) { return index_select(in[0], 0, in[1]); }},
      {"index_select/middle axis, int64", with({2, 4, 3}, 45, ids64({3, 3, 0, 2, 1}, {5})),
       [](V in) { return index_select(in[0], 1, in[1]); }},
      {"index_select/of a transposed view", with({3, 4}, 46, Tensor::from_ids({2, 0}, {2})),
       [](V in) { return index_select(transpose(in[0], 0, 1), -1, in[1]); }},
      {"masked_select/mask [3, 1] broadcast over input [2, 3, 4]",
       with({2, 3, 4}, 47, Tensor::from_vector(std::vector<bool>{true, false, true}, {3, 1})),
       [](V in) { return masked_select(in[0], in[1]); }},
      {"masked_select/input [3, 1] broadcast to the mask [2, 3, 4] (gradients add up)",
       with({3, 1}, 48, bool_pattern({2, 3, 4})), [](V in) { return masked_select(in[0], in[1]); }},
      {"masked_select/of a transposed view, then squared", with({4, 3}, 49, bool_pattern({3, 4})),
       [](V in) { return square(masked_select(transpose(in[0], 0, 1), in[1])); }},
  };
}

}  // namespace dg
