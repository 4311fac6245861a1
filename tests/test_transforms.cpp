// torchvision's transforms (train/data/transforms.h): every functional form against torchvision
// 0.14's tensor-path outputs with fixed parameters (tests/transforms_goldens.h, written by
// tools/torch_goldens_transforms.py), the random transforms' determinism and distributions, their
// reprs, and every error path's message.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/transforms_goldens.h"
#include "train/data/transforms.h"

using namespace dg;
namespace T = dg::transforms;
namespace F = dg::transforms::functional;

namespace {

DType dtype_named(const std::string& name) {
  if (name == "uint8") return DType::u8;
  if (name == "float64") return DType::f64;
  return DType::f32;
}

const std::map<std::string, Tensor>& golden_images() {
  static const std::map<std::string, Tensor> images = [] {
    std::map<std::string, Tensor> out;
    for (const TransformGoldenImage& image : kTransformImages)
      out[image.name] = Tensor::from_vector(image.values, image.shape, dtype_named(image.dtype));
    return out;
  }();
  return images;
}

const T::Interpolation kInterpolation[] = {T::Interpolation::bilinear, T::Interpolation::nearest};
const T::PaddingMode kModes[] = {T::PaddingMode::constant, T::PaddingMode::edge,
                                 T::PaddingMode::reflect, T::PaddingMode::symmetric};
const DType kDTypes[] = {DType::f32, DType::f64, DType::u8};  // the script's DTYPE_CODES

int64_t i64(double v) { return static_cast<int64_t>(v); }

// The golden case's call, with its parameters in the script's order.
Tensor run_case(const TransformGoldenCase& c, const Tensor& x) {
  const std::string op = c.op;
  const std::vector<double>& p = c.params;
  if (op == "hflip") return F::hflip(x);
  if (op == "vflip") return F::vflip(x);
  if (op == "crop") return F::crop(x, i64(p[0]), i64(p[1]), i64(p[2]), i64(p[3]));
  if (op == "center_crop") return F::center_crop(x, {i64(p[0]), i64(p[1])});
  if (op == "pad")
    return F::pad(x, {i64(p[0]), i64(p[1]), i64(p[2]), i64(p[3])}, p[4], kModes[i64(p[5])]);
  if (op == "resize") return F::resize(x, {i64(p[0]), i64(p[1])}, kInterpolation[i64(p[2])]);
  if (op == "resized_crop")
    return F::resized_crop(x, i64(p[0]), i64(p[1]), i64(p[2]), i64(p[3]), {i64(p[4]), i64(p[5])},
                           kInterpolation[i64(p[6])]);
  if (op == "adjust_brightness") return F::adjust_brightness(x, p[0]);
  if (op == "adjust_contrast") return F::adjust_contrast(x, p[0]);
  if (op == "adjust_saturation") return F::adjust_saturation(x, p[0]);
  if (op == "adjust_hue") return F::adjust_hue(x, p[0]);
  if (op == "rgb_to_grayscale") return F::rgb_to_grayscale(x);
  if (op == "convert_image_dtype") return F::convert_image_dtype(x, kDTypes[i64(p[0])]);
  if (op == "normalize") {
    const auto n = static_cast<size_t>(p[0]);
    return F::normalize(x, {p.begin() + 1, p.begin() + 1 + n}, {p.begin() + 1 + n, p.end()});
  }
  if (op == "erase") {
    const std::vector<double> v(p.begin() + 4, p.end());
    const Tensor value = Tensor::from_vector(v, {static_cast<int64_t>(v.size()), 1, 1});
    return F::erase(x, i64(p[0]), i64(p[1]), i64(p[2]), i64(p[3]), value);
  }
  FAIL("no call for golden op ", op);
  return {};
}

// Ops whose outputs are copies of input values (or exact arithmetic): equal bits expected.
bool is_exact(const std::string& op) {
  static const std::set<std::string> exact{"hflip",
                                           "vflip",
                                           "crop",
                                           "center_crop",
                                           "pad",
                                           "erase",
                                           "convert_image_dtype",
                                           "normalize",
                                           "adjust_brightness",
                                           "adjust_contrast",
                                           "adjust_saturation",
                                           "adjust_hue",
                                           "rgb_to_grayscale"};
  return exact.count(op) > 0;
}

}  // namespace

