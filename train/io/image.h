// PNG and JPEG images to uint8 tensors [C, H, W], as torchvision.io.read_image (torchvision 0.14)
// with its ImageReadMode, decoded by Debian's libpng and libjpeg-turbo; and PNG files written from
// such tensors. Not here: other formats (GIF, BMP, WebP, TIFF are named in the refusal), EXIF
// orientation, 16-bit output, resizing or any transform (train/data/ has those).
//   dg::Tensor rgb = dg::read_image("cat.jpg", dg::ImageReadMode::rgb);  // uint8 [3, H, W]
//   dg::write_png("grey.png", dg::Tensor::zeros({1, 28, 28}, dg::DType::u8));
//
// What each mode gives, and its reference (PNG and JPEG alike unless said):
//   unchanged   the file's own channels: grey 1, grey+alpha 2, RGB 3, RGBA 4 (read_image's).
//               A palette PNG gives RGB, or RGBA when it has a tRNS chunk (read_image 0.14
//               returns the raw index bytes instead); a CMYK JPEG gives its 4 channels as
//               libjpeg stores them (Adobe's inverted CMYK, as read_image).
//   gray        1 channel. Colour PNG: libpng's rgb_to_gray with read_image's coefficients
//               (0.2989, 0.587; alpha dropped): (9794 R + 19235 G + 3739 B) >> 15, exactly
//               read_image's. Colour JPEG: libjpeg's own grey (the luma plane), exactly
//               read_image's. PIL's .convert("L") ((19595 R + 38470 G + 7471 B + 2^15) >> 16 of
//               the RGB decode) differs by 1 on the PNG goldens and up to 2 on noisy 4:2:0 JPEGs;
//               equal on grey images.
//   gray_alpha  gray plus the alpha (255 where the image has none). JPEG: alpha 255
//               everywhere (read_image 0.14 refuses this mode for JPEG). 1/2/4-bit grey PNG:
//               255 (read_image 0.14 gives 2^bits - 1, libpng's filler taken at 8 bits).
//   rgb         3 channels: grey replicated, alpha dropped, palette looked up. Equal to both
//               read_image and PIL's .convert("RGB") (ImageFolder's default loader) for every
//               8-bit PNG and every JPEG the goldens hold (tools/torch_goldens_images.py).
//   rgb_alpha   rgb plus the alpha (tRNS for a palette; 255 where the image has none, where
//               read_image 0.14 leaves a palette without tRNS short of its fourth channel;
//               JPEG: 255, where read_image 0.14 refuses).
// A tRNS chunk in a grey or RGB PNG is ignored (as read_image). Grey PNGs of 1, 2 or 4 bits are
// expanded to 0..255 (libpng's expand_gray_1_2_4_to_8); Adam7 interlaced PNGs and progressive
// JPEGs decode as any other. 16-bit PNGs are refused, as read_image 0.14 refuses them ("At most
// 8-bit PNG images are supported"). CMYK and YCCK JPEGs are refused in every mode but unchanged
// (read_image 0.14: "Unsupported color conversion request").
//
// Errors: a missing, empty, truncated or corrupt file, a file that is neither PNG nor JPEG, or an
// unsupported kind (16-bit, CMYK to RGB, more than kMaxImagePixels pixels) is a
// std::runtime_error naming the file (or the `source` given for bytes) and what is wrong. Any
// libjpeg warning (premature end of data, corrupt data) is an error, as a truncated JPEG is for
// read_image and PIL. A PNG is read up to its last pixel row: one cut only in its IEND chunk
// decodes, as it does for read_image and PIL. libpng and libjpeg print nothing. A decode runs on
// the calling thread with no shared state: loader workers decode at once.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "tensor/tensor.h"

namespace dg {

// torchvision.io.ImageReadMode.
enum class ImageReadMode { unchanged, gray, gray_alpha, rgb, rgb_alpha };
const char* image_read_mode_name(ImageReadMode mode);  // "unchanged", "gray", ...

// The largest image decoded, in pixels (PIL's DecompressionBombError threshold, 2 * 89478485):
// a corrupt header claiming a huge image is refused before anything is allocated.
inline constexpr int64_t kMaxImagePixels = 178956970;

// The file at `path`, decoded (PNG or JPEG by its first bytes, whatever its extension).
Tensor read_image(const std::string& path, ImageReadMode mode = ImageReadMode::unchanged);
// Encoded bytes in memory (torchvision.io.decode_image); `source` names them in errors.
Tensor decode_image(std::string_view bytes, ImageReadMode mode = ImageReadMode::unchanged,
                    const std::string& source = "image bytes");

// An image's size and kind from its header alone (nothing decoded past the header).
struct ImageHeader {
  std::string format;  // "PNG" or "JPEG"
  int64_t width = 0, height = 0;
  int64_t channels = 0;  // the unchanged mode's channel count
};
ImageHeader read_image_header(std::string_view bytes, const std::string& source = "image bytes");

// PNG bytes of a uint8 [C, H, W] tensor, C = 1 (grey), 2 (grey+alpha), 3 (RGB) or 4 (RGBA); 8
// bits, not interlaced, libpng's default compression. Anything else is std::invalid_argument.
std::string encode_png(const Tensor& image);
// encode_png written to `path` through write_file_atomic (train/io/files.h).
void write_png(const std::string& path, const Tensor& image);

}  // namespace dg
