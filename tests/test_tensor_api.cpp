// The tensor API a user builds with: factories (zeros … randint) against torch 1.13's values,
// the default generator and manual_seed, from_vector/from_data/from_span for every element
// type, item<T>(), printing against torch's own strings, and the shape arithmetic of
// tensor/shape.h (strides, contiguity, broadcasting). Every golden value below was
// produced offline by /usr/bin/python3 with torch 1.13 (the calls are quoted beside each).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "tensor/factory.h"
#include "tensor/print.h"
#include "tests/test_helpers.h"

using namespace dg;

namespace {
void check_floats(const Tensor& t, const std::vector<float>& expected, const char* what) {
  CAPTURE(what);
  REQUIRE(t.dtype() == DType::f32);
  REQUIRE(t.numel() == static_cast<int64_t>(expected.size()));
  const float* p = t.data<float>();
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(p[i] == expected[i]);  // the same float32 bits as torch
  }
}
void check_ints(const Tensor& t, const std::vector<int64_t>& expected, const char* what) {
  CAPTURE(what);
  REQUIRE(t.dtype() == DType::i64);
  REQUIRE(t.numel() == static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) CHECK(t.data<int64_t>()[i] == expected[i]);
}
}  // namespace

TEST_CASE("randn, rand, randint after manual_seed give torch's values, in torch's order") {
  // torch.manual_seed(0); randn(5); randn(3, 7); rand(4); randint(0, 10, (6,));
  // randint(-5, 2**40, (3,)); randn(1)  (the last one is the cached sine sample of randn(5))
  manual_seed(0);
  check_floats(randn({5}), {1.54099607f, -0.293428898f, -2.17878938f, 0.568431258f, -1.08452237f},
               "randn(5)");
  Tensor b = randn({3, 7});
  CHECK(b.shape() == Shape{3, 7});
  check_floats(
      b, {-0.0885314271f, 0.523883283f, -0.665871322f, 0.850377381f,  -1.35265374f, 0.0315927416f,
          -0.492676973f,  0.248414755f, 0.439695835f,  0.112411186f,  0.64079237f,  0.441156268f,
          -0.215863258f,  0.792443991f, -0.289667696f, 0.0525074862f, 0.522860467f, 2.30220532f,
          -1.46889389f,   -1.58668876f, 1.20322371f},
      "randn(3, 7)");
  check_floats(rand({4}), {0.481958807f, 0.81978035f, 0.997066557f, 0.698441088f}, "rand(4)");
  check_ints(randint(0, 10, {6}), {1, 1, 0, 3, 6, 6}, "randint(0, 10)");
  check_ints(randint(-5, int64_t{1} << 40, {3}), {649636590910, 1094231370857, 491523605339},
             "randint(-5, 2^40)");
  check_floats(randn({1}), {-1.39859545f}, "randn(1)");

  // torch.manual_seed(0); torch.randn(20): the 16-wide vector path.
  manual_seed(0);
  check_floats(randn({20}),
               {-1.12583983f,  -1.1523602f,  -0.250578582f, -0.433878809f, 0.598839462f,
                -1.55509508f,  -0.34136039f, 1.85300612f,   0.468096405f,  -0.157712445f,
                1.44366014f,   0.266049415f, 1.38936615f,   1.58633423f,   0.946298361f,
                -0.843676746f, 0.931826591f, 1.25900924f,   2.00498056f,   0.0537369028f},
               "randn(20)");
}

TEST_CASE("a generator of one's own leaves the default one alone; float64 and int32 draws") {
  manual_seed(11);
  Tensor expected = randn({40});
  manual_seed(11);
  TorchGenerator mine(0);
  Tensor other = randn({40}, DType::f32, &mine);
  CHECK(other.to_vector() != expected.to_vector());
  CHECK(randn({40}).to_vector() == expected.to_vector());  // the default stream did not move
  // float64: depthgrad's float64 stream, the float32 values to float rounding (rng.h).
  TorchGenerator g32(3), g64(3);
  std::vector<double> a = randn({33}, DType::f32, &g32).to_vector();
  std::vector<double> b = randn({33}, DType::f64, &g64).to_vector();
  CHECK(dg::test::rel_diff(a, b) < 1e-6);
  Tensor ids = randint(-3, 4, {100}, DType::i32, &g32);
  CHECK(ids.dtype() == DType::i32);
  for (double v : ids.to_vector()) CHECK((v >= -3 && v < 4));
  CHECK_THROWS_AS(randint(5, 5, {2}), std::invalid_argument);
  CHECK_THROWS_AS(randint(0, int64_t{1} << 40, {2}, DType::i32), std::invalid_argument);
  CHECK_THROWS_AS(randn({2}, DType::i64), std::invalid_argument);
}

