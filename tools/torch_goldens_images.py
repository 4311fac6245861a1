#!/usr/bin/env python3
"""Writes the tiny images of tests/data/images/ and tests/image_goldens.h, their decodes by
torchvision 0.14's torchvision.io.read_image, for tests/test_image_io.cpp.

Offline only: nothing in the build or the tests runs this script or needs Python; it is kept so
the files and values can be regenerated and audited (/usr/bin/python3
tools/torch_goldens_images.py from the repository's root: Debian's python3 with PIL 9.4 and
torchvision 0.14).
 - PNG (7 x 5): grey, grey+alpha, RGB, RGBA, palette with tRNS (4-bit), palette without it
   (8-bit), 1-bit grey (PIL), 2- and 4-bit grey and an Adam7-interlaced RGB (written by the small
   encoder below, as PIL writes neither), 16-bit grey and RGB (refused).
 - JPEG (7 x 5, quality 90): grey, 4:4:4, 4:2:2, 4:2:0, progressive 4:2:0, CMYK.
 - Broken files: a truncated PNG and JPEG, a PNG with a damaged IDAT byte (its deflate data broken), a JPEG
   with a damaged Huffman table, an empty file, a text file, a GIF.
Each decodable file gets read_image's output in every mode (unchanged, gray, gray_alpha, rgb,
rgb_alpha) where read_image 0.14 gives one. Where it does not, or gives something we do not
match, the golden is built from read_image's other modes and says so in its `reference` field:
 - a palette PNG in mode unchanged: read_image returns the raw index bytes; ours is the rgb (no
   tRNS) or rgb_alpha (tRNS) decode;
 - a palette PNG without tRNS in rgb_alpha or gray_alpha: read_image writes 3 (or 1) channels
   into a 4- (or 2-) channel tensor; ours is the rgb (gray) decode with alpha 255;
 - a JPEG in gray_alpha or rgb_alpha: read_image refuses; ours is the gray (rgb) decode with
   alpha 255;
 - a 1-, 2- or 4-bit grey PNG in gray_alpha or rgb_alpha: read_image's alpha is 2^bits - 1 (1,
   3 or 15: libpng's filler is taken at the output's 8 bits); ours is 255.
The script also checks the claims of train/io/image.h against PIL: rgb equals PIL's
.convert("RGB") for every file decoded, and it prints the largest difference between gray and
PIL's .convert("L").
"""
import os
import struct
import zlib

import numpy as np
import torch
from PIL import Image
from torchvision.io import ImageReadMode, read_image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIR = os.path.join(ROOT, "tests", "data", "images")
HEADER = os.path.join(ROOT, "tests", "image_goldens.h")
W, H = 7, 5
MODES = {"unchanged": ImageReadMode.UNCHANGED, "gray": ImageReadMode.GRAY,
         "gray_alpha": ImageReadMode.GRAY_ALPHA, "rgb": ImageReadMode.RGB,
         "rgb_alpha": ImageReadMode.RGB_ALPHA}
rng = np.random.default_rng(54)


def path(name):
    return os.path.join(DIR, name)


# ---- a small PNG encoder for what PIL does not write (2/4-bit grey, 16-bit RGB, Adam7)

ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]  # x0, y0, dx, dy of each pass


def pack_row(samples, bit_depth):
    if bit_depth == 16:
        return b"".join(struct.pack(">H", int(s)) for s in samples)
    if bit_depth == 8:
        return bytes(int(s) for s in samples)
    per_byte = 8 // bit_depth
    out = bytearray()
    for i in range(0, len(samples), per_byte):
        byte = 0
        for k in range(per_byte):
            value = int(samples[i + k]) if i + k < len(samples) else 0
            byte |= value << (8 - bit_depth * (k + 1))
        out.append(byte)
    return bytes(out)


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def own_png(array, bit_depth, color_type, interlace=False):
    """array: [H, W, channels] of samples (already in 0 .. 2^bit_depth - 1)."""
    height, width = array.shape[:2]
    raw = bytearray()
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    for x0, y0, dx, dy in passes:
        sub = array[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        for row in sub:
            raw += b"\0" + pack_row(row.reshape(-1), bit_depth)
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, int(interlace))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(bytes(raw)))
            + chunk(b"IEND", b""))


