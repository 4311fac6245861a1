// Tests of module buffers (nn/module.h) and the vision layers (nn/vision_layers.h): a torch
// Conv2d's default init and a torch Conv2d + BatchNorm2d state dict loaded into depthgrad's modules
// give torch's outputs in training and eval mode, and torch's running statistics; momentum None
// (the cumulative average); buffers are in state_dict() in torch's order, outside the parameters
// and the optimisers' reach, loaded strictly (a missing one is named) and round-trip through
// safetensors with their int64 counter; a CNN trained by dg::Trainer resumes from a checkpoint bit
// for bit, weights and buffers included. The goldens were generated offline by
// tools/torch_goldens_batchnorm.py (its "modules" table).
#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/vision_layers.h"
#include "tensor/factory.h"
#include "tests/kernel_test_helpers.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/optim.h"
#include "train/trainer.h"

using namespace dg;
using namespace dg::test;

namespace {

// GOLDENS (tools/torch_goldens_batchnorm.py modules; float32 values, printed as doubles)
const std::map<std::string, std::vector<double>> kGoldens = {
    {"conv.weight",
     {-0.0017646604683250189, 0.12644097208976746,   -0.19399359822273254,  -0.17346249520778656,
      -0.09078175574541092,   0.0632052943110466,    -0.004670011345297098, 0.18688584864139557,
      -0.020917171612381935,  0.062369778752326965,  -0.07123230397701263,  -0.046330906450748444,
      -0.2251777946949005,    -0.15610139071941376,  -0.0971619188785553,   0.008731253445148468,
      0.09318140149116516,    0.14142672717571259,   -0.1597922444343567,   -0.1026395708322525,
      0.08561109751462936,    0.19572432339191437,   -0.04850756749510765,  0.1763787716627121,
      -0.03799128159880638,   0.024940622970461845,  0.21342279016971588,   -0.21865400671958923,
      -0.1483835130929947,    -0.05967162176966667,  -0.09187673032283783,  0.2036469429731369,
      -0.15277740359306335,   -0.10850150138139725,  -0.1646711379289627,   -0.22074954211711884,
      -0.13758894801139832,   0.20260919630527496,   0.10517467558383942,   0.11423841863870621,
      0.01239595003426075,    -0.1208406612277031,   0.039877213537693024,  -0.22007395327091217,
      -0.17031049728393555,   -0.12151158601045609,  0.14871349930763245,   0.13819724321365356,
      -0.10453278571367264,   -0.008504699915647507, 0.15074589848518372,   0.23431941866874695,
      0.09354602545499802,    0.031841691583395004}},
    {"conv.bias", {0.15803514420986176, -0.13878203928470612, 0.043921709060668945}},
    {"bn.weight", {0.75, 2.0, 1.5}},
    {"bn.bias", {-0.75, 0.0, 0.75}},
    {"bn.running_mean", {-0.375, 0.25, 0.0}},
    {"bn.running_var", {1.0, 1.75, 1.25}},
    {"bn.num_batches_tracked", {0.0}},
    {"model.train.y",
     {-0.03227616846561432,  0.3472013771533966,  -0.8030064702033997,  -0.7806227803230286,
      -0.08232779800891876,  -1.4689384698867798, -1.6735711097717285,  -1.5430595874786377,
      0.4853052794933319,    -1.6145516633987427, -0.4042726159095764,  0.7298665046691895,
      -0.8220929503440857,   -1.2247473001480103, -0.1026788055896759,  -1.051116704940796,
      -1.8409026861190796,   -1.6315280199050903, 0.17725560069084167,  -1.4601554870605469,
      -1.8587353229522705,   -2.6484224796295166, 1.3939687013626099,   -1.9172732830047607,
      0.4961496591567993,    1.7903871536254883,  3.6119308471679688,   2.7488911151885986,
      -1.1211962699890137,   2.257216215133667,   -2.1188302040100098,  -4.750486850738525,
      0.23326611518859863,   -0.3553401529788971, -0.6519705653190613,  1.3681014776229858,
      2.8899290561676025,    0.189907044172287,   -1.749749779701233,   1.4021118879318237,
      0.4279436767101288,    1.6004159450531006,  1.4897795915603638,   -0.25280195474624634,
      2.0370287895202637,    -0.1271187663078308, 1.0439693927764893,   0.2897328734397888,
      -0.6390051245689392,   -0.9163851737976074, 1.9812805652618408,   2.181541681289673,
      -1.3001115322113037,   1.844186782836914,   3.556126117706299,    -0.8935000896453857,
      2.559086561203003,     2.1977310180664062,  0.19263333082199097,  -0.21607860922813416,
      -0.46243202686309814,  -1.0675792694091797, -1.2995264530181885,  -1.205418586730957,
      -0.007115983869880438, -1.371475338935852,  -0.9079371094703674,  0.804790735244751,
      -0.7471688985824585,   -1.0974867343902588, 0.06367938965559006,  -1.0165858268737793,
      -1.6735711097717285,   -1.5430595874786377, 0.36682194471359253,  -1.254268765449524,
      -1.3789317607879639,   0.3223990499973297,  -0.5524465441703796,  -1.176468014717102,
      -1.6792852878570557,   -0.7217507362365723, 0.9495366811752319,   1.8200773000717163,
      -0.004165214020758867, 0.9902709126472473,  -0.0507257878780365,  -4.377003192901611,
      0.6067491769790649,    0.578689455986023,   -2.8492088317871094,  -0.7819923162460327,
      3.6119308471679688,    2.7488911151885986,  -0.6083465814590454,  0.9255058169364929,
      -0.05905807763338089,  -3.238837480545044,  1.0405141115188599,   -0.11164616793394089,
      1.7572206258773804,    3.4360978603363037,  -0.46084973216056824, -0.7272622585296631,
      -0.3944973051548004,   0.3235199451446533,  1.9048810005187988,   1.9531537294387817,
      -1.5284994840621948,   1.1169129610061646,  1.4173367023468018,   0.05403720587491989,
      1.0439693927764893,    0.2897328734397888,  -0.6702455878257751,  0.18060196936130524,
      3.398353338241577,     1.5355207920074463,  -3.695699453353882,   2.009260892868042}},
    {"model.train.running_mean", {-0.20635801553726196, 0.1479826420545578, 0.0014053237391635776}},
    {"model.train.running_var", {0.7768266201019287, 1.2770549058914185, 0.9062647819519043}},
    {"model.train.num_batches_tracked", {1.0}},
    {"model.eval.y",
     {-0.008248481899499893, 0.2068946361541748,    -0.44521060585975647, -0.4325202703475952,
      -0.036625027656555176, -0.8227577805519104,   -0.9387733936309814,  -0.8647804260253906,
      0.2851920425891876,    -0.9053125977516174,   -0.21915021538734436, 0.42384493350982666,
      -0.45603159070014954,  -0.6843146681785583,   -0.04816294461488724, -0.5858755707740784,
      -1.0336413383483887,   -0.9149371981620789,   0.11054462939500809,  -0.8177782893180847,
      -1.0978279113769531,   -1.3852591514587402,   0.0860949382185936,   -1.1191346645355225,
      -0.24069425463676453,  0.23038379848003387,   0.8933912515640259,   0.5792611241340637,
      -0.8293776512145996,   0.4003007113933563,    -1.1924974918365479,  -2.1503708362579346,
      -0.33637890219688416,  -0.5506204962730408,   -0.6585883498191833,  0.07667975127696991,
      0.6305962800979614,    -0.352160781621933,    -1.0581592321395874,  0.08905889093875885,
      0.6473235487937927,    1.0399353504180908,    1.0028878450393677,   0.4193703830242157,
      1.1861387491226196,    0.46145638823509216,   0.8536047339439392,   0.6010425090789795,
      0.2900471091270447,    0.19716417789459229,   1.167470932006836,    1.234529972076416,
      0.06867029517889023,   1.1215639114379883,    1.694820761680603,    0.2048274278640747,
      1.3609539270401,       1.2399511337280273,    0.5685279965400696,   0.4316674768924713,
      -0.2521234452724457,   -0.595209002494812,    -0.7267104387283325,  -0.6733564138412476,
      0.006015973165631294,  -0.7675014734268188,   -0.5047005414962769,  0.4663228690624237,
      -0.41355374455451965,  -0.6121649146080017,   0.046153098344802856, -0.5662984848022461,
      -0.9387733936309814,   -0.8647804260253906,   0.21801842749118805,  -0.7010517716407776,
      -0.7717289328575134,   0.1928330510854721,    -0.3031567633152008,  -0.6569429636001587,
      -1.0325114727020264,   -0.683987021446228,    -0.07566992938518524, 0.24119041860103607,
      -0.42279940843582153,  -0.060843441635370255, -0.43974658846855164, -2.014430046081543,
      -0.20043811202049255,  -0.21065130829811096,  -1.4583415985107422,  -0.705913782119751,
      0.8933912515640259,    0.5792611241340637,    -0.6427100300788879,  -0.0844167172908783,
      -0.44277939200401306,  -1.6001590490341187,   -0.04255586117506027, -0.46192046999931335,
      1.0924426317214966,    1.6546282768249512,    0.34970390796661377,  0.26049351692199707,
      0.3719225525856018,    0.612356424331665,     1.141887903213501,    1.1580524444580078,
      -0.007807236630469561, 0.8780304789543152,    0.9786298274993896,   0.5221179127693176,
      0.8536047339439392,    0.6010425090789795,    0.2795860171318054,   0.5644991993904114,
      1.6419891119003296,    1.018204689025879,     -0.7335116267204285,  1.1768404245376587}},
    {"cumulative.running_mean", {0.26249998807907104, 0.3499999940395355, 0.16249999403953552}},
    {"cumulative.running_var", {2.234027862548828, 1.7208333015441895, 2.1270833015441895}},
};
// END GOLDENS

Tensor golden(const std::string& name, const Shape& shape, DType dtype = DType::f32) {
  return Tensor::from_vector(kGoldens.at(name), shape, dtype);
}

// torch's conv.state_dict() and bn.state_dict() (BatchNorm2d(3, momentum=0.3)) as pasted.
std::vector<NamedTensor> torch_conv_state() {
  return {{"weight", golden("conv.weight", {3, 2, 3, 3})}, {"bias", golden("conv.bias", {3})}};
}
std::vector<NamedTensor> torch_bn_state() {
  return {{"weight", golden("bn.weight", {3})},
          {"bias", golden("bn.bias", {3})},
          {"running_mean", golden("bn.running_mean", {3})},
          {"running_var", golden("bn.running_var", {3})},
          {"num_batches_tracked", golden("bn.num_batches_tracked", {}, DType::i64)}};
}

std::vector<std::string> names_of(const std::vector<NamedTensor>& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

}  // namespace

TEST_CASE("Conv2d starts as torch's after the same seed") {
  manual_seed(0);
  Conv2d conv(2, 3, {3, 3}, {1, 1}, {1, 1});
  check_close(conv.weight.to_vector(), kGoldens.at("conv.weight"), 1e-7);
  check_close(conv.bias.to_vector(), kGoldens.at("conv.bias"), 1e-7);
  CHECK(names_of(conv.state_dict()) == std::vector<std::string>{"weight", "bias"});
}

TEST_CASE("a torch Conv2d + BatchNorm2d state dict loads and gives torch's outputs") {
  manual_seed(7);  // other initial weights: the state dict replaces them
  Conv2d conv(2, 3, {3, 3}, {1, 1}, {1, 1});
  BatchNorm2d bn(3, 1e-5, 0.3);
  conv.load_state_dict(torch_conv_state());
  bn.load_state_dict(torch_bn_state());
  const Tensor x = Tensor::from_vector(pattern(2 * 2 * 4 * 5, 7, 23, 11, 8.0), {2, 2, 4, 5});
  check_close(bn.forward(conv.forward(x)).to_vector(), kGoldens.at("model.train.y"), 3e-6);
  check_close(bn.running_mean.to_vector(), kGoldens.at("model.train.running_mean"), 3e-6);
  check_close(bn.running_var.to_vector(), kGoldens.at("model.train.running_var"), 3e-6);
  CHECK(bn.num_batches_tracked.dtype() == DType::i64);
  CHECK(bn.num_batches_tracked.item() == 1);
  bn.eval();
  const uint64_t version = bn.running_mean.version();
  check_close(bn.forward(conv.forward(x)).to_vector(), kGoldens.at("model.eval.y"), 3e-6);
  CHECK(bn.running_mean.version() == version);  // eval reads the running statistics only
  CHECK(bn.num_batches_tracked.item() == 1);
}

TEST_CASE("BatchNorm1d with momentum None keeps the cumulative average, as torch") {
  BatchNorm1d bn(3, 1e-5, std::nullopt);
  bn.forward(Tensor::from_vector(pattern(12, 7, 13, 6, 4.0), {4, 3}));
  bn.forward(Tensor::from_vector(pattern(30, 5, 11, 4, 2.0), {5, 3, 2}));
  check_close(bn.running_mean.to_vector(), kGoldens.at("cumulative.running_mean"), 3e-6);
  check_close(bn.running_var.to_vector(), kGoldens.at("cumulative.running_var"), 3e-6);
  CHECK(bn.num_batches_tracked.item() == 2);
}

TEST_CASE("BatchNorm without running statistics, GroupNorm, pools and Flatten") {
  BatchNorm2d untracked(2, 1e-5, 0.1, /*affine=*/false, /*track_running_stats=*/false);
  CHECK(untracked.state_dict().empty());
  const Tensor x = Tensor::from_vector(pattern(2 * 2 * 3 * 3, 7, 23, 11, 8.0), {2, 2, 3, 3});
  untracked.eval();  // no running statistics: the batch's are used in eval too, as torch
  check_close(untracked.forward(x).to_vector(),
              batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true).to_vector(), 0.0);
  GroupNorm gn(2, 4);
  CHECK(names_of(gn.state_dict()) == std::vector<std::string>{"weight", "bias"});
  const Tensor x4 = Tensor::from_vector(pattern(2 * 4 * 3, 7, 23, 11, 8.0), {2, 4, 3});
  check_close(gn.forward(x4).to_vector(), group_norm(x4, 2, gn.weight, gn.bias).to_vector(), 0.0);
  CHECK(MaxPool2d(2).forward(x).shape() == Shape{2, 2, 1, 1});
  CHECK(AvgPool2d(2, 1).forward(x).shape() == Shape{2, 2, 2, 2});
  CHECK(AdaptiveAvgPool2d(IntPair{1, 1}).forward(x).shape() == Shape{2, 2, 1, 1});
  CHECK(Flatten().forward(x).shape() == Shape{2, 18});
  CHECK(Conv1d(2, 4, 3, 1, 1).forward(Tensor::zeros({1, 2, 5})).shape() == Shape{1, 4, 5});
  CHECK(ConvTranspose2d(2, 4, {3, 3}, {2, 2}).forward(x).shape() == Shape{2, 4, 7, 7});
  CHECK(ConvTranspose2d(2, 4, {3, 3}).weight.shape() == Shape{2, 4, 3, 3});
  // Every forward runs through hooked(): a forward hook sees BatchNorm's output.
  int hooked_calls = 0;
  BatchNorm2d hooked_bn(2);
  HookHandle h = hooked_bn.register_forward_hook(
      [&](const Module&, const std::vector<Tensor>&, const Tensor&) {
        ++hooked_calls;
        return Tensor();
      });
  hooked_bn.forward(x);
  CHECK(hooked_calls == 1);
  h.remove();
  CHECK_THROWS_WITH(GroupNorm(3, 4), doctest::Contains("divisible by num_groups 3"));
  CHECK_THROWS_WITH(Conv2d(3, 4, {3, 3}, {1, 1}, {0, 0}, {1, 1}, 2),
                    doctest::Contains("divisible by groups 2"));
  CHECK_THROWS_WITH(BatchNorm2d(2).forward(Tensor::zeros({2, 2})),
                    doctest::Contains("BatchNorm2d: expected x of shape [N, C, H, W]"));
  CHECK_THROWS_WITH(BatchNorm1d(2).forward(Tensor::zeros({2, 2, 2, 2})),
                    doctest::Contains("BatchNorm1d"));
}

