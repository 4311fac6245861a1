// The translation suite for resizing, the distance losses, random sampling and indexing: PyTorch
// idioms (from torch's documentation examples and the usual training-loop lines), each a test
// case holding the torch lines as a comment and their depthgrad translation line by line, checked
// against PyTorch 1.13 (float64 within 1e-12, float32 within 1e-6; random draws exactly).
// Goldens: tests/pytorch_idioms/ops_index_loss_goldens.h, written by
// tools/pytorch_idioms/ops_index_loss.py (offline). Gradients are those of (y * w).sum() with
// w = torch.linspace(-1, 1, y.numel()).reshape(y.shape).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "tensor/factory.h"
#include "tensor/rng.h"
#include "tests/pytorch_idioms/ops_index_loss_goldens.h"

using namespace dg;
namespace gold = idioms_ops_index_loss;

namespace {

void check_near(const Tensor& t, const std::vector<double>& want, double tol) {
  const std::vector<double> got = t.to_vector();
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    INFO("element " << k << ": got " << got[k] << ", torch " << want[k]);
    CHECK(std::fabs(got[k] - want[k]) <= tol * std::max(1.0, std::fabs(want[k])));
  }
}
void check64(const Tensor& t, const std::vector<double>& want) {
  CHECK(t.dtype() == DType::f64);
  check_near(t, want, 1e-12);
}
void check32(const Tensor& t, const std::vector<double>& want) {
  CHECK(t.dtype() == DType::f32);
  check_near(t, want, 1e-6);
}
void check_ids(const Tensor& t, const std::vector<double>& want) {
  CHECK(t.dtype() == DType::i64);
  CHECK(t.to_vector() == want);
}

// (y * w).sum().backward() with w = torch.linspace(-1, 1, y.numel()).reshape(y.shape)
void weighted_backward(const Tensor& y) {
  backward(sum(y * reshape(linspace(-1, 1, y.numel(), y.dtype()), y.shape())));
}

Tensor leaf(Tensor t) {
  t.set_requires_grad(true);
  return t;
}

// X = torch.arange(24, dtype=torch.float64).view(4, 6) / 10
Tensor X() { return leaf(reshape(arange(0, 24, 1, DType::f64), {4, 6}) / 10.0); }

}  // namespace

TEST_CASE("idiom: F.interpolate(x, scale_factor=2, mode='nearest')") {
  // x = torch.arange(1, 5, dtype=torch.float32).view(1, 1, 2, 2)
  // y = F.interpolate(x, scale_factor=2, mode='nearest')
  const Tensor x = reshape(arange(1, 5, 1, DType::f32), {1, 1, 2, 2});
  const Tensor y = interpolate(x, {.scale_factor = {2}, .mode = "nearest"});
  CHECK(y.shape() == Shape{1, 1, 4, 4});
  check32(y, gold::nearest2);
}

TEST_CASE("idiom: nn.Upsample(scale_factor=2, mode='bilinear', align_corners=False)(x)") {
  // up = nn.Upsample(scale_factor=2, mode='bilinear', align_corners=False); y = up(x)
  // (depthgrad has no Upsample module: the functional form)
  const Tensor x = reshape(arange(1, 5, 1, DType::f32), {1, 1, 2, 2});
  const Tensor y =
      interpolate(x, {.scale_factor = {2}, .mode = "bilinear", .align_corners = false});
  check32(y, gold::upsample_bilinear2);
}

TEST_CASE("idiom: F.interpolate(x, size=(5, 7), mode='bilinear', align_corners=False)") {
  // x = torch.arange(12, dtype=torch.float64).view(1, 1, 3, 4).requires_grad_()
  // y = F.interpolate(x, size=(5, 7), mode='bilinear', align_corners=False)
  const Tensor x = leaf(reshape(arange(0, 12, 1, DType::f64), {1, 1, 3, 4}));
  const Tensor y = interpolate(x, {.size = {5, 7}, .mode = "bilinear", .align_corners = false});
  check64(y, gold::bilinear57_false);
  weighted_backward(y);
  check64(x.grad(), gold::bilinear57_false_grad0);
}

