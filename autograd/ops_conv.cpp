// Convolution and pooling ops over NCHW tensors, torch.nn.functional's semantics (zero padding):
// conv2d, conv1d (conv2d with H = 1), conv_transpose2d, max_pool2d (values; _with_indices both),
// avg_pool2d, adaptive_avg_pool2d; kernels in tensor/kernels_conv.h (im2col + GEMM).
// A convolution is three recorded ops, each linear in each input, whose backwards are the other
// two: the forward conv(x, w), its input gradient (conv_transpose2d's forward) and its weight
// gradient. Each backward is written with these recorded ops, so every one supports create_graph
// (third derivatives too); the forward conv's first-order backward calls the kernels instead,
// adding into the gradient buffers (the recorded form runs only under create_graph). avg pools are
// a pair (window means and their adjoint) likewise; max_pool2d's backward adds the gradient at the
// indices of the maxima (torch's tie rule: the first max in scan order), recorded under
// create_graph as max_pool2d_backward, whose own backward gathers at those indices. Refuses:
// 'same'/'valid' string padding, padding modes other than zeros, divisor_override, 3-D (unbatched)
// inputs, conv3d and pool3d. Checks: the rows at the end, the kernels in
// tests/test_kernels_conv.cpp, torch 1.13 goldens and the errors in tests/test_conv_ops.cpp.
#include <fmt/format.h>

#include <memory>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/kernels_conv.h"
#include "tensor/profile.h"

