// gradgradcheck of every row of the layer families (shape, index, matmul, embedding, loss, norm):
// each row's second derivatives against central differences of its first derivative, the exact
// list of rows that refuse create_graph (the fused ops left unconverted), third derivatives
// through the ops' recorded backwards, and what each op's backward saves for the version check.
// Rows whose forward also runs ops of other families (sub, log, log_softmax) are expected to refuse
// exactly while one of those ops refuses create_graph; a probe asks each op. Ops of other families
// inside a recorded backward (softmax in cross_entropy's, sigmoid and softplus in
// binary_cross_entropy_with_logits', pow in the norms') need only their first-order backward for a
// second derivative; the third-derivative checks of those ops run when they support create_graph.
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

using namespace dg;

namespace {
// Whether `f` (one op of another family) runs under create_graph now.
bool supports_create_graph(const std::function<Tensor(const Tensor&)>& f) {
  Tensor x = random_tensor({2, 3}, 7, 0.5, 1.5);
  try {
    grad({sum(f(x))}, {x}, {}, false, /*create_graph=*/true);
    return true;
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).find("create_graph") == std::string::npos) throw;
    return false;
  }
}

// The ops of other families that rows of these families run, by name.
const std::map<std::string, std::function<Tensor(const Tensor&)>>& foreign_ops() {
  static const std::map<std::string, std::function<Tensor(const Tensor&)>> ops{
      {"softmax", [](const Tensor& x) { return softmax(x); }},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x); }},
      {"sub", [](const Tensor& x) { return sub(x, mul(x, x)); }},
      {"log", [](const Tensor& x) { return log(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"softplus", [](const Tensor& x) { return softplus(x); }},
      {"pow", [](const Tensor& x) { return pow(x, -0.5); }},
  };
  return ops;
}

struct Expectation {
  std::string row_prefix;            // the rows whose name starts with this
  std::vector<std::string> foreign;  // need these ops of other families
  bool refuses = false;              // or refuse create_graph for good (a fused op not converted)
};

// Runs gradgradcheck on every row; the rows expected to refuse are exactly those marked refusing
// or needing a foreign op that refuses now; every other row must pass.
void check_family(const std::vector<OpCase>& rows, const std::vector<Expectation>& expect) {
  std::map<std::string, bool> supported;
  for (const auto& [name, f] : foreign_ops()) supported[name] = supports_create_graph(f);
  for (const OpCase& row : rows) {
    bool expect_refusal = false;
    for (const Expectation& e : expect) {
      if (row.name.rfind(e.row_prefix, 0) != 0) continue;
      expect_refusal = expect_refusal || e.refuses;
      for (const std::string& op : e.foreign) expect_refusal = expect_refusal || !supported.at(op);
    }
    const OpCaseGradgradResult r = run_op_case_gradgrad(row);
    INFO(row.name, " (", r.seconds, " s): ", r.grad.message);
    if (expect_refusal) {
      CHECK_FALSE(r.supported);
    } else {
      CHECK(r.supported);
      CHECK(r.grad.passed);
      CHECK(r.grad.checks > 0);
    }
  }
}
}  // namespace

TEST_CASE("gradgradcheck: every shape row (views, copies, cat, stack, split, to_dtype)") {
  check_family(shape_op_cases(), {});
}

TEST_CASE("gradgradcheck: every index row (gather, index_select)") {
  check_family(index_op_cases(), {});
}

TEST_CASE("gradgradcheck: every embedding row") { check_family(embedding_op_cases(), {}); }

TEST_CASE("gradgradcheck: every matmul row; linear_rope refuses (rope is not converted)") {
  check_family(matmul_op_cases(), {{"linear_rope/", {}, true}});
}

TEST_CASE("gradgradcheck: every loss row; linear_cross_entropy refuses") {
  check_family(loss_op_cases(), {{"plain_cross_entropy/", {"sub", "log"}},
                                 {"nll_loss/sum of log_softmax", {"log_softmax"}},
                                 {"linear_cross_entropy/", {}, true}});
}

TEST_CASE("gradgradcheck: every regression loss row") {
  check_family(loss_regression_op_cases(), {});
}

TEST_CASE("gradgradcheck: every norm row") { check_family(norm_op_cases(), {}); }