TEST_CASE("every functional transform matches torchvision 0.14's tensor path (goldens)") {
  // bit-exact: the copies (crop, pad, flips, erase), dtype conversion, normalize, the colour
  // functions (blends, grey, HSV) and float64 resize; float32 resize within 1e-6 and its uint8
  // within one unit (torch's vectorised float32 kernel rounds in an order not reproduced here)
  int64_t cases = 0, off_by_one = 0, uint8_values = 0;
  std::map<std::string, int64_t> off_by_op;  // where the one-unit slack is used, for the message
  double float_error = 0;                    // the largest float difference
  for (const TransformGoldenCase& c : kTransformCases) {
    const std::string op = c.op, image = c.image;
    CAPTURE(op);
    CAPTURE(image);
    CAPTURE(c.params);
    const Tensor out = run_case(c, golden_images().at(c.image));
    REQUIRE(out.shape() == Shape(c.shape.begin(), c.shape.end()));
    REQUIRE(out.dtype() == dtype_named(c.dtype));
    const std::vector<double> got = out.to_vector();
    const bool exact = is_exact(c.op) || (op.starts_with("resize") && out.dtype() == DType::f64);
    const double tolerance = exact ? 0 : out.dtype() == DType::u8 ? 1 : 1e-6;
    for (size_t k = 0; k < got.size(); ++k) {
      CAPTURE(k);
      // float32 goldens are written as their shortest decimal: read back as float32
      const double expected =
          out.dtype() == DType::f32 ? static_cast<float>(c.values[k]) : c.values[k];
      REQUIRE(std::abs(got[k] - expected) <= tolerance);
      if (out.dtype() == DType::u8 && got[k] != expected) ++off_by_one, ++off_by_op[op];
      if (out.dtype() != DType::u8)
        float_error = std::max(float_error, std::abs(got[k] - expected));
    }
    if (out.dtype() == DType::u8) uint8_values += static_cast<int64_t>(got.size());
    ++cases;
  }
  CHECK(cases == static_cast<int64_t>(kTransformCases.size()));
  CHECK(cases > 150);
  std::string where;
  for (const auto& [op, n] : off_by_op) where += " " + op + ": " + std::to_string(n);
  MESSAGE("transform goldens: ", cases, " cases; ", off_by_one, " of ", uint8_values,
          " uint8 values one unit off (", where, " ); largest float difference ", float_error);
  CHECK(off_by_one * 100 < uint8_values);  // the one-unit slack is for rare rounding ties
}

TEST_CASE("functional forms: small cases by hand") {
  const Tensor x = Tensor::from_vector(std::vector<uint8_t>{1, 2, 3, 4, 5, 6}, {1, 2, 3});
  CHECK(F::hflip(x).to_vector() == std::vector<double>{3, 2, 1, 6, 5, 4});
  CHECK(F::vflip(x).to_vector() == std::vector<double>{4, 5, 6, 1, 2, 3});
  // reflect: [1 2 3] padded by 2 -> 3 2 | 1 2 3 | 2 1; symmetric -> 2 1 | 1 2 3 | 3 2
  const Tensor row = Tensor::from_vector(std::vector<uint8_t>{1, 2, 3}, {1, 1, 3});
  CHECK(F::pad(row, {2, 0}, 0, T::PaddingMode::reflect).to_vector() ==
        std::vector<double>{3, 2, 1, 2, 3, 2, 1});
  CHECK(F::pad(row, {2, 0}, 0, T::PaddingMode::symmetric).to_vector() ==
        std::vector<double>{2, 1, 1, 2, 3, 3, 2});
  CHECK(F::pad(row, {1, 0}, 9, T::PaddingMode::constant).to_vector() ==
        std::vector<double>{9, 1, 2, 3, 9});
  CHECK(F::pad(row, {2, 0}, 0, T::PaddingMode::edge).to_vector() ==
        std::vector<double>{1, 1, 1, 2, 3, 3, 3});
  // convert_image_dtype's 255.999: 1.0 -> 255, 0.999 -> 255, 0.996 -> 254
  const Tensor f =
      Tensor::from_vector(std::vector<float>{0.f, 0.5f, 0.996f, 0.999f, 1.f}, {1, 1, 5});
  CHECK(F::convert_image_dtype(f, DType::u8).to_vector() ==
        std::vector<double>{0, 127, 254, 255, 255});
  CHECK(F::resized_size(100, 50, 32).height == 64);
  CHECK(F::resized_size(100, 50, 32, 40).height == 40);
  CHECK(F::resized_size(100, 50, 32, 40).width == 20);
}

