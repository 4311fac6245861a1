// Extreme-value reductions: max/min along an axis (values and int64 indices; the gradient goes to
// the index position, as torch's max(dim)), max/min of the whole tensor (the gradient is split
// evenly among tied elements, as torch), argmax/argmin (int64, no gradient). NaN is the extreme
// when present, as torch. Does not do: integer inputs (but sum counts them, as torch: int64),
// amax/amin over several axes, cumprod. any and all (bool out) sit after mean. sum and mean over
// axes come first (their backward broadcasts the gradient back), then cumsum (its backward is the
// running sum of g from the end, a recorded op), then var/std (torch's correction; the backward
// 2(a − mean)/(N − correction) written with recorded ops; their torch goldens and errors are in
// tests/test_torch_ops_a.cpp).
// create_graph (autograd/tape.h): sum and mean are composed; max/min keep their kernel backward
// and add a differentiable one (g broadcast back, kept by a constant mask of the index positions
// or of the ties, so the tie rules stay torch's).
// Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them; their second derivatives
// tests/test_gradgradcheck_pointwise.cpp), the kernels in tests/test_kernels_reduce.cpp and
// tests/test_kernels_elementwise.cpp (sum_axes), cumsum (kernels, threads, torch) in
// tests/test_elementary_ops.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "autograd/op_steps.h"
#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/exercise.h"
#include "tensor/kernels_elementwise.h"
#include "tensor/kernels_index.h"
#include "tensor/kernels_reduce.h"
#include "tensor/profile.h"

namespace dg {

// ---- sum / mean over axes: backward broadcasts g back over the reduced axes
namespace {
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t rank,
                                    const char* op) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int64_t k = 0; k < rank; ++k) out.push_back(k);
    return out;
  }
  for (int64_t a : axes) out.push_back(normalize_axis(a, rank, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw std::invalid_argument(fmt::format("{}: an axis is repeated", op));
  return out;
}

// a's elements as rows to reduce: a with the (normalised) `axes` moved last, contiguous, as
// `dtype`; out_shape is the result's (the axes dropped, or kept as 1 with keepdim).
struct Rows {
  Tensor x;
  Shape out_shape;
  int64_t rows = 0, inner = 0;
};
Rows rows_over(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim, DType dtype) {
  Rows r;
  Shape order, tail;
  for (int64_t k = 0; k < a.dim(); ++k) {
    const bool reduced = std::find(axes.begin(), axes.end(), k) != axes.end();
    (reduced ? tail : order).push_back(k);
    if (!reduced || keepdim) r.out_shape.push_back(reduced ? 1 : a.shape()[k]);
  }
  order.insert(order.end(), tail.begin(), tail.end());
  r.x = contiguous(permute(to_dtype(detach(a), dtype), order));
  r.rows = shape_numel(r.out_shape);
  r.inner = r.rows ? a.numel() / r.rows : 0;
  return r;
}

// torch's sum of a bool or integer tensor: int64, exact; not recorded (nothing to differentiate).
Tensor sum_integer(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim) {
  const Rows r = rows_over(a, axes, keepdim, DType::i64);
  Tensor out = Tensor::empty(r.out_shape, DType::i64);
  const int64_t* x = r.x.data<int64_t>();
  int64_t* o = out.data<int64_t>();
  for (int64_t i = 0; i < r.rows; ++i) {
    int64_t acc = 0;
    for (int64_t j = 0; j < r.inner; ++j) acc += x[i * r.inner + j];
    o[i] = acc;
  }
  return out;
}

Tensor reduce(const Tensor& a, const std::vector<int64_t>& axes_in, bool keepdim, bool average) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = average ? "mean" : "sum";
  check_arg(a.defined(), op, a, "a defined tensor");
  std::vector<int64_t> axes = normalize_axes(axes_in, a.dim(), op);
  if (!is_floating(a.dtype())) {
    if (average)
      throw std::invalid_argument(fmt::format(
          "mean: expected a floating tensor, got {} (torch: mean() could not infer output dtype); "
          "write dg::mean(dg::to_dtype(x, DType::f32))",
          a.describe()));
    return sum_integer(a, axes, keepdim);
  }
  int64_t count = 1;
  for (int64_t k : axes) count *= a.shape()[k];
  Tensor out = sum_axes(a, axes, keepdim);
  if (average) {
    dispatch_float(out.dtype(), op, [&]<class T>() {
      T* o = out.data<T>();
      for (int64_t i = 0; i < out.numel(); ++i) o[i] = static_cast<T>(o[i] / static_cast<T>(count));
    });
  }
  if (tracing()) trace_op(op, {a}, {out}, {{"axes", axes}, {"keepdim", keepdim}});
  if (should_record({a}))
    record(op, {a}, out,
           [a, axes, average](const Tensor& g) {
             accumulate_grad(a, reduce_backward(g, a.shape(), axes, average));
           })
        .saves({})
        .composed();
  return out;
}
}  // namespace

