// The importer's elementwise ops and reductions (import_ops.h), with ONNX's semantics (opset 13 to
// 18) on depthgrad's recorded ops. Integer arithmetic (the shape computations torch writes: Div of
// a dim by the head count, Mul, Add) runs in a plain int64 loop with ONNX's broadcasting, not
// recorded; integer Div truncates toward zero, as ONNX Runtime's.
#include "train/io/onnx/import_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "autograd/ops.h"
#include "train/io/onnx/import_ops_common.h"
#include "train/io/onnx/tensors.h"

namespace dg::onnx {

Shape broadcast_shapes(const NodeRun& node, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t x = k + a.size() >= rank ? a[k + a.size() - rank] : 1;
    const int64_t y = k + b.size() >= rank ? b[k + b.size() - rank] : 1;
    if (x != y && x != 1 && y != 1)
      node.fail(fmt::format("shapes {} and {} do not broadcast", shape_str(a), shape_str(b)));
    out[k] = x == 1 ? y : x;
  }
  return out;
}

void check_output_size(const NodeRun& node, const Shape& shape) {
  constexpr int64_t kLimit = int64_t{1} << 30;
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) node.fail(fmt::format("a negative dim in shape {}", shape_str(shape)));
    if (d > 0 && numel > kLimit / d)
      node.fail(fmt::format("an output of shape {} has more than 2^30 elements", shape_str(shape)));
    numel *= d;
  }
}

int64_t bounded(const NodeRun& node, int64_t value, const char* what) {
  constexpr int64_t kLimit = int64_t{1} << 30;
  if (value < -kLimit || value > kLimit)
    node.fail(fmt::format("{} {} is outside [-2^30, 2^30]", what, value));
  return value;
}

