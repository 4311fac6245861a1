// Module tests: every nn layer, every MicroBlock mode and the whole MicroLM (five residual modes)
// through the public gradcheck in float64; parameter counts and names; real
// GQA; config validation and load_state_dict errors. Op-level gradients live in
// test_gradcheck_ops.cpp and the reference's numbers in test_parity_golden.cpp, not here.
#include <doctest/doctest.h>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/lm/micro_lm.h"
#include "tests/nn_test_helpers.h"

using namespace dg;
using namespace dg::nn_test;

// ---- 1. gradcheck of every module

TEST_CASE("gradcheck: Embedding, Linear, RMSNorm, LayerNorm, Norm") {
  Embedding emb(11, 4, DType::f64);
  randomize(emb, 1);
  Tensor ids =
      Tensor::from_ids({3, 1, 3, 0, 10, 3, 7, 1, 1, 2}, {2, 5});  // repeats: rows accumulate
  expect_gradcheck("Embedding", [&](const std::vector<Tensor>&) { return emb.forward(ids); },
                   {emb.weight});

  for (bool bias : {false, true}) {
    Linear lin(4, 5, bias, DType::f64);
    randomize(lin, 2);
    CHECK(lin.bias.defined() == bias);
    Tensor x = random_tensor({2, 3, 4}, 3);  // 3-D input
    std::vector<Tensor> inputs{x, lin.weight};
    if (bias) inputs.push_back(lin.bias);
    expect_gradcheck(
        bias ? "Linear+bias 3-D" : "Linear 3-D",
        [&](const std::vector<Tensor>& in) { return lin.forward(in[0]); }, inputs);
    Tensor y = lin.forward(x);
    CHECK(y.shape() == Shape{2, 3, 5});
  }

  RMSNorm rms(6, 1e-6, DType::f64);
  randomize(rms, 4);
  Tensor x = random_tensor({2, 3, 6}, 5);
  expect_gradcheck("RMSNorm", [&](const std::vector<Tensor>& in) { return rms.forward(in[0]); },
                   {x, rms.weight});

  LayerNorm ln(6, 1e-5, DType::f64);
  randomize(ln, 6);
  expect_gradcheck("LayerNorm", [&](const std::vector<Tensor>& in) { return ln.forward(in[0]); },
                   {x, ln.weight, ln.bias});

  for (Norm::Kind kind : {Norm::Kind::rms, Norm::Kind::layer}) {
    Norm n(kind, 6, 1e-5, DType::f64);
    randomize(n, 7);
    std::vector<Tensor> inputs = {x};
    for (const Tensor& p : n.parameters()) inputs.push_back(p);
    CHECK(inputs.size() == (kind == Norm::Kind::rms ? 2u : 3u));
    expect_gradcheck(
        kind == Norm::Kind::rms ? "Norm(rms)" : "Norm(layer)",
        [&](const std::vector<Tensor>& in) { return n.forward(in[0]); }, inputs);
    // Norm is exactly the layer it stands for.
    Tensor expected = kind == Norm::Kind::rms ? rms_norm(x, n.weight, 1e-5)
                                              : layer_norm(x, n.weight, n.bias, 1e-5);
    CHECK(max_abs_diff(n.forward(x), expected) == 0.0);
  }
}

