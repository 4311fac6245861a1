// Tests of the elementary ops (sin, cos, log1p, expm1, square, rsqrt, erf, sign, floor, ceil,
// round), the views squeeze/unsqueeze/flatten, cumsum (fast kernel against its reference, float32
// bit identity at 1 and 2 threads) and embedding's padding_idx (the op and nn::Embedding): forward
// values and the gradients of a random-weighted loss against PyTorch 1.13, and the errors.
// Finite differences and second derivatives: the rows of the gradient-check table.
// The golden values come from tools/torch_goldens_elementary.py (offline; not run by the tests).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/layers.h"
#include "tensor/kernels_reduce.h"
#include "tensor/threads.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

namespace {

using Unary = Tensor (*)(const Tensor&);

// ((k·mul) mod mod − shift) / div for k = 0..n−1: the generator's inputs, rebuilt here.
std::vector<double> pattern(int64_t n, int mul, int mod, int shift, double div) {
  std::vector<double> v(n);
  for (int64_t k = 0; k < n; ++k) v[k] = static_cast<double>((k * mul) % mod - shift) / div;
  return v;
}
std::vector<double> weights(int64_t n) {
  std::vector<double> w = pattern(n, 3, 7, 3, 4.0);
  for (double& x : w) x += 0.1;
  return w;
}

// PyTorch's golden values (float64), printed by tools/torch_goldens_elementary.py.
const std::vector<double> k_sin_out = {
    -0.675463180551151,  -0.8414709848078965, 0.3894183423086505, 0.9738476308781951,
    -0.9738476308781951, -0.3894183423086505, 0.8414709848078965, 0.675463180551151,
    -0.9320390859672263, 0.19866933079506122, 0.9995736030415052, -0.9092974268256817};
const std::vector<double> k_sin_grad = {
    0.47930591510180953,  0.05403023058681398, 0.7829018449024523,   0.03408031420396306,
    -0.13632125681585225, -0.3684243976011541, 0.1891058070538489,   0.47930591510180953,
    0.036235775447667366, 0.8330565911650554,  0.004379928345193322, -0.24968810192828544};
const std::vector<double> k_cos_out = {
    -0.7373937155412454, 0.5403023058681398, 0.9210609940028851,    -0.2272020946930871,
    -0.2272020946930871, 0.9210609940028851, 0.5403023058681398,    -0.7373937155412454,
    0.3623577544766736,  0.9800665778412416, -0.029199522301288815, -0.4161468365471424};
const std::vector<double> k_cos_grad = {
    -0.4390510673582481, 0.08414709848078966,  -0.33100559096235294, 0.14607714463172927,
    0.5843085785269171,  -0.15576733692346023, -0.29451484468276373, 0.4390510673582481,
    0.09320390859672263, -0.16886893117580204, 0.14993604045622577,  0.545578456095409};
const std::vector<double> k_log1p_out = {
    0.11778303565638346, 0.6931471805599453, 1.0560526742493137, 1.3217558399823195,
    0.4054651081081644,  0.8649974374866045, 1.1786549963416462, 1.4170660197866443,
    0.6286086594223741,  1.0116009116784799, 1.2878542883066382, 0.31845373111853464};
const std::vector<double> k_log1p_grad = {-0.5777777777777778,   0.05,
                                          0.2956521739130435,    -0.04,
                                          0.39999999999999997,   -0.16842105263157894,
                                          0.10769230769230768,   -0.1575757575757576,
                                          0.05333333333333334,   0.3090909090909091,
                                          -0.041379310344827586, 0.43636363636363634};
const std::vector<double> k_expm1_out = {
    -0.9092820467105875, -0.6321205588285577,  0.49182469764127035, 5.0496474644129465,
    -0.8347011117784134, -0.32967995396436073, 1.7182818284590453,  10.023176380641601,
    -0.6988057880877979, 0.22140275816016985,  3.9530324243951154,  -0.8646647167633873};
const std::vector<double> k_expm1_grad = {
    -0.0589666696381181, 0.036787944117144235, 1.2680509929950798,  -0.9074471196619419,
    0.09917933293295193, -0.26812801841425576, 0.9513986399606659,  -7.165064647417041,
    0.03011942119122021, 1.0381923444361443,   -0.7429548636592672, 0.08120116994196762};
const std::vector<double> k_square_out = {5.76,
                                          1.0,
                                          0.16000000000000003,
                                          3.24,
                                          3.24,
                                          0.16000000000000003,
                                          1.0,
                                          5.76,
                                          1.44,
                                          0.04000000000000001,
                                          2.5600000000000005,
                                          4.0};
const std::vector<double> k_square_grad = {3.12, -0.2,  0.68,  -0.54, -2.16, 0.32000000000000006,
                                           0.7,  -3.12, -0.24, 0.34,  -0.48, -2.4};
const std::vector<double> k_rsqrt_out = {2.82842712474619,   1.0,
                                         0.7302967433402214, 0.6030226891555273,
                                         1.414213562373095,  0.8528028654224417,
                                         0.6666666666666666, 0.565685424949238,
                                         1.0690449676496976, 0.7559289460184544,
                                         0.6172133998483676, 1.6329931618554523};
const std::vector<double> k_rsqrt_grad = {7.353910524340093,     -0.05,
                                          -0.16553392849045015,  0.01644607334060529,
                                          -0.8485281374238568,   0.12404405315235514,
                                          -0.05185185185185184,  0.05883128419472076,
                                          -0.061088283865697014, -0.18358274403305316,
                                          0.01763466856709622,   -1.3063945294843622};
const std::vector<double> k_erf_out = {
    -0.999311486103355,  -0.8427007929497149,  0.42839235504666845, 0.9890905016357308,
    -0.9890905016357308, -0.42839235504666845, 0.8427007929497149,  0.999311486103355,
    -0.9103139782296354, 0.22270258921047847,  0.976348383344644,   -0.9953222650189527};
const std::vector<double> k_erf_grad = {
    -0.002311171642570536, 0.041510749742059476, 0.8173101040134116,    -0.006628758499801658,
    0.02651503399920663,   -0.3846165195357232,  0.14528762409720813,   -0.002311171642570536,
    0.026734434700353915,  0.9215145690391335,   -0.013084358795091797, 0.012400191212455232};
const std::vector<double> k_sign_out = {-1.0, -1.0, 1.0,  1.0, -1.0, -1.0,
                                        1.0,  1.0,  -1.0, 1.0, 1.0,  -1.0};
const std::vector<double> k_sign_grad = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                                         0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
const std::vector<double> k_floor_out = {-3.0, -1.0, 2.0,  -2.0, 0.0, 3.0,
                                         -1.0, 1.0,  -3.0, 0.0,  2.0, -2.0};
const std::vector<double> k_floor_grad = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                                          0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
const std::vector<double> k_ceil_out = {-3.0, -0.0, 2.0,  -2.0, 1.0, 3.0,
                                        -1.0, 2.0,  -2.0, 0.0,  3.0, -1.0};
const std::vector<double> k_ceil_grad = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                                         0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
const std::vector<double> k_round_out = {-3.0, -0.0, 2.0,  -2.0, 0.0, 3.0,
                                         -1.0, 2.0,  -2.0, 0.0,  2.0, -2.0};
const std::vector<double> k_round_grad = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                                          0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
const std::vector<double> k_cumsum0_out = {-1.25, 0.0,  1.25, -0.25, -0.25, -0.5,
                                           2.0,   -1.0, 0.25, -1.5,  2.25,  -2.25};
const std::vector<double> k_cumsum0_grad = {0.04999999999999993,
                                            0.5499999999999999,
                                            1.05,
                                            -0.20000000000000004,
                                            0.7,
                                            0.44999999999999996,
                                            0.19999999999999998,
                                            -0.050000000000000044,
                                            0.1,
                                            0.85,
                                            -0.15,
                                            0.6};
const std::vector<double> k_cumsum1_out = {-1.25, -1.25, 0.0, -0.25, 1.0,   0.5,
                                           1.25,  0.5,   0.5, -0.5,  -0.25, -1.5};
const std::vector<double> k_cumsum1_grad = {0.1499999999999999,
                                            0.7999999999999999,
                                            0.7,
                                            -0.15,
                                            -0.10000000000000009,
                                            -0.7000000000000001,
                                            -0.30000000000000004,
                                            -0.65,
                                            1.4,
                                            1.2999999999999998,
                                            0.44999999999999996,
                                            0.6};
const std::vector<double> k_cumsum_t_out = {-1.25, -0.25, 0.25, 0.0,   -0.5, -1.5,
                                            1.25,  2.0,   2.25, -0.25, -1.0, -2.25};
const std::vector<double> k_cumsum_t_grad = {0.29999999999999993,
                                             0.04999999999999996,
                                             -0.20000000000000007,
                                             1.2999999999999998,
                                             0.95,
                                             0.19999999999999996,
                                             -0.55,
                                             0.44999999999999996,
                                             0.85,
                                             -0.4,
                                             0.1,
                                             0.6};
const std::vector<double> k_embedding_out = {
    -0.3333333333333333, 1.0, -0.6666666666666666, -1.3333333333333333, 0.0,  1.3333333333333333,
    -0.3333333333333333, 1.0, -0.6666666666666666, -1.3333333333333333, 0.0,  1.3333333333333333,
    -0.3333333333333333, 1.0, -0.6666666666666666, 0.6666666666666666,  -1.0, 0.3333333333333333};
const std::vector<double> k_embedding_grad = {0.85,  -0.15, 0.6, 0.0,  0.0,  0.0,  0.1,  0.85,
                                              -0.15, -0.15, 0.6, -0.4, -0.4, 0.35, -0.65};
const std::vector<double> k_embedding_neg_grad = {
    0.85, -0.15, 0.6,  -0.30000000000000004, -0.55, 0.95, 0.1, 0.85, -0.15, 0.0, 0.0, 0.0,
    -0.4, 0.35,  -0.65};

void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-13).scale(1.0));
  }
}

