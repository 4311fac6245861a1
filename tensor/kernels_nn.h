// Fused kernels of the neural-network ops: embedding, softmax / log_softmax, cross-entropy,
// RMSNorm, LayerNorm, RoPE, SwiGLU and the depth mix. Raw-pointer, llm.c style: each `X_forward` sits
// beside its `X_backward`, which ADDS into its gradient outputs (a null gradient pointer means
// "not needed"). Forwards save only per-row statistics (rstd, mean, logsumexp), never copies.
// Every output element has one owner thread; weight gradients summed over rows are reduced in
// fixed row chunks (kRowChunk) and then over chunks in a fixed order, so float32 results are
// bit-identical at any thread count. ref_* versions are plain loops the tests compare against.
// These kernels do not check shapes, ids or dtypes and do not record autograd: autograd/ops_nn.cpp
// validates and wraps them. All pointers are to contiguous row-major buffers.
#pragma once
#include <cmath>
#include <cstdint>

#include "tensor/fast_math.h"

namespace dg {

// Rows per chunk of a fixed-order reduction over rows (weight gradients of the norms).
constexpr int64_t kRowChunk = 32;

// ---- embedding ------------------------------------------------------------------------------
// W [V, D], ids [N] (each in [0, V), checked by the caller) -> out [N, D] = W[ids[n], :]
template <class T>
void embedding_forward(T* out, const int32_t* ids, const T* W, int64_t N, int64_t D);
// dW [V, D] += Σ_{n: ids[n] = v} dout[n, :]. One owner thread per vocabulary row; the tokens of a
// row are added in token order, so the result equals the serial reference bit for bit.
template <class T>
void embedding_backward(T* dW, const T* dout, const int32_t* ids, int64_t N, int64_t V, int64_t D);
template <class T>
void ref_embedding_backward(T* dW, const T* dout, const int32_t* ids, int64_t N, int64_t V,
                            int64_t D);

// ---- softmax / log_softmax ------------------------------------------------------------------
// x, out [outer, C, inner]: softmax (or log_softmax when `log`) over C. inner == 1 (the last
// axis) is the contiguous fast path; otherwise each (outer, inner) row is read with stride inner.
template <class T>
void softmax_forward(T* out, const T* x, int64_t outer, int64_t C, int64_t inner, bool log);
// y = forward output, dy its gradient [outer, C, inner].
// softmax:     dx += y ⊙ (dy − Σ_c dy·y)      log_softmax: dx += dy − exp(y)·Σ_c dy
template <class T>
void softmax_backward(T* dx, const T* dy, const T* y, int64_t outer, int64_t C, int64_t inner,
                      bool log);
template <class T>
void ref_softmax_forward(T* out, const T* x, int64_t outer, int64_t C, int64_t inner, bool log);
template <class T>
void ref_softmax_backward(T* dx, const T* dy, const T* y, int64_t outer, int64_t C, int64_t inner,
                          bool log);

// ---- cross-entropy --------------------------------------------------------------------------
// logits [N, C], targets [N] -> losses [N] = logsumexp(logits[n]) − logits[n, t_n] (0 where
// t_n == ignore_index) and lse [N] (saved for backward). Targets must be in [0, C) or ignored.
template <class T>
void cross_entropy_forward(T* losses, T* lse, const T* logits, const int32_t* targets, int64_t N,
                           int64_t C, int32_t ignore_index);
// dlogits[n, c] += scale · (exp(logits[n, c] − lse[n]) − [c == t_n]) for rows not ignored;
// scale = dloss / (number of rows not ignored).
template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                            T scale, int64_t N, int64_t C, int32_t ignore_index);
template <class T>
void ref_cross_entropy_forward(T* losses, T* lse, const T* logits, const int32_t* targets,
                               int64_t N, int64_t C, int32_t ignore_index);
template <class T>
void ref_cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                                T scale, int64_t N, int64_t C, int32_t ignore_index);

// ---- RMSNorm --------------------------------------------------------------------------------
// x, out [rows, D], w [D] -> out = x · rstd · w with rstd [rows] = 1/sqrt(mean(x²) + eps).
template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int64_t rows, int64_t D, double eps);
// dx [rows, D] += rstd·(dout⊙w) − x·rstd³·<dout⊙w, x>/D;  dw [D] += Σ_rows dout ⊙ x · rstd.
template <class T>
void rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd,
                      int64_t rows, int64_t D);
