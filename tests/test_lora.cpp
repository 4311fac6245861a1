// LoRA adapters (nn/lora.h) and frozen parameters through the training stack: the adapted Linear's
// gradients (float64 gradcheck), apply on a MicroLM and on a user's Sequential (names, counts, the
// base's bits after AdamW with weight decay), merge and unmerge, cached decoding with an adapter,
// a LoRA run through the Trainer (loss falls, resume bit for bit, accumulation) and every refusal.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "autograd/gradcheck.h"
#include "nn/containers.h"
#include "nn/lm/decode.h"
#include "nn/lm/micro_lm.h"
#include "nn/lora.h"
#include "tensor/factory.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/optim/adam.h"
#include "train/trainer.h"

using namespace dg;

namespace {
MicroLMConfig tiny_lm() {  // standard residual, RoPE, grouped-query attention
  MicroLMConfig c;
  c.vocab = 41;
  c.dim = 16;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_len = 12;
  c.expansion = 2;
  c.mode = residual_mode("standard");
  c.tied_head = false;
  return c;
}
std::shared_ptr<MicroLM> tiny_model(uint64_t seed = 3) {
  auto m = std::make_shared<MicroLM>(tiny_lm());
  m->init_identical(seed);
  return m;
}
std::vector<int32_t> id_list(int64_t n, int64_t vocab, int64_t salt) {
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i)
    ids[i] = static_cast<int32_t>((i * i * 7 + salt * 13 + 5) % vocab);
  return ids;
}
Tensor token_ids(int64_t B, int64_t T, int64_t vocab, int64_t salt) {
  return Tensor::from_vector(id_list(B * T, vocab, salt), {B, T});
}
std::map<std::string, std::vector<float>> snapshot(const Module& m, bool trainable) {
  std::map<std::string, std::vector<float>> out;
  for (auto& [name, p] : m.named_parameters())
    if (p.requires_grad() == trainable) out[name] = p.to_floats();
  return out;
}
// The float32 unit in the last place at |x|.
double ulp(float x) {
  const float a = std::fabs(x);
  return double(std::nextafter(a, INFINITY)) - a;
}
}  // namespace

TEST_CASE("the adapted Linear's gradients (x, A, B) pass a float64 gradcheck, which catches 1%") {
  manual_seed(11);
  LoRALinear layer(5, 4, /*r=*/3, /*alpha=*/6, 0, false, true, DType::f64);
  Linear& A = const_cast<Linear&>(*layer.lora->A);
  Linear& B = const_cast<Linear&>(*layer.lora->B);
  CHECK(layer.lora->scale == 2.0);
  CHECK(!layer.weight.requires_grad());
  Tensor x = randn({2, 3, 5}, DType::f64);
  x.set_requires_grad(true);
  Tensor a = randn({3, 5}, DType::f64);
  a.set_requires_grad(true);
  Tensor b = randn({4, 3}, DType::f64);
  b.set_requires_grad(true);
  auto adapted = [&](const std::vector<Tensor>& in) {
    A.weight = in[1];  // the layer reads its adapter's fields: the checked inputs
    B.weight = in[2];
    return layer.forward(in[0]);
  };
  const GradcheckResult good = gradcheck("lora_linear", adapted, {x, a, b});
  INFO(good.message);
  CHECK(good.passed);
  CHECK(good.checks > 0);
  // The same forward with a gradient 1% too large (value unchanged): the check must fail.
  auto off = [&](const std::vector<Tensor>& in) {
    const Tensor y = adapted(in);
    return add(y, scale(sub(y, detach(y)), 0.01));
  };
  CHECK(!gradcheck("lora_linear_off", off, {x, a, b}).passed);
}

