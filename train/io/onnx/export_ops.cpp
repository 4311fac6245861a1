// The ONNX mappings of depthgrad's elementwise, matmul, convolution, pooling, batch norm,
// shape, reduction and indexing ops (the recurrent layers, attention and the norms are in
// export_ops_sequence.cpp). Each mapping reads the op's traced inputs and settings
// (autograd/op_trace.h) and writes the ONNX nodes that compute the same outputs; the opset
// (13 to 18) decides where an operand moved from an attribute to an input.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "train/io/onnx/export_graph.h"
#include "train/io/onnx/tensors.h"

namespace dg::onnx {

namespace {

using G = ExportGraph;
using Op = TracedOp;

std::string in(G& g, const Op& op, size_t k) { return g.value(op.inputs.at(k)); }
std::string out(G& g, const Op& op, size_t k = 0) { return g.output(op.outputs.at(k)); }
int64_t int_attr(const Op& op, const char* name) { return op.attribute(name).integer; }
double real_attr(const Op& op, const char* name) { return op.attribute(name).real; }
const std::vector<int64_t>& ints_attr(const Op& op, const char* name) {
  return op.attribute(name).integers;
}
int64_t rank_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }
[[noreturn]] void refuse(const Op& op, const std::string& why) {
  throw OnnxError(fmt::format("onnx export: op '{}'{} cannot be exported: {}", op.op,
                              op.module_path.empty() ? "" : " in module '" + op.module_path + "'",
                              why));
}

// One ONNX node of the same arity as the op: y = Type(x0, x1, ...).
template <const char* Type>
void same_arity(G& g, const Op& op) {
  std::vector<std::string> inputs;
  for (size_t k = 0; k < op.inputs.size(); ++k) inputs.push_back(in(g, op, k));
  g.node(Type, inputs, {out(g, op)});
}
constexpr char kAdd[] = "Add", kSub[] = "Sub", kMul[] = "Mul", kDiv[] = "Div", kPow[] = "Pow",
               kMin[] = "Min", kMax[] = "Max", kExp[] = "Exp", kLog[] = "Log", kSqrt[] = "Sqrt",
               kSin[] = "Sin", kCos[] = "Cos", kErf[] = "Erf", kSign[] = "Sign", kFloor[] = "Floor",
               kCeil[] = "Ceil", kRound[] = "Round", kRelu[] = "Relu", kSigmoid[] = "Sigmoid",
               kTanh[] = "Tanh", kAbs[] = "Abs", kMatMul[] = "MatMul", kIdentity[] = "Identity",
               kLess[] = "Less", kGreater[] = "Greater", kLessOrEqual[] = "LessOrEqual",
               kGreaterOrEqual[] = "GreaterOrEqual", kEqual[] = "Equal", kAnd[] = "And",
               kOr[] = "Or", kXor[] = "Xor";

// A number of x's dtype, as a 0-d constant.
std::string scalar_of(G& g, const Tensor& x, double value) {
  return g.constant_scalar(value, x.dtype());
}

// ---- elementwise ------------------------------------------------------------------------------
void export_scale(G& g, const Op& op) {
  g.node("Mul", {in(g, op, 0), scalar_of(g, op.inputs[0], real_attr(op, "factor"))}, {out(g, op)});
}
void export_add_scalar(G& g, const Op& op) {
  g.node("Add", {in(g, op, 0), scalar_of(g, op.inputs[0], real_attr(op, "value"))}, {out(g, op)});
}
void export_where(G& g, const Op& op) {
  g.node("Where", {in(g, op, 0), in(g, op, 1), in(g, op, 2)}, {out(g, op)});
}
void export_masked_fill(G& g, const Op& op) {
  g.node("Where", {in(g, op, 1), scalar_of(g, op.inputs[0], real_attr(op, "value")), in(g, op, 0)},
         {out(g, op)});
}
void export_log1p(G& g, const Op& op) {
  g.node("Log", {g.op("Add", {in(g, op, 0), scalar_of(g, op.inputs[0], 1)})}, {out(g, op)});
}
void export_expm1(G& g, const Op& op) {
  g.node("Sub", {g.op("Exp", {in(g, op, 0)}), scalar_of(g, op.inputs[0], 1)}, {out(g, op)});
}
void export_square(G& g, const Op& op) {
  const std::string x = in(g, op, 0);
  g.node("Mul", {x, x}, {out(g, op)});
}
void export_rsqrt(G& g, const Op& op) {
  g.node("Reciprocal", {g.op("Sqrt", {in(g, op, 0)})}, {out(g, op)});
}
void export_silu(G& g, const Op& op) {
  const std::string x = in(g, op, 0);
  g.node("Mul", {x, g.op("Sigmoid", {x})}, {out(g, op)});
}
// Φ(x) = ½(1 + erf(x/√2)), as torch.onnx writes gelu.
std::string normal_cdf_of(G& g, const Tensor& t, const std::string& x) {
  const std::string e = g.op("Erf", {g.op("Div", {x, scalar_of(g, t, M_SQRT2)})});
  return g.op("Mul", {g.op("Add", {e, scalar_of(g, t, 1)}), scalar_of(g, t, 0.5)});
}
void export_normal_cdf(G& g, const Op& op) {
  g.node("Identity", {normal_cdf_of(g, op.inputs[0], in(g, op, 0))}, {out(g, op)});
}
void export_gelu(G& g, const Op& op) {
  const std::string x = in(g, op, 0);
  g.node("Mul", {x, normal_cdf_of(g, op.inputs[0], x)}, {out(g, op)});
}
// ½x(1 + tanh(√(2/π)(x + 0.044715x³)))
void export_gelu_tanh(G& g, const Op& op) {
  const Tensor& t = op.inputs[0];
  const std::string x = in(g, op, 0);
  const std::string cube = g.op("Mul", {g.op("Mul", {x, x}), x});
  const std::string inner = g.op("Add", {x, g.op("Mul", {cube, scalar_of(g, t, 0.044715)})});
  const std::string th =
      g.op("Tanh", {g.op("Mul", {inner, scalar_of(g, t, std::sqrt(2.0 / M_PI))})});
  const std::string half_x = g.op("Mul", {x, scalar_of(g, t, 0.5)});
  g.node("Mul", {half_x, g.op("Add", {th, scalar_of(g, t, 1)})}, {out(g, op)});
}
void export_leaky_relu(G& g, const Op& op) {
  g.node("LeakyRelu", {in(g, op, 0)}, {out(g, op)}, {attr("alpha", real_attr(op, "a"))});
}
// torch's softplus: log(1 + e^{βx})/β, x itself where βx > threshold.
void export_softplus(G& g, const Op& op) {
  const Tensor& t = op.inputs[0];
  const double beta = real_attr(op, "a"), threshold = real_attr(op, "b");
  const std::string x = in(g, op, 0);
  const std::string bx = g.op("Mul", {x, scalar_of(g, t, beta)});
  const std::string soft = g.op("Div", {g.op("Softplus", {bx}), scalar_of(g, t, beta)});
  const std::string linear = g.op("Greater", {bx, scalar_of(g, t, threshold)});
  g.node("Where", {linear, x, soft}, {out(g, op)});
}
void export_clamp(G& g, const Op& op) {
  const Tensor& t = op.inputs[0];
  const double lo = real_attr(op, "a"), hi = real_attr(op, "b");
  g.node("Clip",
         {in(g, op, 0), std::isinf(lo) ? "" : scalar_of(g, t, lo),
          std::isinf(hi) ? "" : scalar_of(g, t, hi)},
         {out(g, op)});
}
void export_pow_scalar(G& g, const Op& op) {
  g.node("Pow", {in(g, op, 0), scalar_of(g, op.inputs[0], real_attr(op, "a"))}, {out(g, op)});
}
void export_swiglu(G& g, const Op& op) {
  const std::string gate = in(g, op, 0);
  g.node("Mul", {g.op("Mul", {gate, g.op("Sigmoid", {gate})}), in(g, op, 1)}, {out(g, op)});
}

// ---- comparisons and logic: both sides cast to torch's common dtype ------------------------
// The inputs of a comparison as ONNX values of one type (torch promotes, ONNX requires equal).
std::vector<std::string> compare_inputs(G& g, const Op& op) {
  const Tensor& a = op.inputs[0];
  if (op.has("scalar")) {
    const double s = real_attr(op, "scalar");
    return {in(g, op, 0), scalar_of(g, a, s)};
  }
  const Tensor& b = op.inputs[1];
  const DType common = promote_types(a.dtype(), b.dtype());
  std::vector<std::string> names;
  for (size_t k = 0; k < 2; ++k) {
    const std::string v = in(g, op, k);
    names.push_back(op.inputs[k].dtype() == common
                        ? v
                        : g.op("Cast", {v}, {attr("to", int64_t{elem_type_of(common)})}));
  }
  return names;
}
template <const char* Type>
void compare(G& g, const Op& op) {
  g.node(Type, compare_inputs(g, op), {out(g, op)});
}
void export_ne(G& g, const Op& op) {
  g.node("Not", {g.op("Equal", compare_inputs(g, op))}, {out(g, op)});
}
template <const char* Type>
void logic(G& g, const Op& op) {
  std::vector<std::string> names;
  for (size_t k = 0; k < 2; ++k) {
    const std::string v = in(g, op, k);
    names.push_back(op.inputs[k].dtype() == DType::b8
                        ? v
                        : g.op("Cast", {v}, {attr("to", int64_t{elem_type_of(DType::b8)})}));
  }
  g.node(Type, names, {out(g, op)});
}

// ---- matmul, linear ---------------------------------------------------------------------------
// matmul's output dims: the broadcast batch dims, a's rows and b's columns.
void set_matmul_dims(G& g, const Tensor& a, const Tensor& b, const Tensor& y) {
  std::vector<std::string> dims(static_cast<size_t>(y.dim()));
  const auto da = g.dims(a), db = g.dims(b);
  for (int64_t k = 3; k <= y.dim(); ++k) {  // batch dims from the right
    const int64_t ia = a.dim() - k + 1, ib = b.dim() - k + 1;
    if (ia >= 0 && ia < a.dim() - 2 && a.size(ia) == y.size(y.dim() - k + 1))
      dims[size_t(y.dim() - k + 1)] = da[size_t(ia)];
    if (dims[size_t(y.dim() - k + 1)].empty() && ib >= 0 && ib < b.dim() - 2)
      dims[size_t(y.dim() - k + 1)] = db[size_t(ib)];
  }
  if (a.dim() >= 2 && y.dim() >= (b.dim() >= 2 ? 2 : 1))
    dims[size_t(y.dim() - (b.dim() >= 2 ? 2 : 1))] = da[size_t(a.dim() - 2)];
  if (b.dim() >= 2) dims.back() = db.back();
  g.set_dims(y, dims);
}
void export_matmul(G& g, const Op& op) {
  g.node("MatMul", {in(g, op, 0), in(g, op, 1)}, {out(g, op)});
  set_matmul_dims(g, op.inputs[0], op.inputs[1], op.outputs[0]);
}
void rope_heads(G& g, const std::string& y, const Tensor& like,
                const std::vector<std::string>& dims, int64_t heads, double base,
                const std::string& output);

// linear (and linear_add: + residual; linear_rope: RoPE on each head of the projection;
// linear_relu: then Relu): Gemm for a 2-D input, else MatMul by Wᵀ and Add.
void export_linear(G& g, const Op& op) {
  const Tensor &x = op.inputs[0], &bias = op.inputs[2], &residual = op.inputs[3];
  const int64_t heads = int_attr(op, "rope_heads");
  std::string y;
  const bool relu = op.op == "linear_relu";
  const std::string name = residual.defined() || heads || relu ? g.fresh("Linear") : out(g, op);
  if (x.dim() == 2) {
    std::vector<std::string> inputs = {in(g, op, 0), in(g, op, 1)};
    if (bias.defined()) inputs.push_back(in(g, op, 2));
    y = g.node("Gemm", inputs, {name}, {attr("transB", int64_t{1})});
  } else {
    const std::string wt =
        g.op("Transpose", {in(g, op, 1)}, {attr("perm", std::vector<int64_t>{1, 0})});
    y = bias.defined() ? g.node("Add", {g.op("MatMul", {in(g, op, 0), wt}), in(g, op, 2)}, {name})
                       : g.node("MatMul", {in(g, op, 0), wt}, {name});
  }
  std::vector<std::string> dims = g.dims(x);
  dims.back() = "";
  if (residual.defined()) g.node("Add", {in(g, op, 3), y}, {out(g, op)});
  if (relu) g.node("Relu", {y}, {out(g, op)});
  if (heads) rope_heads(g, y, op.outputs[0], dims, heads, real_attr(op, "rope_base"), out(g, op));
  g.set_dims(op.outputs[0], dims);
}

// RoPE on each head of y [.., T, heads·hd] (like's shape, dims as given): split the heads off
// ([.., T, heads, hd]), rotate, merge them back into `output`.
void rope_heads(G& g, const std::string& y, const Tensor& like,
                const std::vector<std::string>& dims, int64_t heads, double base,
                const std::string& output) {
  const int64_t r = like.dim(), width = like.size(-1);
  std::vector<int64_t> split(static_cast<size_t>(r - 1), 0), merge = split;
  split.push_back(heads);
  split.push_back(width / heads);
  merge.push_back(width);
  const std::string x = g.op("Reshape", {y, g.constant_ints(split)});
  const bool dynamic_length = like.dim() >= 2 && !dims[size_t(like.dim() - 2)].empty();
  const std::string rotated =
      rope_nodes(g, x, like.size(-2), width / heads, like.dtype(), dynamic_length, base, 0, -3);
  g.node("Reshape", {rotated, g.constant_ints(merge)}, {output});
}

// depth_mix: Σ_j alpha[.., j]·source_j (the sources, then alpha, are the op's inputs).
void export_depth_mix(G& g, const Op& op) {
  const size_t J = op.inputs.size() - 1;
  const std::string alpha = in(g, op, J);
  std::vector<std::string> terms;
  for (size_t j = 0; j < J; ++j) {
    const auto k = static_cast<int64_t>(j);
    const std::string a = g.op(
        "Slice", {alpha, g.constant_ints({k}), g.constant_ints({k + 1}), g.constant_ints({-1})});
    terms.push_back(g.op("Mul", {in(g, op, j), a}));
  }
  g.node("Sum", terms, {out(g, op)});
}

// ---- convolution and pooling ------------------------------------------------------------------
// ONNX pads: every axis's start, then every axis's end.
std::vector<int64_t> symmetric_pads(const std::vector<int64_t>& padding) {
  std::vector<int64_t> pads = padding;
  pads.insert(pads.end(), padding.begin(), padding.end());
  return pads;
}
std::vector<int64_t> kernel_of(const Tensor& w) {
  return std::vector<int64_t>(w.shape().begin() + 2, w.shape().end());
}
void batch_dims_only(G& g, const Tensor& x, const Tensor& y) {
  std::vector<std::string> dims(static_cast<size_t>(y.dim()));
  dims[0] = g.dims(x)[0];
  g.set_dims(y, dims);
}
void export_conv(G& g, const Op& op) {
  std::vector<std::string> inputs = {in(g, op, 0), in(g, op, 1)};
  if (op.inputs[2].defined()) inputs.push_back(in(g, op, 2));
  g.node("Conv", inputs, {out(g, op)},
         {attr("kernel_shape", kernel_of(op.inputs[1])), attr("strides", ints_attr(op, "stride")),
          attr("pads", symmetric_pads(ints_attr(op, "padding"))),
          attr("dilations", ints_attr(op, "dilation")), attr("group", int_attr(op, "groups"))});
  batch_dims_only(g, op.inputs[0], op.outputs[0]);
}
// conv_transpose2d: output_padding as a smaller end padding (ONNX Runtime refuses an
// output_padding not below the stride, which torch allows when it is below the dilation); where
// it exceeds the padding, zero rows and columns appended (the transposed convolution writes
// nothing there).
void export_conv_transpose(G& g, const Op& op) {
  std::vector<std::string> inputs = {in(g, op, 0), in(g, op, 1)};
  if (op.inputs[2].defined()) inputs.push_back(in(g, op, 2));
  const std::vector<int64_t>& padding = ints_attr(op, "padding");
  const std::vector<int64_t>& extra = ints_attr(op, "output_padding");
  std::vector<int64_t> pads = padding, appended(4, 0);
  bool append = false;
  for (size_t a = 0; a < 2; ++a) {
    const int64_t end = padding[a] - extra[a];
    pads.push_back(std::max<int64_t>(end, 0));
    appended[2 + a] = std::max<int64_t>(-end, 0);
    append = append || end < 0;
  }
  const std::vector<AttributeProto> attributes = {
      attr("kernel_shape", kernel_of(op.inputs[1])), attr("strides", ints_attr(op, "stride")),
      attr("pads", pads), attr("dilations", ints_attr(op, "dilation")),
      attr("group", int_attr(op, "groups"))};
  if (!append) {
    g.node("ConvTranspose", inputs, {out(g, op)}, attributes);
  } else {  // the bias after the appended zeros: it is added everywhere
    if (op.inputs[2].defined()) inputs.pop_back();
    const std::string y = g.op("ConvTranspose", inputs, attributes);
    std::vector<int64_t> all(8, 0);  // [N, C, H, W] begins, then ends
    all[6] = appended[2];
    all[7] = appended[3];
    if (!op.inputs[2].defined()) {
      g.node("Pad", {y, g.constant_ints(all)}, {out(g, op)});
    } else {
      const std::string bias = g.op("Reshape", {in(g, op, 2), g.constant_ints({1, -1, 1, 1})});
      g.node("Add", {g.op("Pad", {y, g.constant_ints(all)}), bias}, {out(g, op)});
    }
  }
  batch_dims_only(g, op.inputs[0], op.outputs[0]);
}
void export_max_pool(G& g, const Op& op) {
  g.node(
      "MaxPool", {in(g, op, 0)}, {out(g, op)},
      {attr("kernel_shape", ints_attr(op, "kernel")), attr("strides", ints_attr(op, "stride")),
       attr("pads", symmetric_pads(ints_attr(op, "padding"))),
       attr("dilations", ints_attr(op, "dilation")), attr("ceil_mode", int_attr(op, "ceil_mode"))});
  batch_dims_only(g, op.inputs[0], op.outputs[0]);
}
void export_avg_pool(G& g, const Op& op) {
  g.node("AveragePool", {in(g, op, 0)}, {out(g, op)},
         {attr("kernel_shape", ints_attr(op, "kernel")), attr("strides", ints_attr(op, "stride")),
          attr("pads", symmetric_pads(ints_attr(op, "padding"))),
          attr("ceil_mode", int_attr(op, "ceil_mode")),
          attr("count_include_pad", int_attr(op, "count_include_pad"))});
  batch_dims_only(g, op.inputs[0], op.outputs[0]);
}
// adaptive_avg_pool2d: GlobalAveragePool to 1×1, an AveragePool when the sizes divide evenly.
void export_adaptive_avg_pool(G& g, const Op& op) {
  const Tensor& x = op.inputs[0];
  const std::vector<int64_t>& size = ints_attr(op, "output_size");
  if (size[0] == 1 && size[1] == 1) {
    g.node("GlobalAveragePool", {in(g, op, 0)}, {out(g, op)});
  } else if (x.size(2) % size[0] == 0 && x.size(3) % size[1] == 0) {
    const std::vector<int64_t> k = {x.size(2) / size[0], x.size(3) / size[1]};
    g.node("AveragePool", {in(g, op, 0)}, {out(g, op)},
           {attr("kernel_shape", k), attr("strides", k)});
  } else {
    refuse(op, fmt::format("output size ({}, {}) does not divide the input {} evenly", size[0],
                           size[1], x.describe()));
  }
  batch_dims_only(g, x, op.outputs[0]);
}
// batch norm in eval: ONNX's BatchNormalization with the running statistics.
void export_batch_norm(G& g, const Op& op) {
  const Tensor &x = op.inputs[0], &mean = op.inputs[1], &var = op.inputs[2];
  if (int_attr(op, "training") || !mean.defined() || !var.defined())
    refuse(op, "batch statistics (training mode, or no running statistics); export in eval mode");
  const int64_t C = x.size(1);
  const std::string w =
      op.inputs[3].defined() ? in(g, op, 3) : g.constant(Tensor::ones({C}, x.dtype()), "ones");
  const std::string b =
      op.inputs[4].defined() ? in(g, op, 4) : g.constant(Tensor::zeros({C}, x.dtype()), "zeros");
  const std::vector<std::string> inputs = {in(g, op, 0), w, b, in(g, op, 1), in(g, op, 2)};
  const std::vector<AttributeProto> eps = {attr("epsilon", real_attr(op, "eps"))};
  if (op.op == "batch_norm_relu")
    g.node("Relu", {g.op("BatchNormalization", inputs, eps)}, {out(g, op)});
  else
    g.node("BatchNormalization", inputs, {out(g, op)}, eps);
}

// ---- shapes -------------------------------------------------------------------------------------
void export_reshape(G& g, const Op& op) {
  const std::vector<int64_t> target = g.reshape_target(op.inputs[0], op.outputs[0]);
  g.node("Reshape", {in(g, op, 0), g.constant_ints(target)}, {out(g, op)});
}
void permute_to(G& g, const Op& op, std::vector<int64_t> perm) {
  const int64_t rank = op.inputs[0].dim();
  for (int64_t& p : perm) p = rank_axis(p, rank);
  g.node("Transpose", {in(g, op, 0)}, {out(g, op)}, {attr("perm", perm)});
  const std::vector<std::string> dims = g.dims(op.inputs[0]);
  std::vector<std::string> permuted;
  for (int64_t p : perm) permuted.push_back(dims[size_t(p)]);
  g.set_dims(op.outputs[0], permuted);
}
void export_transpose(G& g, const Op& op) {
  const int64_t rank = op.inputs[0].dim();
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t k = 0; k < rank; ++k) perm[size_t(k)] = k;
  std::swap(perm[size_t(rank_axis(int_attr(op, "axis0"), rank))],
            perm[size_t(rank_axis(int_attr(op, "axis1"), rank))]);
  permute_to(g, op, perm);
}
void export_permute(G& g, const Op& op) { permute_to(g, op, ints_attr(op, "order")); }
// slice [start, end) of one axis; a whole dynamic axis stays whole for any size.
void export_slice(G& g, const Op& op) {
  const Tensor& x = op.inputs[0];
  const int64_t axis = int_attr(op, "axis");
  std::vector<std::string> dims = g.dims(x);
  int64_t end = int_attr(op, "end");
  const bool whole_dynamic = !dims[size_t(axis)].empty() && end == x.size(axis);
  if (whole_dynamic) end = std::numeric_limits<int64_t>::max();
  const int64_t step = op.has("step") ? int_attr(op, "step") : 1;
  if (!whole_dynamic || int_attr(op, "start") != 0 || step != 1) dims[size_t(axis)] = "";
  std::vector<std::string> inputs = {in(g, op, 0), g.constant_ints({int_attr(op, "start")}),
                                     g.constant_ints({end}), g.constant_ints({axis})};
  if (step != 1) inputs.push_back(g.constant_ints({step}));
  g.node("Slice", inputs, {out(g, op)});
  g.set_dims(op.outputs[0], dims);
}
void export_select(G& g, const Op& op) {
  const int64_t axis = int_attr(op, "axis");
  g.node("Gather", {in(g, op, 0), g.constant_ints({int_attr(op, "index")}, true)}, {out(g, op)},
         {attr("axis", axis)});
  std::vector<std::string> dims = g.dims(op.inputs[0]);
  dims.erase(dims.begin() + axis);
  g.set_dims(op.outputs[0], dims);
}
void export_to_dtype(G& g, const Op& op) {
  g.node("Cast", {in(g, op, 0)}, {out(g, op)},
         {attr("to", int64_t{elem_type_of(op.outputs[0].dtype())})});
}
// expand: ONNX's Expand broadcasts both ways, so an axis x already has at full size is 1.
void export_expand(G& g, const Op& op) {
  const Tensor &x = op.inputs[0], &y = op.outputs[0];
  std::vector<int64_t> shape = y.shape();
  for (int64_t k = 1; k <= x.dim(); ++k)
    if (x.size(-k) == y.size(-k)) shape[size_t(y.dim() - k)] = 1;
  g.node("Expand", {in(g, op, 0), g.constant_ints(shape)}, {out(g, op)});
}
void export_cat(G& g, const Op& op) {
  std::vector<std::string> inputs;
  for (size_t k = 0; k < op.inputs.size(); ++k) inputs.push_back(in(g, op, k));
  const int64_t axis = int_attr(op, "axis");
  g.node("Concat", inputs, {out(g, op)}, {attr("axis", axis)});
  std::vector<std::string> dims = g.dims(op.inputs[0]);
  dims[size_t(axis)] = "";
  g.set_dims(op.outputs[0], dims);
}
void export_stack(G& g, const Op& op) {
  const int64_t axis = int_attr(op, "axis");
  std::vector<std::string> inputs;
  for (size_t k = 0; k < op.inputs.size(); ++k)
    inputs.push_back(g.op("Unsqueeze", {in(g, op, k), g.constant_ints({axis})}));
  g.node("Concat", inputs, {out(g, op)}, {attr("axis", axis)});
  std::vector<std::string> dims = g.dims(op.inputs[0]);
  dims.insert(dims.begin() + axis, "");
  g.set_dims(op.outputs[0], dims);
}

