// torchvision's transforms on image tensors (see transforms.h): the functional forms first, each a
// plain loop over the image's memory, then the transforms built on them.
#include "train/data/transforms.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <utility>

// torch computes each tensor op separately (a * b rounded, then + c rounded): no fused
// multiply-adds here, so that float arithmetic rounds as torchvision's does.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace dg::transforms {
namespace {

template <class... Args>
[[noreturn]] void fail(std::string_view op, fmt::format_string<Args...> format, Args&&... args) {
  throw std::invalid_argument(
      fmt::format("{}: {}", op, fmt::format(format, std::forward<Args>(args)...)));
}

// An image [..., C, H, W] as `planes` planes of H x W (planes = the leading sizes times C).
struct ImageLayout {
  int64_t images, channels, height, width;
  int64_t planes() const { return images * channels; }
  int64_t plane_size() const { return height * width; }
};

ImageLayout image_layout(const Tensor& image, std::string_view op) {
  if (!image.defined()) fail(op, "the image is an undefined tensor");
  if (image.dim() < 3)
    fail(op, "expected an image [..., C, H, W] (3 or more dimensions); got {}", image.describe());
  const DType dtype = image.dtype();
  if (dtype != DType::u8 && dtype != DType::f32 && dtype != DType::f64)
    fail(op, "expected a uint8, float32 or float64 image; got {}", image.describe());
  const int64_t channels = image.size(-3), height = image.size(-2), width = image.size(-1);
  if (channels == 0 || height == 0 || width == 0)
    fail(op, "the image is empty: {}", image.describe());
  return {image.numel() / (channels * height * width), channels, height, width};
}

// The image's values in row-major order, whatever its strides; never on the tape.
Tensor readable(const Tensor& image) { return image.detach().contiguous(); }

Shape with_height_width(const Tensor& image, int64_t height, int64_t width) {
  Shape shape = image.shape();
  shape[shape.size() - 2] = height;
  shape[shape.size() - 1] = width;
  return shape;
}

// Calls f.template operator()<T>() with the image's element type.
template <class F>
decltype(auto) dispatch_image(DType dtype, F&& f) {
  switch (dtype) {
    case DType::u8:
      return f.template operator()<uint8_t>();
    case DType::f32:
      return f.template operator()<float>();
    default:
      return f.template operator()<double>();  // image_layout refused the rest
  }
}

// The type torchvision computes a T image's colour arithmetic in: float32, float64 for float64.
template <class T>
using Compute = std::conditional_t<std::is_same_v<T, double>, double, float>;

// A computed value back to T as torch's .to(dtype): uint8 truncates (values were clamped first).
template <class T, class C>
T store(C value) {
  return convert_element<T>(value);
}

// out[..., y, x] = in[..., rows[y], cols[x]], or `fill` where rows[y] or cols[x] is -1: every
// geometric transform (crop, pad, flips) is this with its own index lists.
Tensor gather(const Tensor& image, const std::vector<int64_t>& rows,
              const std::vector<int64_t>& cols, double fill, std::string_view op) {
  const ImageLayout in = image_layout(image, op);
  const Tensor source = readable(image);
  const auto out_h = static_cast<int64_t>(rows.size()), out_w = static_cast<int64_t>(cols.size());
  Tensor out = Tensor::empty(with_height_width(image, out_h, out_w), image.dtype());
  dispatch_image(image.dtype(), [&]<class T>() {
    const T* src = source.data<T>();
    T* dst = out.data<T>();
    const T fill_value = convert_element<T>(fill);
    for (int64_t p = 0; p < in.planes(); ++p) {
      const T* plane = src + p * in.plane_size();
      for (int64_t y = 0; y < out_h; ++y)
        for (int64_t x = 0; x < out_w; ++x)
          *dst++ = rows[y] < 0 || cols[x] < 0 ? fill_value : plane[rows[y] * in.width + cols[x]];
    }
  });
  return out;
}

// The source index of output position i along an axis of `size` padded by `before`; -1 = fill.
int64_t padded_source(int64_t i, int64_t size, int64_t before, PaddingMode mode) {
  const int64_t s = i - before;
  if (s >= 0 && s < size) return s;
  switch (mode) {
    case PaddingMode::constant:
      return -1;
    case PaddingMode::edge:
      return std::clamp<int64_t>(s, 0, size - 1);
    case PaddingMode::reflect:
      return s < 0 ? -s : 2 * (size - 1) - s;
    case PaddingMode::symmetric:
      return s < 0 ? -s - 1 : 2 * size - 1 - s;
  }
  return -1;
}

std::vector<int64_t> padded_axis(int64_t size, int64_t before, int64_t after, PaddingMode mode) {
  std::vector<int64_t> index(static_cast<size_t>(size + before + after));
  for (int64_t i = 0; i < static_cast<int64_t>(index.size()); ++i)
    index[i] = padded_source(i, size, before, mode);
  return index;
}

void check_padding(const Padding& padding, const ImageLayout& in, PaddingMode mode) {
  const std::array<std::pair<int64_t, int64_t>, 4> sides{{{padding.left, in.width},
                                                          {padding.right, in.width},
                                                          {padding.top, in.height},
                                                          {padding.bottom, in.height}}};
  for (const auto& [amount, side] : sides) {
    if (mode == PaddingMode::reflect && amount >= side)
      fail("pad", "reflect padding {} must be less than the side it pads ({}) of an image {} x {}",
           amount, side, in.height, in.width);
    if (mode == PaddingMode::symmetric && amount > side)
      fail("pad", "symmetric padding {} must be at most the side it pads ({}) of an image {} x {}",
           amount, side, in.height, in.width);
  }
  if (in.width + padding.left + padding.right <= 0 || in.height + padding.top + padding.bottom <= 0)
    fail("pad", "negative padding ({}) leaves nothing of an image {} x {}", padding.repr, in.height,
         in.width);
}

// ---- resizing: torch's upsample kernels' index and weight arithmetic

// For each output position along an axis: the two source positions and their weights
// (torch's compute_source_index_and_lambda with align_corners=False), in the compute type C.
template <class C>
struct LinearTaps {
  std::vector<int64_t> first, second;
  std::vector<C> first_weight, second_weight;
};

template <class C>
LinearTaps<C> linear_taps(int64_t in, int64_t out) {
  LinearTaps<C> taps;
  const C scale = static_cast<C>(in) / static_cast<C>(out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t first = o, second = o;
    C lambda = 0;
    if (in != out) {
      // scale * (o + 0.5) - 0.5 as one fused multiply-add, as torch's build computes it
      const C source = std::max(std::fma(scale, C(o) + C(0.5), C(-0.5)), C(0));
      first = static_cast<int64_t>(source);
      second = first + (first < in - 1 ? 1 : 0);
      lambda = std::min(std::max(source - static_cast<C>(first), C(0)), C(1));
    }
    taps.first.push_back(first);
    taps.second.push_back(second);
    taps.first_weight.push_back(C(1) - lambda);
    taps.second_weight.push_back(lambda);
  }
  return taps;
}

// torch's nearest_idx (mode='nearest'): floor(o * in / out) in float32.
std::vector<int64_t> nearest_taps(int64_t in, int64_t out) {
  std::vector<int64_t> index(static_cast<size_t>(out));
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t o = 0; o < out; ++o) {
    if (out == in)
      index[o] = o;
    else if (out == 2 * in)
      index[o] = o >> 1;
    else
      index[o] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
  }
  return index;
}

