// Building a model from depthgrad's parts: torch's default init of Linear and Embedding and the
// dg::init functions against torch 1.13's values (produced offline by /usr/bin/python3, the calls
// quoted beside each), a small MLP that learns (it did not while layers started at zero),
// Sequential, ModuleList, ModuleDict, ParameterList, public registration, train()/eval(), and
// saving and loading any module's weights.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/lm/micro_lm.h"
#include "tensor/factory.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"

using namespace dg;

namespace {
void check_floats(const Tensor& t, const std::vector<float>& expected, const char* what) {
  CAPTURE(what);
  REQUIRE(t.numel() == static_cast<int64_t>(expected.size()));
  std::vector<float> got = t.to_floats();
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == expected[i]);  // torch's float32 bits
  }
}

// Mean squared error of a model on (x, y), and n steps of plain SGD on it; returns the losses.
template <class Model>
std::vector<double> sgd(Model& model, const Tensor& x, const Tensor& y, int steps, double lr) {
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    model.zero_grad();
    Tensor error = sub(model.forward(x), y);
    Tensor loss = mean(mul(error, error));
    backward(loss);
    losses.push_back(loss.item());
    for (Tensor p : model.parameters()) {
      float* w = p.data<float>();
      const float* g = p.grad().template data<float>();
      for (int64_t i = 0; i < p.numel(); ++i) w[i] -= static_cast<float>(lr) * g[i];
    }
  }
  return losses;
}

// y = sin(2x) on 64 points of [-1.5, 1.5].
std::pair<Tensor, Tensor> curve() {
  Tensor x = dg::raw::view_reshape(linspace(-1.5, 1.5, 64), {64, 1});
  std::vector<double> ys;
  for (double v : x.to_vector()) ys.push_back(std::sin(2 * v));
  return {x, Tensor::from_vector(ys, {64, 1})};
}
}  // namespace

TEST_CASE("Linear and Embedding start as torch's do") {
  // torch.manual_seed(3); l = nn.Linear(4, 3); e = nn.Embedding(5, 4)
  manual_seed(3);
  Linear l(4, 3);
  Embedding e(5, 4);
  check_floats(
      l.weight,
      {-0.49573648f, -0.394430637f, -0.214157522f, -0.47304517f, -0.0283856392f, -0.439883709f,
       0.271865845f, 0.243699372f, 0.0944212079f, 0.387856662f, -0.0489686728f, 0.299490631f},
      "Linear(4, 3).weight");
  check_floats(l.bias, {-0.350159109f, -0.0985311866f, -0.445823073f}, "Linear(4, 3).bias");
  check_floats(e.weight, {1.1059221f,    0.261501163f,   0.931124449f, -0.514461994f, 0.348746359f,
                          0.0370668769f, -0.0676855892f, 0.429033041f, -0.86811924f,  -1.19631958f,
                          1.02799654f,   0.0718910918f,  0.681411088f, -0.958300412f, 0.0639240816f,
                          0.65891391f,   0.8194592f,     0.56159389f,  -0.248146832f, -1.07996094f},
               "Embedding(5, 4).weight");
  // Norms keep ones and zeros; a float64 layer draws the same stream (rng.h).
  LayerNorm ln(3);
  CHECK(ln.weight.to_vector() == std::vector<double>{1, 1, 1});
  CHECK(ln.bias.to_vector() == std::vector<double>{0, 0, 0});
  manual_seed(3);
  Linear l64(4, 3, true, DType::f64);
  CHECK(dg::test::rel_diff(l64.weight.to_vector(), l.weight.to_vector()) < 1e-6);
}

