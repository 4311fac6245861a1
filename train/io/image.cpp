// PNG and JPEG decoding and PNG encoding through libpng and libjpeg-turbo (see image.h).
//
// Both libraries report errors by longjmp (libpng's png_error, libjpeg's error_exit): a jump must
// not skip a C++ destructor. So every call into a library is made from a small "phase" function
// that holds only plain values and returns false when the library jumped back to its setjmp; the
// objects with destructors (the library's state guard, the pixel buffer, the output tensor) live
// in the caller, which the jump never crosses. The message the library gave is kept in a plain
// char array and turned into a std::runtime_error by the caller.
#include "train/io/image.h"

#include <fmt/format.h>
#include <jpeglib.h>
#include <png.h>

#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE
#include <cstring>
#include <stdexcept>
#include <vector>

#include "train/io/files.h"

namespace dg {

const char* image_read_mode_name(ImageReadMode mode) {
  switch (mode) {
    case ImageReadMode::unchanged:
      return "unchanged";
    case ImageReadMode::gray:
      return "gray";
    case ImageReadMode::gray_alpha:
      return "gray_alpha";
    case ImageReadMode::rgb:
      return "rgb";
    case ImageReadMode::rgb_alpha:
      return "rgb_alpha";
  }
  return "?";
}

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw std::runtime_error(fmt::format("image '{}': {}", source, what));
}

void check_size(const std::string& source, const char* format, int64_t width, int64_t height) {
  if (width <= 0 || height <= 0)
    fail(source, fmt::format("{} header gives an empty image ({} x {})", format, width, height));
  if (width * height > kMaxImagePixels)
    fail(source, fmt::format("{} image of {} x {} pixels is larger than the {} pixels decoded",
                             format, width, height, kMaxImagePixels));
}

// The decoder's rows, [H, W, C] interleaved, to a uint8 tensor [C, H, W] (a plain loop).
Tensor planar_from_interleaved(const std::vector<uint8_t>& pixels, int64_t height, int64_t width,
                               int64_t channels) {
  Tensor image = Tensor::empty({channels, height, width}, DType::u8);
  uint8_t* out = image.data<uint8_t>();
  const int64_t plane = height * width;
  for (int64_t p = 0; p < plane; ++p)
    for (int64_t c = 0; c < channels; ++c) out[c * plane + p] = pixels[p * channels + c];
  return image;
}

// ---- PNG reading

struct PngSource {
  const unsigned char* data = nullptr;
  size_t size = 0, position = 0;
  char message[256] = {};
};

void png_on_error(png_structp png, png_const_charp text) {
  auto* source = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(source->message, sizeof source->message, "%s", text);
  png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}  // nothing printed

void png_on_read(png_structp png, png_bytep out, png_size_t count) {
  auto* source = static_cast<PngSource*>(png_get_io_ptr(png));
  if (count > source->size - source->position)
    png_error(png, "truncated: the file ends before the image does");
  std::memcpy(out, source->data + source->position, count);
  source->position += count;
}

struct PngReadGuard {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngReadGuard() {
    if (png) png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
  }
};

struct PngLayout {
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0, interlace = 0, passes = 1, channels = 0;
  bool has_trns = false;
};

// Phase 1: the header (signature, IHDR and the chunks before the pixels).
bool png_read_layout(png_structp png, png_infop info, PngLayout* layout) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  png_get_IHDR(png, info, &layout->width, &layout->height, &layout->bit_depth, &layout->color_type,
               &layout->interlace, nullptr, nullptr);
  layout->has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  layout->channels = png_get_channels(png, info);
  return true;
}