TEST_CASE("A is drawn as PEFT draws it; LoRALinear; dropout on the adapter's input") {
  // PEFT's lora_A [2, 5] after torch.manual_seed(0), nn.Linear(5, 4): tools/torch_goldens_lora.py
  const std::vector<float> kPeftLoraA = {
      7.566168904e-02f, -4.175609648e-01f, -3.231414557e-01f, -2.305520177e-01f, 2.821640074e-01f,
      2.622108161e-01f, -1.983370036e-01f, -1.613653451e-02f, 2.860202491e-01f,  4.445898533e-01f};
  manual_seed(0);
  Sequential net(std::make_unique<Linear>(5, 4));
  lora::apply(net, {.targets = {"0"}, .r = 2, .alpha = 2});
  CHECK(net.parameter("0.lora_A.weight").to_floats() == kPeftLoraA);
  CHECK(net.parameter("0.lora_B.weight").to_floats() == std::vector<float>(8, 0.0f));

  manual_seed(1);
  LoRALinear layer(8, 4, /*r=*/2, /*alpha=*/4, /*dropout=*/0.5);
  std::vector<std::string> names;
  for (auto& [name, p] : layer.named_parameters())
    names.push_back(name + (p.requires_grad() ? " trains" : " frozen"));
  CHECK(names == std::vector<std::string>{"weight frozen", "bias frozen", "lora_A.weight trains",
                                          "lora_B.weight trains"});
  {
    NoGradGuard no_grad;
    const_cast<Linear&>(*layer.lora->B).weight.copy_from(randn({4, 2}));
  }
  const Tensor x = randn({6, 8});
  const Tensor plain =
      add(linear(x, layer.weight, layer.bias),
          scale(linear(linear(x, layer.lora->A->weight), layer.lora->B->weight), 2.0));
  layer.eval();  // dropout off: the composition
  CHECK(test::rel_diff(layer.forward(x).to_floats(), plain.to_floats()) < 1e-6);
  layer.train();  // dropout on the adapter's input only
  CHECK(test::rel_diff(layer.forward(x).to_floats(), plain.to_floats()) > 1e-3);
}

TEST_CASE("apply on a MicroLM: PEFT's names, the count, zero output at init, the base unchanged") {
  auto model = tiny_model();
  const Tensor ids = token_ids(2, 12, 41, 0), targets = token_ids(2, 12, 41, 1);
  const std::vector<float> before = model->forward(ids).to_floats();
  const auto base = snapshot(*model, true);  // every parameter trains before apply
  lora::Summary s = lora::apply(*model, {.targets = {"q", "v", "head"}, .r = 4, .alpha = 8});
  CHECK(s.adapted == std::vector<std::string>{"blocks.0.attention.q", "blocks.0.attention.v",
                                              "blocks.1.attention.q", "blocks.1.attention.v",
                                              "head"});
  const int64_t D = 16, kv = 8, V = 41, r = 4;
  CHECK(s.trainable == 2 * (r * D + D * r + r * D + kv * r) + (r * D + V * r));
  CHECK(s.total == model->parameter_count());
  CHECK(model->blocks[0]->attention->q->lora->scale == 2.0);
  std::vector<std::string> names;
  for (auto& [name, p] : model->named_parameters())
    if (p.requires_grad()) names.push_back(name);
  CHECK(names.front() == "blocks.0.attention.q.lora_A.weight");
  CHECK(names[1] == "blocks.0.attention.q.lora_B.weight");
  CHECK(names.back() == "head.lora_B.weight");
  CHECK(model->parameter("blocks.1.attention.v.lora_A.weight").shape() == Shape{r, D});
  CHECK(model->parameter("blocks.1.attention.v.lora_B.weight").shape() == Shape{kv, r});
  // B = 0: the adapted Linear's output is the base's, bit for bit; the model's to rounding (the
  // adapted projections leave the fused RoPE and residual ops).
  const Linear& q = *model->blocks[0]->attention->q;
  CHECK(!q.plain());
  const Tensor u = randn({3, D});
  CHECK(q.forward(u).to_floats() == linear(u, q.weight, q.bias).to_floats());
  const std::vector<float> after = model->forward(ids).to_floats();
  double worst = 0;
  for (size_t i = 0; i < before.size(); ++i)
    worst = std::max(worst, std::fabs(double(before[i]) - after[i]));
  CHECK(worst < 1e-5);
  // AdamW with weight decay over the model: the adapters move, the base keeps its bits.
  const auto frozen = snapshot(*model, false);
  CHECK(frozen.size() == base.size());
  AdamW opt(*model, {.lr = 1e-2, .weight_decay = 0.1});
  CHECK(model->flat_parameters().total >= s.trainable);
  CHECK(model->flat_parameters().slots.size() == 10);
  for (int step = 0; step < 3; ++step) {
    model->zero_grad();
    backward(model->loss(ids, targets));
    opt.step();
  }
  for (const auto& entry : frozen) {
    const std::string& name = entry.first;
    CAPTURE(name);
    CHECK(model->parameter(name).to_floats() == base.at(name));
    CHECK(!model->parameter(name).grad().defined());
  }
  CHECK(model->parameter("head.lora_B.weight").to_floats() != std::vector<float>(V * r, 0.0f));
}