// g [reduced] -> [input]: the reduced axes set to 1, divided by the count for mean, broadcast back.
DG_EXERCISE Tensor reduce_backward(const Tensor& g, const Shape& input_shape,
                                   const std::vector<int64_t>& axes, bool average) {
  Shape keep = input_shape;
  int64_t count = 1;
  for (int64_t k : axes) {
    keep[k] = 1;
    count *= input_shape[k];
  }
  Tensor gk = reshape(g, keep);
  if (average) gk = scale(gk, 1.0 / static_cast<double>(count));
  return expand(gk, input_shape);
}

Tensor sum(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim) {
  return reduce(a, axes, keepdim, false);
}
Tensor mean(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim) {
  return reduce(a, axes, keepdim, true);
}

// ---- any / all: nonzero tests over axes; bool out (uint8 for uint8, torch 1.13) --------------
namespace {
Tensor any_all(const Tensor& a, std::vector<int64_t> axes, bool keepdim, bool is_any,
               const char* op) {
  ScopedOpTimer op_timer(OpFamily::other);
  check_arg(a.defined(), op, a, "a defined tensor");
  axes = normalize_axes(axes, a.dim(), op);
  const Rows r = rows_over(a, axes, keepdim, DType::b8);
  Tensor out = Tensor::empty(r.out_shape, DType::b8);
  const bool* x = r.x.data<bool>();
  bool* o = out.data<bool>();
  for (int64_t i = 0; i < r.rows; ++i) {
    const bool* row = x + i * r.inner;
    o[i] = is_any ? std::any_of(row, row + r.inner, [](bool v) { return v; })
                  : std::all_of(row, row + r.inner, [](bool v) { return v; });
  }
  return a.dtype() == DType::u8 ? to_dtype(out, DType::u8) : out;
}
}  // namespace

Tensor any(const Tensor& a) { return any_all(a, {}, false, true, "any"); }
Tensor all(const Tensor& a) { return any_all(a, {}, false, false, "all"); }
Tensor any(const Tensor& a, int64_t dim, bool keepdim) {
  return any_all(a, {dim}, keepdim, true, "any");
}
Tensor all(const Tensor& a, int64_t dim, bool keepdim) {
  return any_all(a, {dim}, keepdim, false, "all");
}

namespace {
struct Axis {
  int64_t ax, outer, C, inner;
  Shape out_shape;
};

Axis reduce_axis(const Tensor& a, int64_t dim, bool keepdim, const char* op) {
  check_float(a, op);
  check_arg(a.dim() >= 1, op, a, "a tensor with at least one axis");
  Axis r{normalize_axis(dim, a.dim(), op), 1, 0, 1, {}};
  check_arg(a.shape()[r.ax] >= 1, op, a, fmt::format("a non-empty axis {}", dim));
  for (int64_t k = 0; k < a.dim(); ++k) {
    if (k < r.ax) r.outer *= a.shape()[k];
    if (k > r.ax) r.inner *= a.shape()[k];
    if (k != r.ax || keepdim) r.out_shape.push_back(k == r.ax ? 1 : a.shape()[k]);
  }
  r.C = a.shape()[r.ax];
  return r;
}

// A constant of a's shape and dtype: 1 at [o, idx[o, i], i], 0 elsewhere (where the gradient of
// max/min along an axis goes).
Tensor index_mask(const Tensor& a, const Axis& r, const Tensor& idx) {
  Tensor mask = Tensor::zeros(a.shape(), DType::b8);
  const int64_t* ix = idx.data<int64_t>();
  bool* m = mask.data<bool>();
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t i = 0; i < r.inner; ++i) m[(o * r.C + ix[o * r.inner + i]) * r.inner + i] = true;
  return mask;
}

