// A GPT-2-style decoder built only from depthgrad's public modules and ops: token and learned
// position embeddings, N pre-LayerNorm blocks (causal self-attention with one fused q/k/v
// projection, a 4x GELU MLP), a final LayerNorm and a head tied to the token embedding; and
// Gpt2CausalLM, its K/V-cached incremental forward for generation (nn/lm/causal_lm.h), written with
// plain tensor ops. It is the model of tools/example/gpt2.cpp.
// Not here: training, data, dropout (none, as in a small from-scratch run) or loading OpenAI's
// GPT-2 weights (their Conv1D matrices are stored transposed; the names follow Hugging Face's).
#pragma once
#include <depthgrad/lm.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <span>
#include <vector>

namespace gpt2 {

struct Config {
  int64_t vocab = 512;
  int64_t context = 64;  // positions (the learned position table's rows)
  int64_t dim = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  // {"kind": "gpt2", "vocab", "context", "dim", "layers", "heads"}: stored in checkpoints and
  // compared on resume.
  dg::json::Value to_json() const {
    dg::json::Value v;
    v["kind"] = "gpt2";
    v["vocab"] = vocab;
    v["context"] = context;
    v["dim"] = dim;
    v["layers"] = layers;
    v["heads"] = heads;
    return v;
  }
};

// Causal self-attention: one projection to q, k and v, attention per head, an output projection.
class Attention : public dg::Module {
 public:
  Attention(int64_t dim, int64_t heads)
      : heads(heads),
        c_attn(register_module("c_attn", std::make_unique<dg::Linear>(dim, 3 * dim))),
        c_proj(register_module("c_proj", std::make_unique<dg::Linear>(dim, dim))) {}
  // x [B, T, D] -> [B, T, D]
  dg::Tensor forward(const dg::Tensor& x) const {
    // q, k, v [B, T, D] each: views of the one projection [B, T, 3D]
    const std::vector<dg::Tensor> qkv = dg::split(c_attn(x), x.size(-1), -1);
    // causal attention per head (D = heads · head_dim), heads merged back: [B, T, D]
    return c_proj(dg::attention_heads(qkv[0], qkv[1], qkv[2], heads, heads));
  }
  int64_t heads;
  dg::Linear& c_attn;  // [3D, D]: the q rows, then k, then v
  dg::Linear& c_proj;  // [D, D]
};

// [.., D] -> [.., 4D] -> [.., D]. GELU in its exact erf form (GPT-2 used the tanh approximation).
class Mlp : public dg::Module {
 public:
  explicit Mlp(int64_t dim)
      : c_fc(register_module("c_fc", std::make_unique<dg::Linear>(dim, 4 * dim))),
        c_proj(register_module("c_proj", std::make_unique<dg::Linear>(4 * dim, dim))) {}
  dg::Tensor forward(const dg::Tensor& x) const { return c_proj(dg::gelu(c_fc(x))); }
  dg::Linear& c_fc;    // [4D, D]
  dg::Linear& c_proj;  // [D, 4D]
};

// One pre-LayerNorm block: h = x + attn(ln_1(x)), then h + mlp(ln_2(h)).
class Block : public dg::Module {
 public:
  Block(int64_t dim, int64_t heads)
      : ln_1(register_module("ln_1", std::make_unique<dg::LayerNorm>(dim))),
        attn(register_module("attn", std::make_unique<Attention>(dim, heads))),
        ln_2(register_module("ln_2", std::make_unique<dg::LayerNorm>(dim))),
        mlp(register_module("mlp", std::make_unique<Mlp>(dim))) {}
  // x [B, T, D] -> [B, T, D]
  dg::Tensor forward(const dg::Tensor& x) const {
    const dg::Tensor h = dg::add(x, attn(ln_1(x)));
    return dg::add(h, mlp(ln_2(h)));
  }
  dg::LayerNorm& ln_1;
  Attention& attn;
  dg::LayerNorm& ln_2;
  Mlp& mlp;
};

class Model : public dg::Module {
 public:
  explicit Model(const Config& config) : config(config) {
    if (config.dim % config.heads != 0)
      throw std::invalid_argument("gpt2: heads " + std::to_string(config.heads) +
                                  " must divide dim " + std::to_string(config.dim));
    dg::init::SkipGuard no_draws;  // every parameter is set by init_weights below
    wte = &register_module("wte", std::make_unique<dg::Embedding>(config.vocab, config.dim));
    wpe = &register_module("wpe", std::make_unique<dg::Embedding>(config.context, config.dim));
    auto& list = register_module("h", std::make_unique<dg::ModuleList>());
    for (int64_t i = 0; i < config.layers; ++i)
      blocks.push_back(&list.append(std::make_unique<Block>(config.dim, config.heads)));
    ln_f = &register_module("ln_f", std::make_unique<dg::LayerNorm>(config.dim));
    // The head is the token embedding: one tensor under a second name, listed (and saved) once,
    // as "wte.weight".
    register_alias("lm_head_weight", wte->weight);
  }

