// Resizing: torch.nn.functional.interpolate in modes nearest (3-D and 4-D input) and bilinear
// (4-D), with torch 1.13's index arithmetic. Each output row (column) reads one source row
// (nearest) or two with weights (bilinear), so the op is recorded as index_select along H and W,
// and for bilinear two weighted index_selects per axis added (W first, then H: torch's kernel
// computes (x00·w0 + x01·w1)·h0 + (x10·w0 + x11·w1)·h1, and so do these ops, in that order).
// The gradient is therefore torch's (index_select's scatter-add) and create_graph works.
// Does not do: linear, bicubic, trilinear, area, nearest-exact, antialias, 5-D input.
// Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them), torch 1.13 goldens and
// refusals in tests/test_torch_ops_b.cpp and tests/test_pytorch_idioms_ops_index_loss.cpp.
#include <fmt/format.h>

#include <cmath>

#include "autograd/op_util.h"
#include "autograd/ops.h"

namespace dg {

namespace {
// The source scale of one axis, torch's area_pixel_compute_scale in scalar_t: (in − 1)/(out − 1)
// with align_corners (0 for one output), else 1/scale_factor when a scale factor is used, else
// in/out.
template <class T>
T source_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  if (scale && *scale > 0) return static_cast<T>(1.0 / *scale);
  return static_cast<T>(in) / static_cast<T>(out);
}

// nearest: source row of output i = min(floor(scale·i), in − 1), with the product in scalar_t
// and the floor taken in float (torch's floorf), as HelperInterpNearest.
template <class T>
Tensor nearest_index(int64_t in, int64_t out, std::optional<double> scale) {
  const T s = source_scale<T>(in, out, false, scale);
  std::vector<int64_t> idx(static_cast<size_t>(out));
  for (int64_t i = 0; i < out; ++i) {
    const T real = s * static_cast<T>(i);
    idx[i] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(real))), in - 1);
  }
  return Tensor::from_ids(idx, {out});
}

// bilinear: rows i0, i1 = i0 + (i0 < in − 1) and weights 1 − λ, λ of output i, as
// compute_source_index_and_lambda: the same size copies; else the source coordinate
// scale·i (align_corners) or scale·(i + 0.5) − 0.5 clamped at 0, truncated to i0, λ its
// remainder. Every step in scalar_t.
struct LinearTaps {
  Tensor i0, i1, w0, w1;  // int64 [out], T [out]
};
template <class T>
LinearTaps linear_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale,
                       DType dtype) {
  const T s = source_scale<T>(in, out, align_corners, scale);
  std::vector<int64_t> i0(static_cast<size_t>(out)), i1(static_cast<size_t>(out));
  std::vector<double> w0(static_cast<size_t>(out)), w1(static_cast<size_t>(out));
  for (int64_t i = 0; i < out; ++i) {
    T lambda = 0;
    if (in == out) {
      i0[i] = i1[i] = i;
    } else {
      T real = align_corners ? s * static_cast<T>(i) : s * (static_cast<T>(i) + T(0.5)) - T(0.5);
      if (!align_corners && real < T(0)) real = T(0);
      i0[i] = static_cast<int64_t>(real);
      i1[i] = i0[i] + (i0[i] < in - 1 ? 1 : 0);
      lambda = real - static_cast<T>(i0[i]);
    }
    w0[i] = static_cast<double>(T(1) - lambda);
    w1[i] = static_cast<double>(lambda);
  }
  return {Tensor::from_ids(i0, {out}), Tensor::from_ids(i1, {out}),
          Tensor::from_vector(w0, {out}, dtype), Tensor::from_vector(w1, {out}, dtype)};
}

// x interpolated linearly along `axis` (the last or the one before it): the weighted sum of two
// index_selects; the weights broadcast along the axis.
Tensor linear_along(const Tensor& x, int64_t axis, const LinearTaps& taps) {
  Shape wshape(static_cast<size_t>(x.dim() - axis), 1);
  wshape[0] = taps.w0.numel();
  return add(mul(index_select(x, axis, taps.i0), reshape(taps.w0, wshape)),
             mul(index_select(x, axis, taps.i1), reshape(taps.w1, wshape)));
}

