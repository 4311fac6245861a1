// The bool and uint8 dtypes and every op that takes or makes a mask, against PyTorch 1.13's values
// (tests/pytorch_idioms/masks_goldens.h, written by tools/pytorch_idioms/masks.py) and refusals:
// dtype facts and torch's type promotion, conversions as torch's to(), creation, item, printing,
// safetensors round trips; comparisons (bool, promoted), logical and bitwise ops, any/all, sum of
// bool and integer tensors (int64) and mean's refusal; where, masked_fill, masked_select (values
// and gradients), triu/tril; the polarity of every attention mask. Gradient checks of where,
// masked_fill, masked_select and triu/tril are rows of the op table (tests/test_gradcheck_ops.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/transformer.h"
#include "tensor/factory.h"
#include "tensor/print.h"
#include "tests/pytorch_idioms/masks_test_helpers.h"
#include "tests/temp_dir.h"
#include "train/checkpoint.h"

using namespace dg;
using namespace masks_goldens;
using masks_test::check_close;
using masks_test::check_exact;
using masks_test::pattern;
using masks_test::tensor;

namespace {
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
Tensor bools(const std::vector<bool>& v, const Shape& shape) {
  return Tensor::from_vector(v, shape);
}
}  // namespace

TEST_CASE("bool and uint8 dtypes: names, sizes, torch's promotion table") {
  CHECK(std::string(dtype_name(DType::b8)) == "bool");
  CHECK(std::string(dtype_name(DType::u8)) == "uint8");
  CHECK(dtype_size(DType::b8) == 1);
  CHECK(dtype_size(DType::u8) == 1);
  CHECK_FALSE(is_floating(DType::b8));
  CHECK_FALSE(is_floating(DType::u8));
  const DType order[] = {DType::f32, DType::f64, DType::i32, DType::i64, DType::b8, DType::u8};
  for (int a = 0; a < 6; ++a)
    for (int b = 0; b < 6; ++b) {
      CAPTURE(a);
      CAPTURE(b);
      CHECK(promote_types(order[a], order[b]) == order[static_cast<int>(kPromote[a * 6 + b])]);
    }
}

TEST_CASE("bool and uint8: conversions as torch's to(), creation, item, at") {
  // to bool: nonzero (NaN too) is true; to uint8: wraps modulo 256 (floats through int64)
  check_exact(to_dtype(tensor({0.5, 0.0, NAN, -0.0, -2.0}, {5}), DType::b8), kToBool, DType::b8);
  check_exact(to_dtype(tensor({-1.0, 2.7, 300.0, 255.9}, {4}, DType::f32), DType::u8), kFloatToU8,
              DType::u8);
  check_exact(Tensor::from_ids({-1, 256, 3, 1000}, {4}).to(DType::u8), kIntToU8, DType::u8);
  check_exact(to_dtype(bools({true, false}, {2}), DType::f32), {1, 0}, DType::f32);
  // creation
  check_exact(Tensor::full({2}, 2.0, DType::b8), {1, 1}, DType::b8);  // torch.full(.., 2., bool)
  check_exact(Tensor::zeros({2}, DType::b8), {0, 0}, DType::b8);
  check_exact(Tensor::ones({1}, DType::u8), {1}, DType::u8);
  check_exact(Tensor::from_ids({0, 3, 0}, {3}, DType::b8), {0, 1, 0}, DType::b8);
  check_exact(Tensor::from_ids({0, 255}, {2}, DType::u8), {0, 255}, DType::u8);
  CHECK_THROWS_AS(Tensor::from_ids({256}, {1}, DType::u8), std::out_of_range);
  CHECK_THROWS_AS(Tensor::from_ids({1}, {1}, DType::f32), std::invalid_argument);
  check_exact(Tensor::from_vector(std::vector<uint8_t>{7, 200}, {2}), {7, 200}, DType::u8);
  check_exact(Tensor::from_vector(std::vector<double>{0, 0.25}, {2}, DType::b8), {0, 1}, DType::b8);
  // element access
  const Tensor m = bools({true, false, true, true}, {2, 2});
  CHECK(m.at({0, 1}) == 0.0);
  CHECK(m.at({1, 0}) == 1.0);
  CHECK(slice(reshape(m, {4}), 0, 2, 3).item<bool>());
  CHECK(Tensor::full({}, 0.0, DType::b8).item<bool>() == false);
  CHECK(Tensor::full({}, NAN).item<bool>());  // Python's bool(tensor(nan))
  CHECK(Tensor::full({}, 1.0, DType::b8).item<int64_t>() == 1);
  CHECK(Tensor::full({}, 200.0, DType::u8).item<uint8_t>() == 200);
  CHECK_THROWS_AS(Tensor::full({}, 300.0, DType::i64).item<uint8_t>(), std::out_of_range);
  // copies and views keep the dtype; a bool tensor cannot require grad (torch too)
  Tensor c = Tensor::zeros({2, 2}, DType::b8);
  c.copy_from(tensor({0, 2, -1, 0}, {2, 2}));
  CHECK(c.to_vector() == std::vector<double>{0, 1, 1, 0});
  CHECK(transpose(c, 0, 1).contiguous().to_vector() == std::vector<double>{0, 1, 1, 0});
  CHECK_THROWS_AS(Tensor::ones({1}, DType::b8).set_requires_grad(true), std::invalid_argument);
  CHECK_THROWS_WITH(arange(0.0, 3.0, 1.0, DType::b8), doctest::Contains("bool"));
}

