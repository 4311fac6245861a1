// The importer's shape ops (import_ops.h): Shape, Reshape, Transpose, Gather, Slice, Concat, Split,
// Squeeze, Unsqueeze, Expand, Constant, ConstantOfShape... with ONNX's semantics (opset 13 to 18:
// axes, shapes, starts and ends come as int64 inputs). On floating tensors they are depthgrad's
// recorded views and copies; the int64 shape values torch computes with run unrecorded.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "autograd/ops.h"
#include "train/io/onnx/import_ops.h"
#include "train/io/onnx/import_ops_common.h"
#include "train/io/onnx/tensors.h"

namespace dg::onnx {

namespace {

std::vector<Tensor> shape_of(const NodeRun& node) {
  const Shape& shape = node.input(0).shape();
  const auto rank = static_cast<int64_t>(shape.size());
  auto clamp_axis = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t{0}, rank); };
  const int64_t start = clamp_axis(node.i("start", 0));
  const int64_t end = node.has_attribute("end") ? clamp_axis(node.i("end", 0)) : rank;
  const std::vector<int64_t> dims(shape.begin() + start, shape.begin() + std::max(start, end));
  return {Tensor::from_ids(dims, {static_cast<int64_t>(dims.size())})};
}

std::vector<Tensor> size_of(const NodeRun& node) {
  return {Tensor::from_ids({node.input(0).numel()}, {})};
}

// Reshape: 0 copies the input's dim at that place (unless allowzero), one -1 is inferred.
std::vector<Tensor> reshape_op(const NodeRun& node) {
  const Tensor& x = node.input(0);
  Shape shape = node.int_values(1);
  const bool allow_zero = node.i("allowzero", 0) != 0;
  int64_t product = 1;
  for (int64_t d : shape)
    if (d < -1 || (d > 0 && __builtin_mul_overflow(product, d, &product)))
      node.fail(fmt::format("shape {} is not a shape of {} elements", shape_str(shape), x.numel()));
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 0 && !allow_zero) {
      if (static_cast<int64_t>(k) >= x.dim())
        node.fail(
            fmt::format("shape {} copies dim {} of a rank-{} input", shape_str(shape), k, x.dim()));
      shape[k] = x.size(static_cast<int64_t>(k));
    }
  }
  return {reshape(x, shape)};
}

std::vector<Tensor> transpose_op(const NodeRun& node) {
  const Tensor& x = node.input(0);
  Shape perm = node.ints("perm");
  if (perm.empty())
    for (int64_t d = x.dim() - 1; d >= 0; --d) perm.push_back(d);
  if (static_cast<int64_t>(perm.size()) != x.dim())
    node.fail(fmt::format("perm has {} axes for a rank-{} input", perm.size(), x.dim()));
  return {permute(x, perm)};
}

std::vector<Tensor> flatten_op(const NodeRun& node) {
  const Tensor& x = node.input(0);
  int64_t axis = node.i("axis", 1);
  if (axis < -x.dim() || axis > x.dim())
    node.fail(fmt::format("axis {} is out of range for rank {}", axis, x.dim()));
  if (axis < 0) axis += x.dim();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d < axis ? outer : inner) *= x.size(d);
  return {reshape(x, {outer, inner})};
}

std::vector<Tensor> squeeze_op(const NodeRun& node) {
  const Tensor& x = node.input(0);
  std::vector<int64_t> axes = node.has(1) ? node.int_values(1) : node.ints("axes");
  if (axes.empty()) return {squeeze(x)};
  for (int64_t& a : axes) a = node.axis(a, x.dim());
  std::sort(axes.rbegin(), axes.rend());
  Tensor out = x;
  for (int64_t a : axes) {
    if (x.size(a) != 1) node.fail(fmt::format("axis {} has size {}, not 1", a, x.size(a)));
    out = squeeze(out, a);
  }
  return {out};
}

std::vector<Tensor> unsqueeze_op(const NodeRun& node) {
  const Tensor& x = node.input(0);
  std::vector<int64_t> axes = node.has(1) ? node.int_values(1) : node.ints("axes");
  const int64_t rank = x.dim() + static_cast<int64_t>(axes.size());
  for (int64_t& a : axes) a = node.axis(a, rank);
  std::sort(axes.begin(), axes.end());
  Tensor out = x;
  for (int64_t a : axes) out = unsqueeze(out, a);
  return {out};
}

