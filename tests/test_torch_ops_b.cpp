// Tests of interpolate (nearest, bilinear), kl_div, smooth_l1_loss, huber_loss,
// cosine_similarity, the indexing ops (select, strided slice, index, index_put, index_put_),
// randperm and multinomial against PyTorch 1.13: forward values and the gradients of a
// random-weighted loss (float64, within 1e-12), float32 forwards (within 1e-6), the random
// draws bit for bit for the same seed, a chi-square check of multinomial's frequencies, in-place
// writes (versions, refusals) and the errors. Finite differences and second derivatives: the rows
// of the gradient-check table (resize_op_cases, indexing_op_cases, loss_op_cases).
// The golden values come from tools/torch_goldens_ops_b.py (offline; not run by the tests).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "tensor/rng.h"
#include "tests/test_helpers.h"
#include "tests/torch_ops_b_goldens.h"

using namespace dg;
using namespace dg::test;
namespace g = torch_ops_b;

namespace {

// ((k·mul) mod mod − shift) / div + offset for k = 0..n−1: the generator's inputs, rebuilt here.
struct Pattern {
  Shape shape;
  int mul, mod, shift;
  double div, offset;
};
Tensor make(const Pattern& p, DType dtype = DType::f64) {
  const int64_t n = shape_numel(p.shape);
  std::vector<double> v(n);
  for (int64_t k = 0; k < n; ++k)
    v[k] = static_cast<double>((k * p.mul) % p.mod - p.shift) / p.div + p.offset;
  Tensor t = Tensor::from_vector(v, p.shape, dtype);
  t.set_requires_grad(true);
  return t;
}
std::vector<double> weights(int64_t n) {
  std::vector<double> w(n);
  for (int64_t k = 0; k < n; ++k) w[k] = static_cast<double>((k * 3) % 7 - 3) / 4.0 + 0.1;
  return w;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                 const std::string& what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    INFO("element " << k << ": got " << got[k] << ", torch " << want[k]);
    CHECK(std::fabs(got[k] - want[k]) <= tol * std::max(1.0, std::fabs(want[k])));
  }
}

// f(inputs) in float64 against torch's forward and the gradients of sum(w ⊙ f) against torch's;
// then in float32 (inputs rounded) against the same forward within 1e-6.
void check_case(const std::string& name, const std::function<Tensor(std::vector<Tensor>&)>& f,
                const std::vector<Pattern>& inputs, const std::vector<double>& out,
                const std::vector<std::vector<double>>& grads) {
  std::vector<Tensor> xs;
  for (const Pattern& p : inputs) xs.push_back(make(p));
  Tensor y = f(xs);
  check_close(y.to_vector(), out, 1e-12, name + ": forward");
  backward(y, Tensor::from_vector(weights(y.numel()), y.shape(), DType::f64));
  for (size_t i = 0; i < xs.size(); ++i)
    check_close(xs[i].grad().to_vector(), grads[i], 1e-12,
                name + ": gradient of input " + std::to_string(i));
  std::vector<Tensor> xs32;
  for (const Pattern& p : inputs) xs32.push_back(make(p, DType::f32));
  Tensor y32 = f(xs32);
  CHECK(y32.dtype() == DType::f32);
  check_close(y32.to_vector(), out, 1e-6, name + ": float32 forward");
}

using Fs = std::vector<Tensor>&;
const Pattern X4{{1, 2, 3, 4}, 5, 11, 5, 3.0, 0.0};
const Pattern X45{{1, 2, 4, 5}, 7, 13, 6, 4.0, 0.0};
const Pattern LP{{3, 4}, 5, 11, 12, 4.0, 0.0}, TP{{3, 4}, 3, 7, -1, 8.0, 0.0};
const Pattern A{{3, 4}, 5, 11, 5, 2.0, 0.0}, B{{3, 4}, 3, 7, 3, 3.0, 0.0};
const Pattern X{{4, 5, 3}, 5, 11, 5, 3.0, 0.0};