// f(x) and the gradient of Σ w ⊙ f(x), against torch; float32 forward within 1e-6 relative.
void check_op(const char* name, const std::function<Tensor(const Tensor&)>& f,
              const std::vector<double>& x, const Shape& shape, const std::vector<double>& out,
              const std::vector<double>& grad) {
  CAPTURE(std::string(name));
  Tensor t = Tensor::from_vector(x, shape, DType::f64).set_requires_grad(true);
  Tensor y = f(t);
  check_close(y.to_vector(), out);
  backward(sum(mul(y, Tensor::from_vector(weights(y.numel()), y.shape(), DType::f64))));
  check_close(t.grad().to_vector(), grad);
  std::vector<double> y32 = f(Tensor::from_vector(x, shape, DType::f32)).to_vector();
  for (size_t i = 0; i < out.size(); ++i)
    CHECK(y32[i] == doctest::Approx(out[i]).epsilon(1e-6).scale(1.0));
}

}  // namespace

TEST_CASE("elementary ops match torch: values and gradients") {
  const auto symmetric = pattern(12, 7, 25, 12, 5.0);  // −2.4 .. 2.4, 0 included
  const auto positive = pattern(12, 7, 25, -1, 8.0);   // 0.125 .. 3.125
  const auto halves = pattern(12, 5, 13, 6, 2.0);      // −3 .. 3 by 0.5: round's ties
  const Shape s{3, 4};
  check_op(
      "sin", [](const Tensor& a) { return sin(a); }, symmetric, s, k_sin_out, k_sin_grad);
  check_op(
      "cos", [](const Tensor& a) { return cos(a); }, symmetric, s, k_cos_out, k_cos_grad);
  check_op(
      "log1p", [](const Tensor& a) { return log1p(a); }, positive, s, k_log1p_out, k_log1p_grad);
  check_op(
      "expm1", [](const Tensor& a) { return expm1(a); }, symmetric, s, k_expm1_out, k_expm1_grad);
  check_op(
      "square", [](const Tensor& a) { return square(a); }, symmetric, s, k_square_out,
      k_square_grad);
  check_op(
      "rsqrt", [](const Tensor& a) { return rsqrt(a); }, positive, s, k_rsqrt_out, k_rsqrt_grad);
  check_op(
      "erf", [](const Tensor& a) { return erf(a); }, symmetric, s, k_erf_out, k_erf_grad);
  check_op(
      "sign", [](const Tensor& a) { return sign(a); }, symmetric, s, k_sign_out, k_sign_grad);
  check_op(
      "floor", [](const Tensor& a) { return floor(a); }, halves, s, k_floor_out, k_floor_grad);
  check_op(
      "ceil", [](const Tensor& a) { return ceil(a); }, halves, s, k_ceil_out, k_ceil_grad);
  check_op(
      "round", [](const Tensor& a) { return round(a); }, halves, s, k_round_out, k_round_grad);
}

