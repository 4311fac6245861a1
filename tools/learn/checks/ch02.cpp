// Chapter 2 of the learner's path (autograd/learn-02-graph.md): the graph and backward. Grades
// backward_order (autograd/tape.cpp: the nodes a root depends on, each once, newest first) and
// broadcast_reduction_axes (tensor/shape.cpp: the axes accumulate_grad sums a gradient over)
// through backward() on small graphs whose gradients are PyTorch 1.13's
// (tools/learn/goldens_ch02.py printed them), the order itself, and a gradient check.
// It does not grade the freeing of nodes or hooks: the chapter describes them; nothing here asks
// for them to be written.
#include <fmt/format.h>

#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/shape.h"
#include "tools/learn/grade.h"

namespace dg::learn {
namespace {

const std::map<std::string, std::vector<double>> kTorch = {
    {"diamond.dx", {-3.2064320659622854, 2.0, -1.8208498574438998, 4.579110635731682}},
    {"skip.dx", {-1.2398410039666117, 0.75, -0.6230512265642296, 1.7462485395419074}},
    {"twice.dx", {0.9603889139077239, 0.5, -1.1158444344369105, 0.586140527138306}},
    {"residual.dx",
     {-0.2064883421509553, 0.9292722537374867, -0.6835255408177271, 0.16897772320714088,
      0.453054578511773, -1.0252883112265907}},
    {"residual.dw0", {0.4174839410957551, 0.00579077417848517, -0.15559740081771695}},
    {"residual.dw1", {0.47634470820894725, 0.006301720186687981, -0.3183339276864916}},
    {"residual.dw2", {0.49724685484621367, 0.010645665837819479, -0.2005999263304895}},
    {"broadcast.dx",
     {-1.875, 0.75,  -0.75, 1.875, -0.1875, 0.5625, -0.75, -0.0, -0.75,  0.5625,  -0.1875, -0.9375,
      0.75,   -0.75, 1.875, 0.375, 0.5625,  -0.75,  -0.0,  0.75, 0.5625, -0.1875, -0.9375, 0.375}},
    {"broadcast.dw", {-0.703125, 0.046875, -2.53125}},
    {"broadcast.db", {2.25, -1.125, -0.375, 0.375}},
    {"broadcast.dc", {0.046875}},
};

// ((k·mul) mod m − shift) / div for k = 0, 1, ..., float64: goldens_ch02.py's pattern().
Tensor pattern(const Shape& shape, int64_t mul, int64_t mod, double shift, double div,
               bool requires_grad = true) {
  std::vector<double> values(shape_numel(shape));
  for (size_t k = 0; k < values.size(); ++k)
    values[k] = (double((int64_t(k) * mul) % mod) - shift) / div;
  Tensor t = Tensor::from_vector(values, shape, DType::f64);
  t.set_requires_grad(requires_grad);
  return t;
}

// sum(y * G), G the fixed pattern goldens_ch02.py's weights() makes.
Tensor weighted_loss(const Tensor& y) {
  return sum(mul(y, pattern(y.shape(), 7, 11, 5, 4, false)));
}

Verdict torch_gradient(const Tensor& t, const char* golden, const std::string& what) {
  return expect_values(t.grad(), kTorch.at(golden), t.shape(), 1e-12, 1e-12, what);
}

// ---- backward_order ---------------------------------------------------------------------------

// The order's ops, newest first, for a verdict's detail: "sum mul add exp scale sin".
std::string ops_of(const std::vector<Tensor>& order) {
  std::string names;
  for (const Tensor& t : order) {
    const char* op = recorded_op(t);
    names += fmt::format("{}{}", names.empty() ? "" : " ", op ? op : "(a leaf)");
  }
  return names;
}

// diamond's graph: a = sin(x); y = exp(a) + 3a; loss = sum(y * G): six ops, a read twice.
Verdict diamond_order() {
  const Tensor x = pattern({4}, 3, 7, 3, 4);
  const Tensor a = sin(x);
  const Tensor loss = weighted_loss(add(exp(a), scale(a, 3.0)));
  const std::vector<Tensor> order = backward_order({loss});
  const std::string got = ops_of(order);
  if (order.size() != 6)
    return {false, fmt::format("loss = sum((exp(a) + 3a) * G), a = sin(x): six ops, each once; "
                               "backward_order gave {}: {}",
                               order.size(), got)};
  for (size_t k = 0; k < order.size(); ++k) {
    if (recorded_op(order[k]) == nullptr)
      return {false, fmt::format("entry {} is a leaf (no op to run): {}", k, got)};
    if (k > 0 && recorded_sequence(order[k]) >= recorded_sequence(order[k - 1]))
      return {false, fmt::format("entry {} ({}) was recorded after entry {} ({}): newest first, "
                                 "please; got {}",
                                 k, recorded_op(order[k]), k - 1, recorded_op(order[k - 1]), got)};
  }
  if (!order.front().same(loss))
    return {false, fmt::format("the root must come first; got {}", got)};
  return {true, fmt::format("six ops, each once, newest first: {}", got)};
}

// A residual chain h = h + tanh(h), 16 layers: every h is read twice (by tanh and by the add), so
// a walk that does not remember the nodes it has found reaches h_0 along 2^16 paths and lists it
// that many times (at 22 layers the chapter's measured 1.77 s instead of 0.0001 s; at 40, years).
// 16 layers keep that wrong walk to a few milliseconds: the count says it, no clock needed.
Verdict residual_chain_each_once() {
  constexpr int kLayers = 16;
  Tensor h = exp(pattern({3}, 3, 7, 3, 4));  // an op, so the chain's first node is not a leaf
  for (int layer = 0; layer < kLayers; ++layer) h = add(h, tanh(h));
  const std::vector<Tensor> order = backward_order({sum(h)});
  const size_t expected = 2 * kLayers + 2;  // exp, the 16 tanh and 16 add, sum
  std::unordered_set<uint64_t> distinct;
  for (const Tensor& t : order) distinct.insert(recorded_sequence(t));
  if (order.size() != expected || distinct.size() != order.size())
    return {false,
            fmt::format("sum(h) after h = h + tanh(h) {} times: {} ops, each must be listed "
                        "once; backward_order listed {} entries ({} distinct): a node reached "
                        "again must be skipped (remember the nodes already found), or the walk "
                        "doubles with every layer",
                        kLayers, expected, order.size(), distinct.size())};
  return {true, fmt::format("{} layers, {} ops, each listed once", kLayers, expected)};
}

// Graphs where a depth-first or breadth-first order without the sort runs a node before every
// reader of its output has run: its gradient is then incomplete and x's is wrong.
Verdict diamond_gradient() {
  const Tensor x = pattern({4}, 3, 7, 3, 4);
  const Tensor a = sin(x);
  backward(weighted_loss(add(exp(a), scale(a, 3.0))));
  return torch_gradient(x, "diamond.dx", "a = sin(x); y = exp(a) + 3a: x's gradient");
}

Verdict skip_gradient() {
  const Tensor x = pattern({4}, 3, 7, 3, 4);
  const Tensor a = sin(x);
  backward(weighted_loss(add(a, exp(scale(a, 0.5)))));
  return torch_gradient(x, "skip.dx", "a = sin(x); y = a + exp(a / 2): x's gradient");
}

Verdict twice_gradient() {
  const Tensor x = pattern({4}, 3, 7, 3, 4);
  backward(weighted_loss(add(mul(x, x), sin(x))));
  return torch_gradient(x, "twice.dx", "y = x * x + sin(x): x's gradient (2x + cos x, weighted)");
}

// ---- broadcast_reduction_axes -----------------------------------------------------------------

struct AxesCase {
  Shape target, broadcast;
  std::vector<int64_t> axes;
};
const std::vector<AxesCase> kAxes = {
    {{4}, {3, 4}, {0}},       {{3, 1}, {2, 3, 4}, {0, 2}}, {{2, 3, 4}, {2, 3, 4}, {}},
    {{1, 1}, {5, 6}, {0, 1}}, {{}, {2, 3}, {0, 1}},        {{1, 4, 1}, {2, 3, 4, 5}, {0, 1, 3}},
    {{1, 1}, {1, 6}, {1}},
};

Verdict axes_directly() {
  for (const AxesCase& c : kAxes) {
    const std::vector<int64_t> got = broadcast_reduction_axes(c.target, c.broadcast);
    if (got != c.axes)
      return {false, fmt::format("broadcast_reduction_axes({}, {}) is {}, expected {}",
                                 shape_str(c.target), shape_str(c.broadcast), shape_str(got),
                                 shape_str(c.axes))};
  }
  return {true, fmt::format("{} pairs of shapes, the axes as expected", kAxes.size())};
}

// y = (x * w + b) * c, x [2, 3, 4], w [3, 1], b [4], c [1]: each gradient summed back to its
// input's shape, as torch's.
Verdict broadcast_gradients() {
  const Tensor x = pattern({2, 3, 4}, 5, 13, 6, 8), w = pattern({3, 1}, 3, 5, 2, 2),
               b = pattern({4}, 3, 7, 3, 4), c = pattern({1}, 1, 3, 3, 2);
  backward(weighted_loss(mul(add(mul(x, w), b), c)));
  for (const auto& [t, name] : {std::pair{w, "broadcast.dw"}, std::pair{b, "broadcast.db"},
                                std::pair{c, "broadcast.dc"}, std::pair{x, "broadcast.dx"}}) {
    const Verdict v = torch_gradient(t, name, fmt::format("y = (x * w + b) * c: {}", name));
    if (!v.passed) return v;
  }
  return {true, "the gradients of x [2, 3, 4], w [3, 1], b [4] and c [1] as torch's"};
}

// h = x, then three times h = h + tanh(h * w_i): a residual stream (every h read twice) whose
// weights [3] are broadcast over [2, 3].
Verdict residual_gradients() {
  const Tensor x = pattern({2, 3}, 5, 9, 4, 4);
  std::vector<Tensor> ws;
  for (int64_t i = 0; i < 3; ++i) ws.push_back(pattern({3}, 2 + i, 5, 2, 4));
  Tensor h = x;
  for (const Tensor& w : ws) h = add(h, tanh(mul(h, w)));
  backward(weighted_loss(h));
  Verdict v = torch_gradient(x, "residual.dx", "three residual steps: x's gradient");
  for (size_t i = 0; i < ws.size() && v.passed; ++i)
    v = torch_gradient(ws[i], fmt::format("residual.dw{}", i).c_str(),
                       fmt::format("three residual steps: w{}'s gradient", i));
  return v.passed ? Verdict{true, "x [2, 3] and the three w [3]: gradients as torch's"} : v;
}

Verdict composite_gradcheck() {
  return gradient_check(
      "tanh(x * w + c) * x, x [2, 3], w [3], c [2, 1]",
      [](const std::vector<Tensor>& in) { return mul(tanh(add(mul(in[0], in[1]), in[2])), in[0]); },
      {pattern({2, 3}, 5, 9, 4, 4), pattern({3}, 3, 7, 3, 4), pattern({2, 1}, 1, 3, 1, 2)});
}

}  // namespace

Chapter chapter() {
  return {
      2,
      "the graph and backward",
      "autograd/learn-02-graph.md",
      {
          {"backward_order",
           "autograd/tape.cpp",
           {{"the order of a diamond graph: each op once, newest first", diamond_order},
            {"a residual chain of 16 layers (each h read twice): each op listed once",
             residual_chain_each_once},
            {"a diamond (a read by two ops): x's gradient as torch's", diamond_gradient},
            {"a skip (a read directly and through a chain): x's gradient as torch's",
             skip_gradient},
            {"x an input of one op twice: x's gradient as torch's", twice_gradient}}},
          {"broadcast_reduction_axes",
           "tensor/shape.cpp",
           {{"the axes for seven pairs of shapes", axes_directly, true},
            {"(x * w + b) * c with w, b, c broadcast: gradients as torch's", broadcast_gradients},
            {"a residual stream with broadcast weights: gradients as torch's", residual_gradients},
            {"gradcheck float64: tanh(x * w + c) * x with w [3], c [2, 1] broadcast",
             composite_gradcheck}},
           {"backward_order"}},
      }};
}

}  // namespace dg::learn
