// The autograd graph (autograd/tape.h): one group of tests per defect the global tape had, each
// failing (or crashing) on it, plus grad(). Values are compared with PyTorch's rules, not its
// numbers: these are graph semantics, checked on small float64 tensors.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"

using namespace dg;

namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector(); }

// max |a − b| over equal-sized vectors
double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// y = x³ with a backward that calls library ops and no NoGradGuard, as a learner would write it.
// It also notes whether grad mode was on while it ran.
bool g_grad_mode_in_backward = true;
Tensor cube(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = mul(mul(x, x), x);
  }
  if (should_record({x}))
    record("cube", {x}, out, [x](const Tensor& g) {
      g_grad_mode_in_backward = grad_enabled();
      accumulate_grad(x, mul(g, scale(mul(x, x), 3.0)));  // g · 3x²
    });
  return out;
}

// Records every op name the walk runs, in order.
struct OpLog : BackwardObserver {
  std::vector<std::string> ops;
  void before(const ObservedNode& node) override { ops.emplace_back(node.op); }
};

}  // namespace

// ---- defect 1: ops inside a backward closure were recorded into the tape being walked ----------

TEST_CASE(
    "defect 1: a backward closure that calls ops runs with grad mode off, recording nothing") {
  Tensor x = random_tensor({3, 4}, 1);
  Tensor y = cube(x);
  const int64_t live = live_graph_nodes();
  g_grad_mode_in_backward = true;
  backward(sum(y));
  CHECK_FALSE(g_grad_mode_in_backward);
  CHECK(grad_enabled());                  // restored after the walk
  CHECK(live_graph_nodes() <= live + 1);  // the sum's node; nothing the closure computed
  std::vector<double> expected = values(x);
  for (double& v : expected) v = 3 * v * v;
  CHECK(max_diff(values(x.grad()), expected) < 1e-14);
  auto r = gradcheck("cube", [](const std::vector<Tensor>& in) { return cube(in[0]); },
                     {random_tensor({2, 3}, 2)});
  CHECK_MESSAGE(r.passed, r.message);
}

TEST_CASE("defect 1: grad mode comes back on after a backward that throws") {
  Tensor x = random_tensor({2, 3}, 3);
  Tensor y = Tensor::zeros({2, 3}, DType::f64);
  record("throws_in_backward", {x}, y,
         [](const Tensor&) { throw std::runtime_error("throws_in_backward: planted"); });
  CHECK_THROWS_WITH(backward(y, Tensor::ones({2, 3}, DType::f64)), doctest::Contains("planted"));
  CHECK(grad_enabled());
}

// ---- defect 2: backward walked and cleared the whole global tape --------------------------------

TEST_CASE("defect 2: two losses built first, backward on each: the gradient is their sum") {
  Tensor x = random_tensor({3, 4}, 4);
  Tensor l1 = sum(mul(x, x));    // d/dx = 2x
  Tensor l2 = sum(scale(x, 3));  // d/dx = 3
  backward(l1);
  backward(l2);
  std::vector<double> expected = values(x);
  for (double& v : expected) v = 2 * v + 3;
  CHECK(max_diff(values(x.grad()), expected) < 1e-14);
}

TEST_CASE("defect 2: backward runs only the graph its root depends on, newest node first") {
  Tensor x = random_tensor({2, 3}, 5);
  Tensor other = exp(x);  // another graph: not run, not freed
  Tensor a = mul(x, x);
  Tensor b = sqrt(add_scalar(mul(x, x), 1.0));
  OpLog log;
  set_backward_observer(&log);
  backward(sum(add(b, a)));
  set_backward_observer(nullptr);
  // reverse creation order: sum, add, sqrt, add_scalar, mul (of b), mul (of a)
  CHECK(log.ops == std::vector<std::string>{"sum", "add", "sqrt", "add_scalar", "mul", "mul"});
  x.impl()->grad = Tensor();
  backward(sum(other));  // still usable
  CHECK(max_diff(values(x.grad()), values(other)) < 1e-14);
}

