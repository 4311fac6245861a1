// Tests of the losses with a reduction (autograd/ops_loss.cpp, autograd/ops_loss_regression.cpp):
// mse_loss, l1_loss, binary_cross_entropy_with_logits (with and without pos_weight), nll_loss and
// cross_entropy with label smoothing and each reduction, each against values from PyTorch; the
// smoothed cross-entropy kernels against their references and at 1 and 2 threads; fused against
// plain with smoothing; int64 and int32 indices (the same bits; argmax's output fed straight in);
// errors.
// Gradients by finite differences: the loss rows of the gradient-check table.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/factory.h"
#include "tensor/kernels_loss.h"
#include "tensor/threads.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

namespace {

std::vector<double> pattern(int64_t n, int mul, int mod, int shift, double div) {
  std::vector<double> v(n);
  for (int64_t k = 0; k < n; ++k) v[k] = static_cast<double>((k * mul) % mod - shift) / div;
  return v;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(got[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i])));
  }
}

// The goldens' inputs: X, Y [3, 4] and a target in [0, 1], exact dyadic rationals.
Tensor X(DType d) { return Tensor::from_vector(pattern(12, 5, 13, 6, 4.0), {3, 4}, d); }
Tensor Y(DType d) { return Tensor::from_vector(pattern(12, 7, 11, 5, 8.0), {3, 4}, d); }
Tensor YB(DType d) {
  std::vector<double> v;
  for (int k = 0; k < 12; ++k) v.push_back(((k * 3) % 5) / 4.0);
  return Tensor::from_vector(v, {3, 4}, d);
}

struct Golden {
  double mean;
  std::vector<double> dx, dy;  // gradients of the mean
  double sum;
  std::vector<double> none;
};

// Checks loss(x, y, reduction) against g at float64 (tight) and float32 (loose).
template <class F>
void check_golden(F loss, Tensor (*target)(DType), const Golden& g) {
  for (DType d : {DType::f64, DType::f32}) {
    CAPTURE(dtype_name(d));
    const double tol = d == DType::f64 ? 1e-12 : 2e-6;
    Tensor x = X(d).set_requires_grad(true), y = target(d).set_requires_grad(true);
    Tensor m = loss(x, y, Reduction::mean);
    CHECK(m.dim() == 0);
    check_close({m.item()}, {g.mean}, tol);
    backward(m);
    check_close(x.grad().to_vector(), g.dx, tol);
    check_close(y.grad().to_vector(), g.dy, tol);
    check_close({loss(X(d), target(d), Reduction::sum).item()}, {g.sum}, tol);
    Tensor none = loss(X(d), target(d), Reduction::none);
    CHECK(none.shape() == Shape{3, 4});
    check_close(none.to_vector(), g.none, tol);
  }
}

}  // namespace

// ---- golden values from PyTorch ---------------------------------------------------------------
// Generated offline with torch 1.13 in float64: x = X, y = Y (or YB) as above with
// requires_grad, l = F.<loss>(x, y, reduction="mean"); l.backward() gives dx, dy; then the "sum"
// value and the "none" values. pos_weight = [0.5, 1, 2, 3]. Numbers printed with repr().

TEST_CASE("mse_loss matches torch (mean with both gradients, sum, none)") {
  check_golden([](const Tensor& a, const Tensor& b, Reduction r) { return mse_loss(a, b, r); }, Y,
               {1.0768229166666667,
                {-0.14583333333333331, -0.08333333333333333, 0.20833333333333331,
                 -0.2708333333333333, 0.020833333333333332, 0.3125, -0.16666666666666666, 0.125,
                 -0.125, -0.0625, 0.22916666666666666, -0.020833333333333332},
                {0.14583333333333331, 0.08333333333333333, -0.20833333333333331, 0.2708333333333333,
                 -0.020833333333333332, -0.3125, 0.16666666666666666, -0.125, 0.125, 0.0625,
                 -0.22916666666666666, 0.020833333333333332},
                12.921875,
                {0.765625, 0.25, 1.5625, 2.640625, 0.015625, 3.515625, 1.0, 0.5625, 0.5625,
                 0.140625, 1.890625, 0.015625}});
}