namespace dg {

namespace {
std::string pair_str(IntPair p) { return fmt::format("({}, {})", p[0], p[1]); }

void check_pair(IntPair p, int64_t min, const char* op, const char* what) {
  if (p[0] < min || p[1] < min)
    throw std::invalid_argument(
        fmt::format("{}: {} must be >= {} on both axes, got {}", op, what, min, pair_str(p)));
}

void check_input(const Tensor& x, int64_t rank, const char* op, const char* what) {
  check_float(x, op);
  check_arg(x.dim() == rank, op, x, what);
}

// One axis of a convolution's output: floor((in + 2p − d(k − 1) − 1) / s) + 1, refused below 1.
int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, const char* op,
                 const Tensor& x, const Tensor& w) {
  const int64_t span = d * (k - 1) + 1;
  if (in + 2 * p < span)
    throw std::invalid_argument(fmt::format(
        "{}: kernel of extent {} (dilated) is larger than the padded input ({} + 2·{}): input {}, "
        "weight {}",
        op, span, in, p, x.describe(), w.describe()));
  return (in + 2 * p - span) / s + 1;
}

// ---- the three recorded ops of a convolution (geometry g: x [N, C, H, W] -> y [N, O, Ho, Wo]) --
Tensor conv_op(const Tensor& x, const Tensor& w, const Tensor& b, const ConvGeom& g,
               const char* op);
Tensor conv_input_grad_op(const Tensor& dy, const Tensor& w, const ConvGeom& g, const char* op);
Tensor conv_weight_grad_op(const Tensor& x, const Tensor& dy, const ConvGeom& g);

// y [N, O, Ho, Wo] = conv(x, w) + b. Backward: dx = conv_input_grad(gy, w), dw =
// conv_weight_grad(x, gy), db = Σ_{n, h, w} gy: the kernels adding straight into the gradient
// buffers, or under create_graph those recorded ops. Reads x and w, not b.
Tensor conv_op(const Tensor& x, const Tensor& w, const Tensor& b, const ConvGeom& g,
               const char* op) {
  ScopedOpTimer op_timer(OpFamily::matmul);
  const Tensor X = kernel_input(x), Wt = kernel_input(w), B = b.defined() ? kernel_input(b) : b;
  Tensor y = Tensor::empty({g.N, g.O, g.Ho, g.Wo}, x.dtype());
  if (y.numel() > 0)
    dispatch_float(x.dtype(), op, [&]<class T>() {
      conv2d_forward<T>(y.data<T>(), X.data<T>(), Wt.data<T>(), B.defined() ? B.data<T>() : nullptr,
                        g);
    });
  if (should_record({x, w, b}))
    record(op, {x, w, b}, y,
           [x, w, b, X, Wt, g, op](const Tensor& gy) {  // the kernels add into the gradients
             const Tensor GY = gy.contiguous();
             dispatch_float(GY.dtype(), op, [&]<class T>() {
               T* dx = x.requires_grad() && x.numel() > 0 ? grad_ptr<T>(x, op) : nullptr;
               T* dw = w.requires_grad() && w.numel() > 0 ? grad_ptr<T>(w, op) : nullptr;
               T* db = b.defined() && b.requires_grad() ? grad_ptr<T>(b, op) : nullptr;
               if (GY.numel() > 0)
                 conv2d_backward<T>(dx, dw, db, X.data<T>(), GY.data<T>(), Wt.data<T>(), g);
               for (const Tensor& t : {x, w, b})  // an empty gy still leaves zero gradients
                 if (t.defined() && t.requires_grad()) grad_of(t);
             });
           })
        .saves({x, w})
        .differentiable([x, w, b, g](const Tensor& gy, const Tensor&) {  // the same, recorded
          if (x.requires_grad())
            accumulate_grad(x, conv_input_grad_op(gy, w, g, "conv2d_input_grad"));
          if (w.requires_grad()) accumulate_grad(w, conv_weight_grad_op(x, gy, g));
          if (b.defined() && b.requires_grad()) accumulate_grad(b, sum(gy, {0, 2, 3}));
        });
  return y;
}

// dx [N, C, H, W] = the input gradient of conv(·, w) at dy [N, O, Ho, Wo] (conv_transpose2d's
// forward). Linear in dy and in w: backward d(dy) = conv(h, w), dw = conv_weight_grad(h, dy).
Tensor conv_input_grad_op(const Tensor& dy, const Tensor& w, const ConvGeom& g, const char* op) {
  ScopedOpTimer op_timer(OpFamily::matmul);
  const Tensor DY = kernel_input(dy), Wt = kernel_input(w);
  Tensor dx = Tensor::zeros({g.N, g.C, g.H, g.W}, dy.dtype());
  if (dx.numel() > 0 && dy.numel() > 0)
    dispatch_float(dy.dtype(), op, [&]<class T>() {
      conv2d_backward_input<T>(dx.data<T>(), DY.data<T>(), Wt.data<T>(), g);
    });
  if (should_record({dy, w}))
    record(op, {dy, w}, dx,
           [dy, w, g](const Tensor& h) {
             if (dy.requires_grad()) accumulate_grad(dy, conv_op(h, w, Tensor(), g, "conv2d"));
             if (w.requires_grad()) accumulate_grad(w, conv_weight_grad_op(h, dy, g));
           })
        .saves({dy, w})
        .composed();
  return dx;
}

// dw [O, C/groups, kH, kW] = Σ_n dy_n ⋆ x_n, the weight gradient of conv(x, ·) at dy. Linear in x
// and in dy: backward dx = conv_input_grad(dy, h), d(dy) = conv(x, h).
Tensor conv_weight_grad_op(const Tensor& x, const Tensor& dy, const ConvGeom& g) {
  ScopedOpTimer op_timer(OpFamily::matmul);
  const char* op = "conv2d_weight_grad";
  const Tensor X = kernel_input(x), DY = kernel_input(dy);
  Tensor dw = Tensor::zeros({g.O, g.Cg(), g.kH, g.kW}, x.dtype());
  if (dw.numel() > 0)
    dispatch_float(x.dtype(), op, [&]<class T>() {
      conv2d_backward_weight<T>(dw.data<T>(), nullptr, X.data<T>(), DY.data<T>(), g);
    });
  if (should_record({x, dy}))
    record(op, {x, dy}, dw,
           [x, dy, g](const Tensor& h) {
             if (x.requires_grad())
               accumulate_grad(x, conv_input_grad_op(dy, h, g, "conv2d_input_grad"));
             if (dy.requires_grad()) accumulate_grad(dy, conv_op(x, h, Tensor(), g, "conv2d"));
           })
        .saves({x, dy})
        .composed();
  return dw;
}

// The checks conv2d and conv_transpose2d share: ranks, dtypes, groups and the bias.
void check_conv_args(const Tensor& x, const Tensor& w, const Tensor& b, int64_t groups,
                     int64_t out_channels, const char* op) {
  check_input(x, 4, op, "an input [N, C, H, W]");
  check_arg(w.defined() && w.dim() == 4, op, w, "a weight with 4 axes");
  check_same_dtype(x, w, op);
  if (groups < 1)
    throw std::invalid_argument(fmt::format("{}: groups must be >= 1, got {}", op, groups));
  if (x.size(1) % groups != 0 || out_channels % groups != 0)
    throw std::invalid_argument(fmt::format(
        "{}: input channels ({}) and output channels ({}) must both be divisible by groups ({}): "
        "input {}, weight {}",
        op, x.size(1), out_channels, groups, x.describe(), w.describe()));
  if (b.defined()) {
    check_arg(b.dim() == 1 && b.size(0) == out_channels, op, b,
              fmt::format("a bias [{}] (one per output channel)", out_channels));
    check_same_dtype(x, b, op);
  }
}

Tensor conv2d_impl(const Tensor& x, const Tensor& w, const Tensor& b, IntPair stride,
                   IntPair padding, IntPair dilation, int64_t groups, const char* op) {
  check_arg(w.defined() && w.dim() == 4, op, w, "a weight [O, C/groups, kH, kW]");
  check_conv_args(x, w, b, groups, w.size(0), op);
  check_pair(stride, 1, op, "stride");
  check_pair(padding, 0, op, "padding");
  check_pair(dilation, 1, op, "dilation");
  const int64_t C = x.size(1);
  check_arg(w.size(1) * groups == C, op, w,
            fmt::format("a weight [O, {}, kH, kW] for input {} with groups = {}", C / groups,
                        x.describe(), groups));
  ConvGeom g{x.size(0),   C,         x.size(2), x.size(3),  w.size(0),  w.size(2),
             w.size(3),   stride[0], stride[1], padding[0], padding[1], dilation[0],
             dilation[1], groups,    0,         0};
  g.Ho = conv_out(g.H, g.kH, g.sH, g.pH, g.dH, op, x, w);
  g.Wo = conv_out(g.W, g.kW, g.sW, g.pW, g.dW, op, x, w);
  return conv_op(x, w, b, g, op);
}
}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntPair stride,
              IntPair padding, IntPair dilation, int64_t groups) {
  Tensor y = conv2d_impl(x, weight, bias, stride, padding, dilation, groups, "conv2d");
  if (tracing())
    trace_op("conv2d", {x, weight, bias}, {y},
             {{"stride", std::vector<int64_t>{stride[0], stride[1]}},
              {"padding", std::vector<int64_t>{padding[0], padding[1]}},
              {"dilation", std::vector<int64_t>{dilation[0], dilation[1]}},
              {"groups", groups}});
  return y;
}