std::vector<double> ids_of(const Tensor& t) {
  std::vector<double> v;
  for (double x : t.to_vector()) v.push_back(x);
  return v;
}

}  // namespace

TEST_CASE("interpolate nearest: torch 1.13's indices and gradients") {
  check_case("nearest_scale2", [](Fs x) { return interpolate(x[0], {.scale_factor = {2}}); }, {X4},
             g::nearest_scale2_out, {g::nearest_scale2_grad0});
  check_case("nearest_size57",
             [](Fs x) {
               return interpolate(x[0], {.size = {5, 7}});
             },
             {X4}, g::nearest_size57_out, {g::nearest_size57_grad0});
  check_case("nearest_scale07", [](Fs x) { return interpolate(x[0], {.scale_factor = {0.7}}); },
             {{{1, 2, 5, 6}, 7, 13, 6, 4.0, 0.0}}, g::nearest_scale07_out,
             {g::nearest_scale07_grad0});
  check_case("nearest3d_scale17", [](Fs x) { return interpolate(x[0], {.scale_factor = {1.7}}); },
             {{{2, 2, 5}, 5, 11, 5, 3.0, 0.0}}, g::nearest3d_scale17_out,
             {g::nearest3d_scale17_grad0});
}

TEST_CASE("interpolate bilinear: align_corners, scale factors, recompute_scale_factor") {
  check_case("bilinear_size57",
             [](Fs x) {
               return interpolate(x[0], {.size = {5, 7}, .mode = "bilinear"});
             },
             {X4}, g::bilinear_size57_out, {g::bilinear_size57_grad0});
  check_case(
      "bilinear_size57_ac",
      [](Fs x) {
        return interpolate(x[0], {.size = {5, 7}, .mode = "bilinear", .align_corners = true});
      },
      {X4}, g::bilinear_size57_ac_out, {g::bilinear_size57_ac_grad0});
  check_case("bilinear_scale15",
             [](Fs x) { return interpolate(x[0], {.scale_factor = {1.5}, .mode = "bilinear"}); },
             {X45}, g::bilinear_scale15_out, {g::bilinear_scale15_grad0});
  check_case("bilinear_scale15_recompute",
             [](Fs x) {
               return interpolate(
                   x[0],
                   {.scale_factor = {1.5}, .mode = "bilinear", .recompute_scale_factor = true});
             },
             {X45}, g::bilinear_scale15_recompute_out, {g::bilinear_scale15_recompute_grad0});
  check_case("bilinear_scale06",
             [](Fs x) {
               return interpolate(x[0], {.scale_factor = {0.6, 1.3}, .mode = "bilinear"});
             },
             {{{2, 1, 6, 5}, 5, 17, 8, 5.0, 0.0}}, g::bilinear_scale06_out,
             {g::bilinear_scale06_grad0});
}

TEST_CASE("interpolate: shapes and refusals") {
  Tensor x = Tensor::zeros({1, 2, 3, 4}, DType::f64);
  CHECK(interpolate(x, {.scale_factor = {1.5}, .mode = "bilinear"}).shape() == Shape{1, 2, 4, 6});
  CHECK(interpolate(x, {.size = {2}}).shape() == Shape{1, 2, 2, 2});
  CHECK_THROWS_WITH(interpolate(x, {}), doctest::Contains("either size or scale_factor"));
  CHECK_THROWS_WITH(interpolate(x, {.size = {2, 2}, .scale_factor = {2}}),
                    doctest::Contains("only one of size or scale_factor"));
  CHECK_THROWS_WITH(interpolate(x, {.size = {2, 2, 2}}), doctest::Contains("3 values for 2"));
  CHECK_THROWS_WITH(interpolate(x, {.scale_factor = {2}, .align_corners = true}),
                    doctest::Contains("align_corners option can only be set"));
  CHECK_THROWS_WITH(interpolate(x, {.size = {2}, .mode = "bicubic"}),
                    doctest::Contains("mode 'bicubic' is not supported"));
  CHECK_THROWS_WITH(interpolate(Tensor::zeros({1, 2, 3}), {.size = {2}, .mode = "bilinear"}),
                    doctest::Contains("bilinear mode needs 4-D input"));
  CHECK_THROWS_WITH(interpolate(x, {.size = {2}, .recompute_scale_factor = true}),
                    doctest::Contains("not meaningful with an explicit size"));
  CHECK_THROWS_WITH(interpolate(x, {.scale_factor = {0.2}}),
                    doctest::Contains("should be greater than 0"));
  CHECK_THROWS_WITH(interpolate(Tensor::zeros({2, 3}), {.size = {2}}),
                    doctest::Contains("3-D [N, C, W] or 4-D"));
}

