// Padding and moves of elements, torch 1.13's semantics: pad (torch.nn.functional.pad: constant,
// reflect, replicate, circular), flip, roll, tril, triu. pad, flip and roll are one "axis map" op
// each: output element (i_0, .., i_{n−1}) reads input element (m_0[i_0], .., m_{n−1}[i_{n−1}]), or
// the constant value where some m_k[i_k] is −1; the backward scatter-adds g through the same maps
// (a recorded op whose own backward is the forward map again, so create_graph works at any order).
// tril/triu keep a triangle of the last two axes; their backward is tril/triu of g. Every dtype
// goes forward (reflect and replicate padding: float ones, as torch); float ones record. None
// saves an input for the version check (the backwards read only shapes and maps).
// Does not do: pads of more than three axes in reflect/replicate/circular mode (torch 1.13 has
// none either).
// Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them), torch 1.13 goldens,
// errors and second derivatives in tests/test_torch_ops_a.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/profile.h"

namespace dg {

namespace {
// One index map per axis of the input: output index -> input index, or −1 for the fill value.
using AxisMaps = std::vector<std::vector<int64_t>>;

// Calls f(out, in) for every element of the output (flat row-major index `out`) with the flat
// index `in` of the input element it reads (the input contiguous, of shape in_shape), or −1
// where the fill value goes. Row by row: the leading axes' offsets are summed once per row.
template <class F>
void for_each_mapped(const AxisMaps& maps, const Shape& in_shape, F f) {
  const size_t n = maps.size();
  if (n == 0) {  // a 0-d tensor: its one element
    f(0, 0);
    return;
  }
  const Shape strides = contiguous_strides(in_shape);
  AxisMaps off(n);  // map · stride, −1 kept
  int64_t rows = 1;
  for (size_t k = 0; k < n; ++k) {
    for (int64_t m : maps[k]) off[k].push_back(m < 0 ? -1 : m * strides[k]);
    if (k + 1 < n) rows *= static_cast<int64_t>(maps[k].size());
  }
  const std::vector<int64_t>& last = off[n - 1];
  const int64_t L = static_cast<int64_t>(last.size());
  std::vector<size_t> idx(n - 1, 0);  // the row's index on the leading axes
  for (int64_t r = 0; r < rows; ++r) {
    int64_t base = 0;
    bool filled = false;
    for (size_t k = 0; k + 1 < n; ++k) {
      const int64_t o = off[k][idx[k]];
      filled = filled || o < 0;
      base += o;
    }
    for (int64_t j = 0; j < L; ++j) f(r * L + j, filled || last[j] < 0 ? -1 : base + last[j]);
    for (size_t k = n - 1; k-- > 0;) {  // the odometer over the leading axes
      if (++idx[k] < maps[k].size()) break;
      idx[k] = 0;
    }
  }
}

Shape mapped_shape(const AxisMaps& maps) {
  Shape s;
  for (const auto& m : maps) s.push_back(static_cast<int64_t>(m.size()));
  return s;
}

// The names an axis-map op records: the op and its backward.
struct MapNames {
  const char* op;
  const char* backward;
};

Tensor map_axes(const Tensor& a, const std::shared_ptr<const AxisMaps>& maps, double fill,
                MapNames names);

// zeros of in_shape with g scatter-added through the maps (the −1 entries dropped): the backward
// of map_axes, recorded; its own backward maps gg forward again (fill 0).
Tensor map_axes_backward(const Tensor& g, const Shape& in_shape,
                         const std::shared_ptr<const AxisMaps>& maps, MapNames names) {
  const Tensor gc = kernel_input(g);
  Tensor t = Tensor::zeros(in_shape, g.dtype());
  dispatch_float(g.dtype(), names.backward, [&]<class T>() {
    const T* gs = gc.data<T>();
    T* ts = t.data<T>();
    for_each_mapped(*maps, in_shape, [&](int64_t o, int64_t i) {
      if (i >= 0) ts[i] += gs[o];
    });
  });
  if (should_record({g}))
    record(
        names.backward, {g}, t,
        [g, maps, names](const Tensor& gg) { accumulate_grad(g, map_axes(gg, maps, 0.0, names)); })
        .saves({})
        .composed();
  return t;
}

// out[i_0, .., i_{n−1}] = a[maps[0][i_0], .., maps[n−1][i_{n−1}]], or fill where a map is −1.
Tensor map_axes(const Tensor& a, const std::shared_ptr<const AxisMaps>& maps, double fill,
                MapNames names) {
  const Tensor x = kernel_input(a);
  Tensor out = Tensor::empty(mapped_shape(*maps), a.dtype());
  dispatch_any(a.dtype(), [&]<class T>() {
    const T* xs = x.data<T>();
    T* os = out.data<T>();
    const T value = static_cast<T>(fill);
    for_each_mapped(*maps, a.shape(), [&](int64_t o, int64_t i) { os[o] = i < 0 ? value : xs[i]; });
  });
  if (is_floating(a.dtype()) && should_record({a}))
    record(names.op, {a}, out,
           [a, maps, names](const Tensor& g) {
             accumulate_grad(a, map_axes_backward(g, a.shape(), maps, names));
           })
        .saves({})
        .composed();
  return out;
}

// The identity map of every axis of a.
AxisMaps identity_maps(const Tensor& a) {
  AxisMaps maps(static_cast<size_t>(a.dim()));
  for (int64_t k = 0; k < a.dim(); ++k)
    for (int64_t i = 0; i < a.size(k); ++i) maps[k].push_back(i);
  return maps;
}

// dims made non-negative against max(rank, 1) (a 0-d tensor takes 0 and −1, as torch), each once.
std::vector<int64_t> distinct_dims(const Tensor& a, const std::vector<int64_t>& dims,
                                   const char* op) {
  std::vector<int64_t> out;
  for (int64_t d : dims) {
    const int64_t ax = normalize_axis(d, std::max<int64_t>(a.dim(), 1), op);
    if (std::find(out.begin(), out.end(), ax) != out.end())
      throw std::invalid_argument(
          fmt::format("{}: dim {} appears multiple times in the list of dims", op, ax));
    out.push_back(ax);
  }
  return out;
}
}  // namespace

// ---- pad: torch.nn.functional.pad; pads run from the last axis backwards ----------------------
namespace {
const char* mode_name(PadMode mode) {
  switch (mode) {
    case PadMode::constant:
      return "constant";
    case PadMode::reflect:
      return "reflect";
    case PadMode::replicate:
      return "replicate";
    case PadMode::circular:
      return "circular";
  }
  return "?";
}

// The checks torch 1.13 makes of the whole call (not of one axis).
void check_pad_call(const Tensor& x, const std::vector<int64_t>& pads, PadMode mode, double value) {
  check_arg(x.defined(), "pad", x, "a defined tensor");
  if (pads.size() % 2 != 0)
    throw std::invalid_argument(fmt::format(
        "pad: padding length must be divisible by 2, got {} values; give (left, right) pairs, "
        "the last axis first",
        pads.size()));
  const int64_t p = static_cast<int64_t>(pads.size()) / 2;
  if (mode == PadMode::constant) {
    if (p > x.dim())
      throw std::invalid_argument(
          fmt::format("pad: padding length too large: {} pairs for a tensor with {} axes {}", p,
                      x.dim(), shape_str(x.shape())));
    return;
  }
  const char* name = mode_name(mode);
  if (value != 0.0)
    throw std::invalid_argument(fmt::format(
        "pad: padding mode \"{}\" doesn't take in value argument (got {})", name, value));
  if (p < 1 || p > 3 || x.dim() < p + 1 || x.dim() > p + 2)
    throw std::invalid_argument(fmt::format(
        "pad: only 2D, 3D, 4D, 5D padding with non-constant padding are supported: {} padding of "
        "{} pairs needs a tensor with {} or {} axes, got {}",
        name, p, p + 1, p + 2, x.describe()));
  if (mode == PadMode::circular) {  // torch 1.13 pads batched [N, C, ..] tensors only
    if (x.dim() != p + 2)
      throw std::invalid_argument(fmt::format(
          "pad: circular padding of {} pairs needs a tensor with {} axes (batch and channel "
          "first), got {}",
          p, p + 2, x.describe()));
    return;  // any dtype, as torch
  }
  check_arg(is_floating(x.dtype()), "pad", x,
            fmt::format("a float32 or float64 tensor for {} padding", name));
}

// The map of one axis of size n padded by (left, right).
std::vector<int64_t> pad_map(int64_t n, int64_t left, int64_t right, PadMode mode, int64_t axis) {
  const int64_t out = n + left + right;
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument(fmt::format("pad: {} padding ({}, {}) of axis {} (size {}): {}",
                                            mode_name(mode), left, right, axis, n, what));
  };
  if (out < 0) fail(fmt::format("the output size {} is negative", out));
  // circular, as torch 1.13: the negative pads crop first, the positive ones wrap what is left
  const int64_t crop = std::max<int64_t>(-left, 0), kept = n - crop - std::max<int64_t>(-right, 0);
  if (mode == PadMode::circular) {
    if (left > kept || right > kept)
      fail(
          fmt::format("padding value causes wrapping around more than once ({} elements after "
                      "cropping by the negative pads)",
                      kept));
  } else if (mode != PadMode::constant) {
    if (n < 1) fail("the axis is empty");
    if (mode == PadMode::reflect && (left >= n || right >= n))
      fail("padding size should be less than the corresponding input dimension");
    if (out < 1) fail(fmt::format("the input is too small, calculated output size {}", out));
  }
  std::vector<int64_t> map(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const int64_t i = o - left;
    switch (mode) {
      case PadMode::constant:
        map[o] = i >= 0 && i < n ? i : -1;
        break;
      case PadMode::reflect:
        map[o] = i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i);
        break;
      case PadMode::replicate:
        map[o] = std::clamp<int64_t>(i, 0, n - 1);
        break;
      case PadMode::circular:
        map[o] = crop + (((o - std::max<int64_t>(left, 0)) % kept) + kept) % kept;
        break;
    }
  }
  return map;
}
}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, PadMode mode, double value) {
  ScopedOpTimer op_timer(OpFamily::other);
  check_pad_call(x, pads, mode, value);
  auto maps = std::make_shared<AxisMaps>(identity_maps(x));
  for (size_t j = 0; j < pads.size() / 2; ++j) {
    const int64_t axis = x.dim() - 1 - static_cast<int64_t>(j);
    (*maps)[axis] = pad_map(x.size(axis), pads[2 * j], pads[2 * j + 1], mode, axis);
  }
  Tensor out = map_axes(x, maps, value, {"pad", "pad_backward"});
  if (tracing())
    trace_op("pad", {x}, {out}, {{"pads", pads}, {"mode", mode_name(mode)}, {"value", value}});
  return out;
}

