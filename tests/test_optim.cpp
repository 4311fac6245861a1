// Optimisers, clipping and schedules against hand-computed torch semantics (double precision),
// on a tiny module flattened into flat buffers.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "nn/layers.h"
#include "tensor/threads.h"
#include "train/optim.h"

using namespace dg;

namespace {
// A module with a matrix, a norm gain and a route-like matrix, in float64.
struct Tiny : Module {
  Tiny() : Module(DType::f64) {
    w = register_parameter("w", Tensor::from_vector({0.5, -1.0, 2.0, 0.25}, {2, 2}, DType::f64));
    g = register_parameter("norm.weight", Tensor::from_vector({1.0, 1.5}, {2}, DType::f64));
    r = register_parameter("qk_route.weight", Tensor::from_vector({0.1, -0.2}, {1, 2}, DType::f64));
  }
  Tensor w, g, r;
};

void set_grads(FlatParameters& flat, const std::vector<double>& per_slot_values) {
  flat.zero_grad();
  double* gptr = flat.gradients.data<double>();
  size_t k = 0;
  for (auto& slot : flat.slots)
    for (int64_t i = 0; i < slot.numel; ++i) gptr[slot.offset + i] = per_slot_values[k++];
}
}  // namespace

TEST_CASE("AdamW follows torch's update exactly (decoupled decay, bias corrections)") {
  for (DecayPolicy policy : {DecayPolicy::all, DecayPolicy::matrices_only}) {
    Tiny m;
    FlatParameters flat = flatten_parameters(m);
    AdamWConfig cfg;
    cfg.lr = 1e-2;
    cfg.weight_decay = 0.1;
    cfg.decay = policy;
    AdamW opt(flat, cfg);
    std::vector<double> p0 = m.w.to_vector(), g0 = m.g.to_vector(), r0 = m.r.to_vector();
    std::vector<double> grads1{0.3, -0.1, 0.05, 1.0, -0.4, 0.2, 0.7, -0.9};
    std::vector<double> grads2{-0.2, 0.6, 0.1, 0.0, 0.3, -0.5, 0.2, 0.4};
    // hand-computed reference over all 8 elements
    std::vector<double> p;
    for (auto* v : {&p0, &g0, &r0}) p.insert(p.end(), v->begin(), v->end());
    std::vector<double> mm(8, 0), vv(8, 0);
    std::vector<bool> decays{true,
                             true,
                             true,
                             true,
                             policy == DecayPolicy::all,
                             policy == DecayPolicy::all,
                             policy == DecayPolicy::all,
                             policy == DecayPolicy::all};
    for (int t = 1; t <= 2; ++t) {
      const std::vector<double>& gr = t == 1 ? grads1 : grads2;
      set_grads(flat, gr);
      opt.step(cfg.lr);
      for (int i = 0; i < 8; ++i) {
        if (decays[i]) p[i] *= 1 - cfg.lr * cfg.weight_decay;
        mm[i] = 0.9 * mm[i] + 0.1 * gr[i];
        vv[i] = 0.999 * vv[i] + 0.001 * gr[i] * gr[i];
        double denom = std::sqrt(vv[i]) / std::sqrt(1 - std::pow(0.999, t)) + 1e-8;
        p[i] -= cfg.lr / (1 - std::pow(0.9, t)) * mm[i] / denom;
      }
    }
    std::vector<double> got;
    for (const Tensor& t : {m.w, m.g, m.r}) {
      auto v = t.to_vector();
      got.insert(got.end(), v.begin(), v.end());
    }
    for (int i = 0; i < 8; ++i) CHECK(got[i] == doctest::Approx(p[i]).epsilon(1e-14));
    CHECK(opt.steps_taken() == 2);
  }
}