TEST_CASE("kl_div, smooth_l1_loss, huber_loss, cosine_similarity: torch 1.13 values, gradients") {
  const Reduction reds[] = {Reduction::batchmean, Reduction::mean, Reduction::sum, Reduction::none};
  const std::vector<double>* outs[] = {&g::kl_div_batchmean_out, &g::kl_div_mean_out,
                                       &g::kl_div_sum_out, &g::kl_div_none_out};
  const std::vector<double>* g0[] = {&g::kl_div_batchmean_grad0, &g::kl_div_mean_grad0,
                                     &g::kl_div_sum_grad0, &g::kl_div_none_grad0};
  const std::vector<double>* g1[] = {&g::kl_div_batchmean_grad1, &g::kl_div_mean_grad1,
                                     &g::kl_div_sum_grad1, &g::kl_div_none_grad1};
  for (int r = 0; r < 4; ++r)
    check_case("kl_div " + std::to_string(r), [&](Fs x) { return kl_div(x[0], x[1], reds[r]); },
               {LP, TP}, *outs[r], {*g0[r], *g1[r]});
  check_case("kl_div_log_target", [](Fs x) { return kl_div(x[0], x[1], Reduction::sum, true); },
             {LP, {{3, 4}, 3, 7, 9, 4.0, 0.0}}, g::kl_div_log_target_out,
             {g::kl_div_log_target_grad0, g::kl_div_log_target_grad1});
  check_case("smooth_l1_mean", [](Fs x) { return smooth_l1_loss(x[0], x[1]); }, {A, B},
             g::smooth_l1_mean_out, {g::smooth_l1_mean_grad0, g::smooth_l1_mean_grad1});
  check_case("smooth_l1_beta03_none",
             [](Fs x) { return smooth_l1_loss(x[0], x[1], Reduction::none, 0.3); }, {A, B},
             g::smooth_l1_beta03_none_out,
             {g::smooth_l1_beta03_none_grad0, g::smooth_l1_beta03_none_grad1});
  check_case("smooth_l1_beta0_sum",
             [](Fs x) { return smooth_l1_loss(x[0], x[1], Reduction::sum, 0.0); }, {A, B},
             g::smooth_l1_beta0_sum_out,
             {g::smooth_l1_beta0_sum_grad0, g::smooth_l1_beta0_sum_grad1});
  check_case("huber_mean", [](Fs x) { return huber_loss(x[0], x[1]); }, {A, B}, g::huber_mean_out,
             {g::huber_mean_grad0, g::huber_mean_grad1});
  check_case("huber_delta04_none",
             [](Fs x) { return huber_loss(x[0], x[1], Reduction::none, 0.4); }, {A, B},
             g::huber_delta04_none_out, {g::huber_delta04_none_grad0, g::huber_delta04_none_grad1});
  check_case("cosine_dim1", [](Fs x) { return cosine_similarity(x[0], x[1]); }, {A, B},
             g::cosine_dim1_out, {g::cosine_dim1_grad0, g::cosine_dim1_grad1});
  check_case("cosine_broadcast", [](Fs x) { return cosine_similarity(x[0], x[1], -1); },
             {{{2, 3, 4}, 5, 11, 5, 2.0, 0.0}, {{3, 1}, 3, 7, 3, 3.0, 0.5}},
             g::cosine_broadcast_out, {g::cosine_broadcast_grad0, g::cosine_broadcast_grad1});
  check_case("cosine_small_norm", [](Fs x) { return cosine_similarity(x[0], x[1], 0, 0.5); },
             {{{2, 3}, 1, 5, 2, 10.0, 0.0}, {{2, 3}, 3, 7, 3, 3.0, 0.0}}, g::cosine_small_norm_out,
             {g::cosine_small_norm_grad0, g::cosine_small_norm_grad1});
}

