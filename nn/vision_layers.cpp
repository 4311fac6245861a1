// Convolution, pooling, flatten and batch/group norm layers (see vision_layers.h). Holds no
// kernels and no gradients: the forwards compose ops from autograd/ops.h.
#include "nn/vision_layers.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "nn/init.h"

namespace dg {

namespace {
// torch's _ConvNd checks and reset_parameters: weight kaiming_uniform_(a = √5), i.e.
// U(−1/√fan_in, 1/√fan_in) with fan_in = weight.size(1)·Πkernel, then the bias U(−b, b) with the
// same bound. Skipped under init::SkipGuard.
void check_conv_channels(const char* layer, int64_t in, int64_t out, int64_t groups) {
  if (in < 1 || out < 1 || groups < 1 || in % groups != 0 || out % groups != 0)
    throw std::invalid_argument(fmt::format(
        "{}: in_channels {} and out_channels {} must be positive and divisible by groups {}", layer,
        in, out, groups));
}
void init_conv(const Tensor& weight, const Tensor& bias) {
  if (init::skipping()) return;
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (!bias.defined()) return;
  const int64_t fan_in = init::calculate_fans(weight).fan_in;
  if (fan_in > 0) {
    const double bound = 1 / std::sqrt(static_cast<double>(fan_in));
    init::uniform_(bias, -bound, bound);
  }
}
}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, IntPair k, IntPair stride_, IntPair padding_,
               IntPair dilation_, int64_t groups_, bool with_bias, DType dtype)
    : Module(dtype), stride(stride_), padding(padding_), dilation(dilation_), groups(groups_) {
  check_conv_channels("Conv2d", in, out, groups);
  weight = register_parameter("weight", Tensor::zeros({out, in / groups, k[0], k[1]}, dtype));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({out}, dtype));
  init_conv(weight, bias);
}
Tensor Conv2d::forward(const Tensor& x) const {
  return hooked(
      [&](const Tensor& x) { return conv2d(x, weight, bias, stride, padding, dilation, groups); },
      x);
}

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, int64_t stride_, int64_t padding_,
               int64_t dilation_, int64_t groups_, bool with_bias, DType dtype)
    : Module(dtype), stride(stride_), padding(padding_), dilation(dilation_), groups(groups_) {
  check_conv_channels("Conv1d", in, out, groups);
  weight = register_parameter("weight", Tensor::zeros({out, in / groups, k}, dtype));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({out}, dtype));
  init_conv(weight, bias);
}
Tensor Conv1d::forward(const Tensor& x) const {
  return hooked(
      [&](const Tensor& x) { return conv1d(x, weight, bias, stride, padding, dilation, groups); },
      x);
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, IntPair k, IntPair stride_,
                                 IntPair padding_, IntPair output_padding_, int64_t groups_,
                                 bool with_bias, IntPair dilation_, DType dtype)
    : Module(dtype),
      stride(stride_),
      padding(padding_),
      output_padding(output_padding_),
      dilation(dilation_),
      groups(groups_) {
  check_conv_channels("ConvTranspose2d", in, out, groups);
  weight = register_parameter("weight", Tensor::zeros({in, out / groups, k[0], k[1]}, dtype));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({out}, dtype));
  init_conv(weight, bias);
}
Tensor ConvTranspose2d::forward(const Tensor& x) const {
  return hooked(
      [&](const Tensor& x) {
        return conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation);
      },
      x);
}

MaxPool2d::MaxPool2d(IntPair kernel_size_, IntPair stride_, IntPair padding_, IntPair dilation_,
                     bool ceil_mode_)
    : kernel_size(kernel_size_),
      stride(stride_),
      padding(padding_),
      dilation(dilation_),
      ceil_mode(ceil_mode_) {}
Tensor MaxPool2d::forward(const Tensor& x) const {
  return hooked(
      [&](const Tensor& x) {
        return max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
      },
      x);
}

AvgPool2d::AvgPool2d(IntPair kernel_size_, IntPair stride_, IntPair padding_, bool ceil_mode_,
                     bool count_include_pad_)
    : kernel_size(kernel_size_),
      stride(stride_),
      padding(padding_),
      ceil_mode(ceil_mode_),
      count_include_pad(count_include_pad_) {}
Tensor AvgPool2d::forward(const Tensor& x) const {
  return hooked(
      [&](const Tensor& x) {
        return avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
      },
      x);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(IntPair output_size_) : output_size(output_size_) {}
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) const {
  return hooked([&](const Tensor& x) { return adaptive_avg_pool2d(x, output_size); }, x);
}