// values (when wanted) and indices of the max or min along dim.
ValuesAndIndices extreme_dim(const Tensor& a, int64_t dim, bool keepdim, bool is_max,
                             bool want_values, const char* op) {
  ScopedOpTimer op_timer(OpFamily::other);
  const Axis r = reduce_axis(a, dim, keepdim, op);
  Tensor x = kernel_input(a);
  ValuesAndIndices out{want_values ? Tensor::empty(r.out_shape, a.dtype()) : Tensor(),
                       Tensor::empty(r.out_shape, DType::i64)};
  dispatch_float(a.dtype(), op, [&]<class T>() {
    max_dim_forward<T>(want_values ? out.values.data<T>() : nullptr, out.indices.data<int64_t>(),
                       x.data<T>(), r.outer, r.C, r.inner, is_max);
  });
  if (tracing())
    trace_op(is_max ? "max_dim" : "min_dim", {a}, {out.values, out.indices},
             {{"axis", r.ax}, {"keepdim", keepdim}});
  if (want_values && should_record({a}))
    record(op, {a}, out.values,
           [a, r, idx = out.indices, op](const Tensor& g) {
             // grad(a)[o, idx[o, i], i] += g[o, i]: the gather backward with one index per (o, i)
             Tensor gc = g.contiguous();
             Tensor t = Tensor::zeros(a.shape(), a.dtype());
             const GatherIndex gi{idx.data<int64_t>(), r.inner, 0, 1};
             dispatch_float(a.dtype(), op, [&]<class T>() {
               gather_backward<T>(t.data<T>(), gc.data<T>(), gi, r.outer, r.C, 1, r.inner);
             });
             accumulate_grad(a, t);
           })
        .saves({out.indices})  // the indices only (returned to the caller too)
        .differentiable([a, r, idx = out.indices](const Tensor& g, const Tensor&) {
          // g broadcast back over the axis, kept at the index position only
          Shape keep = a.shape();
          keep[r.ax] = 1;
          accumulate_grad(a, where(index_mask(a, r, idx), expand(reshape(g, keep), a.shape()),
                                   Tensor::zeros({}, a.dtype())));
        });
  return out;
}

// The max or min of every element; backward: g / (number of elements equal to it) to each.
Tensor extreme_all(const Tensor& a, bool is_max, const char* op) {
  ScopedOpTimer op_timer(OpFamily::other);
  check_float(a, op);
  check_arg(a.numel() >= 1, op, a, "a non-empty tensor (or a dim to reduce)");
  Tensor x = kernel_input(a);
  Tensor out = Tensor::empty({}, a.dtype());
  int64_t where = 0;
  dispatch_float(a.dtype(), op, [&]<class T>() {
    max_dim_forward<T>(out.data<T>(), &where, x.data<T>(), 1, a.numel(), 1, is_max);
  });
  if (tracing()) trace_op(op, {a}, {out});
  if (should_record({a}))
    record(op, {a}, out,
           [a, x, out = detach(out), op](const Tensor& g) {
             Tensor t = Tensor::zeros(a.shape(), a.dtype());
             dispatch_float(a.dtype(), op, [&]<class T>() {
               // torch's evenly_distribute_backward: mask = (x == v) | (isnan(x) & isnan(v))
               const T v = out.data<T>()[0], *xs = x.data<T>();
               auto tied = [&](T e) { return e == v || (std::isnan(e) && std::isnan(v)); };
               int64_t count = 0;
               for (int64_t k = 0; k < a.numel(); ++k) count += tied(xs[k]);
               const T share = static_cast<T>(g.item()) / static_cast<T>(count);
               T* ts = t.data<T>();
               for (int64_t k = 0; k < a.numel(); ++k)
                 if (tied(xs[k])) ts[k] = share;
             });
             accumulate_grad(a, t);
           })
        .saves({a, out})
        .differentiable([a](const Tensor& g, const Tensor& out) {
          // the tied elements (a NaN extreme ties with every NaN): constants; g/count to each
          const Tensor tied = std::isnan(out.item()) ? ne(a, a) : eq(a, out);
          const Tensor count = Tensor::full({}, sum(tied).item(), a.dtype());
          accumulate_grad(a, dg::where(tied, div(g, count), Tensor::zeros({}, a.dtype())));
        });
  return out;
}
}  // namespace