  // GPT-2's initialisation, drawn from a generator of `seed`: N(0, 0.02) for the embeddings and
  // linear weights, N(0, 0.02/sqrt(2·layers)) for the projections into the residual stream,
  // N(0, 0.01) for the positions, zero biases, LayerNorms at weight 1 and bias 0.
  void init_weights(uint64_t seed) {
    dg::TorchGenerator gen(seed);
    const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.layers));
    dg::init::normal_(wte->weight, 0.0, 0.02, &gen);
    dg::init::normal_(wpe->weight, 0.0, 0.01, &gen);
    auto layer_norm = [](dg::LayerNorm& ln) {
      dg::init::ones_(ln.weight);
      dg::init::zeros_(ln.bias);
    };
    auto linear = [&](dg::Linear& l, double std) {
      dg::init::normal_(l.weight, 0.0, std, &gen);
      dg::init::zeros_(l.bias);
    };
    for (Block* b : blocks) {
      layer_norm(b->ln_1);
      linear(b->attn.c_attn, 0.02);
      linear(b->attn.c_proj, residual_std);
      layer_norm(b->ln_2);
      linear(b->mlp.c_fc, 0.02);
      linear(b->mlp.c_proj, residual_std);
    }
    layer_norm(*ln_f);
  }

  // ids int64 or int32 [B, T] (T <= context) -> the final LayerNorm's output [B, T, D]
  dg::Tensor hidden(const dg::Tensor& ids) const {
    const int64_t T = ids.size(1);
    std::vector<int64_t> positions(T);
    std::iota(positions.begin(), positions.end(), 0);
    // [B, T, D] + [T, D] (broadcast over the batch)
    dg::Tensor x = dg::add((*wte)(ids), (*wpe)(dg::Tensor::from_ids(positions, {T})));
    for (const Block* b : blocks) x = (*b)(x);
    return (*ln_f)(x);
  }
  // ids int64 or int32 [B, T] -> logits [B, T, vocab] (the tied head: h · wteᵀ)
  dg::Tensor forward(const dg::Tensor& ids) const { return dg::linear(hidden(ids), wte->weight); }
  // The training loss: mean cross-entropy of the logits at every position against targets
  // int64 or int32 [B, T] (the inputs shifted by one).
  dg::Tensor loss(const dg::Tensor& ids, const dg::Tensor& targets) const {
    const dg::Tensor logits = forward(ids);  // [B, T, V]
    const int64_t rows = ids.size(0) * ids.size(1);
    return dg::cross_entropy(dg::reshape(logits, {rows, config.vocab}),
                             dg::reshape(targets, {rows}));
  }

  Config config;
  dg::Embedding* wte = nullptr;  // [vocab, D]
  dg::Embedding* wpe = nullptr;  // [context, D]
  std::vector<Block*> blocks;
  dg::LayerNorm* ln_f = nullptr;
};

