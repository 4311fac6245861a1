// PyTorch mask idioms translated line by line: each TEST_CASE holds the torch lines (comment), the
// depthgrad lines and a check against PyTorch 1.13's values (tests/pytorch_idioms/masks_goldens.h,
// written by tools/pytorch_idioms/masks.py). float64 at 1e-12, float32 at 1e-6; bool and integer
// results exactly. Inputs are the generator's patterns; modules get its fill_module weights.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/transformer.h"
#include "tensor/print.h"
#include "tests/pytorch_idioms/masks_test_helpers.h"

using namespace dg;
using namespace masks_goldens;
using masks_test::check_close;
using masks_test::check_exact;
using masks_test::fill_module;
using masks_test::grad_of;
using masks_test::pattern;
using masks_test::tensor;

namespace {
constexpr double kTol64 = 1e-12, kTol32 = 1e-6;
constexpr double PAD = 0;
const double kInf = std::numeric_limits<double>::infinity();

Tensor ids() { return Tensor::from_ids({5, 3, 0, 0, 7, 2, 9, 0}, {2, 4}); }
Tensor x_in(bool requires_grad = false) {
  return tensor(pattern(64, 3, 11, 5, 6.0), {2, 4, 8}, DType::f64, requires_grad);
}
// MultiheadAttention(8, 2, batch_first=True) in float64 with the generator's weights, eval mode.
MultiheadAttention& mha() {
  static MultiheadAttention* m = [] {  // kept for the whole run (modules do not move)
    auto* a = new MultiheadAttention(8, 2, 0.0, true, true, std::nullopt, std::nullopt, DType::f64);
    fill_module(*a);
    a->eval();
    return a;
  }();
  return *m;
}
Tensor u_in() { return tensor(pattern(12, 5, 11, 4, 4.0), {12}); }
Tensor v_in() { return tensor(pattern(12, 7, 25, 12, 5.0), {3, 4}, DType::f64, true); }
}  // namespace

TEST_CASE("idiom: out, w = mha(x, x, x, key_padding_mask=ids == PAD)") {
  // PAD = 0
  // out, w = mha(x, x, x, key_padding_mask=ids == PAD)
  const Tensor x = x_in(true);
  const MultiheadAttentionOutput r = mha().forward(x, x, x, eq(ids(), PAD));
  check_close(r.output, kIdiomKpmOut, kTol64);
  check_close(r.weights, kIdiomKpmWeights, kTol64);
  check_close(grad_of(r.output, {x})[0], kIdiomKpmGrad, kTol64);
  // the padded keys get weight exactly 0 (batch 0: keys 2, 3; batch 1: key 3)
  const std::vector<double> w = r.weights.to_vector();  // [2, 4, 4]
  for (int q = 0; q < 4; ++q) {
    CHECK(w[q * 4 + 2] == 0.0);
    CHECK(w[q * 4 + 3] == 0.0);
    CHECK(w[16 + q * 4 + 3] == 0.0);
  }
}

TEST_CASE("idiom: attn_mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)") {
  // attn_mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
  // out, w = mha(x, x, x, attn_mask=attn_mask)
  const int64_t T = 4;
  const Tensor attn_mask = triu(Tensor::ones({T, T}, DType::b8), 1);
  const Tensor x = x_in();
  const MultiheadAttentionOutput r = mha().forward(x, x, x, Tensor(), true, attn_mask);
  check_close(r.output, kIdiomCausalOut, kTol64);
  check_close(r.weights, kIdiomCausalWeights, kTol64);
}

TEST_CASE("idiom: mha(x, x, x, key_padding_mask=ids == PAD, attn_mask=attn_mask)") {
  // out, _ = mha(x, x, x, key_padding_mask=ids == PAD, attn_mask=attn_mask)
  const Tensor x = x_in();
  const Tensor attn_mask = triu(Tensor::ones({4, 4}, DType::b8), 1);
  const Tensor out = mha().forward(x, x, x, eq(ids(), PAD), false, attn_mask).output;
  check_close(out, kIdiomBothOut, kTol64);
}

TEST_CASE("idiom: scores.masked_fill(mask, float('-inf')).softmax(-1)") {
  // scores = ...float32 [4, 4]; mask = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)
  // p = scores.masked_fill(mask, float('-inf')).softmax(-1)
  const Tensor scores = tensor(pattern(16, 5, 9, 4, 3.0), {4, 4}, DType::f32);
  const Tensor mask = triu(Tensor::ones({4, 4}, DType::b8), 1);
  const Tensor p = softmax(masked_fill(scores, mask, -kInf), -1);
  CHECK(p.dtype() == DType::f32);
  check_close(p, kIdiomMaskedSoftmax, kTol32);
}