TEST_CASE("buffers: state_dict in torch's order, not parameters, untouched by optimisers") {
  Sequential net;
  net.add(std::make_unique<Conv2d>(1, 2, IntPair{3, 3}));
  net.add(std::make_unique<BatchNorm2d>(2));
  CHECK(names_of(net.state_dict()) ==
        std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                                 "1.running_var", "1.num_batches_tracked"});
  CHECK(names_of(net.named_buffers()) ==
        std::vector<std::string>{"1.running_mean", "1.running_var", "1.num_batches_tracked"});
  CHECK(net.buffers().size() == 3);
  CHECK(net.parameters().size() == 4);
  for (const Tensor& b : net.buffers()) CHECK_FALSE(b.requires_grad());

  // torch's order: a module's own parameters, then its buffers, then its children.
  Module parent;
  BatchNorm1d& child = parent.register_module("child", std::make_unique<BatchNorm1d>(2));
  parent.register_parameter("scale", Tensor::ones({1}));
  parent.register_buffer("steps", Tensor::zeros({}, DType::i64));
  parent.register_buffer("scratch", Tensor::zeros({2}), /*persistent=*/false);
  CHECK(names_of(parent.state_dict()) ==
        std::vector<std::string>{"scale", "steps", "child.weight", "child.bias",
                                 "child.running_mean", "child.running_var",
                                 "child.num_batches_tracked"});
  CHECK(names_of(parent.named_buffers()) ==
        std::vector<std::string>{"steps", "scratch", "child.running_mean", "child.running_var",
                                 "child.num_batches_tracked"});
  CHECK_THROWS_WITH(parent.register_buffer("g", Tensor::ones({1}).set_requires_grad(true)),
                    doctest::Contains("register_buffer: 'g'"));
  (void)child;

  // The optimisers' flat buffers hold the parameters only; a step leaves buffers alone.
  auto& bn = net.at<BatchNorm2d>(1);
  net.eval();  // eval: the forward does not move the running statistics either
  bn.running_mean.fill(0.5);
  for (int which = 0; which < 2; ++which) {
    std::unique_ptr<FlatOptimizer> opt;
    if (which == 0)
      opt = std::make_unique<SGD>(net, SGDConfig{.lr = 0.1, .momentum = 0.9});
    else
      opt = std::make_unique<AdamW>(net, AdamWConfig{.lr = 0.1});
    CHECK(net.flat_parameters().slots.size() == 4);  // conv weight, bias; bn weight, bias
    const std::vector<double> before_mean = bn.running_mean.to_vector();
    const std::vector<double> before_w = bn.weight.to_vector();
    net.zero_grad();
    backward(sum(net.forward(Tensor::from_vector(pattern(25, 7, 13, 6, 4.0), {1, 1, 5, 5}))));
    opt->step();
    CHECK(bn.running_mean.to_vector() == before_mean);
    CHECK(bn.num_batches_tracked.item() == 0);
    CHECK(bn.weight.to_vector() != before_w);
  }
}