std::vector<Tensor> concat_op(const NodeRun& node) {
  std::vector<Tensor> parts;
  for (size_t k = 0; k < node.input_count(); ++k) parts.push_back(node.input(k));
  const int64_t axis = node.axis(node.i("axis", 0), parts[0].dim());
  if (!is_floating(parts[0].dtype())) {  // shape values: joined in int64, then the dtype back
    std::vector<Tensor> wide;
    for (const Tensor& p : parts) wide.push_back(p.to(DType::i64));
    return {cat(wide, axis).to(parts[0].dtype())};
  }
  return {cat(parts, axis)};
}

// Split into the `split` input's sizes, or into equal parts (the last one smaller) for each output.
std::vector<Tensor> split_op(const NodeRun& node) {
  const Tensor& x = node.input(0);
  const int64_t axis = node.axis(node.i("axis", 0), x.dim());
  std::vector<int64_t> sizes = node.has(1) ? node.int_values(1) : node.ints("split");
  if (sizes.empty()) {
    const auto parts = static_cast<int64_t>(node.i("num_outputs", node.output_count()));
    const int64_t each = (x.size(axis) + parts - 1) / parts;
    for (int64_t left = x.size(axis); left > 0; left -= each) sizes.push_back(std::min(each, left));
  }
  for (int64_t size : sizes)
    if (size < 0 || size > x.size(axis))
      node.fail(fmt::format("a split of {} along an axis of {}", size, x.size(axis)));
  if (sizes.size() != node.output_count())
    node.fail(fmt::format("{} sizes for {} outputs", sizes.size(), node.output_count()));
  return split(x, sizes, axis);
}

// One axis of Slice: [start, end) by step, clamped as ONNX says; a negative step walks a flipped
// view.
Tensor slice_axis(const NodeRun& node, const Tensor& x, int64_t axis, int64_t start, int64_t end,
                  int64_t step) {
  const int64_t n = x.size(axis);
  if (step == 0) node.fail("a step of 0");
  step = std::clamp(step, -std::max<int64_t>(n, 1), std::max<int64_t>(n, 1));  // the same slice
  if (start < 0) start += n;
  if (end < 0) end += n;
  if (step > 0) {
    start = std::clamp(start, int64_t{0}, n);
    end = std::clamp(end, int64_t{0}, n);
    return slice(x, axis, start, std::max(start, end), step);
  }
  start = std::clamp(start, int64_t{-1}, n - 1);
  end = std::clamp(end, int64_t{-1}, n - 1);
  const int64_t first = n - 1 - start, last = n - 1 - end;  // in the flipped axis
  return slice(flip(x, {axis}), axis, first, std::max(first, last), -step);
}

std::vector<Tensor> slice_op(const NodeRun& node) {
  const Tensor& x = node.input(0);
  const std::vector<int64_t> starts = node.int_values(1), ends = node.int_values(2);
  std::vector<int64_t> axes = node.has(3) ? node.int_values(3) : std::vector<int64_t>{};
  std::vector<int64_t> steps = node.has(4) ? node.int_values(4) : std::vector<int64_t>{};
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    node.fail("starts, ends, axes and steps differ in length");
  Tensor out = x;
  for (size_t k = 0; k < starts.size(); ++k)
    out = slice_axis(node, out, node.axis(axes[k], x.dim()), starts[k], ends[k], steps[k]);
  return {out};
}

// Gather on integer data (shape values): a plain loop over int64 copies.
Tensor gather_integers(const NodeRun& node, const Tensor& data, int64_t axis,
                       const std::vector<int64_t>& index, const Shape& out_shape) {
  const std::vector<int64_t> values = int64_values(data);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data.size(d);
  for (int64_t d = axis + 1; d < data.dim(); ++d) inner *= data.size(d);
  const int64_t n = data.size(axis);
  std::vector<int64_t> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : index)
      for (int64_t k = 0; k < inner; ++k) out.push_back(values[(o * n + i) * inner + k]);
  (void)node;
  return Tensor::from_ids(out, out_shape).to(data.dtype());
}