// x [N, C, L] and weight [O, C/groups, k] as conv2d's [N, C, 1, L] and [O, C/groups, 1, k].
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding, int64_t dilation, int64_t groups) {
  const char* op = "conv1d";
  check_input(x, 3, op, "an input [N, C, L]");
  check_arg(weight.defined() && weight.dim() == 3, op, weight, "a weight [O, C/groups, k]");
  const Tensor y = conv2d_impl(reshape(x, {x.size(0), x.size(1), 1, x.size(2)}),
                               reshape(weight, {weight.size(0), weight.size(1), 1, weight.size(2)}),
                               bias, {1, stride}, {0, padding}, {1, dilation}, groups, op);
  Tensor out = reshape(y, {y.size(0), y.size(1), y.size(3)});
  if (tracing())
    trace_op(op, {x, weight, bias}, {out},
             {{"stride", std::vector<int64_t>{stride}},
              {"padding", std::vector<int64_t>{padding}},
              {"dilation", std::vector<int64_t>{dilation}},
              {"groups", groups}});
  return out;
}

// x [N, Cin, H, W], weight [Cin, O/groups, kH, kW] -> [N, O, Hout, Wout] with
// Hout = (H − 1)·s − 2p + d(kH − 1) + output_padding + 1: the input gradient of the conv2d that
// maps [N, O, Hout, Wout] to x's shape (torch's F.conv_transpose2d), plus the bias.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntPair stride,
                        IntPair padding, IntPair output_padding, int64_t groups, IntPair dilation) {
  const char* op = "conv_transpose2d";
  check_arg(weight.defined() && weight.dim() == 4, op, weight, "a weight [Cin, O/groups, kH, kW]");
  check_conv_args(x, weight, bias, groups, weight.size(1) * groups, op);
  check_pair(stride, 1, op, "stride");
  check_pair(padding, 0, op, "padding");
  check_pair(dilation, 1, op, "dilation");
  check_pair(output_padding, 0, op, "output_padding");
  check_arg(weight.size(0) == x.size(1), op, weight,
            fmt::format("a weight [{}, O/groups, kH, kW] for input {}", x.size(1), x.describe()));
  for (int a : {0, 1})
    if (output_padding[a] >= stride[a] && output_padding[a] >= dilation[a])
      throw std::invalid_argument(
          fmt::format("{}: output_padding {} must be smaller than stride {} or dilation {}", op,
                      pair_str(output_padding), pair_str(stride), pair_str(dilation)));
  ConvGeom g{x.size(0),
             weight.size(1) * groups,
             0,
             0,
             x.size(1),
             weight.size(2),
             weight.size(3),
             stride[0],
             stride[1],
             padding[0],
             padding[1],
             dilation[0],
             dilation[1],
             groups,
             x.size(2),
             x.size(3)};
  g.H = (g.Ho - 1) * g.sH - 2 * g.pH + g.dH * (g.kH - 1) + output_padding[0] + 1;
  g.W = (g.Wo - 1) * g.sW - 2 * g.pW + g.dW * (g.kW - 1) + output_padding[1] + 1;
  if (g.H < 1 || g.W < 1)
    throw std::invalid_argument(
        fmt::format("{}: output size ({}, {}) is below 1: input {}, weight {}", op, g.H, g.W,
                    x.describe(), weight.describe()));
  const Tensor y = conv_input_grad_op(x, weight, g, op);
  Tensor out = bias.defined() ? add(y, reshape(bias, {1, g.C, 1, 1})) : y;
  if (tracing())
    trace_op(op, {x, weight, bias}, {out},
             {{"stride", std::vector<int64_t>{stride[0], stride[1]}},
              {"padding", std::vector<int64_t>{padding[0], padding[1]}},
              {"output_padding", std::vector<int64_t>{output_padding[0], output_padding[1]}},
              {"dilation", std::vector<int64_t>{dilation[0], dilation[1]}},
              {"groups", groups}});
  return out;
}