TEST_CASE("gradcheck: CausalSelfAttention (MHA, GQA, RoPE on/off, bias, u_qk != u_v)") {
  struct Case {
    int64_t heads, kv_heads;
    bool rope, bias;
  };
  for (Case c : {Case{2, 2, true, false}, Case{2, 1, true, false}, Case{2, 2, false, false},
                 Case{2, 1, false, true}, Case{4, 2, true, false}}) {
    std::string name = fmt::format("attention heads={} kv_heads={} rope={} bias={}", c.heads,
                                   c.kv_heads, c.rope, c.bias);
    CAPTURE(name);
    AttentionConfig ac{8, c.heads, c.kv_heads, c.rope, 10000.0, c.bias};
    CausalSelfAttention attn(ac, DType::f64);
    randomize(attn, 11);
    Tensor u_qk = random_tensor({2, 5, 8}, 12), u_v = random_tensor({2, 5, 8}, 13);
    std::vector<Tensor> inputs{u_qk, u_v};
    for (const Tensor& p : attn.parameters()) inputs.push_back(p);
    CHECK(inputs.size() == (c.bias ? 10u : 6u));
    expect_gradcheck(
        name, [&](const std::vector<Tensor>& in) { return attn.forward(in[0], in[1]); }, inputs);
    // V really reads u_v and Q/K really read u_qk.
    CHECK(max_abs_diff(attn.forward(u_qk, u_v), attn.forward(u_qk, u_qk)) > 1e-3);
    CHECK(max_abs_diff(attn.forward(u_qk, u_v), attn.forward(u_v, u_v)) > 1e-3);
  }
}

TEST_CASE("gradcheck: FeedForward (SwiGLU, GELU, tanh GELU)") {
  for (FeedForward::Kind kind :
       {FeedForward::Kind::swiglu, FeedForward::Kind::gelu, FeedForward::Kind::gelu_tanh}) {
    for (bool bias : {false, true}) {
      FeedForward ffn(kind, 8, 16, bias, DType::f64);
      randomize(ffn, 21);
      CHECK((ffn.gate != nullptr) == (kind == FeedForward::Kind::swiglu));
      Tensor x = random_tensor({2, 5, 8}, 22);
      std::vector<Tensor> inputs{x};
      for (const Tensor& p : ffn.parameters()) inputs.push_back(p);
      expect_gradcheck(
          fmt::format("FeedForward {} bias={}",
                      kind == FeedForward::Kind::swiglu ? "swiglu"
                      : kind == FeedForward::Kind::gelu ? "gelu"
                                                        : "gelu_tanh",
                      bias),
          [&](const std::vector<Tensor>& in) { return ffn.forward(in[0]); }, inputs);
    }
  }
}

TEST_CASE("gradcheck: MicroBlock in every mode") {
  GradcheckOptions opt;
  opt.jacobian_max_entries =
      2048;  // the full Jacobian for the small tensors only (keeps the file fast)
  for (ResidualMode mode :
       {residual_mode("standard"), residual_mode("block_attnres"), residual_mode("rd_attnres")}) {
    for (int64_t index : {0, 2}) {
      MicroLMConfig cfg = tiny_config(mode, index == 0 ? 2 : 1);
      MicroBlock block(cfg, index, DType::f64);
      randomize(block, 31 + index);
      const int64_t k = mode == residual_mode("standard") ? 1 : index + 1;
      std::vector<Tensor> inputs;
      for (int64_t j = 0; j < k; ++j) inputs.push_back(random_tensor({2, 5, 8}, 40 + j));
      for (const Tensor& p : block.parameters()) inputs.push_back(p);
      std::string name = fmt::format("MicroBlock {} index {}", residual_mode_name(mode), index);
      expect_gradcheck(
          name,
          [&](const std::vector<Tensor>& in) {
            return block.forward(std::vector<Tensor>(in.begin(), in.begin() + k));
          },
          inputs, opt);
      if (mode != residual_mode("standard")) {
        CHECK(block.last_alpha_qk.shape() == Shape{2, 5, k});
        CHECK(block.last_alpha_v.shape() == Shape{2, 5, k});
      }
    }
  }
  // A paper-mode block needs the model's partial-sum sources: running it alone is an error, not a
  // silent standard block.
  for (ResidualMode mode :
       {residual_mode("paper_block_attnres"), residual_mode("paper_rd_attnres")}) {
    MicroLMConfig cfg = tiny_config(mode);
    MicroBlock block(cfg, 0, DType::f64);
    CHECK_THROWS_AS(block.forward({random_tensor({2, 5, 8}, 50)}), std::logic_error);
  }
}