// Phase 2: libpng's transforms for the mode (read_image's calls; a palette is always looked up,
// with its tRNS as alpha), then the output's channel count.
bool png_set_mode(png_structp png, png_infop info, ImageReadMode mode, PngLayout* layout) {
  if (setjmp(png_jmpbuf(png))) return false;
  const int type = layout->color_type;
  bool color = (type & PNG_COLOR_MASK_COLOR) != 0;
  bool alpha = (type & PNG_COLOR_MASK_ALPHA) != 0;
  if (type == PNG_COLOR_TYPE_GRAY && layout->bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (type == PNG_COLOR_TYPE_PALETTE) {
    png_set_palette_to_rgb(png);  // expands tRNS to alpha as well
    alpha = layout->has_trns;
  }
  const bool want_alpha = mode == ImageReadMode::gray_alpha || mode == ImageReadMode::rgb_alpha;
  const bool want_color = mode == ImageReadMode::rgb || mode == ImageReadMode::rgb_alpha;
  if (mode != ImageReadMode::unchanged) {
    if (want_color && !color) png_set_gray_to_rgb(png);
    if (!want_color && color) png_set_rgb_to_gray(png, 1, 0.2989, 0.587);
    if (want_alpha && !alpha) png_set_add_alpha(png, 0xff, PNG_FILLER_AFTER);
    if (!want_alpha && alpha) png_set_strip_alpha(png);
  }
  layout->passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  layout->channels = png_get_channels(png, info);
  return png_get_rowbytes(png, info) == size_t(layout->width) * size_t(layout->channels);
}

// Phase 3: the pixels, every interlace pass over the whole buffer (libpng fills in each pass's
// pixels), rows of width * channels bytes.
bool png_read_pixels(png_structp png, const PngLayout* layout, uint8_t* pixels) {
  if (setjmp(png_jmpbuf(png))) return false;
  const size_t stride = size_t(layout->width) * size_t(layout->channels);
  for (int pass = 0; pass < layout->passes; ++pass)
    for (png_uint_32 row = 0; row < layout->height; ++row)
      png_read_row(png, pixels + row * stride, nullptr);
  return true;
}

PngLayout png_open(std::string_view bytes, const std::string& source, PngReadGuard& guard,
                   PngSource& input) {
  input.data = reinterpret_cast<const unsigned char*>(bytes.data());
  input.size = bytes.size();
  guard.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &input, png_on_error, png_on_warning);
  if (guard.png) guard.info = png_create_info_struct(guard.png);
  if (!guard.png || !guard.info) fail(source, "libpng could not allocate its state");
  png_set_read_fn(guard.png, &input, png_on_read);
  PngLayout layout;
  if (!png_read_layout(guard.png, guard.info, &layout))
    fail(source, fmt::format("corrupt or truncated PNG: {}", input.message));
  check_size(source, "PNG", layout.width, layout.height);
  return layout;
}

Tensor decode_png(std::string_view bytes, ImageReadMode mode, const std::string& source) {
  PngReadGuard guard;
  PngSource input;
  PngLayout layout = png_open(bytes, source, guard, input);
  if (layout.bit_depth == 16)
    fail(source,
         "16-bit PNG is not supported (torchvision 0.14's read_image refuses it too); "
         "save it with 8 bits per channel");
  if (!png_set_mode(guard.png, guard.info, mode, &layout))
    fail(source, fmt::format("PNG cannot be read in mode {}: {}", image_read_mode_name(mode),
                             input.message[0] ? input.message : "unexpected row size"));
  std::vector<uint8_t> pixels(size_t(layout.width) * layout.height * layout.channels);
  if (!png_read_pixels(guard.png, &layout, pixels.data()))
    fail(source, fmt::format("corrupt or truncated PNG: {}", input.message));
  return planar_from_interleaved(pixels, layout.height, layout.width, layout.channels);
}

// ---- JPEG reading

struct JpegErrors {
  jpeg_error_mgr base;  // first: libjpeg sees a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
};

