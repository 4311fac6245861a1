// Tests of the pointwise kernels (tensor/kernels_pointwise.h; their ops are in
// autograd/ops_activation.cpp and autograd/ops_unary.cpp): fast kernels against the ref_*
// twins, float32 bit-identity at 1 and 2 threads, the values torch 1.13 gives at kinks, ties and
// zeros, masks, comparisons, operators and errors. Gradients away from kinks: the activation and
// elementwise rows of the gradient-check table.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/kernels_pointwise.h"
#include "tensor/threads.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

namespace {

template <class T>
double tol() {
  return sizeof(T) == 4 ? 2e-5 : 1e-12;
}

struct UnaryCase {
  const char* name;
  UnaryOp op;
  UnaryArgs args;
  double lo, hi;  // input range
};

const UnaryCase kUnary[] = {
    {"relu", UnaryOp::relu, {}, -3, 3},
    {"leaky_relu", UnaryOp::leaky_relu, {0.01, 0}, -3, 3},
    {"sigmoid", UnaryOp::sigmoid, {}, -20, 20},
    {"tanh", UnaryOp::tanh, {}, -5, 5},
    {"softplus", UnaryOp::softplus, {1.0, 20.0}, -30, 30},
    {"softplus beta 2", UnaryOp::softplus, {2.0, 5.0}, -6, 6},
    {"abs", UnaryOp::abs, {}, -3, 3},
    {"clamp", UnaryOp::clamp, {-0.5, 1.0}, -3, 3},
    {"clamp min only", UnaryOp::clamp, {-0.5, INFINITY}, -3, 3},
    {"pow 2", UnaryOp::pow, {2, 0}, -3, 3},
    {"pow 3", UnaryOp::pow, {3, 0}, -3, 3},
    {"pow -2", UnaryOp::pow, {-2, 0}, 0.2, 3},
    {"pow -1", UnaryOp::pow, {-1, 0}, 0.2, 3},
    {"pow 0.5", UnaryOp::pow, {0.5, 0}, 0.2, 3},
    {"pow -0.5", UnaryOp::pow, {-0.5, 0}, 0.2, 3},
    {"pow 1.7", UnaryOp::pow, {1.7, 0}, 0.2, 3},
    {"pow 0", UnaryOp::pow, {0, 0}, -3, 3},
};

// The values of a tensor as doubles.
std::vector<double> values(const Tensor& t) { return t.contiguous().to_vector(); }

Tensor f64(std::vector<double> v, bool grad = true) {
  Tensor t = Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, DType::f64);
  return grad ? t.set_requires_grad(true) : t;
}

// The gradient of sum(y · w) with respect to each input.
void backward_weighted(const Tensor& y, const std::vector<double>& w) {
  backward(y, Tensor::from_vector(w, y.shape(), y.dtype()));
}

}  // namespace

// ---- fast kernels against the reference kernels -------------------------------------------------

