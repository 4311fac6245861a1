#!/usr/bin/env python3
"""Writes tests/transforms_goldens.h: torchvision 0.14's tensor-path outputs of the functional
transforms (torchvision.transforms.functional on tensors) for tests/test_transforms.cpp.

Offline only: nothing in the build or the tests runs this script or needs PyTorch; it is kept so
the values can be regenerated and audited (/usr/bin/python3 tools/torch_goldens_transforms.py from
the repository's root, torch 1.13 + torchvision 0.14).

Inputs: small seeded images, uint8 and float (3x5x7 RGB, 1x4x5 grey, a float64 RGB and a batch of
two float32 RGB images [2, 3, 3, 4]). Cases: one functional call with fixed parameters each; the
C++ test calls the same function with the same parameters (a table: op name, input, parameters)
and compares, float within 1e-6, uint8 within 1 unit.
"""
import numpy
import torch
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode

gen = torch.Generator().manual_seed(54)


def u8(shape):
    x = torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8)
    x.view(-1)[0], x.view(-1)[1] = 0, 255  # the extremes, for the clamps
    return x


IMAGES = {
    "rgb_u8": u8((3, 5, 7)),
    "grey_u8": u8((1, 4, 5)),
    "rgb_f32": torch.rand((3, 5, 7), generator=gen),
    "grey_f32": torch.rand((1, 4, 5), generator=gen),
    "rgb_f64": torch.rand((3, 5, 7), generator=gen, dtype=torch.float64),
    "batch_f32": torch.rand((2, 3, 3, 4), generator=gen),
}
DTYPES = {torch.uint8: "uint8", torch.float32: "float32", torch.float64: "float64"}
DTYPE_CODES = {torch.float32: 0, torch.float64: 1, torch.uint8: 2}  # the C++ test's table
MODES = ["constant", "edge", "reflect", "symmetric"]
INTERP = [InterpolationMode.BILINEAR, InterpolationMode.NEAREST]

cases = []


def fmt(x, dtype):
    if dtype == torch.uint8:
        return str(int(x))
    if dtype == torch.float32:
        return numpy.format_float_positional(numpy.float32(x), trim="-")  # shortest round trip
    return repr(float(x))


def values(t):
    return ", ".join(fmt(v, t.dtype) for v in t.flatten().tolist())


def case(op, image, params, out):
    cases.append((op, image, [float(p) for p in params], out))


def geometry():
    for name in ["rgb_u8", "grey_f32", "batch_f32"]:
        img = IMAGES[name]
        case("hflip", name, [], F.hflip(img))
        case("vflip", name, [], F.vflip(img))
    crops = [(1, 2, 3, 4), (-2, 3, 4, 6), (3, 5, 4, 3), (-1, -1, 7, 9), (0, 0, 5, 7)]
    for name in ["rgb_u8", "grey_u8", "batch_f32"]:
        for top, left, h, w in crops:
            case("crop", name, [top, left, h, w], F.crop(IMAGES[name], top, left, h, w))
    for name in ["rgb_u8", "grey_f32", "batch_f32"]:
        for h, w in [(3, 3), (4, 6), (6, 9), (5, 4), (8, 7), (2, 10)]:
            case("center_crop", name, [h, w], F.center_crop(IMAGES[name], [h, w]))


def padding():
    pads = [(1, 2, 3, 1), (0, 3, 2, 0)]
    # geometry copies values: the float images only check the float fill and the 4-d batch
    for name, modes in [("rgb_u8", MODES), ("grey_u8", MODES), ("rgb_f32", ["constant"]),
                        ("batch_f32", ["constant", "edge", "reflect"])]:
        img = IMAGES[name]
        for mode in modes:
            mode_code = MODES.index(mode)
            for l, t, r, b in pads:
                fill = 7 if img.dtype == torch.uint8 else 0.5
                fill = fill if mode == "constant" else 0
                if mode == "reflect" and (max(l, r) >= img.shape[-1] or max(t, b) >= img.shape[-2]):
                    continue  # torch's reflect pad needs padding < the side
                out = F.pad(img, [l, t, r, b], fill=fill, padding_mode=mode)
                case("pad", name, [l, t, r, b, fill, mode_code], out)
    # negative padding crops (constant and symmetric)
    for mode_code in (0, 3):
        out = F.pad(IMAGES["rgb_u8"], [-1, 1, 0, -2], padding_mode=MODES[mode_code])
        case("pad", "rgb_u8", [-1, 1, 0, -2, 0, mode_code], out)