TEST_CASE("buffers load strictly and round-trip through safetensors with their int64 counter") {
  BatchNorm2d bn(3);
  std::vector<NamedTensor> state = torch_bn_state();
  std::vector<NamedTensor> missing(state.begin(), state.end() - 2);
  missing.push_back(state.back());
  CHECK_THROWS_WITH(bn.load_state_dict(missing), doctest::Contains("missing tensor 'running_var'"));
  std::vector<NamedTensor> wrong = state;
  wrong.back().second = Tensor::zeros({});  // a float counter
  CHECK_THROWS_WITH(bn.load_state_dict(wrong), doctest::Contains("num_batches_tracked"));
  CHECK(bn.running_mean.to_vector() == std::vector<double>{0, 0, 0});  // nothing half-loaded
  const uint64_t version = bn.running_var.version();
  state.back().second = Tensor::from_vector(std::vector<int64_t>{41}, {}, DType::i64);
  bn.load_state_dict(state);
  CHECK(bn.running_var.version() > version);  // a load is an in-place write
  CHECK(bn.num_batches_tracked.item() == 41);

  TempDir dir("vision_buffers");
  const std::string path = (dir.path / "bn.safetensors").string();
  save_weights(path, bn);
  BatchNorm2d copy(3);
  load_weights(path, copy);
  CHECK(copy.running_mean.to_vector() == bn.running_mean.to_vector());
  CHECK(copy.running_var.to_vector() == bn.running_var.to_vector());
  CHECK(copy.num_batches_tracked.dtype() == DType::i64);
  CHECK(copy.num_batches_tracked.item() == 41);
  for (const auto& [name, t] : load_tensors(path))
    if (name == "num_batches_tracked") CHECK(t.dtype() == DType::i64);
}