TEST_CASE("init:: functions give torch.nn.init's values") {
  // torch.manual_seed(5), then on torch.empty tensors in turn: xavier_uniform_(6x4),
  // xavier_normal_(6x4, gain=2), kaiming_uniform_(6x4, mode='fan_out', nonlinearity='relu'),
  // kaiming_normal_(5x3x2), uniform_(5x4, -2, 3), normal_(5x4, 1, 0.5)
  manual_seed(5);
  Tensor w = Tensor::empty({6, 4});
  check_floats(
      init::xavier_uniform_(w),
      {0.511624038f,  -0.579226494f, 0.631249368f, 0.495628834f, 0.650821447f, -0.593890667f,
       -0.519922435f, 0.368583143f,  -0.72306335f, 0.765587687f, 0.164878428f, 0.100033373f,
       -0.66241622f,  0.246846855f,  0.333085507f, 0.122893766f, 0.745048821f, 0.232624784f,
       -0.686859846f, 0.650834262f,  0.262998521f, -0.36952427f, -0.71152097f, 0.441575557f},
      "xavier_uniform_");
  check_floats(
      init::xavier_normal_(w, 2.0),
      {2.3385489f,    -0.388201922f, 0.3151384f,   -0.057736598f, 0.687483013f, 0.825866818f,
       -0.499379247f, 0.697318494f,  0.730560899f, 0.366394848f,  0.193406224f, 0.974754512f,
       0.154760182f,  0.149161026f,  -1.01718152f, -0.734175801f, -1.60346293f, 0.784580946f,
       1.93565071f,   -0.165946379f, 0.886059105f, 0.66419208f,   1.13609433f,  1.18307662f},
      "xavier_normal_");
  check_floats(
      init::kaiming_uniform_(w, 0.0, init::FanMode::fan_out, init::Nonlinearity::relu),
      {-0.680070758f, 0.808134675f,  0.111466289f,  0.455914021f,   0.741742611f,  -0.64799726f,
       0.763385534f,  -0.500953913f, -0.159208894f, 0.756772399f,   0.92197454f,   0.877852917f,
       0.575126767f,  0.929465175f,  -0.360305429f, -0.0636488199f, -0.342031717f, -0.0734983683f,
       -0.121593833f, 0.534275174f,  0.687342763f,  -0.720113158f,  -0.552199483f, -0.307554245f},
      "kaiming_uniform_");
  check_floats(
      init::kaiming_normal_(Tensor::empty({5, 3, 2})),
      {-0.298815995f, -0.447657675f, 0.292206258f,  0.278122306f,  -0.234715104f, 0.669795573f,
       0.190623313f,  0.41659987f,   0.684450865f,  0.207454637f,  -0.233008742f, -0.522408843f,
       0.376894087f,  0.179119125f,  -0.867197752f, -0.762713492f, 0.485935152f,  -0.358609527f,
       0.83499229f,   0.258232713f,  -0.376585931f, -1.17458129f,  -0.952459574f, 0.0165436994f,
       0.682652891f,  0.299232244f,  0.744573534f,  0.427918226f,  0.181869879f,  -0.816300631f},
      "kaiming_normal_");
  check_floats(init::uniform_(Tensor::empty({5, 4}), -2, 3),
               {-1.5484364f,  2.92976046f,  2.33869267f,  -1.82659578f,  2.06268835f,
                -1.00017715f, -1.53721166f, 2.84213328f,  -0.505304456f, -0.329304755f,
                0.811541259f, 1.91304612f,  0.692313492f, -0.17184478f,  0.711966038f,
                -0.79527092f, -1.3184799f,  1.15094376f,  0.763432264f,  1.74221659f},
               "uniform_");
  check_floats(init::normal_(Tensor::empty({5, 4}), 1, 0.5),
               {0.638145328f, 0.988032162f, 1.46184278f,  0.919340968f, 0.861738741f,
                1.01113415f,  0.771395206f, 0.82236433f,  0.750241637f, 1.18246126f,
                1.03023791f,  1.03933012f,  1.05041397f,  1.00605989f,  1.06673443f,
                0.894678235f, 0.830521405f, 0.569313943f, 0.791476667f, 1.2030654f},
               "normal_");

  // constant_, zeros_, ones_; a generator of one's own; a view is filled in place.
  CHECK(init::constant_(Tensor::empty({3}, DType::f64), 0.5).to_vector() ==
        std::vector<double>{0.5, 0.5, 0.5});
  CHECK(init::ones_(Tensor::empty({2})).to_vector() == std::vector<double>{1, 1});
  CHECK(init::zeros_(Tensor::empty({2})).to_vector() == std::vector<double>{0, 0});
  TorchGenerator a(9), b(9);
  CHECK(init::normal_(Tensor::empty({20}), 0, 1, &a).to_vector() ==
        randn({20}, DType::f32, &b).to_vector());
  Tensor m = zeros({3, 4});
  init::ones_(dg::raw::view_narrow(dg::raw::view_transpose(m, 0, 1), 0, 1, 2));  // columns 1 and 2
  CHECK(m.to_vector() == std::vector<double>{0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0});

  CHECK(init::calculate_gain(init::Nonlinearity::tanh) == 5.0 / 3);
  CHECK(init::calculate_gain(init::Nonlinearity::leaky_relu, 0.2) == std::sqrt(2.0 / 1.04));
  CHECK(init::calculate_fans(Tensor::empty({5, 3, 2})).fan_out == 10);
  CHECK_THROWS_AS(init::xavier_uniform_(Tensor::empty({4})), std::invalid_argument);
  CHECK_THROWS_AS(init::normal_(Tensor::empty({4}, DType::i32)), std::invalid_argument);
}