namespace {
// The first derivative of Σ W ⊙ f(x) with respect to in[0], recorded (create_graph): a function
// whose gradgradcheck checks f's third derivatives.
GradcheckFn first_derivative(GradcheckFn f) {
  return [f](const std::vector<Tensor>& in) {
    Tensor y = f(in);
    Tensor w = random_tensor(y.shape(), 99, -1.0, 1.0, false);
    Tensor l = sum(mul(mul(y, y), w));  // y² so that linear ops keep a second derivative
    return grad({l}, {in[0]}, {}, false, /*create_graph=*/true)[0];
  };
}

void check_third(const std::string& name, GradcheckFn f, const std::vector<Tensor>& inputs) {
  GradcheckResult r = gradgradcheck(name, first_derivative(std::move(f)), inputs);
  INFO(name, ": ", r.message);
  CHECK(r.passed);
}
}  // namespace

TEST_CASE("third derivatives through the recorded backwards of shape, index and matmul ops") {
  using V = const std::vector<Tensor>&;
  check_third("slice and cat",
              [](V in) {
                return cat({slice(in[0], 1, 1, 3), in[0]}, 1);
              },
              {random_tensor({2, 4}, 1)});
  check_third("transpose, permute, stack",
              [](V in) {
                return stack({transpose(in[0], 0, 1), permute(in[0], {1, 0})}, 0);
              },
              {random_tensor({2, 3}, 2)});
  check_third("gather",
              [](V in) {
                return gather(in[0], 1, Tensor::from_ids({2, 0, 2}, {1, 3}));
              },
              {random_tensor({2, 3}, 3)});
  check_third("index_select",
              [](V in) {
                return index_select(in[0], 0, Tensor::from_ids({1, 1, 0}, {3}));
              },
              {random_tensor({2, 3}, 4)});
  check_third("embedding",
              [](V in) {
                return embedding(in[0], Tensor::from_ids({1, 3, 1}, {3}));
              },
              {random_tensor({4, 2}, 5)});
  check_third("matmul", [](V in) { return matmul(in[0], in[1]); },
              {random_tensor({2, 3}, 6), random_tensor({3, 2}, 7)});
  check_third("linear", [](V in) { return linear(in[0], in[1], in[2]); },
              {random_tensor({2, 3}, 8), random_tensor({4, 3}, 9), random_tensor({4}, 10)});
  check_third("mse_loss", [](V in) { return mse_loss(in[0], in[1], Reduction::none); },
              {random_tensor({2, 3}, 11), random_tensor({2, 3}, 12)});
  check_third("nll_loss",
              [](V in) {
                return nll_loss(in[0], Tensor::from_ids({1, -100, 0}, {3}), Reduction::none);
              },
              {random_tensor({3, 2}, 13)});
}

TEST_CASE("third derivatives of the norms and losses whose recorded backward runs other ops") {
  using V = const std::vector<Tensor>&;
  auto ready = [](const char* op) { return supports_create_graph(foreign_ops().at(op)); };
  if (ready("pow")) {
    check_third("layer_norm", [](V in) { return layer_norm(in[0], in[1], in[2]); },
                {random_tensor({2, 4}, 14, -2, 2), random_tensor({4}, 15, 0.5, 1.5),
                 random_tensor({4}, 16)});
    check_third("rms_norm", [](V in) { return rms_norm(in[0], in[1], 0.1); },
                {random_tensor({2, 4}, 17, -2, 2), random_tensor({4}, 18, 0.5, 1.5)});
  }
  if (ready("softmax"))
    check_third("cross_entropy",
                [](V in) {
                  return cross_entropy(in[0], Tensor::from_ids({2, -100, 0}, {3}), Reduction::none,
                                       -100, 0.1);
                },
                {random_tensor({3, 4}, 19, -2, 2)});
  if (ready("sigmoid") && ready("softplus"))
    check_third("binary_cross_entropy_with_logits",
                [](V in) {
                  return binary_cross_entropy_with_logits(
                      in[0], in[1], Reduction::none,
                      Tensor::from_vector({0.5, 2.0}, {2}, in[0].dtype()));
                },
                {random_tensor({3, 2}, 20, -3, 3), random_tensor({3, 2}, 21, 0, 1)});
}