// ---- flip: out[.., i, ..] = x[.., n − 1 − i, ..] along each of dims ---------------------------
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims) {
  ScopedOpTimer op_timer(OpFamily::other);
  check_arg(x.defined(), "flip", x, "a defined tensor");
  auto maps = std::make_shared<AxisMaps>(identity_maps(x));
  for (int64_t ax : distinct_dims(x, dims, "flip"))
    if (x.dim() > 0) std::reverse((*maps)[ax].begin(), (*maps)[ax].end());
  Tensor out = map_axes(x, maps, 0.0, {"flip", "flip_backward"});
  if (tracing()) trace_op("flip", {x}, {out}, {{"dims", distinct_dims(x, dims, "flip")}});
  return out;
}

// ---- roll: out[.., i, ..] = x[.., (i − shift) mod n, ..]; without dims, of the flattened x -----
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  ScopedOpTimer op_timer(OpFamily::other);
  check_arg(x.defined(), "roll", x, "a defined tensor");
  if (shifts.empty()) throw std::invalid_argument("roll: `shifts` required (one per dim)");
  if (dims.empty() && shifts.size() == 1)  // torch: roll the flattened tensor, then reshape back
    return reshape(roll(reshape(x, {x.numel()}), shifts, {0}), x.shape());
  if (shifts.size() != dims.size())
    throw std::invalid_argument(
        fmt::format("roll: shifts and dimensions must align. shifts: {}, dims: {} (without dims, "
                    "give one shift: the flattened tensor is rolled)",
                    shifts.size(), dims.size()));
  Shape total(static_cast<size_t>(x.dim()), 0);  // a dim listed twice rolls twice
  for (size_t k = 0; k < dims.size(); ++k)
    total[normalize_axis(dims[k], x.dim(), "roll")] += shifts[k];
  auto maps = std::make_shared<AxisMaps>(identity_maps(x));
  for (int64_t ax = 0; ax < x.dim(); ++ax) {
    const int64_t n = x.size(ax);
    for (int64_t i = 0; i < n; ++i) (*maps)[ax][i] = (((i - total[ax]) % n) + n) % n;
  }
  Tensor out = map_axes(x, maps, 0.0, {"roll", "roll_backward"});
  if (tracing()) trace_op("roll", {x}, {out}, {{"shifts", total}});  // the shift of each axis
  return out;
}

