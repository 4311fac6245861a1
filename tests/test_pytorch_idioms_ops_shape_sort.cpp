// PyTorch idioms of padding, flipping, rolling, triangles, sorting, top-k, variance and one-hot,
// translated line by line into depthgrad: each TEST_CASE holds the torch snippet (from torch's
// documentation examples of F.pad, nn.ReflectionPad*, torch.sort, torch.topk, torch.var,
// torch.flip, torch.roll, torch.tril, F.one_hot, and common tutorial idioms) as a comment, the
// depthgrad lines, and checks against PyTorch 1.13's values: float64 within 1e-12, float32 within
// 1e-6 (relative to max(1, |value|)). The goldens come from tools/pytorch_idioms/ops_shape_sort.py
// (offline; tests/pytorch_idioms/ops_shape_sort_goldens.h).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "tensor/factory.h"
#include "tests/pytorch_idioms/ops_shape_sort_goldens.h"

using namespace dg;
using namespace ops_shape_sort_goldens;

namespace {

// |got − want| <= tolerance · max(1, |want|) elementwise; infinities must match exactly.
void check_close(const Tensor& got, const std::vector<double>& want, double tolerance) {
  const std::vector<double> g = got.to_vector();
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    if (std::isinf(want[i])) {
      CHECK(g[i] == want[i]);
      continue;
    }
    CHECK(std::fabs(g[i] - want[i]) <= tolerance * std::max(1.0, std::fabs(want[i])));
  }
}
void check_exact(const Tensor& got, const std::vector<double>& want) { check_close(got, want, 0); }
double tol(DType d) { return d == DType::f64 ? 1e-12 : 1e-6; }

Tensor tensor(const std::vector<double>& v, const Shape& s, DType d = DType::f64) {
  return Tensor::from_vector(v, s, d);
}
// torch.var's documentation input.
Tensor doc_a(DType d = DType::f64) {
  return tensor({0.2035, 1.2959, 1.8101, -0.4644, 1.5027, -0.3270, 0.5905, 0.6538, -1.5745, 1.3330,
                 -0.5596, -0.6548, 0.1264, -0.5080, 1.6420, 0.1992},
                {4, 4}, d);
}
// The gradient of sum(w ⊙ y), w[k] = ((3k) mod 7 − 3)/4 + 0.1 (the generator's weights).
Tensor grad_of(const Tensor& y, const Tensor& x) {
  std::vector<double> w(y.numel());
  for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<double>((k * 3) % 7) / 4.0 - 0.75 + 0.1;
  return grad({sum(mul(y, tensor(w, y.shape(), y.dtype())))}, {x})[0];
}
Tensor t4d() { return reshape(arange(0.0, 72.0, 1.0, DType::f64), {3, 3, 4, 2}); }

}  // namespace

TEST_CASE("idiom: out = F.pad(t4d, (1, 1), \"constant\", 0)") {
  // t4d = torch.arange(3 * 3 * 4 * 2.).reshape(3, 3, 4, 2)
  // out = F.pad(t4d, (1, 1), "constant", 0)  # pad last dim by 1 on each side
  Tensor out = pad(t4d(), {1, 1}, PadMode::constant, 0);
  CHECK(out.shape() == Shape{3, 3, 4, 4});
  check_exact(out, kPad1d);
}

TEST_CASE("idiom: out = F.pad(t4d, (1, 1, 2, 2), \"constant\", 0)") {
  // out = F.pad(t4d, p2d, "constant", 0)  # p2d = (1, 1, 2, 2)
  Tensor out = pad(t4d(), {1, 1, 2, 2}, PadMode::constant, 0);
  CHECK(out.shape() == Shape{3, 3, 8, 4});
  check_exact(out, kPad2d);
}

TEST_CASE("idiom: F.pad(t4d, (0, 1, 2, 1, 3, 3)).size()") {
  // p3d = (0, 1, 2, 1, 3, 3); out = F.pad(t4d, p3d); out.size()  # torch.Size([3, 9, 7, 3])
  Tensor out = pad(t4d(), {0, 1, 2, 1, 3, 3});
  CHECK(out.shape() == Shape{3, 9, 7, 3});
  CHECK(std::vector<double>(out.shape().begin(), out.shape().end()) == kPad3dShape);
}