namespace {
// A small CNN: Conv2d → BatchNorm2d → relu → MaxPool2d → Flatten → Linear, on 1×6×6 images.
std::shared_ptr<Sequential> make_cnn(uint64_t seed) {
  TorchGenerator saved = default_generator();
  manual_seed(seed);
  auto net = std::make_shared<Sequential>();
  net->add(std::make_unique<Conv2d>(1, 4, IntPair{3, 3}, IntPair{1, 1}, IntPair{1, 1}));
  net->add(std::make_unique<BatchNorm2d>(4));
  net->add(dg::relu);
  net->add(std::make_unique<MaxPool2d>(IntPair{2, 2}));
  net->add(std::make_unique<Flatten>());
  net->add(std::make_unique<Linear>(4 * 3 * 3, 3));
  default_generator() = saved;
  return net;
}
TensorDataset image_data() {
  TorchGenerator g(3);
  const Tensor x = randn({48, 1, 6, 6}, DType::f32, &g);
  std::vector<int64_t> labels;
  const float* p = x.data<float>();
  for (int64_t i = 0; i < 48; ++i) labels.push_back(p[i * 36 + 7] > 0 ? (p[i * 36 + 20] > 0) : 2);
  return TensorDataset({x, Tensor::from_vector(labels, {48}, DType::i64)});
}
Tensor classify(Sequential& net, const Batch& b) { return cross_entropy(net.forward(b[0]), b[1]); }
std::vector<std::vector<double>> buffers_of(const Module& m) {
  std::vector<std::vector<double>> out;
  for (const Tensor& t : m.buffers()) out.push_back(t.to_vector());
  return out;
}
}  // namespace