TEST_CASE("gradcheck: the whole MicroLM loss w.r.t. every parameter, every registered mode") {
  struct Case {
    ResidualMode mode;
    int64_t kv_heads, block_size;
  };
  std::vector<Case> cases = {
      {residual_mode("standard"), 1, 2},
      {residual_mode("block_attnres"), 1, 2},
      {residual_mode("rd_attnres"), 2, 2},
      {residual_mode("rd_attnres"), 1, 2},
      {residual_mode("paper_block_attnres"), 2, 1},
      {residual_mode("paper_block_attnres"), 1, 2},
      {residual_mode("paper_block_attnres"), 2, 3},
      {residual_mode("paper_rd_attnres"), 1, 1},
      {residual_mode("paper_rd_attnres"), 2, 2},
      {residual_mode("paper_rd_attnres"), 1, 3},
  };
  for (ResidualMode mode : kAllModes)  // a mode registered since: its default case
    if (std::none_of(cases.begin(), cases.end(), [&](const Case& c) { return c.mode == mode; }))
      cases.push_back({mode, 1, 2});
  // The loss is a scalar, so the per-element check is its Jacobian. Tensors above 32 elements
  // (token, q, output, ffn) take the sampled path: 16 random elements plus 6 random directions.
  const GradcheckOptions opt = model_options();
  Tensor ids = Tensor::from_ids(random_ids(10, 11, 61), {2, 5});
  Tensor targets = Tensor::from_ids(random_ids(10, 11, 62), {2, 5});
  for (const Case& c : cases) {
    MicroLMConfig cfg = tiny_config(c.mode, c.kv_heads, c.block_size);
    MicroLM model(cfg, DType::f64);
    randomize(model, 63);
    std::vector<Tensor> params = model.parameters();
    expect_gradcheck(
        cfg.describe(), [&](const std::vector<Tensor>&) { return model.loss(ids, targets); },
        params, opt);
    int64_t n = 0;
    for (const Tensor& p : params) n += p.numel();
    CHECK(n == model.parameter_count());
  }
  // The other config paths: LayerNorm, GELU, biases, learned positions, untied head, no RoPE.
  MicroLMConfig cfg = tiny_config(residual_mode("rd_attnres"), 1);
  cfg.norm = Norm::Kind::layer, cfg.ffn = FeedForward::Kind::gelu, cfg.bias = true,
  cfg.learned_positions = true;
  cfg.tied_head = false, cfg.rope = false;
  MicroLM model(cfg, DType::f64);
  randomize(model, 64);
  REQUIRE(model.head != nullptr);
  REQUIRE(model.position != nullptr);
  expect_gradcheck(
      cfg.describe(), [&](const std::vector<Tensor>&) { return model.loss(ids, targets); },
      model.parameters(), opt);
}

TEST_CASE(
    "gradcheck has teeth at model level: a parameter read outside the tape is caught and named") {
  MicroLM model(tiny_config(residual_mode("paper_rd_attnres"), 1, 2), DType::f64);
  randomize(model, 65);
  Tensor ids = Tensor::from_ids(random_ids(10, 11, 61), {2, 5});
  Tensor targets = Tensor::from_ids(random_ids(10, 11, 62), {2, 5});
  Tensor gain = model.final_norm->weight;
  auto leaky = [&](const std::vector<Tensor>&) {
    Vec g = gain.to_vector();
    double s = 0;
    for (double v : g) s += v * v;
    return add(model.loss(ids, targets),
               Tensor::from_vector({0.01 * s}, {}, DType::f64));  // d/dg missed
  };
  GradcheckResult ok = gradcheck(
      "model", [&](const std::vector<Tensor>&) { return model.loss(ids, targets); },
      {model.token->weight, gain}, model_options());
  CHECK(ok.passed);
  GradcheckResult r = gradcheck("leaky", leaky, {model.token->weight, gain}, model_options());
  CHECK_FALSE(r.passed);
  CHECK(contains(r.message, "final_norm.weight"));
}