// ---- pooling ------------------------------------------------------------------------------------
namespace {
// One axis of a pool's output (torch's pooling_output_shape): floor or ceil of
// (in + 2p − d(k − 1) − 1) / s, plus 1; with ceil_mode the last window must start inside the input
// or its left padding. Refused below 1.
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode,
                 const char* op, const Tensor& x) {
  const int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  if (out < 1)
    throw std::invalid_argument(fmt::format(
        "{}: output size {} is below 1 (kernel {}, dilation {}, padding {}) for input {}", op, out,
        k, d, p, x.describe()));
  return out;
}

// dx [N, C, H, W] = gy [N, C, Ho, Wo] added at the indices of each window's max: max pooling's
// backward as a recorded op (for create_graph). Linear in gy; its backward gathers h at the
// indices (a recorded gather, so higher derivatives follow).
Tensor max_pool_scatter_op(const Tensor& gy, const Tensor& indices, const PoolGeom& g,
                           const Shape& x_shape) {
  const char* op = "max_pool2d_backward";
  const int64_t N = x_shape[0], C = x_shape[1], HW = g.H * g.W, HoWo = g.Ho * g.Wo;
  const Tensor GY = kernel_input(gy);
  Tensor dx = Tensor::zeros(x_shape, gy.dtype());
  if (GY.numel() > 0)
    dispatch_float(gy.dtype(), op, [&]<class T>() {
      max_pool2d_backward<T>(dx.data<T>(), GY.data<T>(), indices.data<int64_t>(), N * C, HW, HoWo);
    });
  if (should_record({gy}))
    record(op, {gy}, dx,
           [gy, indices, N, C, HW, HoWo](const Tensor& h) {
             accumulate_grad(
                 gy, reshape(gather(reshape(h, {N, C, HW}), 2, reshape(indices, {N, C, HoWo})),
                             gy.shape()));
           })
        .saves({})
        .composed();
  return dx;
}