std::vector<Tensor> gather_op(const NodeRun& node) {
  const Tensor &data = node.input(0), &indices = node.input(1);
  const int64_t axis = node.axis(node.i("axis", 0), data.dim());
  const int64_t n = data.size(axis);
  std::vector<int64_t> index = node.int_values(1);
  for (int64_t& i : index) {
    if (i < -n || i >= n) node.fail(fmt::format("index {} is out of range for size {}", i, n));
    if (i < 0) i += n;
  }
  Shape out_shape(data.shape().begin(), data.shape().begin() + axis);
  out_shape.insert(out_shape.end(), indices.shape().begin(), indices.shape().end());
  out_shape.insert(out_shape.end(), data.shape().begin() + axis + 1, data.shape().end());
  if (!is_floating(data.dtype())) return {gather_integers(node, data, axis, index, out_shape)};
  if (indices.dim() == 0) return {select(data, axis, index[0])};
  const Tensor flat = Tensor::from_ids(index, {static_cast<int64_t>(index.size())});
  return {reshape(index_select(data, axis, flat), out_shape)};
}

// GatherElements(data, indices): out[.., j, ..] = data[.., indices[.., j, ..], ..] along axis.
std::vector<Tensor> gather_elements(const NodeRun& node) {
  const Tensor &data = node.input(0), &indices = node.input(1);
  const int64_t axis = node.axis(node.i("axis", 0), data.dim());
  if (indices.dim() != data.dim()) node.fail("indices and data differ in rank");
  std::vector<int64_t> index = node.int_values(1);
  const int64_t n = data.size(axis);
  for (int64_t& i : index) {
    if (i < -n || i >= n) node.fail(fmt::format("index {} is out of range for size {}", i, n));
    if (i < 0) i += n;
  }
  return {gather(data, axis, Tensor::from_ids(index, indices.shape()))};
}

std::vector<Tensor> expand_op(const NodeRun& node) {
  const Tensor& x = node.input(0);
  const Shape shape = broadcast_shapes(node, x.shape(), node.int_values(1));
  check_output_size(node, shape);
  if (!is_floating(x.dtype())) return {x.expand(shape).contiguous()};
  return {expand(x, shape)};
}

std::vector<Tensor> constant_of_shape(const NodeRun& node) {
  const Shape shape = node.int_values(0);
  check_output_size(node, shape);
  const TensorProto* value = node.tensor("value");
  if (!value) return {Tensor::zeros(shape, DType::f32)};
  const Tensor v = from_tensor_proto(*value, node.source());
  if (v.numel() != 1) node.fail("'value' should hold one element");
  return {Tensor::full(shape, v.item(), v.dtype())};
}

std::vector<Tensor> constant(const NodeRun& node) {
  int given = 0;
  for (const char* name : {"value", "value_float", "value_floats", "value_int", "value_ints"})
    given += node.has_attribute(name) ? 1 : 0;
  if (given != 1) node.fail("needs exactly one of value, value_float(s), value_int(s)");
  if (const TensorProto* value = node.tensor("value"))
    return {from_tensor_proto(*value, node.source())};
  if (node.has_attribute("value_float"))
    return {Tensor::full({}, node.f("value_float", 0), DType::f32)};
  if (node.has_attribute("value_int")) return {Tensor::from_ids({node.i("value_int", 0)}, {})};
  if (node.has_attribute("value_ints")) {
    const std::vector<int64_t> v = node.ints("value_ints");
    return {Tensor::from_ids(v, {static_cast<int64_t>(v.size())})};
  }
  const std::vector<float> v = node.floats("value_floats");
  return {Tensor::from_vector(v, {static_cast<int64_t>(v.size())})};
}

// Range(start, limit, delta): ceil((limit - start) / delta) values.
std::vector<Tensor> range_op(const NodeRun& node) {
  const double start = node.input(0).item(), limit = node.input(1).item();
  const double delta = node.input(2).item();
  if (delta == 0) node.fail("a delta of 0");
  const double count = std::max(0.0, std::ceil((limit - start) / delta));
  if (count > double(int64_t{1} << 30))
    node.fail(fmt::format("{} values are more than 2^30", count));
  std::vector<double> values;
  for (int64_t k = 0; k < static_cast<int64_t>(count); ++k) values.push_back(start + k * delta);
  return {
      Tensor::from_vector(values, {static_cast<int64_t>(values.size())}, node.input(0).dtype())};
}