TEST_CASE("backward_order: each node once, newest first, no leaves; the graph read from a tensor") {
  Tensor x = random_tensor({2, 3}, 6);
  Tensor a = sin(x);
  Tensor e = exp(a);
  Tensor m = mul(a, a);  // a read by two ops, mul reads it twice
  Tensor loss = sum(add(e, m));
  const std::vector<Tensor> order = backward_order({loss});
  std::vector<std::string> ops;
  for (const Tensor& t : order) ops.push_back(recorded_op(t));
  CHECK(ops == std::vector<std::string>{"sum", "add", "mul", "exp", "sin"});
  CHECK(order.front().same(loss));
  for (size_t k = 1; k < order.size(); ++k)
    CHECK(recorded_sequence(order[k]) < recorded_sequence(order[k - 1]));
  CHECK(recorded_inputs(order.back()).size() == 1);
  CHECK(recorded_inputs(order.back())[0].same(x));
  CHECK(recorded_op(x) == nullptr);
  CHECK(recorded_inputs(x).empty());
  CHECK_THROWS_WITH_AS(recorded_sequence(x), doctest::Contains("is a leaf"), std::invalid_argument);
  CHECK(backward_order({x}).empty());
}

TEST_CASE("defect 2: a second backward through a freed graph throws naming the op") {
  Tensor x = random_tensor({3, 4}, 6);
  Tensor l = sum(exp(x));
  backward(l);
  const std::vector<double> once = values(x.grad());
  CHECK_THROWS_WITH(backward(l), doctest::Contains("backward through the graph a second time"));
  CHECK_THROWS_WITH(backward(l), doctest::Contains("'sum'"));
  CHECK_THROWS_WITH(backward(l), doctest::Contains("keep_graph"));
  CHECK(values(x.grad()) == once);  // refused before any gradient changed
  // a new graph over a freed intermediate is refused too, naming the freed node's op
  Tensor h = exp(x);
  backward(sum(h));
  CHECK_THROWS_WITH(backward(sum(mul(h, h))), doctest::Contains("'exp'"));
}

TEST_CASE("defect 2: keep_graph (retain_graph) allows another backward; the last one frees") {
  Tensor x = random_tensor({3, 4}, 7);
  Tensor h = exp(x);
  Tensor l1 = sum(h), l2 = sum(mul(h, h));
  backward(l1, Tensor(), /*keep_graph=*/true);
  backward(l2);  // h's node is still there
  std::vector<double> expected = values(h);
  for (double& v : expected) v = v + 2 * v * v;  // e^x + 2e^{2x}
  CHECK(max_diff(values(x.grad()), expected) < 1e-12);
  CHECK_THROWS_WITH(backward(l1), doctest::Contains("second time"));  // l2's walk freed h's node
}

// ---- defect 3: forwards without backward grew the tape without bound ---------------------------

TEST_CASE("defect 3: 1000 forwards without backward keep the live node count constant") {
  Tensor w = random_tensor({8, 8}, 8);
  Tensor x = random_tensor({1, 2, 4, 8}, 9, -1, 1, false);
  const int64_t before = live_graph_nodes();
  int64_t during = -1;
  bool constant = true;
  for (int i = 0; i < 1000; ++i) {
    // every op whose backward reads its own output: exp, div, sqrt, softmax, causal_attention
    Tensor h = linear(x, w);
    Tensor s = div(exp(h), sqrt(add_scalar(mul(h, h), 1.0)));
    Tensor y = sum(causal_attention(softmax(s), h, h));
    if (i == 0) during = live_graph_nodes();
    constant = constant && live_graph_nodes() == during;
  }
  CHECK(constant);
  CHECK(during > before);
  CHECK(live_graph_nodes() == before);
}

TEST_CASE("defect 3: the graph of every op in the gradcheck table is freed with its output") {
  int recorded = 0;
  const std::vector<OpCase> cases = all_op_cases();
  for (const OpCase& c : cases) {
    CAPTURE(c.name);
    std::vector<Tensor> inputs = c.make_inputs();
    const int64_t before = live_graph_nodes();
    {
      Tensor y = c.fn(inputs);
      recorded += live_graph_nodes() > before;  // not when the op returns its input itself
    }
    CHECK(live_graph_nodes() == before);  // a closure capturing its own output would leak
  }
  CHECK(recorded + 2 > static_cast<int>(cases.size()));
}

TEST_CASE("defect 3: a chain of 100000 ops is walked and freed without deep recursion") {
  Tensor x = random_tensor({1}, 10);
  const int64_t before = live_graph_nodes();
  {
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) y = add_scalar(y, 1e-6);
    CHECK(live_graph_nodes() == before + 100000);
    Tensor z = scale(y, 2.0);
    backward(z);
    CHECK(x.grad().item() == 2.0);
  }
  CHECK(live_graph_nodes() == before);
  {
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) y = add_scalar(y, 1e-6);
  }  // dropped without a backward
  CHECK(live_graph_nodes() == before);
}