TEST_CASE("idiom: F.pad(x, (1, 1), mode='reflect')") {
  // x = torch.tensor([[1., 2., 3., 4.], [5., 6., 7., 8.]]); F.pad(x, (1, 1), mode='reflect')
  for (DType d : {DType::f64, DType::f32}) {
    Tensor x = tensor({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, d);
    Tensor out = pad(x, {1, 1}, PadMode::reflect);
    check_close(out, d == DType::f64 ? kPadReflect64 : kPadReflect32, tol(d));
  }
}

TEST_CASE("idiom: m = nn.ReflectionPad1d(2); m(input)") {
  // input = torch.arange(8, dtype=torch.float).reshape(1, 2, 4); m = nn.ReflectionPad1d(2)
  Tensor input = reshape(arange(8.0, DType::f64), {1, 2, 4});
  Tensor out = pad(input, {2, 2}, PadMode::reflect);
  check_exact(out, kReflectionPad1d);
}

TEST_CASE("idiom: m = nn.ReflectionPad2d(2); m(input)") {
  // input = torch.arange(9, dtype=torch.float).reshape(1, 1, 3, 3); m = nn.ReflectionPad2d(2)
  Tensor input = reshape(arange(9.0, DType::f64), {1, 1, 3, 3});
  Tensor out = pad(input, {2, 2, 2, 2}, PadMode::reflect);
  CHECK(out.shape() == Shape{1, 1, 7, 7});
  check_exact(out, kReflectionPad2d);
}

TEST_CASE("idiom: nn.ReplicationPad2d(2)(input); nn.ReplicationPad2d((1, 1, 2, 0))(input)") {
  // m = nn.ReplicationPad2d(2); m(input)
  // m = nn.ReplicationPad2d((1, 1, 2, 0)); m(input)
  Tensor input = reshape(arange(9.0, DType::f64), {1, 1, 3, 3});
  check_exact(pad(input, {2, 2, 2, 2}, PadMode::replicate), kReplicationPad2d);
  check_exact(pad(input, {1, 1, 2, 0}, PadMode::replicate), kReplicationPad2dTuple);
}

TEST_CASE("idiom: F.pad(input, (1, 2, 3, 0), mode='circular')") {
  // input = torch.arange(9, dtype=torch.float).reshape(1, 1, 3, 3)
  // F.pad(input, (1, 2, 3, 0), mode='circular')  # wraps around: a periodic boundary
  Tensor input = reshape(arange(9.0, DType::f64), {1, 1, 3, 3});
  Tensor out = pad(input, {1, 2, 3, 0}, PadMode::circular);
  CHECK(out.shape() == Shape{1, 1, 6, 6});
  check_exact(out, kPadCircular);
}

TEST_CASE("idiom: m = nn.ConstantPad1d(2, 3.5); m(input)") {
  // input = torch.tensor([[1., -2., 3.]]); nn.ConstantPad1d(2, 3.5)(input)
  Tensor input = tensor({1, -2, 3}, {1, 3});
  check_exact(pad(input, {2, 2}, PadMode::constant, 3.5), kConstantPad1d);
}

TEST_CASE("idiom: F.pad(x, (2, 3), mode='reflect') with a gradient") {
  // x = torch.tensor([[0.5, -1., 2., 0.25, 1.5]], requires_grad=True)
  // y = F.pad(x, (2, 3), mode='reflect'); (y * w).sum().backward(); x.grad
  Tensor x = tensor({0.5, -1, 2, 0.25, 1.5}, {1, 5});
  x.set_requires_grad(true);
  Tensor y = pad(x, {2, 3}, PadMode::reflect);
  check_close(grad_of(y, x), kPadReflectGrad, 1e-12);
}

TEST_CASE("idiom: torch.topk(x, 3)") {
  // x = torch.arange(1., 6.); torch.topk(x, 3)  # values [5., 4., 3.], indices [4, 3, 2]
  for (DType d : {DType::f64, DType::f32}) {
    Tensor x = arange(1.0, 6.0, 1.0, d);
    auto [values, indices] = topk(x, 3);
    check_close(values, d == DType::f64 ? kTopkValues64 : kTopkValues32, tol(d));
    CHECK(indices.dtype() == DType::i64);
    check_exact(indices, kTopkIndices);
  }
}

TEST_CASE("idiom: sorted, indices = torch.sort(x); torch.sort(x, 0)") {
  // sorted, indices = torch.sort(x)
  // sorted, indices = torch.sort(x, 0)
  for (DType d : {DType::f64, DType::f32}) {
    auto [sorted, indices] = sort(doc_a(d));
    check_close(sorted, d == DType::f64 ? kSortValues64 : kSortValues32, tol(d));
    check_exact(indices, kSortIndices);
  }
  auto [sorted0, indices0] = sort(doc_a(), 0);
  check_exact(sorted0, kSort0Values);
  check_exact(indices0, kSort0Indices);
}

TEST_CASE("idiom: x.sort(descending=True).values, with its gradient") {
  // x.sort(descending=True); (x.sort(descending=True).values * w).sum().backward()
  Tensor x = doc_a();
  x.set_requires_grad(true);
  Tensor values = sort(x, -1, /*descending=*/true).values;
  check_exact(values, kSortDescending);
  check_exact(grad_of(values, x), kSortGrad);
}

TEST_CASE("idiom: torch.sort(torch.tensor([0, 1] * 9), stable=True)") {
  // torch.sort(torch.tensor([0, 1] * 9), stable=True).indices
  std::vector<double> v(18);
  for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<double>(k % 2);
  Tensor x = tensor(v, {18}, DType::i64);
  check_exact(sort(x, -1, false, /*stable=*/true).indices, kSortStable);
}

TEST_CASE("idiom: torch.argsort(a, dim=1)") {
  // torch.argsort(a, dim=1)
  Tensor idx = argsort(doc_a(), 1);
  CHECK(idx.dtype() == DType::i64);
  check_exact(idx, kArgsort);
}

TEST_CASE("idiom: torch.var(a, dim=1, keepdim=True)") {
  // torch.var(a, dim=1, keepdim=True)
  for (DType d : {DType::f64, DType::f32}) {
    Tensor v = var(doc_a(d), {1}, 1, /*keepdim=*/true);
    CHECK(v.shape() == Shape{4, 1});
    check_close(v, d == DType::f64 ? kVarKeepdim64 : kVarKeepdim32, tol(d));
  }
}

TEST_CASE("idiom: torch.var(x, dim=1, unbiased=False)") {
  // torch.var(x, dim=1, unbiased=False)  # the population variance: correction 0
  for (DType d : {DType::f64, DType::f32}) {
    Tensor v = var(doc_a(d), {1}, /*correction=*/0);
    check_close(v, d == DType::f64 ? kVarBiased64 : kVarBiased32, tol(d));
  }
}

TEST_CASE("idiom: x.std(dim=None, correction=0)") {
  // x.std(dim=None, correction=0)  # torch 1.13 wants dim beside correction; torch 2:
  // x.std(correction=0)
  for (DType d : {DType::f64, DType::f32}) {
    Tensor s = dg::std(doc_a(d), {}, /*correction=*/0);
    CHECK(s.shape() == Shape{});
    check_close(s, d == DType::f64 ? kStdCorrection064 : kStdCorrection032, tol(d));
  }
}

TEST_CASE("idiom: torch.std(a, dim=1, keepdim=True)") {
  // torch.std(a, dim=1, keepdim=True)
  check_close(dg::std(doc_a(), {1}, 1, true), kStdDim, 1e-12);
}

TEST_CASE("idiom: torch.var_mean(a, dim=0, keepdim=True)") {
  // var, mean = torch.var_mean(a, dim=0, keepdim=True)
  auto [v, m] = var_mean(doc_a(), {0}, 1, true);
  CHECK(v.shape() == Shape{1, 4});
  check_close(v, kVarMeanVar, 1e-12);
  check_close(m, kVarMeanMean, 1e-12);
}

TEST_CASE("idiom: torch.std_mean(a, unbiased=False)") {
  // torch.std_mean(a, unbiased=False)  # (std, mean) of every element
  auto [s, m] = std_mean(doc_a(), {}, /*correction=*/0);
  check_close(stack({s, m}, 0), kStdMean, 1e-12);
}

TEST_CASE("idiom: torch.var(x, dim=0) with its gradient") {
  // x = a.clone().requires_grad_(True); (torch.var(x, dim=0) * w).sum().backward(); x.grad
  Tensor x = doc_a();
  x.set_requires_grad(true);
  check_close(grad_of(var(x, {0}), x), kVarGrad, 1e-12);
}

TEST_CASE("idiom: (x - x.mean(dim=0)) / x.std(dim=0)") {
  // standardise each column: (x - x.mean(dim=0)) / x.std(dim=0)
  for (DType d : {DType::f64, DType::f32}) {
    Tensor x = doc_a(d);
    Tensor z = (x - mean(x, {0})) / dg::std(x, {0});
    check_close(z, d == DType::f64 ? kStandardize64 : kStandardize32, tol(d));
  }
}

TEST_CASE("idiom: torch.tril(torch.ones(3, 3))") {
  // torch.tril(torch.ones(3, 3))
  Tensor t = tril(ones({3, 3}));
  CHECK(t.dtype() == DType::f32);
  check_exact(t, kTrilOnes);
}

TEST_CASE("idiom: torch.tril(b, diagonal=1); torch.triu(b, diagonal=-1)") {
  // torch.tril(b, diagonal=1)
  // torch.triu(b, diagonal=-1)
  Tensor b = tensor({-0.5, 1.25, 0.75,  -2.0, 0.5, 1.5,  0.25,  -1.0,  2.0,   0.125, -0.75, 1.0,
                     1.75, 0.5,  -0.25, 1.0,  2.5, -1.5, -1.25, 0.375, 0.625, -0.5,  1.0,   0.25},
                    {4, 6});
  check_exact(tril(b, 1), kTrilDiag1);
  check_exact(triu(b, -1), kTriuDiagM1);
}

TEST_CASE(
    "idiom: scores.masked_fill(torch.triu(torch.ones(T, T), diagonal=1) == 1, float('-inf'))") {
  // mask = torch.triu(torch.ones(3, 3), diagonal=1) == 1
  // torch.softmax(scores.masked_fill(mask, float('-inf')), -1)
  for (DType d : {DType::f64, DType::f32}) {
    Tensor scores = tensor({0.5, 1.0, -0.5, 2.0, 0.25, 1.5, -1.0, 0.75, 0.0}, {3, 3}, d);
    Tensor mask = eq(triu(ones({3, 3}), 1), 1.0);
    Tensor p = softmax(masked_fill(scores, mask, -INFINITY), -1);
    check_close(p, d == DType::f64 ? kCausal64 : kCausal32, tol(d));
  }
}

TEST_CASE("idiom: torch.flip(x, [0, 1])") {
  // x = torch.arange(8).view(2, 2, 2); torch.flip(x, [0, 1])
  Tensor x = reshape(arange(8), {2, 2, 2});
  Tensor f = flip(x, {0, 1});
  CHECK(f.dtype() == DType::i64);
  check_exact(f, kFlip01);
}

TEST_CASE("idiom: torch.fliplr(x)") {
  // torch.fliplr(torch.arange(6.).view(2, 3))  # fliplr is flip along dim 1
  check_exact(flip(reshape(arange(6.0, DType::f32), {2, 3}), {1}), kFliplr);
}

TEST_CASE("idiom: torch.roll(x, 1); torch.roll(x, 1, 0); torch.roll(x, -1, 0)") {
  // x = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8]).view(4, 2)
  // torch.roll(x, 1); torch.roll(x, 1, 0); torch.roll(x, -1, 0)
  Tensor x = reshape(arange(1, 9), {4, 2});
  check_exact(roll(x, {1}), kRoll1);
  check_exact(roll(x, {1}, {0}), kRoll10);
  check_exact(roll(x, {-1}, {0}), kRollM10);
}

TEST_CASE("idiom: torch.roll(x, shifts=(2, 1), dims=(0, 1))") {
  // torch.roll(x, shifts=(2, 1), dims=(0, 1))
  Tensor x = reshape(arange(1, 9), {4, 2});
  check_exact(roll(x, {2, 1}, {0, 1}), kRoll21);
}

TEST_CASE("idiom: F.one_hot(torch.arange(0, 5) % 3)") {
  // F.one_hot(torch.arange(0, 5) % 3)
  // F.one_hot(torch.arange(0, 5) % 3, num_classes=5)
  // F.one_hot(torch.arange(0, 6).view(3, 2) % 3)
  Tensor ids = tensor({0, 1, 2, 0, 1}, {5}, DType::i64);  // torch.arange(0, 5) % 3
  Tensor h = one_hot(ids);
  CHECK(h.dtype() == DType::i64);
  CHECK(h.shape() == Shape{5, 3});
  check_exact(h, kOneHot);
  check_exact(one_hot(ids, 5), kOneHot5);
  Tensor h32 = one_hot(tensor({0, 1, 2, 0, 1, 2}, {3, 2}, DType::i64));
  CHECK(h32.shape() == Shape{3, 2, 3});
  check_exact(h32, kOneHot32);
}

TEST_CASE("idiom: F.one_hot(y, 4).float() * (1 - 0.1) + 0.1 / 4") {
  // label smoothing: F.one_hot(y, 4).float() * (1 - 0.1) + 0.1 / 4 with y = torch.tensor([2, 0, 1])
  Tensor y = tensor({2, 0, 1}, {3}, DType::i64);
  Tensor smooth = to_dtype(one_hot(y, 4), DType::f32) * (1 - 0.1) + 0.1 / 4;
  check_close(smooth, kSmooth32, 1e-6);
}

TEST_CASE("idiom: _, pred = output.topk(maxk, 1, True, True); correct = pred.eq(target...)") {
  // _, pred = output.topk(2, 1, True, True); pred = pred.t()
  // correct = pred.eq(target.view(1, -1).expand_as(pred))
  // correct.reshape(-1).float().sum(0, keepdim=True) * (100.0 / batch_size)
  Tensor output =
      tensor({0.1, 0.5, 0.2, 0.9, 0.8, 0.1, 0.3, 0.05, 0.2, 0.25, 0.7, 0.6}, {3, 4}, DType::f32);
  Tensor target = tensor({1, 1, 3}, {3}, DType::i64);
  Tensor pred = transpose(topk(output, 2, 1, true, true).indices, 0, 1);
  Tensor correct = eq(pred, expand(reshape(target, {1, -1}), pred.shape()));
  Tensor acc = sum(to_dtype(reshape(correct, {-1}), DType::f32), {0}, true) * (100.0 / 3);
  check_close(acc, kTopkAccuracy, 1e-6);
}

TEST_CASE("idiom: v, _ = torch.topk(logits, k); logits[logits < v[:, [-1]]] = -float('Inf')") {
  // v, _ = torch.topk(logits, 2)
  // logits[logits < v[:, [-1]]] = -float('Inf')  # top-k sampling keeps the k largest logits
  Tensor logits = tensor({1.0, 3.0, 2.0, -1.0, 0.5, 0.25, -2.0, 4.0, 1.0, 3.5}, {2, 5});
  Tensor v = topk(logits, 2).values;
  Tensor filtered = masked_fill(logits, lt(logits, slice(v, 1, -1, 2)), -INFINITY);
  check_exact(filtered, kTopkFilter);
}