TEST_CASE("transforms' reprs are torchvision's") {
  CHECK(T::ToTensor().name() == "ToTensor()");
  CHECK(T::Normalize({0.5, 0.4, 0.3}, {0.2, 0.2, 0.2}).name() ==
        "Normalize(mean=(0.5, 0.4, 0.3), std=(0.2, 0.2, 0.2))");
  CHECK(T::Normalize({0.5}, {1}).name() == "Normalize(mean=(0.5,), std=(1.0,))");
  CHECK(T::Resize(32).name() ==
        "Resize(size=32, interpolation=bilinear, max_size=None, antialias=None)");
  CHECK(T::Resize({20, 30}, {.interpolation = T::Interpolation::nearest}).name() ==
        "Resize(size=(20, 30), interpolation=nearest, max_size=None, antialias=None)");
  CHECK(T::Resize(32, {.max_size = 40}).name() ==
        "Resize(size=32, interpolation=bilinear, max_size=40, antialias=None)");
  CHECK(T::CenterCrop(24).name() == "CenterCrop(size=(24, 24))");
  CHECK(T::RandomCrop(28, {.padding = 4}).name() == "RandomCrop(size=(28, 28), padding=4)");
  CHECK(T::RandomCrop({28, 20}, {.padding = T::Padding{1, 2}}).name() ==
        "RandomCrop(size=(28, 20), padding=(1, 2))");
  CHECK(T::RandomCrop(28).name() == "RandomCrop(size=(28, 28), padding=None)");
  CHECK(T::RandomHorizontalFlip().name() == "RandomHorizontalFlip(p=0.5)");
  CHECK(T::RandomVerticalFlip(0.3).name() == "RandomVerticalFlip(p=0.3)");
  CHECK(T::RandomResizedCrop(224).name() ==
        "RandomResizedCrop(size=(224, 224), scale=(0.08, 1.0), ratio=(0.75, 1.3333), "
        "interpolation=bilinear, antialias=None)");
  CHECK(T::ColorJitter({.brightness = 0.4, .contrast = 0.4, .saturation = 0.4}).name() ==
        "ColorJitter(brightness=[0.6, 1.4], contrast=[0.6, 1.4], saturation=[0.6, 1.4], hue=None)");
  CHECK(T::ColorJitter({.brightness = {0.5, 1.5}, .hue = 0.1}).name() ==
        "ColorJitter(brightness=(0.5, 1.5), contrast=None, saturation=None, hue=[-0.1, 0.1])");
  CHECK(T::RandomErasing().name() ==
        "RandomErasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, inplace=False)");
  CHECK(T::RandomErasing({.random_value = true}).name() ==
        "RandomErasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=random, inplace=False)");
  CHECK(
      T::RandomErasing({.value = {1, 2, 3}}).name() ==
      "RandomErasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=(1, 2, 3), inplace=False)");
  CHECK(T::Compose({T::ToTensor(), T::Normalize({0.5}, {0.5})}).name() ==
        "Compose(\n    ToTensor()\n    Normalize(mean=(0.5,), std=(0.5,))\n)");
  CHECK(T::Lambda([](const Tensor& x) { return x; }).name() == "Lambda()");
}

namespace {
// An image whose every value is its position (y * width + x) on every channel: a crop's first
// value is its offset.
Tensor positions(int64_t channels, int64_t height, int64_t width) {
  std::vector<double> v;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t k = 0; k < height * width; ++k) v.push_back(static_cast<double>(k));
  return Tensor::from_vector(v, {channels, height, width}, DType::f32);
}

bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector() == b.to_vector();
}
}  // namespace

TEST_CASE("random transforms: the same (seed, epoch, index) gives the same bits, others differ") {
  const Tensor image = golden_images().at("rgb_u8");
  const T::Transform augment = T::Compose(
      {T::RandomCrop(5, {.padding = 2, .padding_mode = T::PaddingMode::reflect}),
       T::RandomHorizontalFlip(),
       T::ColorJitter({.brightness = 0.4, .contrast = 0.4, .saturation = 0.4, .hue = 0.1}),
       T::ToTensor(), T::RandomErasing({.p = 0.5, .random_value = true}), T::RandomResizedCrop(4)});
  int differ_by_index = 0, differ_by_epoch = 0;
  for (int64_t index = 0; index < 40; ++index) {
    ExampleRng a(7, 2, index), b(7, 2, index), next_index(7, 2, index + 1), next_epoch(7, 3, index);
    const Tensor out = augment(image, a);
    CHECK(out.dtype() == DType::f32);
    CHECK(out.shape() == Shape{3, 4, 4});
    CHECK(same(out, augment(image, b)));
    differ_by_index += !same(out, augment(image, next_index));
    differ_by_epoch += !same(out, augment(image, next_epoch));
  }
  CHECK(differ_by_index >= 38);  // a pair could repeat by chance, not most of them
  CHECK(differ_by_epoch >= 38);
  // several worker threads at once: each example's bits are its own
  std::vector<Tensor> threaded(8);
  std::vector<std::thread> workers;
  for (int64_t i = 0; i < 8; ++i)
    workers.emplace_back([&, i] {
      ExampleRng rng(7, 2, i);
      threaded[i] = augment(image, rng);
    });
  for (std::thread& w : workers) w.join();
  for (int64_t i = 0; i < 8; ++i) {
    ExampleRng rng(7, 2, i);
    CHECK(same(threaded[i], augment(image, rng)));
  }
}