template <class T>
void resize_bilinear(const T* src, T* dst, const ImageLayout& in, int64_t out_h, int64_t out_w) {
  using C = Compute<T>;
  const LinearTaps<C> ty = linear_taps<C>(in.height, out_h), tx = linear_taps<C>(in.width, out_w);
  for (int64_t p = 0; p < in.planes(); ++p) {
    const T* plane = src + p * in.plane_size();
    for (int64_t y = 0; y < out_h; ++y) {
      const T* row0 = plane + ty.first[y] * in.width;
      const T* row1 = plane + ty.second[y] * in.width;
      for (int64_t x = 0; x < out_w; ++x) {
        const int64_t x0 = tx.first[x], x1 = tx.second[x];
        const C w0 = tx.first_weight[x], w1 = tx.second_weight[x];
        // rows first, then between them; each a * w0 + b * w1 is fma(a, w0, b * w1), as torch's
        // build contracts it (float64 results are then torch's to the bit)
        const C top = std::fma(C(row0[x0]), w0, C(row0[x1]) * w1);
        const C bottom = std::fma(C(row1[x0]), w0, C(row1[x1]) * w1);
        const C value = std::fma(top, ty.first_weight[y], bottom * ty.second_weight[y]);
        // uint8: torchvision rounds (half to even, torch.round) before the cast
        if constexpr (std::is_same_v<T, uint8_t>)
          *dst++ = store<T>(std::nearbyint(value));
        else
          *dst++ = value;
      }
    }
  }
}

template <class T>
void resize_nearest(const T* src, T* dst, const ImageLayout& in, int64_t out_h, int64_t out_w) {
  const std::vector<int64_t> rows = nearest_taps(in.height, out_h);
  const std::vector<int64_t> cols = nearest_taps(in.width, out_w);
  for (int64_t p = 0; p < in.planes(); ++p) {
    const T* plane = src + p * in.plane_size();
    for (int64_t y = 0; y < out_h; ++y)
      for (int64_t x = 0; x < out_w; ++x) *dst++ = plane[rows[y] * in.width + cols[x]];
  }
}

// ---- colour: torchvision's _blend, grey and HSV arithmetic

// factor * image + (1 - factor) * other(plane, element), clamped to the dtype's range, in the
// compute type; `other` gives the blended-with value of one element.
template <class T, class Other>
Tensor blend(const Tensor& image, double factor, Other&& other) {
  using C = Compute<T>;
  const ImageLayout in = image_layout(image, "blend");
  const Tensor source = readable(image);
  Tensor out = Tensor::empty(image.shape(), image.dtype());
  const T* src = source.data<T>();
  T* dst = out.data<T>();
  const C bound = std::is_same_v<T, uint8_t> ? C(255) : C(1);
  const auto ratio = static_cast<C>(factor), rest = static_cast<C>(1.0 - factor);
  for (int64_t p = 0; p < in.planes(); ++p)
    for (int64_t e = 0; e < in.plane_size(); ++e) {
      const C mixed = ratio * C(src[p * in.plane_size() + e]) + rest * other(p, e);
      dst[p * in.plane_size() + e] = store<T>(std::clamp(mixed, C(0), bound));
    }
  return out;
}

void check_colour_channels(const ImageLayout& in, std::string_view op) {
  if (in.channels != 1 && in.channels != 3)
    fail(op, "expected 1 or 3 channels (grey or RGB); got {}", in.channels);
}

void check_factor(double factor, std::string_view op) {
  if (!(factor >= 0) || !std::isfinite(factor))
    fail(op, "the factor must be a finite number >= 0; got {}", factor);
}