TEST_CASE("apply on a user's Sequential; apply_shared: one A, each member's B") {
  manual_seed(5);
  Sequential net(std::make_unique<Linear>(3, 16), dg::tanh, std::make_unique<Linear>(16, 16),
                 dg::tanh, std::make_unique<Linear>(16, 2));
  lora::Summary s = lora::apply(net, {.targets = {"0", "4"}, .r = 2, .alpha = 4, .dropout = 0.1});
  CHECK(s.adapted == std::vector<std::string>{"0", "4"});
  CHECK(s.trainable == (2 * 3 + 16 * 2) + (2 * 16 + 2 * 2));
  CHECK(s.total == 3 * 16 + 16 + 16 * 16 + 16 + 16 * 2 + 2 + s.trainable);
  CHECK(net.parameter("0.lora_A.weight").requires_grad());
  CHECK(!net.parameter("2.weight").requires_grad());
  CHECK(net.at<Linear>(0).lora->dropout != nullptr);
  CHECK(repr(net).find("(lora_dropout): Dropout(p=0.1, inplace=False)") != std::string::npos);

  // GPT-2's c_attn, split in q, k, v: one A (the first member's), three Bs.
  auto model = tiny_model();
  lora::Summary shared = lora::apply_shared(
      *model, {"blocks.0.attention.q", "blocks.0.attention.k", "blocks.0.attention.v"},
      {.targets = {}, .r = 2, .alpha = 2, .use_rslora = true});
  CHECK(shared.trainable == 2 * 16 + (16 + 8 + 8) * 2);
  const auto& attn = *model->blocks[0]->attention;
  CHECK(attn.k->lora->A == attn.q->lora->A);
  CHECK(attn.v->lora->A == attn.q->lora->A);
  CHECK(attn.q->lora->scale == doctest::Approx(std::sqrt(2.0)));
  std::vector<std::string> names;
  for (auto& [name, p] : model->named_parameters())
    if (p.requires_grad()) names.push_back(name);
  CHECK(names == std::vector<std::string>{
                     "blocks.0.attention.q.lora_A.weight", "blocks.0.attention.q.lora_B.weight",
                     "blocks.0.attention.k.lora_B.weight", "blocks.0.attention.v.lora_B.weight"});
  // A later apply keeps the earlier adapters trainable.
  lora::Summary more = lora::apply(*model, {.targets = {"output"}, .r = 2});
  CHECK(more.trainable == shared.trainable + 2 * (2 * 16 + 16 * 2));
  CHECK(lora::adapted_linears(*model).size() == 5);
}