// ---- tril / triu: the lower (upper) triangle of the last two axes, zeros elsewhere ------------
namespace {
// Keeps element (i, j) of each matrix where j − i <= diagonal (lower) or >= diagonal (upper).
Tensor triangle(const Tensor& a, int64_t diagonal, bool lower) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = lower ? "tril" : "triu";
  check_arg(a.defined() && a.dim() >= 2, op, a, "a tensor with at least 2 axes");
  const Tensor x = kernel_input(a);
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  const int64_t R = a.size(-2), C = a.size(-1), mats = a.numel() / std::max<int64_t>(R * C, 1);
  dispatch_any(a.dtype(), [&]<class T>() {
    const T* xs = x.data<T>();
    T* os = out.data<T>();
    for (int64_t m = 0; m < mats; ++m)
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < C; ++j) {
          const int64_t e = (m * R + i) * C + j;
          os[e] = (lower ? j - i <= diagonal : j - i >= diagonal) ? xs[e] : T(0);
        }
  });
  if (tracing()) trace_op(op, {a}, {out}, {{"diagonal", diagonal}});
  if (is_floating(a.dtype()) && should_record({a}))
    record(
        op, {a}, out,
        [a, diagonal, lower](const Tensor& g) { accumulate_grad(a, triangle(g, diagonal, lower)); })
        .saves({})
        .composed();
  return out;
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, true); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, false); }

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