TEST_CASE("bool and uint8: printed as torch prints them") {
  CHECK(to_string(bools({true, false, true}, {3})) == kPrintBool);
  CHECK(to_string(bools({true, true, true, true}, {2, 2})) == kPrintBool2d);
  std::string u8 = kPrintU8;  // depthgrad names dtypes without torch's "torch." prefix
  u8.replace(u8.find("torch."), 6, "");
  CHECK(to_string(Tensor::from_vector(std::vector<uint8_t>{1, 255, 30}, {3})) == u8);
}

TEST_CASE("bool and uint8: safetensors round trips keep dtype and values") {
  test::TempDir dir("masks");
  const std::string path = dir.file("masks.safetensors");
  const Tensor m = bools({true, false, false, true, true, false}, {2, 3});
  const Tensor u = Tensor::from_vector(std::vector<uint8_t>{0, 9, 255}, {3});
  save_tensors(path, {{"mask", m}, {"bytes", u}});
  const std::vector<NamedTensor> back = load_tensors(path);
  REQUIRE(back.size() == 2);
  for (const auto& entry : back) {
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    CAPTURE(name);
    const Tensor& want = name == "mask" ? m : u;
    CHECK(t.dtype() == want.dtype());
    CHECK(t.shape() == want.shape());
    CHECK(t.to_vector() == want.to_vector());
  }
}

TEST_CASE("comparisons: bool, torch's promotion between dtypes, scalars rounded as torch") {
  const Tensor a = Tensor::from_ids({1, 2, 16777217, -3}, {4});
  check_exact(eq(a, Tensor::from_ids({1, 3, 16777217, 4}, {4}, DType::i32)), kEqI64I32, DType::b8);
  // int64 with float32 compares in float32: 16777217 rounds to 16777216 (torch's answer)
  check_exact(eq(a, tensor({1.0, 2.5, 16777216.0, -3.0}, {4}, DType::f32)), kEqI64F32, DType::b8);
  const Tensor x32 = tensor({0.1, 0.2, 0.30000001192092896}, {3}, DType::f32);
  check_exact(eq(x32, 0.1), kF32EqScalar, DType::b8);
  check_exact(lt(x32, tensor({0.1, 0.3, 0.3}, {3})), kF32LtF64, DType::b8);
  check_exact(lt(x32, Tensor::full({}, 0.2, DType::f64)), kF32LtF64ZeroD, DType::b8);
  check_exact(eq(Tensor::from_ids({0, 1, 2}, {3}), 0.5), kI64EqHalf, DType::b8);
  check_exact(lt(Tensor::from_ids({0, 1, 2}, {3}), 1.5), kI64LtHalf, DType::b8);
  // bool against bool and against a number
  const Tensor m = bools({true, false}, {2});
  check_exact(eq(m, bools({true, true}, {2})), {1, 0}, DType::b8);
  check_exact(eq(m, 1.0), {1, 0}, DType::b8);
  CHECK_THROWS_WITH(eq(a, Tensor::from_ids({1, 2}, {2})), doctest::Contains("eq"));
}

