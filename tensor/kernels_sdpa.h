// Scaled-dot-product attention kernels with any additive mask, an optional causal (top-left) mask
// and query and key lengths that differ (cross-attention): per batch matrix, S = scale·Q·Kᵀ + mask,
// P = softmax(S) row by row, O = P·V. The fast pair works on row blocks with one-thread GEMMs and
// keeps one logsumexp per query row instead of the L×S probabilities (the backward recomputes
// them; packed_self_attention asks the pair to keep them instead when they are small); the
// reference pair loops in double over the whole matrix. A row whose every key is masked
// (all −inf) gives a zero output row and zero gradients (see autograd/ops.h).
// Does not do: dropout, bool masks (autograd/ops_sdpa.cpp turns them into 0/−inf), grouped
// kv heads (broadcast the batch axes instead), autograd recording.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace dg {

// The inputs of one attention call. q [..., L, E], k [..., S, E], v [..., S, Ev] and mask
// [..., L, S] (or undefined) all have the same batch axes (expanded views are fine: a broadcast
// axis has stride 0). q, k, v are read in place when their last axis has stride 1 (else copied);
// the mask is read through its strides. One float dtype for all.
struct SdpaInputs {
  Tensor q, k, v, mask;
  bool causal = false;  // key j is hidden from query i when j > i (torch's tril, top-left)
  double scale = 1.0;
};

// out [Bt, L, Ev] and lse [Bt, L] contiguous, Bt the product of the batch axes, written:
//   out[b, i] = Σ_j softmax_j(scale·q[b,i]·k[b,j] + mask[b,i,j]) v[b,j],  lse[b, i] its log Σ exp
// (−inf, and a zero row of out, when every key of row i is masked). out may be a strided view
// (batch axes of any shape whose product is Bt, the last axis of stride 1: the heads of a
// [N, L, H·hd] tensor are written in place). With probs ([Bt, L, S] contiguous) the probabilities
// are kept there for sdpa_backward (with a causal mask, entries past a row block's last key are
// left unwritten). One OpenMP task per batch matrix; the result does not depend on the thread
// count.
void sdpa_forward(const SdpaInputs& in, Tensor& out, Tensor& lse, Tensor* probs = nullptr);

// The vector-Jacobian products given dout [Bt, L, Ev] (contiguous) and the saved out and lse:
// dq [Bt, L, E], dk [Bt, S, E], dv [Bt, S, Ev], dmask [Bt, L, S] (contiguous, at the full batch
// shape: the caller sums broadcast axes), each WRITTEN; pass nullptr to skip one. out, dout, dq,
// dk and dv may be strided views as sdpa_forward's out. probs: the forward's kept probabilities
// (then they are read, not recomputed: 16 MB for 256 heads of 128×128 floats against a GEMM and an
// exp per score, measured faster on the encoder layer), or nullptr.
void sdpa_backward(const SdpaInputs& in, const Tensor& out, const Tensor& lse, const Tensor& dout,
                   Tensor* dq, Tensor* dk, Tensor* dv, Tensor* dmask,
                   const Tensor* probs = nullptr);

// Reference versions: explicit loops in double over the whole L×S matrix; fresh contiguous
// tensors of q's dtype at the full batch shape (dq, dk, dv, dmask as sdpa_backward's). Tests only.
Tensor ref_sdpa_forward(const SdpaInputs& in);
void ref_sdpa_backward(const SdpaInputs& in, const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                       Tensor& dmask);

}  // namespace dg