def write(name, data):
    with open(path(name), "wb") as f:
        f.write(data)


def make_files():
    os.makedirs(DIR, exist_ok=True)
    rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    alpha = rng.integers(0, 256, (H, W), dtype=np.uint8)
    grey = rng.integers(0, 256, (H, W), dtype=np.uint8)
    Image.fromarray(grey, "L").save(path("grey.png"))
    Image.fromarray(np.dstack([grey, alpha]), "LA").save(path("grey_alpha.png"))
    Image.fromarray(rgb, "RGB").save(path("rgb.png"))
    Image.fromarray(np.dstack([rgb, alpha]), "RGBA").save(path("rgba.png"))
    small = Image.new("P", (W, H))
    small.putpalette(rng.integers(0, 256, 16 * 3).tolist())
    small.putdata(rng.integers(0, 16, W * H).tolist())
    small.save(path("palette_trns.png"), transparency=bytes([0, 64, 128, 200] + [255] * 12))
    big = Image.new("P", (W, H))
    big.putpalette(rng.integers(0, 256, 256 * 3).tolist())
    big.putdata(rng.integers(0, 256, W * H).tolist())
    big.save(path("palette.png"), bits=8)
    Image.fromarray(rng.integers(0, 2, (H, W)).astype(bool)).save(path("grey1.png"))
    write("grey2.png", own_png(rng.integers(0, 4, (H, W, 1)), 2, 0))
    write("grey4.png", own_png(rng.integers(0, 16, (H, W, 1)), 4, 0))
    write("rgb_interlaced.png", own_png(rgb, 8, 2, interlace=True))
    Image.fromarray(rng.integers(0, 65536, (H, W)).astype(np.uint16)).save(path("grey16.png"))
    write("rgb16.png", own_png(rng.integers(0, 65536, (H, W, 3)), 16, 2))
    # JPEG: smooth content plus noise, so that subsampling matters but the files stay small
    yy, xx = np.mgrid[0:H, 0:W]
    smooth = np.dstack([xx * 30 + 20, yy * 40 + 30, (xx + yy) * 15 + 60]).astype(np.int64)
    photo = np.clip(smooth + rng.integers(-20, 21, (H, W, 3)), 0, 255).astype(np.uint8)
    Image.fromarray(photo[:, :, 0], "L").save(path("jpeg_grey.jpg"), quality=90)
    for name, subsampling in [("444", 0), ("422", 1), ("420", 2)]:
        Image.fromarray(photo, "RGB").save(path(f"jpeg_{name}.jpg"), quality=90,
                                           subsampling=subsampling)
    Image.fromarray(photo, "RGB").save(path("jpeg_progressive.jpg"), quality=90, subsampling=2,
                                       progressive=True)
    Image.fromarray(photo, "RGB").convert("CMYK").save(path("jpeg_cmyk.jpg"), quality=90)
    make_broken_files()