TEST_CASE("l1_loss matches torch (mean with both gradients, sum, none)") {
  const double s = 0.08333333333333333;
  check_golden([](const Tensor& a, const Tensor& b, Reduction r) { return l1_loss(a, b, r); }, Y,
               {0.8854166666666666,
                {-s, -s, s, -s, s, s, -s, s, -s, -s, s, -s},
                {s, s, -s, s, -s, -s, s, -s, s, s, -s, s},
                10.625,
                {0.875, 0.5, 1.25, 1.625, 0.125, 1.875, 1.0, 0.75, 0.75, 0.375, 1.375, 0.125}});
}

TEST_CASE("binary_cross_entropy_with_logits matches torch (mean with both gradients, sum, none)") {
  check_golden(
      [](const Tensor& a, const Tensor& b, Reduction r) {
        return binary_cross_entropy_with_logits(a, b, r);
      },
      YB,
      {1.0157127592016864,
       {0.015202126983863029, -0.02601470840714984, 0.040088214885833744, -0.06092154821916707,
        0.005181375073816506, 0.0681312063494703, -0.03103827760015455, 0.03576489159794941,
        -0.06477498843122427, 0.0, 0.06477498843122426, -0.03576489159794941},
       {0.125, 0.020833333333333332, -0.08333333333333333, 0.08333333333333333,
        -0.020833333333333332, -0.125, 0.041666666666666664, -0.0625, 0.10416666666666667, -0.0,
        -0.10416666666666667, 0.0625},
       12.188553110420235,
       {0.20141327798275246, 0.7634394198788437, 1.0632616875182228, 1.3132616875182228,
        0.7009394198788437, 1.7014132779827524, 0.8490769841801067, 0.9493710061149,
        1.501929081345373, 0.6931471805599453, 1.501929081345373, 0.9493710061149}});
}

TEST_CASE("binary_cross_entropy_with_logits with pos_weight matches torch") {
  check_golden(
      [](const Tensor& a, const Tensor& b, Reduction r) {
        return binary_cross_entropy_with_logits(
            a, b, r, Tensor::from_vector({0.5, 1, 2, 3}, {4}, a.dtype()));
      },
      YB,
      {1.3856451885048935,
       {0.015202126983863029, -0.02601470840714984, 0.034485268607292174, -0.18276464465750122,
        0.014302697972029044, 0.0681312063494703, -0.06994198580027046, 0.022397337396924122,
        -0.032387494215612135, 0.0, 0.06477498843122426, -0.12066222899487354},
       {0.05410778008405198, 0.020833333333333332, -0.05722819270681476, 0.3022102812530371,
        -0.04483080916161849, -0.125, 0.12283974868167556, 0.0019785010191499994,
        0.04158628827727613, 0.0, -0.08317257655455226, 0.25197850101915},
       16.62774226205872,
       {0.20141327798275244, 0.7634394198788437, 1.1415771093977787, 3.9397850625546686,
        0.5569545649091328, 1.7014132779827524, 1.5796347223151868, 1.14280650917235,
        0.7509645406726865, 0.6931471805599453, 1.501929081345373, 2.6546775152872497}});
}

TEST_CASE("binary_cross_entropy_with_logits is finite for large logits (the stable form)") {
  Tensor x = Tensor::from_vector({-800, 800, 0}, {3}, DType::f32);
  Tensor y = Tensor::from_vector({1, 0, 0.5}, {3}, DType::f32);
  std::vector<double> l = binary_cross_entropy_with_logits(x, y, Reduction::none).to_vector();
  check_close(l, {800, 800, std::log(2.0)}, 1e-6);
}