TEST_CASE("logical and bitwise ops: & | ^ ~ as torch's; floats refused by the bitwise ones") {
  const Tensor m = bools({true, false, true, false, false, true}, {2, 3});
  const Tensor n = bools({true, true, false}, {3});
  check_exact(m & n, kAnd, DType::b8);
  check_exact(m | n, kOr, DType::b8);
  check_exact(m ^ n, kXor, DType::b8);
  check_exact(~m, kNot, DType::b8);
  check_exact(Tensor::from_ids({3, 6, -1}, {3}) & Tensor::from_ids({1, 4, 12}, {3}, DType::i32),
              kBitAndInt, DType::i64);
  check_exact(~Tensor::from_ids({3, 0, -1}, {3}), kBitNotInt, DType::i64);
  check_exact(bools({true, false, true}, {3}) & Tensor::from_ids({3, 3, 2}, {3}), kBoolAndInt,
              DType::i64);
  const Tensor f = tensor({0.0, 2.0, NAN, -1.0}, {4}), g = tensor({1.0, 0.0, 0.0, -0.0}, {4});
  check_exact(logical_and(f, g), kLogicalAnd, DType::b8);
  check_exact(logical_or(f, g), kLogicalOr, DType::b8);
  check_exact(logical_xor(f, g), kLogicalXor, DType::b8);
  check_exact(logical_not(f), kLogicalNot, DType::b8);
  const std::string e = error_of([&] { f& g; });
  CHECK(e.find("bitwise_and") != std::string::npos);
  CHECK(e.find("logical_and") != std::string::npos);
  CHECK(error_of([&] { ~f; }).find("logical_not") != std::string::npos);
}

TEST_CASE("any, all, sum of bool and integer tensors; mean refuses them naming mean") {
  const Tensor m = bools({true, false, true, false, false, false}, {2, 3});
  check_exact(any(m), kAny, DType::b8);
  check_exact(all(m), kAll, DType::b8);
  check_exact(any(m, 1), kAnyDim1, DType::b8);
  check_exact(all(m, 0, true), kAllDim0Keep, DType::b8);
  CHECK(all(m, 0, true).shape() == Shape{1, 3});
  check_exact(any(tensor({0.0, NAN, 0.0, 0.0}, {2, 2}), -1), kAnyFloat, DType::b8);
  CHECK(any(Tensor::from_vector(std::vector<uint8_t>{0, 3}, {2})).dtype() == DType::u8);
  check_exact(sum(m), kSumBool, DType::i64);
  check_exact(sum(m, {1}), kSumBoolDim1, DType::i64);
  check_exact(sum(Tensor::from_vector(std::vector<uint8_t>{200, 100}, {2})), kSumU8, DType::i64);
  check_exact(sum(Tensor::from_ids({1, 2, 3, 2147483647}, {2, 2}, DType::i32), {0}, true),
              kSumI32Keep, DType::i64);
  for (const Tensor& t : {m, Tensor::from_ids({1, 2}, {2})}) {
    const std::string e = error_of([&] { mean(t); });
    CAPTURE(e);
    CHECK(e.rfind("mean:", 0) == 0);
    CHECK(e.find("dg::mean(dg::to_dtype(x, DType::f32))") != std::string::npos);
  }
}

TEST_CASE("where, masked_fill, masked_select, triu, tril: torch's values and gradients") {
  const double tol = 1e-12;
  const Tensor x = tensor(pattern(24, 7, 25, 12, 5.0), {2, 3, 4}, DType::f64, true);
  Tensor y = masked_select(x, bools({true, false, true}, {3, 1}));
  check_close(y, kMaskedSelect, tol);
  check_close(masks_test::grad_of(y, {x})[0], kMaskedSelectGrad, tol);
  std::vector<bool> big(24);
  for (int k = 0; k < 24; ++k) big[k] = k % 3 != 1;
  const Tensor small = tensor(pattern(3, 5, 7, 3, 4.0), {3, 1}, DType::f64, true);
  y = masked_select(small, bools(big, {2, 3, 4}));
  check_close(y, kMaskedSelectBroadcast, tol);
  check_close(masks_test::grad_of(y, {small})[0], kMaskedSelectBroadcastGrad, tol);
  CHECK(masked_select(Tensor::from_ids({4, 5, 6}, {3}), bools({false, true, true}, {3}))
            .to_vector() == std::vector<double>{5, 6});
  const Tensor a = tensor(pattern(12, 5, 13, 6, 4.0), {3, 4}, DType::f64, true);
  y = where(bools({true, false, false, true}, {4}), a, mul(a, a));
  check_close(y, kWhere, tol);
  check_close(masks_test::grad_of(y, {a})[0], kWhereGrad, tol);
  y = masked_fill(a, bools({false, true, false}, {3, 1}), -1.5);
  check_close(y, kMaskedFill, tol);
  check_close(masks_test::grad_of(y, {a})[0], kMaskedFillGrad, tol);
  check_close(triu(a, 1), kTriu, tol);
  check_close(tril(a, -1), kTrilNeg, tol);
  check_exact(triu(Tensor::ones({3, 4}, DType::b8), 1), kTriuBool, DType::b8);
}