TEST_CASE("zeros, ones, full, arange, linspace") {
  CHECK(zeros({2, 3}).to_vector() == std::vector<double>(6, 0.0));
  CHECK(ones({4}, DType::f64).dtype() == DType::f64);
  CHECK(full({2}, -2.5, DType::f64).to_vector() == std::vector<double>{-2.5, -2.5});
  // torch.arange(0, 1, 0.1): float32, values start + i·step in double then rounded.
  check_floats(arange(0, 1, 0.1),
               {0.f, 0.100000001f, 0.200000003f, 0.300000012f, 0.400000006f, 0.5f, 0.600000024f,
                0.699999988f, 0.800000012f, 0.899999976f},
               "arange(0, 1, 0.1)");
  check_ints(arange(2, 11, 3), {2, 5, 8}, "arange(2, 11, 3)");  // all integers: int64
  check_ints(arange(4), {0, 1, 2, 3}, "arange(4)");
  CHECK(arange(5, DType::f64).dtype() == DType::f64);
  CHECK(arange(3, 0, -1).to_vector() == std::vector<double>{3, 2, 1});
  CHECK_THROWS_AS(arange(0, 5, 0), std::invalid_argument);
  CHECK_THROWS_AS(arange(0, 5, -1), std::invalid_argument);
  // torch.linspace(-1, 2, 7) and torch.linspace(0, 1, 10)
  check_floats(linspace(-1, 2, 7), {-1.f, -0.5f, 0.f, 0.5f, 1.f, 1.5f, 2.f}, "linspace(-1, 2, 7)");
  check_floats(linspace(0, 1, 10),
               {0.f, 0.111111112f, 0.222222224f, 0.333333343f, 0.444444448f, 0.555555582f,
                0.666666687f, 0.777777791f, 0.888888896f, 1.f},
               "linspace(0, 1, 10)");
  CHECK(linspace(3, 9, 1).to_vector() == std::vector<double>{3});
  CHECK(linspace(3, 9, 0).numel() == 0);
  CHECK(linspace(0, 10, 5, DType::i64).to_vector() == std::vector<double>{0, 2, 5, 7, 10});
  CHECK_THROWS_AS(linspace(0, 1, -1), std::invalid_argument);
}

TEST_CASE("from_vector, from_data, from_span for every element type; item<T>()") {
  Tensor i64 = Tensor::from_vector(std::vector<int64_t>{1, -2, 3, 1LL << 40}, {2, 2});
  CHECK(i64.dtype() == DType::i64);
  CHECK(i64.data<int64_t>()[3] == (1LL << 40));
  Tensor i32 = Tensor::from_vector(std::vector<int32_t>{7, 8}, {2});
  CHECK(i32.dtype() == DType::i32);
  Tensor f32 = Tensor::from_vector(std::vector<float>{0.1f, 0.2f}, {2});
  CHECK(f32.dtype() == DType::f32);
  CHECK(f32.data<float>()[0] == 0.1f);
  // A std::vector<double> keeps the old overload: float32 unless told.
  CHECK(Tensor::from_vector(std::vector<double>{1, 2}, {2}).dtype() == DType::f32);
  CHECK(Tensor::from_vector({1.0, 2.0}, {2}, DType::f64).dtype() == DType::f64);
  CHECK(Tensor::from_vector(std::vector<int32_t>{1, 2}, {2}, DType::f64).to_vector() ==
        std::vector<double>{1, 2});
  CHECK_THROWS_AS(Tensor::from_vector(std::vector<int64_t>{1, 2, 3}, {2, 2}),
                  std::invalid_argument);

  const double raw[6] = {1, 2, 3, 4, 5, 6};
  Tensor d = Tensor::from_data(raw, {2, 3});
  CHECK(d.dtype() == DType::f64);
  CHECK(d.at({1, 2}) == 6);
  std::vector<int32_t> ids{4, 5, 6};
  Tensor s = Tensor::from_span(std::span(ids), {3});
  CHECK(s.dtype() == DType::i32);
  ids[0] = 99;  // a copy, not a view
  CHECK(s.data<int32_t>()[0] == 4);
  CHECK_THROWS_AS(Tensor::from_span(std::span(ids), {2}), std::invalid_argument);

  // item<T>, as libtorch's: floats truncate toward zero into integers; out-of-range throws.
  CHECK(full({1}, 2.5).item<float>() == 2.5f);
  CHECK(full({1}, 2.5).item<int64_t>() == 2);
  CHECK(full({1}, -2.5).item<int32_t>() == -2);
  CHECK(full({1, 1}, 7, DType::i32).item<double>() == 7.0);
  CHECK(full({1}, 2.5).item() == 2.5);  // the old double item() is still there
  CHECK_THROWS_AS(full({1}, 1e10).item<int32_t>(), std::out_of_range);
  CHECK_THROWS_AS(full({1}, NAN).item<int64_t>(), std::out_of_range);
  CHECK_THROWS_AS(dg::raw::view_narrow(dg::raw::view_narrow(i64, 0, 1, 1), 1, 1, 1).item<int32_t>(),
                  std::out_of_range);  // 2^40
  CHECK_THROWS_AS(full({1}, 1e300, DType::f64).item<float>(), std::out_of_range);
  CHECK_THROWS_AS(zeros({2}).item<float>(), std::invalid_argument);
}