TEST_CASE("losses: refusals") {
  Tensor a = Tensor::zeros({2, 3}, DType::f64), b = Tensor::zeros({2, 3}, DType::f64);
  CHECK_THROWS_WITH(smooth_l1_loss(a, b, Reduction::mean, -1.0),
                    doctest::Contains("smooth_l1_loss: beta must be >= 0"));
  CHECK_THROWS_WITH(huber_loss(a, b, Reduction::mean, 0.0),
                    doctest::Contains("huber_loss: delta must be > 0"));
  CHECK_THROWS_WITH(mse_loss(a, b, Reduction::batchmean),
                    doctest::Contains("mse_loss: reduction batchmean is kl_div's only"));
  CHECK_THROWS_WITH(huber_loss(a, Tensor::zeros({3}, DType::f64)),
                    doctest::Contains("huber_loss: expected a target of the input's shape"));
  CHECK_THROWS_WITH(kl_div(a, Tensor::zeros({2, 3})), doctest::Contains("kl_div: dtypes differ"));
  CHECK_THROWS_WITH(cosine_similarity(a, Tensor::zeros({3, 3}, DType::f64)),
                    doctest::Contains("cannot be broadcast"));
  CHECK_THROWS_WITH(cosine_similarity(a, b, 2), doctest::Contains("cosine_similarity"));
  CHECK(kl_div(Tensor::full({}, -1.0, DType::f64), Tensor::full({}, 0.0, DType::f64),
               Reduction::batchmean)
            .item() == 0.0);  // xlogy(0, 0) = 0; a 0-d input's batchmean is the sum
}

TEST_CASE("indexing: select, strided slices, index, index_put_ against torch 1.13") {
  check_case("select_neg", [](Fs x) { return select(x[0], 1, -2); }, {X}, g::select_neg_out,
             {g::select_neg_grad0});
  check_case("slice_step", [](Fs x) { return slice(slice(x[0], 0, 1, 4, 2), 1, 0, 5, 3); }, {X},
             g::slice_step_out, {g::slice_step_grad0});
  check_case("slice_step via index",
             [](Fs x) {
               return index(x[0], {Slice(1, 4, 2), Slice(None, None, 3)});
             },
             {X}, g::slice_step_out, {g::slice_step_grad0});
  check_case("index_mixed",
             [](Fs x) {
               return index(x[0], {Ellipsis, Slice(1), 2});
             },
             {X}, g::index_mixed_out, {g::index_mixed_grad0});
  const Pattern V{{4, 3}, 3, 7, 3, 3.0, 0.0};
  check_case("put_column",
             [](Fs x) {
               Tensor y = x[0] * 2.0;
               index_put_(y, {Slice(), 1}, x[1]);
               return y * y;
             },
             {X, V}, g::put_column_out, {g::put_column_grad0, g::put_column_grad1});
  check_case("put_column out of place",
             [](Fs x) {
               const Tensor y = index_put(x[0] * 2.0, {Slice(), 1}, x[1]);
               return y * y;
             },
             {X, V}, g::put_column_out, {g::put_column_grad0, g::put_column_grad1});
  check_case("put_slice_broadcast",
             [](Fs x) {
               Tensor y = contiguous(x[0] * 1.0);
               index_put_(y, {Slice(1, 4, 2), Slice(), 0}, select(x[1], 0, 0));
               return sin(y);
             },
             {X, {{1, 5}, 3, 7, 3, 3.0, 0.0}}, g::put_slice_broadcast_out,
             {g::put_slice_broadcast_grad0, g::put_slice_broadcast_grad1});
}

