// Incremental decoding (see decode.h). Each function mirrors one piece of MicroLM's forward
// (nn/lm/micro_lm.cpp, nn/layers.cpp) on n new rows, with the kernels the ops use, so the cached
// logits equal the full forward's to float rounding (tests/test_generate.cpp checks every mode).
#include "nn/lm/decode.h"

#include <fmt/format.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "tensor/gemm_kernels.h"
#include "tensor/kernels_attention.h"
#include "tensor/kernels_elementwise.h"  // kParallelGrain
#include "tensor/kernels_embedding.h"
#include "tensor/kernels_gemv.h"
#include "tensor/kernels_matmul.h"
#include "tensor/kernels_norm.h"
#include "tensor/kernels_softmax.h"
#include "tensor/quantized_matrix.h"
#include "tensor/threads.h"

namespace dg {

namespace {
// One new row (a decode step) runs the GEMV, which reads each weight once as a stream (sgemm
// would pack it first), unless the process's matmul precision is bf16: then every float32
// product stays a bf16 GEMM, as in MicroLM::forward.
template <class T>
bool use_gemv(int64_t n) {
  return n == 1 && (sizeof(T) == sizeof(double) || matmul_precision() == MatmulPrecision::float32);
}

// y [n, out] += scale · (x [n, in] · Aᵀ) · Bᵀ when l has an unmerged LoRA adapter (nn/lora.h), as
// Linear::forward adds it (dropout is off: decoding is inference).
template <class T>
void add_lora_rows(T* y, const T* x, int64_t n, const Linear& l) {
  if (!l.lora || l.lora->merged) return;
  const int64_t in = l.in_features, out = l.out_features, r = l.lora->A->out_features;
  thread_local std::vector<T> h;  // [n, r]
  h.resize(static_cast<size_t>(n * r));
  gemm(false, true, n, r, in, T(1), x, in, l.lora->A->weight.data<T>(), in, T(0), h.data(), r);
  for (T& e : h) e *= static_cast<T>(l.lora->scale);
  gemm(false, true, n, out, r, T(1), h.data(), r, l.lora->B->weight.data<T>(), r, T(1), y, out);
}

// y [n, out] = x [n, in] · W[out, in]ᵀ + bias, plus residual [n, out] when given: the residual and
// the bias pre-fill y and the GEMM (the GEMV for one row) adds into it, as linear / linear_add do.
template <class T>
void linear_rows(T* y, const T* x, int64_t n, const Linear& l, const T* residual = nullptr) {
  const int64_t in = l.in_features, out = l.out_features;
  if (residual && residual != y) std::memcpy(y, residual, sizeof(T) * n * out);
  const bool accumulate = residual != nullptr || l.bias.defined();
  if (l.bias.defined()) {
    const T* b = l.bias.data<T>();
    for (int64_t r = 0; r < n; ++r) {
      T* row = y + r * out;
      if (residual) {
#pragma omp simd
        for (int64_t j = 0; j < out; ++j) row[j] += b[j];
      } else {
        std::memcpy(row, b, sizeof(T) * out);
      }
    }
  }
  if (l.quantized_weight)  // int8 / bf16 rows: the GEMV for one row, panel GEMMs otherwise
    quantized_matmul<T>(x, n, in, *l.quantized_weight, y, out, accumulate);
  else if (use_gemv<T>(n))
    gemv(l.weight.data<T>(), out, in, in, x, y, accumulate);
  else
    gemm(false, true, n, out, in, T(1), x, in, l.weight.data<T>(), in, accumulate ? T(1) : T(0), y,
         out);
  add_lora_rows(y, x, n, l);
}

// out [n, D] = Norm(x [n, D]); stat_a, stat_b [n] scratch for rstd (and the LayerNorm mean).
template <class T>
void norm_rows(T* out, const T* x, int64_t n, const Norm& norm, T* stat_a, T* stat_b) {
  const int64_t D = norm.weight.numel();
  if (norm.kind == Norm::Kind::rms)
    rmsnorm_forward<T>(out, stat_a, x, norm.weight.data<T>(), n, D, norm.eps);
  else
    layernorm_forward<T>(out, stat_b, stat_a, x, norm.weight.data<T>(), norm.bias.data<T>(), n, D,
                         norm.eps);
}

// The pointers of the first J source buffers, for depth_mix_forward (one vector per thread and
// type, grown once).
template <class T>
const T* const* source_pointers(const std::vector<Tensor>& sources, int64_t J) {
  thread_local std::vector<const T*> pointers;
  pointers.resize(static_cast<size_t>(J));
  for (int64_t j = 0; j < J; ++j) pointers[j] = sources[j].data<T>();
  return pointers.data();
}

template <class T>
T* ptr(const Tensor& t) {
  return t.data<T>();
}
}  // namespace

Decoder::Decoder(const MicroLM& model)
    : model_(model), config_(model.config()), dtype_(model.token->weight.dtype()) {
  const MicroLMConfig& c = config_;
  for (auto& [name, p] : model.named_parameters())
    if (!p.is_contiguous())
      throw std::invalid_argument(
          fmt::format("Decoder: parameter '{}' is not contiguous ({})", name, p.describe()));
  head_dim_ = c.dim / c.heads;
  kv_dim_ = c.kv_heads * head_dim_;
  hidden_ = c.ffn_width();
  for (int64_t l = 0; l < c.layers; ++l) {
    k_cache_.push_back(Tensor::empty({c.seq_len, kv_dim_}, dtype_));
    v_cache_.push_back(Tensor::empty({c.seq_len, kv_dim_}, dtype_));
  }
  if (c.rope) {
    // The tables linear_rope uses (rope_tables_for), for every position of the context.
    const double base = model.blocks.front()->attention->config.rope_base;
    rope_cos_ = Tensor::empty({c.seq_len, head_dim_ / 2}, dtype_);
    rope_sin_ = Tensor::empty({c.seq_len, head_dim_ / 2}, dtype_);
    dispatch_float(dtype_, "Decoder", [&]<class T>() {
      rope_tables<T>(ptr<T>(rope_cos_), ptr<T>(rope_sin_), c.seq_len, head_dim_, base, 0);
    });
  }
  unit_gain_ = Tensor::ones({c.dim}, dtype_);
}

namespace {
const MicroLM& non_null(const std::shared_ptr<const MicroLM>& model) {
  if (!model) throw std::invalid_argument("Decoder: the model is a null shared_ptr");
  return *model;
}
}  // namespace

Decoder::Decoder(std::shared_ptr<const MicroLM> model) : Decoder(non_null(model)) {
  owned_ = std::move(model);
}

// Work buffers for n new rows; grown (never shrunk) so a decode step after a prefill of the
// prompt allocates nothing.
void Decoder::ensure_rows(int64_t n) {
  const MicroLMConfig& c = config_;
  const int64_t threads = omp_get_max_threads();
  if (threads > scratch_threads_) {
    scratch_ = Tensor::empty({threads, c.seq_len + head_dim_}, DType::f64);
    scratch_threads_ = static_cast<int>(threads);
  }
  if (n <= rows_) return;
  const int64_t slots = c.mode.behaviour().decode_slots(c);
  sources_.clear();
  for (int64_t s = 0; s < slots; ++s) sources_.push_back(Tensor::empty({n, c.dim}, dtype_));
  for (Tensor* t : {&x_, &normed_, &mix_qk_, &mix_v_, &u_qk_, &u_v_, &q_, &merged_, &sublayer_})
    *t = Tensor::empty({n, c.dim}, dtype_);
  route_logits_ = Tensor::empty({n, slots}, dtype_);
  alpha_ = Tensor::empty({n, slots}, dtype_);
  gate_ = Tensor::empty({n, hidden_}, dtype_);
  up_ = Tensor::empty({n, hidden_}, dtype_);
  lse_ = Tensor::empty({c.heads * n}, dtype_);
  stat_a_ = Tensor::empty({n}, dtype_);
  stat_b_ = Tensor::empty({n}, dtype_);
  logits_ = Tensor::empty({n, c.vocab}, dtype_);
  rows_ = n;
}

const Tensor& Decoder::append(std::span<const int32_t> ids, bool all_positions) {
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n == 0) throw std::invalid_argument("Decoder::append: no token ids");
  if (length_ + n > context_length())
    throw std::invalid_argument(fmt::format(
        "Decoder::append: {} cached + {} new positions exceed the context of {} (seq_len)", length_,
        n, context_length()));
  for (int32_t id : ids)
    if (id < 0 || id >= config_.vocab)
      throw std::invalid_argument(fmt::format(
          "Decoder::append: token id {} is outside the vocabulary [0, {})", id, config_.vocab));
  NoGradGuard no_grad;
  ensure_rows(n);
  dispatch_float(dtype_, "Decoder::append",
                 [&]<class T>() { run<T>(ids.data(), n, all_positions); });
  length_ += n;
  const int64_t rows = all_positions ? n : 1;
  if (!result_.defined() || result_.storage() != logits_.storage() ||
      result_.numel() != rows * config_.vocab || result_.dim() != (all_positions ? 2 : 1))
    result_ = all_positions
                  ? raw::view_narrow(logits_, 0, 0, n)
                  : raw::view_reshape(raw::view_narrow(logits_, 0, 0, 1), {config_.vocab});
  return result_;
}

