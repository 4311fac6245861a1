// torchvision's everyday transforms (torchvision.transforms 0.14) as dg::transforms::Transform
// values, named and configured as torchvision's, and their deterministic functional forms
// (torchvision.transforms.functional) in dg::transforms::functional.
//
//   namespace T = dg::transforms;
//   T::Transform train = T::Compose({T::ToTensor(), T::RandomCrop(28, {.padding = 4}),
//                                    T::RandomHorizontalFlip(), T::Normalize({0.286}, {0.353})});
//   dg::Tensor x = train(image_u8_chw, rng);   // rng: the example's ExampleRng (example.h)
//
// Images are tensors [C, H, W] or batches [..., C, H, W] (every transform here takes both; [H, W]
// is refused, where torchvision's geometry functions take it) of dtype uint8 (0..255) or
// float32/float64 (0..1). Semantics are torchvision 0.14's TENSOR path (the functions used on
// torchvision.io.read_image's output), checked against goldens made with torchvision in
// tests/test_transforms.cpp (tools/torch_goldens_transforms.py). Where torchvision's PIL path
// differs: PIL's Resize antialiases and rounds in fixed point (the tensor path, and ours,
// interpolate without antialiasing in float and round half to even on uint8); PIL's ColorJitter
// works on 8-bit channels with its own rounding.
//
// Random choices: a transform draws from the ExampleRng it is given, never from a global generator,
// so the same (seed, epoch, index) gives the same output on any loader worker. Given a batch, a
// random transform makes one draw for all of it (as torchvision's on a batched tensor): per-example
// augmentation runs in MapDataset::get, one example at a time. torchvision draws
// from torch's generator: the draws cannot match it one for one, so the random transforms match it
// in distribution (the same ranges and the same algorithms, e.g. RandomResizedCrop's ten tries and
// central fallback); the functional forms take the parameters and match torchvision's outputs:
// bit for bit, except resize on float32 (within 1e-6) and uint8 (within one unit, rarely).
//
// Bad input (a wrong rank or dtype, a crop larger than the image, a bad probability, a size below
// one, a channel count Normalize was not given) throws std::invalid_argument naming the transform
// (its repr) and what is wrong. The transforms run on loader worker threads, several at once: plain
// loops over the tensors' memory, no OpenMP, nothing recorded on the autograd tape (inputs are
// read through detach()).
//
// Where ours differs from torchvision on purpose:
//   - ToTensor takes the decoded uint8 tensor [C, H, W] (torchvision's takes a PIL image or an HWC
//     array); [H, W] becomes [1, H, W]; a float tensor passes through unchanged, as torchvision's
//     float array does.
//   - ConvertImageDtype, convert_image_dtype: uint8, float32 and float64 only. Its repr names the
//     dtype ("ConvertImageDtype(dtype=torch.float32)"; torchvision's prints "ConvertImageDtype()").
//   - RandomResizedCrop's repr drops torchvision's stray ")" after the interpolation.
//   - crop() outside the image pads with zeros as torchvision's for a crop partly outside; a crop
//     wholly above or left of the image (where torchvision's slicing wraps) is zeros too.
//   - pad() pads the last two axes of any batch in every mode (torchvision's symmetric mode takes
//     3-d or 4-d tensors only; its 5-d edge/reflect pads three axes).
//   - erase() refuses a region outside the image (torchvision's slicing clips it silently).
//   - Resize has no antialias option (torchvision 0.14's tensor default, antialias off, is ours).
//   - ColorJitter refuses a hue spread above 0.5 when it is made (torchvision's fails on the first
//     image).
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "train/data/transform.h"