TEST_CASE("gradgradcheck through a small model: embedding, linear, layer_norm, rms_norm, losses") {
  using V = const std::vector<Tensor>&;
  const Tensor ids = Tensor::from_ids({3, 0, 3, 1}, {2, 2});
  const Tensor targets = Tensor::from_ids({2, -100, 0, 1}, {4});
  auto model = [&](V in) {
    Tensor h = embedding(in[0], ids);                          // [2, 2, 3]
    h = layer_norm(linear(h, in[1], in[2]), in[3], Tensor());  // [2, 2, 4]
    const Tensor w = reshape(slice(in[0], 0, 1, 2), {3});      // a tied weight [3]
    h = rms_norm(matmul(h, in[1]), w, 0.1);                    // [2, 2, 3]
    const Tensor logits = reshape(linear(h, in[1]), {4, 4});
    return add(cross_entropy(logits, targets, Reduction::mean, -100, 0.1),
               mse_loss(h, expand(w, h.shape()), Reduction::sum));
  };
  GradcheckResult r = gradgradcheck("model", model,
                                    {random_tensor({4, 3}, 40), random_tensor({4, 3}, 41),
                                     random_tensor({4}, 42), random_tensor({4}, 43, 0.5, 1.5)});
  INFO(r.message);
  CHECK(r.passed);
}

TEST_CASE("what the backwards save: an in-place write to an unread input does not refuse") {
  auto written_after = [](const std::function<Tensor(const Tensor&)>& f, bool write_input) {
    Tensor a = random_tensor({3, 4}, 20);
    Tensor y = f(a);
    if (write_input) a.fill(0.5);
    return y;
  };
  // views and copies read only shapes
  for (auto f : std::vector<std::function<Tensor(const Tensor&)>>{
           [](const Tensor& a) { return transpose(a, 0, 1); },
           [](const Tensor& a) {
             return permute(a, {1, 0});
           },
           [](const Tensor& a) { return slice(a, 1, 1, 3); },
           [](const Tensor& a) { return contiguous(transpose(a, 0, 1)); },
           [](const Tensor& a) {
             return cat({a, a}, 0);
           },
           [](const Tensor& a) {
             return stack({a, a}, 1);
           },
           [](const Tensor& a) {
             return gather(a, 1, Tensor::from_ids({0, 3, 3}, {1, 3}));
           },
           [](const Tensor& a) {
             return index_select(a, 0, Tensor::from_ids({2, 0}, {2}));
           },
           [](const Tensor& a) {
             return embedding(a, Tensor::from_ids({2, 0}, {2}));
           },
           [](const Tensor& a) {
             return nll_loss(a, Tensor::from_ids({1, 2, 3}, {3}), Reduction::sum);
           }}) {
    CHECK_NOTHROW(backward(sum(written_after(f, true))));  // sum saves nothing either
  }
  // an input the backward reads refuses
  CHECK_THROWS_WITH(backward(sum(written_after(
                        [](const Tensor& a) { return matmul(a, transpose(a, 0, 1)); }, true))),
                    doctest::Contains("matmul"));
  // linear and layer_norm do not read the bias; they read x and the weight
  Tensor x = random_tensor({2, 3}, 21), w = random_tensor({3}, 22), b = random_tensor({3}, 23);
  Tensor y = layer_norm(x, w, b);
  b.fill(0.25);
  CHECK_NOTHROW(backward(sum(mul(y, y))));
  Tensor y2 = layer_norm(x, w, b);
  w.fill(0.25);
  CHECK_THROWS_WITH(backward(sum(mul(y2, y2))), doctest::Contains("layer_norm"));
  Tensor W = random_tensor({4, 3}, 24), bias = random_tensor({4}, 25);
  Tensor z = linear(x, W, bias);
  bias.fill(0.25);
  CHECK_NOTHROW(backward(sum(mul(z, z))));
  Tensor z2 = linear(x, W, bias);
  x.fill(0.25);
  CHECK_THROWS_WITH(backward(sum(mul(z2, z2))), doctest::Contains("linear"));
}

// Under create_graph the root's seed is accumulated outside any node's backward: for a root that
// is a leaf (or a requested input) the gradient must still keep grad_outputs' graph, as torch's
// grad(x, x, w, create_graph=True) returns w with its graph.
TEST_CASE("create_graph keeps the graph of grad_outputs when the root is a leaf") {
  Tensor x = random_tensor({3}, 30), w = random_tensor({3}, 31);
  Tensor g = grad({x}, {x}, {w}, false, /*create_graph=*/true)[0];
  REQUIRE(g.requires_grad());
  backward(sum(mul(g, g)));
  const std::vector<double> dw = w.grad().to_vector(), wv = w.to_vector();
  for (size_t i = 0; i < wv.size(); ++i) CHECK(dw[i] == doctest::Approx(2 * wv[i]));
}