// ---- reductions ---------------------------------------------------------------------------------
// A Reduce* node: axes an input from opset 18 (ReduceSum from 13), an attribute before.
std::string reduce_node(G& g, const std::string& type, const std::string& x,
                        const std::vector<int64_t>& axes, bool keepdim, const std::string& output) {
  const bool axes_input = type == "ReduceSum" || g.opset() >= 18;
  std::vector<std::string> inputs = {x};
  std::vector<AttributeProto> attributes = {attr("keepdims", int64_t{keepdim})};
  if (!axes.empty()) {
    if (axes_input)
      inputs.push_back(g.constant_ints(axes));
    else
      attributes.push_back(attr("axes", axes));
  }
  return output.empty() ? g.op(type, inputs, attributes)
                        : g.node(type, inputs, {output}, attributes);
}
void set_reduced_dims(G& g, const Tensor& x, const Tensor& y, const std::vector<int64_t>& axes,
                      bool keepdim) {
  std::vector<std::string> dims = g.dims(x), kept;
  for (int64_t k = 0; k < x.dim(); ++k) {
    const bool reduced = axes.empty() || std::find(axes.begin(), axes.end(), k) != axes.end();
    if (!reduced)
      kept.push_back(dims[size_t(k)]);
    else if (keepdim)
      kept.push_back("");
  }
  if (static_cast<int64_t>(kept.size()) == y.dim()) g.set_dims(y, kept);
}
void export_sum_mean(G& g, const Op& op) {
  const std::vector<int64_t>& axes = ints_attr(op, "axes");
  const bool keepdim = int_attr(op, "keepdim") != 0;
  reduce_node(g, op.op == "sum" ? "ReduceSum" : "ReduceMean", in(g, op, 0), axes, keepdim,
              out(g, op));
  set_reduced_dims(g, op.inputs[0], op.outputs[0], axes, keepdim);
}
void export_extreme_all(G& g, const Op& op) {
  reduce_node(g, op.op == "max" ? "ReduceMax" : "ReduceMin", in(g, op, 0), {}, false, out(g, op));
}
// max/min over one axis: the values (ReduceMax) and the first index of the extreme (ArgMax).
void export_extreme_dim(G& g, const Op& op) {
  const int64_t axis = int_attr(op, "axis");
  const bool keepdim = int_attr(op, "keepdim") != 0, is_max = op.op == "max_dim";
  const std::string x = in(g, op, 0);
  if (op.outputs[0].defined())
    reduce_node(g, is_max ? "ReduceMax" : "ReduceMin", x, {axis}, keepdim, out(g, op, 0));
  g.node(is_max ? "ArgMax" : "ArgMin", {x}, {out(g, op, 1)},
         {attr("axis", axis), attr("keepdims", int64_t{keepdim})});
  for (const Tensor& y : op.outputs)
    if (y.defined()) set_reduced_dims(g, op.inputs[0], y, {axis}, keepdim);
}
void export_cumsum(G& g, const Op& op) {
  g.node("CumSum", {in(g, op, 0), g.constant_ints({int_attr(op, "axis")}, true)}, {out(g, op)},
         {attr("reverse", int_attr(op, "reverse"))});
}
void export_softmax(G& g, const Op& op) {
  g.node(op.op == "softmax" ? "Softmax" : "LogSoftmax", {in(g, op, 0)}, {out(g, op)},
         {attr("axis", int_attr(op, "axis"))});
}