TEST_CASE("RandomCrop's offsets cover the allowed range uniformly, padding included") {
  const Tensor image = positions(1, 6, 6);
  // padding 2 on every side: a 10 x 10 image, crops of 6 at offsets 0..4 in each direction;
  // the padded border is zero, so the offset is read from where the image's (0, 0) lands
  const T::Transform crop = T::RandomCrop(6, {.padding = 2, .fill = -1});
  std::map<std::pair<int64_t, int64_t>, int> counts;
  const int draws = 2500;
  for (int i = 0; i < draws; ++i) {
    ExampleRng rng(1, 0, i);
    const Tensor out = crop(image, rng);
    REQUIRE(out.shape() == Shape{1, 6, 6});
    // the first image pixel in the crop (the fill is -1): the image's (y, x) at the crop's (r, c)
    // is the padded image's (y + 2, x + 2), so the crop's offset is (y + 2 - r, x + 2 - c)
    const std::vector<double> v = out.to_vector();
    const auto k = std::find_if(v.begin(), v.end(), [](double e) { return e >= 0; }) - v.begin();
    REQUIRE(k < 36);
    const auto y = static_cast<int64_t>(v[k]) / 6, x = static_cast<int64_t>(v[k]) % 6;
    counts[{y + 2 - k / 6, x + 2 - k % 6}]++;
  }
  CHECK(counts.size() == 25);
  for (const auto& entry : counts) {  // not a structured binding: CAPTURE's lambda takes it
    const std::pair<int64_t, int64_t>& offset = entry.first;
    const int n = entry.second;
    CAPTURE(offset.first);
    CAPTURE(offset.second);
    CHECK(offset.first >= 0);
    CHECK(offset.first <= 4);
    CHECK(offset.second >= 0);
    CHECK(offset.second <= 4);
    CHECK(n > draws / 25 / 2);  // expected 100 each; sd 10
    CHECK(n < draws / 25 * 3 / 2);
  }
  // pad_if_needed pads both sides by the shortfall, as torchvision: a 6-wide image, crop 8 -> 10
  ExampleRng rng(1, 0, 0);
  const Tensor grown = T::RandomCrop(8, {.pad_if_needed = true})(image, rng);
  CHECK(grown.shape() == Shape{1, 8, 8});
}

TEST_CASE("random flips: the rate is p, p = 0 never, p = 1 always") {
  const Tensor image = positions(1, 2, 3);
  const Tensor flipped = F::hflip(image);
  for (double p : {0.0, 0.3, 1.0}) {
    const T::Transform flip = T::RandomHorizontalFlip(p);
    int flips = 0;
    const int draws = 4000;
    for (int i = 0; i < draws; ++i) {
      ExampleRng rng(3, 1, i);
      const Tensor out = flip(image, rng);
      flips += same(out, flipped);
      if (!same(out, flipped)) REQUIRE(same(out, image));
    }
    CAPTURE(p);
    // sd of the count at p = 0.3 is 29: 4 sd either side; p ignored (0.5) would give 2000
    CHECK(std::abs(flips - p * draws) <= 120);
  }
  ExampleRng rng(0, 0, 0);
  CHECK(same(T::RandomVerticalFlip(1.0)(image, rng), F::vflip(image)));
}