TEST_CASE("sign, floor, ceil and round: zero gradient even where g is NaN; sign(NaN) = 0") {
  Tensor x = Tensor::from_vector({0.5, -1.5, 2.5}, {3}, DType::f64).set_requires_grad(true);
  const Tensor nan_g = Tensor::full({3}, std::nan(""), DType::f64);
  for (Unary f : {Unary(dg::sign), Unary(dg::floor), Unary(dg::ceil), Unary(dg::round)}) {
    Tensor g = grad({f(x)}, {x}, {nan_g})[0];
    CHECK(g.to_vector() == std::vector<double>{0, 0, 0});
  }
  CHECK(sign(Tensor::full({1}, std::nan(""), DType::f32)).item() == 0.0);
  CHECK(round(Tensor::from_vector({0.5, 1.5, 2.5, -0.5, -2.5}, {5}, DType::f32)).to_vector() ==
        std::vector<double>{0, 2, 2, -0.0, -2});
}

TEST_CASE("cumsum matches torch on each axis and on a transposed view") {
  const auto grid = pattern(12, 5, 11, 5, 4.0);
  check_op(
      "cumsum/0", [](const Tensor& a) { return cumsum(a, 0); }, grid, {3, 4}, k_cumsum0_out,
      k_cumsum0_grad);
  check_op(
      "cumsum/-1", [](const Tensor& a) { return cumsum(a, -1); }, grid, {3, 4}, k_cumsum1_out,
      k_cumsum1_grad);
  check_op(
      "cumsum/transposed", [](const Tensor& a) { return cumsum(transpose(a, 0, 1), 1); }, grid,
      {3, 4}, k_cumsum_t_out, k_cumsum_t_grad);
  Tensor scalar = Tensor::full({}, 2.5, DType::f64);  // 0-d: axis 0 or −1, as torch
  CHECK(cumsum(scalar, -1).item() == 2.5);
}

