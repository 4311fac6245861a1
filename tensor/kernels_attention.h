// Fused causal scaled-dot-product attention kernels (flash-attention style on the CPU): the
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

// out [B,H,T,hd] (contiguous, or permuted from a contiguous [B,T,H,hd], so that merging the heads
// afterwards needs no copy) and lse [B,H,T] contiguous (both q's dtype) are written:
//   out[b,h,i] = Σ_{j≤i} softmax_j(scale · q[b,h,i]·k[b,g,j]) v[b,g,j],   g = h / (H/Hkv)
//   lse[b,h,i] = log Σ_{j≤i} exp(scale · q[b,h,i]·k[b,g,j])
// One OpenMP task per (b, h); BLAS runs single-threaded inside each task.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, Tensor& out,
                       Tensor& lse);

// Vector-Jacobian products of attention_forward given dout [B,H,T,hd] (any layout), the saved
// out and lse. dq [B,H,T,hd], dk and dv [B,Hkv,T,hd] must be contiguous; the products are ADDED
// into them. Pass nullptr to skip one. One OpenMP task per (b, kv head) loops over its query heads
// in order, so dk and dv do not depend on the thread count.
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, double scale, Tensor* dq, Tensor* dk,
                        Tensor* dv);

// Reference versions: explicit loops in double over a materialised T×T probability matrix.
// Results come back as fresh contiguous tensors of q's dtype. For tests only.
Tensor ref_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                             Tensor* lse = nullptr);
void ref_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                            double scale, Tensor& dq, Tensor& dk, Tensor& dv);




}  // namespace dg