// ---- indexing -----------------------------------------------------------------------------------
void export_embedding(G& g, const Op& op) {
  g.node("Gather", {in(g, op, 0), in(g, op, 1)}, {out(g, op)}, {attr("axis", int64_t{0})});
  std::vector<std::string> dims = g.dims(op.inputs[1]);
  dims.push_back("");
  g.set_dims(op.outputs[0], dims);
}
void export_gather(G& g, const Op& op) {
  g.node("GatherElements", {in(g, op, 0), in(g, op, 1)}, {out(g, op)},
         {attr("axis", int_attr(op, "axis"))});
}
void export_index_select(G& g, const Op& op) {
  const int64_t axis = int_attr(op, "axis");
  g.node("Gather", {in(g, op, 0), in(g, op, 1)}, {out(g, op)}, {attr("axis", axis)});
  std::vector<std::string> dims = g.dims(op.inputs[0]);
  dims[size_t(axis)] = "";
  g.set_dims(op.outputs[0], dims);
}
// torch's pads run from the last axis backwards, (before, after) each; ONNX's are every axis's
// begin, then every axis's end.
void export_pad(G& g, const Op& op) {
  const Tensor& x = op.inputs[0];
  const std::vector<int64_t>& pads = ints_attr(op, "pads");
  const std::string mode = op.attribute("mode").text;
  if (mode == "circular") refuse(op, "circular padding (ONNX's wrap mode needs opset 19)");
  std::vector<int64_t> onnx_pads(static_cast<size_t>(2 * x.dim()), 0);
  for (size_t j = 0; j < pads.size() / 2; ++j) {
    const size_t axis = static_cast<size_t>(x.dim() - 1) - j;
    onnx_pads[axis] = pads[2 * j];
    onnx_pads[axis + static_cast<size_t>(x.dim())] = pads[2 * j + 1];
  }
  g.node("Pad", {in(g, op, 0), g.constant_ints(onnx_pads), scalar_of(g, x, real_attr(op, "value"))},
         {out(g, op)}, {attr("mode", mode == "replicate" ? std::string("edge") : mode)});
}
// flip and roll: a Gather of each axis they move, with the index map as a constant.
void gather_axes(G& g, const Op& op, const std::vector<std::vector<int64_t>>& maps) {
  std::string v = in(g, op, 0);
  for (size_t ax = 0; ax < maps.size(); ++ax)
    if (!maps[ax].empty())
      v = g.op("Gather", {v, g.constant_ints(maps[ax])}, {attr("axis", static_cast<int64_t>(ax))});
  g.node("Identity", {v}, {out(g, op)});
  std::vector<std::string> dims = g.dims(op.inputs[0]);
  for (size_t ax = 0; ax < maps.size(); ++ax)
    if (!maps[ax].empty()) dims[ax] = "";
  g.set_dims(op.outputs[0], dims);
}
void export_flip(G& g, const Op& op) {
  const Tensor& x = op.inputs[0];
  std::vector<std::vector<int64_t>> maps(static_cast<size_t>(x.dim()));
  for (int64_t ax : ints_attr(op, "dims"))
    for (int64_t i = x.size(ax) - 1; i >= 0; --i) maps[size_t(ax)].push_back(i);
  gather_axes(g, op, maps);
}
void export_roll(G& g, const Op& op) {
  const Tensor& x = op.inputs[0];
  const std::vector<int64_t>& shifts = ints_attr(op, "shifts");
  std::vector<std::vector<int64_t>> maps(static_cast<size_t>(x.dim()));
  for (int64_t ax = 0; ax < x.dim(); ++ax) {
    const int64_t n = x.size(ax);
    if (n == 0 || shifts[size_t(ax)] % n == 0) continue;
    for (int64_t i = 0; i < n; ++i)
      maps[size_t(ax)].push_back(((i - shifts[size_t(ax)]) % n + n) % n);
  }
  gather_axes(g, op, maps);
}

