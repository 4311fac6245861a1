// The paper AttnRes modes (paper_block_attnres, paper_rd_attnres): against an independent
// plain-loop forward of Full AttnRes (block size 1, float64, 1e-12) and against hand-computed
// mixtures with constant sublayers; zero pseudo-queries mix uniformly. Module gradients of these
// modes are checked in test_nn_modules.cpp.
#include <doctest/doctest.h>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/lm/micro_lm.h"
#include "tests/nn_test_helpers.h"

using namespace dg;
using namespace dg::nn_test;

// ---- 2. paper modes

namespace {

// Plain-loop building blocks over row-major [rows, width] vectors of doubles.
Vec ref_rmsnorm(const Vec& x, int64_t D, const Vec& gain, double eps) {
  Vec out(x.size());
  for (size_t r = 0; r < x.size() / D; ++r) {
    double ms = 0;
    for (int64_t d = 0; d < D; ++d) ms += x[r * D + d] * x[r * D + d];
    const double inv = 1.0 / std::sqrt(ms / static_cast<double>(D) + eps);
    for (int64_t d = 0; d < D; ++d)
      out[r * D + d] = x[r * D + d] * inv * (gain.empty() ? 1.0 : gain[d]);
  }
  return out;
}

Vec ref_linear(const Vec& x, int64_t in, const Tensor& weight, const Tensor& bias) {
  const int64_t out_f = weight.size(0);
  Vec W = weight.to_vector(), b = bias.defined() ? bias.to_vector() : Vec(out_f, 0.0);
  const size_t rows = x.size() / in;
  Vec out(rows * out_f);
  for (size_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_f; ++o) {
      double acc = b[o];
      for (int64_t i = 0; i < in; ++i) acc += x[r * in + i] * W[o * in + i];
      out[r * out_f + o] = acc;
    }
  return out;
}

// Causal attention from its definition; x rows are (b, t), heads laid out along the features.
Vec ref_attention(const Vec& u_qk, const Vec& u_v, const CausalSelfAttention& a, int64_t B,
                  int64_t T) {
  const int64_t D = a.config.dim, H = a.config.heads, Hkv = a.config.kv_heads, hd = a.head_dim,
                half = hd / 2;
  Vec q = ref_linear(u_qk, D, a.q->weight, a.q->bias),
      k = ref_linear(u_qk, D, a.k->weight, a.k->bias);
  Vec v = ref_linear(u_v, D, a.v->weight, a.v->bias);
  auto rotate = [&](Vec& x, int64_t heads) {
    if (!a.config.rope) return;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < heads; ++h) {
          double* p = &x[(b * T + t) * heads * hd + h * hd];
          for (int64_t i = 0; i < half; ++i) {
            const double angle =
                static_cast<double>(t) / std::pow(a.config.rope_base, 2.0 * i / hd);
            const double x0 = p[i], x1 = p[i + half];
            p[i] = x0 * std::cos(angle) - x1 * std::sin(angle);
            p[i + half] = x0 * std::sin(angle) + x1 * std::cos(angle);
          }
        }
  };
  rotate(q, H);
  rotate(k, Hkv);
  Vec merged(B * T * H * hd, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / Hkv);
      for (int64_t t = 0; t < T; ++t) {
        Vec s(t + 1);
        double mx = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < hd; ++i)
            dot += q[(b * T + t) * H * hd + h * hd + i] * k[(b * T + j) * Hkv * hd + g * hd + i];
          s[j] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (double& e : s) z += (e = std::exp(e - mx));
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t i = 0; i < hd; ++i)
            merged[(b * T + t) * H * hd + h * hd + i] +=
                s[j] / z * v[(b * T + j) * Hkv * hd + g * hd + i];
      }
    }
  return ref_linear(merged, H * hd, a.output->weight, a.output->bias);
}

Vec ref_swiglu(const Vec& x, const FeedForward& f, int64_t D) {
  Vec g = ref_linear(x, D, f.gate->weight, f.gate->bias),
      u = ref_linear(x, D, f.up->weight, f.up->bias);
  for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return ref_linear(g, f.up->out_features, f.down->weight, f.down->bias);
}