TEST_CASE_TEMPLATE("pointwise kernels: fast matches reference", T, float, double) {
  const int64_t n = 1001;
  for (const UnaryCase& c : kUnary) {
    CAPTURE(c.name);
    auto x = rand_vec<T>(n, 5, c.lo, c.hi), dy = rand_vec<T>(n, 6);
    std::vector<T> y(n), y_ref(n), dx(n, T(NAN)), dx_ref(n);
    pointwise_forward<T>(c.op, c.args, y.data(), x.data(), n);
    ref_pointwise_forward<T>(c.op, c.args, y_ref.data(), x.data(), n);
    CHECK(rel_diff(y, y_ref) < tol<T>());
    pointwise_backward<T>(c.op, c.args, dx.data(), dy.data(), x.data(), y.data(), n);  // overwrites
    ref_pointwise_backward<T>(c.op, c.args, dx_ref.data(), dy.data(), x.data(), n);
    CHECK(rel_diff(dx, dx_ref) < tol<T>());
  }
  const BinaryOp kBinary[] = {BinaryOp::pow, BinaryOp::minimum, BinaryOp::maximum};
  for (BinaryOp op : kBinary) {
    CAPTURE(static_cast<int>(op));
    const bool is_pow = op == BinaryOp::pow;
    // a [5, 1, 7] with b [3, 7] -> [5, 3, 7]; the reference sees both expanded
    Tensor a = random_tensor({5, 1, 7}, 7, is_pow ? 0.2 : -2, 2, false).to(dtype_of<T>());
    Tensor b = random_tensor({3, 7}, 8, -2, 2, false).to(dtype_of<T>());
    if (!is_pow) b.data<T>()[4] = a.data<T>()[4];  // a tie (in row 0 of the output)
    const Shape shape{5, 3, 7};
    Tensor ae = dg::raw::view_expand(a, shape).contiguous(),
           be = dg::raw::view_expand(b, shape).contiguous();
    Tensor y = Tensor::empty(shape, dtype_of<T>()), y_ref = Tensor::empty(shape, dtype_of<T>());
    const int64_t m = y.numel();
    binary_pointwise_forward(op, a, b, y);
    ref_binary_pointwise_forward<T>(op, y_ref.data<T>(), ae.data<T>(), be.data<T>(), m);
    std::vector<T> yv(y.data<T>(), y.data<T>() + m), yr(y_ref.data<T>(), y_ref.data<T>() + m);
    CHECK(rel_diff(yv, yr) < tol<T>());
    auto dy = rand_vec<T>(m, 9);
    std::vector<T> da(m), db(m), da_ref(m), db_ref(m);
    binary_pointwise_backward<T>(op, da.data(), db.data(), dy.data(), ae.data<T>(), be.data<T>(),
                                 y.data<T>(), m);
    ref_binary_pointwise_backward<T>(op, da_ref.data(), db_ref.data(), dy.data(), ae.data<T>(),
                                     be.data<T>(), m);
    CHECK(rel_diff(da, da_ref) < tol<T>());
    CHECK(rel_diff(db, db_ref) < tol<T>());
  }
}

// ---- thread-count independence ------------------------------------------------------------------

TEST_CASE("pointwise kernels: float32 results are bit-identical at 1 and 2 threads") {
  ThreadsGuard guard;
  const int64_t n = 900 * 160;  // above kParallelGrain so that the parallel branches run
  auto x = rand_vec<float>(n, 1, -4, 4), xp = rand_vec<float>(n, 2, 0.1, 3);
  auto b = rand_vec<float>(n, 3, -4, 4), dy = rand_vec<float>(n, 4);
  auto cond = rand_vec<float>(n, 5, -1, 1);
  for (int64_t i = 0; i < n; i += 7) cond[i] = 0;
  std::unique_ptr<bool[]> mask(new bool[n]);
  for (int64_t i = 0; i < n; ++i) mask[i] = cond[i] != 0;
  Tensor ta = Tensor::from_vector(std::vector<double>(x.begin(), x.end()), {900, 160});
  Tensor tb = Tensor::from_vector(std::vector<double>(b.begin(), b.begin() + 160), {160});
  auto run = [&](int threads) {
    set_threads(threads);
    std::vector<std::vector<float>> r;
    for (const UnaryCase& c : kUnary) {
      const std::vector<float>& in = c.lo > 0 ? xp : x;
      std::vector<float> y(n), dx(n);
      pointwise_forward<float>(c.op, c.args, y.data(), in.data(), n);
      pointwise_backward<float>(c.op, c.args, dx.data(), dy.data(), in.data(), y.data(), n);
      r.push_back(y), r.push_back(dx);
    }
    for (BinaryOp op : {BinaryOp::pow, BinaryOp::minimum, BinaryOp::maximum}) {
      Tensor y = Tensor::empty({900, 160});
      binary_pointwise_forward(
          op,
          op == BinaryOp::pow
              ? Tensor::from_vector(std::vector<double>(xp.begin(), xp.end()), {900, 160})
              : ta,
          tb, y);
      std::vector<float> da(n), db(n);
      binary_pointwise_backward<float>(op, da.data(), db.data(), dy.data(),
                                       op == BinaryOp::pow ? xp.data() : x.data(), b.data(),
                                       y.data<float>(), n);
      r.emplace_back(y.data<float>(), y.data<float>() + n), r.push_back(da), r.push_back(db);
    }
    std::vector<float> w(n), wa(n), wb(n), lt_out(n), eq_out(n);
    where_forward<float>(w.data(), mask.get(), x.data(), b.data(), n);
    where_backward<float>(wa.data(), wb.data(), dy.data(), mask.get(), n);
    compare_kernel<float, float>(CompareOp::lt, lt_out.data(), x.data(), b.data(), n);
    compare_scalar_kernel<float, float>(CompareOp::eq, eq_out.data(), cond.data(), 0.0, n);
    r.push_back(w), r.push_back(wa), r.push_back(wb), r.push_back(lt_out), r.push_back(eq_out);
    return r;
  };
  auto one = run(1);
  auto two = run(2);
  REQUIRE(one.size() == two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bits(one[i], two[i]));
  }
}