TEST_CASE("merge gives the unmerged forward; unmerge restores the base within 1 ulp; decoding") {
  auto model = tiny_model();
  lora::apply(
      *model,
      {.targets = {"q", "k", "v", "output", "up", "gate", "down", "head"}, .r = 3, .alpha = 5});
  const auto base = snapshot(*model, false);
  // With B = 0 (as applied) merge and unmerge give the base back bit for bit.
  lora::merge(*model);
  lora::unmerge(*model);
  CHECK(snapshot(*model, false) == base);
  manual_seed(9);  // trained-looking adapters: B away from zero
  NoGradGuard no_grad;
  for (auto& [name, l] : lora::adapted_linears(*model))
    const_cast<Linear&>(*l->lora->B)
        .weight.copy_from(scale(randn(l->lora->B->weight.shape()), 0.05));
  const std::vector<int32_t> ids = id_list(12, 41, 2);
  const Tensor batch = Tensor::from_vector(ids, {1, 12});
  const std::vector<float> unmerged = model->forward(batch).to_floats();
  Decoder decoder(*model);  // computes the unmerged adapters' terms itself
  const std::vector<float> decoded = decoder.append(ids, true).to_floats();
  lora::merge(*model);
  for (auto& [name, l] : lora::adapted_linears(*model)) CHECK(l->plain());
  const auto merged_weights = snapshot(*model, false);
  const std::vector<float> merged = model->forward(batch).to_floats();
  CHECK(test::rel_diff(merged, unmerged) < 1e-6);
  CHECK(test::rel_diff(decoded, unmerged) < 1e-5);
  decoder.reset();
  CHECK(test::rel_diff(decoder.append(ids, true).to_floats(), merged) < 1e-5);
  CHECK_THROWS_WITH_AS(lora::merge(*model),
                       doctest::Contains("'blocks.0.attention.q' is already merged"),
                       std::invalid_argument);
  lora::unmerge(*model);
  for (const auto& entry : base) {
    const std::string& name = entry.first;
    CAPTURE(name);
    const std::vector<float> now = model->parameter(name).to_floats();
    const std::vector<float>& folded = merged_weights.at(name);
    for (size_t i = 0; i < entry.second.size(); ++i)
      REQUIRE(std::fabs(double(now[i]) - entry.second[i]) <=
              std::max(ulp(entry.second[i]), ulp(folded[i])));
  }
  CHECK(test::rel_diff(model->forward(batch).to_floats(), unmerged) < 1e-6);
  CHECK_THROWS_WITH_AS(lora::unmerge(*model),
                       doctest::Contains("'blocks.0.attention.q' is not merged"),
                       std::invalid_argument);
}

namespace {
// A LoRA run of the tiny MicroLM through the Trainer: adapters on q, v, the FFN's up and the head.
struct LoRARun {
  std::shared_ptr<MicroLM> model;
  std::unique_ptr<Trainer> trainer;
};
LoRARun lora_run(const std::vector<int32_t>& ids, int64_t batch, int64_t accum,
                 const std::vector<std::string>& unfrozen = {}) {
  auto model = tiny_model();
  manual_seed(17);  // the adapters' A: the same in every run
  lora::apply(*model, {.targets = {"q", "v", "up", "head"}, .r = 4, .alpha = 16});
  for (const std::string& name : unfrozen) model->parameter(name).set_requires_grad(true);
  TrainingConfig config;
  config.steps = 30;
  config.batch = batch;
  config.accum = accum;
  config.seed = 7;
  auto windows = std::make_shared<TokenWindows>(ids, 12, 1, static_cast<int64_t>(ids.size()) - 13);
  auto optimizer = std::make_shared<AdamW>(*model, AdamWConfig{.lr = 3e-2, .weight_decay = 0.1});
  TrainingSetup setup{
      .model = model,
      .data = windows,
      .sampler = Sampler::random(windows->size(), 7),
      .loss = typed_loss<MicroLM>([](MicroLM& m, const Batch& b) { return m.loss(b[0], b[1]); }),
      .optimizer = optimizer};
  return {model, std::make_unique<Trainer>(std::move(setup), config)};
}
double mean(const std::vector<double>& v, size_t from, size_t to) {
  double s = 0;
  for (size_t i = from; i < to; ++i) s += v[i];
  return s / double(to - from);
}
}  // namespace

