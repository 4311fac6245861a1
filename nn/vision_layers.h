// The layers of convolutional networks, as torch.nn's: Conv1d, Conv2d, ConvTranspose2d, MaxPool2d,
// AvgPool2d, AdaptiveAvgPool2d, Flatten, BatchNorm1d, BatchNorm2d and GroupNorm. Parameter and
// buffer names are torch's (weight, bias, running_mean, running_var, num_batches_tracked), so a
// torch state dict loads; convolutions start as torch's (weight and bias U(−1/√fan_in, 1/√fan_in),
// drawn from dg::default_generator()). Each forward composes ops from autograd/ops.h through
// hooked(). Refuses what the ops refuse: string padding ('same'), padding modes other than zeros,
// unbatched inputs; there is no SyncBatchNorm (see BatchNorm below on data parallelism).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include "autograd/ops.h"
#include "nn/module.h"

namespace dg {

// x [N, in, H, W] -> [N, out, Ho, Wo] (conv2d's shapes); weight [out, in/groups, kH, kW], bias
// [out].
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, IntPair kernel_size, IntPair stride = {1, 1},
         IntPair padding = {0, 0}, IntPair dilation = {1, 1}, int64_t groups = 1,
         bool with_bias = true, DType dtype = get_default_dtype());
  Tensor forward(const Tensor& x) const override;
  std::string extra_repr() const override;  // torch's text
  Tensor weight, bias;                      // bias undefined without one
  IntPair stride, padding, dilation;
  int64_t groups;
};

// x [N, in, L] -> [N, out, Lo]; weight [out, in/groups, k], bias [out].
class Conv1d : public Module {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1, bool with_bias = true,
         DType dtype = get_default_dtype());
  Tensor forward(const Tensor& x) const override;
  std::string extra_repr() const override;  // torch's text
  Tensor weight, bias;
  int64_t stride, padding, dilation, groups;
};

// x [N, in, H, W] -> [N, out, Ho, Wo], Ho = (H − 1)·s − 2p + d(kH − 1) + output_padding + 1;
// weight [in, out/groups, kH, kW] (torch's layout), bias [out]. Arguments in torch's order.
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, IntPair kernel_size,
                  IntPair stride = {1, 1}, IntPair padding = {0, 0},
                  IntPair output_padding = {0, 0}, int64_t groups = 1, bool with_bias = true,
                  IntPair dilation = {1, 1}, DType dtype = get_default_dtype());
  Tensor forward(const Tensor& x) const override;
  std::string extra_repr() const override;  // torch's text
  Tensor weight, bias;
  IntPair stride, padding, output_padding, dilation;
  int64_t groups;
};

// The pools hold no parameters; stride {0, 0} means the kernel size (torch's None).
class MaxPool2d : public Module {  // the values only (max_pool2d_with_indices gives both)
 public:
  MaxPool2d(IntPair kernel_size, IntPair stride = {0, 0}, IntPair padding = {0, 0},
            IntPair dilation = {1, 1}, bool ceil_mode = false);
  Tensor forward(const Tensor& x) const override;  // [N, C, H, W] -> [N, C, Ho, Wo]
  std::string extra_repr() const override;         // torch's text
  IntPair kernel_size, stride, padding, dilation;
  bool ceil_mode;
};
class AvgPool2d : public Module {
 public:
  AvgPool2d(IntPair kernel_size, IntPair stride = {0, 0}, IntPair padding = {0, 0},
            bool ceil_mode = false, bool count_include_pad = true);
  Tensor forward(const Tensor& x) const override;  // [N, C, H, W] -> [N, C, Ho, Wo]
  std::string extra_repr() const override;         // torch's text
  IntPair kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(IntPair output_size);
  Tensor forward(const Tensor& x) const override;  // [N, C, H, W] -> [N, C, output_size]
  std::string extra_repr() const override;         // torch's text
  IntPair output_size;
};

// Flattens dims start_dim..end_dim into one (torch.nn.Flatten: start_dim 1 keeps the batch).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor forward(const Tensor& x) const override;
  std::string extra_repr() const override;  // torch's text
  int64_t start_dim, end_dim;
};

// torch.nn.BatchNorm1d/2d: per-channel normalisation by the batch's statistics while training,
// by the running statistics in eval (module.eval()). Parameters weight (ones) and bias (zeros)
// when affine; buffers running_mean (zeros), running_var (ones) and num_batches_tracked (int64
// scalar) when track_running_stats. A training forward adds one to num_batches_tracked and moves
// the running statistics by `momentum`, or, with momentum std::nullopt (torch's None), to the
// cumulative average over the num_batches_tracked batches seen. Without track_running_stats the
// batch statistics are used in eval as well. Under data parallelism each rank normalises by its
// own micro-batch and updates its own running statistics (torch's DDP without SyncBatchNorm); a
// checkpoint holds rank 0's (train/trainer.cpp).
class BatchNorm : public Module {
 public:
  BatchNorm(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
            bool affine = true, bool track_running_stats = true, DType dtype = get_default_dtype());
  Tensor forward(const Tensor& x) const override;  // x [N, C, *] -> [N, C, *]
  // relu(forward(x)) as one op (batch_norm_relu: one pass each way, the same bits as the two);
  // with forward hooks registered, forward(x) with its hooks, then relu. Sequential calls it for
  // a BatchNorm followed by ReLU.
  Tensor forward_relu(const Tensor& x) const;
  std::string extra_repr() const override;  // torch's text
  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  Tensor weight, bias;                                    // [C], undefined unless affine
  Tensor running_mean, running_var, num_batches_tracked;  // [C], [C], [] int64

 protected:
  // The input ranks this layer accepts (torch's _check_input_dim) and how to name them.
  virtual void check_input(const Tensor& x) const = 0;

 private:
  Tensor normalize(const Tensor& x, bool relu) const;  // forward's body, relu fused or not
};
class BatchNorm1d : public BatchNorm {  // x [N, C] or [N, C, L]
 public:
  using BatchNorm::BatchNorm;

 protected:
  void check_input(const Tensor& x) const override;
};
class BatchNorm2d : public BatchNorm {  // x [N, C, H, W]
 public:
  using BatchNorm::BatchNorm;

 protected:
  void check_input(const Tensor& x) const override;
};

// torch.nn.utils.fuse_conv_bn_eval: a new Conv2d that computes bn(conv(x)) as eval mode does, the
// batch norm's running statistics and affine folded into the weight and bias (torch's formula:
// w·(γ·rsqrt(var + eps)) per output channel, (b − mean)·rsqrt(var + eps)·γ + β), for inference
// and export; one convolution instead of a convolution and a batch-norm pass. Equal to the pair
// up to rounding (the folded weights are rounded once). Refuses a batch norm in training mode or
// without running statistics, and channel counts that differ, naming both (torch also asserts
// the convolution is in eval mode; a convolution's mode changes nothing, so it is not checked).
std::unique_ptr<Conv2d> fuse_conv_bn_eval(const Conv2d& conv, const BatchNorm& bn);

// torch.nn.GroupNorm: x [N, C, *] normalised per sample over each of num_groups groups of
// channels, then weight (ones) and bias (zeros) per channel when affine.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true,
            DType dtype = get_default_dtype());
  Tensor forward(const Tensor& x) const override;
  std::string extra_repr() const override;  // torch's text
  int64_t num_groups, num_channels;
  double eps;
  Tensor weight, bias;
};

}  // namespace dg