template <class C>
std::array<C, 3> rgb_to_hsv(C r, C g, C b) {
  const C maxc = std::max({r, g, b}), minc = std::min({r, g, b});
  const bool equal = maxc == minc;
  const C range = maxc - minc;
  const C s = range / (equal ? C(1) : maxc);
  const C divisor = equal ? C(1) : range;
  const C rc = (maxc - r) / divisor, gc = (maxc - g) / divisor, bc = (maxc - b) / divisor;
  C h = 0;  // torchvision's masks: exactly one of the three terms is taken
  if (maxc == r)
    h = bc - gc;
  else if (maxc == g)
    h = C(2) + rc - bc;
  else
    h = C(4) + gc - rc;
  h = std::fmod(h / C(6) + C(1), C(1));
  return {h, s, maxc};
}

template <class C>
std::array<C, 3> hsv_to_rgb(C h, C s, C v) {
  const C sector = std::floor(h * C(6));
  const C f = h * C(6) - sector;
  const auto i = ((static_cast<int32_t>(sector) % 6) + 6) % 6;
  const C p = std::clamp(v * (C(1) - s), C(0), C(1));
  const C q = std::clamp(v * (C(1) - s * f), C(0), C(1));
  const C t = std::clamp(v * (C(1) - s * (C(1) - f)), C(0), C(1));
  switch (i) {
    case 0:
      return {v, t, p};
    case 1:
      return {q, v, p};
    case 2:
      return {p, v, t};
    case 3:
      return {p, q, v};
    case 4:
      return {t, p, v};
    default:
      return {v, p, q};
  }
}

// Python's a % 1.0 (the sign of the divisor), as torch's remainder.
template <class C>
C remainder_one(C a) {
  return a - std::floor(a);
}

}  // namespace

// ---- Size, Padding

Padding::Padding(int64_t all) : left(all), top(all), right(all), bottom(all) {
  repr = std::to_string(all);
}

Padding::Padding(std::initializer_list<int64_t> values) {
  const std::vector<int64_t> v(values);
  if (v.size() == 1)
    *this = Padding(v[0]);
  else if (v.size() == 2)
    left = right = v[0], top = bottom = v[1];
  else if (v.size() == 4)
    left = v[0], top = v[1], right = v[2], bottom = v[3];
  else
    throw std::invalid_argument(
        fmt::format("Padding: give 1, 2 (left/right, top/bottom) or 4 (left, top, right, bottom) "
                    "values; got {}",
                    v.size()));
  if (v.size() != 1) repr = fmt::format("({})", fmt::join(v, ", "));
}