TEST_CASE("a LoRA run through the Trainer: loss falls, resume is bit-exact, accum 2 = 2 batches") {
  test::TempDir dir("lora");
  const std::vector<int32_t> ids = id_list(600, 41, 4);
  LoRARun full = lora_run(ids, 4, 1);
  const auto base = snapshot(*full.model, false);
  CHECK(full.trainer->parameters().slots.size() == 14);  // A, B of q, v, up in 2 blocks; head
  full.trainer->run(30);
  const std::vector<double>& losses = full.trainer->losses();
  REQUIRE(losses.size() == 30);
  CHECK(mean(losses, 25, 30) < mean(losses, 0, 5) - 1.0);  // about 3.5 to 0.9
  CHECK(snapshot(*full.model, false) == base);             // weight decay never reached the base

  LoRARun first = lora_run(ids, 4, 1);
  first.trainer->run(15);
  const std::string ckpt = (dir.path / "lora.safetensors").string();
  first.trainer->save_checkpoint(ckpt);
  std::set<std::string> saved;
  for (auto& [name, t] : load_tensors(ckpt)) saved.insert(name);
  CHECK(saved.count("blocks.0.attention.q.lora_A.weight"));
  CHECK(saved.count("optimizer.exp_avg_sq.blocks.1.ffn.up.lora_B.weight"));
  CHECK(!saved.count("blocks.0.attention.q.weight"));  // the frozen base is the caller's
  CHECK(!saved.count("token.weight"));
  CHECK(!saved.count("optimizer.exp_avg.token.weight"));
  LoRARun resumed = lora_run(ids, 4, 1);  // rebuilt: base, then the same adapters
  resumed.trainer->load_checkpoint(ckpt);
  resumed.trainer->run(30);
  CHECK(resumed.trainer->losses() == losses);
  CHECK(snapshot(*resumed.model, true) == snapshot(*full.model, true));

  LoRARun whole = lora_run(ids, 4, 1), accumulated = lora_run(ids, 2, 2);
  whole.trainer->run(6);
  accumulated.trainer->run(6);
  for (size_t i = 0; i < 6; ++i)
    CHECK(std::fabs(whole.trainer->losses()[i] - accumulated.trainer->losses()[i]) <=
          1e-6 * std::fabs(whole.trainer->losses()[i]));
  CHECK(test::rel_diff(whole.trainer->parameters().values.to_floats(),
                       accumulated.trainer->parameters().values.to_floats()) < 1e-5);

  // A checkpoint of a run that trained token.weight too is of another run here.
  LoRARun wider = lora_run(ids, 4, 1, {"token.weight"});
  wider.trainer->run(1);
  const std::string other = (dir.path / "wider.safetensors").string();
  wider.trainer->save_checkpoint(other);
  LoRARun narrow = lora_run(ids, 4, 1);
  CHECK_THROWS_WITH_AS(narrow.trainer->load_checkpoint(other),
                       doctest::Contains("(of a frozen parameter of this model"),
                       std::runtime_error);
}