ValuesAndIndices max(const Tensor& a, int64_t dim, bool keepdim) {
  return extreme_dim(a, dim, keepdim, true, true, "max");
}
ValuesAndIndices min(const Tensor& a, int64_t dim, bool keepdim) {
  return extreme_dim(a, dim, keepdim, false, true, "min");
}
Tensor max(const Tensor& a) { return extreme_all(a, true, "max"); }
Tensor min(const Tensor& a) { return extreme_all(a, false, "min"); }
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) {
  return extreme_dim(a, dim, keepdim, true, false, "argmax").indices;
}
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim) {
  return extreme_dim(a, dim, keepdim, false, false, "argmin").indices;
}
// Over the flattened tensor: a scalar int64 index into a's row-major order, as torch.
Tensor argmax(const Tensor& a) {
  check_arg(a.defined(), "argmax", a, "a defined tensor");
  return argmax(raw::view_reshape(kernel_input(a), {a.numel()}), 0, false);
}
Tensor argmin(const Tensor& a) {
  check_arg(a.defined(), "argmin", a, "a defined tensor");
  return argmin(raw::view_reshape(kernel_input(a), {a.numel()}), 0, false);
}

// ---- cumsum: out[.., c, ..] = Σ_{k ≤ c} a[.., k, ..]; backward: the reversed cumsum of g -------
namespace {
// The running sum along axis (from the end when reverse), recorded as `op`; its backward is the
// running sum of g in the other direction (itself recorded: composed, differentiable again).
Tensor scan(const Tensor& a, int64_t axis, bool reverse, const char* op) {
  ScopedOpTimer op_timer(OpFamily::other);
  check_float(a, op);
  const int64_t rank = std::max<int64_t>(a.dim(), 1), ax = axis < 0 ? axis + rank : axis;
  if (ax < 0 || ax >= rank)  // a 0-d tensor takes axis 0 or −1, as torch
    throw std::invalid_argument(fmt::format("{}: axis {} is out of range [{}, {}) for {}", op, axis,
                                            -rank, rank, a.describe()));
  Tensor x = kernel_input(a);
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  const int64_t C = a.dim() == 0 ? 1 : a.size(ax);
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < a.dim(); ++k) (k < ax ? outer : inner) *= k == ax ? 1 : a.size(k);
  dispatch_float(a.dtype(), op, [&]<class T>() {
    cumsum_forward<T>(out.data<T>(), x.data<T>(), outer, C, inner, reverse);
  });
  if (tracing()) trace_op("cumsum", {a}, {out}, {{"axis", ax}, {"reverse", reverse}});
  if (should_record({a}))
    record(op, {a}, out,
           [a, axis, reverse](const Tensor& g) {
             accumulate_grad(a, scan(g, axis, !reverse, reverse ? "cumsum" : "cumsum_backward"));
           })
        .saves({})
        .composed();
  return out;
}
}  // namespace

Tensor cumsum(const Tensor& a, int64_t axis) { return scan(a, axis, false, "cumsum"); }

// ---- var / std: Σ (a − mean)² / max(0, N − correction) over dims; std = sqrt(var) ---------------
// torch.var(input, dim, *, correction, keepdim): N the number of elements reduced, correction 1
// Bessel's (torch's default, unbiased = True), 0 the population variance (unbiased = False; a bool
// passed as the correction means just that). N − correction <= 0 divides by 0, as torch: inf, or
// NaN when every reduced element is equal. Backward: g · 2(a − mean) / (N − correction), written
// with recorded ops (create_graph works). std is sqrt of the recorded var (its gradient at a zero
// variance is NaN, as torch's).
Tensor var(const Tensor& a, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "var";
  check_arg(a.defined() && is_floating(a.dtype()), op, a,
            "a float32 or float64 tensor (std and var only support floating point dtypes)");
  const std::vector<int64_t> axes = normalize_axes(dims, a.dim(), op);
  int64_t count = 1;
  for (int64_t k : axes) count *= a.shape()[k];
  const double divisor = static_cast<double>(std::max<int64_t>(0, count - correction));
  Tensor out;
  {
    NoGradGuard no_grad;  // the forward's steps are not recorded one by one
    const Tensor d = sub(a, mean(a, axes, true));
    out = div(sum(mul(d, d), axes, keepdim), Tensor::full({}, divisor, a.dtype()));
  }
  if (should_record({a}))
    record(op, {a}, out, [a, axes, divisor](const Tensor& g) {
      const Tensor d = sub(a, mean(a, axes, true));  // dvar/da = 2(a − mean)/divisor
      accumulate_grad(a, mul(reduce_backward(g, a.shape(), axes, false),
                             div(scale(d, 2.0), Tensor::full({}, divisor, a.dtype()))));
    }).composed();
  return out;
}