namespace functional {

Tensor convert_image_dtype(const Tensor& image, DType dtype) {
  image_layout(image, "convert_image_dtype");
  if (dtype != DType::u8 && dtype != DType::f32 && dtype != DType::f64)
    fail("convert_image_dtype", "the target must be uint8, float32 or float64; got {}",
         dtype_name(dtype));
  if (image.dtype() == dtype) return image;
  const Tensor source = readable(image);
  Tensor out = Tensor::empty(image.shape(), dtype);
  const int64_t n = image.numel();
  dispatch_image(image.dtype(), [&]<class S>() {
    dispatch_image(dtype, [&]<class D>() {
      const S* src = source.data<S>();
      D* dst = out.data<D>();
      for (int64_t k = 0; k < n; ++k) {
        if constexpr (std::is_same_v<S, uint8_t>)  // uint8 -> float: / 255 in the target type
          dst[k] = static_cast<D>(src[k]) / static_cast<D>(255);
        else if constexpr (std::is_same_v<D, uint8_t>)  // float -> uint8: * 255.999, truncated
          dst[k] = store<D>(src[k] * static_cast<S>(255.999));
        else
          dst[k] = static_cast<D>(src[k]);
      }
    });
  });
  return out;
}

Tensor normalize(const Tensor& image, const std::vector<double>& mean,
                 const std::vector<double>& std) {
  const ImageLayout in = image_layout(image, "normalize");
  if (image.dtype() == DType::u8)
    fail("normalize",
         "expected a float image; got {} (convert it first: ConvertImageDtype or "
         "ToTensor)",
         image.describe());
  for (const auto* values : {&mean, &std})
    if (values->size() != 1 && static_cast<int64_t>(values->size()) != in.channels)
      fail("normalize", "{} has {} values for an image of {} channels ({}): give 1 or {}",
           values == &mean ? "mean" : "std", values->size(), in.channels, image.describe(),
           in.channels);
  const Tensor source = readable(image);
  Tensor out = Tensor::empty(image.shape(), image.dtype());
  dispatch_image(image.dtype(), [&]<class T>() {
    const T* src = source.data<T>();
    T* dst = out.data<T>();
    for (int64_t p = 0; p < in.planes(); ++p) {
      const size_t c = mean.size() == 1 ? 0 : static_cast<size_t>(p % in.channels);
      const size_t cs = std.size() == 1 ? 0 : static_cast<size_t>(p % in.channels);
      const auto m = static_cast<T>(mean[c]), s = static_cast<T>(std[cs]);
      if (s == T(0))
        fail("normalize",
             "std {} evaluated to zero after conversion to {}, leading to division by "
             "zero",
             std[cs], dtype_name(image.dtype()));
      for (int64_t e = 0; e < in.plane_size(); ++e, ++src, ++dst) *dst = (*src - m) / s;
    }
  });
  return out;
}

Size resized_size(int64_t height, int64_t width, int64_t smaller_edge,
                  std::optional<int64_t> max_size) {
  if (smaller_edge < 1)
    fail("resize", "the smaller edge's size must be at least 1; got {}", smaller_edge);
  const int64_t shorter = std::min(height, width), longer = std::max(height, width);
  int64_t new_short = smaller_edge;
  auto new_long = static_cast<int64_t>(static_cast<double>(smaller_edge) * longer / shorter);
  if (max_size) {
    if (*max_size <= smaller_edge)
      fail("resize",
           "max_size = {} must be strictly greater than the requested size for the "
           "smaller edge size = {}",
           *max_size, smaller_edge);
    if (new_long > *max_size) {
      new_short = static_cast<int64_t>(static_cast<double>(*max_size) * new_short / new_long);
      new_long = *max_size;
    }
  }
  return width <= height ? Size(new_long, new_short) : Size(new_short, new_long);
}

Tensor resize(const Tensor& image, Size size, Interpolation interpolation) {
  const ImageLayout in = image_layout(image, "resize");
  if (size.height < 1 || size.width < 1)
    fail("resize", "the output size must be at least 1 x 1; got {} x {}", size.height, size.width);
  const Tensor source = readable(image);
  Tensor out = Tensor::empty(with_height_width(image, size.height, size.width), image.dtype());
  dispatch_image(image.dtype(), [&]<class T>() {
    if (interpolation == Interpolation::nearest)
      resize_nearest(source.data<T>(), out.data<T>(), in, size.height, size.width);
    else
      resize_bilinear(source.data<T>(), out.data<T>(), in, size.height, size.width);
  });
  return out;
}

Tensor crop(const Tensor& image, int64_t top, int64_t left, int64_t height, int64_t width) {
  const ImageLayout in = image_layout(image, "crop");
  if (height < 1 || width < 1)
    fail("crop", "the crop's size must be at least 1 x 1; got {} x {}", height, width);
  std::vector<int64_t> rows(static_cast<size_t>(height)), cols(static_cast<size_t>(width));
  for (int64_t y = 0; y < height; ++y) rows[y] = top + y >= 0 && top + y < in.height ? top + y : -1;
  for (int64_t x = 0; x < width; ++x)
    cols[x] = left + x >= 0 && left + x < in.width ? left + x : -1;
  return gather(image, rows, cols, 0, "crop");
}

Tensor center_crop(const Tensor& image, Size size) {
  const ImageLayout in = image_layout(image, "center_crop");
  if (size.height < 1 || size.width < 1)
    fail("center_crop", "the crop's size must be at least 1 x 1; got {} x {}", size.height,
         size.width);
  // torchvision pads a smaller image with zeros (the odd pixel after), then crops the centre
  // with round-half-even offsets; as one crop: the same rows and columns.
  const int64_t pad_top = size.height > in.height ? (size.height - in.height) / 2 : 0;
  const int64_t pad_left = size.width > in.width ? (size.width - in.width) / 2 : 0;
  const int64_t padded_h = std::max(in.height, size.height),
                padded_w = std::max(in.width, size.width);
  const auto top = static_cast<int64_t>(std::nearbyint((padded_h - size.height) / 2.0));
  const auto left = static_cast<int64_t>(std::nearbyint((padded_w - size.width) / 2.0));
  return crop(image, top - pad_top, left - pad_left, size.height, size.width);
}

Tensor resized_crop(const Tensor& image, int64_t top, int64_t left, int64_t height, int64_t width,
                    Size size, Interpolation interpolation) {
  const Tensor cropped = crop(image, top, left, height, width);
  if (cropped.size(-2) == size.height && cropped.size(-1) == size.width) return cropped;
  return resize(cropped, size, interpolation);
}

Tensor pad(const Tensor& image, const Padding& padding, double fill, PaddingMode mode) {
  const ImageLayout in = image_layout(image, "pad");
  check_padding(padding, in, mode);
  if (mode == PaddingMode::constant && image.dtype() == DType::u8 && !(fill >= 0 && fill < 256))
    fail("pad", "the fill {} cannot be converted to uint8 without overflow", fill);
  return gather(image, padded_axis(in.height, padding.top, padding.bottom, mode),
                padded_axis(in.width, padding.left, padding.right, mode), fill, "pad");
}

Tensor hflip(const Tensor& image) {
  const ImageLayout in = image_layout(image, "hflip");
  std::vector<int64_t> rows(static_cast<size_t>(in.height)), cols(static_cast<size_t>(in.width));
  std::iota(rows.begin(), rows.end(), 0);
  for (int64_t x = 0; x < in.width; ++x) cols[x] = in.width - 1 - x;
  return gather(image, rows, cols, 0, "hflip");
}

Tensor vflip(const Tensor& image) {
  const ImageLayout in = image_layout(image, "vflip");
  std::vector<int64_t> rows(static_cast<size_t>(in.height)), cols(static_cast<size_t>(in.width));
  for (int64_t y = 0; y < in.height; ++y) rows[y] = in.height - 1 - y;
  std::iota(cols.begin(), cols.end(), 0);
  return gather(image, rows, cols, 0, "vflip");
}

Tensor rgb_to_grayscale(const Tensor& image) {
  const ImageLayout in = image_layout(image, "rgb_to_grayscale");
  check_colour_channels(in, "rgb_to_grayscale");
  if (in.channels == 1) return readable(image).clone();
  const Tensor source = readable(image);
  Shape shape = image.shape();
  shape[shape.size() - 3] = 1;
  Tensor out = Tensor::empty(shape, image.dtype());
  dispatch_image(image.dtype(), [&]<class T>() {
    using C = Compute<T>;
    const T* src = source.data<T>();
    T* dst = out.data<T>();
    const int64_t n = in.plane_size();
    for (int64_t i = 0; i < in.images; ++i, src += 3 * n)
      for (int64_t e = 0; e < n; ++e)
        *dst++ =
            store<T>(static_cast<C>(0.2989) * C(src[e]) + static_cast<C>(0.587) * C(src[n + e]) +
                     static_cast<C>(0.114) * C(src[2 * n + e]));
  });
  return out;
}

Tensor adjust_brightness(const Tensor& image, double factor) {
  check_factor(factor, "adjust_brightness");
  check_colour_channels(image_layout(image, "adjust_brightness"), "adjust_brightness");
  return dispatch_image(image.dtype(), [&]<class T>() {
    return blend<T>(image, factor, [](int64_t, int64_t) { return Compute<T>(0); });
  });
}

Tensor adjust_contrast(const Tensor& image, double factor) {
  check_factor(factor, "adjust_contrast");
  const ImageLayout in = image_layout(image, "adjust_contrast");
  check_colour_channels(in, "adjust_contrast");
  const Tensor grey = readable(rgb_to_grayscale(image));
  return dispatch_image(image.dtype(), [&]<class T>() {
    using C = Compute<T>;
    std::vector<C> means(static_cast<size_t>(in.images));  // one per image: mean over (C, H, W)
    const T* g = grey.data<T>();
    for (int64_t i = 0; i < in.images; ++i) {
      double sum = 0;
      for (int64_t e = 0; e < in.plane_size(); ++e) sum += static_cast<double>(*g++);
      means[i] = static_cast<C>(sum / static_cast<double>(in.plane_size()));
    }
    return blend<T>(image, factor,
                    [&](int64_t plane, int64_t) { return means[plane / in.channels]; });
  });
}

Tensor adjust_saturation(const Tensor& image, double factor) {
  check_factor(factor, "adjust_saturation");
  const ImageLayout in = image_layout(image, "adjust_saturation");
  check_colour_channels(in, "adjust_saturation");
  if (in.channels == 1) return image;  // torchvision: as PIL, grey is left alone
  const Tensor grey = readable(rgb_to_grayscale(image));
  return dispatch_image(image.dtype(), [&]<class T>() {
    const T* g = grey.data<T>();
    return blend<T>(image, factor, [&](int64_t plane, int64_t e) {
      return Compute<T>(g[(plane / in.channels) * in.plane_size() + e]);
    });
  });
}

Tensor adjust_hue(const Tensor& image, double factor) {
  if (!(factor >= -0.5 && factor <= 0.5))
    fail("adjust_hue", "the hue factor must be in [-0.5, 0.5]; got {}", factor);
  const ImageLayout in = image_layout(image, "adjust_hue");
  check_colour_channels(in, "adjust_hue");
  if (in.channels == 1) return image;
  const Tensor source = readable(image);
  Tensor out = Tensor::empty(image.shape(), image.dtype());
  dispatch_image(image.dtype(), [&]<class T>() {
    using C = Compute<T>;
    const T* src = source.data<T>();
    T* dst = out.data<T>();
    const int64_t n = in.plane_size();
    const auto unit = [](T v) { return std::is_same_v<T, uint8_t> ? C(v) / C(255) : C(v); };
    for (int64_t i = 0; i < in.images; ++i, src += 3 * n, dst += 3 * n)
      for (int64_t e = 0; e < n; ++e) {
        auto [h, s, v] = rgb_to_hsv(unit(src[e]), unit(src[n + e]), unit(src[2 * n + e]));
        const std::array<C, 3> rgb = hsv_to_rgb(remainder_one(h + static_cast<C>(factor)), s, v);
        for (int64_t c = 0; c < 3; ++c)
          dst[c * n + e] = std::is_same_v<T, uint8_t> ? store<T>(rgb[c] * C(255)) : T(rgb[c]);
      }
  });
  return out;
}

Tensor erase(const Tensor& image, int64_t i, int64_t j, int64_t h, int64_t w, const Tensor& value) {
  const ImageLayout in = image_layout(image, "erase");
  if (i < 0 || j < 0 || h < 0 || w < 0 || i + h > in.height || j + w > in.width)
    fail("erase", "the region rows [{}, {}) x columns [{}, {}) is not inside the image {} x {}", i,
         i + h, j, j + w, in.height, in.width);
  if (!value.defined() || value.dim() > 3)
    fail("erase", "the value must be a tensor of at most 3 dimensions");
  const std::array<int64_t, 3> target{in.channels, h, w};
  std::array<int64_t, 3> vshape{1, 1, 1};
  for (int64_t d = 0; d < value.dim(); ++d) vshape[3 - value.dim() + d] = value.size(d);
  for (size_t d = 0; d < 3; ++d)
    if (vshape[d] != 1 && vshape[d] != target[d])
      fail("erase", "the value {} does not broadcast to the region [{}, {}, {}]", value.describe(),
           in.channels, h, w);
  const std::vector<double> values = value.to_vector();
  Tensor out = readable(image).clone();
  dispatch_image(image.dtype(), [&]<class T>() {
    T* dst = out.data<T>();
    for (int64_t p = 0; p < in.planes(); ++p)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          const int64_t c = p % in.channels;
          const int64_t k = (vshape[0] == 1 ? 0 : c) * vshape[1] * vshape[2] +
                            (vshape[1] == 1 ? 0 : y) * vshape[2] + (vshape[2] == 1 ? 0 : x);
          dst[p * in.plane_size() + (i + y) * in.width + j + x] = convert_element<T>(values[k]);
        }
  });
  return out;
}

}  // namespace functional
}  // namespace dg::transforms