TEST_CASE("LoRA's refusals name the target, module or tensor") {
  auto model = tiny_model();
  auto refuses = [&](const lora::Options& o, const char* text) {
    CHECK_THROWS_WITH_AS(lora::apply(*model, o), doctest::Contains(text), std::invalid_argument);
  };
  refuses({.targets = {"q", "nope"}}, "target 'nope' matches no module of the model");
  refuses({.targets = {"attention"}},
          "target 'attention' matches module 'blocks.0.attention', a CausalSelfAttention, which is "
          "not a Linear");
  refuses({}, "lora::apply: no targets given");
  refuses({.targets = {"q"}, .r = 0}, "r must be >= 1, got 0");
  refuses({.targets = {"q"}, .alpha = NAN}, "alpha must be finite");
  refuses({.targets = {"q"}, .dropout = 1}, "dropout must be in [0, 1), got 1");
  CHECK(lora::adapted_linears(*model).empty());  // nothing changed by a refusal
  CHECK_THROWS_WITH_AS(lora::merge(*model), doctest::Contains("the model has no LoRA adapter"),
                       std::invalid_argument);
  lora::apply(*model, {.targets = {"blocks.0.attention.q"}});
  refuses({.targets = {"q"}}, "matches 'blocks.0.attention.q', which already has a LoRA adapter");
  refuses({.targets = {"lora_A"}}, "'blocks.0.attention.q.lora_A', a LoRA adapter's own layer");
  auto shared_refuses = [&](const std::vector<std::string>& names, const char* text) {
    CHECK_THROWS_WITH_AS(lora::apply_shared(*model, names, {}), doctest::Contains(text),
                         std::invalid_argument);
  };
  shared_refuses({}, "no Linears named");
  shared_refuses({"blocks.1.attention.k", "blocks.1.attention.k"},
                 "'blocks.1.attention.k' is named twice");
  shared_refuses({"blocks.1.attention.k", "blocks.1.attention.x"},
                 "the model has no module 'blocks.1.attention.x'");
  shared_refuses({"blocks.1.attention.k", "blocks.1.ffn.down"},
                 "'blocks.1.ffn.down' (32 in, float32) does not read the input of "
                 "'blocks.1.attention.k' (16 in, float32)");
  shared_refuses({"blocks.0.attention.q"}, "which already has a LoRA adapter");

  // After the flat buffers exist: refused, by apply and by a direct attach on a child.
  AdamW optimizer(*model, AdamWConfig{});
  CHECK_THROWS_WITH_AS(lora::apply(*model, {.targets = {"k"}}),
                       doctest::Contains("flat_parameters() were already made"), std::logic_error);
  CHECK_THROWS_WITH_AS(lora::attach(*model->blocks[1]->attention->k, "k", {}),
                       doctest::Contains("registered after flat_parameters() was made"),
                       std::logic_error);
  // Freezing after the buffers were made: the optimiser refuses to step (it would decay it).
  model->parameter("blocks.0.attention.q.lora_B.weight").set_requires_grad(false);
  CHECK_THROWS_WITH_AS(
      optimizer.step(),
      doctest::Contains("parameter 'blocks.0.attention.q.lora_B.weight' was frozen"),
      std::logic_error);
}

TEST_CASE("the Trainer refuses a model with nothing to train and a parameter unfrozen too late") {
  const std::vector<int32_t> ids = id_list(200, 41, 5);
  auto windows = std::make_shared<TokenWindows>(ids, 12, 1, 150);
  auto make = [&](std::shared_ptr<MicroLM> model, std::shared_ptr<AdamW> optimizer) {
    TrainingSetup setup{
        .model = model,
        .data = windows,
        .sampler = Sampler::random(windows->size(), 7),
        .loss = typed_loss<MicroLM>([](MicroLM& m, const Batch& b) { return m.loss(b[0], b[1]); }),
        .optimizer = optimizer};
    Trainer trainer(std::move(setup), TrainingConfig{});
  };
  auto model = tiny_model();
  lora::apply(*model, {.targets = {"q"}});
  auto optimizer = std::make_shared<AdamW>(*model, AdamWConfig{});
  model->parameter("token.weight").set_requires_grad(true);
  CHECK_THROWS_WITH_AS(
      make(model, optimizer),
      doctest::Contains("parameter 'token.weight' requires grad but is outside the "
                        "flat buffers"),
      std::invalid_argument);
  auto frozen = tiny_model();
  for (auto& [name, p] : frozen->named_parameters()) p.set_requires_grad(false);
  auto other = tiny_model();  // an optimiser over another model: the frozen one is refused first
  CHECK_THROWS_WITH_AS(make(frozen, std::make_shared<AdamW>(*other, AdamWConfig{})),
                       doctest::Contains("every parameter of the model is frozen"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(AdamW(*frozen, AdamWConfig{}),
                       doctest::Contains("the module passed has no parameters to train"),
                       std::invalid_argument);
}