TEST_CASE("printing matches torch's strings (dtypes spelled without 'torch.')") {
  struct Case {
    Tensor t;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {dg::Tensor::from_vector({1, 2, 3, 4}, {2, 2}),
       R"(tensor([[1., 2.],
        [3., 4.]]))"},
      {dg::Tensor::from_vector({1.5, -2.25, 3, 4.125}, {2, 2}),
       R"(tensor([[ 1.5000, -2.2500],
        [ 3.0000,  4.1250]]))"},
      {dg::Tensor::from_vector({1e-5, 1, 12345}, {3}),
       R"(tensor([1.0000e-05, 1.0000e+00, 1.2345e+04]))"},
      {dg::Tensor::from_vector({1.5, NAN, INFINITY, -INFINITY, 0}, {5}),
       R"(tensor([1.5000,    nan,    inf,   -inf, 0.0000]))"},
      {dg::Tensor::from_vector({1, 2000}, {2}), R"(tensor([1.0000e+00, 2.0000e+03]))"},
      {dg::Tensor::from_vector({0.25, -1}, {2}, dg::DType::f64),
       R"(tensor([ 0.2500, -1.0000], dtype=float64))"},
      {dg::Tensor::from_vector(std::vector<int32_t>{3, -14, 159}, {3}),
       R"(tensor([  3, -14, 159], dtype=int32))"},
      {dg::arange(30),
       R"(tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,
        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29]))"},
      {dg::zeros({0, 3}), R"(tensor([], size=(0, 3)))"},
      {dg::zeros({0}), R"(tensor([]))"},
      {dg::full({}, 1.5), R"(tensor(1.5000))"},
      {dg::ones({2}).set_requires_grad(true), R"(tensor([1., 1.], requires_grad=True))"},
      {dg::div(dg::raw::view_reshape(dg::arange(2000.0), {40, 50}), dg::full({1}, 7)),
       R"(tensor([[0.0000e+00, 1.4286e-01, 2.8571e-01,  ..., 6.7143e+00, 6.8571e+00,
         7.0000e+00],
        [7.1429e+00, 7.2857e+00, 7.4286e+00,  ..., 1.3857e+01, 1.4000e+01,
         1.4143e+01],
        [1.4286e+01, 1.4429e+01, 1.4571e+01,  ..., 2.1000e+01, 2.1143e+01,
         2.1286e+01],
        ...,
        [2.6429e+02, 2.6443e+02, 2.6457e+02,  ..., 2.7100e+02, 2.7114e+02,
         2.7129e+02],
        [2.7143e+02, 2.7157e+02, 2.7171e+02,  ..., 2.7814e+02, 2.7829e+02,
         2.7843e+02],
        [2.7857e+02, 2.7871e+02, 2.7886e+02,  ..., 2.8529e+02, 2.8543e+02,
         2.8557e+02]]))"},
      {dg::raw::view_reshape(dg::arange(1200), {10, 10, 12}),
       R"(tensor([[[   0,    1,    2,  ...,    9,   10,   11],
         [  12,   13,   14,  ...,   21,   22,   23],
         [  24,   25,   26,  ...,   33,   34,   35],
         ...,
         [  84,   85,   86,  ...,   93,   94,   95],
         [  96,   97,   98,  ...,  105,  106,  107],
         [ 108,  109,  110,  ...,  117,  118,  119]],

        [[ 120,  121,  122,  ...,  129,  130,  131],
         [ 132,  133,  134,  ...,  141,  142,  143],
         [ 144,  145,  146,  ...,  153,  154,  155],
         ...,
         [ 204,  205,  206,  ...,  213,  214,  215],
         [ 216,  217,  218,  ...,  225,  226,  227],
         [ 228,  229,  230,  ...,  237,  238,  239]],

        [[ 240,  241,  242,  ...,  249,  250,  251],
         [ 252,  253,  254,  ...,  261,  262,  263],
         [ 264,  265,  266,  ...,  273,  274,  275],
         ...,
         [ 324,  325,  326,  ...,  333,  334,  335],
         [ 336,  337,  338,  ...,  345,  346,  347],
         [ 348,  349,  350,  ...,  357,  358,  359]],

        ...,

        [[ 840,  841,  842,  ...,  849,  850,  851],
         [ 852,  853,  854,  ...,  861,  862,  863],
         [ 864,  865,  866,  ...,  873,  874,  875],
         ...,
         [ 924,  925,  926,  ...,  933,  934,  935],
         [ 936,  937,  938,  ...,  945,  946,  947],
         [ 948,  949,  950,  ...,  957,  958,  959]],

        [[ 960,  961,  962,  ...,  969,  970,  971],
         [ 972,  973,  974,  ...,  981,  982,  983],
         [ 984,  985,  986,  ...,  993,  994,  995],
         ...,
         [1044, 1045, 1046,  ..., 1053, 1054, 1055],
         [1056, 1057, 1058,  ..., 1065, 1066, 1067],
         [1068, 1069, 1070,  ..., 1077, 1078, 1079]],

        [[1080, 1081, 1082,  ..., 1089, 1090, 1091],
         [1092, 1093, 1094,  ..., 1101, 1102, 1103],
         [1104, 1105, 1106,  ..., 1113, 1114, 1115],
         ...,
         [1164, 1165, 1166,  ..., 1173, 1174, 1175],
         [1176, 1177, 1178,  ..., 1185, 1186, 1187],
         [1188, 1189, 1190,  ..., 1197, 1198, 1199]]]))"},
      {dg::raw::view_reshape(dg::arange(0.0, 24.0, 1.0, dg::DType::f64), {2, 3, 4}),
       R"(tensor([[[ 0.,  1.,  2.,  3.],
         [ 4.,  5.,  6.,  7.],
         [ 8.,  9., 10., 11.]],

        [[12., 13., 14., 15.],
         [16., 17., 18., 19.],
         [20., 21., 22., 23.]]], dtype=float64))"},
  };
  for (const Case& c : cases) {
    CHECK(to_string(c.t) == c.expected);
    std::ostringstream out;
    out << c.t;
    CHECK(out.str() == c.expected);
  }
  CHECK(to_string(Tensor()) == "tensor(undefined)");
  // A view prints its logical order.
  CHECK(to_string(dg::raw::view_transpose(Tensor::from_vector({1, 2, 3, 4}, {2, 2}), 0, 1)) ==
        "tensor([[1., 3.],\n        [2., 4.]])");
  PrintOptions two_digits;
  two_digits.precision = 2;
  CHECK(to_string(full({2}, 1.0 / 3), two_digits) == "tensor([0.33, 0.33])");
}