// The output size of each spatial axis and the scale factor torch passes to its kernel (none
// when the size was given, or recompute_scale_factor is true), as F.interpolate does.
struct Plan {
  std::vector<int64_t> size;
  std::vector<std::optional<double>> scale;
};
Plan plan(const Tensor& x, const InterpolateOptions& o, int64_t dims) {
  const char* op = "interpolate";
  const bool has_size = !o.size.empty(), has_scale = !o.scale_factor.empty();
  if (has_size && has_scale)
    throw std::invalid_argument("interpolate: only one of size or scale_factor should be defined");
  if (!has_size && !has_scale)
    throw std::invalid_argument("interpolate: either size or scale_factor should be defined");
  const size_t given = has_size ? o.size.size() : o.scale_factor.size();
  if (given != 1 && given != static_cast<size_t>(dims))
    throw std::invalid_argument(fmt::format(
        "interpolate: {} has {} values for {} spatial axes of input {} (give one, or one per "
        "axis: input [N, C, d1, ..] and {} (o1, ..))",
        has_size ? "size" : "scale_factor", given, dims, x.describe(),
        has_size ? "size" : "scale_factor"));
  if (has_size && o.recompute_scale_factor.value_or(false))
    throw std::invalid_argument(
        "interpolate: recompute_scale_factor is not meaningful with an explicit size");
  Plan p;
  for (int64_t k = 0; k < dims; ++k) {
    const int64_t in = x.size(2 + k);
    const size_t j = given == 1 ? 0 : static_cast<size_t>(k);
    if (has_size) {
      p.size.push_back(o.size[j]);
      p.scale.push_back(std::nullopt);
      continue;
    }
    const double f = o.scale_factor[j];
    // torch: floor(in·f) either way; the scale reaches the kernel unless recomputed
    p.size.push_back(static_cast<int64_t>(std::floor(static_cast<double>(in) * f)));
    p.scale.push_back(o.recompute_scale_factor.value_or(false) ? std::nullopt
                                                               : std::optional<double>(f));
  }
  for (int64_t k = 0; k < dims; ++k)
    if (p.size[k] <= 0 || x.size(2 + k) <= 0)
      throw std::invalid_argument(fmt::format(
          "{}: input and output sizes should be greater than 0, got input {} and output size "
          "{} on spatial axis {}",
          op, x.describe(), p.size[k], k));
  return p;
}
}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& o) {
  const char* op = "interpolate";
  check_float(x, op);
  const bool bilinear = o.mode == "bilinear";
  if (o.mode != "nearest" && !bilinear)
    throw std::invalid_argument(fmt::format(
        "interpolate: mode '{}' is not supported (nearest, bilinear); torch also has linear, "
        "bicubic, trilinear, area, nearest-exact",
        o.mode));
  if (!bilinear && o.align_corners)
    throw std::invalid_argument(
        "interpolate: align_corners option can only be set with the interpolating modes: linear "
        "| bilinear | bicubic | trilinear");
  if (bilinear && x.dim() != 4)
    throw std::invalid_argument(fmt::format(
        "interpolate: got {}-D input {}, but bilinear mode needs 4-D input [N, C, H, W]", x.dim(),
        x.describe()));
  check_arg(x.dim() == 3 || x.dim() == 4, op, x, "a 3-D [N, C, W] or 4-D [N, C, H, W] input");
  const int64_t dims = x.dim() - 2;
  const Plan p = plan(x, o, dims);
  Tensor out = x;
  for (int64_t k = dims - 1; k >= 0; --k) {  // W first, then H (torch's order of the sums)
    const int64_t axis = 2 + k, in = x.size(axis);
    out = dispatch_float(x.dtype(), op, [&]<class T>() {
      if (!bilinear) return index_select(out, axis, nearest_index<T>(in, p.size[k], p.scale[k]));
      const bool ac = o.align_corners.value_or(false);
      return linear_along(out, axis, linear_taps<T>(in, p.size[k], ac, p.scale[k], x.dtype()));
    });
  }
  return out;
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

// data table: the resize family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> resize_op_cases() {
  using V = const std::vector<Tensor>&;
  auto x = [](Shape s, uint64_t seed) {
    return [=] { return std::vector<Tensor>{random_tensor(s, seed).set_name("x")}; };
  };
  return {
      {"interpolate/nearest, scale 2", x({1, 2, 3, 2}, 61),
       [](V in) { return interpolate(in[0], {.scale_factor = {2}}); }},
      {"interpolate/nearest, size (5, 3) from (3, 4)", x({2, 1, 3, 4}, 62),
       [](V in) {
         return interpolate(in[0], {.size = {5, 3}});
       }},
      {"interpolate/nearest 3-D, scale 1.7", x({2, 2, 4}, 63),
       [](V in) { return interpolate(in[0], {.scale_factor = {1.7}}); }},
      {"interpolate/bilinear, size (5, 7)", x({1, 2, 3, 4}, 64),
       [](V in) {
         return interpolate(in[0], {.size = {5, 7}, .mode = "bilinear"});
       }},
      {"interpolate/bilinear, align_corners, size (4, 2)", x({2, 1, 3, 5}, 65),
       [](V in) {
         return interpolate(in[0], {.size = {4, 2}, .mode = "bilinear", .align_corners = true});
       }},
      {"interpolate/bilinear, scale (1.5, 0.6)", x({1, 2, 4, 5}, 66),
       [](V in) {
         return interpolate(in[0], {.scale_factor = {1.5, 0.6}, .mode = "bilinear"});
       }},
  };
}

}  // namespace dg
