// Convolution and pooling kernels over NCHW planes: conv2d forward, input gradient and weight (and
// bias) gradient by im2col + GEMM (col2im for the input gradient), or for float32 by oneDNN
// (kernels_conv_onednn.h, chosen per shape and pass), beside plain direct-loop references (ref_*);
// max pooling with int64 argmax indices; average pooling over window tables (avg_pool2d's and
// adaptive_avg_pool2d's windows), forward and backward. Backwards ADD into their outputs. Every
// output element has one owner thread, and the weight gradient is summed over the batch in fixed
// chunks of conv_weight_grad_chunk images, then over chunks in order, so float32 results are
// bit-identical at any thread count. float32 GEMMs follow the matmul precision (bf16 when set:
// gemm_one_thread). Column buffers are per thread and kept for reuse. These kernels do not check
// shapes or record autograd (autograd/ops_conv.cpp does); all pointers are to contiguous row-major
// buffers.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace dg {

// Images per chunk of the weight gradient's fixed-order sum over the batch: kConvBatchChunk, or
// on small images enough for kConvMinChunkPixels output positions (each chunk writes a partial
// weight gradient, which on a 512-channel 4×4 layer costs more than the chunk's arithmetic). A
// function of the shape only, never of the thread count.
constexpr int64_t kConvBatchChunk = 4;
constexpr int64_t kConvMinChunkPixels = 256;
inline int64_t conv_weight_grad_chunk(int64_t Ho, int64_t Wo) {
  const int64_t pixels = std::max<int64_t>(1, Ho * Wo);
  return std::max(kConvBatchChunk, (kConvMinChunkPixels + pixels - 1) / pixels);
}

// Which kernels float32 convolutions run on: automatic (default) sends each pass to oneDNN's
// direct convolution where it has a JIT kernel for it and measured faster
// (tensor/kernels_conv_onednn.h: conv_onednn_runs), else im2col + GEMM; im2col pins the reference
// kernels (the float64 path always runs them); onednn takes oneDNN wherever it has a JIT kernel.
// Set it between steps, not while convolutions run.
enum class ConvKernel { automatic, im2col, onednn };
void set_conv_kernel(ConvKernel k);
ConvKernel conv_kernel();

// A convolution's geometry: input [N, C, H, W], weight [O, C/groups, kH, kW], output
// [N, O, Ho, Wo]. Ho and Wo are given (not derived), so conv_transpose2d's output_padding fits.
struct ConvGeom {
  int64_t N, C, H, W, O, kH, kW;
  int64_t sH = 1, sW = 1, pH = 0, pW = 0, dH = 1, dW = 1, groups = 1;
  int64_t Ho, Wo;
  int64_t Cg() const { return C / groups; }
  int64_t Og() const { return O / groups; }
  int64_t K() const { return Cg() * kH * kW; }  // rows of a column matrix
};

// The weight gradient's per-chunk partial sums, shared by the im2col and oneDNN kernels: the
// calling thread's buffer of n elements (kept: a fresh one every call would be fresh pages from
// the system every step), and dw [size] += each chunk's partial [size] in chunk order.
template <class T>
T* weight_grad_partials(int64_t n);
template <class T>
void add_weight_grad_partials(T* dw, const T* partial, int64_t chunks, int64_t size);

// Whether a convolution's images run in parallel: when its multiply-adds pay for a region.
bool conv_runs_parallel(const ConvGeom& g);

// col [Cg·kH·kW, Ho·Wo] = the input windows of x [Cg, H, W] (zeros in the padding); rows ld
// apart (0: Ho·Wo), so the images of a batch can sit side by side in one column matrix.
template <class T>
void im2col(T* col, const T* x, const ConvGeom& g, int64_t ld = 0);
// dx [Cg, H, W] += col [Cg·kH·kW, Ho·Wo] scattered back to the windows (im2col's adjoint).
template <class T>
void col2im(T* dx, const T* col, const ConvGeom& g);

// y [N, O, Ho, Wo] = conv(x [N, C, H, W], w [O, Cg, kH, kW]) + bias [O] (null: none).
// Per image and group: y [Og, Ho·Wo] = w_g [Og, K] · col [K, Ho·Wo]; images in parallel.
template <class T>
void conv2d_forward(T* y, const T* x, const T* w, const T* bias, const ConvGeom& g);
// dx [N, C, H, W] += col2im(w_gᵀ [K, Og] · dy_g [Og, Ho·Wo]) per image and group.
template <class T>
void conv2d_backward_input(T* dx, const T* dy, const T* w, const ConvGeom& g);
// dw [O, Cg, kH, kW] += Σ_n dy_ng [Og, Ho·Wo] · col_ngᵀ [Ho·Wo, K]; db [O] += Σ_n,hw dy (either
// pointer may be null). Fixed chunks of images, then chunks in order: thread-count independent.
template <class T>
void conv2d_backward_weight(T* dw, T* db, const T* x, const T* dy, const ConvGeom& g);