TEST_CASE("to_dtype converts like torch's .to(dtype); only float-to-float records a gradient") {
  const Tensor x =
      Tensor::from_vector(std::vector<double>{-2.75, -0.5, 0.0, 1.5, 3.999}, {5}, DType::f64);
  CHECK(to_dtype(x, DType::i64).data<int64_t>()[0] == -2);  // truncation toward zero, as torch
  const Tensor as_int = to_dtype(x, DType::i32);
  CHECK(std::vector<float>(as_int.to_floats()) == std::vector<float>{-2, 0, 0, 1, 3});
  CHECK(to_dtype(as_int, DType::f32).to_floats() == std::vector<float>{-2, 0, 0, 1, 3});
  CHECK(to_dtype(x, DType::f64).same(x));  // the same dtype: the tensor itself
  CHECK(to_dtype(Tensor::from_vector(std::vector<double>{0.1}, {1}, DType::f64), DType::f32)
            .item<float>() == 0.1f);  // rounded to nearest

  // float32 -> float64 -> a weighted sum: the gradient comes back in float32, equal to the weights
  Tensor a = Tensor::from_vector(std::vector<float>{1.0f, 2.0f, 3.0f}, {3});
  a.set_requires_grad(true);
  const Tensor w = Tensor::from_vector(std::vector<double>{0.25, -1.5, 4.0}, {3}, DType::f64);
  backward(sum(mul(to_dtype(a, DType::f64), w)));
  REQUIRE(a.grad().dtype() == DType::f32);
  CHECK(a.grad().to_floats() == std::vector<float>{0.25f, -1.5f, 4.0f});
  CHECK_FALSE(to_dtype(a, DType::i32).requires_grad());  // integers carry no gradient
}