TEST_CASE("idiom: torch.where(x > 0, x, 0.1 * x)") {
  // y = torch.where(x > 0, x, 0.1 * x)
  const Tensor x = v_in();
  const Tensor y = where(gt(x, 0.0), x, 0.1 * x);
  check_close(y, kIdiomLeaky, kTol64);
  check_close(grad_of(y, {x})[0], kIdiomLeakyGrad, kTol64);
}

TEST_CASE("idiom: (x > 0) & (x < 1)") {
  // m = (x > 0) & (x < 1)
  const Tensor x = u_in();
  check_exact((gt(x, 0.0) & lt(x, 1.0)), kIdiomBetween, DType::b8);
}

TEST_CASE("idiom: m.any(), m.all(), (x > -2).all()") {
  // [m.any(), m.all(), (x > -2).all()]
  const Tensor x = u_in();
  const Tensor m = gt(x, 0.0) & lt(x, 1.0);
  const std::vector<double> got = {any(m).item(), all(m).item(), all(gt(x, -2.0)).item()};
  CHECK(got == kIdiomAnyAll);
  CHECK(any(m).dtype() == DType::b8);
}

TEST_CASE("idiom: m.sum()") {
  // n = m.sum()            # int64
  const Tensor x = u_in();
  const Tensor n = sum(gt(x, 0.0) & lt(x, 1.0));
  check_exact(n, kIdiomMaskSum, DType::i64);
  CHECK(n.item<int64_t>() == static_cast<int64_t>(kIdiomMaskSum[0]));
}

TEST_CASE("idiom: y = x[x > 0.5]") {
  // y = x[x > 0.5]         # masked_select; the gradient scatters back
  const Tensor x = v_in();
  const Tensor y = masked_select(x, gt(x, 0.5));
  check_close(y, kIdiomIndexMask, kTol64);
  check_close(grad_of(y, {x})[0], kIdiomIndexMaskGrad, kTol64);
}

TEST_CASE("idiom: torch.tensor([1, 2, 3]) == torch.tensor([1, 5, 3], dtype=torch.int32)") {
  // torch.tensor([1, 2, 3]) == torch.tensor([1, 5, 3], dtype=torch.int32)   # int64 vs int32
  check_exact(eq(Tensor::from_ids({1, 2, 3}, {3}), Tensor::from_ids({1, 5, 3}, {3}, DType::i32)),
              kIdiomPromote, DType::b8);
}

TEST_CASE("idiom: torch.tensor([1, 2, 3]) < torch.tensor([1.5, 1.5, 3.5])") {
  // torch.tensor([1, 2, 3]) < torch.tensor([1.5, 1.5, 3.5])   # int64 vs float: in float
  check_exact(lt(Tensor::from_ids({1, 2, 3}, {3}), tensor({1.5, 1.5, 3.5}, {3})),
              kIdiomPromoteFloat, DType::b8);
}

TEST_CASE("idiom: (logits.argmax(-1) == labels).float().mean()") {
  // acc = (logits.argmax(-1) == labels).float().mean()
  const Tensor logits = tensor(pattern(15, 7, 11, 5, 3.0), {5, 3});
  const Tensor labels = Tensor::from_ids({0, 2, 1, 1, 0}, {5});
  const Tensor acc = mean(to_dtype(eq(argmax(logits, -1), labels), DType::f32));
  check_close(acc, kIdiomAccuracy, kTol32);
}

TEST_CASE("idiom: ~m") {
  // ~m
  const Tensor x = u_in();
  check_exact(~(gt(x, 0.0) & lt(x, 1.0)), kIdiomInvert, DType::b8);
}

TEST_CASE("idiom: m.float()") {
  // m.float()
  const Tensor x = u_in();
  check_exact(to_dtype(gt(x, 0.0) & lt(x, 1.0), DType::f32), kIdiomMaskFloat, DType::f32);
}

TEST_CASE("idiom: torch.tensor([0.0, -0.5, float('nan'), 3.0]).bool()") {
  // torch.tensor([0.0, -0.5, float('nan'), 3.0]).bool()      # nonzero (NaN too) is True
  check_exact(tensor({0.0, -0.5, NAN, 3.0}, {4}).to(DType::b8), kIdiomToBool, DType::b8);
}

TEST_CASE("idiom: lengths = (ids != PAD).sum(-1)") {
  // lengths = (ids != PAD).sum(-1)
  check_exact(sum(ne(ids(), PAD), {-1}), kIdiomLengths, DType::i64);
}