def resizing():
    sizes = {"rgb": [(3, 4), (4, 4), (8, 11), (5, 3), (1, 1), (11, 2)],
             "grey": [(7, 3), (2, 2), (9, 8), (4, 9)], "batch": [(2, 7), (5, 2)]}
    for name in ["rgb_u8", "rgb_f32", "rgb_f64", "grey_u8", "grey_f32", "batch_f32"]:
        for h, w in sizes[name.split("_")[0]]:
            for code, mode in enumerate(INTERP):
                if name == "rgb_f64" and code == 1:
                    continue
                out = F.resize(IMAGES[name], [h, w], interpolation=mode)
                case("resize", name, [h, w, code], out)
    for name in ["rgb_u8", "rgb_f32"]:
        for top, left, h, w, oh, ow, code in [(1, 2, 3, 4, 6, 6, 0), (0, 0, 5, 7, 3, 4, 0),
                                              (2, 3, 3, 4, 5, 6, 1), (-1, 2, 5, 7, 4, 4, 0)]:
            out = F.resized_crop(IMAGES[name], top, left, h, w, [oh, ow], interpolation=INTERP[code])
            case("resized_crop", name, [top, left, h, w, oh, ow, code], out)


def colour():
    adjust = {"adjust_brightness": [0.5, 1.7], "adjust_contrast": [0.3, 1.6],
              "adjust_saturation": [0.2, 1.9], "adjust_hue": [-0.5, -0.3, 0.1, 0.5]}
    for op, factors in adjust.items():
        for name in ["rgb_u8", "rgb_f32", "rgb_f64", "grey_u8", "grey_f32", "batch_f32"]:
            for f in factors:
                case(op, name, [f], getattr(F, op)(IMAGES[name], f))
    for name in ["rgb_u8", "rgb_f32", "batch_f32"]:
        case("rgb_to_grayscale", name, [], F.rgb_to_grayscale(IMAGES[name]))


def dtypes_and_normalize():
    for name, target in [("rgb_u8", torch.float32), ("rgb_u8", torch.float64), ("grey_u8", torch.float32),
                         ("rgb_f32", torch.uint8), ("rgb_f64", torch.uint8), ("rgb_f32", torch.float64),
                         ("rgb_f64", torch.float32)]:
        out = F.convert_image_dtype(IMAGES[name], target)
        case("convert_image_dtype", name, [DTYPE_CODES[target]], out)
    for name, mean, std in [("rgb_f32", [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
                            ("rgb_f64", [0.5, 0.25, 0.125], [0.3, 0.7, 1.5]),
                            ("grey_f32", [0.1307], [0.3081]), ("rgb_f32", [0.5], [0.2]),
                            ("batch_f32", [0.1, 0.2, 0.3], [2.0, 3.0, 4.0])]:
        out = F.normalize(IMAGES[name], mean, std)
        case("normalize", name, [len(mean)] + mean + std, out)


def erasing():
    for name in ["rgb_u8", "rgb_f32", "batch_f32"]:
        img = IMAGES[name]
        c = img.shape[-3]
        for i, j, h, w, v in [(1, 2, 2, 4, [0.0]), (0, 0, 2, 2, [3.7]), (1, 1, 2, 3, [1.0, 2.0, 255.0][:c]),
                              (2, 3, 1, 1, [-1.5])]:
            if i + h > img.shape[-2] or j + w > img.shape[-1]:
                continue  # torchvision clips a region outside the image; ours refuses it
            out = F.erase(img, i, j, h, w, torch.tensor(v)[:, None, None])
            case("erase", name, [i, j, h, w] + v, out)


def main():
    geometry()
    padding()
    resizing()
    colour()
    dtypes_and_normalize()
    erasing()
    lines = ["// GENERATED by tools/torch_goldens_transforms.py; do not edit",
             "// torchvision 0.14's tensor-path outputs for tests/test_transforms.cpp (see the script).",
             "#pragma once", "#include <cstdint>", "#include <vector>", "",
             "struct TransformGoldenImage {", "  const char* name;", "  const char* dtype;",
             "  std::vector<int64_t> shape;", "  std::vector<double> values;", "};",
             "struct TransformGoldenCase {", "  const char* op;", "  const char* image;",
             "  std::vector<double> params;", "  const char* dtype;", "  std::vector<int64_t> shape;",
             "  std::vector<double> values;", "};", "",
             "inline const std::vector<TransformGoldenImage> kTransformImages{"]
    for name, img in IMAGES.items():
        lines.append(f'    {{"{name}", "{DTYPES[img.dtype]}", {{{", ".join(map(str, img.shape))}}},')
        lines.append(f"     {{{values(img)}}}}},")
    lines += ["};", "", "inline const std::vector<TransformGoldenCase> kTransformCases{"]
    for op, image, params, out in cases:
        shape = ", ".join(map(str, out.shape))
        lines.append(f'    {{"{op}", "{image}", {{{", ".join(repr(p) for p in params)}}}, '
                     f'"{DTYPES[out.dtype]}", {{{shape}}},')
        lines.append(f"     {{{values(out)}}}}},")
    lines.append("};")
    with open("tests/transforms_goldens.h", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"tests/transforms_goldens.h: {len(cases)} cases")


if __name__ == "__main__":
    main()