TEST_CASE("MicroLM construction draws nothing: the default generator is untouched") {
  manual_seed(9);
  const std::vector<double> expected = randn({40}).to_vector();
  manual_seed(9);
  MicroLMConfig cfg;
  cfg.vocab = 50, cfg.dim = 16, cfg.layers = 2, cfg.heads = 2, cfg.kv_heads = 2, cfg.seq_len = 8;
  MicroLM model(cfg);
  for (auto& named : model.named_parameters()) {
    const auto& name =
        named.first;  // not a structured binding: clang 14's CAPTURE needs a variable
    auto& p = named.second;
    CAPTURE(name);
    for (double v : p.to_vector()) CHECK((v == 0.0 || v == 1.0));  // zeros, norm gains at one
  }
  CHECK(randn({40}).to_vector() == expected);
  {
    init::SkipGuard skip;
    Linear plain(3, 2);
    CHECK(plain.weight.to_vector() == std::vector<double>(6, 0.0));
  }
  CHECK(!init::skipping());
}

TEST_CASE("a small MLP of dg::Linear learns; at the old all-zero start it did not") {
  auto [x, y] = curve();
  manual_seed(1);
  Sequential mlp(std::make_unique<Linear>(1, 32), silu, std::make_unique<Linear>(32, 1));
  std::vector<double> losses = sgd(mlp, x, y, 400, 0.2);
  MESSAGE("default init: mse " << losses.front() << " -> " << losses.back());
  CHECK(losses.back() < 0.1 * losses.front());

  // The defect this guards against: every weight zero, so no gradient reaches the hidden layer
  // and only the output bias moves; the loss stays near where it started.
  Sequential zero(std::make_unique<Linear>(1, 32), silu, std::make_unique<Linear>(32, 1));
  for (Tensor p : zero.parameters()) init::zeros_(p);
  std::vector<double> stuck = sgd(zero, x, y, 400, 0.2);
  CHECK(stuck.back() > 0.9 * stuck.front());
}

TEST_CASE("Sequential: order, names as torch's, lookups and errors") {
  manual_seed(2);
  Sequential net;
  Linear& first = net.emplace<Linear>(3, 4);
  net.add([](const Tensor& h) { return silu(h); });
  net.add(std::make_unique<Linear>(4, 2, false));
  CHECK(net.size() == 3);
  std::vector<std::string> names;
  for (auto& [name, p] : net.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "2.weight"});
  CHECK(&net.at<Linear>(0) == &first);
  CHECK(net.at<Functional>(1).name() == "Functional");
  CHECK_THROWS_AS(net.at<Linear>(1), std::invalid_argument);
  CHECK_THROWS_AS(net[3], std::out_of_range);

  Tensor x = randn({5, 3});
  Tensor expected = net.at<Linear>(2).forward(silu(first.forward(x)));
  CHECK(net.forward(x).to_vector() == expected.to_vector());

  // Sequentials nest; names compose.
  Sequential outer;
  outer.add(std::make_unique<Sequential>(std::make_unique<Linear>(2, 2), silu));
  outer.emplace<Linear>(2, 1);
  CHECK(outer.named_parameters().front().first == "0.0.weight");
  CHECK(outer.forward(randn({3, 2})).shape() == Shape{3, 1});
}

TEST_CASE("ModuleList, ModuleDict, ParameterList, and registration without subclassing") {
  ModuleList list;
  for (int i = 0; i < 3; ++i) list.emplace<Linear>(2, 2);
  CHECK(list.size() == 3);
  CHECK(list.named_parameters()[4].first == "2.weight");
  int count = 0;
  for (Module* m : list) count += m->parameter_count() == 6;
  CHECK(count == 3);
  CHECK_THROWS_AS(list[3], std::out_of_range);

  ModuleDict dict;
  dict.emplace<Linear>("encoder", 4, 2);
  dict.insert("norm", std::make_unique<RMSNorm>(2));
  CHECK(dict.keys() == std::vector<std::string>{"encoder", "norm"});
  CHECK(dict.contains("norm"));
  CHECK(dict.at<RMSNorm>("norm").weight.numel() == 2);
  CHECK(dict.named_parameters().back().first == "norm.weight");
  CHECK_THROWS_WITH_AS(dict["decoder"], doctest::Contains("'decoder'"), std::out_of_range);
  CHECK_THROWS_WITH_AS(dict.emplace<Linear>("encoder", 1, 1), doctest::Contains("'encoder'"),
                       std::invalid_argument);
  CHECK_THROWS_AS(dict.emplace<Linear>("a.b", 1, 1), std::invalid_argument);
  CHECK_THROWS_AS(dict.emplace<Linear>("", 1, 1), std::invalid_argument);

  ParameterList params;
  params.append(ones({3}));
  params.append(zeros({2, 2}));
  CHECK(params.size() == 2);
  CHECK(params[1].requires_grad());
  CHECK(params.named_parameters()[1].first == "1");

  // A model assembled from outside: a plain Module with public registration.
  Module model;
  Linear& encoder = model.register_module("encoder", std::make_unique<Linear>(3, 2));
  Tensor scale = model.register_parameter("scale", ones({2}));
  CHECK(model.parameter("encoder.weight").same(encoder.weight));
  CHECK(model.parameter("scale").same(scale));
  CHECK(model.named_children().front().second == &encoder);
  CHECK(model.state_dict().size() == 3);
  CHECK_THROWS_AS(model.register_parameter("scale", ones({1})), std::invalid_argument);
  model.flat_parameters();
  CHECK_THROWS_AS(model.register_parameter("late", ones({1})), std::logic_error);
}