// ---- 3. structure: parameter counts, names, layer-0 route, identical init

namespace {
struct Dims {
  int64_t vocab, dim, layers, heads, kv_heads, expansion;
};
MicroLMConfig config_of(const Dims& d, ResidualMode mode) {
  MicroLMConfig c;
  c.vocab = d.vocab, c.dim = d.dim, c.layers = d.layers, c.heads = d.heads, c.kv_heads = d.kv_heads;
  c.expansion = d.expansion, c.mode = mode;
  return c;
}
// The parameter count from the architecture (§2.4), independent of the registry and the modes'
// own counts, for the five modes the reproduction names.
int64_t expected_count(const Dims& d, const std::string& mode) {
  const int64_t D = d.dim, L = d.layers, kv_dim = d.kv_heads * (D / d.heads);
  const int64_t per_layer =
      2 * D * D + 2 * D * kv_dim + 3 * d.expansion * D * D + 2 * D;  // attn, ffn, 2 norms
  const int64_t routes = D * L * (L + 1) / 2;                        // Σ_l (l + 1)·D
  int64_t n = d.vocab * D + L * per_layer + D;                       // + final norm
  if (mode == "standard") return n;
  if (mode == "block_attnres") return n + L * D + routes;  // route norms + one shared route
  if (mode == "rd_attnres") return n + L * D + 2 * routes;
  if (mode == "paper_block_attnres") return n + 2 * L * D + D;  // attn/ffn queries + final query
  if (mode == "paper_rd_attnres") return n + 3 * L * D + D;
  FAIL("no expected count for mode " << mode);
  return -1;
}
}  // namespace

TEST_CASE("parameter counts of every mode at the micro and small configs") {
  const Dims micro{512, 64, 2, 4, 4, 3}, small{512, 256, 8, 8, 8, 3},
      small_gqa{512, 256, 8, 8, 2, 3};
  std::string table = "mode                  micro(d64,L2)  small(d256,L8)  small GQA kv=2\n";
  for (const char* name :
       {"standard", "block_attnres", "rd_attnres", "paper_block_attnres", "paper_rd_attnres"}) {
    const ResidualMode mode = residual_mode(name);
    int64_t counts[3];
    int i = 0;
    for (const Dims& d : {micro, small, small_gqa}) {
      MicroLM model(config_of(d, mode));
      counts[i] = model.parameter_count();
      CHECK(counts[i] == expected_count(d, name));
      CHECK(config_of(d, mode).parameter_count() == counts[i]);
      ++i;
    }
    table += fmt::format("{:<22}{:>13}{:>16}{:>16}\n", residual_mode_name(mode), counts[0],
                         counts[1], counts[2]);
  }
  MESSAGE(table);
  CHECK(MicroLM(config_of(micro, residual_mode("block_attnres"))).parameter_count() == 139904);
  CHECK(MicroLM(config_of(micro, residual_mode("rd_attnres"))).parameter_count() == 140096);
  CHECK(MicroLM(config_of(micro, residual_mode("standard"))).parameter_count() == 139584);
  CHECK(MicroLM(config_of(small, residual_mode("block_attnres"))).parameter_count() == 6962432);
  CHECK(MicroLM(config_of(small, residual_mode("rd_attnres"))).parameter_count() == 6971648);
  CHECK(MicroLM(config_of(small, residual_mode("standard"))).parameter_count() == 6951168);
  // An untied head adds exactly vocab·dim, listed last as head.weight.
  MicroLMConfig untied = config_of(micro, residual_mode("rd_attnres"));
  untied.tied_head = false;
  MicroLM m(untied);
  CHECK(m.parameter_count() == 140096 + 512 * 64);
  CHECK(m.named_parameters().back().first == "head.weight");
}