namespace dg::transforms {

enum class Interpolation { bilinear, nearest };  // InterpolationMode.BILINEAR, .NEAREST
enum class PaddingMode { constant, edge, reflect, symmetric };

// An output size (height, width): one number is a square, as torchvision's size=28.
struct Size {
  Size(int64_t side) : height(side), width(side) {}  // NOLINT: implicit, as torchvision's int
  Size(int64_t h, int64_t w) : height(h), width(w) {}
  int64_t height, width;
};

// Padding as torchvision's: one number for every side, two for (left/right, top/bottom), four for
// (left, top, right, bottom). A negative amount crops that side.
struct Padding {
  Padding(int64_t all);  // NOLINT: implicit, as torchvision's padding=4
  Padding(std::initializer_list<int64_t> values);
  int64_t left = 0, top = 0, right = 0, bottom = 0;
  std::string repr;  // as given, in Python's notation: "4", "(1, 2)"
};

// ---- the functional forms: fixed parameters, torchvision.transforms.functional's tensor path ---
namespace functional {

// convert_image_dtype: uint8 -> float divides by 255; float -> uint8 multiplies by 255.999 and
// truncates (torchvision's 255 + 1 - 1e-3: [0, 1] falls into 256 bins of nearly equal width);
// float -> float converts. Same dtype: the input itself.
Tensor convert_image_dtype(const Tensor& image, DType dtype = DType::f32);
// (x - mean[c]) / std[c] in the image's float dtype; mean and std have one value or C values.
Tensor normalize(const Tensor& image, const std::vector<double>& mean,
                 const std::vector<double>& std);
// torch.nn.functional.interpolate(size, align_corners=False), no antialias; uint8 is computed in
// float32 and rounded half to even, as torchvision's tensor path.
Tensor resize(const Tensor& image, Size size,
              Interpolation interpolation = Interpolation::bilinear);
// The output size torchvision's Resize(int, max_size) gives an image of height x width: the smaller
// edge becomes `smaller_edge` (the other scaled and truncated), then the longer is capped.
Size resized_size(int64_t height, int64_t width, int64_t smaller_edge,
                  std::optional<int64_t> max_size = std::nullopt);
// The rows [top, top + height) and columns [left, left + width); outside the image is zero.
Tensor crop(const Tensor& image, int64_t top, int64_t left, int64_t height, int64_t width);
// The central crop; a crop larger than the image pads it with zeros first (torchvision's).
Tensor center_crop(const Tensor& image, Size size);
Tensor resized_crop(const Tensor& image, int64_t top, int64_t left, int64_t height, int64_t width,
                    Size size, Interpolation interpolation = Interpolation::bilinear);
// `fill` for constant padding (converted to the image's dtype as torch's); edge repeats the border,
// reflect mirrors without repeating it (padding < the side), symmetric with it (padding <= side).
Tensor pad(const Tensor& image, const Padding& padding, double fill = 0,
           PaddingMode mode = PaddingMode::constant);
Tensor hflip(const Tensor& image);
Tensor vflip(const Tensor& image);
// 0.2989 r + 0.587 g + 0.114 b in float32 (float64 images: float64), truncated back to uint8.
Tensor rgb_to_grayscale(const Tensor& image);
// Blends with black (brightness), the grey mean (contrast) or the grey image (saturation):
// factor * image + (1 - factor) * other, clamped to [0, 1] (uint8: [0, 255], truncated). C = 1
// or 3.
Tensor adjust_brightness(const Tensor& image, double factor);
Tensor adjust_contrast(const Tensor& image, double factor);
Tensor adjust_saturation(const Tensor& image, double factor);
// Rotates the hue by `factor` turns (in [-0.5, 0.5]) through HSV; a grey image is returned as is.
Tensor adjust_hue(const Tensor& image, double factor);
// The region [i, i + h) x [j, j + w) set to `value`, which broadcasts to [C, h, w] (a scalar, [C,
// 1, 1] or [C, h, w]); converted to the image's dtype as torch's assignment.
Tensor erase(const Tensor& image, int64_t i, int64_t j, int64_t h, int64_t w, const Tensor& value);

}  // namespace functional

// ---- the transforms -------------------------------------------------------------------------

// The transforms in order; its repr lists theirs one per line, as torchvision's.
Transform Compose(std::vector<Transform> transforms);
// A user function (with or without the example's rng); `name` is its repr.
Transform Lambda(std::function<Tensor(const Tensor&)> function, std::string name = "Lambda()");
Transform Lambda(std::function<Tensor(const Tensor&, ExampleRng&)> function,
                 std::string name = "Lambda()");

Transform ToTensor();  // uint8 [C, H, W] -> float32 / 255 (see the header comment)
Transform ConvertImageDtype(DType dtype);
Transform Normalize(std::vector<double> mean, std::vector<double> std);

struct ResizeOptions {
  Interpolation interpolation = Interpolation::bilinear;
  std::optional<int64_t> max_size{};  // with Resize(int) only: caps the longer edge
};
Transform Resize(int64_t smaller_edge, ResizeOptions options = {});  // keeps the aspect ratio
Transform Resize(Size size, ResizeOptions options = {});             // exactly (height, width)

Transform CenterCrop(Size size);

struct RandomCropOptions {
  std::optional<Padding> padding{};  // applied first, on every side given
  bool pad_if_needed = false;  // pads an image smaller than the crop (both sides, as torchvision)
  double fill = 0;             // for PaddingMode::constant
  PaddingMode padding_mode = PaddingMode::constant;
};
Transform RandomCrop(Size size, RandomCropOptions options = {});

Transform RandomHorizontalFlip(double p = 0.5);
Transform RandomVerticalFlip(double p = 0.5);

struct RandomResizedCropOptions {
  double scale_min = 0.08, scale_max = 1.0;             // the crop's area over the image's
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // its width over its height (log-uniform)
  Interpolation interpolation = Interpolation::bilinear;
};
Transform RandomResizedCrop(Size size, RandomResizedCropOptions options = {});
// The crop (top, left, height, width) RandomResizedCrop takes from a height x width image:
// torchvision's get_params (ten tries of area and log-ratio, then the central fallback).
struct CropBox {
  int64_t top, left, height, width;
};
CropBox random_resized_crop_box(int64_t height, int64_t width,
                                const RandomResizedCropOptions& options, ExampleRng& rng);

// One factor's range: Jitter(0.4) is [max(0, 1 - 0.4), 1 + 0.4] (hue: [-0.4, 0.4]); Jitter{lo, hi}
// the range itself. 0 (the default) leaves that property alone.
struct Jitter {
  Jitter(double spread = 0)
      : spread(spread) {}  // NOLINT: implicit, as torchvision's brightness=0.4
  Jitter(double low, double high) : low(low), high(high), is_range(true) {}
  double spread = 0, low = 0, high = 0;
  bool is_range = false;
};
struct ColorJitterOptions {
  Jitter brightness{}, contrast{}, saturation{}, hue{};
};
// The four adjustments in a random order (a permutation drawn per example, as torchvision's), each
// with a factor drawn uniformly from its range.
Transform ColorJitter(ColorJitterOptions options);

struct RandomErasingOptions {
  double p = 0.5;
  double scale_min = 0.02, scale_max = 0.33;  // the erased area over the image's
  double ratio_min = 0.3, ratio_max = 3.3;    // its height over its width (log-uniform)
  std::vector<double> value = {0};  // one value or one per channel; ignored when random_value
  bool random_value = false;        // value='random': standard normal draws per element
};
Transform RandomErasing(RandomErasingOptions options = {});

}  // namespace dg::transforms
