// Chapter 6 of the learner's path (nn/learn-06-modules.md): modules, parameters and
// initialisation. Three exercises, each graded through the library's public API: calculate_fans
// (through torch's fans and a seeded xavier_uniform_), kaiming_std (through nn.Linear's default
// init and a seeded kaiming_normal_) and Module::collect (through named_parameters(),
// parameter_count() and flat_parameters() of a model with a tied head). The golden values are
// PyTorch 1.13's (tools/learn/goldens_ch06.py prints them). It does not check initialisers'
// statistics over many draws: a seeded draw against torch's bits says more.
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "nn/init.h"
#include "nn/layers.h"
#include "tensor/rng.h"
#include "tools/learn/grade.h"

namespace dg::learn {
namespace {

// ---- PyTorch 1.13's values (tools/learn/goldens_ch06.py) ----------------------------------
const std::vector<double> kXavierUniform423Seed0 = {
    -0.004322517663240433, 0.3097158372402191,  -0.4751853346824646,   -0.4248946011066437,
    -0.2223689705133438,   0.15482072532176971, -0.011439144611358643, 0.45777493715286255,
    -0.05123639851808548,  0.1527741253376007,  -0.1744827926158905,   -0.11348707973957062,
    -0.55157071352005,     -0.3823687434196472, -0.2379971146583557,   0.021387115120887756,
    0.22824688255786896,   0.34642332792282104, -0.3914094567298889,   -0.25141456723213196,
    0.2097034901380539,    0.47942468523979187, -0.11881878226995468,  0.43203797936439514};
const std::vector<double> kKaimingNormalFanOut35Seed1 = {
    0.5399917960166931,   0.21794261038303375,  0.050359271466732025, 0.5073034763336182,
    -0.36897966265678406, -0.13564476370811462, -1.243335247039795,   0.3116436004638672,
    -0.8390389084815979,  -0.45973068475723267, -0.7285521626472473,  -0.04756107181310654,
    -0.15963290631771088, -0.7884384393692017,  0.3449006676673889};
const std::vector<double> kLinear43WeightSeed2 = {
    0.11469507217407227, -0.11898714303970337, 0.13711434602737427,  -0.025538921356201172,
    0.21359384059906006, 0.11903637647628784,  -0.05746734142303467, -0.40423136949539185,
    0.11415719985961914, -0.4426723122596741,  0.06571400165557861,  0.033228933811187744};
const std::vector<double> kLinear43BiasSeed2 = {-0.10994917154312134, 0.40884846448898315,
                                                0.03336840867996216};
// torch's named_parameters() of goldens_ch06.py's Net, and its parameter count.
const std::vector<std::pair<std::string, Shape>> kNetParameters = {{"scale", {1}},
                                                                   {"embed.weight", {10, 4}},
                                                                   {"blocks.0.norm.weight", {4}},
                                                                   {"blocks.0.norm.bias", {4}},
                                                                   {"blocks.0.proj.weight", {4, 4}},
                                                                   {"blocks.0.proj.bias", {4}},
                                                                   {"blocks.1.norm.weight", {4}},
                                                                   {"blocks.1.norm.bias", {4}},
                                                                   {"blocks.1.proj.weight", {4, 4}},
                                                                   {"blocks.1.proj.bias", {4}}};
constexpr int64_t kNetParameterCount = 97;

// Bit-for-bit draws: float32 values of the same generator; the tolerance only absorbs printing.
constexpr double kDrawAtol = 1e-7, kDrawRtol = 1e-6;

// ---- calculate_fans ---------------------------------------------------------------------------

Verdict torch_fans() {
  struct Case {
    Shape shape;
    int64_t fan_in, fan_out;
  };
  for (const Case& c : {Case{{5, 3}, 3, 5}, Case{{4, 2, 3, 3}, 18, 36}, Case{{6, 2, 5}, 10, 30}}) {
    const init::Fans f = init::calculate_fans(Tensor::zeros(c.shape));
    if (f.fan_in != c.fan_in || f.fan_out != c.fan_out)
      return {false, fmt::format("a {} weight: expected fan_in {} and fan_out {} (torch's), got "
                                 "{} and {}",
                                 shape_str(c.shape), c.fan_in, c.fan_out, f.fan_in, f.fan_out)};
  }
  return {true, "[5, 3] -> 3, 5; [4, 2, 3, 3] -> 18, 36; [6, 2, 5] -> 10, 30, as torch"};
}

Verdict seeded_xavier_uniform() {
  manual_seed(0);
  const Tensor w = Tensor::zeros({4, 2, 3});
  init::xavier_uniform_(w);
  return expect_values(w, kXavierUniform423Seed0, {4, 2, 3}, kDrawAtol, kDrawRtol,
                       "xavier_uniform_ of a [4, 2, 3] weight after manual_seed(0)");
}

Verdict one_dimension_refused() {
  try {
    init::calculate_fans(Tensor::zeros({5}));
  } catch (const std::invalid_argument& e) {
    return {true, fmt::format("refused: {}", e.what())};
  }
  return {false,
          "a [5] tensor was accepted; torch refuses fans of fewer than 2 dimensions "
          "(throw std::invalid_argument naming the tensor)"};
}

// ---- kaiming_std ------------------------------------------------------------------------------

Verdict linear_default_init() {
  manual_seed(2);
  const Linear linear(4, 3);
  const Verdict w = expect_values(linear.weight, kLinear43WeightSeed2, {3, 4}, kDrawAtol, kDrawRtol,
                                  "Linear(4, 3).weight after manual_seed(2)");
  if (!w.passed) return w;
  return expect_values(linear.bias, kLinear43BiasSeed2, {3}, kDrawAtol, kDrawRtol,
                       "Linear(4, 3).bias (drawn after the weight)");
}

Verdict seeded_kaiming_normal() {
  manual_seed(1);
  const Tensor w = Tensor::zeros({3, 5});
  init::kaiming_normal_(w, 0.0, init::FanMode::fan_out, init::Nonlinearity::relu);
  return expect_values(w, kKaimingNormalFanOut35Seed1, {3, 5}, kDrawAtol, kDrawRtol,
                       "kaiming_normal_(mode fan_out, relu) of a [3, 5] weight after "
                       "manual_seed(1)");
}

Verdict kaiming_std_values() {
  const Tensor w = Tensor::zeros({8, 2, 3, 3});  // fan_in 18, fan_out 72
  const double relu_in = init::kaiming_std(w, 0.0, init::FanMode::fan_in, init::Nonlinearity::relu);
  const double linear_out =
      init::kaiming_std(w, 0.0, init::FanMode::fan_out, init::Nonlinearity::linear);
  const double expected_in = std::sqrt(2.0) / std::sqrt(18.0), expected_out = 1 / std::sqrt(72.0);
  const bool ok =
      std::abs(relu_in - expected_in) <= 1e-15 && std::abs(linear_out - expected_out) <= 1e-15;
  return expect_true(ok, fmt::format("a [8, 2, 3, 3] weight: relu, fan_in: {:.17g} (expected "
                                     "√2/√18 = {:.17g}); linear, fan_out: {:.17g} (expected "
                                     "1/√72 = {:.17g})",
                                     relu_in, expected_in, linear_out, expected_out));
}

// ---- Module::collect --------------------------------------------------------------------------

// goldens_ch06.py's Net, assembled without subclassing: the root's own parameter first (torch
// lists a module's own parameters before its children's whatever the registration order;
// depthgrad lists entries in registration order, so the two agree when parameters come first), a
// list of two blocks, and a head whose weight is the embedding's (tied). Its buffer "steps" is
// not in torch's Net: buffers are not parameters, so it changes nothing torch lists.
std::unique_ptr<Module> tied_net() {
  auto net = std::make_unique<Module>();
  net->register_parameter("scale", Tensor::ones({1}));
  net->register_buffer("steps", Tensor::zeros({1}));  // state, not a parameter: never listed
  const Embedding& embed = net->register_module("embed", std::make_unique<Embedding>(10, 4));
  Module& blocks = net->register_module("blocks", std::make_unique<Module>());
  for (const char* name : {"0", "1"}) {
    Module& block = blocks.register_module(name, std::make_unique<Module>());
    block.register_module("norm", std::make_unique<LayerNorm>(4));
    block.register_module("proj", std::make_unique<Linear>(4, 4));
  }
  net->register_module("head", std::make_unique<Module>()).register_alias("weight", embed.weight);
  return net;
}

Verdict torch_parameter_names() {
  const std::vector<NamedTensor> got = tied_net()->named_parameters();
  std::string listed;
  for (const auto& [name, t] : got) listed += fmt::format(" {} {}", name, shape_str(t.shape()));
  for (size_t i = 0; i < kNetParameters.size(); ++i) {
    if (i >= got.size())
      return {false,
              fmt::format("only {} parameters listed (torch lists {}), the first missing "
                          "is '{}'; listed:{}",
                          got.size(), kNetParameters.size(), kNetParameters[i].first, listed)};
    if (got[i].first != kNetParameters[i].first ||
        got[i].second.shape() != kNetParameters[i].second)
      return {false, fmt::format("parameter {}: expected '{}' {} (torch's), got '{}' {}; listed:{}",
                                 i, kNetParameters[i].first, shape_str(kNetParameters[i].second),
                                 got[i].first, shape_str(got[i].second.shape()), listed)};
  }
  if (got.size() != kNetParameters.size())
    return {false, fmt::format("{} parameters listed, torch lists {} (the tied head.weight is "
                               "listed once, as embed.weight); listed:{}",
                               got.size(), kNetParameters.size(), listed)};
  return {true, fmt::format("{} parameters, torch's names, shapes and order", got.size())};
}

Verdict tied_count() {
  const int64_t count = tied_net()->parameter_count();
  return expect_true(count == kNetParameterCount,
                     fmt::format("parameter_count() {} (torch's sum over parameters(): {}; the "
                                 "tied weight counts once)",
                                 count, kNetParameterCount));
}

Verdict flat_buffer_slots() {
  const std::unique_ptr<Module> net = tied_net();
  const FlatParameters& flat = net->flat_parameters();
  int64_t elements = 0;
  for (const FlatParameters::Slot& slot : flat.slots) elements += slot.numel;
  return expect_true(
      flat.slots.size() == kNetParameters.size() && elements == kNetParameterCount,
      fmt::format("flat_parameters(): {} slots holding {} elements (expected {} "
                  "and {}: every parameter once, the tied one included)",
                  flat.slots.size(), elements, kNetParameters.size(), kNetParameterCount));
}

}  // namespace

Chapter chapter() {
  Chapter c;
  c.number = 6;
  c.title = "modules, parameters and initialisation";
  c.text = "nn/learn-06-modules.md";
  c.exercises.push_back(Exercise{
      "calculate_fans",
      "nn/init.cpp",
      {{"fans of three weight shapes, as torch's _calculate_fan_in_and_fan_out", torch_fans},
       {"xavier_uniform_ after manual_seed(0) equals torch's draw", seeded_xavier_uniform},
       {"a 1-D tensor is refused with std::invalid_argument", one_dimension_refused}}});
  c.exercises.push_back(Exercise{
      "kaiming_std",
      "nn/init.cpp",
      {{"kaiming_std's value for relu/fan_in and linear/fan_out", kaiming_std_values},
       {"nn.Linear(4, 3)'s default init after manual_seed(2) equals torch's", linear_default_init},
       {"kaiming_normal_(fan_out, relu) after manual_seed(1) equals torch's",
        seeded_kaiming_normal}},
      {"calculate_fans"}});
  c.exercises.push_back(
      Exercise{"Module::collect",
               "nn/module.cpp",
               {{"named_parameters(): torch's names, shapes and order, the tied weight once",
                 torch_parameter_names},
                {"parameter_count() counts the tied weight once", tied_count},
                {"flat_parameters() gives every parameter one slot", flat_buffer_slots}}});
  return c;
}

}  // namespace dg::learn