TEST_CASE("idiom: F.interpolate(x, size=(5, 7), mode='bilinear', align_corners=True)") {
  // y = F.interpolate(x, size=(5, 7), mode='bilinear', align_corners=True)
  const Tensor x = leaf(reshape(arange(0, 12, 1, DType::f64), {1, 1, 3, 4}));
  const Tensor y = interpolate(x, {.size = {5, 7}, .mode = "bilinear", .align_corners = true});
  check64(y, gold::bilinear57_true);
  weighted_backward(y);
  check64(x.grad(), gold::bilinear57_true_grad0);
}

TEST_CASE("idiom: F.interpolate(x, scale_factor=0.5)") {
  // x = torch.arange(36, dtype=torch.float64).view(1, 1, 6, 6).requires_grad_()
  // y = F.interpolate(x, scale_factor=0.5)          # nearest is the default mode
  const Tensor x = leaf(reshape(arange(0, 36, 1, DType::f64), {1, 1, 6, 6}));
  const Tensor y = interpolate(x, {.scale_factor = {0.5}});
  check64(y, gold::nearest_half);
  weighted_backward(y);
  check64(x.grad(), gold::nearest_half_grad0);
}

TEST_CASE("idiom: F.interpolate(seq, scale_factor=1.5)") {
  // seq = torch.arange(10, dtype=torch.float64).view(1, 2, 5)   # [N, C, L]
  // y = F.interpolate(seq, scale_factor=1.5)
  const Tensor seq = reshape(arange(0, 10, 1, DType::f64), {1, 2, 5});
  const Tensor y = interpolate(seq, {.scale_factor = {1.5}});
  CHECK(y.shape() == Shape{1, 2, 7});
  check64(y, gold::nearest1d);
}

TEST_CASE("idiom: F.kl_div(F.log_softmax(a, 1), F.softmax(b, 1), reduction='batchmean')") {
  // torch.manual_seed(0)
  // a = torch.randn(3, 5).double().requires_grad_(); b = torch.randn(3, 5).double()...
  // loss = F.kl_div(F.log_softmax(a, 1), F.softmax(b, 1), reduction='batchmean'); loss.backward()
  manual_seed(0);
  const Tensor a = leaf(randn({3, 5}).to(DType::f64));
  const Tensor b = leaf(randn({3, 5}).to(DType::f64));
  const Tensor loss = kl_div(log_softmax(a, 1), softmax(b, 1), Reduction::batchmean);
  check64(loss, gold::kl_batchmean);
  backward(loss);
  check64(a.grad(), gold::kl_batchmean_grad0);
  check64(b.grad(), gold::kl_batchmean_grad1);
}

TEST_CASE("idiom: nn.KLDivLoss(reduction='batchmean', log_target=True)(input, log_target)") {
  // torch.manual_seed(1)
  // inp = F.log_softmax(torch.randn(3, 5), dim=1); tgt = F.log_softmax(torch.rand(3, 5), dim=1)
  // loss = nn.KLDivLoss(reduction='batchmean', log_target=True)(inp, tgt)
  manual_seed(1);
  const Tensor inp = log_softmax(randn({3, 5}), 1);
  const Tensor tgt = log_softmax(rand({3, 5}), 1);
  check32(kl_div(inp, tgt, Reduction::batchmean, /*log_target=*/true), gold::kl_log_target);
}

TEST_CASE("idiom: F.smooth_l1_loss(input, target)") {
  // torch.manual_seed(2)
  // inp = (torch.randn(3, 5) * 2).double().requires_grad_(); tgt = torch.randn(3, 5).double()
  // loss = F.smooth_l1_loss(inp, tgt); loss.backward()
  manual_seed(2);
  const Tensor inp = leaf((randn({3, 5}) * 2.0).to(DType::f64));
  const Tensor tgt = randn({3, 5}).to(DType::f64);
  const Tensor loss = smooth_l1_loss(inp, tgt);
  check64(loss, gold::smooth_l1);
  backward(loss);
  check64(inp.grad(), gold::smooth_l1_grad0);
  // F.smooth_l1_loss(inp.float(), tgt.float(), beta=0.5, reduction='none')
  check32(smooth_l1_loss(detach(inp).to(DType::f32), tgt.to(DType::f32), Reduction::none, 0.5),
          gold::smooth_l1_none);
}