TEST_CASE("defect 3: a backward closure must not capture its output; record refuses an input") {
  Tensor x = random_tensor({2, 2}, 11);
  Tensor y = x;
  CHECK_THROWS_WITH(
      record("returns_input", {x}, y, [x](const Tensor& g) { accumulate_grad(x, g); }),
      doctest::Contains("returns_input"));
  CHECK(x.is_leaf());
  Tensor e = exp(x);
  Tensor d = detach(e);
  CHECK(d.storage() == e.storage());
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
}

// ---- grad(): gradients without touching .grad

TEST_CASE("grad: the gradients of a scalar match backward's and no .grad changes") {
  Tensor x = random_tensor({3, 4}, 12), w = random_tensor({5, 4}, 13);
  auto loss = [&] {
    return sum(mul(exp(linear(x, w)), random_tensor({3, 5}, 14, 0.5, 1.5, false)));
  };
  backward(loss());
  const std::vector<double> gx = values(x.grad()), gw = values(w.grad());
  x.impl()->grad = Tensor();
  Tensor kept = Tensor::full({5, 4}, 7.0, DType::f64);
  w.set_grad(kept);
  std::vector<Tensor> g = grad({loss()}, {x, w});
  REQUIRE(g.size() == 2);
  CHECK(max_diff(values(g[0]), gx) < 1e-14);
  CHECK(max_diff(values(g[1]), gw) < 1e-14);
  CHECK_FALSE(x.grad().defined());
  CHECK(w.grad().same(kept));
  CHECK(values(kept) == std::vector<double>(20, 7.0));
}

TEST_CASE("grad: grad_outputs, a non-leaf input, unused inputs and the freed graph") {
  Tensor x = random_tensor({2, 3}, 15), u = random_tensor({2, 3}, 16);
  Tensor h = exp(x);
  Tensor y = mul(h, h);  // dy/dh = 2h, dy/dx = 2e^{2x}
  Tensor dy = random_tensor({2, 3}, 17, -1, 1, false);
  std::vector<Tensor> g = grad({y}, {h, x}, {dy}, /*keep_graph=*/true);
  std::vector<double> eh = values(h), ex = values(h);
  for (size_t i = 0; i < eh.size(); ++i) {
    eh[i] = dy.to_vector()[i] * 2 * eh[i];
    ex[i] = eh[i] * ex[i];
  }
  CHECK(max_diff(values(g[0]), eh) < 1e-14);
  CHECK(max_diff(values(g[1]), ex) < 1e-14);
  CHECK_FALSE(h.grad().defined());
  CHECK_FALSE(x.grad().defined());
  CHECK(values(grad({y}, {y}, {dy}, true)[0]) == values(dy));  // an output's own: grad_outputs
  CHECK(grad({y}, {y}, {dy}, true)[0].storage() != dy.storage());
  CHECK_THROWS_WITH(grad({y}, {u}, {dy}), doctest::Contains("not used"));
  CHECK_THROWS_WITH(grad({y}, {x}), doctest::Contains("more than one element"));
  std::vector<Tensor> gu =
      grad({y}, {x, u}, {dy}, false, /*create_graph=*/false, /*allow_unused=*/true);
  CHECK(max_diff(values(gu[0]), ex) < 1e-14);
  CHECK_FALSE(gu[1].defined());
  CHECK_THROWS_WITH(grad({y}, {x}, {dy}), doctest::Contains("second time"));
}

TEST_CASE("grad: only the nodes between the outputs and the inputs run") {
  Tensor x = random_tensor({2, 3}, 18), w = random_tensor({2, 3}, 19);
  Tensor h = exp(x);
  Tensor y = sum(mul(h, w));
  OpLog log;
  set_backward_observer(&log);
  std::vector<Tensor> g = grad({y}, {h});
  set_backward_observer(nullptr);
  CHECK(log.ops == std::vector<std::string>{"sum", "mul"});  // exp, below h, does not run
  CHECK(values(g[0]) == values(w));
  backward(sum(h));  // exp's node was not freed
  CHECK(max_diff(values(x.grad()), values(h)) < 1e-14);
}