// ---- the transforms

namespace dg::transforms {
namespace {

// Python's repr of a float: the shortest round trip, with ".0" on a whole number.
std::string py_float(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

std::string py_tuple(const std::vector<double>& values) {
  std::vector<std::string> items;
  for (double v : values) items.push_back(py_float(v));
  return items.size() == 1 ? "(" + items[0] + ",)" : fmt::format("({})", fmt::join(items, ", "));
}

std::string size_repr(Size size) { return fmt::format("({}, {})", size.height, size.width); }

const char* interpolation_name(Interpolation interpolation) {
  return interpolation == Interpolation::nearest ? "nearest" : "bilinear";
}

// A transform whose errors name it: "RandomCrop(size=(28, 28), padding=None): crop: ...".
Transform named(std::string name, Transform::Function function) {
  return Transform(name, [name, function = std::move(function)](const Tensor& x, ExampleRng& rng) {
    try {
      return function(x, rng);
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(name + ": " + error.what());
    }
  });
}

void check_size(Size size, const std::string& name) {
  if (size.height < 1 || size.width < 1)
    fail(name, "the size must be at least 1 x 1; got {} x {}", size.height, size.width);
}

void check_probability(double p, const std::string& name) {
  if (!(p >= 0 && p <= 1)) fail(name, "the probability p must be in [0, 1]; got {}", p);
}

void check_range(double low, double high, const char* what, const std::string& name) {
  if (!(low <= high) || !std::isfinite(low) || !std::isfinite(high))
    fail(name, "{} must be a finite range (min, max) with min <= max; got ({}, {})", what, low,
         high);
}

// A standard normal draw (Box-Muller over two uniforms).
double normal(ExampleRng& rng) {
  const double u1 = 1.0 - rng.uniform();  // in (0, 1]: log is finite
  const double u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// Python's int(round(x)): half to even.
int64_t py_round(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

}  // namespace

Transform Compose(std::vector<Transform> transforms) {
  std::string name = "Compose(";
  for (const Transform& t : transforms) name += "\n    " + t.name();
  name += "\n)";
  return Transform(name, [transforms = std::move(transforms)](const Tensor& x, ExampleRng& rng) {
    Tensor y = x;
    for (const Transform& t : transforms) y = t(y, rng);
    return y;
  });
}

Transform Lambda(std::function<Tensor(const Tensor&)> function, std::string name) {
  if (!function) fail(name, "the function is empty");
  return Transform(std::move(name), [function = std::move(function)](const Tensor& x, ExampleRng&) {
    return function(x);
  });
}

Transform Lambda(std::function<Tensor(const Tensor&, ExampleRng&)> function, std::string name) {
  if (!function) fail(name, "the function is empty");
  return Transform(std::move(name), std::move(function));
}

Transform ToTensor() {
  return named("ToTensor()", [](const Tensor& x, ExampleRng&) {
    const Tensor image = x.defined() && x.dim() == 2 ? x.unsqueeze(0) : x;
    image_layout(image, "ToTensor");
    if (image.dtype() != DType::u8) return image;  // a float image passes, as torchvision's
    return functional::convert_image_dtype(image, DType::f32);
  });
}

Transform ConvertImageDtype(DType dtype) {
  const std::string name = fmt::format("ConvertImageDtype(dtype=torch.{})", dtype_name(dtype));
  if (dtype != DType::u8 && dtype != DType::f32 && dtype != DType::f64)
    fail(name, "the dtype must be uint8, float32 or float64");
  return named(name, [dtype](const Tensor& x, ExampleRng&) {
    return functional::convert_image_dtype(x, dtype);
  });
}

Transform Normalize(std::vector<double> mean, std::vector<double> std) {
  const std::string name = fmt::format("Normalize(mean={}, std={})", py_tuple(mean), py_tuple(std));
  if (mean.empty() || std.empty()) fail(name, "mean and std need at least one value each");
  for (double s : std)
    if (s == 0) fail(name, "std evaluated to zero, leading to division by zero");
  return named(name, [mean = std::move(mean), std = std::move(std)](const Tensor& x, ExampleRng&) {
    return functional::normalize(x, mean, std);
  });
}

namespace {
Transform make_resize(std::string size_text, std::optional<int64_t> smaller_edge, Size size,
                      ResizeOptions options) {
  const std::string name =
      fmt::format("Resize(size={}, interpolation={}, max_size={}, antialias=None)", size_text,
                  interpolation_name(options.interpolation),
                  options.max_size ? std::to_string(*options.max_size) : "None");
  if (smaller_edge) {
    if (*smaller_edge < 1) fail(name, "the size must be at least 1; got {}", *smaller_edge);
    if (options.max_size && *options.max_size <= *smaller_edge)
      fail(name,
           "max_size = {} must be strictly greater than the requested size for the smaller "
           "edge size = {}",
           *options.max_size, *smaller_edge);
  } else {
    check_size(size, name);
    if (options.max_size)
      fail(name, "max_size is for Resize(int) only (the size of the smaller edge), not (h, w)");
  }
  return named(name, [smaller_edge, size, options](const Tensor& x, ExampleRng&) {
    const ImageLayout in = image_layout(x, "resize");
    const int64_t h = in.height, w = in.width;
    const Size out =
        smaller_edge ? functional::resized_size(h, w, *smaller_edge, options.max_size) : size;
    if (out.height == h && out.width == w) return x;  // torchvision returns the image itself
    return functional::resize(x, out, options.interpolation);
  });
}
}  // namespace

Transform Resize(int64_t smaller_edge, ResizeOptions options) {
  return make_resize(std::to_string(smaller_edge), smaller_edge, Size(smaller_edge), options);
}

Transform Resize(Size size, ResizeOptions options) {
  return make_resize(size_repr(size), std::nullopt, size, options);
}

Transform CenterCrop(Size size) {
  const std::string name = fmt::format("CenterCrop(size={})", size_repr(size));
  check_size(size, name);
  return named(name,
               [size](const Tensor& x, ExampleRng&) { return functional::center_crop(x, size); });
}

Transform RandomCrop(Size size, RandomCropOptions options) {
  const std::string name = fmt::format("RandomCrop(size={}, padding={})", size_repr(size),
                                       options.padding ? options.padding->repr : "None");
  check_size(size, name);
  return named(name, [size, options](const Tensor& x, ExampleRng& rng) {
    Tensor image = x;
    if (options.padding)
      image = functional::pad(image, *options.padding, options.fill, options.padding_mode);
    const ImageLayout padded = image_layout(image, "RandomCrop");
    // torchvision's pad_if_needed pads both sides by the shortfall ([n, 0] is left and right)
    if (options.pad_if_needed && padded.width < size.width)
      image = functional::pad(image, {size.width - padded.width, 0}, options.fill,
                              options.padding_mode);
    if (options.pad_if_needed && padded.height < size.height)
      image = functional::pad(image, {0, size.height - padded.height}, options.fill,
                              options.padding_mode);
    const int64_t h = image.size(-2), w = image.size(-1);
    if (h < size.height || w < size.width)
      fail("crop",
           "the crop {} x {} is larger than the image {} x {}{} (give padding or "
           "pad_if_needed)",
           size.height, size.width, h, w, options.padding ? " after padding" : "");
    const int64_t top = rng.integer(0, h - size.height + 1);
    const int64_t left = rng.integer(0, w - size.width + 1);
    return functional::crop(image, top, left, size.height, size.width);
  });
}

namespace {
Transform random_flip(const char* kind, double p, Tensor (*flip)(const Tensor&)) {
  const std::string name = fmt::format("{}(p={})", kind, py_float(p));
  check_probability(p, name);
  return named(
      name, [p, flip](const Tensor& x, ExampleRng& rng) { return rng.bernoulli(p) ? flip(x) : x; });
}
}  // namespace

Transform RandomHorizontalFlip(double p) {
  return random_flip("RandomHorizontalFlip", p, functional::hflip);
}

Transform RandomVerticalFlip(double p) {
  return random_flip("RandomVerticalFlip", p, functional::vflip);
}

CropBox random_resized_crop_box(int64_t height, int64_t width,
                                const RandomResizedCropOptions& options, ExampleRng& rng) {
  const double area = static_cast<double>(height * width);
  const double log_low = std::log(options.ratio_min), log_high = std::log(options.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(options.scale_min, options.scale_max);
    const double aspect_ratio = std::exp(rng.uniform(log_low, log_high));
    const int64_t w = py_round(std::sqrt(target_area * aspect_ratio));
    const int64_t h = py_round(std::sqrt(target_area / aspect_ratio));
    if (0 < w && w <= width && 0 < h && h <= height)
      return {rng.integer(0, height - h + 1), rng.integer(0, width - w + 1), h, w};
  }
  // the central fallback: the whole image, or its central crop at the nearest allowed ratio
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < options.ratio_min)
    h = py_round(static_cast<double>(w) / options.ratio_min);
  else if (in_ratio > options.ratio_max)
    w = py_round(static_cast<double>(h) * options.ratio_max);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

Transform RandomResizedCrop(Size size, RandomResizedCropOptions options) {
  const auto round4 = [](double v) { return py_float(std::nearbyint(v * 1e4) / 1e4); };
  const std::string name = fmt::format(
      "RandomResizedCrop(size={}, scale=({}, {}), ratio=({}, {}), interpolation={}, "
      "antialias=None)",
      size_repr(size), round4(options.scale_min), round4(options.scale_max),
      round4(options.ratio_min), round4(options.ratio_max),
      interpolation_name(options.interpolation));
  check_size(size, name);
  check_range(options.scale_min, options.scale_max, "scale", name);
  check_range(options.ratio_min, options.ratio_max, "ratio", name);
  if (options.scale_min <= 0 || options.ratio_min <= 0)
    fail(name, "scale and ratio must be above 0; got scale ({}, {}), ratio ({}, {})",
         options.scale_min, options.scale_max, options.ratio_min, options.ratio_max);
  return named(name, [size, options](const Tensor& x, ExampleRng& rng) {
    const ImageLayout in = image_layout(x, "RandomResizedCrop");
    const CropBox box = random_resized_crop_box(in.height, in.width, options, rng);
    return functional::resized_crop(x, box.top, box.left, box.height, box.width, size,
                                    options.interpolation);
  });
}

namespace {
// The factor range of one ColorJitter property: nullopt when it is left alone (torchvision's None).
std::optional<std::pair<double, double>> jitter_range(const Jitter& jitter, const char* what,
                                                      bool is_hue, const std::string& name) {
  const double centre = is_hue ? 0 : 1;
  const double bound_low = is_hue ? -0.5 : 0, bound_high = is_hue ? 0.5 : INFINITY;
  double low = jitter.low, high = jitter.high;
  if (!jitter.is_range) {
    if (!(jitter.spread >= 0) || (is_hue && jitter.spread > 0.5))
      fail(name, "{} must be a number in [0, {}] or a range; got {}", what, is_hue ? "0.5" : "inf",
           jitter.spread);
    low = is_hue ? -jitter.spread : std::max(centre - jitter.spread, 0.0);
    high = centre + jitter.spread;
  } else if (!(bound_low <= low && low <= high && high <= bound_high)) {
    fail(name, "{} values should be between ({}, {}); got ({}, {})", what, bound_low, bound_high,
         low, high);
  }
  if (low == centre && high == centre) return std::nullopt;
  return std::make_pair(low, high);
}

std::string jitter_repr(const std::optional<std::pair<double, double>>& range,
                        const Jitter& given) {
  if (!range) return "None";
  const std::string pair = py_float(range->first) + ", " + py_float(range->second);
  return given.is_range ? "(" + pair + ")" : "[" + pair + "]";
}
}  // namespace

Transform ColorJitter(ColorJitterOptions options) {
  const auto brightness = jitter_range(options.brightness, "brightness", false, "ColorJitter");
  const auto contrast = jitter_range(options.contrast, "contrast", false, "ColorJitter");
  const auto saturation = jitter_range(options.saturation, "saturation", false, "ColorJitter");
  const auto hue = jitter_range(options.hue, "hue", true, "ColorJitter");
  const std::string name = fmt::format(
      "ColorJitter(brightness={}, contrast={}, saturation={}, hue={})",
      jitter_repr(brightness, options.brightness), jitter_repr(contrast, options.contrast),
      jitter_repr(saturation, options.saturation), jitter_repr(hue, options.hue));
  return named(name, [=](const Tensor& x, ExampleRng& rng) {
    std::array<int, 4> order{0, 1, 2, 3};  // torchvision's randperm(4), then the factors
    for (int k = 3; k > 0; --k) std::swap(order[k], order[rng.integer(0, k + 1)]);
    const auto draw = [&](const auto& range) {
      return range ? std::optional<double>(rng.uniform(range->first, range->second)) : std::nullopt;
    };
    const auto b = draw(brightness), c = draw(contrast), s = draw(saturation), h = draw(hue);
    Tensor image = x;
    for (int id : order) {
      if (id == 0 && b) image = functional::adjust_brightness(image, *b);
      if (id == 1 && c) image = functional::adjust_contrast(image, *c);
      if (id == 2 && s) image = functional::adjust_saturation(image, *s);
      if (id == 3 && h) image = functional::adjust_hue(image, *h);
    }
    return image;
  });
}

namespace {
std::string erasing_value_repr(const RandomErasingOptions& options) {
  if (options.random_value) return "random";
  std::vector<std::string> items;
  for (double v : options.value)  // whole numbers as Python ints, as usually given
    items.push_back(v == std::floor(v) && std::abs(v) < 1e15 ? fmt::format("{}", int64_t(v))
                                                             : py_float(v));
  return items.size() == 1 ? items[0] : fmt::format("({})", fmt::join(items, ", "));
}

// torchvision's RandomErasing.get_params: ten tries of area and log-ratio; none fits: no erasing.
std::optional<CropBox> erasing_box(int64_t height, int64_t width,
                                   const RandomErasingOptions& options, ExampleRng& rng) {
  const double area = static_cast<double>(height * width);
  const double log_low = std::log(options.ratio_min), log_high = std::log(options.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * rng.uniform(options.scale_min, options.scale_max);
    const double aspect_ratio = std::exp(rng.uniform(log_low, log_high));
    const int64_t h = py_round(std::sqrt(erase_area * aspect_ratio));
    const int64_t w = py_round(std::sqrt(erase_area / aspect_ratio));
    if (!(h < height && w < width)) continue;
    return CropBox{rng.integer(0, height - h + 1), rng.integer(0, width - w + 1), h, w};
  }
  return std::nullopt;
}
}  // namespace

Transform RandomErasing(RandomErasingOptions options) {
  const std::string name = fmt::format(
      "RandomErasing(p={}, scale=({}, {}), ratio=({}, {}), value={}, inplace=False)",
      py_float(options.p), py_float(options.scale_min), py_float(options.scale_max),
      py_float(options.ratio_min), py_float(options.ratio_max), erasing_value_repr(options));
  check_probability(options.p, name);
  check_range(options.scale_min, options.scale_max, "scale", name);
  check_range(options.ratio_min, options.ratio_max, "ratio", name);
  if (options.scale_min < 0 || options.scale_max > 1) fail(name, "scale should be between 0 and 1");
  if (options.ratio_min <= 0) fail(name, "ratio must be above 0");
  if (!options.random_value && options.value.empty()) fail(name, "value needs at least one number");
  return named(name, [options](const Tensor& x, ExampleRng& rng) {
    const ImageLayout in = image_layout(x, "RandomErasing");
    if (!rng.bernoulli(options.p)) return x;
    const auto values = static_cast<int64_t>(options.value.size());
    if (!options.random_value && values != 1 && values != in.channels)
      fail("erase", "value has {} numbers for an image of {} channels: give 1 or {}", values,
           in.channels, in.channels);
    const std::optional<CropBox> box = erasing_box(in.height, in.width, options, rng);
    if (!box) return x;
    Tensor value;
    if (options.random_value) {  // torchvision: float32 normal draws, one per erased element
      std::vector<float> draws(static_cast<size_t>(in.channels * box->height * box->width));
      for (float& d : draws) d = static_cast<float>(normal(rng));
      value = Tensor::from_vector(draws, {in.channels, box->height, box->width});
    } else {
      value = Tensor::from_vector(options.value, {values, 1, 1}, DType::f64);
    }
    return functional::erase(x, box->top, box->left, box->height, box->width, value);
  });
}

}  // namespace dg::transforms