TEST_CASE("x.contiguous() and x.to(dtype) record as the free contiguous() and to_dtype() do") {
  // float32 leaf -> transposed view -> x.contiguous() / x.to(float64): both on the tape, as torch
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  a.set_requires_grad(true);
  const Tensor w =
      Tensor::from_vector(std::vector<double>{0.5, -1, 2, 3, -4, 0.25}, {3, 2}, DType::f64);
  const Tensor t = transpose(a, 0, 1);  // [3, 2], not contiguous
  const Tensor c = t.contiguous(), d = t.to(DType::f64);
  CHECK_FALSE(c.is_leaf());
  CHECK_FALSE(d.is_leaf());
  backward(add(to_dtype(sum(mul(c, w.to(DType::f32))), DType::f64), sum(mul(d, w))));
  REQUIRE(a.grad().defined());
  // each path gives w transposed: twice in total
  CHECK(a.grad().to_floats() == std::vector<float>{1, 4, -8, -2, 6, 0.5});
  // the same dtype / an already contiguous tensor: the tensor itself, as the free functions
  CHECK(a.to(DType::f32).same(a));
  CHECK(a.contiguous().same(a));
  CHECK(to_dtype(a, DType::f32).same(a));
  CHECK(contiguous(a).same(a));
  // grad mode off, or an input without a gradient: nothing recorded
  {
    NoGradGuard no_grad;
    CHECK(t.contiguous().is_leaf());
    CHECK(t.to(DType::f64).is_leaf());
  }
  CHECK(detach(t).contiguous().is_leaf());
  CHECK_FALSE(t.to(DType::i64).requires_grad());  // integers carry no gradient
}

TEST_CASE(
    "shape arithmetic: strides, contiguity, broadcasting and its reduction axes, as torch's") {
  CHECK(contiguous_strides({2, 3, 4}) == Shape{12, 4, 1});  // torch.empty(2, 3, 4).stride()
  CHECK(contiguous_strides({}) == Shape{});
  CHECK(contiguous_strides({4, 1, 6, 2}) == Shape{12, 12, 2, 1});
  CHECK(is_contiguous_layout({2, 3}, {3, 1}));
  CHECK_FALSE(is_contiguous_layout({3, 2}, {1, 3}));  // a transpose
  CHECK(is_contiguous_layout({1, 5}, {1, 1}));        // size 1: any stride (torch agrees)
  CHECK_FALSE(is_contiguous_layout({3, 4}, {1, 0}));  // an expand
  CHECK(dg::raw::view_transpose(Tensor::zeros({5, 1}), 0, 1).is_contiguous());
  CHECK(broadcast_shapes({2, 1, 4}, {3, 1}, "add") == Shape{2, 3, 4});
  CHECK(broadcast_shapes({}, {2, 3}, "add") == Shape{2, 3});
  CHECK_THROWS_WITH_AS(broadcast_shapes({2, 3}, {3, 2}, "add"),
                       "add: shapes [2, 3] and [3, 2] cannot be broadcast", std::invalid_argument);
  CHECK(broadcast_reduction_axes({4}, {3, 4}) == std::vector<int64_t>{0});
  CHECK(broadcast_reduction_axes({3, 1}, {2, 3, 4}) == std::vector<int64_t>{0, 2});
  CHECK(broadcast_reduction_axes({2, 3}, {2, 3}).empty());
}