// The model as a CausalLM with its own K/V cache: each call runs only the new positions through
// the blocks, their keys and values appended to the cache, each new query attending over every
// cached position up to its own. The same arithmetic as Model::forward, with the attention
// written out in plain ops (scores, mask, softmax, weighted sum) instead of attention_heads, so
// the logits agree to float rounding (check_cache in gpt2.cpp measures how closely). The cache
// grows by cat, a copy of it per call: simple, and cheap at contexts of a few hundred.
class CachedLM : public dg::CausalLM {
 public:
  explicit CachedLM(const Model& model) : model_(model), k_(model.blocks.size()), v_(k_.size()) {}
  int64_t vocab_size() const override { return model_.config.vocab; }
  int64_t context_length() const override { return model_.config.context; }
  int64_t cached_length() const override { return length_; }
  void reset() override {
    length_ = 0;
    for (auto* cache : {&k_, &v_})
      for (dg::Tensor& t : *cache) t = dg::Tensor();
  }

 protected:
  const dg::Tensor& forward_new(std::span<const int32_t> new_tokens) override {
    dg::NoGradGuard no_graph;
    const int64_t n = static_cast<int64_t>(new_tokens.size()), L = length_, D = model_.config.dim;
    const int64_t H = model_.config.heads, hd = D / H;
    std::vector<int64_t> positions(n);
    std::iota(positions.begin(), positions.end(), static_cast<int64_t>(L));
    const dg::Tensor ids =
        dg::Tensor::from_ids(std::vector<int64_t>(new_tokens.begin(), new_tokens.end()), {1, n});
    // [1, n, D]: the new tokens at positions L .. L+n-1
    dg::Tensor x = dg::add((*model_.wte)(ids), (*model_.wpe)(dg::Tensor::from_ids(positions, {n})));
    // mask [n, L+n] (bool): true where key position j is after query position L+i (not attended)
    std::vector<bool> future(n * (L + n), false);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = L + i + 1; j < L + n; ++j) future[i * (L + n) + j] = true;
    const dg::Tensor mask = dg::Tensor::from_vector(future, {n, L + n});
    // [1, n, D] <-> [1, H, n, hd]
    auto split_heads = [&](const dg::Tensor& t) {
      return dg::permute(dg::reshape(t, {1, n, H, hd}), {0, 2, 1, 3});
    };
    for (size_t b = 0; b < model_.blocks.size(); ++b) {
      const Block& block = *model_.blocks[b];
      const std::vector<dg::Tensor> qkv =
          dg::split(block.attn.c_attn(block.ln_1(x)), D, -1);  // [1, n, D] each
      const dg::Tensor q = split_heads(qkv[0]);                // [1, H, n, hd]
      k_[b] = L == 0 ? split_heads(qkv[1]).contiguous()
                     : dg::cat({k_[b], split_heads(qkv[1])}, 2);  // [1, H, L+n, hd]
      v_[b] = L == 0 ? split_heads(qkv[2]).contiguous() : dg::cat({v_[b], split_heads(qkv[2])}, 2);
      // scores [1, H, n, L+n] = q·kᵀ / sqrt(hd), future positions at −inf, softmax over keys
      const dg::Tensor scores =
          dg::scale(dg::matmul(q, dg::transpose(k_[b], 2, 3)), 1.0 / std::sqrt(double(hd)));
      const dg::Tensor p =
          dg::softmax(dg::masked_fill(scores, mask, -std::numeric_limits<double>::infinity()), -1);
      // [1, H, n, hd] -> heads merged [1, n, D]
      const dg::Tensor y = dg::reshape(dg::permute(dg::matmul(p, v_[b]), {0, 2, 1, 3}), {1, n, D});
      const dg::Tensor h = dg::add(x, block.attn.c_proj(y));
      x = dg::add(h, block.mlp(block.ln_2(h)));
    }
    length_ += n;
    // the last position only: [1, 1, D] -> logits [vocab]
    const dg::Tensor last = (*model_.ln_f)(dg::slice(x, 1, n - 1, n));
    logits_ = dg::reshape(dg::linear(last, model_.wte->weight), {model_.config.vocab});
    return logits_;
  }

 private:
  const Model& model_;
  std::vector<dg::Tensor> k_, v_;  // per block: [1, H, cached, hd]
  int64_t length_ = 0;
  dg::Tensor logits_;
};

}  // namespace gpt2