// torch: F.nll_loss(x, t, reduction=...) with x = X, t = [1, -100, 3] (ignore_index −100); the
// "none" gradient is that of l.backward(torch.ones(3)).
TEST_CASE("nll_loss matches torch (mean, sum, none, ignored rows, int32 and int64 targets)") {
  const std::vector<double> zeros_but(12, 0.0);
  auto grad = [](double v) {
    std::vector<double> g(12, 0.0);
    g[1] = g[11] = v;  // rows 0 and 2 pick columns 1 and 3
    return g;
  };
  for (DType d : {DType::f64, DType::f32})
    for (DType it : {DType::i32, DType::i64}) {
      Tensor t = Tensor::from_vector({1, -100, 3}, {3}, it);
      Tensor x = X(d).set_requires_grad(true);
      Tensor m = nll_loss(x, t);
      check_close({m.item()}, {0.5}, 1e-7);
      backward(m);
      check_close(x.grad().to_vector(), grad(-0.5), 1e-7);
      x.zero_grad();
      Tensor s = nll_loss(x, t, Reduction::sum);
      check_close({s.item()}, {1.0}, 1e-7);
      backward(s);
      check_close(x.grad().to_vector(), grad(-1.0), 1e-7);
      x.zero_grad();
      Tensor n = nll_loss(x, t, Reduction::none);
      check_close(n.to_vector(), {0.25, 0.0, 0.75}, 1e-7);
      backward(n, Tensor::ones({3}, d));
      check_close(x.grad().to_vector(), grad(-1.0), 1e-7);
    }
  // ignore_index 2: F.nll_loss(X, [1, 2, 3], ignore_index=2) = 0.5, the same gradient as above
  Tensor x = X(DType::f64).set_requires_grad(true);
  Tensor m = nll_loss(x, Tensor::from_ids({1, 2, 3}, {3}), Reduction::mean, 2);
  check_close({m.item()}, {0.5}, 1e-12);
  backward(m);
  check_close(x.grad().to_vector(), grad(-0.5), 1e-12);
  // every row ignored: NaN (0/0) and a zero gradient, as torch
  Tensor z = X(DType::f64).set_requires_grad(true);
  Tensor all = nll_loss(z, Tensor::from_ids({-100, -100, -100}, {3}));
  CHECK(std::isnan(all.item()));
  backward(all);
  check_close(z.grad().to_vector(), zeros_but, 0);
}

// torch: F.cross_entropy(L, t, ignore_index=i, label_smoothing=ε) in float64, L = [4, 5] of
// ((k·5) % 17 − 8) / 4 (the logits of tests/test_kernels_loss.cpp's golden).
TEST_CASE("cross_entropy with label_smoothing matches torch, fused and plain") {
  struct Row {
    double eps;
    std::vector<int64_t> targets;
    int64_t ignore;
    double loss;
    std::vector<double> grad;
  };
  const std::vector<Row> rows = {
      {0.1,
       {3, -100, 0, 4},
       -100,
       0.900499730228086,
       {-0.00122989717887626,
        0.012309523426385994,
        0.05956674478407686,
        -0.07548934546089149,
        0.004842974429304902,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        -0.1274830433228696,
        0.002254360639152538,
        0.02447077816352418,
        0.10201369460974657,
        -0.0012557900895537257,
        0.03845369537664212,
        0.15081887122932475,
        0.0011740765755108853,
        0.02070021628993428,
        -0.21114685947141204}},
      {0.3,
       {3, 1, 0, 1},
       1,
       1.0708449157686728,
       {-0.021844845768314386,
        -0.0015357148604210058,
        0.06935011717611529,
        -0.033234018191337256,
        -0.012735538356042644,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        -0.11122456498430433,
        -0.016618459041271186,
        0.01670616724528629,
        0.13302054191461993,
        -0.02188368513433058,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0}},
  };
  for (const Row& r : rows)
    for (bool plain : {false, true})
      for (DType d : {DType::f64, DType::f32}) {
        CAPTURE(r.eps);
        CAPTURE(plain);
        CAPTURE(dtype_name(d));
        const double tol = d == DType::f64 ? 1e-12 : 2e-6;
        Tensor logits =
            Tensor::from_vector(pattern(20, 5, 17, 8, 4.0), {4, 5}, d).set_requires_grad(true);
        Tensor t = Tensor::from_ids(r.targets, {4});
        Tensor loss = plain ? plain_cross_entropy(logits, t, Reduction::mean, r.ignore, r.eps)
                            : cross_entropy(logits, t, Reduction::mean, r.ignore, r.eps);
        check_close({loss.item()}, {r.loss}, tol);
        backward(loss);
        check_close(logits.grad().to_vector(), r.grad, tol);
      }
}