TEST_CASE("idiom: F.huber_loss(input, target, delta=0.5)") {
  // loss = F.huber_loss(inp, tgt, delta=0.5); loss.backward()      (inp, tgt as above)
  manual_seed(2);
  const Tensor inp = leaf((randn({3, 5}) * 2.0).to(DType::f64));
  const Tensor tgt = randn({3, 5}).to(DType::f64);
  const Tensor loss = huber_loss(inp, tgt, Reduction::mean, /*delta=*/0.5);
  check64(loss, gold::huber);
  backward(loss);
  check64(inp.grad(), gold::huber_grad0);
}

TEST_CASE("idiom: F.cosine_similarity(a, b, dim=1)") {
  // torch.manual_seed(3)
  // a = torch.randn(4, 8).double().requires_grad_(); b = torch.randn(4, 8).double()...
  // y = F.cosine_similarity(a, b, dim=1)
  manual_seed(3);
  const Tensor a = leaf(randn({4, 8}).to(DType::f64));
  const Tensor b = leaf(randn({4, 8}).to(DType::f64));
  const Tensor y = cosine_similarity(a, b, /*dim=*/1);
  CHECK(y.shape() == Shape{4});
  check64(y, gold::cosine);
  weighted_backward(y);
  check64(a.grad(), gold::cosine_grad0);
  check64(b.grad(), gold::cosine_grad1);
}

TEST_CASE("idiom: F.cosine_similarity(x.unsqueeze(1), x.unsqueeze(0), dim=-1)") {
  // x = torch.randn(3, 4).double().requires_grad_()      (after the two draws above)
  // sim = F.cosine_similarity(x.unsqueeze(1), x.unsqueeze(0), dim=-1)   # [3, 3] pairwise
  manual_seed(3);
  randn({4, 8});
  randn({4, 8});
  const Tensor x = leaf(randn({3, 4}).to(DType::f64));
  const Tensor sim = cosine_similarity(unsqueeze(x, 1), unsqueeze(x, 0), -1);
  CHECK(sim.shape() == Shape{3, 3});
  check64(sim, gold::cosine_pairwise);
  weighted_backward(sim);
  check64(x.grad(), gold::cosine_pairwise_grad0);
}

TEST_CASE("idiom: torch.randperm(10, generator=g)") {
  // g = torch.Generator().manual_seed(42)
  // perm = torch.randperm(10, generator=g)
  TorchGenerator g(42);
  check_ids(randperm(10, &g), gold::randperm10);
}

TEST_CASE("idiom: idx = torch.randperm(8)[:3]") {
  // torch.manual_seed(0)
  // idx = torch.randperm(8)[:3]
  manual_seed(0);
  check_ids(index(randperm(8), {Slice(None, 3)}), gold::randperm_subset);
}

TEST_CASE("idiom: torch.multinomial(weights, 2)") {
  // weights = torch.tensor([0, 10, 3, 0], dtype=torch.float)
  // torch.manual_seed(1); torch.multinomial(weights, 2)
  const Tensor weights = Tensor::from_vector(std::vector<double>{0, 10, 3, 0}, {4});
  manual_seed(1);
  check_ids(multinomial(weights, 2), gold::multinomial2);
}

TEST_CASE("idiom: torch.multinomial(weights, 4, replacement=True)") {
  // torch.manual_seed(2); torch.multinomial(weights, 4, replacement=True)
  const Tensor weights = Tensor::from_vector(std::vector<double>{0, 10, 3, 0}, {4});
  manual_seed(2);
  check_ids(multinomial(weights, 4, /*replacement=*/true), gold::multinomial_rep);
}

