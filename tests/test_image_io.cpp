// PNG and JPEG decoding against torchvision 0.14's read_image (tests/image_goldens.h, made by
// tools/torch_goldens_images.py from the files in tests/data/images/), every mode; the grey
// formula; PNG encoding round trips; and every error path with its message, printed by nobody.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/image_goldens.h"
#include "tests/temp_dir.h"
#include "train/io/files.h"
#include "train/io/image.h"

using dg::ImageReadMode;
using dg::Tensor;
using dg::test::TempDir;

namespace {

std::string image_path(const std::string& name) {
  return std::string(DG_SOURCE_DIR) + "/tests/data/images/" + name;
}

ImageReadMode mode_named(const std::string& name) {
  for (ImageReadMode mode :
       {ImageReadMode::unchanged, ImageReadMode::gray, ImageReadMode::gray_alpha,
        ImageReadMode::rgb, ImageReadMode::rgb_alpha})
    if (name == dg::image_read_mode_name(mode)) return mode;
  throw std::invalid_argument("no mode " + name);
}

// The largest |decoded - golden| over the pixels, or -1 when the shapes differ.
int max_difference(const Tensor& decoded, const ImageGolden& golden) {
  if (decoded.dtype() != dg::DType::u8 ||
      decoded.shape() != dg::Shape{golden.channels, golden.height, golden.width})
    return -1;
  const uint8_t* values = decoded.contiguous().data<uint8_t>();
  int worst = 0;
  for (size_t i = 0; i < golden.pixels.size(); ++i)
    worst = std::max(worst, std::abs(int(values[i]) - int(golden.pixels[i])));
  return worst;
}

// Runs fn with stderr sent to a file; returns what was written there.
template <class F>
std::string stderr_of(F&& fn) {
  TempDir dir("image-stderr");
  const std::string path = dir.file("stderr.txt");
  std::fflush(stderr);
  const int saved = dup(2);
  const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(file, 2);
  close(file);
  try {
    fn();
  } catch (...) {
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    throw;
  }
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  return dg::read_file(path);
}

std::string error_of(const std::string& name, ImageReadMode mode = ImageReadMode::unchanged) {
  try {
    dg::read_image(image_path(name), mode);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

Tensor pattern(int64_t channels, int64_t height, int64_t width) {
  Tensor image = Tensor::empty({channels, height, width}, dg::DType::u8);
  uint8_t* values = image.data<uint8_t>();
  for (int64_t i = 0; i < image.numel(); ++i) values[i] = uint8_t((i * 37 + 11) % 256);
  return image;
}

}  // namespace

TEST_CASE("read_image: every golden file and mode as torchvision's read_image") {
  int png_cases = 0, jpeg_cases = 0, jpeg_exact = 0;
  for (const ImageGolden& golden : kImageGoldens) {
    const std::string name = golden.file;
    const ImageReadMode mode = mode_named(golden.mode);
    CAPTURE(name);
    CAPTURE(golden.mode);
    if (golden.channels == 0) {  // read_image refuses it: so do we, naming file and reason
      const std::string message = error_of(name, mode);
      CHECK(message.find(image_path(name)) != std::string::npos);
      CHECK(message.find("CMYK JPEG cannot be read in mode") != std::string::npos);
      continue;
    }
    const Tensor decoded = dg::read_image(image_path(name), mode);
    const int difference = max_difference(decoded, golden);
    if (name.ends_with(".png")) {
      CHECK(difference == 0);  // libpng on both sides: exact
      ++png_cases;
    } else {
      CHECK(difference >= 0);
      CHECK(difference <= 1);
      ++jpeg_cases;
      jpeg_exact += difference == 0;
    }
  }
  CHECK(png_cases == 50);
  CHECK(jpeg_cases == 26);
  MESSAGE("JPEG decodes equal to read_image bit for bit: " << jpeg_exact << " of " << jpeg_cases);
}

TEST_CASE("read_image: bytes in memory decode as the file; the header alone gives the size") {
  for (const std::string name :
       {"rgba.png", "palette_trns.png", "rgb_interlaced.png", "jpeg_420.jpg"}) {
    CAPTURE(name);
    const std::string bytes = dg::read_file(image_path(name));
    const Tensor from_file = dg::read_image(image_path(name), ImageReadMode::rgb);
    const Tensor from_bytes = dg::decode_image(bytes, ImageReadMode::rgb, "buffer");
    CHECK(from_file.to_vector() == from_bytes.to_vector());
    const dg::ImageHeader header = dg::read_image_header(bytes, name);
    CHECK(header.width == 7);
    CHECK(header.height == 5);
  }
  CHECK(dg::read_image_header(dg::read_file(image_path("palette_trns.png"))).channels == 4);
  CHECK(dg::read_image_header(dg::read_file(image_path("palette.png"))).channels == 3);
  CHECK(dg::read_image_header(dg::read_file(image_path("grey_alpha.png"))).channels == 2);
  CHECK(dg::read_image_header(dg::read_file(image_path("jpeg_cmyk.jpg"))).channels == 4);
  CHECK(dg::read_image_header(dg::read_file(image_path("jpeg_grey.jpg"))).format == "JPEG");
  CHECK(dg::read_image(image_path("jpeg_cmyk.jpg")).size(0) == 4);  // unchanged: as stored
}

TEST_CASE("read_image: mode conversions (libpng's grey, replicated grey, dropped alpha)") {
  const Tensor rgb = dg::read_image(image_path("rgba.png"), ImageReadMode::rgb);
  const Tensor gray = dg::read_image(image_path("rgba.png"), ImageReadMode::gray);
  const Tensor rgba = dg::read_image(image_path("rgba.png"), ImageReadMode::unchanged);
  REQUIRE(rgb.shape() == dg::Shape{3, 5, 7});
  REQUIRE(rgba.shape() == dg::Shape{4, 5, 7});
  const uint8_t* c = rgb.data<uint8_t>();
  const uint8_t* g = gray.data<uint8_t>();
  const uint8_t* a = rgba.data<uint8_t>();
  for (int p = 0; p < 35; ++p) {
    // read_image's coefficients 0.2989 and 0.587 in libpng's 15-bit fixed point, truncated
    const int expected = (9794 * c[p] + 19235 * c[35 + p] + 3739 * c[70 + p]) >> 15;
    CHECK(int(g[p]) == expected);
    CHECK(a[p] == c[p]);  // rgb is rgba without its alpha
  }
  const Tensor grey = dg::read_image(image_path("grey.png"), ImageReadMode::unchanged);
  const Tensor grey_rgb = dg::read_image(image_path("grey.png"), ImageReadMode::rgb);
  for (int channel = 0; channel < 3; ++channel)
    CHECK(grey_rgb.narrow(0, channel, 1).contiguous().to_vector() == grey.to_vector());
  const Tensor grey_alpha = dg::read_image(image_path("grey.png"), ImageReadMode::gray_alpha);
  CHECK(grey_alpha.narrow(0, 1, 1).contiguous().to_vector() == std::vector<double>(35, 255.0));
}

TEST_CASE("write_png: a round trip of 1 to 4 channels, through the atomic writer") {
  TempDir dir("image-write");
  for (int64_t channels = 1; channels <= 4; ++channels) {
    CAPTURE(channels);
    const Tensor image = pattern(channels, 9, 13);
    const std::string path = dir.file("c" + std::to_string(channels) + ".png");
    dg::write_png(path, image);
    const Tensor back = dg::read_image(path);
    CHECK(back.shape() == image.shape());
    CHECK(back.to_vector() == image.to_vector());
    CHECK(dg::decode_image(dg::encode_png(image)).to_vector() == image.to_vector());
  }
  // A non-contiguous view is written as its values.
  const Tensor wide = pattern(3, 4, 10);
  const Tensor view = wide.narrow(2, 3, 5);
  dg::write_png(dir.file("view.png"), view);
  CHECK(dg::read_image(dir.file("view.png")).to_vector() == view.contiguous().to_vector());
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path),
                      std::filesystem::directory_iterator()) == 5);  // no temporaries left
}