TEST_CASE("RandomResizedCrop: area within scale, log-uniform ratio, the central fallback") {
  const T::RandomResizedCropOptions options{.scale_min = 0.1, .scale_max = 0.3};
  double area_sum = 0, log_ratio_sum = 0;
  const int draws = 3000;
  for (int i = 0; i < draws; ++i) {
    ExampleRng rng(5, 0, i);
    const T::CropBox box = T::random_resized_crop_box(100, 100, options, rng);
    REQUIRE(box.top >= 0);
    REQUIRE(box.left >= 0);
    REQUIRE(box.top + box.height <= 100);
    REQUIRE(box.left + box.width <= 100);
    const double area = static_cast<double>(box.height * box.width) / 1e4;
    REQUIRE(area >= 0.1 * 0.9);  // rounding the sides moves the area by a few percent
    REQUIRE(area <= 0.3 * 1.1);
    const double ratio = static_cast<double>(box.width) / static_cast<double>(box.height);
    REQUIRE(ratio >= 0.75 * 0.93);
    REQUIRE(ratio <= 4.0 / 3.0 * 1.07);
    area_sum += area;
    log_ratio_sum += std::log(ratio);
  }
  CHECK(std::abs(area_sum / draws - 0.2) < 0.006);  // uniform in [0.1, 0.3]: mean 0.2
  CHECK(std::abs(log_ratio_sum / draws) < 0.01);    // log-uniform, symmetric about 0
  // a 10 x 200 strip: no try fits, so the central crop at the largest ratio (4/3): 10 x 13
  ExampleRng rng(5, 0, 0);
  const T::CropBox fallback = T::random_resized_crop_box(10, 200, {}, rng);
  CHECK(fallback.top == 0);
  CHECK(fallback.height == 10);
  CHECK(fallback.width == 13);
  CHECK(fallback.left == (200 - 13) / 2);
  const Tensor out = T::RandomResizedCrop({3, 5})(positions(2, 10, 200), rng);
  CHECK(out.shape() == Shape{2, 3, 5});
  // the transform is its functional form at the box its draws give
  const Tensor image = golden_images().at("rgb_f32");
  for (int i = 0; i < 20; ++i) {
    ExampleRng draws(9, 1, i), same_draws(9, 1, i);
    const T::CropBox b = T::random_resized_crop_box(5, 7, {}, same_draws);
    CHECK(same(T::RandomResizedCrop(4)(image, draws),
               F::resized_crop(image, b.top, b.left, b.height, b.width, 4)));
  }
}

TEST_CASE("ColorJitter draws its factors from the range; RandomErasing erases within scale") {
  // brightness alone on a constant image: out = 0.4 * factor, factor uniform in [0.5, 1.5]
  const Tensor grey = Tensor::full({3, 2, 2}, 0.4, DType::f32);
  const T::Transform jitter = T::ColorJitter({.brightness = {0.5, 1.5}});
  int low = 0, high = 0;
  for (int i = 0; i < 400; ++i) {
    ExampleRng rng(2, 0, i);
    const double factor = jitter(grey, rng).to_vector()[0] / 0.4;
    REQUIRE(factor >= 0.5 - 1e-6);
    REQUIRE(factor <= 1.5 + 1e-6);
    (factor < 1 ? low : high)++;
  }
  CHECK(low > 150);
  CHECK(high > 150);
  // the order is drawn per example: brightness x2 then contrast 0 (the grey mean) on [0.2, 0.8]
  // gives mean(clamp(0.4, 1.6)) = 0.7; contrast first gives clamp(2 * 0.5) = 1.0
  const Tensor two = Tensor::from_vector(std::vector<float>{0.2f, 0.8f}, {1, 1, 2});
  const T::Transform ordered = T::ColorJitter({.brightness = {2, 2}, .contrast = {0, 0}});
  int brightness_first = 0, contrast_first = 0;
  for (int i = 0; i < 400; ++i) {
    ExampleRng rng(8, 0, i);
    const double v = ordered(two, rng).to_vector()[1];
    if (std::abs(v - 0.7) < 1e-6)
      ++brightness_first;
    else if (std::abs(v - 1.0) < 1e-6)
      ++contrast_first;
  }
  CHECK(brightness_first + contrast_first == 400);
  CHECK(brightness_first > 150);  // half each: sd 10
  CHECK(contrast_first > 150);
  const Tensor ones = Tensor::ones({3, 20, 20}, DType::f32);
  const T::Transform erase = T::RandomErasing({.p = 1.0});
  for (int i = 0; i < 200; ++i) {
    ExampleRng rng(4, 0, i);
    const std::vector<double> v = erase(ones, rng).to_vector();
    const auto zeros = std::count(v.begin(), v.end(), 0.0);
    CHECK(zeros % 3 == 0);
    CHECK(zeros / 3 <= static_cast<int64_t>(0.33 * 400 * 1.3));
  }
  ExampleRng rng(4, 0, 0);
  CHECK(same(T::RandomErasing({.p = 0.0})(ones, rng), ones));
  // value='random': standard normal draws
  double sum = 0, sum_sq = 0;
  int64_t n = 0;
  for (int i = 0; i < 200; ++i) {
    ExampleRng r(6, 0, i);
    for (double v : T::RandomErasing({.p = 1.0, .random_value = true})(ones, r).to_vector())
      if (v != 1.0) sum += v, sum_sq += v * v, ++n;
  }
  REQUIRE(n > 1000);
  CHECK(std::abs(sum / n) < 0.1);
  CHECK(std::abs(sum_sq / n - 1.0) < 0.1);
}