// The geometry of a pool over x [N, C, H, W], after the checks both pools share.
PoolGeom pool_geom(const Tensor& x, IntPair kernel, IntPair& stride, IntPair padding,
                   IntPair dilation, bool ceil_mode, const char* op) {
  check_input(x, 4, op, "an input [N, C, H, W]");
  check_pair(kernel, 1, op, "kernel_size");
  if (stride[0] == 0 && stride[1] == 0) stride = kernel;  // torch: stride defaults to the kernel
  check_pair(stride, 1, op, "stride");
  check_pair(padding, 0, op, "padding");
  check_pair(dilation, 1, op, "dilation");
  if (padding[0] > kernel[0] / 2 || padding[1] > kernel[1] / 2)
    throw std::invalid_argument(fmt::format("{}: padding {} must be at most half of kernel_size {}",
                                            op, pair_str(padding), pair_str(kernel)));
  PoolGeom g{x.size(2), x.size(3), 0,          0,          kernel[0],   kernel[1],
             stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1]};
  g.Ho = pool_out(g.H, g.kH, g.sH, g.pH, g.dH, ceil_mode, op, x);
  g.Wo = pool_out(g.W, g.kW, g.sW, g.pW, g.dW, ceil_mode, op, x);
  return g;
}

// Window means of x [N, C, H, W] -> [N, C, Ho, Wo], or (adjoint) their adjoint [N, C, Ho, Wo] ->
// [N, C, H, W]. Each one's backward is the other; neither reads its input's values.
Tensor avg_windows_op(const Tensor& in, const std::shared_ptr<const PoolWindows>& w, bool adjoint,
                      const char* op, const char* adjoint_op) {
  const int64_t N = in.size(0), C = in.size(1), P = N * C;
  const Tensor X = kernel_input(in);
  Tensor out = adjoint ? Tensor::zeros({N, C, w->H, w->W}, in.dtype())
                       : Tensor::empty({N, C, w->Ho, w->Wo}, in.dtype());
  if (out.numel() > 0)
    dispatch_float(in.dtype(), op, [&]<class T>() {
      if (adjoint)
        avg_pool2d_backward<T>(out.data<T>(), X.data<T>(), P, *w);
      else
        avg_pool2d_forward<T>(out.data<T>(), X.data<T>(), P, *w);
    });
  if (should_record({in}))
    record(adjoint ? adjoint_op : op, {in}, out,
           [in, w, adjoint, op, adjoint_op](const Tensor& g) {
             accumulate_grad(in, avg_windows_op(g, w, !adjoint, op, adjoint_op));
           })
        .saves({})
        .composed();
  return out;
}
}  // namespace