// data table: the pad family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> pad_op_cases() {
  using V = const std::vector<Tensor>&;
  auto one = [](Shape s, uint64_t seed) {
    return [=] { return std::vector<Tensor>{random_tensor(s, seed).set_name("x")}; };
  };
  return {
      {"pad/constant, last axis, value 0.5", one({2, 3, 4}, 71),
       [](V in) {
         return pad(in[0], {1, 2}, PadMode::constant, 0.5);
       }},
      {"pad/constant, negative pads crop", one({3, 4, 5}, 72),
       [](V in) {
         return pad(in[0], {-1, 2, 1, -2});
       }},
      {"pad/constant, three axes", one({2, 3, 2}, 73),
       [](V in) {
         return pad(in[0], {0, 1, 2, 0, 1, 1});
       }},
      {"pad/reflect, 1-d", one({2, 3, 5}, 74),
       [](V in) {
         return pad(in[0], {2, 4}, PadMode::reflect);
       }},
      {"pad/reflect, 2-d, negative pad", one({1, 2, 4, 5}, 75),
       [](V in) {
         return pad(in[0], {-1, 3, 3, 1}, PadMode::reflect);
       }},
      {"pad/reflect, 3-d, of a transposed view", one({1, 3, 3, 4}, 76),
       [](V in) {
         return pad(transpose(in[0], 2, 3), {1, 2, 2, 0, 1, 1}, PadMode::reflect);
       }},
      {"pad/replicate, 1-d, unbatched", one({3, 4}, 77),
       [](V in) {
         return pad(in[0], {3, 1}, PadMode::replicate);
       }},
      {"pad/replicate, 2-d", one({2, 3, 4}, 78),
       [](V in) {
         return pad(in[0], {2, 1, 0, 3}, PadMode::replicate);
       }},
      {"pad/replicate, 3-d", one({1, 1, 2, 3, 3}, 79),
       [](V in) {
         return pad(in[0], {1, 0, 2, 1, 1, 2}, PadMode::replicate);
       }},
      {"pad/circular, 2-d, negative pad", one({2, 1, 3, 4}, 87),
       [](V in) {
         return pad(in[0], {3, -1, 2, 3}, PadMode::circular);
       }},
      {"pad/circular, 1-d", one({1, 2, 3}, 88),
       [](V in) {
         return pad(in[0], {3, 2}, PadMode::circular);
       }},
      {"flip/axes 0 and 2", one({3, 2, 4}, 80),
       [](V in) {
         return flip(in[0], {0, -1});
       }},
      {"flip/middle axis of a transposed view", one({3, 4, 2}, 81),
       [](V in) { return flip(transpose(in[0], 0, 1), {1}); }},
      {"roll/flattened", one({3, 4}, 82), [](V in) { return roll(in[0], {5}); }},
      {"roll/two axes, negative shift", one({3, 4, 2}, 83),
       [](V in) {
         return roll(in[0], {-1, 6}, {1, 0});
       }},
      {"tril/batched, diagonal -1", one({2, 4, 3}, 84), [](V in) { return tril(in[0], -1); }},
      {"triu/diagonal 1", one({3, 5}, 85), [](V in) { return triu(in[0], 1); }},
      {"triu/of a transposed view", one({4, 3}, 86),
       [](V in) { return triu(transpose(in[0], 0, 1)); }},
  };
}

}  // namespace dg