TEST_CASE("ToTensor, ConvertImageDtype, Normalize, Resize, CenterCrop as transforms") {
  ExampleRng rng(0, 0, 0);
  const Tensor u8 = Tensor::from_vector(std::vector<uint8_t>{0, 51, 255, 102}, {1, 2, 2});
  const Tensor f = T::ToTensor()(u8, rng);
  CHECK(f.dtype() == DType::f32);
  CHECK(f.to_floats() == std::vector<float>{0.f, 0.2f, 1.f, 0.4f});
  CHECK(T::ToTensor()(Tensor::from_vector(std::vector<uint8_t>{0, 255}, {1, 2}), rng).shape() ==
        Shape{1, 1, 2});
  CHECK(same(T::ToTensor()(f, rng), f));
  CHECK(T::ConvertImageDtype(DType::u8)(f, rng).to_vector() ==
        std::vector<double>{0, 51, 255, 102});
  const Tensor n = T::Normalize({0.5}, {0.5})(f, rng);
  CHECK(n.to_floats() == std::vector<float>{-1.f, (0.2f - 0.5f) / 0.5f, 1.f, (0.4f - 0.5f) / 0.5f});
  const Tensor tall = positions(1, 8, 4);
  CHECK(T::Resize(2)(tall, rng).shape() == Shape{1, 4, 2});
  CHECK(T::Resize(2, {.max_size = 3})(tall, rng).shape() == Shape{1, 3, 1});
  CHECK(T::Resize({8, 4})(tall, rng).same(tall));  // already that size: the image itself
  CHECK(T::CenterCrop({2, 2})(tall, rng).to_vector() == std::vector<double>{13, 14, 17, 18});
  const T::Transform mirror = T::Lambda([](const Tensor& x) { return F::hflip(x); }, "Mirror()");
  CHECK(mirror.name() == "Mirror()");
  CHECK(mirror(f, rng).to_floats() == std::vector<float>{0.2f, 0.f, 0.4f, 1.f});
  const T::Transform noisy =
      T::Lambda([](const Tensor& x, ExampleRng& r) { return r.bernoulli(1.0) ? F::vflip(x) : x; });
  CHECK(noisy(f, rng).to_floats() == std::vector<float>{1.f, 0.4f, 0.f, 0.2f});
}

TEST_CASE("transforms read any strides and never record on the tape") {
  // a decoder's HWC image seen as CHW through permute: a view with strides, not a copy
  const Tensor hwc =
      Tensor::from_vector(std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3});
  const Tensor chw_view = hwc.permute({2, 0, 1});
  REQUIRE(!chw_view.is_contiguous());
  const Tensor chw = chw_view.contiguous();
  ExampleRng rng(0, 0, 0);
  CHECK(same(T::ToTensor()(chw_view, rng), T::ToTensor()(chw, rng)));
  CHECK(same(F::crop(chw_view, 0, 1, 2, 1), F::crop(chw, 0, 1, 2, 1)));
  CHECK(same(F::resize(chw_view, {3, 3}), F::resize(chw, {3, 3})));
  CHECK(same(F::adjust_hue(chw_view, 0.2), F::adjust_hue(chw, 0.2)));
  Tensor leaf = Tensor::full({3, 4, 4}, 0.5, DType::f32);
  leaf.set_requires_grad(true);
  const T::Transform augment =
      T::Compose({T::RandomResizedCrop(3), T::ColorJitter({.brightness = 0.5, .contrast = 0.5}),
                  T::Normalize({0.5}, {0.2}), T::RandomErasing({.p = 1.0})});
  const Tensor out = augment(leaf, rng);
  CHECK(!out.requires_grad());
  CHECK(out.shape() == Shape{3, 3, 3});
}

namespace {
void check_error(const std::function<void()>& call, const std::string& message) {
  CAPTURE(message);
  try {
    call();
    FAIL("no error; expected: ", message);
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find(message) != std::string::npos);
    if (std::string(e.what()).find(message) == std::string::npos) MESSAGE("got: ", e.what());
  }
}
}  // namespace