TEST_CASE_TEMPLATE("cumsum kernels: fast matches reference bit for bit", T, float, double) {
  for (const auto& sizes : {std::array<int64_t, 3>{7, 13, 1}, {3, 9, 5}, {1, 40, 1}, {2, 1, 3}}) {
    const int64_t outer = sizes[0], C = sizes[1], inner = sizes[2];
    CAPTURE(outer);
    CAPTURE(inner);
    auto x = rand_vec<T>(outer * C * inner, 91);
    for (bool reverse : {false, true}) {
      std::vector<T> y(x.size()), y_ref(x.size());
      cumsum_forward<T>(y.data(), x.data(), outer, C, inner, reverse);
      ref_cumsum_forward<T>(y_ref.data(), x.data(), outer, C, inner, reverse);
      CHECK(same_bits(y, y_ref));
    }
  }
}

TEST_CASE("cumsum: float32 forward and backward are bit-identical at 1 and 2 threads") {
  ThreadsGuard guard;
  const int64_t outer = 160, C = 300, inner = 3;  // above kParallelGrain
  auto x = rand_vec<float>(outer * C * inner, 92);
  auto run = [&](int n) {
    set_threads(n);
    Tensor xt =
        Tensor::from_vector(std::vector<double>(x.begin(), x.end()), {outer, C, inner}, DType::f32)
            .set_requires_grad(true);
    Tensor y = cumsum(xt, 1);
    backward(sum(mul(y, y)));
    return std::make_pair(y.to_floats(), xt.grad().to_floats());
  };
  auto one = run(1), two = run(2);
  CHECK(same_bits(one.first, two.first));
  CHECK(same_bits(one.second, two.second));
}

