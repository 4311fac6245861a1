// Fused causal scaled-dot-product attention kernels (flash-attention style on the CPU), and the
// RoPE rotations the attention ops apply to q and k (declared at the end). Attention: the
// forward keeps only the output and one logsumexp per query row; the backward recomputes the
// probabilities from them, one row block at a time, so no T×T matrix outlives a task.
// Inputs may be strided views whose last axis has stride 1 (e.g. [B,T,H,hd] permuted to
// [B,H,T,hd]): BLAS reads them in place. Other layouts are copied once with contiguous().
// Does not do: masks other than causal, dropout, different query and key lengths (no KV cache),
// autograd recording (autograd/ops_attention.cpp wraps these kernels).
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

#include "tensor/tensor.h"

namespace dg {

struct AttentionShape {
  int64_t B = 0, H = 0, Hkv = 0, T = 0, hd = 0;
};

// Checks q [B,H,T,hd], k and v [B,Hkv,T,hd], H % Hkv == 0, one float dtype; throws
// std::invalid_argument naming `op` and the offending shapes.
AttentionShape attention_shape(const Tensor& q, const Tensor& k, const Tensor& v, const char* op);
// scale 0 -> 1/sqrt(hd); throws for a non-finite scale.
double attention_scale(double scale, int64_t hd, const char* op);

// out [B,H,T,hd] (contiguous, or a [B,T,H,hd] buffer seen as [B,H,T,hd]: any layout whose rows
// do not overlap and whose last axis has stride 1), lse [B,H,T] contiguous (both q's dtype):
//   out[b,h,i] = Σ_{j≤i} softmax_j(scale · q[b,h,i]·k[b,g,j]) v[b,g,j],   g = h / (H/Hkv)
//   lse[b,h,i] = log Σ_{j≤i} exp(scale · q[b,h,i]·k[b,g,j])
// One OpenMP task per (b, h); BLAS runs single-threaded inside each task.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, Tensor& out,
                       Tensor& lse);

// Vector-Jacobian products of attention_forward given dout [B,H,T,hd] (any layout), the saved
// out and lse. dq [B,H,T,hd], dk and dv [B,Hkv,T,hd] take the same layouts as out; the products
// are ADDED into them. Pass nullptr to skip one. One OpenMP task per (b, kv head) loops over its
// query heads in order, so dk and dv do not depend on the thread count.
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, double scale, Tensor* dq, Tensor* dk,
                        Tensor* dv);

// Reference versions: explicit loops in double over a materialised T×T probability matrix.
// Results come back as fresh contiguous tensors of q's dtype. For tests only.
Tensor ref_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                             Tensor* lse = nullptr);
void ref_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                            double scale, Tensor& dq, Tensor& dk, Tensor& dv);

// ---- RoPE (rotate-half) ---------------------------------------------------------------------
// cos, sin [T, hd/2] for positions offset .. offset+T−1: inv_freq_i = 1/base^((2i)/hd),
// angle = position · inv_freq_i, all in T's precision (float32 like the torch reference).
template <class T>
void rope_tables(T* cos, T* sin, int64_t Tn, int64_t hd, double base, int64_t offset);
// x, out [BH, T, hd], h = hd/2: out[i] = x[i]cos − x[i+h]sin, out[i+h] = x[i]sin + x[i+h]cos.
template <class T>
void rope_forward(T* out, const T* x, const T* cos, const T* sin, int64_t BH, int64_t Tn,
                  int64_t hd);
// The inverse rotation: dx[i] += g[i]cos + g[i+h]sin, dx[i+h] += −g[i]sin + g[i+h]cos.
template <class T>
void rope_backward(T* dx, const T* dout, const T* cos, const T* sin, int64_t BH, int64_t Tn,
                   int64_t hd);
// The same rotations on [B, H, T, hd] rows anywhere in memory: row (b, h, t) of x starts at
// x + b·xs.b + h·xs.h + t·xs.t (its hd values contiguous), likewise out with os. Used by the
// fused attention op to read [B,T,H,hd] projections in place. `inverse` applies the backward
// rotation; `overwrite` writes out instead of adding into it (the forward always writes).
struct RowStrides {
  int64_t b, h, t;
};
template <class T>
void rope_rows(T* out, RowStrides os, const T* x, RowStrides xs, const T* cos, const T* sin,
               int64_t B, int64_t H, int64_t Tn, int64_t hd, bool inverse, bool overwrite);
// Reference: computes each angle from the formula, no tables.
template <class T>
void ref_rope_forward(T* out, const T* x, int64_t BH, int64_t Tn, int64_t hd, double base,
                      int64_t offset);

}  // namespace dg