// ---- kinks, ties and zeros: the values torch 1.13 gives -----------------------------------------
// x = [−1, −0, 0, 2, NaN], gradient of sum(y) (torch: y.backward(ones)).

TEST_CASE("pointwise ops: subgradients at 0 and NaN as torch") {
  const std::vector<double> xs = {-1.0, -0.0, 0.0, 2.0, NAN};
  auto check = [&](const char* name, auto f, std::vector<double> want_y,
                   std::vector<double> want_g) {
    CAPTURE(name);
    Tensor x = f64(xs);
    Tensor y = f(x);
    backward(y, Tensor::ones(y.shape(), DType::f64));
    std::vector<double> yv = values(y), gv = values(x.grad());
    for (size_t i = 0; i < xs.size(); ++i) {
      CAPTURE(i);
      if (std::isnan(want_y[i]))
        CHECK(std::isnan(yv[i]));
      else
        CHECK(yv[i] == want_y[i]);
      CHECK(gv[i] == want_g[i]);
    }
  };
  check("relu", [](const Tensor& t) { return relu(t); }, {0, -0.0, 0, 2, NAN}, {0, 0, 0, 1, 1});
  check("leaky_relu", [](const Tensor& t) { return leaky_relu(t); }, {-0.01, -0.0, 0, 2, NAN},
        {0.01, 0.01, 0.01, 1, 0.01});
  check("abs", [](const Tensor& t) { return abs(t); }, {1, 0, 0, 2, NAN}, {-1, 0, 0, 1, 0});
  check("clamp(0, 2)", [](const Tensor& t) { return clamp(t, 0.0, 2.0); }, {0, -0.0, 0, 2, NAN},
        {0, 1, 1, 1, 0});
  check("clamp(min 2 > max 1)", [](const Tensor& t) { return clamp(t, 2.0, 1.0); },
        {1, 1, 1, 1, NAN}, {0, 0, 0, 0, 0});
  // relu(−0) keeps its sign, as torch's
  Tensor r = relu(f64({-0.0}, false));
  CHECK(std::signbit(r.item()));
}