def make_broken_files():
    png = open(path("rgb.png"), "rb").read()
    write("truncated.png", png[: len(png) // 2])
    idat = png.index(b"IDAT")
    damaged = bytearray(png)
    damaged[idat + 8] ^= 0xFF
    write("corrupt.png", bytes(damaged))
    jpeg = open(path("jpeg_420.jpg"), "rb").read()
    write("truncated.jpg", jpeg[: len(jpeg) * 2 // 3])
    dht = jpeg.index(b"\xff\xc4")
    damaged = bytearray(jpeg)
    damaged[dht + 5: dht + 21] = b"\xff" * 16  # Huffman code counts that overflow the table
    write("corrupt.jpg", bytes(damaged))
    write("empty.png", b"")
    write("not_an_image.png", b"<!DOCTYPE html>\n<html>not an image</html>\n")
    Image.fromarray(np.zeros((H, W), np.uint8), "L").save(path("unsupported.gif"))


DECODED = ["grey.png", "grey_alpha.png", "rgb.png", "rgba.png", "palette_trns.png", "palette.png",
           "grey1.png", "grey2.png", "grey4.png", "rgb_interlaced.png", "jpeg_grey.jpg",
           "jpeg_444.jpg", "jpeg_422.jpg", "jpeg_420.jpg", "jpeg_progressive.jpg",
           "jpeg_cmyk.jpg"]


def with_alpha(image):
    return torch.cat([image, torch.full_like(image[:1], 255)])


def golden(name, mode):
    """(tensor or None, reference note or torchvision's refusal)."""
    file = path(name)
    palette = name.startswith("palette")
    jpeg = name.endswith(".jpg")
    if palette and mode == "unchanged":
        tv = "rgb_alpha" if name == "palette_trns.png" else "rgb"
        return read_image(file, MODES[tv]), f"read_image {tv} (read_image unchanged gives indices)"
    try:
        low_bits = name in ("grey1.png", "grey2.png", "grey4.png")
        if (name == "palette.png" or jpeg or low_bits) and mode in ("gray_alpha", "rgb_alpha"):
            base = mode.split("_")[0]
            return with_alpha(read_image(file, MODES[base])), f"read_image {base} + alpha 255"
        return read_image(file, MODES[mode]), "read_image"
    except RuntimeError as e:
        return None, str(e)


def check_against_pil(name, decodes):
    image = Image.open(path(name))
    if decodes.get("rgb") is not None:
        pil_rgb = torch.from_numpy(np.asarray(image.convert("RGB")).copy()).permute(2, 0, 1)
        assert torch.equal(decodes["rgb"], pil_rgb), f"{name}: rgb differs from PIL's"
    if decodes.get("gray") is not None:
        pil_l = torch.from_numpy(np.asarray(image.convert("L")).copy())[None]
        diff = (decodes["gray"].int() - pil_l.int()).abs().max().item()
        print(f"{name}: gray vs PIL convert('L'): max difference {diff}")


def cpp_bytes(t):
    return ", ".join(str(v) for v in t.reshape(-1).tolist())


def main():
    make_files()
    lines = ["// GENERATED by tools/torch_goldens_images.py; do not edit",
             "// torchvision 0.14's read_image of each file in tests/data/images/, every mode.",
             "#pragma once", "#include <cstdint>", "#include <vector>", "",
             "struct ImageGolden {",
             "  const char* file;", "  const char* mode;",
             "  const char* reference;  // read_image, or how it was built from read_image",
             "  int64_t channels, height, width;",
             "  std::vector<uint8_t> pixels;  // [C, H, W]",
             "};", "",
             "// read_image refuses these (its message in `reference`; channels 0).",
             "inline const std::vector<ImageGolden> kImageGoldens = {"]
    for name in DECODED:
        decodes = {}
        for mode in MODES:
            t, ref = golden(name, mode)
            decodes[mode] = t
            if t is None:
                lines.append(f'    {{"{name}", "{mode}", "{ref}", 0, 0, 0, {{}}}},')
            else:
                c, h, w = t.shape
                lines.append(f'    {{"{name}", "{mode}", "{ref}", {c}, {h}, {w}, {{{cpp_bytes(t)}}}}},')
        if name != "jpeg_cmyk.jpg":
            check_against_pil(name, decodes)
    lines += ["};", ""]
    with open(HEADER, "w") as f:
        f.write("\n".join(lines))
    total = sum(os.path.getsize(path(n)) for n in os.listdir(DIR))
    print(f"wrote {HEADER} and {len(os.listdir(DIR))} files ({total} bytes) in {DIR}")


if __name__ == "__main__":
    main()