// torch 1.13: F.cross_entropy(L, t, ignore_index=i, label_smoothing=ε, reduction=r) in float64
// with L as above; the gradient of the loss for sum, of (loss · [0.5, −1, 2, 1.5]).sum() for none.
TEST_CASE("cross_entropy reduction sum and none match torch, fused and plain, int64 and int32") {
  struct Row {
    Reduction reduction;
    std::vector<int64_t> targets;
    int64_t ignore;
    double eps;
    std::vector<double> loss, grad;
  };
  const std::vector<Row> rows = {
      {Reduction::sum,
       {3, -100, 0, 4},
       -100,
       0.0,
       {2.2364991906842584},
       {0.016310308463371222,
        0.056928570279157986,
        0.19870023435223058,
        -0.3064680363826745,
        0.03452892328791471,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        -0.46244912996860876,
        0.02676308191745762,
        0.09341233449057255,
        0.3260410838292398,
        0.016232629731338828,
        0.1353610861299264,
        0.4724566136879743,
        0.023522229726532663,
        0.08210064886980285,
        -0.7134405784142361}},
      {Reduction::none,
       {3, -100, 0, 4},
       -100,
       0.0,
       {0.3659579499976301, 0.0, 0.6207318815397156, 1.2498093591469126},
       {0.008155154231685611,
        0.028464285139578993,
        0.09935011717611529,
        -0.15323401819133725,
        0.017264461643957354,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        -0.9248982599372175,
        0.05352616383491524,
        0.1868246689811451,
        0.6520821676584796,
        0.032465259462677656,
        0.2030416291948896,
        0.7086849205319614,
        0.035283344589798996,
        0.12315097330470429,
        -1.0701608676213543}},
      {Reduction::sum,
       {3, 1, 0, 1},
       1,
       0.1,
       {1.3716898315373458},
       {-0.003689691536628778,
        0.03692857027915798,
        0.1787002343522306,
        -0.22646803638267454,
        0.014528923287914709,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        -0.3824491299686088,
        0.006763081917457621,
        0.07341233449057255,
        0.3060410838292398,
        -0.0037673702686611722,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0}},
      {Reduction::none,
       {3, 1, 0, 1},
       1,
       0.1,
       {0.5759579499976302, 0.0, 0.7957318815397155, 0.0},
       {-0.001844845768314389,
        0.01846428513957899,
        0.0893501171761153,
        -0.11323401819133727,
        0.007264461643957354,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        -0.7648982599372176,
        0.013526163834915242,
        0.1468246689811451,
        0.6120821676584796,
        -0.0075347405373223444,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0}},
  };
  const Tensor w = Tensor::from_vector({0.5, -1.0, 2.0, 1.5}, {4}, DType::f64);
  for (const Row& r : rows)
    for (bool plain : {false, true})
      for (DType index_dtype : {DType::i64, DType::i32}) {
        CAPTURE(r.eps);
        CAPTURE(plain);
        CAPTURE(dtype_name(index_dtype));
        Tensor logits = Tensor::from_vector(pattern(20, 5, 17, 8, 4.0), {4, 5}, DType::f64)
                            .set_requires_grad(true);
        Tensor t = Tensor::from_ids(r.targets, {4}, index_dtype);
        Tensor loss = plain ? plain_cross_entropy(logits, t, r.reduction, r.ignore, r.eps)
                            : cross_entropy(logits, t, r.reduction, r.ignore, r.eps);
        check_close(loss.to_vector(), r.loss, 1e-12);
        backward(r.reduction == Reduction::none ? sum(mul(loss, w)) : loss);
        check_close(logits.grad().to_vector(), r.grad, 1e-12);
      }
}

TEST_CASE("cross_entropy: mean with ignore_index divides by the kept rows; reductions agree") {
  Tensor x = random_tensor({6, 5}, 71, -2, 2);
  Tensor t = Tensor::from_ids({4, -100, 0, 2, -100, 1}, {6});
  const double s = cross_entropy(x, t, Reduction::sum).item();
  CHECK(cross_entropy(x, t).item() == doctest::Approx(s / 4).epsilon(1e-14));
  const std::vector<double> rows = cross_entropy(x, t, Reduction::none).to_vector();
  REQUIRE(rows.size() == 6);
  CHECK(rows[1] == 0.0);
  CHECK(rows[4] == 0.0);
  double total = 0;
  for (double v : rows) total += v;
  CHECK(total == doctest::Approx(s).epsilon(1e-14));
  // every target ignored: mean is NaN (0/0) with a zero gradient, sum is 0, none is zeros
  Tensor all = Tensor::from_ids({-100, -100, -100, -100, -100, -100}, {6});
  CHECK(std::isnan(cross_entropy(x, all).item()));
  CHECK(cross_entropy(x, all, Reduction::sum).item() == 0.0);
}