TEST_CASE("write_png: refuses what is not a uint8 [C, H, W] image with 1 to 4 channels") {
  CHECK_THROWS_WITH_AS(dg::encode_png(Tensor::zeros({5, 4, 4}, dg::DType::u8)),
                       doctest::Contains("C in 1..4"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(dg::encode_png(Tensor::zeros({1, 4, 4})), doctest::Contains("float32"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(dg::encode_png(Tensor::zeros({4, 4}, dg::DType::u8)),
                       doctest::Contains("[4, 4] uint8"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(dg::encode_png(Tensor::zeros({1, 0, 4}, dg::DType::u8)),
                       doctest::Contains("H, W >= 1"), std::invalid_argument);
  TempDir dir("image-write-error");
  CHECK_THROWS_WITH_AS(dg::write_png(dir.file("missing/x.png"), pattern(1, 2, 2)),
                       doctest::Contains("missing/x.png"), std::runtime_error);
}

TEST_CASE("read_image: broken, empty, foreign and unsupported files name the file and the fault") {
  struct Case {
    const char* file;
    ImageReadMode mode;
    const char* says;
  };
  const Case cases[] = {
      {"truncated.png", ImageReadMode::unchanged, "corrupt or truncated PNG: truncated"},
      {"corrupt.png", ImageReadMode::rgb,
       "corrupt or truncated PNG: IDAT: invalid stored block lengths"},
      {"truncated.jpg", ImageReadMode::rgb, "Premature end of JPEG file"},
      {"corrupt.jpg", ImageReadMode::rgb, "corrupt or truncated JPEG: Bogus Huffman table"},
      {"empty.png", ImageReadMode::unchanged, "empty file (0 bytes): not an image"},
      {"not_an_image.png", ImageReadMode::unchanged,
       "not a PNG or JPEG image (it starts with the bytes 3c 21 44 4f"},
      {"unsupported.gif", ImageReadMode::rgb, "unsupported image format GIF"},
      {"grey16.png", ImageReadMode::unchanged, "16-bit PNG is not supported"},
      {"rgb16.png", ImageReadMode::rgb, "16-bit PNG is not supported"},
      {"jpeg_cmyk.jpg", ImageReadMode::rgb, "CMYK JPEG cannot be read in mode rgb"},
  };
  for (const Case& c : cases) {
    const std::string file = c.file;
    CAPTURE(file);
    std::string message;
    const std::string printed = stderr_of([&] { message = error_of(c.file, c.mode); });
    CHECK(message.find("image '" + image_path(c.file) + "': ") == 0);
    CAPTURE(message);
    CHECK(message.find(c.says) != std::string::npos);
    CHECK(printed.empty());  // libpng and libjpeg print nothing
  }
  CHECK_THROWS_WITH_AS(dg::read_image(image_path("no_such_file.png")),
                       doctest::Contains("no_such_file.png"), std::runtime_error);
  CHECK_THROWS_WITH_AS(
      dg::decode_image(std::string("\x89PN", 3), ImageReadMode::rgb, "three bytes"),
      doctest::Contains("image 'three bytes': truncated: 3 bytes"), std::runtime_error);
  CHECK_THROWS_WITH_AS(dg::read_image_header("GIF89a", "header"),
                       doctest::Contains("unsupported image format GIF"), std::runtime_error);
}

TEST_CASE("read_image: every truncation of a PNG and a JPEG is refused, never a crash") {
  for (const std::string name : {"rgb_interlaced.png", "jpeg_progressive.jpg"}) {
    CAPTURE(name);
    const std::string bytes = dg::read_file(image_path(name));
    int refused = 0;
    const std::string printed = stderr_of([&] {
      for (size_t size = 0; size < bytes.size(); ++size) {
        try {
          dg::decode_image(std::string_view(bytes).substr(0, size), ImageReadMode::rgb, name);
        } catch (const std::runtime_error& e) {
          refused += std::string(e.what()).find(name) != std::string::npos;
        }
      }
    });
    // A PNG cut after its last IDAT chunk (only IEND missing) still decodes, as read_image's and
    // PIL's do; every shorter cut is refused.
    const size_t tail = name.ends_with(".png") ? 12 : 0;
    CHECK(size_t(refused) == bytes.size() - tail);
    CHECK(printed.empty());
  }
}

TEST_CASE("read_image: a header claiming a huge image is refused before allocating") {
  std::string bytes = dg::read_file(image_path("grey.png"));
  // IHDR's width and height (bytes 16..23) set to 1,000,000 x 1,000 (libpng's own limit is a
  // million each way), and the chunk's CRC made right again, as libpng checks it first.
  const unsigned char size[8] = {0x00, 0x0f, 0x42, 0x40, 0x00, 0x00, 0x03, 0xe8};
  for (int k = 0; k < 8; ++k) bytes[16 + k] = char(size[k]);
  uint32_t crc = 0xffffffffu;  // CRC-32 over "IHDR" and its 13 bytes
  for (size_t i = 12; i < 29; ++i) {
    crc ^= static_cast<unsigned char>(bytes[i]);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  crc ^= 0xffffffffu;
  for (int k = 0; k < 4; ++k) bytes[29 + k] = char((crc >> (24 - 8 * k)) & 0xff);
  CHECK_THROWS_WITH_AS(dg::decode_image(bytes, ImageReadMode::gray, "huge"),
                       doctest::Contains("larger than the 178956970 pixels decoded"),
                       std::runtime_error);
}

TEST_CASE("read_image: threads decoding at once get the bits of one thread (no shared state)") {
  const std::vector<std::string> names = {"rgb_interlaced.png", "palette_trns.png",
                                          "jpeg_420.jpg",       "jpeg_progressive.jpg",
                                          "grey4.png",          "truncated.png"};
  const auto decode_all = [&] {
    std::vector<std::vector<double>> out;
    for (const std::string& name : names) {
      try {
        out.push_back(dg::read_image(image_path(name), ImageReadMode::rgb).to_vector());
      } catch (const std::runtime_error&) {
        out.push_back({-1});
      }
    }
    return out;
  };
  const std::vector<std::vector<double>> expected = decode_all();
  CHECK(expected.back() == std::vector<double>{-1});  // the truncated file fails every time
  std::vector<int> same(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 25; ++repeat) same[size_t(t)] += decode_all() == expected;
    });
  for (std::thread& thread : threads) thread.join();
  CHECK(same == std::vector<int>(4, 25));
}