TEST_CASE("no file outside nn/lm/residual/ and tests/ lists the residual modes") {
  // A list of every mode would name the registry's last row; the registry is the one list.
  const std::string last = residual_modes().back().name;
  for (const char* folder : {"nn", "train", "tools"})
    for (const auto& entry :
         std::filesystem::recursive_directory_iterator(std::string(DG_SOURCE_DIR) + "/" + folder)) {
      const std::string path = entry.path().string();
      if (!entry.is_regular_file() || path.find("/nn/lm/residual/") != std::string::npos ||
          !(path.ends_with(".cpp") || path.ends_with(".h")))
        continue;
      std::ifstream in(path);
      const std::string text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      CAPTURE(path);
      CHECK(text.find(last) == std::string::npos);
    }
}

TEST_CASE(
    "named_parameters order follows the reference; shared route and tied head are listed once") {
  const Dims micro{512, 64, 2, 4, 4, 3};
  for (ResidualMode mode :
       {residual_mode("standard"), residual_mode("block_attnres"), residual_mode("rd_attnres")}) {
    std::vector<std::string> expected{"token.weight"};
    for (int l = 0; l < 2; ++l) {
      auto push = [&](const char* n) { expected.push_back(fmt::format("blocks.{}.{}", l, n)); };
      if (mode != residual_mode("standard")) push("route_norm.weight"), push("qk_route.weight");
      if (mode == residual_mode("rd_attnres")) push("v_route.weight");
      for (const char* n : {"attention_norm.weight", "attention.q.weight", "attention.k.weight",
                            "attention.v.weight", "attention.output.weight", "ffn_norm.weight",
                            "ffn.up.weight", "ffn.gate.weight", "ffn.down.weight"})
        push(n);
    }
    expected.push_back("final_norm.weight");
    MicroLM model(config_of(micro, mode));
    std::vector<std::string> names;
    for (auto& [name, p] : model.named_parameters()) names.push_back(name);
    CAPTURE(residual_mode_name(mode));
    CHECK(names == expected);
    if (mode == residual_mode("block_attnres")) {
      CHECK(model.blocks[1]->v_route == model.blocks[1]->qk_route);
      CHECK(model.parameter("blocks.1.qk_route.weight").shape() == Shape{2, 64});
    }
    if (mode == residual_mode("rd_attnres"))
      CHECK(model.blocks[1]->v_route != model.blocks[1]->qk_route);
  }
  // Paper modes: pseudo-queries sit before attention_norm; final_query before final_norm.
  MicroLM paper(config_of(micro, residual_mode("paper_rd_attnres")));
  std::vector<NamedTensor> np = paper.named_parameters();
  CHECK(np[1].first == "blocks.0.attn_query");
  CHECK(np[2].first == "blocks.0.attn_v_query");
  CHECK(np[3].first == "blocks.0.ffn_query");
  CHECK(np[4].first == "blocks.0.attention_norm.weight");
  CHECK(np[np.size() - 2].first == "final_query");
  CHECK(np.back().first == "final_norm.weight");
}

TEST_CASE("reference modes: layer 0's route has an exactly-zero gradient, layer 1's does not") {
  for (ResidualMode mode : {residual_mode("block_attnres"), residual_mode("rd_attnres")}) {
    MicroLMConfig cfg = tiny_config(mode);
    cfg.layers = 2;
    MicroLM model(cfg, DType::f64);
    randomize(model, 81);
    Tensor loss = model.loss(Tensor::from_ids(random_ids(10, 11, 82), {2, 5}),
                             Tensor::from_ids(random_ids(10, 11, 83), {2, 5}));
    backward(loss);
    auto max_abs_grad = [&](const std::string& name) {
      Tensor g = model.parameter(name).grad();
      double m = 0;
      if (g.defined())
        for (double x : g.to_vector()) m = std::max(m, std::fabs(x));
      return m;
    };
    CAPTURE(residual_mode_name(mode));
    CHECK(max_abs_grad("blocks.0.qk_route.weight") == 0.0);
    CHECK(max_abs_grad("blocks.0.route_norm.weight") == 0.0);
    CHECK(max_abs_grad("blocks.1.qk_route.weight") > 1e-6);
    CHECK(max_abs_grad("blocks.1.route_norm.weight") > 1e-6);
    if (mode == residual_mode("rd_attnres")) {
      CHECK(max_abs_grad("blocks.0.v_route.weight") == 0.0);
      CHECK(max_abs_grad("blocks.1.v_route.weight") > 1e-6);
    }
  }
}