std::vector<int64_t> int64_values(const Tensor& t) {
  const Tensor c = t.to(DType::i64).contiguous();
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

namespace {

enum class IntOp { add, sub, mul, div };

// a op b on integer tensors, broadcast, computed in int64 and given back in a's dtype.
Tensor integer_binary(const NodeRun& node, const Tensor& a, const Tensor& b, IntOp op) {
  const Shape shape = broadcast_shapes(node, a.shape(), b.shape());
  const std::vector<int64_t> x = int64_values(a.expand(shape)), y = int64_values(b.expand(shape));
  std::vector<int64_t> out(x.size());
  for (size_t k = 0; k < x.size(); ++k) {  // wrapping as two's complement, never overflowing
    const auto u = static_cast<uint64_t>(x[k]), v = static_cast<uint64_t>(y[k]);
    switch (op) {
      case IntOp::add:
        out[k] = static_cast<int64_t>(u + v);
        break;
      case IntOp::sub:
        out[k] = static_cast<int64_t>(u - v);
        break;
      case IntOp::mul:
        out[k] = static_cast<int64_t>(u * v);
        break;
      case IntOp::div:
        if (y[k] == 0) node.fail("integer division by zero");
        out[k] = y[k] == -1 ? static_cast<int64_t>(0 - u) : x[k] / y[k];
        break;
    }
  }
  return Tensor::from_ids(out, shape).to(a.dtype());
}

template <IntOp kIntOp, Tensor (*kFloatOp)(const Tensor&, const Tensor&)>
std::vector<Tensor> arithmetic(const NodeRun& node) {
  const Tensor &a = node.input(0), &b = node.input(1);
  if (a.dtype() != b.dtype())
    node.fail(fmt::format("inputs of different types: {} and {}", a.describe(), b.describe()));
  if (!is_floating(a.dtype())) return {integer_binary(node, a, b, kIntOp)};
  return {kFloatOp(a, b)};
}

template <Tensor (*kOp)(const Tensor&)>
std::vector<Tensor> unary(const NodeRun& node) {
  return {kOp(node.input(0))};
}

template <Tensor (*kOp)(const Tensor&, const Tensor&)>
std::vector<Tensor> binary(const NodeRun& node) {
  return {kOp(node.input(0), node.input(1))};
}

// Min, Max, Sum, Mean of one or more inputs, broadcast.
template <Tensor (*kOp)(const Tensor&, const Tensor&)>
std::vector<Tensor> variadic(const NodeRun& node) {
  Tensor out = node.input(0);
  for (size_t k = 1; k < node.input_count(); ++k) out = kOp(out, node.input(k));
  return {out};
}

std::vector<Tensor> mean_of(const NodeRun& node) {
  Tensor out = variadic<add>(node)[0];
  return {scale(out, 1.0 / static_cast<double>(node.input_count()))};
}

std::vector<Tensor> neg_op(const NodeRun& node) {
  const Tensor& x = node.input(0);
  if (is_floating(x.dtype())) return {neg(x)};
  return {integer_binary(node, Tensor::zeros({}, x.dtype()), x, IntOp::sub)};
}

std::vector<Tensor> reciprocal(const NodeRun& node) { return {1.0 / node.input(0)}; }
std::vector<Tensor> leaky_relu_op(const NodeRun& node) {
  return {leaky_relu(node.input(0), node.f("alpha", 0.01))};
}
// elu(x) = x where x > 0, alpha (e^x - 1) elsewhere.
std::vector<Tensor> elu(const NodeRun& node) {
  const Tensor& x = node.input(0);
  return {where(gt(x, 0.0), x, scale(expm1(x), node.f("alpha", 1.0)))};
}
std::vector<Tensor> hard_sigmoid(const NodeRun& node) {
  const Tensor& x = node.input(0);
  return {clamp(add_scalar(scale(x, node.f("alpha", 0.2)), node.f("beta", 0.5)), 0.0, 1.0)};
}
std::vector<Tensor> pow_op(const NodeRun& node) {
  const Tensor &x = node.input(0), &y = node.input(1);
  if (!is_floating(x.dtype())) node.fail("Pow of an integer base is not supported");
  if (y.numel() == 1 && !y.requires_grad() && y.dim() == 0) return {pow(x, y.item())};
  return {pow(x, y.dtype() == x.dtype() ? y : to_dtype(y, x.dtype()))};
}
std::vector<Tensor> clip(const NodeRun& node) {
  std::optional<double> low, high;
  if (node.has(1)) low = node.input(1).item();
  if (node.has(2)) high = node.input(2).item();
  if (!low && !high) return {node.input(0)};
  return {clamp(node.input(0), low, high)};
}
// Where on floats is depthgrad's; on integers (the shape values torch computes) a plain loop.
std::vector<Tensor> where_op(const NodeRun& node) {
  const Tensor &cond = node.input(0), &a = node.input(1), &b = node.input(2);
  if (is_floating(a.dtype())) return {where(cond, a, b)};
  if (cond.dtype() != DType::b8) node.fail("the condition should be bool, is " + cond.describe());
  if (a.dtype() != b.dtype())
    node.fail(fmt::format("inputs of different types: {} and {}", a.describe(), b.describe()));
  const Shape shape =
      broadcast_shapes(node, broadcast_shapes(node, cond.shape(), a.shape()), b.shape());
  const std::vector<int64_t> c = int64_values(cond.expand(shape)),
                             x = int64_values(a.expand(shape)), y = int64_values(b.expand(shape));
  std::vector<int64_t> out(c.size());
  for (size_t k = 0; k < c.size(); ++k) out[k] = c[k] ? x[k] : y[k];
  return {Tensor::from_ids(out, shape).to(a.dtype())};
}
std::vector<Tensor> cast(const NodeRun& node) {
  return {to_dtype(node.input(0), dtype_of(static_cast<int32_t>(node.i("to", 0)),
                                           node.source() + ": Cast's 'to'"))};
}
std::vector<Tensor> softmax_op(const NodeRun& node) {
  const Tensor& x = node.input(0);
  return {softmax(x, node.axis(node.i("axis", -1), x.dim()))};
}
std::vector<Tensor> log_softmax_op(const NodeRun& node) {
  const Tensor& x = node.input(0);
  return {log_softmax(x, node.axis(node.i("axis", -1), x.dim()))};
}

// ---- Reductions -----------------------------------------------------------------------------

// The axes a Reduce* node reduces (sorted, non-negative): the input (ReduceSum from 13, all from
// 18) or the attribute; none given means all, or none with noop_with_empty_axes.
std::vector<int64_t> reduce_axes(const NodeRun& node, const Tensor& x, bool& noop) {
  std::vector<int64_t> axes = node.has(1) ? node.int_values(1) : node.ints("axes");
  noop = axes.empty() && node.i("noop_with_empty_axes", 0) != 0;
  if (axes.empty())
    for (int64_t d = 0; d < x.dim(); ++d) axes.push_back(d);
  for (int64_t& a : axes) a = node.axis(a, x.dim());
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) node.fail("repeated axes");
  return axes;
}

enum class Reduce { sum, mean, max, min, sum_square, l2 };

template <Reduce kReduce>
std::vector<Tensor> reduce(const NodeRun& node) {
  const Tensor& x = node.input(0);
  bool noop = false;
  const std::vector<int64_t> axes = reduce_axes(node, x, noop);
  if (noop) return {x};
  const bool keep = node.i("keepdims", 1) != 0;
  switch (kReduce) {
    case Reduce::sum:
      return {sum(x, axes, keep)};
    case Reduce::mean:
      return {mean(x, axes, keep)};
    case Reduce::sum_square:
      return {sum(mul(x, x), axes, keep)};
    case Reduce::l2:
      return {sqrt(sum(mul(x, x), axes, keep))};
    default:
      break;
  }
  Tensor out = x;
  for (auto it = axes.rbegin(); it != axes.rend(); ++it)
    out = kReduce == Reduce::max ? max(out, *it, keep).values : min(out, *it, keep).values;
  return {out};
}

template <bool kMax>
std::vector<Tensor> arg_reduce(const NodeRun& node) {
  const Tensor& x = node.input(0);
  if (node.i("select_last_index", 0) != 0) node.fail("select_last_index = 1 is not supported");
  const int64_t axis = node.axis(node.i("axis", 0), x.dim());
  const bool keep = node.i("keepdims", 1) != 0;
  return {kMax ? argmax(x, axis, keep) : argmin(x, axis, keep)};
}

// CumSum(x, axis): exclusive leaves each element out of its own sum, reverse sums from the end.
std::vector<Tensor> cumsum_op(const NodeRun& node) {
  const Tensor& x = node.input(0);
  const std::vector<int64_t> axis_value = node.int_values(1);
  if (axis_value.size() != 1) node.fail("the axis input should hold one value");
  const int64_t axis = node.axis(axis_value[0], x.dim());
  const bool reverse = node.i("reverse", 0) != 0;
  Tensor in = reverse ? flip(x, {axis}) : x;
  Tensor out = cumsum(in, axis);
  if (node.i("exclusive", 0) != 0) out = sub(out, in);
  return {reverse ? flip(out, {axis}) : out};
}

// TopK(X, K): the k largest (or smallest) along axis, sorted, and their int64 indices; ties
// keep the lower index first (ONNX Runtime's order).
std::vector<Tensor> top_k(const NodeRun& node) {
  const Tensor& x = node.input(0);
  const std::vector<int64_t> k = node.int_values(1);
  if (k.size() != 1) node.fail("K should hold one value");
  const int64_t axis = node.axis(node.i("axis", -1), x.dim());
  if (k[0] < 0 || k[0] > x.size(axis))
    node.fail(fmt::format("K = {} is outside [0, {}]", k[0], x.size(axis)));
  const ValuesAndIndices top = topk(x, k[0], axis, node.i("largest", 1) != 0, true);
  return {top.values, top.indices};
}

// Trilu(input, k): the upper (triu) or lower (tril) triangle of the last two axes from diagonal k.
std::vector<Tensor> trilu(const NodeRun& node) {
  int64_t k = 0;
  if (node.has(1)) {
    const std::vector<int64_t> given = node.int_values(1);
    if (given.size() != 1) node.fail("k should hold one value");
    k = std::clamp<int64_t>(given[0], -(int64_t{1} << 40), int64_t{1} << 40);  // the same triangle
  }
  const Tensor& x = node.input(0);
  if (x.dim() < 2) node.fail("the input should have at least 2 dims");
  return {node.i("upper", 1) != 0 ? triu(x, k) : tril(x, k)};
}

std::vector<Tensor> identity(const NodeRun& node) {
  if (node.output_count() > 1)
    return {node.input(0), Tensor::ones(node.input(0).shape(), DType::b8)};
  return {node.input(0)};
}

// Dropout at inference: the identity (and an all-true mask). training_mode true is refused.
std::vector<Tensor> dropout_op(const NodeRun& node) {
  if (node.has(2) && node.input(2).item() != 0)
    node.fail("training_mode = true is not supported (the importer runs dropout as the identity)");
  return identity(node);
}

}  // namespace