// One forward of n new rows at positions length_ .. length_ + n − 1 (MicroLM::features + head).
template <class T>
void Decoder::run(const int32_t* ids, int64_t n, bool all_positions) {
  const MicroLMConfig& c = config_;
  const int64_t D = c.dim;
  T* h0 = ptr<T>(sources_[0]);
  embedding_forward<T>(h0, ids, model_.token->weight.data<T>(), n, D);
  if (model_.position) {  // h = token + position (the add op: a + b)
    const T* pos = model_.position->weight.data<T>() + length_ * D;
    for (int64_t i = 0; i < n * D; ++i) h0[i] = h0[i] + pos[i];
  }
  T* a = ptr<T>(stat_a_);
  T* b = ptr<T>(stat_b_);
  DecodeStep<T> step{*this,
                     model_,
                     c,
                     n,
                     ptr<T>(x_),
                     ptr<T>(normed_),
                     ptr<T>(mix_qk_),
                     ptr<T>(mix_v_),
                     ptr<T>(u_qk_),
                     ptr<T>(u_v_),
                     ptr<T>(sublayer_),
                     ptr<T>(route_logits_),
                     ptr<T>(alpha_),
                     a,
                     b};
  const T* out = c.mode.behaviour().decode(step);  // what the final norm reads
  // The head: logits [rows, V] = final_norm(out) · Wᵀ, for the last row only unless all_positions.
  const int64_t first = all_positions ? 0 : n - 1, rows = n - first;
  norm_rows<T>(ptr<T>(normed_), out + first * D, rows, *model_.final_norm, a, b);
  if (model_.head && model_.head->quantized_weight)
    linear_rows<T>(ptr<T>(logits_), ptr<T>(normed_), rows, *model_.head);
  else if (use_gemv<T>(rows))
    gemv(model_.head_weight().data<T>(), c.vocab, D, D, ptr<T>(normed_), ptr<T>(logits_), false);
  else
    gemm(false, true, rows, c.vocab, D, T(1), ptr<T>(normed_), D, model_.head_weight().data<T>(), D,
         T(0), ptr<T>(logits_), c.vocab);
  if (model_.head) add_lora_rows<T>(ptr<T>(logits_), ptr<T>(normed_), rows, *model_.head);
}

