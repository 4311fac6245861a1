// The reference's AttnRes modes (tools/attnres/PROTOCOL.md §2.3): block_attnres and rd_attnres, one
// class with a switch for the V route. Sources S_0 = embedding, S_{l+1} = output of block l; the
// residual stream stays standard. Not here: the paper formulation (paper_attnres.cpp).
//
//  block_attnres  block l routes per token α = softmax(RMSNorm(c; g_route)·W_routeᵀ) over its l+1
//                 sources and feeds attention with h = Σ α_j S_j; one route serves Q, K and V:
//                 x = c + Attn(N(h), N(h)); y = x + FFN(N(x)).
//  rd_attnres     the same with a second route for V: x = c + Attn(N(h_qk), N(h_v)).
//
// Parameters per block, before the shared layers: route_norm, qk_route [l+1, D], and for
// rd_attnres v_route [l+1, D] (block_attnres registers qk_route once and points v_route at it).
#include <fmt/format.h>

#include "nn/lm/decode.h"
#include "nn/lm/micro_lm.h"
#include "tensor/exercise.h"
#include "tensor/kernels_elementwise.h"
#include "tensor/kernels_softmax.h"

namespace dg {

// z [B, T, D], sources S_j [B, T, D] (J of them), route D -> J -> h [B, T, D]; alpha [B, T, J].
// The logits route(z) score every source for every token; the softmax runs over the last axis,
// depth, so each token's weights over its sources sum to one.
DG_EXERCISE Tensor attnres_route(const Linear& route, const Tensor& z,
                                 const std::vector<Tensor>& sources, Tensor& alpha) {
  alpha = softmax(route(z), -1);     // [B, T, J]
  return depth_mix(sources, alpha);  // Σ_j α[.., j]·S_j
}

namespace {

class ReferenceAttnRes final : public Residual {
 public:
  explicit ReferenceAttnRes(bool v_route) : v_route_(v_route) {}

  void add_block_parameters(MicroBlock& b) const override {
    const MicroLMConfig& c = b.config;
    const int64_t sources = b.index + 1;  // S_0..S_index
    b.route_norm = &b.register_module("route_norm",
                                      std::make_unique<Norm>(c.norm, c.dim, c.norm_eps, b.dtype()));
    b.qk_route =
        &b.register_module("qk_route", std::make_unique<Linear>(c.dim, sources, false, b.dtype()));
    if (v_route_)
      b.v_route =
          &b.register_module("v_route", std::make_unique<Linear>(c.dim, sources, false, b.dtype()));
    else
      b.v_route = b.qk_route;  // one module, as the reference: counted once
  }
  double block_parameter_count(const MicroLMConfig& c, int64_t layer) const override {
    const double dim = static_cast<double>(c.dim);
    const double norm = c.norm == Norm::Kind::layer ? 2 * dim : dim;
    return norm + (v_route_ ? 2 : 1) * dim * static_cast<double>(layer + 1);
  }

  // sources S_0..S_l, each [B, T, D], c = S_l -> S_{l+1} [B, T, D]
  Tensor block_forward(MicroBlock& b, const std::vector<Tensor>& sources) const override {
    if (static_cast<int64_t>(sources.size()) != b.index + 1)
      throw std::logic_error(
          fmt::format("block {} expects {} sources, got {}", b.index, b.index + 1, sources.size()));
    const Tensor& c = sources.back();
    Tensor z = (*b.route_norm)(c);
    Tensor u_qk = (*b.attention_norm)(attnres_route(*b.qk_route, z, sources, b.last_alpha_qk));
    Tensor x;
    if (v_route_) {
      Tensor u_v = (*b.attention_norm)(attnres_route(*b.v_route, z, sources, b.last_alpha_v));
      x = (*b.attention)(u_qk, u_v, c);
    } else {
      b.last_alpha_v = b.last_alpha_qk;  // the same route computed once; the reference: twice
      x = (*b.attention)(u_qk, u_qk, c);
    }
    // x = c + Attn(..), y = x + FFN(N(x)): each residual add happens inside the output projection
    return (*b.ffn)((*b.ffn_norm)(x), x);
  }

  // h0 [B, T, D] -> S_L [B, T, D]
  Tensor forward(MicroLM& model, const Tensor& h0) const override {
    std::vector<Tensor> sources{h0};
    for (MicroBlock* block : model.blocks) sources.push_back((*block)(sources));
    return sources.back();
  }

  void after_init_identical(MicroLM& model) const override {
    if (!v_route_) return;  // rd_attnres starts as the same function as block_attnres
    for (MicroBlock* b : model.blocks) b->v_route->weight.copy_from(b->qk_route->weight);
  }

  // S_0 .. S_L in slots 0 .. L.
  int64_t decode_slots(const MicroLMConfig& c) const override { return c.layers + 1; }
  const float* decode(DecodeStep<float>& step) const override { return run(step); }
  const double* decode(DecodeStep<double>& step) const override { return run(step); }

 private:
  template <class T>
  const T* run(DecodeStep<T>& s) const {
    const int64_t L = s.config.layers, D = s.config.dim, n = s.n;
    for (int64_t l = 0; l < L; ++l) {
      const MicroBlock& block = *s.model.blocks[l];
      const int64_t J = l + 1;
      const T* c = s.source(l);
      s.norm(s.normed, c, *block.route_norm);
      // α = softmax(N(c)·W_routeᵀ) [n, J]; mix [n, D] = Σ α_j S_j; u = N(mix)
      auto route = [&](const Linear& r, T* mix, T* u) {
        s.linear(s.route_logits, s.normed, r);
        softmax_forward<T>(s.alpha, s.route_logits, n, J, 1, false);
        depth_mix_forward<T>(mix, s.sources(J), s.alpha, n, J, D);
        s.norm(u, mix, *block.attention_norm);
      };
      route(*block.qk_route, s.mix_qk, s.u_qk);
      const T* u_v = s.u_qk;
      if (v_route_) {
        route(*block.v_route, s.mix_v, s.u_v);
        u_v = s.u_v;
      }
      s.attention(block, l, s.u_qk, u_v, s.x, c);  // x = c + Attn(..)
      s.norm(s.normed, s.x, *block.ffn_norm);
      s.feed_forward(*block.ffn, s.normed, s.source(l + 1), s.x);  // S_{l+1} = x + FFN(N(x))
    }
    return s.source(L);
  }

  bool v_route_;
};

}  // namespace

const Residual& make_block_attnres() {
  static const ReferenceAttnRes mode(false);
  return mode;
}
const Residual& make_rd_attnres() {
  static const ReferenceAttnRes mode(true);
  return mode;
}

}  // namespace dg