const std::vector<OpSpec>& elementwise_ops() {
  static const std::vector<OpSpec> ops = {
      {"Add", 2, 2, 1, "", arithmetic<IntOp::add, add>},
      {"Sub", 2, 2, 1, "", arithmetic<IntOp::sub, sub>},
      {"Mul", 2, 2, 1, "", arithmetic<IntOp::mul, mul>},
      {"Div", 2, 2, 1, "", arithmetic<IntOp::div, div>},
      {"Pow", 2, 2, 1, "", pow_op},
      {"Neg", 1, 1, 1, "", neg_op},
      {"Abs", 1, 1, 1, "", unary<abs>},
      {"Exp", 1, 1, 1, "", unary<exp>},
      {"Log", 1, 1, 1, "", unary<log>},
      {"Sqrt", 1, 1, 1, "", unary<sqrt>},
      {"Reciprocal", 1, 1, 1, "", reciprocal},
      {"Sin", 1, 1, 1, "", unary<sin>},
      {"Cos", 1, 1, 1, "", unary<cos>},
      {"Erf", 1, 1, 1, "", unary<erf>},
      {"Floor", 1, 1, 1, "", unary<floor>},
      {"Ceil", 1, 1, 1, "", unary<ceil>},
      {"Sign", 1, 1, 1, "", unary<sign>},
      {"Round", 1, 1, 1, "", unary<round>},
      {"Relu", 1, 1, 1, "", unary<relu>},
      {"Sigmoid", 1, 1, 1, "", unary<sigmoid>},
      {"Tanh", 1, 1, 1, "", unary<tanh>},
      {"Softplus", 1, 1, 1, "",
       [](const NodeRun& n) { return std::vector<Tensor>{softplus(n.input(0))}; }},
      {"LeakyRelu", 1, 1, 1, "alpha:f", leaky_relu_op},
      {"Elu", 1, 1, 1, "alpha:f", elu},
      {"HardSigmoid", 1, 1, 1, "alpha:f beta:f", hard_sigmoid},
      {"Softmax", 1, 1, 1, "axis:i", softmax_op},
      {"LogSoftmax", 1, 1, 1, "axis:i", log_softmax_op},
      {"Clip", 1, 3, 1, "", clip},
      {"Min", 1, 64, 1, "", variadic<minimum>},
      {"Max", 1, 64, 1, "", variadic<maximum>},
      {"Sum", 1, 64, 1, "", variadic<add>},
      {"Mean", 1, 64, 1, "", mean_of},
      {"Equal", 2, 2, 1, "", binary<eq>},
      {"Less", 2, 2, 1, "", binary<lt>},
      {"LessOrEqual", 2, 2, 1, "", binary<le>},
      {"Greater", 2, 2, 1, "", binary<gt>},
      {"GreaterOrEqual", 2, 2, 1, "", binary<ge>},
      {"And", 2, 2, 1, "", binary<logical_and>},
      {"Or", 2, 2, 1, "", binary<logical_or>},
      {"Xor", 2, 2, 1, "", binary<logical_xor>},
      {"Not", 1, 1, 1, "", unary<logical_not>},
      {"Where", 3, 3, 1, "", where_op},
      {"Cast", 1, 1, 1, "to:i saturate:i", cast},
      {"Identity", 1, 1, 1, "", identity},
      {"Dropout", 1, 3, 2, "seed:i", dropout_op},
      {"CumSum", 2, 2, 1, "exclusive:i reverse:i", cumsum_op},
      {"ReduceSum", 1, 2, 1, "axes:ints keepdims:i noop_with_empty_axes:i", reduce<Reduce::sum>},
      {"ReduceMean", 1, 2, 1, "axes:ints keepdims:i noop_with_empty_axes:i", reduce<Reduce::mean>},
      {"ReduceMax", 1, 2, 1, "axes:ints keepdims:i noop_with_empty_axes:i", reduce<Reduce::max>},
      {"ReduceMin", 1, 2, 1, "axes:ints keepdims:i noop_with_empty_axes:i", reduce<Reduce::min>},
      {"ReduceSumSquare", 1, 2, 1, "axes:ints keepdims:i noop_with_empty_axes:i",
       reduce<Reduce::sum_square>},
      {"ReduceL2", 1, 2, 1, "axes:ints keepdims:i noop_with_empty_axes:i", reduce<Reduce::l2>},
      {"ArgMax", 1, 1, 1, "axis:i keepdims:i select_last_index:i", arg_reduce<true>},
      {"ArgMin", 1, 1, 1, "axis:i keepdims:i select_last_index:i", arg_reduce<false>},
      {"TopK", 2, 2, 2, "axis:i largest:i sorted:i", top_k},
      {"Trilu", 1, 2, 1, "upper:i", trilu},
  };
  return ops;
}

std::map<std::string, int32_t> spec_attributes(const OpSpec& spec) {
  static const std::map<std::string, int32_t> kinds = {{"f", AttributeProto::f},
                                                       {"i", AttributeProto::i},
                                                       {"s", AttributeProto::s},
                                                       {"t", AttributeProto::t},
                                                       {"floats", AttributeProto::floats},
                                                       {"ints", AttributeProto::ints},
                                                       {"strings", AttributeProto::strings}};
  std::map<std::string, int32_t> out;
  const std::string text = spec.attributes;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    const size_t colon = item.find(':');
    const auto kind = colon == std::string::npos ? kinds.end() : kinds.find(item.substr(colon + 1));
    if (kind == kinds.end())
      throw std::logic_error(
          fmt::format("the importer's row of {} lists attribute '{}' without a known type",
                      spec.op_type, item));
    out[item.substr(0, colon)] = kind->second;
    at = end + 1;
  }
  return out;
}

const OpSpec* find_op(const std::string& op_type) {
  for (const auto* family : {&elementwise_ops(), &shape_ops(), &nn_ops()})
    for (const OpSpec& spec : *family)
      if (op_type == spec.op_type) return &spec;
  return nullptr;
}

}  // namespace dg::onnx