void export_triangle(G& g, const Op& op) {
  if (g.opset() < 14) refuse(op, "ONNX's Trilu needs opset 14 or later");
  g.node("Trilu", {in(g, op, 0), g.constant_ints({int_attr(op, "diagonal")}, true)}, {out(g, op)},
         {attr("upper", int64_t{op.op == "triu"})});
}

}  // namespace

// data table: depthgrad's op -> its ONNX mapping
std::vector<OpExporterEntry> basic_op_exporters() {
  return {
      {"add", same_arity<kAdd>},
      {"sub", same_arity<kSub>},
      {"mul", same_arity<kMul>},
      {"div", same_arity<kDiv>},
      {"pow_tensor", same_arity<kPow>},
      {"minimum", same_arity<kMin>},
      {"maximum", same_arity<kMax>},
      {"scale", export_scale},
      {"add_scalar", export_add_scalar},
      {"where", export_where},
      {"masked_fill", export_masked_fill},
      {"exp", same_arity<kExp>},
      {"log", same_arity<kLog>},
      {"sqrt", same_arity<kSqrt>},
      {"sin", same_arity<kSin>},
      {"cos", same_arity<kCos>},
      {"erf", same_arity<kErf>},
      {"sign", same_arity<kSign>},
      {"floor", same_arity<kFloor>},
      {"ceil", same_arity<kCeil>},
      {"round", same_arity<kRound>},
      {"log1p", export_log1p},
      {"expm1", export_expm1},
      {"square", export_square},
      {"rsqrt", export_rsqrt},
      {"relu", same_arity<kRelu>},
      {"sigmoid", same_arity<kSigmoid>},
      {"tanh", same_arity<kTanh>},
      {"abs", same_arity<kAbs>},
      {"leaky_relu", export_leaky_relu},
      {"softplus", export_softplus},
      {"clamp", export_clamp},
      {"pow", export_pow_scalar},
      {"silu", export_silu},
      {"normal_cdf", export_normal_cdf},
      {"gelu", export_gelu},
      {"gelu_tanh", export_gelu_tanh},
      {"swiglu", export_swiglu},
      {"eq", compare<kEqual>},
      {"ne", export_ne},
      {"lt", compare<kLess>},
      {"le", compare<kLessOrEqual>},
      {"gt", compare<kGreater>},
      {"ge", compare<kGreaterOrEqual>},
      {"logical_and", logic<kAnd>},
      {"logical_or", logic<kOr>},
      {"logical_xor", logic<kXor>},
      {"matmul", export_matmul},
      {"bmm", export_matmul},
      {"linear", export_linear},
      {"linear_add", export_linear},
      {"linear_rope", export_linear},
      {"linear_relu", export_linear},
      {"depth_mix", export_depth_mix},
      {"conv2d", export_conv},
      {"conv1d", export_conv},
      {"conv_transpose2d", export_conv_transpose},
      {"max_pool2d", export_max_pool},
      {"avg_pool2d", export_avg_pool},
      {"adaptive_avg_pool2d", export_adaptive_avg_pool},
      {"batch_norm", export_batch_norm},
      {"batch_norm_relu", export_batch_norm},
      {"reshape", export_reshape},
      {"transpose", export_transpose},
      {"permute", export_permute},
      {"slice", export_slice},
      {"select", export_select},
      {"contiguous", same_arity<kIdentity>},
      {"clone", same_arity<kIdentity>},
      {"to_dtype", export_to_dtype},
      {"expand", export_expand},
      {"cat", export_cat},
      {"stack", export_stack},
      {"sum", export_sum_mean},
      {"mean", export_sum_mean},
      {"max", export_extreme_all},
      {"min", export_extreme_all},
      {"max_dim", export_extreme_dim},
      {"min_dim", export_extreme_dim},
      {"cumsum", export_cumsum},
      {"softmax", export_softmax},
      {"log_softmax", export_softmax},
      {"embedding", export_embedding},
      {"gather", export_gather},
      {"index_select", export_index_select},
      {"pad", export_pad},
      {"flip", export_flip},
      {"roll", export_roll},
      {"tril", export_triangle},
      {"triu", export_triangle},
  };
}

}  // namespace dg::onnx
