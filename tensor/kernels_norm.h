// Fused RMSNorm and LayerNorm kernels, llm.c style: each `X_forward` beside its `X_backward`,
// which ADDS into its gradient outputs (a null gradient pointer means "not needed"). Forwards save
// only per-row statistics (rstd, mean). Every output element has one owner thread; weight
// gradients summed over rows are reduced in fixed row chunks (kRowChunk) and then over chunks in
// a fixed order, so float32 results are bit-identical at any thread count. ref_* versions are
// plain loops the tests compare against. These kernels do not check shapes or record autograd
// (autograd/ops_norm.cpp does). All pointers are to contiguous row-major buffers.
#pragma once
#include <cstdint>

namespace dg {

// Rows per chunk of a fixed-order reduction over rows (weight gradients of the norms).
constexpr int64_t kRowChunk = 32;

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

}  // namespace dg