TEST_CASE("SGD with momentum and weight decay follows torch's update") {
  Tiny m;
  FlatParameters flat = flatten_parameters(m);
  SGD opt(flat, 0.9, 0.01);
  std::vector<double> p = flat.values.to_vector();
  std::vector<double> buf(p.size(), 0.0);
  std::vector<double> g{0.3, -0.1, 0.05, 1.0, -0.4, 0.2, 0.7, -0.9};
  std::vector<double> g_flat(flat.total, 0.0);
  size_t k = 0;
  for (auto& slot : flat.slots)
    for (int64_t i = 0; i < slot.numel; ++i) g_flat[slot.offset + i] = g[k++];
  for (int t = 0; t < 3; ++t) {
    set_grads(flat, g);
    opt.step(0.1);
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g_flat[i] + 0.01 * p[i];
      buf[i] = t == 0 ? d : 0.9 * buf[i] + d;
      p[i] -= 0.1 * buf[i];
    }
  }
  std::vector<double> got = flat.values.to_vector();
  for (size_t i = 0; i < p.size(); ++i) CHECK(got[i] == doctest::Approx(p[i]).epsilon(1e-14));
}

TEST_CASE("global-norm clipping reports the pre-clip norm and whether it clipped") {
  Tiny m;
  FlatParameters flat = flatten_parameters(m);
  std::vector<double> g{3, 0, 0, 4, 0, 0, 0, 0};  // norm 5
  set_grads(flat, g);
  ClipResult r = clip_grad_norm(flat, 1.0);
  CHECK(r.total_norm == doctest::Approx(5.0));
  CHECK(r.clipped);
  CHECK(m.w.grad().at({0, 0}) == doctest::Approx(3.0 / (5.0 + 1e-6)));
  set_grads(flat, {0.3, 0, 0, 0.4, 0, 0, 0, 0});  // norm 0.5: unchanged
  r = clip_grad_norm(flat, 1.0);
  CHECK_FALSE(r.clipped);
  CHECK(m.w.grad().at({0, 0}) == doctest::Approx(0.3));
}

TEST_CASE("learning-rate schedules") {
  Schedule c = Schedule::parse("constant", 1e-3, 0, 100);
  CHECK(c.at(0) == 1e-3);
  CHECK(c.at(99) == 1e-3);
  Schedule w = Schedule::parse("cosine", 1e-3, 10, 110);
  CHECK(w.at(0) == doctest::Approx(1e-4));
  CHECK(w.at(9) == doctest::Approx(1e-3));
  CHECK(w.at(10) == doctest::Approx(1e-3));
  CHECK(w.at(60) == doctest::Approx(1e-3 * (0.1 + 0.9 * 0.5)));
  CHECK(w.at(110) == doctest::Approx(1e-4));
  CHECK_THROWS_WITH(Schedule::parse("linear", 1e-3, 0, 10), doctest::Contains("linear"));
  CHECK_THROWS(Schedule::parse("cosine", -1, 0, 10));
}

namespace {
struct Big : Module {
  Big() : Module(DType::f32) {
    w = register_parameter("w", Tensor::zeros({300, 300}, DType::f32));
    b = register_parameter("b", Tensor::zeros({300}, DType::f32));
  }
  Tensor w, b;
};
// Runs clip + 3 AdamW steps on a parameter large enough for the parallel paths; returns the bytes.
std::vector<float> clip_and_adamw_at(int threads, double& norm) {
  set_threads(threads);
  Big m;
  FlatParameters flat = flatten_parameters(m);
  float* p = flat.values.data<float>();
  for (int64_t i = 0; i < flat.total; ++i) p[i] = std::sin(0.37 * static_cast<double>(i));
  AdamW opt(flat, AdamWConfig{});
  for (int step = 0; step < 3; ++step) {
    float* g = flat.gradients.data<float>();
    for (int64_t i = 0; i < flat.total; ++i)
      g[i] = static_cast<float>(std::cos(0.11 * static_cast<double>(i) + step));
    norm = clip_grad_norm(flat, 1.0).total_norm;
    opt.step(1e-3);
  }
  return flat.values.to_floats();
}
}  // namespace

TEST_CASE("clipping and AdamW give the same bits at 1 and 2 threads") {
  const int before = threads();
  double n1 = 0, n2 = 0;
  std::vector<float> a = clip_and_adamw_at(1, n1), b = clip_and_adamw_at(2, n2);
  set_threads(before);
  CHECK(n1 == n2);
  CHECK(n1 > 1.0);  // the clipping path really ran
  REQUIRE(a.size() == b.size());
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}