Flatten::Flatten(int64_t start_dim_, int64_t end_dim_) : start_dim(start_dim_), end_dim(end_dim_) {}
Tensor Flatten::forward(const Tensor& x) const {
  return hooked([&](const Tensor& x) { return flatten(x, start_dim, end_dim); }, x);
}

// ---- BatchNorm ----------------------------------------------------------------------------------
BatchNorm::BatchNorm(int64_t num_features_, double eps_, std::optional<double> momentum_,
                     bool affine, bool track_running_stats, DType dtype)
    : Module(dtype), num_features(num_features_), eps(eps_), momentum(momentum_) {
  if (num_features < 1)
    throw std::invalid_argument(
        fmt::format("BatchNorm: num_features must be >= 1, got {}", num_features));
  if (affine) {
    weight = register_parameter("weight", Tensor::ones({num_features}, dtype));
    bias = register_parameter("bias", Tensor::zeros({num_features}, dtype));
  }
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", Tensor::zeros({num_features}, dtype));
    running_var = register_buffer("running_var", Tensor::ones({num_features}, dtype));
    num_batches_tracked = register_buffer("num_batches_tracked", Tensor::zeros({}, DType::i64));
  }
}

// torch's _BatchNorm.forward. One difference: torch adds one to num_batches_tracked before calling
// batch_norm, so a batch the op refuses (one value per channel) still counts; here it does not.
Tensor BatchNorm::normalize(const Tensor& x, bool relu) const {
  check_input(x);
  const bool tracking = running_mean.defined();
  const bool use_batch_stats = is_training() || !tracking;
  double factor = momentum.value_or(0.0);
  if (is_training() && tracking && !momentum)  // cumulative average over the batches seen
    factor = 1.0 / static_cast<double>(num_batches_tracked.data<int64_t>()[0] + 1);
  Tensor out = (relu ? batch_norm_relu : batch_norm)(x, running_mean, running_var, weight, bias,
                                                     use_batch_stats, factor, eps);
  if (is_training() && tracking) num_batches_tracked.mutable_data<int64_t>()[0] += 1;
  return out;
}

Tensor BatchNorm::forward(const Tensor& x) const {
  return hooked([&](const Tensor& x) { return normalize(x, false); }, x);
}

Tensor BatchNorm::forward_relu(const Tensor& x) const {
  if (has_forward_hooks()) return relu(forward(x));
  const CreationScope scope = creation_scope();
  return normalize(x, true);
}

std::unique_ptr<Conv2d> fuse_conv_bn_eval(const Conv2d& conv, const BatchNorm& bn) {
  const int64_t out = conv.weight.size(0);
  if (bn.is_training() || !bn.running_mean.defined())
    throw std::invalid_argument(
        "fuse_conv_bn_eval: the batch norm must be in eval mode with running statistics");
  if (bn.num_features != out)
    throw std::invalid_argument(fmt::format(
        "fuse_conv_bn_eval: the convolution has {} output channels, the batch norm {} features",
        out, bn.num_features));
  const Shape& ws = conv.weight.shape();
  auto fused = std::make_unique<Conv2d>(ws[1] * conv.groups, out, IntPair{ws[2], ws[3]},
                                        conv.stride, conv.padding, conv.dilation, conv.groups,
                                        /*with_bias=*/true, conv.weight.dtype());
  NoGradGuard no_grad;
  const DType dt = conv.weight.dtype();
  const Tensor gamma = bn.weight.defined() ? bn.weight : Tensor::ones({out}, dt);
  const Tensor beta = bn.bias.defined() ? bn.bias : Tensor::zeros({out}, dt);
  const Tensor b = conv.bias.defined() ? conv.bias : Tensor::zeros({out}, dt);
  const Tensor var_rsqrt = rsqrt(add_scalar(bn.running_var, bn.eps));
  fused->weight.copy_from(mul(conv.weight, reshape(mul(gamma, var_rsqrt), {out, 1, 1, 1})));
  fused->bias.copy_from(add(mul(mul(sub(b, bn.running_mean), var_rsqrt), gamma), beta));
  return fused;
}

void BatchNorm1d::check_input(const Tensor& x) const {
  if (x.dim() != 2 && x.dim() != 3)
    throw std::invalid_argument(
        fmt::format("BatchNorm1d: expected x of shape [N, C] or [N, C, L], got {}", x.describe()));
}
void BatchNorm2d::check_input(const Tensor& x) const {
  if (x.dim() != 4)
    throw std::invalid_argument(
        fmt::format("BatchNorm2d: expected x of shape [N, C, H, W], got {}", x.describe()));
}