TEST_CASE("idiom: torch.multinomial(F.softmax(logits / 0.8, dim=-1), num_samples=1)") {
  // torch.manual_seed(3); logits = torch.randn(2, 6)
  // next_token = torch.multinomial(F.softmax(logits / 0.8, dim=-1), num_samples=1)
  manual_seed(3);
  const Tensor logits = randn({2, 6});
  const Tensor next_token = multinomial(softmax(logits / 0.8, -1), 1);
  CHECK(next_token.shape() == Shape{2, 1});
  check_ids(next_token, gold::sample_next);
}

TEST_CASE("idiom: x[0]") {
  // X = torch.arange(24, dtype=torch.float64).view(4, 6) / 10;  x = X.requires_grad_()
  // y = x[0]
  const Tensor x = X();
  const Tensor y = select(x, 0, 0);  // or index(x, {0})
  check64(y, gold::x0);
  weighted_backward(y);
  check64(x.grad(), gold::x0_grad0);
}

TEST_CASE("idiom: x[:, 1:3]") {
  // y = x[:, 1:3]
  const Tensor x = X();
  const Tensor y = index(x, {Slice(), Slice(1, 3)});  // or slice(x, 1, 1, 3)
  check64(y, gold::cols13);
  weighted_backward(y);
  check64(x.grad(), gold::cols13_grad0);
}

TEST_CASE("idiom: x[::2]") {
  // y = x[::2]
  const Tensor x = X();
  const Tensor y = index(x, {Slice(None, None, 2)});  // or slice(x, 0, 0, 4, 2)
  CHECK(y.storage() == x.storage());                  // a strided view, as torch's
  check64(y, gold::every2);
  weighted_backward(y);
  check64(x.grad(), gold::every2_grad0);
}

TEST_CASE("idiom: x[..., -1]") {
  // y = x[..., -1]
  const Tensor x = X();
  const Tensor y = index(x, {Ellipsis, -1});
  check64(y, gold::last);
  weighted_backward(y);
  check64(x.grad(), gold::last_grad0);
}

TEST_CASE("idiom: x[1:, ::2]") {
  // y = x[1:, ::2]
  const Tensor x = X();
  const Tensor y = index(x, {Slice(1), Slice(None, None, 2)});
  check64(y, gold::rows_step);
  weighted_backward(y);
  check64(x.grad(), gold::rows_step_grad0);
}

TEST_CASE("idiom: x[:, torch.tensor([5, 0, 5])]") {
  // y = x[:, torch.tensor([5, 0, 5])]
  const Tensor x = X();
  const Tensor y = index(x, {Slice(), Tensor::from_ids({5, 0, 5}, {3})});
  check64(y, gold::pick);
  weighted_backward(y);
  check64(x.grad(), gold::pick_grad0);
}

TEST_CASE("idiom: x[torch.randperm(4)]") {
  // torch.manual_seed(4); shuffled = X[torch.randperm(4)]     # shuffle the rows of a batch
  manual_seed(4);
  check64(index(X(), {randperm(4)}), gold::shuffle_rows);
}

TEST_CASE("idiom: y = x * 2; y[:, 0] = 0") {
  // y = x * 2
  // y[:, 0] = 0                       # the gradient of the overwritten column is 0
  // (y * w).sum().backward()
  const Tensor x = X();
  Tensor y = x * 2.0;
  index_put_(y, {Slice(), 0}, 0.0);
  check64(y, gold::zero_col);
  weighted_backward(y);
  check64(x.grad(), gold::zero_col_grad0);
}

TEST_CASE("idiom: y = x.clone(); y[1:3, 2] = v") {
  // v = torch.tensor([7.0, 8.0], dtype=torch.float64, requires_grad=True)
  // y = x.clone(); y[1:3, 2] = v; z = y * y
  const Tensor x = X();
  const Tensor v = leaf(Tensor::from_vector(std::vector<double>{7, 8}, {2}, DType::f64));
  Tensor y = x.clone();  // recorded, as torch's
  index_put_(y, {Slice(1, 3), 2}, v);
  const Tensor z = y * y;
  check64(z, gold::put_v);
  weighted_backward(z);
  check64(x.grad(), gold::put_v_grad0);
  check64(v.grad(), gold::put_v_grad1);
}