void jpeg_on_error(j_common_ptr info) {
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

// Level -1 is a warning (premature end of data, corrupt data): an error here. Trace messages
// (level >= 0) are ignored. Nothing is printed.
void jpeg_on_message(j_common_ptr info, int level) {
  if (level < 0) jpeg_on_error(info);
}

void jpeg_print_nothing(j_common_ptr) {}

struct JpegGuard {
  jpeg_decompress_struct info{};
  JpegErrors errors{};
  bool created = false;
  ~JpegGuard() {
    if (created) jpeg_destroy_decompress(&info);
  }
};

// Phase 1: the header.
bool jpeg_read_layout(JpegGuard* guard, const unsigned char* data, size_t size) {
  if (setjmp(guard->errors.jump)) return false;
  jpeg_create_decompress(&guard->info);
  guard->created = true;
  jpeg_mem_src(&guard->info, data, static_cast<unsigned long>(size));
  jpeg_read_header(&guard->info, TRUE);
  return true;
}

// Phase 2: the output colour space, then the decoder started (sizes known after this).
bool jpeg_start(JpegGuard* guard, J_COLOR_SPACE out_space) {
  if (setjmp(guard->errors.jump)) return false;
  guard->info.out_color_space = out_space;
  jpeg_start_decompress(&guard->info);
  return true;
}

// Phase 3: the rows, then the end of the data.
bool jpeg_read_pixels(JpegGuard* guard, uint8_t* pixels) {
  if (setjmp(guard->errors.jump)) return false;
  jpeg_decompress_struct& info = guard->info;
  const size_t stride = size_t(info.output_width) * size_t(info.output_components);
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = pixels + size_t(info.output_scanline) * stride;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  return true;
}

void jpeg_open(std::string_view bytes, const std::string& source, JpegGuard& guard) {
  guard.info.err = jpeg_std_error(&guard.errors.base);
  guard.errors.base.error_exit = jpeg_on_error;
  guard.errors.base.emit_message = jpeg_on_message;
  guard.errors.base.output_message = jpeg_print_nothing;
  if (!jpeg_read_layout(&guard, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()))
    fail(source, fmt::format("corrupt or truncated JPEG: {}", guard.errors.message));
  check_size(source, "JPEG", guard.info.image_width, guard.info.image_height);
}

bool jpeg_is_cmyk(const jpeg_decompress_struct& info) {
  return info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
}

// The colour space libjpeg writes for `mode` (alpha is added afterwards).
J_COLOR_SPACE jpeg_output_space(const jpeg_decompress_struct& info, ImageReadMode mode) {
  if (mode == ImageReadMode::gray || mode == ImageReadMode::gray_alpha) return JCS_GRAYSCALE;
  if (mode == ImageReadMode::rgb || mode == ImageReadMode::rgb_alpha) return JCS_RGB;
  if (jpeg_is_cmyk(info)) return JCS_CMYK;
  return info.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
}

// [C, H, W] plus an opaque alpha plane (JPEG has no alpha).
Tensor with_opaque_alpha(const Tensor& image) {
  const int64_t channels = image.size(0), plane = image.size(1) * image.size(2);
  Tensor out = Tensor::empty({channels + 1, image.size(1), image.size(2)}, DType::u8);
  std::memcpy(out.data<uint8_t>(), image.data<uint8_t>(), size_t(channels * plane));
  std::memset(out.data<uint8_t>() + channels * plane, 0xff, size_t(plane));
  return out;
}

Tensor decode_jpeg(std::string_view bytes, ImageReadMode mode, const std::string& source) {
  JpegGuard guard;
  jpeg_open(bytes, source, guard);
  if (jpeg_is_cmyk(guard.info) && mode != ImageReadMode::unchanged)
    fail(source, fmt::format("CMYK JPEG cannot be read in mode {} (libjpeg has no CMYK to grey or "
                             "RGB conversion; torchvision 0.14 refuses it too): convert it to RGB "
                             "or read it unchanged",
                             image_read_mode_name(mode)));
  if (!jpeg_start(&guard, jpeg_output_space(guard.info, mode)))
    fail(source, fmt::format("corrupt JPEG: {}", guard.errors.message));
  const jpeg_decompress_struct& info = guard.info;
  std::vector<uint8_t> pixels(size_t(info.output_width) * info.output_height *
                              info.output_components);
  if (!jpeg_read_pixels(&guard, pixels.data()))
    fail(source, fmt::format("corrupt or truncated JPEG: {}", guard.errors.message));
  Tensor image = planar_from_interleaved(pixels, info.output_height, info.output_width,
                                         info.output_components);
  if (mode == ImageReadMode::gray_alpha || mode == ImageReadMode::rgb_alpha)
    return with_opaque_alpha(image);
  return image;
}

// ---- Which format

enum class Format { png, jpeg };

bool starts_with(std::string_view bytes, std::string_view prefix) {
  return bytes.substr(0, prefix.size()) == prefix;
}

// A name for a format that is recognised but not decoded, else "".
const char* other_format(std::string_view bytes) {
  if (starts_with(bytes, "GIF8")) return "GIF";
  if (starts_with(bytes, "BM")) return "BMP";
  if (starts_with(bytes, "RIFF") && bytes.substr(8, 4) == "WEBP") return "WebP";
  if (starts_with(bytes, std::string_view("II*\0", 4)) ||
      starts_with(bytes, std::string_view("MM\0*", 4)))
    return "TIFF";
  if (bytes.size() >= 2 && bytes[0] == 'P' && bytes[1] >= '1' && bytes[1] <= '6') return "PNM";
  return "";
}

Format sniff(std::string_view bytes, const std::string& source) {
  static constexpr std::string_view png_signature("\x89PNG\r\n\x1a\n", 8);
  static constexpr std::string_view jpeg_start_of_image("\xff\xd8\xff", 3);
  if (bytes.empty()) fail(source, "empty file (0 bytes): not an image");
  if (starts_with(bytes, png_signature)) return Format::png;
  if (starts_with(bytes, jpeg_start_of_image)) return Format::jpeg;
  if (starts_with(png_signature, bytes) || starts_with(jpeg_start_of_image, bytes))
    fail(source, fmt::format("truncated: {} bytes, the start of a PNG or JPEG signature and "
                             "nothing more",
                             bytes.size()));
  if (const char* name = other_format(bytes); name[0])
    fail(source, fmt::format("unsupported image format {} (only PNG and JPEG are decoded)", name));
  std::string first;
  for (size_t i = 0; i < std::min<size_t>(bytes.size(), 8); ++i)
    first += fmt::format("{}{:02x}", i ? " " : "", static_cast<unsigned char>(bytes[i]));
  fail(source, fmt::format("not a PNG or JPEG image (it starts with the bytes {})", first));
}

}  // namespace