GroupNorm::GroupNorm(int64_t num_groups_, int64_t num_channels_, double eps_, bool affine,
                     DType dtype)
    : Module(dtype), num_groups(num_groups_), num_channels(num_channels_), eps(eps_) {
  if (num_groups < 1 || num_channels < 1 || num_channels % num_groups != 0)
    throw std::invalid_argument(
        fmt::format("GroupNorm: num_channels {} must be divisible by num_groups {} (both >= 1)",
                    num_channels, num_groups));
  if (affine) {
    weight = register_parameter("weight", Tensor::ones({num_channels}, dtype));
    bias = register_parameter("bias", Tensor::zeros({num_channels}, dtype));
  }
}
Tensor GroupNorm::forward(const Tensor& x) const {
  return hooked([&](const Tensor& x) { return group_norm(x, num_groups, weight, bias, eps); }, x);
}

// ---- torch's extra_repr texts ------------------------------------------------------------------
namespace {
std::string tuple(IntPair p) { return fmt::format("({}, {})", p[0], p[1]); }
// A pool's size: torch prints what was given (2 or (2, 3)); an IntPair cannot tell, so an equal
// pair prints as one int (MaxPool2d(2) -> kernel_size=2) and a pair otherwise.
std::string int_or_tuple(IntPair p) { return p[0] == p[1] ? fmt::format("{}", p[0]) : tuple(p); }
// torch's _ConvNd.extra_repr from the shapes and settings (tuples of `dims` entries).
std::string conv_repr(int64_t in, int64_t out, const std::vector<int64_t>& kernel,
                      const std::vector<IntPair>& settings, bool bias, int64_t groups, int dims) {
  auto tup = [&](const std::vector<int64_t>& v) {
    return dims == 1 ? fmt::format("({},)", v[0]) : fmt::format("({}, {})", v[0], v[1]);
  };
  auto pair = [&](IntPair p) { return tup({p[0], p[1]}); };
  std::string s =
      fmt::format("{}, {}, kernel_size={}, stride={}", in, out, tup(kernel), pair(settings[0]));
  const char* names[] = {"padding", "dilation", "output_padding"};
  const int64_t defaults[] = {0, 1, 0};
  for (size_t i = 1; i < settings.size(); ++i)
    if (settings[i][0] != defaults[i - 1] || (dims == 2 && settings[i][1] != defaults[i - 1]))
      s += fmt::format(", {}={}", names[i - 1], pair(settings[i]));
  if (groups != 1) s += fmt::format(", groups={}", groups);
  if (!bias) s += ", bias=False";
  return s;
}
}  // namespace

std::string Conv2d::extra_repr() const {
  return conv_repr(weight.size(1) * groups, weight.size(0), {weight.size(2), weight.size(3)},
                   {stride, padding, dilation}, bias.defined(), groups, 2);
}
std::string Conv1d::extra_repr() const {
  return conv_repr(weight.size(1) * groups, weight.size(0), {weight.size(2)},
                   {stride, padding, dilation}, bias.defined(), groups, 1);
}
std::string ConvTranspose2d::extra_repr() const {
  return conv_repr(weight.size(0), weight.size(1) * groups, {weight.size(2), weight.size(3)},
                   {stride, padding, dilation, output_padding}, bias.defined(), groups, 2);
}
std::string MaxPool2d::extra_repr() const {
  const IntPair s = stride[0] == 0 && stride[1] == 0 ? kernel_size : stride;
  return fmt::format("kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={}",
                     int_or_tuple(kernel_size), int_or_tuple(s), int_or_tuple(padding),
                     int_or_tuple(dilation), repr_bool(ceil_mode));
}
std::string AvgPool2d::extra_repr() const {
  const IntPair s = stride[0] == 0 && stride[1] == 0 ? kernel_size : stride;
  return fmt::format("kernel_size={}, stride={}, padding={}", int_or_tuple(kernel_size),
                     int_or_tuple(s), int_or_tuple(padding));
}
std::string AdaptiveAvgPool2d::extra_repr() const {
  return "output_size=" + int_or_tuple(output_size);
}
std::string Flatten::extra_repr() const {
  return fmt::format("start_dim={}, end_dim={}", start_dim, end_dim);
}
std::string BatchNorm::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features,
                     repr_float(eps), momentum ? repr_float(*momentum) : "None",
                     repr_bool(weight.defined()), repr_bool(running_mean.defined()));
}
std::string GroupNorm::extra_repr() const {
  return fmt::format("{}, {}, eps={}, affine={}", num_groups, num_channels, repr_float(eps),
                     repr_bool(weight.defined()));
}

}  // namespace dg