TEST_CASE("init_identical: rd_attnres starts as the same function as block_attnres") {
  const Dims micro{512, 64, 2, 4, 4, 3};
  MicroLM block(config_of(micro, residual_mode("block_attnres"))),
      rd(config_of(micro, residual_mode("rd_attnres")));
  block.init_identical(42);
  rd.init_identical(42);
  for (MicroBlock* b : rd.blocks)
    CHECK(max_abs_diff(b->v_route->weight, b->qk_route->weight) == 0.0);
  for (auto& named : block.named_parameters()) {
    const std::string& name = named.first;  // plain variables: clang < 16 cannot capture bindings
    const auto& p = named.second;
    CAPTURE(name);
    CHECK(max_abs_diff(p, rd.parameter(name)) == 0.0);
  }
  Tensor ids = Tensor::from_ids(random_ids(2 * 16, 512, 91), {2, 16});
  NoGradGuard no_grad;
  CHECK(max_abs_diff(block.forward(ids), rd.forward(ids)) == 0.0);
  CHECK(rd.route_stats().js_reference == 0.0);
  // Another seed is another function (the init is keyed by the seed).
  MicroLM other(config_of(micro, residual_mode("block_attnres")));
  other.init_identical(43);
  CHECK(max_abs_diff(block.forward(ids), other.forward(ids)) > 1e-4);
}

// ---- 4. GQA and config validation

TEST_CASE(
    "GQA is real: fewer k/v outputs, and it equals MHA with each kv head repeated for its group") {
  MicroLMConfig gqa_cfg = tiny_config(residual_mode("rd_attnres"), 2);
  gqa_cfg.heads = 4;  // head_dim 2, groups of 2 query heads per kv head
  MicroLMConfig mha_cfg = gqa_cfg;
  mha_cfg.kv_heads = 4;
  MicroLM gqa(gqa_cfg, DType::f64), mha(mha_cfg, DType::f64);
  randomize(gqa, 101);
  randomize(mha, 102);
  CHECK(gqa.parameter("blocks.0.attention.k.weight").shape() ==
        Shape{4, 8});  // kv_heads · head_dim
  CHECK(gqa.parameter("blocks.0.attention.v.weight").shape() == Shape{4, 8});
  CHECK(mha.parameter("blocks.0.attention.k.weight").shape() == Shape{8, 8});
  CHECK(gqa.parameter("blocks.0.attention.q.weight").shape() == Shape{8, 8});
  Tensor ids = Tensor::from_ids(random_ids(10, 11, 103), {2, 5});
  NoGradGuard no_grad;
  Tensor y_gqa = gqa.forward(ids);
  CHECK(max_abs_diff(y_gqa, mha.forward(ids)) > 1e-3);
  // Repeat each kv head's rows for the query heads that read it (head h reads kv head h / 2).
  auto tile = [](const Tensor& w, bool interleave_wrong) {
    Vec src = w.to_vector(), out;  // [2 heads · 2, 8] -> [4 heads · 2, 8]
    for (int64_t h = 0; h < 4; ++h) {
      const int64_t g = interleave_wrong ? h % 2 : h / 2;
      out.insert(out.end(), src.begin() + g * 16, src.begin() + (g + 1) * 16);
    }
    return Tensor::from_vector(out, {8, 8}, DType::f64);
  };
  for (bool wrong : {false, true}) {
    std::vector<NamedTensor> state;
    for (auto& [name, p] : gqa.named_parameters())
      state.emplace_back(
          name, name.ends_with("attention.k.weight") || name.ends_with("attention.v.weight")
                    ? tile(p, wrong)
                    : dg::raw::clone(p));
    mha.load_state_dict(state);
    const double diff = max_abs_diff(y_gqa, mha.forward(ids));
    if (wrong)
      CHECK(diff > 1e-3);  // grouping by h % kv_heads would be a different model
    else
      CHECK(diff <= 1e-12);
  }
}