template <class T>
void ref_rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int64_t rows, int64_t D,
                         double eps);
template <class T>
void ref_rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd,
                          int64_t rows, int64_t D);

// ---- LayerNorm ------------------------------------------------------------------------------
// x, out [rows, D], w [D], b [D] or null -> out = (x − mean)·rstd·w + b, with mean [rows] and
// rstd [rows] = 1/sqrt(var + eps), var the biased variance.
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, int64_t rows,
                       int64_t D, double eps);
// xhat = (x − mean)·rstd, gh = dout⊙w:
// dx += rstd·(gh − mean(gh) − xhat·mean(gh⊙xhat)); dw += Σ_rows dout⊙xhat; db += Σ_rows dout.
template <class T>
void layernorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w, const T* mean,
                        const T* rstd, int64_t rows, int64_t D);
template <class T>
void ref_layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b,
                           int64_t rows, int64_t D, double eps);
template <class T>
void ref_layernorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w,
                            const T* mean, const T* rstd, int64_t rows, int64_t D);

// ---- RoPE (rotate-half) ---------------------------------------------------------------------
// cos, sin [T, hd/2] for positions offset .. offset+T−1: inv_freq_i = 1/base^((2i)/hd),
// angle = position · inv_freq_i, all in T's precision (float32 like the torch reference).
template <class T>
void rope_tables(T* cos, T* sin, int64_t Tn, int64_t hd, double base, int64_t offset);
// x, out [BH, T, hd], h = hd/2: out[i] = x[i]cos − x[i+h]sin, out[i+h] = x[i]sin + x[i+h]cos.
// With heads > 1 the layout is heads-last instead, x, out [B, T, heads, hd] with BH = B·heads
// (the output of a projection before the heads are split off). out may equal x (in place).
template <class T>
void rope_forward(T* out, const T* x, const T* cos, const T* sin, int64_t BH, int64_t Tn,
                  int64_t hd, int64_t heads = 1);
// The inverse rotation: dx[i] += g[i]cos + g[i+h]sin, dx[i+h] += −g[i]sin + g[i+h]cos.
template <class T>
void rope_backward(T* dx, const T* dout, const T* cos, const T* sin, int64_t BH, int64_t Tn,
                   int64_t hd, int64_t heads = 1);
// Reference: computes each angle from the formula, no tables.
template <class T>
void ref_rope_forward(T* out, const T* x, int64_t BH, int64_t Tn, int64_t hd, double base,
                      int64_t offset);

// ---- SwiGLU ---------------------------------------------------------------------------------
// gate, up, out [n]: out = silu(gate) · up with silu(g) = g / (1 + e^(−g)), rounded to T before
// the product (the same bits as silu followed by mul).
template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n);
// dgate += (dout·up)·σ(g)·(1 + g·(1 − σ(g)));  dup += dout·silu(g). silu is recomputed, not saved.
template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n);
template <class T>
void ref_swiglu_forward(T* out, const T* gate, const T* up, int64_t n);
template <class T>
void ref_swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n);

// ---- depth mix ------------------------------------------------------------------------------
// S: J pointers to [rows, D]; alpha [rows, J] -> out [rows, D] = Σ_j alpha[:, j] · S_j (j in
// order).
template <class T>
void depth_mix_forward(T* out, const T* const* S, const T* alpha, int64_t rows, int64_t J,
                       int64_t D);
// dS[j] (null: skip) += alpha[:, j] · dout; dalpha [rows, J] (null: skip) += <dout, S_j> per row.
// Two dS[j] may point to the same buffer (a source passed twice).
template <class T>
void depth_mix_backward(T* const* dS, T* dalpha, const T* dout, const T* const* S, const T* alpha,
                        int64_t rows, int64_t J, int64_t D);
template <class T>
void ref_depth_mix_forward(T* out, const T* const* S, const T* alpha, int64_t rows, int64_t J,
                           int64_t D);
template <class T>
void ref_depth_mix_backward(T* const* dS, T* dalpha, const T* dout, const T* const* S,
                            const T* alpha, int64_t rows, int64_t J, int64_t D);

}  // namespace dg