TEST_CASE("squeeze, unsqueeze, flatten: torch's shapes, views of the same storage") {
  // torch 1.13 (printed by the generator):
  // squeeze: [2, 3] [2, 3, 1] [2, 1, 3, 1]
  // unsqueeze: [2, 1, 3, 1, 1] [1, 2, 1, 3, 1]
  // flatten: [120] [2, 12, 5] [2, 3, 20] [1]
  Tensor a = Tensor::zeros({2, 1, 3, 1}, DType::f64);
  CHECK(squeeze(a).shape() == Shape{2, 3});
  CHECK(squeeze(a, 1).shape() == Shape{2, 3, 1});
  CHECK(squeeze(a, 0).shape() == Shape{2, 1, 3, 1});
  CHECK(unsqueeze(a, -1).shape() == Shape{2, 1, 3, 1, 1});
  CHECK(unsqueeze(a, 0).shape() == Shape{1, 2, 1, 3, 1});
  Tensor b = Tensor::zeros({2, 3, 4, 5}, DType::f64);
  CHECK(flatten(b).shape() == Shape{120});
  CHECK(flatten(b, 1, 2).shape() == Shape{2, 12, 5});
  CHECK(flatten(b, -2).shape() == Shape{2, 3, 20});
  CHECK(flatten(Tensor::zeros({}, DType::f64)).shape() == Shape{1});
  CHECK(squeeze(a).storage() == a.storage());
  CHECK(unsqueeze(transpose(b, 0, 3), 2).storage() == b.storage());
  CHECK(flatten(transpose(b, 2, 3), 0, 1).storage() == b.storage());  // axes 0, 1 still merge
  CHECK(flatten(transpose(b, 0, 1), 0, 1).storage() != b.storage());  // a copy, as torch
  // values through a transposed view, and the gradient reshaped back
  Tensor x =
      Tensor::from_vector(pattern(6, 5, 7, 3, 2.0), {2, 3}, DType::f64).set_requires_grad(true);
  Tensor y = flatten(unsqueeze(transpose(x, 0, 1), 1));  // [3, 1, 2] -> [6]
  CHECK(y.to_vector() == transpose(x, 0, 1).contiguous().to_vector());
  backward(sum(mul(squeeze(unsqueeze(y, 0)), Tensor::from_vector(weights(6), {6}, DType::f64))));
  CHECK(x.grad().to_vector() == transpose(Tensor::from_vector(weights(6), {3, 2}, DType::f64), 0, 1)
                                    .contiguous()
                                    .to_vector());
}

TEST_CASE("embedding padding_idx matches torch: that row gets no gradient") {
  Tensor w =
      Tensor::from_vector(pattern(15, 4, 9, 4, 3.0), {5, 3}, DType::f64).set_requires_grad(true);
  const Tensor ids = Tensor::from_ids({1, 3, 1, 0, 4, 2}, {2, 3});
  const Tensor wt = Tensor::from_vector(weights(18), {2, 3, 3}, DType::f64);
  Tensor out = embedding(w, ids, 1);
  check_close(out.to_vector(), k_embedding_out);
  backward(sum(mul(out, wt)));
  check_close(w.grad().to_vector(), k_embedding_grad);
  w.zero_grad();
  backward(sum(mul(embedding(w, ids, -2), wt)));  // row 3
  check_close(w.grad().to_vector(), k_embedding_neg_grad);
  // under create_graph, the recorded backward keeps the row at zero too
  Tensor g = grad({sum(mul(embedding(w, ids, 1), wt))}, {w}, {}, false, true)[0];
  check_close(g.to_vector(), k_embedding_grad);
}

TEST_CASE("nn::Embedding padding_idx: the row starts at zero and stays there") {
  Embedding e(6, 4, DType::f64, -1);  // row 5
  REQUIRE(e.padding_idx == 5);
  for (int64_t d = 0; d < 4; ++d) CHECK(e.weight.to_vector()[20 + d] == 0.0);
  CHECK(e.weight.to_vector()[0] != 0.0);
  backward(sum(e.forward(Tensor::from_ids({5, 2, 5}, {3}))));
  const std::vector<double> gw = e.weight.grad().to_vector();
  for (int64_t d = 0; d < 4; ++d) {
    CHECK(gw[20 + d] == 0.0);
    CHECK(gw[8 + d] == 1.0);
  }
  CHECK_THROWS_WITH(Embedding(6, 4, DType::f64, 6), doctest::Contains("padding_idx 6"));
}