ValuesAndIndices max_pool2d_with_indices(const Tensor& x, IntPair kernel, IntPair stride,
                                         IntPair padding, IntPair dilation, bool ceil_mode) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "max_pool2d";
  const PoolGeom g = pool_geom(x, kernel, stride, padding, dilation, ceil_mode, op);
  const int64_t N = x.size(0), C = x.size(1);
  const Tensor X = kernel_input(x);
  Tensor values = Tensor::empty({N, C, g.Ho, g.Wo}, x.dtype());
  Tensor indices = Tensor::empty({N, C, g.Ho, g.Wo}, DType::i64);
  if (values.numel() > 0)
    dispatch_float(x.dtype(), op, [&]<class T>() {
      max_pool2d_forward<T>(values.data<T>(), indices.data<int64_t>(), X.data<T>(), N * C, g);
    });
  if (tracing())
    trace_op(op, {x}, {values, indices},
             {{"kernel", std::vector<int64_t>{kernel[0], kernel[1]}},
              {"stride", std::vector<int64_t>{g.sH, g.sW}},
              {"padding", std::vector<int64_t>{padding[0], padding[1]}},
              {"dilation", std::vector<int64_t>{dilation[0], dilation[1]}},
              {"ceil_mode", ceil_mode}});
  if (should_record({x}))
    record(op, {x}, values,
           [x, indices, g, op](const Tensor& gy) {  // the kernel adds gy at the argmax
             const Tensor GY = gy.contiguous();
             GradSink sink(x);  // a fresh gradient is zeroed plane by plane, in parallel
             dispatch_float(x.dtype(), op, [&]<class T>() {
               max_pool2d_backward<T>(sink.data<T>(), GY.data<T>(), indices.data<int64_t>(),
                                      x.size(0) * x.size(1), g.H * g.W, g.Ho * g.Wo, sink.fresh);
             });
             sink.finish();
           })
        .saves({})  // reads only the indices, which it holds
        .differentiable([x, indices, g](const Tensor& gy, const Tensor&) {
          accumulate_grad(x, max_pool_scatter_op(gy, indices, g, x.shape()));
        });
  return {values, indices};
}

// torch's F.max_pool2d without return_indices: the values alone (the indices are computed and
// dropped; they are what the backward scatters to).
Tensor max_pool2d(const Tensor& x, IntPair kernel, IntPair stride, IntPair padding,
                  IntPair dilation, bool ceil_mode) {
  return max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode).values;
}

Tensor avg_pool2d(const Tensor& x, IntPair kernel, IntPair stride, IntPair padding, bool ceil_mode,
                  bool count_include_pad) {
  ScopedOpTimer op_timer(OpFamily::other);
  const PoolGeom g = pool_geom(x, kernel, stride, padding, {1, 1}, ceil_mode, "avg_pool2d");
  Tensor y =
      avg_windows_op(x, std::make_shared<const PoolWindows>(avg_pool_windows(g, count_include_pad)),
                     false, "avg_pool2d", "avg_pool2d_backward");
  if (tracing())
    trace_op("avg_pool2d", {x}, {y},
             {{"kernel", std::vector<int64_t>{kernel[0], kernel[1]}},
              {"stride", std::vector<int64_t>{g.sH, g.sW}},
              {"padding", std::vector<int64_t>{padding[0], padding[1]}},
              {"ceil_mode", ceil_mode},
              {"count_include_pad", count_include_pad}});
  return y;
}

Tensor adaptive_avg_pool2d(const Tensor& x, IntPair output_size) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "adaptive_avg_pool2d";
  check_input(x, 4, op, "an input [N, C, H, W]");
  check_pair(output_size, 1, op, "output_size");
  const auto w = std::make_shared<const PoolWindows>(
      adaptive_pool_windows(x.size(2), x.size(3), output_size[0], output_size[1]));
  Tensor y = avg_windows_op(x, w, false, op, "adaptive_avg_pool2d_backward");
  if (tracing())
    trace_op(op, {x}, {y}, {{"output_size", std::vector<int64_t>{output_size[0], output_size[1]}}});
  return y;
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) -----------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