TEST_CASE(
    "cross_entropy, linear_cross_entropy, nll_loss and embedding: int32 and int64 indices "
    "give the same bits") {
  Tensor x = random_tensor({9, 7}, 72, -3, 3, false).to(DType::f32);
  Tensor w = random_tensor({11, 7}, 73, -1, 1, false).to(DType::f32);
  const std::vector<int64_t> ids = {3, -100, 0, 10, 6, 6, -100, 1, 2};
  const std::vector<int64_t> ids_kept = {3, 5, 0, 10, 6, 6, 9, 1, 2};
  auto run = [&](DType index_dtype, int which) {
    Tensor a = dg::raw::clone(x).set_requires_grad(true),
           b = dg::raw::clone(w).set_requires_grad(true);
    Tensor t = Tensor::from_ids(which == 3 ? ids_kept : ids, {9}, index_dtype);
    Tensor loss = which == 0   ? cross_entropy(linear(a, b), t, Reduction::mean, -100, 0.1)
                  : which == 1 ? linear_cross_entropy(a, b, t)
                  : which == 2 ? nll_loss(log_softmax(linear(a, b)), t, Reduction::sum)
                               : sum(mul(embedding(b, t), a));
    backward(loss);
    std::vector<double> out = loss.to_vector(), ga = a.grad().to_vector(),
                        gb = b.grad().to_vector();
    out.insert(out.end(), ga.begin(), ga.end());
    out.insert(out.end(), gb.begin(), gb.end());
    return out;
  };
  for (int which = 0; which < 4; ++which) {
    CAPTURE(which);
    CHECK(run(DType::i64, which) == run(DType::i32, which));
  }
}

TEST_CASE("argmax feeds cross_entropy and embedding with no cast (int64 indices, as torch)") {
  Tensor logits = random_tensor({5, 6}, 74, -2, 2).set_requires_grad(true);
  Tensor predicted = argmax(logits, 1);  // int64 [5]
  CHECK(predicted.dtype() == DType::i64);
  Tensor table = random_tensor({6, 3}, 75).set_requires_grad(true);
  Tensor picked = embedding(table, predicted);  // [5, 3]
  CHECK(picked.shape() == Shape{5, 3});
  // the loss of predicting one's own argmax is the smallest cross-entropy over targets per row
  Tensor loss = add(cross_entropy(logits, predicted), sum(picked));
  backward(loss);
  CHECK(logits.grad().defined());
  CHECK(table.grad().defined());
  const std::vector<double> own =
      cross_entropy(detach(logits), predicted, Reduction::none).to_vector();
  for (int64_t c = 0; c < 6; ++c) {
    const std::vector<double> other =
        cross_entropy(detach(logits), full({5}, static_cast<double>(c), DType::i64),
                      Reduction::none)
            .to_vector();
    for (size_t n = 0; n < own.size(); ++n) CHECK(own[n] <= other[n]);
  }
  // gather and index_select take argmax's output too
  CHECK(gather(logits, 1, argmax(logits, 1, /*keepdim=*/true)).shape() == Shape{5, 1});
  CHECK(index_select(table, 0, predicted).to_vector() == picked.to_vector());
}

