// Fused RMSNorm, LayerNorm, BatchNorm and GroupNorm kernels, llm.c style: each `X_forward` beside
// its `X_backward`, which ADDS into its gradient outputs (a null gradient pointer means "not
// needed"). Forwards save only per-row statistics (rstd, mean). Every output element has one owner
// thread; weight gradients summed over rows are reduced in fixed row chunks (kRowChunk) and then
// over chunks in a fixed order, so float32 results are bit-identical at any thread count. ref_*
// versions are plain loops the tests compare against. These kernels do not check shapes or record
// autograd (autograd/ops_norm.cpp does). All pointers are to contiguous row-major buffers.
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

// ---- BatchNorm and GroupNorm over x [N, C, S] (S = the spatial size, 1 for [N, C]) ----------
// A null w or b means 1 or 0. Statistics are per channel (BatchNorm, [C]) or per sample and group
// of C/G consecutive channels (GroupNorm, [N, G]); each is owned by one thread and summed in a
// fixed order in double, so float32 results are bit-identical at any thread count.

// mean [C], var [C] = the mean and biased variance of x[:, c, :] over its N·S elements.
template <class T>
void batchnorm_stats(T* mean, T* var, const T* x, int64_t N, int64_t C, int64_t S);
template <class T>
void ref_batchnorm_stats(T* mean, T* var, const T* x, int64_t N, int64_t C, int64_t S);
// out [N, C, S] = (x − mean[c])·rstd[c]·w[c] + b[c]; with relu, then relu's rule (a value
// below 0 becomes 0, NaN stays): batch norm and ReLU in one pass, the same bits as the two.
template <class T>
void batchnorm_apply(T* out, const T* x, const T* mean, const T* rstd, const T* w, const T* b,
                     int64_t N, int64_t C, int64_t S, bool relu = false);
template <class T>
void ref_batchnorm_apply(T* out, const T* x, const T* mean, const T* rstd, const T* w, const T* b,
                         int64_t N, int64_t C, int64_t S, bool relu = false);
// With M = N·S, xhat = (x − mean[c])·rstd[c], per channel: dw[c] += Σ g·xhat, db[c] += Σ g, and
//   batch_stats (training: mean and rstd are functions of x):
//     dx += w[c]·rstd[c]·(g − Σg/M − xhat·Σ(g·xhat)/M)
//   otherwise (eval: running statistics are constants): dx += w[c]·rstd[c]·g.
// relu: the backward of relu(batch_norm(x)): g is dout where the forward's output was above 0
// (or NaN), else 0 (relu's backward), the output recomputed from x, b and the statistics exactly
// as batchnorm_apply computes it; so no output is saved and no masked copy of dout is made.
// dx_fresh: dx holds nothing yet (autograd's GradSink); it is written, not read, with the bits
// of adding into zeros (0 + v), which saves the zero-fill and a read of 4 bytes an element.
template <class T>
void batchnorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w, const T* mean,
                        const T* rstd, int64_t N, int64_t C, int64_t S, bool batch_stats,
                        bool relu = false, const T* b = nullptr, bool dx_fresh = false);
template <class T>
void ref_batchnorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w,
                            const T* mean, const T* rstd, int64_t N, int64_t C, int64_t S,
                            bool batch_stats, bool relu = false, const T* b = nullptr);

// GroupNorm: row (n, g) is x[n, g·C/G : (g+1)·C/G, :], D = C/G·S contiguous elements;
// mean, rstd [N, G] its mean and 1/sqrt(biased var + eps); out = xhat·w[c] + b[c].
template <class T>
void groupnorm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, int64_t N,
                       int64_t C, int64_t S, int64_t G, double eps);
template <class T>
void ref_groupnorm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, int64_t N,
                           int64_t C, int64_t S, int64_t G, double eps);
// gw = g·w[c] over a row: dx += rstd·(gw − mean(gw) − xhat·mean(gw·xhat)) (layer norm's formula
// with a per-channel weight); dw[c] += Σ_{n,s} g·xhat, db[c] += Σ_{n,s} g.
template <class T>
void groupnorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w, const T* mean,
                        const T* rstd, int64_t N, int64_t C, int64_t S, int64_t G);
template <class T>
void ref_groupnorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w,
                            const T* mean, const T* rstd, int64_t N, int64_t C, int64_t S,
                            int64_t G);

}  // namespace dg