// CausalSelfAttention::forward on n new rows: Q, K from u_qk, V from u_v; K and V go straight into
// the cache at their positions; out [n, D] = residual + Attn·W_oᵀ (+ bias).
template <class T>
void Decoder::attention_sublayer(const MicroBlock& block, int64_t layer, const T* u_qk,
                                 const T* u_v, int64_t n, T* out, const T* residual) {
  const CausalSelfAttention& attn = *block.attention;
  const int64_t H = config_.heads, Hkv = config_.kv_heads, hd = head_dim_;
  T* q = ptr<T>(q_);
  T* k = ptr<T>(k_cache_[layer]) + length_ * kv_dim_;
  T* v = ptr<T>(v_cache_[layer]) + length_ * kv_dim_;
  linear_rows<T>(q, u_qk, n, *attn.q);
  linear_rows<T>(k, u_qk, n, *attn.k);
  linear_rows<T>(v, u_v, n, *attn.v);
  if (config_.rope) {  // rotate each head of the new rows by its position (heads-last rows)
    const T* cos = ptr<T>(rope_cos_) + length_ * (hd / 2);
    const T* sin = ptr<T>(rope_sin_) + length_ * (hd / 2);
    const RowStrides q_rows{0, hd, H * hd}, kv_rows{0, hd, Hkv * hd};
    rope_rows<T>(q, q_rows, q, q_rows, cos, sin, 1, H, n, hd, false, true);
    rope_rows<T>(k, kv_rows, k, kv_rows, cos, sin, 1, Hkv, n, hd, false, true);
  }
  if (length_ == 0 && n > 1)
    attend_from_start(layer, n);
  else
    attend<T>(layer, q, n, ptr<T>(merged_));
  linear_rows<T>(out, ptr<T>(merged_), n, *attn.output, residual);
}