// h = Σ_j softmax_j(w · RMSNorm_nogain(S_j)) S_j, per row.
Vec ref_mix(const std::vector<Vec>& S, const Tensor& query, int64_t D, double eps) {
  Vec w = query.to_vector();
  std::vector<Vec> keys;
  for (const Vec& s : S) keys.push_back(ref_rmsnorm(s, D, {}, eps));
  Vec out(S[0].size(), 0.0);
  for (size_t r = 0; r < S[0].size() / D; ++r) {
    Vec logit(S.size());
    double mx = -1e300, z = 0;
    for (size_t j = 0; j < S.size(); ++j) {
      logit[j] = 0;
      for (int64_t d = 0; d < D; ++d) logit[j] += w[d] * keys[j][r * D + d];
      mx = std::max(mx, logit[j]);
    }
    for (double& l : logit) z += (l = std::exp(l - mx));
    for (size_t j = 0; j < S.size(); ++j)
      for (int64_t d = 0; d < D; ++d) out[r * D + d] += logit[j] / z * S[j][r * D + d];
  }
  return out;
}

Vec ref_logits(const MicroLM& m, const Vec& hidden) {
  const int64_t D = m.config().dim;
  return ref_linear(ref_rmsnorm(hidden, D, m.final_norm->weight.to_vector(), m.config().norm_eps),
                    D, m.token->weight, Tensor());
}

// Full AttnRes straight from its definition: every sublayer output is its own source.
Vec ref_full_attnres_logits(const MicroLM& m, const std::vector<int32_t>& ids, int64_t B,
                            int64_t T) {
  const MicroLMConfig& c = m.config();
  const int64_t D = c.dim;
  const double eps = c.norm_eps;
  Vec E = m.token->weight.to_vector(), h0;
  for (int32_t id : ids) h0.insert(h0.end(), E.begin() + id * D, E.begin() + (id + 1) * D);
  std::vector<Vec> sources{h0};
  for (const MicroBlock* b : m.blocks) {
    const Vec g_attn = b->attention_norm->weight.to_vector(),
              g_ffn = b->ffn_norm->weight.to_vector();
    Vec u_qk = ref_rmsnorm(ref_mix(sources, b->attn_query, D, eps), D, g_attn, eps);
    Vec u_v = c.mode == residual_mode("paper_rd_attnres")
                  ? ref_rmsnorm(ref_mix(sources, b->attn_v_query, D, eps), D, g_attn, eps)
                  : u_qk;
    sources.push_back(ref_attention(u_qk, u_v, *b->attention, B, T));
    sources.push_back(
        ref_swiglu(ref_rmsnorm(ref_mix(sources, b->ffn_query, D, eps), D, g_ffn, eps), *b->ffn, D));
  }
  return ref_logits(m, ref_mix(sources, m.final_query, D, eps));
}

double max_abs_diff(const Vec& a, const Vec& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Small vector arithmetic for the hand-computed cases.
Vec operator+(Vec a, const Vec& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}
Vec operator*(double s, Vec a) {
  for (double& x : a) x *= s;
  return a;
}

}  // namespace

TEST_CASE("paper modes, block size 1, equal an independent Full AttnRes forward (float64, 1e-12)") {
  const int64_t B = 2, T = 5;
  std::vector<int32_t> id_values = random_ids(B * T, 11, 71);
  Tensor ids = Tensor::from_ids(id_values, {B, T});
  for (ResidualMode mode :
       {residual_mode("paper_block_attnres"), residual_mode("paper_rd_attnres")}) {
    for (int64_t kv : {1, 2}) {
      MicroLMConfig cfg = tiny_config(mode, kv, 1);
      MicroLM model(cfg, DType::f64);
      randomize(model, 72 + kv);
      Vec expected = ref_full_attnres_logits(model, id_values, B, T);
      NoGradGuard no_grad;
      Tensor logits = model.forward(ids);
      const double err = max_abs_diff(logits.to_vector(), expected);
      MESSAGE(fmt::format("{} kv_heads={}: max |logits - Full AttnRes reference| = {:.3g}",
                          residual_mode_name(mode), kv, err));
      CHECK(err <= 1e-12);
      // The routing is far from uniform, so the check exercises the mixing weights.
      RouteStats stats = model.route_stats();
      REQUIRE(stats.mean_alpha_qk.size() == 3);
      CHECK(stats.mean_alpha_qk[2].size() == 5);  // layer 2's attention: h0 + 4 sublayer outputs
      double spread = 0;
      for (double a : stats.mean_alpha_qk[2]) spread = std::max(spread, std::fabs(a - 0.2));
      CHECK(spread > 0.02);
      if (mode == residual_mode("paper_rd_attnres")) CHECK(stats.js_reference > 1e-4);
      // The same parameters with block size 2 are a different function: the reference has teeth.
      MicroLMConfig cfg2 = cfg;
      cfg2.attnres_block_size = 2;
      MicroLM model2(cfg2, DType::f64);
      model2.load_state_dict(model.named_parameters());
      CHECK(max_abs_diff(model2.forward(ids).to_vector(), expected) > 1e-3);
    }
  }
}