TEST_CASE("errors name the op, the argument and the shape") {
  const Tensor x = Tensor::zeros({2, 3}, DType::f64), ints = Tensor::from_ids({1, 2}, {2});
  for (Unary f : {Unary(dg::sin), Unary(dg::cos), Unary(dg::log1p), Unary(dg::expm1),
                  Unary(dg::square), Unary(dg::rsqrt), Unary(dg::erf), Unary(dg::sign),
                  Unary(dg::floor), Unary(dg::ceil), Unary(dg::round)}) {
    CHECK_THROWS_WITH(f(Tensor()), doctest::Contains("a defined tensor"));
    CHECK_THROWS_WITH(f(ints), doctest::Contains("float32 or float64"));
  }
  CHECK_THROWS_WITH(erf(ints), doctest::Contains("erf: "));
  CHECK_THROWS_WITH(cumsum(x, 2), doctest::Contains("cumsum: axis 2 is out of range [-2, 2)"));
  CHECK_THROWS_WITH(cumsum(x, 2), doctest::Contains("[2, 3]"));
  CHECK_THROWS_WITH(cumsum(ints, 0), doctest::Contains("cumsum"));
  CHECK_THROWS_WITH(cumsum(Tensor(), 0), doctest::Contains("cumsum"));
  CHECK_THROWS_WITH(squeeze(x, -3), doctest::Contains("squeeze: axis -3 is out of range [-2, 2)"));
  CHECK_THROWS_WITH(unsqueeze(x, 3),
                    doctest::Contains("unsqueeze: axis 3 is out of range [-3, 3)"));
  CHECK_THROWS_WITH(unsqueeze(Tensor(), 0), doctest::Contains("unsqueeze"));
  CHECK_THROWS_WITH(flatten(x, 1, 0),
                    doctest::Contains("flatten: start_dim 1 comes after end_dim 0"));
  CHECK_THROWS_WITH(flatten(x, 0, 5), doctest::Contains("flatten: axis 5"));
  CHECK_THROWS_WITH(embedding(Tensor::zeros({5, 3}, DType::f64), ints, 5),
                    doctest::Contains("embedding: padding_idx 5 is out of range [-5, 5)"));
}

TEST_CASE("in-place writes: each new op refuses only when a tensor its backward reads changed") {
  // h = 1·x: a non-leaf written in place after the op; `read` says whether the op's backward reads
  // it
  auto run = [](const char* op, bool read, const std::function<Tensor(const Tensor&)>& f) {
    CAPTURE(std::string(op));
    Tensor x = Tensor::from_vector({0.5, 1.0, 2.0, 1.5}, {4}, DType::f64).set_requires_grad(true);
    Tensor h = scale(x, 1.0);
    Tensor loss = sum(f(h));
    h.fill(0.75);
    if (read)
      CHECK_THROWS_WITH(backward(loss), doctest::Contains(("'" + std::string(op) + "'").c_str()));
    else
      CHECK_NOTHROW(backward(loss));
  };
  run("sin", true, [](const Tensor& h) { return sin(h); });
  run("erf", true, [](const Tensor& h) { return erf(h); });
  run("square", true, [](const Tensor& h) { return square(h); });
  run("expm1", false, [](const Tensor& h) { return expm1(h); });  // reads its output only
  run("rsqrt", false, [](const Tensor& h) { return rsqrt(h); });
  run("floor", false, [](const Tensor& h) { return floor(h); });  // reads nothing
  run("cumsum", false, [](const Tensor& h) { return cumsum(h, 0); });
  run("squeeze", false, [](const Tensor& h) { return squeeze(unsqueeze(h, 0)); });
  run("flatten", false, [](const Tensor& h) { return flatten(h); });
  Tensor x = Tensor::from_vector({0.5, 1.0}, {2}, DType::f64).set_requires_grad(true);
  Tensor y = rsqrt(x), loss = sum(y);
  y.fill(1.0);  // the output written in place: refused
  CHECK_THROWS_WITH(backward(loss), doctest::Contains("'rsqrt'"));
}