TEST_CASE("mask refusals: one line naming the op, the argument and the fix") {
  const Tensor a = tensor({1, 2, 3}, {3});
  const Tensor ints = Tensor::from_ids({1, 0, 1}, {3});
  CHECK(error_of([&] { masked_fill(a, ints, 0.0); }) ==
        "masked_fill: mask must be bool, got int64 ([3] int64); write dg::ne(mask, 0) or "
        "mask.to(DType::b8)");
  CHECK(error_of([&] {
          where(to_dtype(ints, DType::u8), a, a);
        }).rfind("where: condition must be bool, got uint8", 0) == 0);
  CHECK(error_of([&] {
          masked_select(a, to_dtype(ints, DType::f32));
        }).rfind("masked_select: mask must be bool, got float32", 0) == 0);
  const Tensor q = tensor(pattern(12, 5, 7, 3, 4.0), {1, 3, 4});
  CHECK(error_of([&] {
          scaled_dot_product_attention(q, q, q, Tensor::ones({3, 3}, DType::i64));
        }).find("scaled_dot_product_attention: mask must be bool (True = the key takes part)") !=
        std::string::npos);
  MultiheadAttention mha(4, 2, 0.0, true, true, std::nullopt, std::nullopt, DType::f64);
  const std::string e = error_of([&] {
    mha.forward(q, q, q, Tensor::from_ids({0, 0, 1}, {1, 3}));
  });
  CHECK(e.find("key_padding_mask must be bool (True = not attended)") != std::string::npos);
  CHECK(e.find("dg::ne(key_padding_mask, 0)") != std::string::npos);
}

TEST_CASE("attention masks: bool polarity of each op, as torch's") {
  // the same keep pattern, once as scaled_dot_product_attention's mask (True = takes part) and
  // once, inverted, as MultiheadAttention's attn_mask (True = not allowed): the same weights
  const Tensor q = tensor(pattern(24, 5, 13, 6, 5.0), {1, 2, 3, 4});
  const Tensor keep = bools({true, false, true, true, true, false, false, false, true}, {3, 3});
  const Tensor w = attention_weights(q, q, keep);
  const std::vector<double> wv = w.to_vector();
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 9; ++k)
      if (k == 1 || k == 5 || k == 6 || k == 7) CHECK(wv[h * 9 + k] == 0.0);
  // a float mask is added: 0 keeps, −inf drops, the same weights
  const Tensor additive = masked_fill(Tensor::zeros({3, 3}, DType::f64), ~keep, -INFINITY);
  CHECK(attention_weights(q, q, additive).to_vector() == wv);
  // MultiheadAttention: True = not allowed
  MultiheadAttention mha(4, 2, 0.0, true, true, std::nullopt, std::nullopt, DType::f64);
  masks_test::fill_module(mha);
  const Tensor x = tensor(pattern(12, 7, 11, 5, 6.0), {1, 3, 4});
  const MultiheadAttentionOutput by_bool = mha.forward(x, x, x, Tensor(), true, ~keep);
  const MultiheadAttentionOutput by_float = mha.forward(x, x, x, Tensor(), true, additive);
  check_close(by_bool.output, by_float.output.to_vector(), 1e-15);
  const std::vector<double> mw = by_bool.weights.to_vector();
  for (int k : {1, 5, 6, 7}) CHECK(mw[k] == 0.0);
}