Tensor decode_image(std::string_view bytes, ImageReadMode mode, const std::string& source) {
  return sniff(bytes, source) == Format::png ? decode_png(bytes, mode, source)
                                             : decode_jpeg(bytes, mode, source);
}

Tensor read_image(const std::string& path, ImageReadMode mode) {
  return decode_image(read_file(path), mode, path);
}

ImageHeader read_image_header(std::string_view bytes, const std::string& source) {
  if (sniff(bytes, source) == Format::png) {
    PngReadGuard guard;
    PngSource input;
    const PngLayout layout = png_open(bytes, source, guard, input);
    const int64_t channels = layout.color_type == PNG_COLOR_TYPE_PALETTE ? (layout.has_trns ? 4 : 3)
                                                                         : int64_t(layout.channels);
    return {"PNG", int64_t(layout.width), int64_t(layout.height), channels};
  }
  JpegGuard guard;
  jpeg_open(bytes, source, guard);
  return {"JPEG", int64_t(guard.info.image_width), int64_t(guard.info.image_height),
          int64_t(guard.info.num_components)};
}

// ---- PNG writing

namespace {

struct PngSink {
  std::string* out = nullptr;
  char message[256] = {};
};

void png_on_write(png_structp png, png_bytep data, png_size_t count) {
  auto* sink = static_cast<PngSink*>(png_get_io_ptr(png));
  try {
    sink->out->append(reinterpret_cast<const char*>(data), count);
  } catch (...) {  // an exception must not cross libpng's C frames
    png_error(png, "out of memory");
  }
}

void png_on_flush(png_structp) {}

struct PngWriteGuard {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngWriteGuard() {
    if (png) png_destroy_write_struct(&png, info ? &info : nullptr);
  }
};

bool png_write_pixels(png_structp png, png_infop info, int64_t height, int64_t width,
                      int color_type, int channels, const uint8_t* pixels) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_IHDR(png, info, png_uint_32(width), png_uint_32(height), 8, color_type,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  const size_t stride = size_t(width) * size_t(channels);
  for (int64_t row = 0; row < height; ++row)
    png_write_row(png, const_cast<png_bytep>(pixels + size_t(row) * stride));
  png_write_end(png, nullptr);
  return true;
}

}  // namespace

std::string encode_png(const Tensor& image) {
  if (!image.defined() || image.dtype() != DType::u8 || image.dim() != 3 || image.size(0) < 1 ||
      image.size(0) > 4 || image.size(1) < 1 || image.size(2) < 1)
    throw std::invalid_argument(fmt::format(
        "encode_png: the image must be uint8 [C, H, W] with C in 1..4 and H, W >= 1, not {}",
        image.defined() ? image.describe() : "an undefined tensor"));
  const int64_t channels = image.size(0), height = image.size(1), width = image.size(2);
  if (height * width > kMaxImagePixels)
    throw std::invalid_argument(
        fmt::format("encode_png: {} x {} is more than {} pixels", height, width, kMaxImagePixels));
  const Tensor planar = image.contiguous();
  const uint8_t* in = planar.data<uint8_t>();
  const int64_t plane = height * width;
  std::vector<uint8_t> pixels(size_t(plane * channels));
  for (int64_t p = 0; p < plane; ++p)
    for (int64_t c = 0; c < channels; ++c) pixels[p * channels + c] = in[c * plane + p];
  static constexpr int kColorTypes[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                        PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
  std::string out;
  PngSink sink{&out};
  PngWriteGuard guard;
  guard.png = png_create_write_struct(
      PNG_LIBPNG_VER_STRING, &sink,
      [](png_structp png, png_const_charp text) {
        auto* s = static_cast<PngSink*>(png_get_error_ptr(png));
        std::snprintf(s->message, sizeof s->message, "%s", text);
        png_longjmp(png, 1);
      },
      png_on_warning);
  if (guard.png) guard.info = png_create_info_struct(guard.png);
  if (!guard.png || !guard.info) throw std::runtime_error("encode_png: libpng could not start");
  png_set_write_fn(guard.png, &sink, png_on_write, png_on_flush);
  if (!png_write_pixels(guard.png, guard.info, height, width, kColorTypes[channels - 1],
                        int(channels), pixels.data()))
    throw std::runtime_error(fmt::format("encode_png: libpng failed: {}", sink.message));
  return out;
}

void write_png(const std::string& path, const Tensor& image) {
  write_file_atomic(path, encode_png(image));
}

}  // namespace dg