TEST_CASE("indexing: views, Python slicing, versions and refusals") {
  Tensor x =
      Tensor::from_vector(std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10}, DType::f64);
  CHECK(index(x, {Slice(None, None, 2)}).to_vector() == std::vector<double>{0, 2, 4, 6, 8});
  CHECK(index(x, {Slice(-3, 100)}).to_vector() == std::vector<double>{7, 8, 9});  // clamped
  CHECK(index(x, {Slice(7, 2)}).numel() == 0);
  CHECK(index(x, {-1}).item() == 9.0);
  CHECK(index(x, {Slice(1, 9, 3)}).storage() == x.storage());  // a view, as torch's
  CHECK(index(x, {Tensor::from_ids({3, 3, 0}, {3})}).to_vector() == std::vector<double>{3, 3, 0});
  CHECK_THROWS_WITH(index(x, {10}), doctest::Contains("index 10 is out of bounds for axis 0"));
  CHECK_THROWS_WITH(index(x, {Slice(0, 5, 0)}), doctest::Contains("step must be greater than"));
  CHECK_THROWS_WITH(index(x, {0, 0}), doctest::Contains("too many indices"));
  CHECK_THROWS_WITH(index(x, {Ellipsis, Ellipsis}), doctest::Contains("single ellipsis"));
  CHECK_THROWS_WITH(slice(x, 0, 0, 11, 2), doctest::Contains("out of range"));
  CHECK_THROWS_WITH(slice(x, 0, 0, 5, -1), doctest::Contains("step must be greater than zero"));
  CHECK_THROWS_WITH(select(x, 0, -11), doctest::Contains("index -11 is out of bounds"));

  // in-place writes bump the version; a leaf that requires grad is refused, as torch
  Tensor y = Tensor::zeros({2, 3}, DType::f64);
  const uint64_t v0 = y.version();
  index_put_(y, {Slice(), 0}, 5.0);
  CHECK(y.version() == v0 + 1);
  CHECK(y.to_vector() == std::vector<double>{5, 0, 0, 5, 0, 0});
  Tensor leaf = Tensor::zeros({2, 3}, DType::f64);
  leaf.set_requires_grad(true);
  CHECK_THROWS_WITH(index_put_(leaf, {0}, 1.0),
                    doctest::Contains("a leaf tensor that requires grad"));
  {
    NoGradGuard no_grad;  // allowed without recording, as torch under no_grad
    index_put_(leaf, {0}, 1.0);
  }
  CHECK(leaf.to_vector() == std::vector<double>{1, 1, 1, 0, 0, 0});
  CHECK(leaf.is_leaf());
  // writing into a view of the graph, or a tensor other handles hold, is refused
  Tensor view = slice(leaf * 1.0, 0, 0, 1);
  CHECK_THROWS_WITH(index_put_(view, {0}, 1.0), doctest::Contains("is a view (made by 'slice')"));
  Tensor shared = leaf * 1.0;
  Tensor other = shared;
  CHECK_THROWS_WITH(index_put_(shared, {0}, 1.0), doctest::Contains("held by 2 handles"));
  // a tensor a backward saved: the write is seen at backward, as torch's version check
  Tensor e = exp(leaf);
  index_put_(e, {0, 0}, 0.0);
  CHECK_THROWS_WITH(backward(sum(e)), doctest::Contains("modified by an in-place write"));
  // values: dtype and shape
  Tensor z = Tensor::zeros({2, 3}, DType::f64);
  CHECK_THROWS_WITH(index_put_(z, {0}, Tensor::zeros({3})), doctest::Contains("dtypes differ"));
  CHECK_THROWS_WITH(index_put(z, {0}, Tensor::zeros({2}, DType::f64)),
                    doctest::Contains("cannot be broadcast to the indexed region [3]"));
  CHECK_THROWS_WITH(index_put(z, {Tensor::from_ids({0}, {1})}, 1.0),
                    doctest::Contains("tensor indices are not supported for writes"));
}