TEST_CASE("maximum and minimum split the gradient half and half on ties, as torch") {
  // torch: a = [1, 2, 3, −0], b = [1, 1, 3, 0], loss = sum(f(a, b) · [1, 2, 4, 8])
  const std::vector<double> w = {1, 2, 4, 8};
  auto run = [&](bool is_max, std::vector<double> want_a, std::vector<double> want_b) {
    CAPTURE(is_max);
    Tensor a = f64({1, 2, 3, -0.0}), b = f64({1, 1, 3, 0});
    backward_weighted(is_max ? maximum(a, b) : minimum(a, b), w);
    CHECK(values(a.grad()) == want_a);
    CHECK(values(b.grad()) == want_b);
  };
  run(true, {0.5, 2, 2, 4}, {0.5, 0, 2, 4});
  run(false, {0.5, 0, 2, 4}, {0.5, 2, 2, 4});
  // NaN on either side gives NaN
  std::vector<double> m = values(maximum(f64({NAN, 1}, false), f64({1, NAN}, false)));
  CHECK((std::isnan(m[0]) && std::isnan(m[1])));
  // a tie against a broadcast operand: each element of a gets half, b sums the halves
  Tensor a = f64({2, 2, 3}), b = f64({2});
  backward(maximum(a, b), Tensor::ones({3}, DType::f64));
  CHECK(values(a.grad()) == std::vector<double>{0.5, 0.5, 1});
  CHECK(values(b.grad()) == std::vector<double>{1});
}

TEST_CASE("pow at zero bases and exponents, as torch") {
  // torch: a = [0, 0, 0, 2], e = [0, 2, −1, 0]: y = [1, 0, inf, 1],
  // da = [0, 0, −inf, 0], de = [0, 0, −inf, ln 2]
  Tensor a = f64({0, 0, 0, 2}), e = f64({0, 2, -1, 0});
  Tensor y = pow(a, e);
  backward(y, Tensor::ones({4}, DType::f64));
  CHECK(values(y) == std::vector<double>{1, 0, INFINITY, 1});
  CHECK(values(a.grad()) == std::vector<double>{0, 0, -INFINITY, 0});
  CHECK(values(e.grad()) == std::vector<double>{0, 0, -INFINITY, std::log(2.0)});
  // scalar exponent 0: gradient 0 even at 0; exponent 0.5 at 0: inf
  Tensor x = f64({0, 3});
  backward(pow(x, 0.0), Tensor::ones({2}, DType::f64));
  CHECK(values(x.grad()) == std::vector<double>{0, 0});
  Tensor z = f64({0, 3});
  backward(pow(z, 0.5), Tensor::ones({2}, DType::f64));
  CHECK(values(z.grad())[0] == INFINITY);
  CHECK(values(z.grad())[1] == doctest::Approx(0.2886751345948129));
}

TEST_CASE("softplus: torch's values on both sides of the threshold") {
  Tensor x = f64({0, 10, 20, 20.5, -30});
  Tensor y = softplus(x);
  backward(y, Tensor::ones({5}, DType::f64));
  const std::vector<double> want_y = {0.6931471805599453, 10.000045398899218, 20.000000002061153,
                                      20.5, 9.357622968839737e-14};
  const std::vector<double> want_g = {0.5, 0.9999546021312976, 0.9999999979388464, 1.0,
                                      9.3576229688393e-14};
  std::vector<double> yv = values(y), gv = values(x.grad());
  for (size_t i = 0; i < want_y.size(); ++i) {
    CAPTURE(i);
    CHECK(yv[i] == doctest::Approx(want_y[i]).epsilon(1e-14));
    CHECK(gv[i] == doctest::Approx(want_g[i]).epsilon(1e-14));
  }
  CHECK_THROWS_WITH(softplus(x, 0.0), doctest::Contains("softplus"));
}

// ---- masks and comparisons ----------------------------------------------------------------------

