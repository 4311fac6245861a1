// The fast float32 convolution: oneDNN's direct (JIT) convolution, or its Winograd F(4, 3) where
// that measured faster (below), in its blocked channel layout, run over fixed chunks of images,
// one chunk per thread. tensor/kernels_conv.cpp's conv2d_forward, conv2d_backward_input,
// conv2d_backward_weight and conv2d_backward call it for float32 when conv_onednn_runs says so;
// their im2col + GEMM bodies stay the reference and the float64 path.
//
// Layout: the user's NCHW tensors are converted at the edge of each chunk (a oneDNN reorder into
// the layout the primitive chose, nChw16c on AVX-512, and back), so nothing outside sees it.
// Precision: the matmul precision decides (tensor/gemm_kernels.h): in bf16 the reorders round x,
// w and dy to bf16 and the primitive accumulates in float32; outputs and gradients are float32
// (but where the float32 Winograd kernel measured faster, kBf16WinogradMinPixels, it runs
// unrounded). Bits: every primitive is made and run for one thread. The forward and the input
// gradient give each image's output from that image alone, so their chunk size may follow the
// thread count; the weight gradient sums chunks of exactly conv_weight_grad_chunk images, each by
// one primitive, then the chunks in order (in bf16 on small images: per block of output channels
// over the whole batch, onednn_conv2d_backward_weight_whole_batch). Results are therefore
// bit-identical at any thread count (tests/test_kernels_conv.cpp checks it); they differ from the
// im2col path's by rounding.
#pragma once
#include <string>

#include "tensor/kernels_conv.h"

namespace dg {

enum class ConvPass { forward, backward_input, backward_weight };

// The automatic kernel in float32 precision runs 3×3, stride-1, undilated, ungrouped convolutions
// with at least kWinogradMinChannels input and output channels on at least kWinogradMinPixels
// output positions as oneDNN's Winograd F(4, 3) (2.25× fewer multiplications; where oneDNN has no
// Winograd kernel, the direct one). Measured on one thread of the AMD EPYC (Zen 4) VM, each pass
// on 4 images, GFLOP/s counted as a direct convolution's, direct / Winograd: 32→64 at 28×28 121 /
// 275 (forward), 64→64 at 32×32 121 / 295, 128→128 at 16×16 127 / 279, 64→64 at 14×14 130 / 166,
// 256→256 at 8×8 138 / 179; but 512→512 at 4×4 157 / 59 and 1→32 at 28×28 93 / 9. Its rounding
// differs from the direct kernel's: the transforms add and subtract multiples of the inputs, so
// the relative error grows with the spread of values in a tile (tests/test_kernels_conv.cpp bounds
// it). ConvKernel::onednn never uses it.
constexpr int64_t kWinogradMinChannels = 16;
constexpr int64_t kWinogradMinPixels = 64;
// In bf16 precision the same rule from kBf16WinogradMinPixels output positions runs the float32
// Winograd kernel (oneDNN has no bf16 one): operands unrounded, so more precise than bf16 asks.
// Only where bf16 runs on AVX512_BF16 (an AMX CPU's bf16 kernels were not measured against it).
// Measured on one thread of the same VM, the primitives alone on 8 chunks of 4 images (a batch of
// 32), forward + input gradient + weight gradient, CPU time (the machine shared), two runs, bf16
// direct / float32 Winograd: 64→64 at 32×32 34.0, 35.2 / 29.7, 28.5 ms; 128→128 at 16×16 31.9,
// 31.2 / 31.8, 31.1; 256→256 at 8×8 30.7, 29.9 / 58.1, 55.2; 32→64 at 14×14 (the Fashion-MNIST
// CNN's) 3.35, 3.00 / 4.74, 4.53.
constexpr int64_t kBf16WinogradMinPixels = 1024;

// Whether the float32 kernels run `pass` of g on oneDNN: the kernel choice (set_conv_kernel) allows
// it, groups are 1, the CPU has a JIT direct kernel for it in the current precision, and the pass
// is not the input gradient of a layer with fewer than kOnednnMinInputGradChannels input channels
// (oneDNN's kernel for that case ran at a tenth of im2col's speed in tools/bench_conv).
constexpr int64_t kOnednnMinInputGradChannels = 8;
bool conv_onednn_runs(const ConvGeom& g, ConvPass pass);
// The implementation oneDNN picks for pass of g ("jit:avx512_core", ...; "" when none).
std::string conv_onednn_impl(const ConvGeom& g, ConvPass pass);

// The contracts of conv2d_forward, conv2d_backward_input (adds into dx) and conv2d_backward_weight
// (adds into dw; the bias gradient stays with the caller), float32 only.
void onednn_conv2d_forward(float* y, const float* x, const float* w, const float* bias,
                           const ConvGeom& g);
void onednn_conv2d_backward_input(float* dx, const float* dy, const float* w, const ConvGeom& g);
void onednn_conv2d_backward_weight(float* dw, const float* x, const float* dy, const ConvGeom& g);
// Both at once (dx and dw added into; dx may be null, then it is backward_weight, and w is not
// read), dy converted once per chunk for the two: the same bits as the two calls.
void onednn_conv2d_backward(float* dx, float* dw, const float* x, const float* dy, const float* w,
                            const ConvGeom& g);

// In bf16 precision on small images (at most kConvBatchedMaxPixels output positions; stride 1,
// groups 1, the automatic kernel) the weight gradient is one oneDNN primitive per block of a
// quarter of the output channels over the whole batch, added straight into dw: no per-chunk partial
// sums as large as the weights (9.4 MB each on a 512-channel 4×4 layer), no bf16 GEMM over im2col
// columns. The blocks are fixed by the shape, so the bits do not depend on the thread count.
// Measured on one thread of the AMD EPYC (Zen 4) VM, batch 32, CPU time (the machine shared), the
// weight gradient alone, bf16 GEMM / chunks of images / whole batch: 512→512 at 4×4 20.5 / 19.2
// / 16.6 ms; 256→256 at 8×8 17.4 (chunks) / 12.6 (whole batch). Stride 2 stays on the GEMM: 256→512
// to 4×4 9.6 ms there, 12.8 on the whole batch (oneDNN's strided bf16 weight gradient is slow).
bool conv_onednn_weight_grad_whole_batch(const ConvGeom& g);
void onednn_conv2d_backward_weight_whole_batch(float* dw, const float* x, const float* dy,
                                               const ConvGeom& g);

}  // namespace dg