TEST_CASE("idiom: (h * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)") {
  // keep = ids != PAD
  // pooled = (h * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
  // depthgrad does not promote in arithmetic: the bool and int64 sides are converted explicitly
  const Tensor h = x_in(true);
  const Tensor keep = ne(ids(), PAD);
  const Tensor pooled = div(sum(mul(h, to_dtype(unsqueeze(keep, -1), h.dtype())), {1}),
                            to_dtype(sum(keep, {1}, true), h.dtype()));
  check_close(pooled, kIdiomPooled, kTol64);
  check_close(grad_of(pooled, {h})[0], kIdiomPooledGrad, kTol64);
}

TEST_CASE("idiom: torch.where(x != x, torch.zeros_like(x), x)") {
  // x = torch.where(x != x, torch.zeros_like(x), x)   # NaN scrubbing
  const Tensor x = tensor({1.0, NAN, -2.0, NAN}, {4});
  check_close(where(ne(x, x), Tensor::zeros(x.shape(), x.dtype()), x), kIdiomScrubNan, 0.0);
}

TEST_CASE("idiom: F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)") {
  // (torch 2; True = the key takes part. torch 1.13's math path gives the goldens:
  //  (q @ k.transpose(-2, -1) / sqrt(8)).masked_fill(~allowed, -inf).softmax(-1) @ v)
  const Tensor q = tensor(pattern(24, 5, 13, 6, 5.0), {1, 3, 8});
  const Tensor k = tensor(pattern(32, 7, 17, 8, 6.0), {1, 4, 8});
  const Tensor v = tensor(pattern(16, 3, 7, 3, 4.0), {1, 4, 4});
  const Tensor allowed =
      Tensor::from_vector(std::vector<bool>{1, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1}, {3, 4});
  check_close(scaled_dot_product_attention(q, k, v, allowed), kIdiomSdpa, kTol64);
  check_close(plain_scaled_dot_product_attention(q, k, v, allowed), kIdiomSdpa, kTol64);
}

TEST_CASE("idiom: x.masked_fill(ids.eq(PAD).unsqueeze(-1), 0.0)") {
  // x = x.masked_fill(ids.eq(PAD).unsqueeze(-1), 0.0)   # zero the padded positions
  check_close(masked_fill(x_in(), unsqueeze(eq(ids(), PAD), -1), 0.0), kIdiomZeroPad, kTol64);
}

TEST_CASE("idiom: layer(src, src_mask=attn_mask, src_key_padding_mask=ids == PAD)") {
  // layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
  // y = layer(src, src_mask=attn_mask, src_key_padding_mask=ids == PAD)
  TransformerEncoderLayer layer(
      {.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.0, .batch_first = true},
      DType::f64);
  fill_module(layer);
  const Tensor src = x_in(true);
  const Tensor attn_mask = triu(Tensor::ones({4, 4}, DType::b8), 1);
  const Tensor y = layer.forward(src, attn_mask, eq(ids(), PAD));
  check_close(y, kIdiomEncoder, kTol64);
  check_close(grad_of(y, {src})[0], kIdiomEncoderGrad, kTol64);
}

TEST_CASE("idiom: m.logical_or(other)") {
  // m.logical_or(other)
  const Tensor x = u_in();
  std::vector<bool> o(12, false);
  o[0] = o[11] = true;
  const Tensor m = gt(x, 0.0) & lt(x, 1.0);
  check_exact(logical_or(m, Tensor::from_vector(o, {12})), kIdiomLogicalOr, DType::b8);
}

TEST_CASE("idiom: (ids == PAD).any(dim=-1)") {
  // has_pad = (ids == PAD).any(dim=-1)
  check_exact(any(eq(ids(), PAD), -1), kIdiomAnyDim, DType::b8);
}

TEST_CASE("idiom: torch.tensor([0.1, 0.2], dtype=torch.float32).eq(0.1)") {
  // the Python float is rounded to float32 before comparing: True, False
  check_exact(eq(tensor({0.1, 0.2}, {2}, DType::f32), 0.1), kIdiomF32Eq, DType::b8);
}

TEST_CASE("idiom: torch.triu(torch.ones(T, T), diagonal=1).bool()") {
  // torch.triu(torch.ones(T, T), diagonal=1).bool()
  check_exact(triu(Tensor::ones({4, 4}), 1).to(DType::b8), kIdiomTriuBool, DType::b8);
}

TEST_CASE("idiom: print(m.reshape(3, 4))") {
  // print(m.reshape(3, 4))
  const Tensor x = u_in();
  CHECK(to_string(reshape(gt(x, 0.0) & lt(x, 1.0), {3, 4})) == kIdiomPrint);
}