TEST_CASE(
    "a CNN with BatchNorm2d resumes from a Trainer checkpoint bit for bit, buffers included") {
  TempDir dir("vision_resume");
  const TensorDataset data = image_data();
  TrainingConfig c;
  c.steps = 10;
  c.batch = 8;
  c.seed = 5;
  const auto sampler = [&] { return Sampler::shuffled(data.size(), 3, /*drop_last=*/false); };
  std::vector<std::unique_ptr<FlatOptimizer>> optimizers;
  auto adamw = [&](Module& net) -> FlatOptimizer& {
    optimizers.push_back(std::make_unique<AdamW>(net, AdamWConfig{.lr = 1e-2}));
    return *optimizers.back();
  };

  auto whole_net = make_cnn(1);
  Trainer whole(*whole_net, data, sampler(), classify, c, adamw(*whole_net));
  whole.run();
  CHECK(whole_net->at<BatchNorm2d>(1).num_batches_tracked.item() == 10);

  auto first_net = make_cnn(1);
  Trainer first(*first_net, data, sampler(), classify, c, adamw(*first_net));
  first.run(4);
  const std::string ckpt = (dir.path / "cnn.safetensors").string();
  first.save_checkpoint(ckpt);

  auto fresh_net = make_cnn(2);  // other weights and untouched buffers: the checkpoint has both
  Trainer resumed(*fresh_net, data, sampler(), classify, c, adamw(*fresh_net));
  resumed.load_checkpoint(ckpt);
  CHECK(fresh_net->at<BatchNorm2d>(1).num_batches_tracked.item() == 4);
  resumed.run();
  CHECK(resumed.losses() == whole.losses());
  CHECK(resumed.parameters().values.to_floats() == whole.parameters().values.to_floats());
  CHECK(buffers_of(*fresh_net) == buffers_of(*whole_net));
  // A running statistic that moved is in the comparison (not just the initial zeros and ones).
  CHECK(whole_net->at<BatchNorm2d>(1).running_mean.to_vector() != std::vector<double>(4, 0.0));
}