TEST_CASE("indexing: the in-place write's history, and create_graph through index_put") {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}, DType::f64);
  x.set_requires_grad(true);
  Tensor v = Tensor::from_vector(std::vector<double>{7, 8}, {2}, DType::f64);
  v.set_requires_grad(true);
  Tensor y = x * 3.0;
  index_put_(y, {Slice(), 0}, v);  // y = [[7, 6], [8, 12]]
  CHECK(std::string(recorded_op(y)) == "index_put_");
  CHECK(y.to_vector() == std::vector<double>{7, 6, 8, 12});
  Tensor l = sum(y * y);
  auto grads = grad({l}, {x, v}, {}, true, true);
  CHECK(grads[0].to_vector() == std::vector<double>{0, 36, 0, 72});  // 2·y·3 off the column
  CHECK(grads[1].to_vector() == std::vector<double>{14, 16});
  backward(sum(grads[1] * grads[1]));  // d/dv Σ (2v)² = 8v
  CHECK(v.grad().to_vector() == std::vector<double>{56, 64});
}

TEST_CASE("indexing: index_put_ twice on one tensor, as torch's loop of out[t] = ...") {
  // w = torch.tensor([1., 2., 3.], requires_grad=True); out = torch.zeros(2, 3)
  // for t in range(2): out[t] = w * (t + 1)
  // (out * W).sum().backward()   # out [[1, 2, 3], [2, 4, 6]], w.grad [2, 6, 1]
  Tensor w = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3}, DType::f64);
  w.set_requires_grad(true);
  Tensor out = Tensor::zeros({2, 3}, DType::f64);
  for (int64_t t = 0; t < 2; ++t) index_put_(out, {t}, w * static_cast<double>(t + 1));
  CHECK(out.to_vector() == std::vector<double>{1, 2, 3, 2, 4, 6});
  const Tensor W =
      Tensor::from_vector(std::vector<double>{1, -2, 3, 0.5, 4, -1}, {2, 3}, DType::f64);
  backward(sum(out * W));
  CHECK(w.grad().to_vector() == std::vector<double>{2, 6, 1});
  // torch's x[mask] is masked_select here: a bool index is refused, naming it.
  CHECK_THROWS_WITH_AS(index(out, {gt(out, 2.0)}), doctest::Contains("masked_select(x, mask)"),
                       std::invalid_argument);
  // A view of another tensor is still refused (the base's history is not rewritten).
  Tensor base = reshape(w * 1.0, {3, 1});
  Tensor row = select(base, 0, 0);
  CHECK_THROWS_WITH_AS(index_put_(row, {0}, 5.0), doctest::Contains("is a view"),
                       std::invalid_argument);
}