TEST_CASE("config validation names the field; kv_heads must divide heads") {
  auto error_for = [](auto change) {
    MicroLMConfig c;
    change(c);
    return invalid_argument_of([&] { MicroLM m(c); });
  };
  CHECK(contains(error_for([](MicroLMConfig& c) { c.vocab = 0; }), "vocab"));
  CHECK(contains(error_for([](MicroLMConfig& c) { c.dim = 0; }), "dim"));
  CHECK(contains(error_for([](MicroLMConfig& c) { c.layers = 0; }), "layers"));
  CHECK(contains(error_for([](MicroLMConfig& c) { c.heads = 5; }), "heads"));
  CHECK(contains(error_for([](MicroLMConfig& c) { c.heads = 0; }), "heads"));
  const std::string kv = error_for([](MicroLMConfig& c) { c.kv_heads = 3; });
  CHECK(contains(kv, "kv_heads 3"));
  CHECK(contains(kv, "heads 4"));
  CHECK(contains(error_for([](MicroLMConfig& c) { c.kv_heads = 0; }), "kv_heads"));
  CHECK(contains(error_for([](MicroLMConfig& c) { c.dim = 12; }), "rope"));  // head_dim 3 is odd
  CHECK(contains(error_for([](MicroLMConfig& c) { c.seq_len = 0; }), "seq_len"));
  CHECK(contains(error_for([](MicroLMConfig& c) { c.expansion = 0; }), "expansion"));
  CHECK(contains(error_for([](MicroLMConfig& c) { c.attnres_block_size = 0; }),
                 "attnres_block_size"));
  CHECK(contains(error_for([](MicroLMConfig& c) { c.norm_eps = -1e-6; }), "norm_eps"));
  // Without RoPE an odd head dimension is fine.
  MicroLMConfig ok;
  ok.dim = 12, ok.rope = false;
  CHECK_NOTHROW(MicroLM{ok});
  // The attention layer checks on its own too.
  const std::string attn = invalid_argument_of([] {
    CausalSelfAttention a(AttentionConfig{8, 4, 3, true, 10000.0, false});
  });
  CHECK(contains(attn, "kv_heads 3"));
  CHECK(contains(invalid_argument_of([] { parse_residual_mode("block"); }), "rd_attnres"));
  for (ResidualMode mode : kAllModes) CHECK(parse_residual_mode(residual_mode_name(mode)) == mode);
}

// ---- 5. load_state_dict

