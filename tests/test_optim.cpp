// Optimisers, clipping and schedules against hand-computed torch semantics (double precision),
// on a tiny module flattened into flat buffers.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "nn/layers.h"
#include "tensor/threads.h"
#include "train/optim.h"

using namespace dg;

namespace {
// A module with a matrix, a norm gain and a route-like matrix, in float64.
struct Tiny : Module {
  Tiny() : Module(DType::f64) {
    w = register_parameter("w", Tensor::from_vector({0.5, -1.0, 2.0, 0.25}, {2, 2}, DType::f64));
    g = register_module("norm", std::make_unique<Module>(DType::f64))
            .register_parameter("weight", Tensor::from_vector({1.0, 1.5}, {2}, DType::f64));
    r = register_module("qk_route", std::make_unique<Module>(DType::f64))
            .register_parameter("weight", Tensor::from_vector({0.1, -0.2}, {1, 2}, DType::f64));
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
  SGD opt(flat, 1e-2, 0.9, 0.01);
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
    // above the clip's parallel threshold (kClipParallelMin, 2^19 elements), so above AdamW's too
    w = register_parameter("w", Tensor::zeros({800, 800}, DType::f32));
    b = register_parameter("b", Tensor::zeros({800}, DType::f32));
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

// ---- the tensor and group API against torch 1.13 ----------------------------------------------
//
// Expected values made offline with torch 1.13 (float64, foreach=False): w = W0 [2, 2] and
// b = B0 [3] as leaf tensors, three steps with w.grad = GW[t], b.grad = GB[t] before each
// opt.step(), then print(w.flatten().tolist() + b.tolist()). The optimisers, as written there:
//   sgd_nesterov: SGD([{params: [w]}, {params: [b], lr: 0.05, weight_decay: 0}], lr=0.1,
//                 momentum=0.9, nesterov=True, weight_decay=0.01)
//   sgd_dampening: SGD([{params: [w]}, {params: [b], lr: 0.05}], lr=0.1, momentum=0.8,
//                  dampening=0.3, weight_decay=0.02)
//   adam: Adam([{params: [w], weight_decay: 0.1}, {params: [b], lr: 5e-3}], lr=1e-2)
//   adamw: AdamW([{params: [w]}, {params: [b], lr: 2e-2, weight_decay: 0}], lr=1e-2,
//          weight_decay=0.1)
//   clip: w.grad = GW[2], b.grad = GB[2]; clip_grad_norm_([w, b], 0.5) in float64 and float32.
namespace {
const std::vector<double> kW0{0.5, -1.0, 2.0, 0.25}, kB0{0.1, -0.2, 0.3};
const std::vector<double> kGW[3] = {
    {0.3, -0.1, 0.05, 1.0}, {-0.2, 0.6, 0.1, 0.0}, {0.4, -0.7, 0.25, -0.5}};
const std::vector<double> kGB[3] = {{-0.4, 0.2, 0.7}, {0.3, -0.5, 0.2}, {-0.1, 0.9, -0.3}};
const std::vector<double> kTorchSgdNesterov{
    0.3712489848005, -0.987061212551,      1.892222357987,     0.00012033938524998785,
    0.13763,         -0.25214000000000003, 0.18103499999999997};
const std::vector<double> kTorchSgdDampening{
    0.41973755924,  -0.99340361648,       1.94015906236, 0.039306813020000005,
    0.132917260751, -0.22350765680200002, 0.211273985703};
const std::vector<double> kTorchAdam{0.4803246366825222,  -0.9910460010906349, 1.9700972198517932,
                                     0.23100563016688117, 0.10641205481125207, -0.20465300275503107,
                                     0.2889413782760931};
const std::vector<double> kTorchAdamW{
    0.4815833223946515, -0.9915954409656003,  1.965507326371672,  0.23080418603230263,
    0.1256482192450082, -0.21861201102012423, 0.25576551310437246};
const double kTorchClipNorm64 = 1.3683932183404008, kTorchClipNorm32 = 1.3683931827545166;
const std::vector<double> kTorchClipped64{
    0.1461567122393732,  -0.2557742464189031, 0.09134794514960826, -0.1826958902992165,
    -0.0365391780598433, 0.3288526025385897,  -0.10961753417952991};

struct TwoTensors {
  Tensor w = Tensor::from_vector(kW0, {2, 2}, DType::f64).set_requires_grad(true);
  Tensor b = Tensor::from_vector(kB0, {3}, DType::f64).set_requires_grad(true);
  void set_step_grads(int t) {
    w.set_grad(Tensor::from_vector(kGW[t], {2, 2}, DType::f64));
    b.set_grad(Tensor::from_vector(kGB[t], {3}, DType::f64));
  }
  std::vector<double> values() const {
    std::vector<double> out = w.to_vector(), bv = b.to_vector();
    out.insert(out.end(), bv.begin(), bv.end());
    return out;
  }
};

std::vector<double> three_steps(TwoTensors& t, Optimizer& opt) {
  for (int step = 0; step < 3; ++step) {
    t.set_step_grads(step);
    opt.step();
  }
  return t.values();
}

void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-13));
  }
}
}  // namespace