// conv2d_backward_input and conv2d_backward_weight together (any output may be null): on oneDNN
// both passes share each chunk's conversion of dy. The same bits as the two calls.
template <class T>
void conv2d_backward(T* dx, T* dw, T* db, const T* x, const T* dy, const T* w, const ConvGeom& g);

// Small images (at most kConvBatchedMaxPixels output positions) take the float32 weight gradient
// as ONE GEMM over the whole batch: dw [O, K] += dy [O, N·Ho·Wo] · colᵀ, with the images' column
// matrices side by side (one im2col per image) and dy's images gathered per channel. Per-image
// products there have K = Ho·Wo ≤ 64 and a partial sum as large as the weights per chunk: a
// ResNet's 512-channel 4×4 layer ran at 28 GFLOP/s on either kernel. dg::gemm's pieces are fixed
// by the shape, so the bits do not depend on the thread count. Groups 1, the automatic kernel.
constexpr int64_t kConvBatchedMaxPixels = 64;
bool conv_weight_grad_batched(const ConvGeom& g);

// The same contracts as direct nested loops, sums in double.
template <class T>
void ref_conv2d_forward(T* y, const T* x, const T* w, const T* bias, const ConvGeom& g);
template <class T>
void ref_conv2d_backward_input(T* dx, const T* dy, const T* w, const ConvGeom& g);
template <class T>
void ref_conv2d_backward_weight(T* dw, T* db, const T* x, const T* dy, const ConvGeom& g);

// ---- pooling --------------------------------------------------------------------------------
// A max pool's geometry over planes [H, W] -> [Ho, Wo] (PyTorch's max_pool2d: window start
// ho·sH − pH, taps every dH; padding never wins).
struct PoolGeom {
  int64_t H, W, Ho, Wo, kH, kW;
  int64_t sH = 1, sW = 1, pH = 0, pW = 0, dH = 1, dW = 1;
};
// y, idx [P, Ho, Wo] from x [P, H, W] (P = N·C planes): the max of each window and its flat index
// h·W + w in the plane; the first max in scan order wins ties, NaN wins over numbers (torch).
template <class T>
void max_pool2d_forward(T* y, int64_t* idx, const T* x, int64_t P, const PoolGeom& g);
template <class T>
void ref_max_pool2d_forward(T* y, int64_t* idx, const T* x, int64_t P, const PoolGeom& g);
// dx [P, HW] += dy [P, HoWo] at the indices idx [P, HoWo] (flat in each plane): max pooling's
// backward. Planes in parallel, each plane's adds in output order, so the bits do not depend on
// the thread count. dx_fresh: dx holds nothing yet; each plane is zeroed by its own thread just
// before its adds (the bits of adding into zeros, without a serial zero-fill of all of dx).
template <class T>
void max_pool2d_backward(T* dx, const T* dy, const int64_t* idx, int64_t P, int64_t HW,
                         int64_t HoWo, bool dx_fresh = false);
template <class T>
void ref_max_pool2d_backward(T* dx, const T* dy, const int64_t* idx, int64_t P, int64_t HW,
                             int64_t HoWo);

// Average-pool windows: output row i reads input rows [hs[i], he[i]) and divides by hn[i]·wn[j]
// (columns likewise). avg_pool_windows builds avg_pool2d's (count_include_pad: the divisor counts
// the padding up to H + pH), adaptive_pool_windows adaptive_avg_pool2d's
// (start floor(i·H/Ho), end ceil((i+1)·H/Ho)).
struct PoolWindows {
  int64_t H, W, Ho, Wo;
  std::vector<int64_t> hs, he, hn, ws, we, wn;
};
PoolWindows avg_pool_windows(const PoolGeom& g, bool count_include_pad);
PoolWindows adaptive_pool_windows(int64_t H, int64_t W, int64_t Ho, int64_t Wo);
// y [P, Ho, Wo] = window means of x [P, H, W]; planes in parallel.
template <class T>
void avg_pool2d_forward(T* y, const T* x, int64_t P, const PoolWindows& w);
// dx [P, H, W] += dy [P, Ho, Wo] spread evenly over each window (the forward's adjoint).
template <class T>
void avg_pool2d_backward(T* dx, const T* dy, int64_t P, const PoolWindows& w);
template <class T>
void ref_avg_pool2d_forward(T* y, const T* x, int64_t P, const PoolWindows& w);
template <class T>
void ref_avg_pool2d_backward(T* dx, const T* dy, int64_t P, const PoolWindows& w);

}  // namespace dg