TEST_CASE("paper modes: hand-computed mixtures with constant sublayers and zero pseudo-queries") {
  // Attention and FFN outputs are made constant: output / down weights zero, biases a_l and f_l.
  // With zero pseudo-queries every mixture is the plain mean of its sources.
  const int64_t B = 1, T = 3, D = 8;
  std::vector<int32_t> id_values{4, 9, 4};
  Tensor ids = Tensor::from_ids(id_values, {B, T});
  auto constant = [](double base) {
    Vec v(8);
    for (int64_t d = 0; d < 8; ++d) v[d] = base + 0.1 * d - 0.05 * d * d;
    return v;
  };
  for (ResidualMode mode :
       {residual_mode("paper_block_attnres"), residual_mode("paper_rd_attnres")}) {
    for (int64_t bs : {1, 2, 3, 4}) {
      MicroLMConfig cfg = tiny_config(mode, 2, bs);
      cfg.bias = true;
      MicroLM model(cfg, DType::f64);
      model.init_identical(5);
      Vec a[3], f[3];
      for (int l = 0; l < 3; ++l) {
        a[l] = constant(0.3 * (l + 1)), f[l] = constant(-0.2 * (l + 1) + 0.05);
        MicroBlock* b = model.blocks[l];
        b->attention->output->weight.fill(0.0);
        set_values(b->attention->output->bias, a[l]);
        b->ffn->down->weight.fill(0.0);
        set_values(b->ffn->down->bias, f[l]);
      }
      Vec E = model.token->weight.to_vector(), h0;
      for (int32_t id : id_values)
        h0.insert(h0.end(), E.begin() + id * D, E.begin() + (id + 1) * D);
      auto rows = [&](const Vec& v) {  // a constant vector on every token
        Vec out;
        for (int64_t r = 0; r < B * T; ++r) out.insert(out.end(), v.begin(), v.end());
        return out;
      };
      Vec final_mix;
      std::vector<int64_t> attn_sources;  // J of each layer's attention mixture
      switch (bs) {
        case 1:  // h0, a0, f0, a1, f1, a2, f2
          final_mix = (1.0 / 7) * (h0 + rows(a[0] + f[0] + a[1] + f[1] + a[2] + f[2]));
          attn_sources = {1, 3, 5};
          break;
        case 2:  // h0, a0+f0, a1+f1, a2+f2
          final_mix = (1.0 / 4) * (h0 + rows((a[0] + f[0]) + (a[1] + f[1]) + (a[2] + f[2])));
          attn_sources = {1, 2, 3};
          break;
        case 3:  // h0, a0+f0+a1, f1+a2+f2
          final_mix = (1.0 / 3) * (h0 + rows((a[0] + f[0] + a[1]) + (f[1] + a[2] + f[2])));
          attn_sources = {1, 2,
                          3};  // layer 1: h0 + partial a0+f0; layer 2: h0, block 0, partial f1
          break;
        default:  // 4: h0, a0+f0+a1+f1, partial a2+f2
          final_mix = (1.0 / 3) * (h0 + rows((a[0] + f[0] + a[1] + f[1]) + (a[2] + f[2])));
          attn_sources = {1, 2, 2};  // layer 2: h0 and the completed block, no partial yet
          break;
      }
      NoGradGuard no_grad;
      Vec logits = model.forward(ids).to_vector();
      CAPTURE(bs);
      CHECK(max_abs_diff(logits, ref_logits(model, final_mix)) <= 1e-12);
      RouteStats stats = model.route_stats();
      REQUIRE(stats.mean_alpha_qk.size() == 3);
      for (int l = 0; l < 3; ++l) {
        REQUIRE(static_cast<int64_t>(stats.mean_alpha_qk[l].size()) == attn_sources[l]);
        for (double x : stats.mean_alpha_qk[l])
          CHECK(x == doctest::Approx(1.0 / attn_sources[l]).epsilon(1e-14));
        for (double x : stats.mean_alpha_v[l])
          CHECK(x == doctest::Approx(1.0 / attn_sources[l]).epsilon(1e-14));
      }
      CHECK(stats.js_reference == 0.0);
    }
  }
}