TEST_CASE("SGD over parameter groups matches torch (Nesterov, dampening, per-group lr and decay)") {
  {
    TwoTensors t;
    SGD opt({{.params = {t.w}}, {.params = {t.b}, .lr = 0.05, .weight_decay = 0.0}},
            SGDConfig{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
    check_close(three_steps(t, opt), kTorchSgdNesterov);
  }
  {
    TwoTensors t;
    SGD opt({{.params = {t.w}}, {.params = {t.b}, .lr = 0.05}},
            SGDConfig{.lr = 0.1, .momentum = 0.8, .dampening = 0.3, .weight_decay = 0.02});
    check_close(three_steps(t, opt), kTorchSgdDampening);
  }
}

TEST_CASE("Adam and AdamW over parameter groups match torch") {
  {
    TwoTensors t;
    Adam opt({{.params = {t.w}, .weight_decay = 0.1}, {.params = {t.b}, .lr = 5e-3}},
             AdamConfig{.lr = 1e-2, .weight_decay = 0.0});
    check_close(three_steps(t, opt), kTorchAdam);
  }
  {
    TwoTensors t;
    AdamW opt({{.params = {t.w}}, {.params = {t.b}, .lr = 2e-2, .weight_decay = 0.0}},
              AdamWConfig{.lr = 1e-2, .weight_decay = 0.1});
    check_close(three_steps(t, opt), kTorchAdamW);
    CHECK(opt.steps_taken() == 3);
    CHECK(opt.exp_avg(1).numel() == 3);
  }
}

TEST_CASE("clip_grad_norm over a tensor list matches torch and the flat overload") {
  for (DType dtype : {DType::f64, DType::f32}) {
    Tensor w = Tensor::from_vector(kW0, {2, 2}, dtype).set_requires_grad(true);
    Tensor b = Tensor::from_vector(kB0, {3}, dtype).set_requires_grad(true);
    Tensor unused = Tensor::zeros({2}, dtype).set_requires_grad(true);  // no gradient: skipped
    w.set_grad(Tensor::from_vector(kGW[2], {2, 2}, dtype));
    b.set_grad(Tensor::from_vector(kGB[2], {3}, dtype));
    ClipResult r = clip_grad_norm({w, b, unused, w}, 0.5);  // w twice: counted once
    CHECK(r.clipped);
    if (dtype == DType::f64) {
      CHECK(r.total_norm == kTorchClipNorm64);
      std::vector<double> got = w.grad().to_vector(), gb = b.grad().to_vector();
      got.insert(got.end(), gb.begin(), gb.end());
      check_close(got, kTorchClipped64);
    } else {
      CHECK(r.total_norm == kTorchClipNorm32);
    }
  }
  // The same bits as the flat overload on a module's parameters (blocks cross 8192 elements).
  struct Wide : Module {
    Tensor w = register_parameter("w", Tensor::zeros({130, 90}, DType::f32));
    Tensor b = register_parameter("b", Tensor::zeros({90}, DType::f32));
  };
  Wide flat_m, list_m;
  for (Wide* m : {&flat_m, &list_m}) {
    FlatParameters& flat = m->flat_parameters();
    float* g = flat.gradients.data<float>();
    for (int64_t i = 0; i < flat.total; ++i) g[i] = static_cast<float>(std::cos(0.3 * i));
  }
  ClipResult a = clip_grad_norm(flat_m, 1.0);
  ClipResult b = clip_grad_norm(list_m.parameters(), 1.0);
  CHECK(a.total_norm == b.total_norm);
  // Parameter by parameter: the flat buffer's padding between slots is no parameter's.
  for (auto [x, y] : {std::pair{flat_m.w, list_m.w}, std::pair{flat_m.b, list_m.b}}) {
    std::vector<float> ga = x.grad().to_floats(), gb = y.grad().to_floats();
    CHECK(std::memcmp(ga.data(), gb.data(), ga.size() * sizeof(float)) == 0);
  }
  CHECK_THROWS_WITH(clip_grad_norm(list_m.parameters(), -1.0), doctest::Contains("max_norm"));
}

namespace {
// A module big enough for the parallel chunks, in float32, with parameters that decay under
// DecayPolicy::matrices_only (w) and do not (norm.weight, b).
struct Mixed : Module {
  Mixed() : Module(DType::f32) {
    w = register_parameter("w", Tensor::zeros({200, 300}, DType::f32));
    g = register_module("norm", std::make_unique<Module>(DType::f32))
            .register_parameter("weight", Tensor::zeros({300}, DType::f32));
    b = register_parameter("b", Tensor::zeros({300}, DType::f32));
    FlatParameters& flat = flat_parameters();
    float* p = flat.values.data<float>();
    for (int64_t i = 0; i < flat.total; ++i) p[i] = static_cast<float>(std::sin(0.37 * i));
  }
  void set_grads(int step) {
    FlatParameters& flat = flat_parameters();
    float* gr = flat.gradients.data<float>();
    for (int64_t i = 0; i < flat.total; ++i) gr[i] = static_cast<float>(std::cos(0.11 * i + step));
  }
  Tensor w, g, b;
};
// Parameter by parameter (the flat buffer's padding between slots is no parameter's).
bool same_bits(Mixed& a, Mixed& b) {
  for (auto [p, q] : {std::pair{a.w, b.w}, std::pair{a.g, b.g}, std::pair{a.b, b.b}}) {
    std::vector<float> x = p.to_floats(), y = q.to_floats();
    if (std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) != 0) return false;
  }
  return true;
}
}  // namespace

TEST_CASE("AdamW and SGD over parameter groups give the flat path's bits") {
  AdamWConfig cfg{.lr = 3e-3, .weight_decay = 0.05, .decay = DecayPolicy::matrices_only};
  Mixed flat_m, list_m;
  AdamW flat_opt(flat_m, cfg);
  AdamW list_opt({{.params = {list_m.w}}, {.params = {list_m.g, list_m.b}, .weight_decay = 0.0}},
                 cfg);
  for (int step = 0; step < 3; ++step) {
    flat_m.set_grads(step);
    list_m.set_grads(step);
    flat_opt.step();
    list_opt.step();
  }
  CHECK(same_bits(flat_m, list_m));

  Mixed sgd_flat, sgd_list;
  SGD a(sgd_flat.flat_parameters(), SGDConfig{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  SGD b(sgd_list.parameters(), SGDConfig{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  for (int step = 0; step < 3; ++step) {
    sgd_flat.set_grads(step);
    sgd_list.set_grads(step);
    a.step();
    b.step();
  }
  CHECK(same_bits(sgd_flat, sgd_list));
}

TEST_CASE("step() uses the configured rate; step(lr) sets it; zero_grad covers the parameters") {
  Mixed configured, given;
  AdamW by_config(configured, AdamWConfig{.lr = 2e-2});
  AdamW by_argument(given, AdamWConfig{});
  configured.set_grads(0);
  given.set_grads(0);
  by_config.step();  // the config's 2e-2, not some default
  by_argument.step(2e-2);
  CHECK(same_bits(configured, given));
  CHECK(by_argument.lr() == 2e-2);

  TwoTensors t;
  SGD opt({{.params = {t.w}}, {.params = {t.b}, .lr = 0.5}}, SGDConfig{.lr = 0.1});
  CHECK(opt.lr(0) == 0.1);
  CHECK(opt.lr(1) == 0.5);
  t.set_step_grads(0);
  opt.zero_grad();
  for (double v : t.w.grad().to_vector()) CHECK(v == 0.0);
  for (double v : t.b.grad().to_vector()) CHECK(v == 0.0);
  opt.step();  // zero gradients, no decay, no momentum: nothing moves
  check_close(t.values(), TwoTensors{}.values());
}

TEST_CASE("optimisers refuse bad groups and settings, naming them") {
  TwoTensors t;
  CHECK_THROWS_WITH(SGD({t.w}, SGDConfig{.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                    doctest::Contains("Nesterov"));
  // An empty group beside a full one is accepted, as torch does; all empty is refused.
  CHECK_NOTHROW(AdamW({{.params = {t.w}}, {.params = {}}}, AdamWConfig{}));
  CHECK_THROWS_WITH(AdamW({{.params = {}}, {.params = {}}}, AdamWConfig{}),
                    doctest::Contains("optimizer got an empty parameter list"));
  CHECK_THROWS_WITH(AdamW({t.w, t.b, t.w}, AdamWConfig{}), doctest::Contains("more than one"));
  CHECK_THROWS_WITH(AdamW({{.params = {t.w}, .lr = -1.0}}, AdamWConfig{}), doctest::Contains("lr"));
  CHECK_THROWS_WITH(AdamW({dg::raw::view_transpose(t.w, 0, 1)}, AdamWConfig{}),
                    doctest::Contains("not contiguous"));
  SGD opt({t.w}, SGDConfig{});
  CHECK_THROWS_AS(opt.set_lr(3, 0.1), std::out_of_range);
}

TEST_CASE("schedules as objects set an optimiser's rates per group") {
  TwoTensors t;
  SGD opt({{.params = {t.w}}, {.params = {t.b}, .lr = 0.5}}, SGDConfig{.lr = 0.1});
  {
    StepLR s(opt, 2, 0.5);  // step 0's rates are set at once
    std::vector<double> g0, g1;
    for (int i = 0; i < 5; ++i, s.step()) g0.push_back(opt.lr(0)), g1.push_back(opt.lr(1));
    CHECK(g0 == std::vector<double>{0.1, 0.1, 0.05, 0.05, 0.025});
    CHECK(g1 == std::vector<double>{0.5, 0.5, 0.25, 0.25, 0.125});
  }
  opt.set_lr(0, 0.1);
  opt.set_lr(1, 0.5);
  {
    LinearWarmupLR s(opt, 4);
    CHECK(opt.lr(0) == doctest::Approx(0.025));
    for (int i = 0; i < 3; ++i) s.step();
    CHECK(opt.lr(0) == 0.1);
    s.step();
    CHECK(opt.lr(1) == 0.5);
  }
  {
    LambdaLR s(opt, [](int64_t step) { return 1.0 / (1 + step); });
    s.step();
    CHECK(opt.lr(0) == doctest::Approx(0.05));
  }
  opt.set_lr(0.1);
  {
    // Warm-up then cosine: the CLI's Schedule, per group; ScheduleLR gives Schedule::at exactly.
    Schedule cli = Schedule::parse("cosine", 0.1, 3, 20);
    cli.min_lr_ratio = 0.2;
    CosineAnnealingLR cosine(opt, 20, 3, 0.2);
    for (int64_t step = 0; step < 25; ++step, cosine.step()) {
      CHECK(opt.lr(0) == cli.at(step));
      CHECK(opt.lr(1) == cli.at(step));
    }
    Mixed m;
    AdamW adamw(m, AdamWConfig{.lr = 0.1});
    ScheduleLR from_cli(adamw, cli);
    for (int64_t step = 0; step < 25; ++step, from_cli.step()) CHECK(adamw.lr() == cli.at(step));
  }
  {
    // Without warm-up, torch CosineAnnealingLR's closed form: eta_min + (base − eta_min)(1 +
    // cos)/2.
    opt.set_lr(0.1);
    CosineAnnealingLR cosine(opt, 10);
    for (int i = 0; i < 5; ++i) cosine.step();
    CHECK(opt.lr(0) == doctest::Approx(0.05));
  }
  CHECK_THROWS_WITH(StepLR(opt, 0), doctest::Contains("step_size"));
}