// Causal attention of n new query rows q [n, H·hd] over the cache's positions 0 .. length_ + i:
//   out[i, h] = Σ_{j ≤ length_+i} softmax_j(q[i,h]·K[j,g] / √hd) V[j,g],  g = h / (H / Hkv)
// in double, one (row, head) per task (the result does not depend on the thread count).
template <class T>
void Decoder::attend(int64_t layer, const T* q, int64_t n, T* out) {
  const int64_t H = config_.heads, group = H / config_.kv_heads, hd = head_dim_, kvd = kv_dim_;
  const int64_t stride = config_.seq_len + hd;
  const T* K = ptr<T>(k_cache_[layer]);
  const T* V = ptr<T>(v_cache_[layer]);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  double* scratch = ptr<double>(scratch_);
  const int64_t p0 = length_;
  const bool parallel = n * H * (p0 + n) * hd > kParallelGrain;
  parallel_for(n * H, parallel, [&](int64_t task) {
    const int64_t i = task / H, h = task % H;
    double* scores = scratch + omp_get_thread_num() * stride;
    double* acc = scores + config_.seq_len;
    const T* qr = q + i * H * hd + h * hd;
    const int64_t g = h / group, last = p0 + i;
    double max = -INFINITY;
    for (int64_t j = 0; j <= last; ++j) {
      const T* kr = K + j * kvd + g * hd;
      double dot = 0;
#pragma omp simd reduction(+ : dot)
      for (int64_t d = 0; d < hd; ++d) dot += static_cast<double>(qr[d]) * kr[d];
      scores[j] = dot * scale;
      max = std::max(max, scores[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j <= last; ++j) sum += (scores[j] = std::exp(scores[j] - max));
    std::fill(acc, acc + hd, 0.0);
    for (int64_t j = 0; j <= last; ++j) {
      const T* vr = V + j * kvd + g * hd;
      const double p = scores[j];
#pragma omp simd
      for (int64_t d = 0; d < hd; ++d) acc[d] += p * vr[d];
    }
    T* o = out + i * H * hd + h * hd;
    for (int64_t d = 0; d < hd; ++d) o[d] = static_cast<T>(acc[d] / sum);
  });
}

// A chunk that starts at position 0 (a prompt, a moved window) is exactly the full forward's
// causal attention: the fused kernel the attention_heads op runs, reading the [n, heads·hd] rows
// as [1, heads, n, hd] views in place (BLAS inside, no per-row loops).
void Decoder::attend_from_start(int64_t layer, int64_t n) {
  const int64_t H = config_.heads, Hkv = config_.kv_heads, hd = head_dim_;
  auto heads = [&](const Tensor& rows, int64_t h) {
    return raw::view_permute(raw::view_reshape(raw::view_narrow(rows, 0, 0, n), {1, n, h, hd}),
                             {0, 2, 1, 3});
  };
  Tensor out = heads(merged_, H);
  Tensor lse = raw::view_reshape(raw::view_narrow(lse_, 0, 0, H * n), {1, H, n});
  attention_forward(heads(q_, H), heads(k_cache_[layer], Hkv), heads(v_cache_[layer], Hkv),
                    attention_scale(0.0, hd, "Decoder"), out, lse);
}

// FeedForward::forward on n rows: out = residual + down(silu(gate(x)) ⊙ up(x)) (SwiGLU) or
// residual + down(gelu(up(x))) (exact or tanh-approximated gelu).
template <class T>
void Decoder::feed_forward(const FeedForward& ffn, const T* x, int64_t n, T* out,
                           const T* residual) {
  T* up = ptr<T>(up_);
  T* hidden = up;
  linear_rows<T>(up, x, n, *ffn.up);
  if (ffn.kind == FeedForward::Kind::swiglu) {
    T* gate = ptr<T>(gate_);
    linear_rows<T>(gate, x, n, *ffn.gate);
    swiglu_forward<T>(gate, gate, up, n * hidden_);  // elementwise, so in place is safe
    hidden = gate;
  } else if (ffn.kind == FeedForward::Kind::gelu) {
    for (int64_t i = 0; i < n * hidden_; ++i) {  // the gelu op's formula
      const T v = up[i];
      up[i] = T(0.5) * v * (T(1) + std::erf(v * T(M_SQRT1_2)));
    }
  } else {
    const T beta = T(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = T(0.044715);
    for (int64_t i = 0; i < n * hidden_; ++i) {  // the gelu_tanh op's formula
      const T v = up[i], cube = v * v * v;
      up[i] = T(0.5) * v * (T(1) + std::tanh(beta * (v + kappa * cube)));
    }
  }
  linear_rows<T>(out, hidden, n, *ffn.down, residual);
}

// The paper modes' mix of the first J sources: α = softmax_j(w · RMSNorm(S_j)) with a gain-free
// RMSNorm, out [n, D] = Σ_j α_j S_j (micro_lm.cpp's pseudo_query_mix).
template <class T>
void Decoder::pseudo_query_mix(int64_t J, const Tensor& query, int64_t n, T* out) {
  const int64_t D = config_.dim;
  T* logits = ptr<T>(route_logits_);
  for (int64_t j = 0; j < J; ++j) {
    rmsnorm_forward<T>(ptr<T>(normed_), ptr<T>(stat_a_), ptr<T>(sources_[j]), ptr<T>(unit_gain_), n,
                       D, config_.norm_eps);
    gemm(false, true, n, 1, D, T(1), ptr<T>(normed_), D, query.data<T>(), D, T(0), logits + j, J);
  }
  softmax_forward<T>(ptr<T>(alpha_), logits, n, J, 1, false);
  depth_mix_forward<T>(out, source_pointers<T>(sources_, J), ptr<T>(alpha_), n, J, D);
}

// ---- the step a residual mode's decode sees

template <class T>
T* DecodeStep<T>::source(int64_t j) const {
  return ptr<T>(decoder.sources_[j]);
}
template <class T>
const T* const* DecodeStep<T>::sources(int64_t count) const {
  return source_pointers<T>(decoder.sources_, count);
}
template <class T>
void DecodeStep<T>::norm(T* out, const T* x_rows, const Norm& layer) const {
  norm_rows<T>(out, x_rows, n, layer, stat_a, stat_b);
}
template <class T>
void DecodeStep<T>::linear(T* y, const T* x_rows, const Linear& l, const T* residual) const {
  linear_rows<T>(y, x_rows, n, l, residual);
}
template <class T>
void DecodeStep<T>::attention(const MicroBlock& block, int64_t layer, const T* qk, const T* v,
                              T* out, const T* residual) const {
  decoder.attention_sublayer<T>(block, layer, qk, v, n, out, residual);
}
template <class T>
void DecodeStep<T>::feed_forward(const FeedForward& ffn, const T* x_rows, T* out,
                                 const T* residual) const {
  decoder.feed_forward<T>(ffn, x_rows, n, out, residual);
}
template <class T>
void DecodeStep<T>::pseudo_query_mix(int64_t count, const Tensor& query, T* out) const {
  decoder.pseudo_query_mix<T>(count, query, n, out);
}
template struct DecodeStep<float>;
template struct DecodeStep<double>;

}  // namespace dg