// data table: the conv family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> conv_op_cases() {
  // x, weight (and bias when bias_size > 0), seeds fixed per row
  auto conv_in = [](Shape sx, Shape sw, int64_t bias_size) {
    return [=] {
      std::vector<Tensor> in{random_tensor(sx, 41).set_name("x"),
                             random_tensor(sw, 42).set_name("weight")};
      if (bias_size > 0) in.push_back(random_tensor({bias_size}, 43).set_name("bias"));
      return in;
    };
  };
  auto one = [](Shape sx) {
    return [=] { return std::vector<Tensor>{random_tensor(sx, 44).set_name("x")}; };
  };
  using V = const std::vector<Tensor>&;
  return {
      {"conv2d/bias, padding 1", conv_in({2, 2, 4, 5}, {3, 2, 3, 3}, 3),
       [](V in) {
         return conv2d(in[0], in[1], in[2], {1, 1}, {1, 1});
       }},
      {"conv2d/no bias, stride (2, 1), padding (0, 2), dilation (2, 1)",
       conv_in({1, 2, 7, 5}, {2, 2, 2, 3}, 0),
       [](V in) {
         return conv2d(in[0], in[1], Tensor(), {2, 1}, {0, 2}, {2, 1});
       }},
      {"conv2d/groups 2, stride 2, padding 1", conv_in({2, 4, 4, 4}, {6, 2, 2, 2}, 6),
       [](V in) {
         return conv2d(in[0], in[1], in[2], {2, 2}, {1, 1}, {1, 1}, 2);
       }},
      {"conv2d/depthwise (groups = C)", conv_in({1, 3, 5, 5}, {3, 1, 3, 3}, 0),
       [](V in) {
         return conv2d(in[0], in[1], Tensor(), {1, 1}, {1, 1}, {1, 1}, 3);
       }},
      {"conv2d/1x1 (columns are the input)", conv_in({2, 3, 3, 4}, {4, 3, 1, 1}, 4),
       [](V in) { return conv2d(in[0], in[1], in[2]); }},
      {"conv2d/transposed-view input (copied)", conv_in({1, 2, 5, 4}, {2, 2, 2, 2}, 0),
       [](V in) { return conv2d(transpose(in[0], 2, 3), in[1]); }},
      {"conv1d/bias, stride 2, padding 1, dilation 2", conv_in({2, 3, 9}, {4, 3, 3}, 4),
       [](V in) { return conv1d(in[0], in[1], in[2], 2, 1, 2); }},
      {"conv_transpose2d/bias, groups 2, stride 2, output_padding 1",
       conv_in({1, 4, 3, 3}, {4, 2, 3, 2}, 4),
       [](V in) {
         return conv_transpose2d(in[0], in[1], in[2], {2, 2}, {1, 0}, {1, 1}, 2);
       }},
      {"conv_transpose2d/no bias, dilation 2, output_padding 1 >= stride",
       conv_in({2, 2, 3, 4}, {2, 3, 2, 2}, 0),
       [](V in) {
         return conv_transpose2d(in[0], in[1], Tensor(), {1, 1}, {0, 1}, {1, 0}, 1, {2, 2});
       }},
      {"max_pool2d/2x2", one({2, 2, 4, 4}),
       [](V in) {
         return max_pool2d(in[0], {2, 2});
       }},
      {"max_pool2d/3x3, stride 2, padding 1, ceil_mode", one({1, 2, 6, 5}),
       [](V in) {
         return max_pool2d_with_indices(in[0], {3, 3}, {2, 2}, {1, 1}, {1, 1}, true).values;
       }},
      {"max_pool2d/dilation 2, stride 1", one({1, 1, 6, 7}),
       [](V in) {
         return max_pool2d(in[0], {2, 2}, {1, 1}, {0, 0}, {2, 2});
       }},
      {"avg_pool2d/3x3, stride 2, padding 1, ceil_mode, count_include_pad", one({1, 2, 6, 5}),
       [](V in) {
         return avg_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}, true, true);
       }},
      {"avg_pool2d/3x3, stride 2, padding 1, ceil_mode, pad not counted", one({1, 2, 6, 5}),
       [](V in) {
         return avg_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}, true, false);
       }},
      {"avg_pool2d/(2, 3), default stride", one({2, 1, 4, 6}),
       [](V in) {
         return avg_pool2d(in[0], {2, 3});
       }},
      {"adaptive_avg_pool2d/5x7 -> 3x4 (overlapping windows)", one({1, 2, 5, 7}),
       [](V in) {
         return adaptive_avg_pool2d(in[0], {3, 4});
       }},
      {"adaptive_avg_pool2d/global (1x1)", one({2, 3, 3, 4}),
       [](V in) {
         return adaptive_avg_pool2d(in[0], {1, 1});
       }},
  };
}

}  // namespace dg