TEST_CASE("geometry transforms refuse bad input, naming the transform and the fault") {
  ExampleRng rng(0, 0, 0);
  const Tensor rgb = golden_images().at("rgb_u8");    // [3, 5, 7] uint8
  const Tensor rgbf = golden_images().at("rgb_f32");  // [3, 5, 7] float32
  const Tensor flat = Tensor::zeros({5, 7}, DType::u8);
  check_error([&] { F::crop(flat, 0, 0, 1, 1); },
              "crop: expected an image [..., C, H, W] (3 or more dimensions); got [5, 7] uint8");
  check_error(
      [&] {
        F::hflip(Tensor::zeros({1, 2, 2}, DType::i64));
      },
      "hflip: expected a uint8, float32 or float64 image; got [1, 2, 2] int64");
  check_error([&] { F::vflip(Tensor()); }, "vflip: the image is an undefined tensor");
  check_error(
      [&] {
        F::resize(Tensor::zeros({1, 0, 3}, DType::f32), {2, 2});
      },
      "resize: the image is empty");
  check_error([&] { T::RandomCrop(28)(rgb, rng); },
              "RandomCrop(size=(28, 28), padding=None): crop: the crop 28 x 28 is larger than the "
              "image 5 x 7 (give padding or pad_if_needed)");
  check_error([&] { T::RandomCrop(28, {.padding = 1})(rgb, rng); },
              "is larger than the image 7 x 9 after padding");
  check_error([&] { T::RandomCrop(28)(flat, rng); },
              "RandomCrop(size=(28, 28), padding=None): RandomCrop: expected an image");
  check_error(
      [&] {
        T::RandomCrop({0, 3});
      },
      "RandomCrop(size=(0, 3), padding=None): the size "
      "must be at least 1 x 1; got 0 x 3");
  check_error([&] { T::CenterCrop(-2); }, "CenterCrop(size=(-2, -2)): the size must be at least");
  check_error(
      [&] {
        F::center_crop(rgb, {0, 1});
      },
      "center_crop: the crop's size must be at least");
  check_error([&] { F::crop(rgb, 0, 0, 0, 2); }, "crop: the crop's size must be at least 1 x 1");
}

TEST_CASE("flips, Resize and Normalize refuse bad input, naming the transform and the fault") {
  ExampleRng rng(0, 0, 0);
  const Tensor rgb = golden_images().at("rgb_u8");    // [3, 5, 7] uint8
  const Tensor rgbf = golden_images().at("rgb_f32");  // [3, 5, 7] float32
  const Tensor flat = Tensor::zeros({5, 7}, DType::u8);
  check_error([&] { T::RandomHorizontalFlip(1.5); },
              "RandomHorizontalFlip(p=1.5): the probability p must be in [0, 1]; got 1.5");
  check_error([&] { T::RandomVerticalFlip(-0.1); }, "RandomVerticalFlip(p=-0.1): the probability");
  check_error([&] { T::Resize(-1); },
              "Resize(size=-1, interpolation=bilinear, max_size=None, "
              "antialias=None): the size must be at least 1; got -1");
  check_error([&] { T::Resize({0, 4}); }, "the size must be at least 1 x 1; got 0 x 4");
  check_error(
      [&] { T::Resize(32, {.max_size = 32}); },
      "max_size = 32 must be strictly greater than the requested size for the smaller edge");
  check_error([&] { T::Resize({3, 4}, {.max_size = 32}); }, "max_size is for Resize(int) only");
  check_error([&] { F::resize(rgb, {0, 2}); }, "resize: the output size must be at least 1 x 1");
  check_error([&] { T::Resize(3)(flat, rng); },
              "Resize(size=3, interpolation=bilinear, "
              "max_size=None, antialias=None): resize: expected");
  check_error(
      [&] {
        T::Normalize({0.5, 0.5}, {0.2, 0.2})(rgbf, rng);
      },
      "Normalize(mean=(0.5, 0.5), std=(0.2, 0.2)): normalize: mean has 2 values for an "
      "image of 3 channels ([3, 5, 7] float32): give 1 or 3");
  check_error([&] { F::normalize(rgbf, {0.5}, {1, 2}); }, "normalize: std has 2 values");
  check_error([&] { T::Normalize({0.5}, {0.0}); },
              "Normalize(mean=(0.5,), std=(0.0,)): std evaluated to zero");
  check_error([&] { F::normalize(rgbf, {0.5}, {1e-50}); },
              "normalize: std 1e-50 evaluated to zero after conversion to float32");
  check_error([&] { F::normalize(rgb, {0.5}, {0.5}); },
              "normalize: expected a float image; got [3, 5, 7] uint8");
  check_error([&] { T::Normalize({}, {1}); }, "mean and std need at least one value each");
  check_error([&] { F::pad(rgb, 5, 0, T::PaddingMode::reflect); },
              "pad: reflect padding 5 must be less than the side it pads (5) of an image 5 x 7");
  check_error([&] { F::pad(rgb, 6, 0, T::PaddingMode::symmetric); },
              "pad: symmetric padding 6 must be at most the side it pads (5)");
  check_error([&] { F::pad(rgb, {-4, -3}); }, "pad: negative padding ((-4, -3)) leaves nothing");
  check_error([&] { F::pad(rgb, 1, 256); },
              "pad: the fill 256 cannot be converted to uint8 without overflow");
  check_error(
      [&] {
        T::ToTensor()(Tensor::zeros({1, 2, 2}, DType::i32), rng);
      },
      "ToTensor(): ToTensor: expected a uint8, float32 or float64 image; got [1, 2, 2] int32");
  check_error(
      [&] {
        T::Padding p{1, 2, 3};
      },
      "Padding: give 1, 2 (left/right, top/bottom) or 4 (left, top, right, bottom) "
      "values; got 3");
}