TEST_CASE("randperm and multinomial: torch 1.13's values for the same seed") {
  auto perm = [](int64_t n, uint64_t seed) {
    TorchGenerator gen(seed);
    return ids_of(randperm(n, &gen));
  };
  CHECK(perm(10, 0) == g::randperm_10_seed0);
  CHECK(perm(37, 123) == g::randperm_37_seed123);
  CHECK(perm(1, 5) == g::randperm_1_seed5);
  CHECK(perm(100, 2026) == g::randperm_100_seed2026);
  TorchGenerator gen(7);
  std::vector<double> two = ids_of(randperm(6, &gen));
  for (double v : ids_of(randperm(9, &gen))) two.push_back(v);
  CHECK(two == g::randperm_then_randperm);
  TorchGenerator g2(0);
  CHECK(randperm(10, &g2, DType::f64).dtype() == DType::f64);
  CHECK(randperm(0).numel() == 0);

  const Tensor w =
      Tensor::from_vector(std::vector<double>{0.1, 2.0, 0.5, 0.0, 1.4, 3.0}, {6}, DType::f64);
  const Tensor w2 = Tensor::from_vector(
      std::vector<double>{0.2, 0.3, 0.5, 1.0, 4.0, 0.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0}, {3, 4},
      DType::f64);
  struct Case {
    const Tensor* w;
    int64_t k;
    bool rep;
    uint64_t seed;
    const std::vector<double>* f64;
    const std::vector<double>* f32;
  };
  const Case cases[] = {
      {&w, 1, false, 3, &g::multinomial_one_f64, &g::multinomial_one_f32},
      {&w, 3, false, 4, &g::multinomial_three_f64, &g::multinomial_three_f32},
      {&w, 8, true, 5, &g::multinomial_rep8_f64, &g::multinomial_rep8_f32},
      {&w, 1, true, 6, &g::multinomial_one_rep_f64, &g::multinomial_one_rep_f32},
      {&w2, 2, false, 8, &g::multinomial_rows2_f64, &g::multinomial_rows2_f32},
      {&w2, 5, true, 9, &g::multinomial_rows_rep5_f64, &g::multinomial_rows_rep5_f32},
  };
  for (const Case& c : cases) {
    INFO("k " << c.k << ", replacement " << c.rep << ", seed " << c.seed);
    TorchGenerator a(c.seed), b(c.seed);
    const Tensor s64 = multinomial(*c.w, c.k, c.rep, &a);
    CHECK(s64.dtype() == DType::i64);
    CHECK(s64.shape() == (c.w->dim() == 2 ? Shape{c.w->size(0), c.k} : Shape{c.k}));
    CHECK(ids_of(s64) == *c.f64);
    CHECK(ids_of(multinomial(c.w->to(DType::f32), c.k, c.rep, &b)) == *c.f32);
  }
}

TEST_CASE("multinomial: frequencies (chi-square), and refusals") {
  // 60,000 draws of one sample from p ∝ (1, 2, 3, 4): χ² with 3 degrees of freedom stays below
  // 16.27 (p = 0.001) for the fixed seed; the same for 4 samples with replacement per draw.
  const Tensor p = Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {4}, DType::f64);
  for (bool rep : {false, true}) {
    TorchGenerator gen(99);
    std::vector<double> count(4, 0.0);
    const int64_t draws = 15000, k = rep ? 4 : 1;
    for (int64_t d = 0; d < draws * (rep ? 1 : 4); ++d)
      for (double i : multinomial(p, k, rep, &gen).to_vector()) count[static_cast<size_t>(i)] += 1;
    double chi2 = 0;
    for (int c = 0; c < 4; ++c) {
      const double expected = 60000.0 * (c + 1) / 10.0;
      chi2 += (count[c] - expected) * (count[c] - expected) / expected;
    }
    INFO("replacement " << rep << ": chi-square " << chi2);
    CHECK(chi2 < 16.27);
  }
  const Tensor bad = Tensor::from_vector(std::vector<double>{1, -1}, {2}, DType::f64);
  CHECK_THROWS_WITH(multinomial(bad, 1), doctest::Contains("element < 0"));
  CHECK_THROWS_WITH(multinomial(Tensor::zeros({3}, DType::f64), 1),
                    doctest::Contains("sum of probabilities <= 0"));
  CHECK_THROWS_WITH(multinomial(p, 5), doctest::Contains("cannot sample num_samples = 5 > 4"));
  CHECK_THROWS_WITH(multinomial(p, 0), doctest::Contains("<= 0 samples"));
  CHECK_THROWS_WITH(multinomial(Tensor::from_ids({1, 2}, {2}), 1),
                    doctest::Contains("floating-point"));
  CHECK_THROWS_WITH(multinomial(Tensor::zeros({1, 2, 3}), 1), doctest::Contains("1 or 2 axes"));
  CHECK_THROWS_WITH(randperm(-1), doctest::Contains("randperm: n must be non-negative"));
  CHECK_THROWS_WITH(randperm((int64_t{1} << 24) + 1, nullptr, DType::f32),
                    doctest::Contains("too large for float32"));
}
