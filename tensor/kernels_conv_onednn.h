// The fast float32 convolution: oneDNN's direct (JIT) convolution in its blocked channel layout,
// run over fixed chunks of images, one chunk per thread. tensor/kernels_conv.cpp's conv2d_forward,
// conv2d_backward_input and conv2d_backward_weight call it for float32 when conv_onednn_runs says
// so; their im2col + GEMM bodies stay the reference and the float64 path.
//
// Layout: the user's NCHW tensors are converted at the edge of each chunk (a oneDNN reorder into
// the layout the primitive chose, nChw16c on AVX-512, and back), so nothing outside sees it.
// Precision: the matmul precision decides (tensor/gemm_kernels.h): in bf16 the reorders round x,
// w and dy to bf16 and the primitive accumulates in float32; outputs and gradients are float32.
// Bits: every primitive is made and run for one thread. The forward and the input gradient give
// each image's output from that image alone, so their chunk size may follow the thread count; the
// weight gradient sums chunks of exactly conv_weight_grad_chunk images, each by one primitive, then
// the chunks in order. Results are therefore bit-identical at any thread count
// (tests/test_kernels_conv.cpp checks it); they differ from the im2col path's by rounding.
#pragma once
#include <string>

#include "tensor/kernels_conv.h"

namespace dg {

enum class ConvPass { forward, backward_input, backward_weight };

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
// Both at once (dx and dw added into; neither null), dy converted once per chunk for the two:
// the same bits as the two calls.
void onednn_conv2d_backward(float* dx, float* dw, const float* x, const float* dy, const float* w,
                            const ConvGeom& g);

}  // namespace dg