Tensor std(const Tensor& a, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  return sqrt(var(a, dims, correction, keepdim));
}

std::pair<Tensor, Tensor> var_mean(const Tensor& a, const std::vector<int64_t>& dims,
                                   int64_t correction, bool keepdim) {
  Tensor v = var(a, dims, correction, keepdim);
  return {v, mean(a, dims, keepdim)};
}

std::pair<Tensor, Tensor> std_mean(const Tensor& a, const std::vector<int64_t>& dims,
                                   int64_t correction, bool keepdim) {
  Tensor s = std(a, dims, correction, keepdim);
  return {s, mean(a, dims, keepdim)};
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

// data table: the reduce family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> reduce_op_cases() {
  using V = const std::vector<Tensor>&;
  // sum / mean: uniform inputs in [-1, 1)
  auto any = [](Shape s) {
    return [=] { return std::vector<Tensor>{random_tensor(s, 3, -1, 1).set_name("a")}; };
  };
  // Uniform random inputs: ties have probability zero and the gaps between values dwarf eps.
  auto one = [](Shape s, uint64_t seed) {
    return [=] { return std::vector<Tensor>{random_tensor(s, seed, -2, 2).set_name("x")}; };
  };
  return {
      {"sum/all", any({3, 4}), [](V in) { return sum(in[0]); }},
      {"sum/axis1", any({2, 3, 4}), [](V in) { return sum(in[0], {1}); }},
      {"sum/axes0,2,keepdim", any({2, 3, 4}),
       [](V in) {
         return sum(in[0], {0, -1}, true);
       }},
      {"mean/all", any({3, 4}), [](V in) { return mean(in[0]); }},
      {"mean/last", any({2, 3, 4}), [](V in) { return mean(in[0], {-1}); }},
      {"cumsum/axis 1", any({2, 5, 3}), [](V in) { return cumsum(in[0], 1); }},
      {"cumsum/last axis of a transposed view", any({4, 3}),
       [](V in) { return cumsum(transpose(in[0], 0, 1), -1); }},
      {"cumsum/axis 0", any({6}), [](V in) { return cumsum(in[0], 0); }},
      {"max/axis 1", one({3, 5, 2}, 51), [](V in) { return max(in[0], 1).values; }},
      {"max/last axis, keepdim", one({4, 6}, 52), [](V in) { return max(in[0], -1, true).values; }},
      {"min/axis 0", one({5, 3}, 53), [](V in) { return min(in[0], 0).values; }},
      {"min/of a transposed view, keepdim", one({3, 4}, 54),
       [](V in) { return min(transpose(in[0], 0, 1), 1, true).values; }},
      {"max/whole tensor", one({3, 4}, 55), [](V in) { return max(in[0]); }},
      {"min/whole tensor", one({2, 3, 2}, 56), [](V in) { return min(in[0]); }},
      {"var/all", any({3, 4}), [](V in) { return var(in[0]); }},
      {"var/axis 1, correction 0, keepdim", any({2, 5, 3}),
       [](V in) { return var(in[0], {1}, 0, true); }},
      {"var/axes 0 and 2, correction 2", any({3, 2, 4}),
       [](V in) {
         return var(in[0], {0, -1}, 2);
       }},
      {"std/last axis", any({4, 5}), [](V in) { return dg::std(in[0], {-1}); }},
      {"std/of a transposed view, correction 0", any({3, 4}),
       [](V in) { return dg::std(transpose(in[0], 0, 1), {1}, 0); }},
      {"var_mean/axis 0, both outputs", any({4, 3}),
       [](V in) {
         auto [v, m] = var_mean(in[0], {0});
         return add(v, scale(m, 0.5));
       }},
      {"std_mean/all, keepdim, both outputs", any({2, 3}),
       [](V in) {
         auto [s, m] = std_mean(in[0], {}, 1, true);
         return sub(s, m);
       }},
  };
}

}  // namespace dg