TEST_CASE("fuse_conv_bn_eval: torch's folded weights, and the pair's eval outputs") {
  // Goldens: torch 1.13's torch.nn.utils.fusion.fuse_conv_bn_eval in float64 on these values.
  Conv2d conv(2, 3, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 1, true, DType::f64);
  BatchNorm2d bn(3, 1e-5, 0.1, true, true, DType::f64);
  conv.weight.copy_from(reshape(linspace(-1, 1, 24, DType::f64), {3, 2, 2, 2}));
  conv.bias.copy_from(Tensor::from_vector({0.1, -0.2, 0.3}, {3}, DType::f64));
  bn.weight.copy_from(Tensor::from_vector({0.5, 1.5, -2.0}, {3}, DType::f64));
  bn.bias.copy_from(Tensor::from_vector({0.25, -0.75, 1.0}, {3}, DType::f64));
  bn.running_mean.copy_from(Tensor::from_vector({0.3, -0.1, 0.7}, {3}, DType::f64));
  bn.running_var.copy_from(Tensor::from_vector({0.9, 1.7, 0.2}, {3}, DType::f64));
  bn.eval();
  const std::unique_ptr<Conv2d> fused = fuse_conv_bn_eval(conv, bn);
  const std::vector<double> torch_w = {
      -0.5270433486842594,  -0.4812134922769325,  -0.4353836358696056,  -0.38955377946227865,
      -0.3437239230549518,  -0.2978940666476249,  -0.25206421024029796, -0.20623435383297106,
      -0.35013516075297413, -0.25009654339498155, -0.15005792603698895, -0.05001930867899633,
      0.05001930867899633,  0.15005792603698895,  0.25009654339498155,  0.35013516075297413,
      -1.7499224957451482,  -2.138794161466292,   -2.5276658271874366,  -2.91653749290858,
      -3.305409158629724,   -3.694280824350868,   -4.083152490072012,   -4.472024155793156};
  const std::vector<double> torch_b = {0.14459133026314813, -0.8650444099616915,
                                       2.7888096623172625};
  check_close(fused->weight.to_vector(), torch_w, 1e-15);
  check_close(fused->bias.to_vector(), torch_b, 1e-15);
  // the fused convolution against the pair, in float64 and float32
  const Tensor x = random_tensor({2, 2, 5, 4}, 3, -1, 1, false);
  check_close(fused->forward(x).to_vector(), bn.forward(conv.forward(x)).to_vector(), 1e-13);
  conv.to(DType::f32);
  bn.to(DType::f32);
  const std::unique_ptr<Conv2d> fused32 = fuse_conv_bn_eval(conv, bn);
  const Tensor x32 = x.to(DType::f32);
  check_close(fused32->forward(x32).to_vector(), bn.forward(conv.forward(x32)).to_vector(), 1e-5);
  // refusals: training mode, channels that differ
  bn.train();
  CHECK(error_of([&] { (void)fuse_conv_bn_eval(conv, bn); }).find("eval mode") !=
        std::string::npos);
  BatchNorm2d other(4);
  other.eval();
  CHECK(error_of([&] { (void)fuse_conv_bn_eval(conv, other); }).find("3 output channels") !=
        std::string::npos);
}