// Tile: each axis repeated repeats[d] times, as a broadcast view of an added axis then a reshape.
std::vector<Tensor> tile_op(const NodeRun& node) {
  Tensor x = node.input(0);
  const std::vector<int64_t> repeats = node.int_values(1);
  if (static_cast<int64_t>(repeats.size()) != x.dim())
    node.fail(fmt::format("{} repeats for a rank-{} input", repeats.size(), x.dim()));
  Shape tiled = x.shape();
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t r = std::max<int64_t>(bounded(node, repeats[d], "a repeat of"), 0);
    if (r > 0 && tiled[d] > (int64_t{1} << 30) / r)
      node.fail(fmt::format("repeats {} of a {} input make more than 2^30 elements",
                            shape_str(repeats), shape_str(x.shape())));
    tiled[d] *= r;
  }
  check_output_size(node, tiled);
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (repeats[d] < 0) node.fail("a negative repeat");
    Shape shape = x.shape();
    shape.insert(shape.begin() + d, repeats[d]);
    Shape merged = x.shape();
    merged[d] *= repeats[d];
    x = reshape(expand(unsqueeze(x, d), shape), merged);
  }
  return {x};
}

// Pad(data, pads, constant_value, axes): ONNX's pads are every axis' begin, then every axis' end;
// depthgrad's pad (torch's) takes pairs from the last axis back, up to the first padded one.
std::vector<Tensor> pad_op(const NodeRun& node) {
  const Tensor& x = node.input(0);
  const std::vector<int64_t> pads = node.int_values(1);
  std::vector<int64_t> axes;
  if (node.has(3)) {
    for (int64_t a : node.int_values(3)) axes.push_back(node.axis(a, x.dim()));
  } else {
    for (int64_t d = 0; d < x.dim(); ++d) axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size())
    node.fail(fmt::format("{} pads for {} axes", pads.size(), axes.size()));
  std::vector<int64_t> begin(static_cast<size_t>(x.dim()), 0), end = begin;
  for (size_t k = 0; k < axes.size(); ++k) {
    begin[static_cast<size_t>(axes[k])] = bounded(node, pads[k], "a pad of");
    end[static_cast<size_t>(axes[k])] = bounded(node, pads[k + axes.size()], "a pad of");
  }
  int64_t first = 0;  // the first axis with any padding
  while (first < x.dim() && begin[first] == 0 && end[first] == 0) ++first;
  std::vector<int64_t> torch_pads;
  for (int64_t d = x.dim() - 1; d >= first; --d) {
    torch_pads.push_back(begin[static_cast<size_t>(d)]);
    torch_pads.push_back(end[static_cast<size_t>(d)]);
  }
  if (torch_pads.empty()) return {x};
  Shape padded = x.shape();
  for (size_t d = 0; d < padded.size(); ++d) padded[d] += begin[d] + end[d];
  check_output_size(node, padded);
  const std::string mode = node.s("mode", "constant");
  if (mode == "reflect") return {pad(x, torch_pads, PadMode::reflect)};
  if (mode == "edge") return {pad(x, torch_pads, PadMode::replicate)};
  if (mode != "constant") node.fail(fmt::format("mode '{}' is not supported", mode));
  return {pad(x, torch_pads, PadMode::constant, node.has(2) ? node.input(2).item() : 0.0)};
}

}  // namespace

const std::vector<OpSpec>& shape_ops() {
  static const std::vector<OpSpec> ops = {
      {"Shape", 1, 1, 1, "start:i end:i", shape_of},
      {"Size", 1, 1, 1, "", size_of},
      {"Reshape", 2, 2, 1, "allowzero:i", reshape_op},
      {"Transpose", 1, 1, 1, "perm:ints", transpose_op},
      {"Flatten", 1, 1, 1, "axis:i", flatten_op},
      {"Squeeze", 1, 2, 1, "", squeeze_op},
      {"Unsqueeze", 2, 2, 1, "", unsqueeze_op},
      {"Concat", 1, 1024, 1, "axis:i", concat_op},
      {"Split", 1, 2, 64, "axis:i num_outputs:i", split_op},
      {"Slice", 3, 5, 1, "", slice_op},
      {"Gather", 2, 2, 1, "axis:i", gather_op},
      {"GatherElements", 2, 2, 1, "axis:i", gather_elements},
      {"Expand", 2, 2, 1, "", expand_op},
      {"Tile", 2, 2, 1, "", tile_op},
      {"ConstantOfShape", 1, 1, 1, "value:t", constant_of_shape},
      {"Constant", 0, 0, 1, "value:t value_float:f value_floats:floats value_int:i value_ints:ints",
       constant},
      {"Range", 3, 3, 1, "", range_op},
      {"Pad", 2, 4, 1, "mode:s", pad_op},
  };
  return ops;
}

}  // namespace dg::onnx