TEST_CASE(
    "paper modes: hand-computed case where a sublayer reads its mixture (one token, identity "
    "attention)") {
  // With T = 1 the attention of a token to itself is V·Wvᵀ·Woᵀ; with Wv = Wo = I it returns its
  // input RMSNorm(h; 1). FFN outputs are the constant f_l. Two layers, zero pseudo-queries.
  const int64_t D = 8;
  std::vector<int32_t> id_values{6};
  Tensor ids = Tensor::from_ids(id_values, {1, 1});
  Vec eye(D * D, 0.0);
  for (int64_t d = 0; d < D; ++d) eye[d * D + d] = 1.0;
  for (int64_t bs : {1, 2}) {
    MicroLMConfig cfg = tiny_config(residual_mode("paper_block_attnres"), 2, bs);
    cfg.layers = 2, cfg.bias = true;
    MicroLM model(cfg, DType::f64);
    model.init_identical(8);
    Vec f[2] = {{0.5, -0.25, 0.75, 0.1, -0.6, 0.3, 0.2, -0.4},
                {-0.3, 0.45, 0.15, -0.7, 0.25, 0.05, -0.15, 0.6}};
    for (int l = 0; l < 2; ++l) {
      MicroBlock* b = model.blocks[l];
      set_values(b->attention->v->weight, eye);
      set_values(b->attention->output->weight, eye);
      b->ffn->down->weight.fill(0.0);
      set_values(b->ffn->down->bias, f[l]);
    }
    Vec E = model.token->weight.to_vector();
    Vec h0(E.begin() + id_values[0] * D, E.begin() + (id_values[0] + 1) * D);
    auto N = [&](const Vec& x) { return ref_rmsnorm(x, D, {}, cfg.norm_eps); };
    Vec final_mix;
    if (bs == 1) {  // sources h0 | a0 | f0 | a1 | f1
      Vec a0 = N(h0);
      Vec a1 = N((1.0 / 3) * (h0 + a0 + f[0]));
      final_mix = (1.0 / 5) * (h0 + a0 + f[0] + a1 + f[1]);
    } else {  // sources h0 | a0+f0 | a1+f1; layer 1's attention reads mean(h0, a0+f0)
      Vec a0 = N(h0);
      Vec a1 = N(0.5 * (h0 + (a0 + f[0])));
      final_mix = (1.0 / 3) * (h0 + (a0 + f[0]) + (a1 + f[1]));
    }
    NoGradGuard no_grad;
    CAPTURE(bs);
    CHECK(max_abs_diff(model.forward(ids).to_vector(), ref_logits(model, final_mix)) <= 1e-12);
  }
}

TEST_CASE("paper modes: zero pseudo-queries mix uniformly (every token, every sublayer)") {
  for (ResidualMode mode :
       {residual_mode("paper_block_attnres"), residual_mode("paper_rd_attnres")}) {
    for (int64_t bs : {1, 2, 3}) {
      MicroLM model(tiny_config(mode, 1, bs), DType::f64);
      model.init_identical(9);
      for (auto& [name, p] : model.named_parameters())
        if (contains(name, "_query")) {
          Vec v = p.to_vector();
          CHECK(std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0; }));
        }
      NoGradGuard no_grad;
      model.forward(Tensor::from_ids(random_ids(10, 11, 10), {2, 5}));
      RouteStats stats = model.route_stats();
      REQUIRE(stats.mean_alpha_qk.size() == 3);
      for (size_t l = 0; l < 3; ++l) {
        for (const Tensor& alpha :
             {model.blocks[l]->last_alpha_qk, model.blocks[l]->last_alpha_v}) {
          const double J = static_cast<double>(alpha.size(-1));
          for (double x : alpha.to_vector()) CHECK(std::fabs(x - 1.0 / J) <= 1e-15);
        }
        for (double x : stats.mean_alpha_qk[l])
          CHECK(std::fabs(x - 1.0 / static_cast<double>(stats.mean_alpha_qk[l].size())) <= 1e-15);
      }
      CHECK(stats.js_reference <= 1e-15);
      if (bs == 1) CHECK(stats.mean_alpha_qk[2].size() == 5);
      if (bs == 2) CHECK(stats.mean_alpha_qk[2].size() == 3);
    }
  }
}