TEST_CASE("load_state_dict: round trip, conversion, and errors naming the tensor") {
  MicroLMConfig cfg = tiny_config(residual_mode("rd_attnres"), 1);
  MicroLM source(cfg, DType::f64), target(cfg, DType::f64);
  randomize(source, 111);
  target.init_identical(112);
  Tensor ids = Tensor::from_ids(random_ids(10, 11, 113), {2, 5});
  std::vector<NamedTensor> state;
  for (auto& [name, p] : source.named_parameters()) state.emplace_back(name, dg::raw::clone(p));
  NoGradGuard no_grad;
  Tensor expected = source.forward(ids);
  CHECK(max_abs_diff(expected, target.forward(ids)) > 1e-3);

  auto snapshot = [](const Module& m) {
    Vec all;
    for (auto& [name, p] : m.named_parameters()) {
      Vec v = p.to_vector();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  auto expect_error = [&](const std::vector<NamedTensor>& bad, std::vector<std::string> parts) {
    const Vec before = snapshot(target);
    const std::string msg = invalid_argument_of([&] { target.load_state_dict(bad); });
    INFO(msg);
    for (const std::string& p : parts) CHECK(contains(msg, p));
    CHECK(snapshot(target) == before);  // a failed load changes nothing
  };
  auto without = [&](const std::string& name) {
    std::vector<NamedTensor> s;
    for (auto& nt : state)
      if (nt.first != name) s.push_back(nt);
    return s;
  };
  auto replaced = [&](const std::string& name, const Tensor& t) {
    std::vector<NamedTensor> s = state;
    for (auto& nt : s)
      if (nt.first == name) nt.second = t;
    return s;
  };

  // Errors first, while target still differs from source.
  expect_error(without("blocks.1.ffn.down.weight"), {"missing", "blocks.1.ffn.down.weight"});
  std::vector<NamedTensor> extra = state;
  extra.emplace_back("blocks.7.bogus.weight", Tensor::zeros({3}, DType::f64));
  expect_error(extra, {"unexpected", "blocks.7.bogus.weight"});
  expect_error(replaced("blocks.2.qk_route.weight", Tensor::zeros({2, 8}, DType::f64)),
               {"blocks.2.qk_route.weight", "[2, 8]", "[3, 8]"});
  // The last tensor in the list is wrong: nothing before it may have been copied.
  expect_error(replaced("final_norm.weight", Tensor::zeros({9}, DType::f64)),
               {"final_norm.weight", "[9]"});
  expect_error(replaced("token.weight", Tensor::from_ids(std::vector<int64_t>(88, 0), {11, 8})),
               {"token.weight", "int64"});
  std::vector<NamedTensor> twice = state;
  twice.push_back(state[3]);
  expect_error(twice, {"twice", state[3].first});
  CHECK(max_abs_diff(expected, target.forward(ids)) > 1e-3);

  // Round trip.
  target.load_state_dict(state);
  CHECK(max_abs_diff(expected, target.forward(ids)) == 0.0);
  CHECK(snapshot(target) == snapshot(source));
  // Loading copies values: the model does not alias the given tensors.
  state[0].second.fill(0.0);
  CHECK(max_abs_diff(expected, target.forward(ids)) == 0.0);

  // float32 tensors load into a float64 model (rounded once).
  MicroLM from32(cfg, DType::f64);
  std::vector<NamedTensor> state32;
  for (auto& [name, p] : source.named_parameters()) state32.emplace_back(name, p.to(DType::f32));
  from32.load_state_dict(state32);
  const double err32 = max_abs_diff(expected, from32.forward(ids));
  CHECK(err32 > 0.0);
  CHECK(err32 < 1e-5);

  // Non-strict: missing and unknown names are skipped, shapes are still checked.
  MicroLM partial(cfg, DType::f64);
  partial.init_identical(112);
  std::vector<NamedTensor> some{
      {"blocks.0.attention.q.weight", source.parameter("blocks.0.attention.q.weight")},
      {"not.a.parameter", Tensor::zeros({1}, DType::f64)}};
  partial.load_state_dict(some, /*strict=*/false);
  CHECK(max_abs_diff(partial.parameter("blocks.0.attention.q.weight"),
                     source.parameter("blocks.0.attention.q.weight")) == 0.0);
  CHECK(max_abs_diff(partial.parameter("token.weight"), target.parameter("token.weight")) > 0.0);
  CHECK_THROWS_AS(
      partial.load_state_dict({{"token.weight", Tensor::zeros({2, 2}, DType::f64)}}, false),
      std::invalid_argument);

  // A flattened model loads into its flat buffer.
  MicroLM flat_model(cfg, DType::f64);
  FlatParameters flat = flatten_parameters(flat_model);
  flat_model.load_state_dict(state32);
  CHECK(max_abs_diff(from32.forward(ids), flat_model.forward(ids)) == 0.0);
  const Vec fv = flat.values.to_vector();
  const auto& slot = flat.slots.back();
  CHECK(slot.name == "final_norm.weight");
  CHECK(fv[slot.offset] ==
        static_cast<double>(static_cast<float>(source.final_norm->weight.to_vector()[0])));
}
