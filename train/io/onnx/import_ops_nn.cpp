// The importer's network ops (import_ops.h): MatMul and Gemm, Conv and ConvTranspose (1-d, 2-d),
// the pools, the normalisations and the recurrent LSTM, GRU and RNN, with ONNX's semantics (opset
// 13 to 18) on depthgrad's recorded ops. ONNX's LSTM gates come in the order i, o, f, c and GRU's
// in z, r, h; depthgrad's (torch's) are i, f, g, o and r, z, n: the weights are reordered with
// recorded splits and a cat at each run, so their gradients reach the file's tensors.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "autograd/ops.h"
#include "train/io/onnx/import_ops.h"
#include "train/io/onnx/import_ops_common.h"

namespace dg::onnx {

namespace {

// MatMul with numpy's rules for 1-d operands (a [K] is a row, b [K] a column, both dropped).
std::vector<Tensor> matmul_op(const NodeRun& node) {
  Tensor a = node.input(0), b = node.input(1);
  const bool row = a.dim() == 1, column = b.dim() == 1;
  if (row) a = unsqueeze(a, 0);
  if (column) b = unsqueeze(b, 1);
  Tensor y = matmul(a, b);
  if (column) y = squeeze(y, -1);
  if (row) y = squeeze(y, column ? -1 : -2);
  return {y};
}

// Gemm: alpha·A'·B' + beta·C (A', B' transposed when asked); linear() when it is x·Wᵀ + b.
std::vector<Tensor> gemm(const NodeRun& node) {
  const Tensor &a = node.input(0), &b = node.input(1);
  if (a.dim() != 2 || b.dim() != 2) node.fail("A and B should be 2-d");
  const double alpha = node.f("alpha", 1.0), beta = node.f("beta", 1.0);
  const bool trans_a = node.i("transA", 0) != 0, trans_b = node.i("transB", 0) != 0;
  const Tensor c = node.has(2) ? node.input(2) : Tensor();
  if (!trans_a && trans_b && alpha == 1.0 && beta == 1.0 && (!c.defined() || c.dim() == 1))
    return {linear(a, b, c)};
  Tensor y = matmul(trans_a ? transpose(a, 0, 1) : a, trans_b ? transpose(b, 0, 1) : b);
  if (alpha != 1.0) y = scale(y, alpha);
  if (c.defined()) y = add(y, beta == 1.0 ? c : scale(c, beta));
  return {y};
}

// The padding of each spatial axis, before and after (ONNX's pads and auto_pad).
struct Padding {
  std::vector<int64_t> begin, end;
  bool symmetric() const { return begin == end; }
};

Padding padding_of(const NodeRun& node, const Tensor& x, const std::vector<int64_t>& kernel,
                   const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations) {
  const size_t n = kernel.size();
  Padding p{std::vector<int64_t>(n, 0), std::vector<int64_t>(n, 0)};
  const std::string auto_pad = node.s("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    const std::vector<int64_t> pads = node.ints("pads", std::vector<int64_t>(2 * n, 0));
    if (pads.size() != 2 * n)
      node.fail(fmt::format("pads has {} values, not {}", pads.size(), 2 * n));
    for (size_t k = 0; k < n; ++k) {
      p.begin[k] = bounded(node, pads[k], "a pad of");
      p.end[k] = bounded(node, pads[k + n], "a pad of");
      if (pads[k] < 0 || pads[k + n] < 0) node.fail("negative pads");
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t k = 0; k < n; ++k) {
      const int64_t in = x.size(static_cast<int64_t>(k) + 2);
      const int64_t out = (in + strides[k] - 1) / strides[k];
      const int64_t total =
          std::max<int64_t>(0, (out - 1) * strides[k] + (kernel[k] - 1) * dilations[k] + 1 - in);
      p.begin[k] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      p.end[k] = total - p.begin[k];
    }
  } else if (auto_pad != "VALID") {
    node.fail(
        fmt::format("auto_pad '{}' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER", auto_pad));
  }
  return p;
}

// x padded explicitly with `value` (torch's pad order: the last axis first).
Tensor pad_explicitly(const Tensor& x, const Padding& p, double value) {
  std::vector<int64_t> pads;
  for (size_t k = p.begin.size(); k-- > 0;) {
    pads.push_back(p.begin[k]);
    pads.push_back(p.end[k]);
  }
  return pad(x, pads, PadMode::constant, value);
}

// The spatial settings shared by Conv, ConvTranspose and the pools.
struct Window {
  std::vector<int64_t> kernel, strides, dilations;
  Padding padding;
};

Window window_of(const NodeRun& node, const Tensor& x, std::vector<int64_t> kernel) {
  const int64_t n = x.dim() - 2;
  if (n != 1 && n != 2)
    node.fail(fmt::format("a rank-{} input; 1-d and 2-d are supported", x.dim()));
  if (node.has_attribute("kernel_shape")) {
    const std::vector<int64_t> given = node.ints("kernel_shape");
    if (!kernel.empty() && given != kernel) node.fail("kernel_shape differs from the weight's");
    kernel = given;
  }
  if (static_cast<int64_t>(kernel.size()) != n) node.fail("kernel_shape has the wrong length");
  Window w{kernel,
           node.ints("strides", std::vector<int64_t>(n, 1)),
           node.ints("dilations", std::vector<int64_t>(n, 1)),
           {}};
  if (static_cast<int64_t>(w.strides.size()) != n || static_cast<int64_t>(w.dilations.size()) != n)
    node.fail("strides or dilations have the wrong length");
  for (size_t k = 0; k < kernel.size(); ++k) {
    if (w.strides[k] < 1 || w.dilations[k] < 1 || kernel[k] < 1)
      node.fail("kernel, strides and dilations must be positive");
    bounded(node, kernel[k], "a kernel size of");
    bounded(node, w.strides[k], "a stride of");
    bounded(node, w.dilations[k], "a dilation of");
  }
  w.padding = padding_of(node, x, w.kernel, w.strides, w.dilations);
  Shape padded = x.shape();
  for (size_t k = 0; k < kernel.size(); ++k) padded[k + 2] += w.padding.begin[k] + w.padding.end[k];
  check_output_size(node, padded);
  return w;
}

// (h, w) pairs of a 2-d window; a 1-d one is the 2-d one with a height of 1.
IntPair pair(const std::vector<int64_t>& v, int64_t one_d_height = 1) {
  return v.size() == 1 ? IntPair(one_d_height, v[0]) : IntPair(v[0], v[1]);
}

std::vector<Tensor> conv(const NodeRun& node) {
  Tensor x = node.input(0);
  const Tensor& weight = node.input(1);
  const Tensor bias = node.has(2) ? node.input(2) : Tensor();
  if (weight.dim() != x.dim()) node.fail("the weight's rank differs from the input's");
  Window w = window_of(node, x, Shape(weight.shape().begin() + 2, weight.shape().end()));
  if (!w.padding.symmetric()) {
    x = pad_explicitly(x, w.padding, 0.0);
    std::fill(w.padding.begin.begin(), w.padding.begin.end(), 0);
  }
  const int64_t groups = node.i("group", 1);
  if (x.dim() == 3)
    return {conv1d(x, weight, bias, w.strides[0], w.padding.begin[0], w.dilations[0], groups)};
  return {conv2d(x, weight, bias, pair(w.strides), pair(w.padding.begin, 0), pair(w.dilations),
                 groups)};
}

// ConvTranspose: conv_transpose2d without padding, then the pads cropped off each side.
std::vector<Tensor> conv_transpose(const NodeRun& node) {
  Tensor x = node.input(0), weight = node.input(1);
  const Tensor bias = node.has(2) ? node.input(2) : Tensor();
  if (weight.dim() != x.dim()) node.fail("the weight's rank differs from the input's");
  if (node.s("auto_pad", "NOTSET") != "NOTSET") node.fail("auto_pad is not supported");
  const Window w = window_of(node, x, Shape(weight.shape().begin() + 2, weight.shape().end()));
  const bool one_d = x.dim() == 3;
  if (one_d) {
    x = unsqueeze(x, 2);
    weight = unsqueeze(weight, 2);
  }
  const std::vector<int64_t> output_padding =
      node.ints("output_padding", std::vector<int64_t>(w.kernel.size(), 0));
  if (output_padding.size() != w.kernel.size()) node.fail("output_padding has the wrong length");
  for (int64_t p : output_padding) bounded(node, p, "an output padding of");
  Shape full = {x.size(0), weight.size(1) * node.i("group", 1)};
  for (size_t k = 0; k < w.kernel.size(); ++k)
    full.push_back((node.input(0).size(static_cast<int64_t>(k) + 2) - 1) * w.strides[k] +
                   (w.kernel[k] - 1) * w.dilations[k] + 1 + output_padding[k]);
  check_output_size(node, full);
  Tensor y = conv_transpose2d(x, weight, bias, pair(w.strides), IntPair(0, 0),
                              pair(output_padding, 0), node.i("group", 1), pair(w.dilations));
  for (size_t k = 0; k < w.kernel.size(); ++k) {
    const int64_t axis = static_cast<int64_t>(k) + (one_d ? 3 : 2);
    y = slice(y, axis, w.padding.begin[k], y.size(axis) - w.padding.end[k]);
  }
  return {one_d ? squeeze(y, 2) : y};
}

template <bool kMax>
std::vector<Tensor> pool(const NodeRun& node) {
  Tensor x = node.input(0);
  if (node.output_count() > 1) node.fail("the Indices output is not supported");
  if (node.i("storage_order", 0) != 0) node.fail("storage_order 1 is not supported");
  Window w = window_of(node, x, {});
  const bool ceil_mode = node.i("ceil_mode", 0) != 0;
  const bool one_d = x.dim() == 3;
  if (one_d) x = unsqueeze(x, 2);
  if (!w.padding.symmetric()) {
    if (!kMax) node.fail("pads that differ before and after are not supported for AveragePool");
    x = pad_explicitly(x, w.padding, -std::numeric_limits<double>::infinity());
    std::fill(w.padding.begin.begin(), w.padding.begin.end(), 0);
  }
  Tensor y;
  if (kMax) {
    y = max_pool2d(x, pair(w.kernel), pair(w.strides), pair(w.padding.begin, 0), pair(w.dilations),
                   ceil_mode);
  } else {
    for (int64_t d : w.dilations)
      if (d != 1) node.fail("dilations are not supported for AveragePool");
    y = avg_pool2d(x, pair(w.kernel), pair(w.strides), pair(w.padding.begin, 0), ceil_mode,
                   node.i("count_include_pad", 0) != 0);
  }
  return {one_d ? squeeze(y, 2) : y};
}

template <bool kMax>
std::vector<Tensor> global_pool(const NodeRun& node) {
  const Tensor& x = node.input(0);
  if (x.dim() < 3) node.fail("the input should have spatial axes");
  Tensor y = x;
  if (!kMax) {
    std::vector<int64_t> axes;
    for (int64_t d = 2; d < x.dim(); ++d) axes.push_back(d);
    return {mean(x, axes, true)};
  }
  for (int64_t d = x.dim() - 1; d >= 2; --d) y = max(y, d, true).values;
  return {y};
}

std::vector<Tensor> batch_normalization(const NodeRun& node) {
  if (node.i("training_mode", 0) != 0 || node.output_count() > 1)
    node.fail(
        "training mode is not supported (the importer normalises by the running "
        "statistics)");
  return {batch_norm(node.input(0), node.input(3), node.input(4), node.input(1), node.input(2),
                     false, 1.0 - node.f("momentum", 0.9), node.f("epsilon", 1e-5))};
}

std::vector<Tensor> instance_normalization(const NodeRun& node) {
  const Tensor& x = node.input(0);
  return {group_norm(x, x.size(1), node.input(1), node.input(2), node.f("epsilon", 1e-5))};
}

// GroupNormalization (opset 18): statistics per sample over each of num_groups groups of
// channels, then scale and bias given per group (opset 18's form; 21 made them per channel).
std::vector<Tensor> group_normalization(const NodeRun& node) {
  const Tensor &x = node.input(0), &scale_by_group = node.input(1), &bias_by_group = node.input(2);
  const int64_t groups = node.i("num_groups", 0);
  if (x.dim() < 2 || groups < 1 || x.size(1) % groups != 0)
    node.fail(fmt::format("num_groups {} does not divide the {} channels", groups,
                          x.dim() < 2 ? 0 : x.size(1)));
  if (scale_by_group.shape() != Shape{groups} || bias_by_group.shape() != Shape{groups})
    node.fail(fmt::format("scale and bias should be [{}] (one value per group)", groups));
  const int64_t per_group = x.size(1) / groups;
  auto per_channel = [&](const Tensor& t) {  // [G] -> [1, C, 1, ...]
    Shape shape(static_cast<size_t>(x.dim()), 1);
    shape[1] = x.size(1);
    return reshape(expand(reshape(t, {groups, 1}), {groups, per_group}), shape);
  };
  const Tensor normalised = group_norm(x, groups, Tensor(), Tensor(), node.f("epsilon", 1e-5));
  return {add(mul(normalised, per_channel(scale_by_group)), per_channel(bias_by_group))};
}

// LayerNormalization over the axes from `axis` on: layer_norm for the last axis, else composed.
std::vector<Tensor> layer_normalization(const NodeRun& node) {
  if (node.output_count() > 1) node.fail("the Mean and InvStdDev outputs are not supported");
  const Tensor& x = node.input(0);
  const Tensor& weight = node.input(1);
  const Tensor bias = node.has(2) ? node.input(2) : Tensor::zeros(weight.shape(), weight.dtype());
  const double eps = node.f("epsilon", 1e-5);
  const int64_t axis = node.axis(node.i("axis", -1), x.dim());
  if (axis == x.dim() - 1 && weight.dim() == 1 && bias.dim() == 1)
    return {layer_norm(x, weight, bias, eps)};
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < x.dim(); ++d) axes.push_back(d);
  const Tensor centred = sub(x, mean(x, axes, true));
  const Tensor variance = mean(mul(centred, centred), axes, true);
  return {add(mul(div(centred, sqrt(add_scalar(variance, eps))), weight), bias)};
}

// ---- LSTM and GRU -------------------------------------------------------------------------

// The G gate blocks of size H along `axis`, in `order` (ONNX's block order[k] becomes block k).
Tensor reorder_gates(const Tensor& w, int64_t axis, int64_t H, const std::vector<int64_t>& order) {
  const std::vector<Tensor> blocks = split(w, H, axis);
  std::vector<Tensor> picked;
  for (int64_t k : order) picked.push_back(blocks[static_cast<size_t>(k)]);
  return cat(picked, axis);
}

struct RecurrentShape {
  int64_t T, N, I, H, D, G;
};

RecurrentShape check_recurrent(const NodeRun& node, int64_t gates) {
  if (node.i("layout", 0) != 0) node.fail("layout 1 (batch first) is not supported");
  if (node.has_attribute("clip")) node.fail("clip is not supported");
  if (node.i("input_forget", 0) != 0) node.fail("input_forget is not supported");
  if (!node.floats("activation_alpha").empty() || !node.floats("activation_beta").empty())
    node.fail("activation_alpha and activation_beta are not supported");
  const std::vector<std::string> activations = node.strings("activations");
  for (size_t k = 0; gates > 1 && k < activations.size(); ++k) {  // RNN checks its own
    const bool gate = k % (gates == 4 ? 3 : 2) == 0;  // LSTM: f, g, h; GRU: f, g per direction
    if (activations[k] != (gate ? "Sigmoid" : "Tanh"))
      node.fail(
          fmt::format("activation '{}' is not supported (only the defaults Sigmoid and "
                      "Tanh)",
                      activations[k]));
  }
  if (node.has(4)) node.fail("sequence_lens is not supported (all sequences run to the end)");
  if (node.input_count() > 7 && node.has(7)) node.fail("peepholes (P) are not supported");
  const Tensor &x = node.input(0), &w = node.input(1), &r = node.input(2);
  const std::string direction = node.s("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    node.fail(fmt::format("direction '{}' is not forward, reverse or bidirectional", direction));
  const int64_t D = direction == "bidirectional" ? 2 : 1;
  if (x.dim() != 3 || w.dim() != 3 || r.dim() != 3) node.fail("X, W and R should be 3-d");
  const int64_t H = w.size(1) / gates;
  if (node.i("hidden_size", H) != H || w.size(0) != D || w.size(1) != gates * H ||
      w.size(2) != x.size(2) || r.shape() != Shape{D, gates * H, H})
    node.fail(fmt::format("W {} and R {} do not fit X {}, hidden_size {} and {} direction(s)",
                          shape_str(w.shape()), shape_str(r.shape()), shape_str(x.shape()),
                          node.i("hidden_size", H), D));
  return {x.size(0), x.size(1), x.size(2), H, D, gates};
}

// The initial state of direction d: initial_h / initial_c [D, N, H], or zeros.
Tensor initial_state(const NodeRun& node, size_t input, const RecurrentShape& s, int64_t d) {
  if (!node.has(input)) return Tensor::zeros({s.N, s.H}, node.input(0).dtype());
  const Tensor& state = node.input(input);
  if (state.shape() != Shape{s.D, s.N, s.H})
    node.fail(fmt::format("input {} should be {}, is {}", input, shape_str({s.D, s.N, s.H}),
                          shape_str(state.shape())));
  return select(state, 0, d);
}

template <bool kLstm>
std::vector<Tensor> recurrent(const NodeRun& node) {
  const RecurrentShape s = check_recurrent(node, kLstm ? 4 : 3);
  if (!kLstm && node.i("linear_before_reset", 0) != 1)
    node.fail("linear_before_reset 0 is not supported (depthgrad's GRU is torch's, 1)");
  const std::vector<int64_t> order =
      kLstm ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{1, 0, 2};
  const Tensor x = reshape(node.input(0), {s.T * s.N, s.I});
  const bool reverse_only = node.s("direction", "forward") == "reverse";
  std::vector<SequenceDirection> dirs;
  for (int64_t d = 0; d < s.D; ++d) {
    SequenceDirection dir;
    const Tensor w = reorder_gates(select(node.input(1), 0, d), 0, s.H, order);
    dir.weight_hh = reorder_gates(select(node.input(2), 0, d), 0, s.H, order);
    Tensor input_bias, hidden_bias;
    if (node.has(3)) {
      const Tensor b = select(node.input(3), 0, d);
      input_bias = reorder_gates(slice(b, 0, 0, s.G * s.H), 0, s.H, order);
      hidden_bias = reorder_gates(slice(b, 0, s.G * s.H, 2 * s.G * s.H), 0, s.H, order);
    }
    if (kLstm) {
      dir.gates_x = linear(x, w, input_bias.defined() ? add(input_bias, hidden_bias) : Tensor());
      dir.c0 = initial_state(node, 6, s, d);
    } else {
      dir.gates_x = linear(x, w, input_bias);
      dir.bias_hh =
          hidden_bias.defined() ? hidden_bias : Tensor::zeros({s.G * s.H}, node.input(0).dtype());
    }
    dir.h0 = initial_state(node, 5, s, d);
    dir.reverse = reverse_only || d == 1;
    dirs.push_back(dir);
  }
  std::vector<Tensor> outputs, last_h, last_c;
  for (const SequenceResult& r : kLstm ? lstm_sequence(dirs) : gru_sequence(dirs)) {
    outputs.push_back(r.output);
    last_h.push_back(r.h_n);
    last_c.push_back(r.c_n);
  }
  std::vector<Tensor> out = {stack(outputs, 1), stack(last_h, 0)};
  if (kLstm) out.push_back(stack(last_c, 0));
  return out;
}

// RNN: h_t = f(x_t·Wᵀ + Wb + h_{t−1}·Rᵀ + Rb), f Tanh (the default) or Relu per direction,
// composed step by step from recorded ops (depthgrad's RNN layer runs the same steps).
std::vector<Tensor> rnn(const NodeRun& node) {
  const RecurrentShape s = check_recurrent(node, 1);
  const std::vector<std::string> activations = node.strings("activations");
  if (!activations.empty() && static_cast<int64_t>(activations.size()) != s.D)
    node.fail(fmt::format("{} activations for {} direction(s)", activations.size(), s.D));
  const Tensor x = reshape(node.input(0), {s.T * s.N, s.I});
  const bool reverse_only = node.s("direction", "forward") == "reverse";
  std::vector<Tensor> outputs, last;
  for (int64_t d = 0; d < s.D; ++d) {
    const std::string f = activations.empty() ? "Tanh" : activations[static_cast<size_t>(d)];
    if (f != "Tanh" && f != "Relu")
      node.fail(fmt::format("activation '{}' is not supported (Tanh or Relu)", f));
    Tensor bias;
    if (node.has(3)) {
      const Tensor b = select(node.input(3), 0, d);
      bias = add(slice(b, 0, 0, s.H), slice(b, 0, s.H, 2 * s.H));
    }
    const Tensor gates_x = reshape(linear(x, select(node.input(1), 0, d), bias), {s.T, s.N, s.H});
    const Tensor recurrence = transpose(select(node.input(2), 0, d), 0, 1);  // Rᵀ [H, H]
    Tensor h = initial_state(node, 5, s, d);
    std::vector<Tensor> steps(static_cast<size_t>(s.T));
    for (int64_t step = 0; step < s.T; ++step) {
      const int64_t t = reverse_only || d == 1 ? s.T - 1 - step : step;
      const Tensor pre = add(select(gates_x, 0, t), matmul(h, recurrence));
      h = f == "Tanh" ? tanh(pre) : relu(pre);
      steps[static_cast<size_t>(t)] = h;
    }
    outputs.push_back(stack(steps, 0));
    last.push_back(h);
  }
  return {stack(outputs, 1), stack(last, 0)};
}

constexpr const char* kRecurrentAttributes =
    "hidden_size:i direction:s layout:i clip:f input_forget:i linear_before_reset:i "
    "activations:strings activation_alpha:floats activation_beta:floats";

}  // namespace

const std::vector<OpSpec>& nn_ops() {
  static const std::vector<OpSpec> ops = {
      {"MatMul", 2, 2, 1, "", matmul_op},
      {"Gemm", 2, 3, 1, "alpha:f beta:f transA:i transB:i", gemm},
      {"Conv", 2, 3, 1,
       "auto_pad:s dilations:ints group:i kernel_shape:ints pads:ints strides:ints", conv},
      {"ConvTranspose", 2, 3, 1,
       "auto_pad:s dilations:ints group:i kernel_shape:ints pads:ints strides:ints "
       "output_padding:ints",
       conv_transpose},
      {"MaxPool", 1, 1, 2,
       "auto_pad:s ceil_mode:i dilations:ints kernel_shape:ints pads:ints storage_order:i "
       "strides:ints",
       pool<true>},
      {"AveragePool", 1, 1, 1,
       "auto_pad:s ceil_mode:i count_include_pad:i dilations:ints kernel_shape:ints pads:ints "
       "strides:ints",
       pool<false>},
      {"GlobalAveragePool", 1, 1, 1, "", global_pool<false>},
      {"GlobalMaxPool", 1, 1, 1, "", global_pool<true>},
      {"BatchNormalization", 5, 5, 3, "epsilon:f momentum:f training_mode:i", batch_normalization},
      {"InstanceNormalization", 3, 3, 1, "epsilon:f", instance_normalization},
      {"GroupNormalization", 3, 3, 1, "epsilon:f num_groups:i", group_normalization},
      {"LayerNormalization", 2, 3, 3, "axis:i epsilon:f stash_type:i", layer_normalization},
      {"LSTM", 3, 8, 3, kRecurrentAttributes, recurrent<true>},
      {"GRU", 3, 6, 2, kRecurrentAttributes, recurrent<false>},
      {"RNN", 3, 6, 2, kRecurrentAttributes, rnn},
  };
  return ops;
}

}  // namespace dg::onnx