TEST_CASE("indices out of range name the op, the index and the range, for int64 beyond int32") {
  Tensor x = random_tensor({2, 3}, 76);
  const int64_t big = int64_t{1} << 33;  // would wrap to 0 as an int32
  Tensor ids = Tensor::from_ids({0, big}, {2});
  CHECK_THROWS_WITH(embedding(x, ids),
                    doctest::Contains("embedding: id 8589934592 at position 1 is out of range "
                                      "for vocabulary size 2"));
  CHECK_THROWS_WITH(cross_entropy(x, ids),
                    doctest::Contains("cross_entropy: target 8589934592 at row 1 is out of range "
                                      "for 3 classes"));
  CHECK_THROWS_WITH(linear_cross_entropy(x, x, ids),
                    doctest::Contains("linear_cross_entropy: target 8589934592 at row 1"));
  CHECK_THROWS_WITH(nll_loss(x, ids), doctest::Contains("nll_loss: target 8589934592 at row 1"));
  CHECK_THROWS_WITH(index_select(x, 1, ids),
                    doctest::Contains("index_select: index 8589934592 at position 1"));
  CHECK_THROWS_WITH(Tensor::from_ids({big}, {1}, DType::i32),
                    doctest::Contains("from_ids: id 8589934592 at position 0 does not fit int32"));
  // an ignore_index no int32 target can equal ignores nothing
  CHECK(
      cross_entropy(x, Tensor::from_ids({0, 1}, {2}, DType::i32), Reduction::sum, int64_t{1} << 40)
          .item() ==
      doctest::Approx(cross_entropy(x, Tensor::from_ids({0, 1}, {2}), Reduction::sum).item()));
}

TEST_CASE("cross_entropy with label_smoothing equals plain_cross_entropy (value, gradient)") {
  for (DType d : {DType::f64, DType::f32}) {
    CAPTURE(dtype_name(d));
    const int64_t N = 23, C = 41;
    const double tol = d == DType::f64 ? 1e-12 : 3e-6;
    std::vector<int32_t> t(N);
    for (int64_t n = 0; n < N; ++n) t[n] = n % 4 == 1 ? 7 : static_cast<int32_t>((n * 5) % C);
    auto logits = rand_vec<double>(N * C, 75, -5, 5);
    Tensor a = Tensor::from_vector(logits, {N, C}, d).set_requires_grad(true);
    Tensor b = Tensor::from_vector(logits, {N, C}, d).set_requires_grad(true);
    Tensor fused = cross_entropy(a, Tensor::from_ids(t, {N}), Reduction::mean, 7, 0.2);
    backward(fused);  // one graph on the tape at a time
    Tensor plain = plain_cross_entropy(b, Tensor::from_ids(t, {N}), Reduction::mean, 7, 0.2);
    backward(plain);
    check_close({fused.item()}, {plain.item()}, tol);
    check_close(a.grad().to_vector(), b.grad().to_vector(), tol);
  }
}

TEST_CASE("cross_entropy: label_smoothing 0 is the unsmoothed kernels' result, bit for bit") {
  const int64_t N = 37, C = 53;
  auto logits = rand_vec<float>(N * C, 71);
  std::vector<int32_t> targets(N);
  for (int64_t n = 0; n < N; ++n) targets[n] = n % 5 == 0 ? -100 : static_cast<int32_t>(n % C);
  std::vector<float> losses(N), lse(N);
  cross_entropy_forward<float>(losses.data(), lse.data(), logits.data(), targets.data(), N, C,
                               -100);
  double total = 0;
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) total += losses[n], count += targets[n] != -100;
  Tensor x = Tensor::from_vector(std::vector<double>(logits.begin(), logits.end()), {N, C})
                 .set_requires_grad(true);
  Tensor loss = cross_entropy(x, Tensor::from_ids(targets, {N}), Reduction::mean, -100, 0.0);
  CHECK(static_cast<float>(loss.item()) == static_cast<float>(total / count));
  backward(loss);
  std::vector<float> d(N * C, 0.0f);
  cross_entropy_backward<float>(d.data(), logits.data(), lse.data(), targets.data(),
                                static_cast<float>(1.0 / count), N, C, -100);
  CHECK(same_bits(x.grad().to_floats(), d));
}

TEST_CASE("cross_entropy: label_smoothing outside [0, 1] throws naming the op") {
  Tensor logits = X(DType::f32);
  Tensor t = Tensor::from_ids({0, 1, 2}, {3});
  CHECK_THROWS_WITH(cross_entropy(logits, t, Reduction::mean, -100, 1.5),
                    doctest::Contains("cross_entropy: label_smoothing must be in [0, 1], got 1.5"));
  CHECK_THROWS_WITH(plain_cross_entropy(logits, t, Reduction::mean, -100, -0.1),
                    doctest::Contains("plain_cross_entropy: label_smoothing"));
}