TEST_CASE("train() and eval() reach every child, through containers") {
  Module model;
  ModuleList& list = model.register_module("layers", std::make_unique<ModuleList>());
  Sequential& block = list.emplace<Sequential>();
  Linear& deep = block.emplace<Linear>(2, 2);
  CHECK(deep.is_training());
  model.eval();
  CHECK((!model.is_training() && !list.is_training() && !block.is_training()));
  CHECK(!deep.is_training());
  model.train();
  CHECK(deep.is_training());
}

TEST_CASE("Dropout: masks while training, the identity in eval mode, seeded by its generator") {
  Sequential net(std::make_unique<Dropout>(0.5));
  const Tensor x = ones({1000});
  manual_seed(3);
  const std::vector<float> first = net.forward(x).to_floats();
  int64_t zeros_seen = 0;
  for (float v : first) {
    CHECK((v == 0.0f || v == 2.0f));  // kept elements scaled by 1 / (1 - p)
    zeros_seen += v == 0.0f ? 1 : 0;
  }
  CHECK(zeros_seen > 400);
  CHECK(zeros_seen < 600);
  manual_seed(3);
  CHECK(net.forward(x).to_floats() == first);  // the same seed, the same mask
  net.eval();
  const Tensor y = net.forward(x);
  CHECK(y.to_floats() == x.to_floats());
  TorchGenerator own(3);
  Dropout with_own(0.5, &own);
  manual_seed(99);  // the module's own generator is used, not the default one
  CHECK(with_own.forward(x).to_floats() == first);
  CHECK_THROWS_WITH_AS(Dropout(1.5), doctest::Contains("Dropout: p must be in [0, 1]"),
                       std::invalid_argument);
}

TEST_CASE("save_weights / load_weights round-trip any module: an MLP and a Sequential") {
  dg::test::TempDir dir("containers");
  struct Mlp : Module {
    Linear& hidden = register_module("hidden", std::make_unique<Linear>(3, 8));
    Linear& out = register_module("out", std::make_unique<Linear>(8, 2));
    Tensor forward(const Tensor& x) const { return out.forward(silu(hidden.forward(x))); }
  };
  manual_seed(4);
  Mlp source;
  Mlp target;  // other draws
  Tensor x = randn({5, 3});
  CHECK(source.forward(x).to_vector() != target.forward(x).to_vector());
  save_weights(dir.file("mlp.safetensors"), source);
  load_weights(dir.file("mlp.safetensors"), target);
  CHECK(source.forward(x).to_vector() == target.forward(x).to_vector());

  Sequential a(std::make_unique<Linear>(3, 4), silu, std::make_unique<Linear>(4, 1));
  Sequential b(std::make_unique<Linear>(3, 4), silu, std::make_unique<Linear>(4, 1));
  save_weights(dir.file("seq.safetensors"), a);
  load_weights(dir.file("seq.safetensors"), b);
  CHECK(a.forward(x).to_vector() == b.forward(x).to_vector());
  std::vector<std::string> names;
  for (auto& [name, t] : load_tensors(dir.file("seq.safetensors"))) names.push_back(name);
  std::sort(names.begin(), names.end());  // the file's order is by name
  CHECK(names == std::vector<std::string>{"0.bias", "0.weight", "2.bias", "2.weight"});

  // Another shape or another model is refused, naming the tensor, and changes nothing.
  Sequential wider(std::make_unique<Linear>(3, 5), silu, std::make_unique<Linear>(5, 1));
  const std::vector<double> before = wider.forward(x).to_vector();
  CHECK_THROWS_WITH(load_weights(dir.file("seq.safetensors"), wider),
                    doctest::Contains("0.weight"));
  CHECK(wider.forward(x).to_vector() == before);
  CHECK_THROWS_WITH(load_weights(dir.file("mlp.safetensors"), b), doctest::Contains("weight"));

  // The in-memory state dict round-trips too.
  Sequential c(std::make_unique<Linear>(3, 4), silu, std::make_unique<Linear>(4, 1));
  std::vector<NamedTensor> state;
  for (auto& [name, t] : a.state_dict()) state.emplace_back(name, dg::raw::clone(t));
  c.load_state_dict(state);
  CHECK(a.forward(x).to_vector() == c.forward(x).to_vector());
}