TEST_CASE("colour, erasing and dtype transforms refuse bad input, naming the fault") {
  ExampleRng rng(0, 0, 0);
  const Tensor rgb = golden_images().at("rgb_u8");    // [3, 5, 7] uint8
  const Tensor rgbf = golden_images().at("rgb_f32");  // [3, 5, 7] float32
  check_error([&] { F::adjust_brightness(rgb, -0.5); },
              "adjust_brightness: the factor must be a finite number >= 0; got -0.5");
  check_error(
      [&] {
        F::adjust_contrast(Tensor::zeros({2, 3, 3}, DType::f32), 0.5);
      },
      "adjust_contrast: expected 1 or 3 channels (grey or RGB); got 2");
  check_error([&] { F::adjust_saturation(rgb, NAN); }, "adjust_saturation: the factor must be");
  check_error([&] { F::adjust_hue(rgb, 0.7); },
              "adjust_hue: the hue factor must be in [-0.5, 0.5]; got 0.7");
  check_error(
      [&] {
        F::rgb_to_grayscale(Tensor::zeros({4, 2, 2}, DType::u8));
      },
      "rgb_to_grayscale: expected 1 or 3 channels");
  check_error([&] { F::erase(rgb, 4, 0, 2, 2, Tensor::zeros({1})); },
              "erase: the region rows [4, 6) x columns [0, 2) is not inside the image 5 x 7");
  check_error(
      [&] {
        F::erase(rgb, 0, 0, 2, 2, Tensor::zeros({2, 1, 1}));
      },
      "erase: the value [2, 1, 1] float32 does not broadcast to the region [3, 2, 2]");
  check_error([&] { F::convert_image_dtype(rgb, DType::i32); },
              "convert_image_dtype: the target must be uint8, float32 or float64; got int32");
  check_error([&] { T::ConvertImageDtype(DType::i64); },
              "ConvertImageDtype(dtype=torch.int64): the dtype must be uint8, float32 or float64");
  check_error([&] { T::RandomResizedCrop(4, {.scale_min = 0.5, .scale_max = 0.1}); },
              "scale must be a finite range (min, max) with min <= max; got (0.5, 0.1)");
  check_error([&] { T::RandomResizedCrop(4, {.ratio_min = 0, .ratio_max = 1}); },
              "scale and ratio must be above 0");
  check_error([&] { T::ColorJitter({.brightness = -0.2}); },
              "ColorJitter: brightness must be a number in [0, inf] or a range; got -0.2");
  check_error([&] { T::ColorJitter({.hue = 0.7}); },
              "ColorJitter: hue must be a number in [0, 0.5]");
  check_error(
      [&] {
        T::ColorJitter({.hue = {-0.6, 0.2}});
      },
      "ColorJitter: hue values should be between (-0.5, 0.5); got (-0.6, 0.2)");
  check_error(
      [&] {
        T::ColorJitter({.hue = 0.1})(Tensor::zeros({2, 3, 3}, DType::f32), rng);
      },
      "ColorJitter(brightness=None, contrast=None, saturation=None, hue=[-0.1, 0.1]): "
      "adjust_hue: expected 1 or 3 channels");
  check_error([&] { T::RandomErasing({.p = 2}); },
              "RandomErasing(p=2.0, scale=(0.02, 0.33), "
              "ratio=(0.3, 3.3), value=0, inplace=False): the "
              "probability p must be in [0, 1]; got 2");
  check_error([&] { T::RandomErasing({.scale_max = 1.5}); }, "scale should be between 0 and 1");
  check_error([&] { T::RandomErasing({.value = {}}); }, "value needs at least one number");
  check_error(
      [&] {
        T::RandomErasing({.p = 1, .value = {1, 2}})(rgb, rng);
      },
      "erase: value has 2 numbers for an image of 3 channels: give 1 or 3");
  check_error([&] { T::Lambda(std::function<Tensor(const Tensor&)>()); },
              "Lambda(): the function is empty");
}