TEST_CASE("comparisons: bool, broadcasting, scalars; mean(to_dtype(eq)) is an accuracy") {
  Tensor a = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});  // float32
  Tensor b = Tensor::from_vector({2, 2, 2}, {3});
  CHECK(values(eq(a, b)) == std::vector<double>{0, 1, 0, 0, 0, 0});
  CHECK(values(ne(a, b)) == std::vector<double>{1, 0, 1, 1, 1, 1});
  CHECK(values(lt(a, b)) == std::vector<double>{1, 0, 0, 0, 0, 0});
  CHECK(values(le(a, b)) == std::vector<double>{1, 1, 0, 0, 0, 0});
  CHECK(values(gt(a, b)) == std::vector<double>{0, 0, 1, 1, 1, 1});
  CHECK(values(ge(a, b)) == std::vector<double>{0, 1, 1, 1, 1, 1});
  CHECK(eq(a, b).dtype() == DType::b8);
  CHECK(values(ge(a, 4.0)) == std::vector<double>{0, 0, 0, 1, 1, 1});
  CHECK(values(lt(a, 2.5)) == std::vector<double>{1, 1, 0, 0, 0, 0});
  CHECK(eq(a.to(DType::f64), 3.0).dtype() == DType::b8);
  // integer ids: bool; the accuracy converts first, as torch's (pred == y).float().mean()
  Tensor pred = Tensor::from_ids({1, 0, 3, 3}, {4}), target = Tensor::from_ids({1, 2, 3, 0}, {4});
  Tensor hit = eq(pred, target);
  CHECK(hit.dtype() == DType::b8);
  CHECK(mean(to_dtype(hit, DType::f32)).item() == 0.5);
  CHECK(sum(hit).item<int64_t>() == 2);
  CHECK_THROWS_WITH(mean(hit), doctest::Contains("mean"));
  const std::vector<double> not_three = values(ne(pred, 3.0));
  REQUIRE(not_three.size() == 4);
  CHECK((not_three[0] == 1 && not_three[1] == 1 && not_three[2] == 0 && not_three[3] == 0));
  // NaN compares unequal to everything, itself included
  Tensor nan = Tensor::from_vector({NAN}, {1});
  CHECK(values(eq(nan, nan)) == std::vector<double>{0});
  CHECK(values(ne(nan, nan)) == std::vector<double>{1});
  // never recorded
  Tensor x = random_tensor({3}, 1);
  CHECK_FALSE(lt(x, 0.0).requires_grad());
  CHECK_THROWS_WITH(eq(a, Tensor::from_vector({1, 2}, {2})), doctest::Contains("eq"));
  // mixed dtypes promote as torch's: float32 with float64 compares in float64
  CHECK(values(lt(a, a.to(DType::f64))) == std::vector<double>{0, 0, 0, 0, 0, 0});
}

TEST_CASE("where and masked_fill: bool masks, broadcasting, gradients; other dtypes refused") {
  Tensor a = f64({1, 2, 3}), b = f64({10, 20, 30});
  Tensor cond = Tensor::from_vector(std::vector<bool>{true, false, true}, {3});
  CHECK(values(where(cond, a, b)) == std::vector<double>{1, 20, 3});
  CHECK(values(masked_fill(a, cond, -1.0)) == std::vector<double>{-1, 2, -1});
  for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8}) {
    CAPTURE(dtype_name(dtype));
    Tensor other = Tensor::from_vector({1, 0, 1}, {3}, dtype);
    CHECK_THROWS_WITH(where(other, a, b), doctest::Contains("where: condition must be bool"));
    CHECK_THROWS_WITH(masked_fill(a, other, -1.0),
                      doctest::Contains("masked_fill: mask must be bool"));
  }
  // cond [2, 1], a [3], b [1] -> [2, 3]; gradients summed back over the broadcast axes
  Tensor cond2 = Tensor::from_ids({1, 0}, {2, 1}, DType::b8);
  Tensor c = f64({5});
  Tensor y = where(cond2, a, c);
  CHECK(y.shape() == Shape{2, 3});
  CHECK(values(y) == std::vector<double>{1, 2, 3, 5, 5, 5});
  backward_weighted(y, {1, 2, 3, 4, 5, 6});
  CHECK(values(a.grad()) == std::vector<double>{1, 2, 3});
  CHECK(values(c.grad()) == std::vector<double>{15});
  // masked_fill: mask [2, 1] over x [2, 3]; filled elements get no gradient
  Tensor x = random_tensor({2, 3}, 4);
  Tensor m = masked_fill(x, Tensor::from_ids({0, 1}, {2, 1}, DType::b8), 7.0);
  CHECK(values(m)[3] == 7.0);
  backward(m, Tensor::ones({2, 3}, DType::f64));
  CHECK(values(x.grad()) == std::vector<double>{1, 1, 1, 0, 0, 0});
  CHECK_THROWS_WITH(masked_fill(x, Tensor::from_ids({1, 0, 1, 0}, {4}, DType::b8), 0.0),
                    doctest::Contains("masked_fill"));
  CHECK_THROWS_WITH(where(cond2, a, f64({1, 2})), doctest::Contains("where"));
}

