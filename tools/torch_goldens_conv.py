#!/usr/bin/python3
"""Golden values of depthgrad's convolution and pooling ops from PyTorch (1.13), offline only.

Prints a C++ table (name -> values) of the forward outputs and the gradients of the loss
sum(y * G) (G a fixed pattern, not all ones: a plain sum hides index and transpose bugs) for conv2d
(groups, stride, padding, dilation, bias), conv_transpose2d (output_padding, groups), conv1d,
max_pool2d (values, indices, input gradient; the inputs have ties), avg_pool2d (both
count_include_pad settings, ceil_mode) and adaptive_avg_pool2d, all in float64. Inputs are exact
dyadic patterns, the same pattern() tests/test_conv_ops.cpp builds, so both sides start from the
same bits. The table was pasted into tests/test_conv_ops.cpp between its GOLDENS markers.

Not needed to build or test depthgrad: run it by hand with Debian's python3-torch,
    /usr/bin/python3 tools/torch_goldens_conv.py > table.txt
It refuses nothing and checks nothing; it only prints.
"""
import torch
import torch.nn.functional as F


def pattern(n, mul, mod, shift, div):
    return torch.tensor([((k * mul) % mod - shift) / div for k in range(n)], dtype=torch.float64)


def leaf(shape, mul, mod, shift, div):
    n = 1
    for s in shape:
        n *= s
    return pattern(n, mul, mod, shift, div).reshape(shape).requires_grad_(True)


def weights_for(y):
    return pattern(y.numel(), 3, 11, 5, 4.0).reshape(y.shape)


def emit(name, t):
    values = ", ".join(repr(float(v)) for v in t.detach().reshape(-1).tolist())
    print(f'    {{"{name}", {{{values}}}}},')


def run(name, fn, inputs, names):
    y = fn(*inputs)
    values = y[0] if isinstance(y, tuple) else y
    emit(f"{name}.y", values)
    if isinstance(y, tuple):
        emit(f"{name}.indices", y[1].to(torch.float64))
    (values * weights_for(values)).sum().backward()
    for t, n in zip(inputs, names):
        emit(f"{name}.d{n}", t.grad)


def main():
    run("conv2d", lambda x, w, b: F.conv2d(x, w, b, (2, 1), (1, 1), (1, 2), 2),
        [leaf((2, 4, 4, 5), 7, 23, 11, 8.0), leaf((6, 2, 3, 2), 5, 17, 8, 16.0),
         leaf((6,), 3, 7, 3, 4.0)], ["x", "w", "b"])
    run("conv_transpose2d",
        lambda x, w, b: F.conv_transpose2d(x, w, b, (2, 3), (1, 0), (1, 2), 2, (1, 1)),
        [leaf((1, 4, 3, 3), 7, 23, 11, 8.0), leaf((4, 2, 3, 2), 5, 17, 8, 16.0),
         leaf((4,), 3, 7, 3, 4.0)], ["x", "w", "b"])
    run("conv1d", lambda x, w, b: F.conv1d(x, w, b, 2, 1, 2),
        [leaf((2, 3, 7), 7, 23, 11, 8.0), leaf((4, 3, 3), 5, 17, 8, 16.0),
         leaf((4,), 3, 7, 3, 4.0)], ["x", "w", "b"])
    run("max_pool2d",
        lambda x: F.max_pool2d(x, 3, 2, 1, 1, ceil_mode=True, return_indices=True),
        [leaf((1, 2, 5, 5), 7, 13, 6, 4.0)], ["x"])
    run("avg_pool2d.no_pad",
        lambda x: F.avg_pool2d(x, (3, 2), (2, 2), (1, 1), ceil_mode=True, count_include_pad=False),
        [leaf((1, 2, 5, 5), 7, 13, 6, 4.0)], ["x"])
    run("avg_pool2d.pad",
        lambda x: F.avg_pool2d(x, (3, 2), (2, 2), (1, 1), ceil_mode=True, count_include_pad=True),
        [leaf((1, 2, 5, 5), 7, 13, 6, 4.0)], ["x"])
    run("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (3, 4)),
        [leaf((1, 2, 5, 7), 7, 13, 6, 4.0)], ["x"])


if __name__ == "__main__":
    main()