// ---- the smoothed kernels: fast against reference, and thread-count independence -------------

TEST_CASE_TEMPLATE("cross_entropy_smoothed kernels: fast matches reference", T, float, double) {
  const int64_t N = 29, C = 67;
  const double tol = sizeof(T) == 4 ? 2e-5 : 1e-12;
  auto logits = rand_vec<T>(N * C, 72, -4, 4);
  std::vector<int32_t> targets(N);
  for (int64_t n = 0; n < N; ++n) targets[n] = n % 7 == 3 ? -1 : static_cast<int32_t>((n * 11) % C);
  std::vector<T> l(N), lse(N), l_ref(N), lse_ref(N);
  cross_entropy_smoothed_forward<T>(l.data(), lse.data(), logits.data(), targets.data(), N, C, -1,
                                    0.15);
  ref_cross_entropy_smoothed_forward<T>(l_ref.data(), lse_ref.data(), logits.data(), targets.data(),
                                        N, C, -1, 0.15);
  CHECK(rel_diff(l, l_ref) < tol);
  CHECK(rel_diff(lse, lse_ref) < tol);
  auto d = rand_vec<T>(N * C, 73), d_ref = d;
  cross_entropy_smoothed_backward<T>(d.data(), logits.data(), lse.data(), targets.data(), T(0.5), N,
                                     C, -1, 0.15);
  ref_cross_entropy_smoothed_backward<T>(d_ref.data(), logits.data(), lse.data(), targets.data(),
                                         T(0.5), N, C, -1, 0.15);
  CHECK(rel_diff(d, d_ref) < tol);
}

TEST_CASE("cross_entropy_smoothed kernels: float32 results are bit-identical at 1 and 2 threads") {
  ThreadsGuard guard;
  const int64_t N = 600, C = 257;  // above kParallelGrain: the parallel branches run
  auto logits = rand_vec<float>(N * C, 74);
  std::vector<int32_t> targets(N);
  for (int64_t n = 0; n < N; ++n) targets[n] = static_cast<int32_t>((n * 13) % C);
  auto run = [&](int threads) {
    set_threads(threads);
    std::vector<float> l(N), lse(N), d(N * C, 0.25f);
    cross_entropy_smoothed_forward<float>(l.data(), lse.data(), logits.data(), targets.data(), N, C,
                                          -100, 0.1);
    cross_entropy_smoothed_backward<float>(d.data(), logits.data(), lse.data(), targets.data(),
                                           0.01f, N, C, -100, 0.1);
    return std::vector<std::vector<float>>{l, lse, d};
  };
  check_same_bits_at_1_and_2_threads(run);
}

// ---- errors -------------------------------------------------------------------------------------

TEST_CASE("losses: errors name the op and the offending tensor or target") {
  Tensor x = X(DType::f32);
  CHECK_THROWS_WITH(mse_loss(x, Tensor::zeros({3, 5})),
                    doctest::Contains("mse_loss: expected a target of the input's shape [3, 4]"));
  CHECK_THROWS_WITH(l1_loss(x, Y(DType::f64)), doctest::Contains("l1_loss: dtypes differ"));
  CHECK_THROWS_WITH(
      binary_cross_entropy_with_logits(x, YB(DType::f32), Reduction::mean, Tensor::ones({3})),
      doctest::Contains("binary_cross_entropy_with_logits: expected a pos_weight of shape [4]"));
  CHECK_THROWS_WITH(binary_cross_entropy_with_logits(x, YB(DType::f32), Reduction::mean,
                                                     Tensor::ones({4}).set_requires_grad(true)),
                    doctest::Contains("does not require grad"));
  CHECK_THROWS_WITH(nll_loss(x, Tensor::from_ids({0, 4, 1}, {3})),
                    doctest::Contains("nll_loss: target 4 at row 1 is out of range for 4 classes"));
  CHECK_THROWS_WITH(nll_loss(x, Tensor::from_ids({0, 1}, {2})),
                    doctest::Contains("nll_loss: expected int64 or int32 targets of shape [3]"));
  // mean over no elements is NaN, as torch
  CHECK(std::isnan(mse_loss(Tensor::zeros({0}), Tensor::zeros({0})).item()));
}