// ---- operators and errors -----------------------------------------------------------------------

TEST_CASE("operators: the same values and gradients as the named ops they stand for") {
  Tensor a = random_tensor({2, 3}, 1, 0.5, 2), b = random_tensor({3}, 2, 0.5, 2);
  auto same = [](const Tensor& x, const Tensor& y) { return values(x) == values(y); };
  CHECK(same(a + b, add(a, b)));
  CHECK(same(a - b, sub(a, b)));
  CHECK(same(a * b, mul(a, b)));
  CHECK(same(a / b, div(a, b)));
  CHECK(same(-a, neg(a)));
  CHECK(same(a + 1.5, add_scalar(a, 1.5)));
  CHECK(same(1.5 + a, add_scalar(a, 1.5)));
  CHECK(same(a * 3.0, scale(a, 3.0)));
  CHECK(same(3.0 * a, scale(a, 3.0)));
  std::vector<double> av = values(a), q = values(a / 3.0), r = values(3.0 - a), s = values(a - 0.1);
  for (size_t i = 0; i < av.size(); ++i) {
    CHECK(q[i] == av[i] / 3.0);  // divides (not a multiply by 1/3)
    CHECK(r[i] == 3.0 - av[i]);
    CHECK(s[i] == av[i] - 0.1);
  }
  // s / t in float32 as torch: 2 / [3, 7, 0.1] = [0.6666666865348816, 0.2857142984867096, 20]
  Tensor t = Tensor::from_vector({3, 7, 0.1}, {3});
  CHECK(values(2.0 / t) == std::vector<double>{0.6666666865348816, 0.2857142984867096, 20.0});
  // gradients through a chain of operators
  Tensor x = f64({0.5, 2});
  backward((x * x - 1.0) / 2.0 + 1.0 / x, Tensor::ones({2}, DType::f64));
  CHECK(values(x.grad())[0] == doctest::Approx(0.5 - 4.0));
  CHECK(values(x.grad())[1] == doctest::Approx(2.0 - 0.25));
}

TEST_CASE("pointwise ops: errors name the op and the tensor") {
  Tensor ids = Tensor::from_ids({1, 2}, {2});
  CHECK_THROWS_WITH(relu(ids), doctest::Contains("relu"));
  CHECK_THROWS_WITH(sigmoid(Tensor()), doctest::Contains("sigmoid"));
  CHECK_THROWS_WITH(clamp(random_tensor({2}, 1), std::nullopt, std::nullopt),
                    doctest::Contains("clamp"));
  Tensor a = random_tensor({2, 3}, 1), b = random_tensor({4}, 2);
  CHECK_THROWS_WITH(maximum(a, b), doctest::Contains("maximum"));
  CHECK_THROWS_WITH(pow(a, b), doctest::Contains("pow"));
  CHECK_THROWS_WITH(minimum(a, a.to(DType::f32)), doctest::Contains("minimum"));
  CHECK_THROWS_WITH(where(eq(ids, 1.0), a, a.to(DType::f32)), doctest::Contains("where"));
}
