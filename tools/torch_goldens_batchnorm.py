#!/usr/bin/python3
"""Golden values of depthgrad's batch_norm and group_norm ops and its vision modules from PyTorch
(1.13), offline only.

Prints a C++ table (name -> values) of
  - the functional ops in float64: F.batch_norm in training (with running statistics: the updated
    running_mean/running_var too; and without) and in eval, F.group_norm with and without affine;
    forward values and the gradients of sum(y * G) (G a fixed pattern: a plain sum hides index
    bugs) for x, weight and bias;
  - the modules in float32: a Conv2d built after torch.manual_seed(0) (its default init, the state
    dict depthgrad loads), a BatchNorm2d with patterned weight, bias and running statistics, the
    output of conv then batch norm in training (and the running statistics and
    num_batches_tracked after it), then in eval; a BatchNorm1d with momentum=None (cumulative
    average) after two training batches.
Inputs are exact dyadic patterns, the same pattern() tests/kernel_test_helpers.h builds, so both
sides start from the same bits. The table was pasted into tests/test_batchnorm_ops.cpp and
tests/test_vision_modules.cpp between their GOLDENS markers.

Not needed to build or test depthgrad: run it by hand with Debian's python3-torch,
    /usr/bin/python3 tools/torch_goldens_batchnorm.py ops > ops.txt
    /usr/bin/python3 tools/torch_goldens_batchnorm.py modules > modules.txt
It refuses nothing and checks nothing; it only prints.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def pattern(n, mul, mod, shift, div, dtype=torch.float64):
    return torch.tensor([((k * mul) % mod - shift) / div for k in range(n)], dtype=dtype)


def leaf(shape, mul, mod, shift, div, dtype=torch.float64):
    n = 1
    for s in shape:
        n *= s
    return pattern(n, mul, mod, shift, div, dtype).reshape(shape).requires_grad_(True)


def weights_for(y):
    return pattern(y.numel(), 3, 11, 5, 4.0, y.dtype).reshape(y.shape)


def emit(name, t):
    values = ", ".join(repr(float(v)) for v in t.detach().reshape(-1).tolist())
    print(f'    {{"{name}", {{{values}}}}},')


def run(name, fn, inputs, names):
    y = fn(*inputs)
    emit(f"{name}.y", y)
    (y * weights_for(y)).sum().backward()
    for t, n in zip(inputs, names):
        emit(f"{name}.d{n}", t.grad)


def ops():
    # Running statistics start as patterns (variance positive) and are updated in place.
    rm = pattern(3, 5, 7, 3, 8.0)
    rv = pattern(3, 3, 5, -4, 4.0)
    run("batch_norm.train",
        lambda x, w, b: F.batch_norm(x, rm, rv, w, b, True, 0.2, 1e-5),
        [leaf((2, 3, 2, 3), 7, 23, 11, 8.0), leaf((3,), 5, 7, -3, 4.0), leaf((3,), 3, 7, 3, 4.0)],
        ["x", "w", "b"])
    emit("batch_norm.train.running_mean", rm)
    emit("batch_norm.train.running_var", rv)
    run("batch_norm.train_plain", lambda x: F.batch_norm(x, None, None, None, None, True, 0.1, 1e-5),
        [leaf((5, 3), 7, 13, 6, 4.0)], ["x"])
    run("batch_norm.eval",
        lambda x, w, b: F.batch_norm(x, pattern(3, 5, 7, 3, 8.0), pattern(3, 3, 5, -4, 4.0), w, b,
                                     False, 0.1, 1e-5),
        [leaf((2, 3, 4), 7, 23, 11, 8.0), leaf((3,), 5, 7, -3, 4.0), leaf((3,), 3, 7, 3, 4.0)],
        ["x", "w", "b"])
    run("group_norm.affine", lambda x, w, b: F.group_norm(x, 2, w, b, 1e-5),
        [leaf((2, 4, 2, 3), 7, 23, 11, 8.0), leaf((4,), 5, 7, -3, 4.0), leaf((4,), 3, 7, 3, 4.0)],
        ["x", "w", "b"])
    run("group_norm.plain", lambda x: F.group_norm(x, 3, None, None, 1e-5),
        [leaf((3, 6, 2), 7, 13, 6, 4.0)], ["x"])


def modules():
    torch.manual_seed(0)
    conv = nn.Conv2d(2, 3, 3, padding=1)
    bn = nn.BatchNorm2d(3, momentum=0.3)
    with torch.no_grad():
        bn.weight.copy_(pattern(3, 5, 7, -3, 4.0, torch.float32))
        bn.bias.copy_(pattern(3, 3, 7, 3, 4.0, torch.float32))
        bn.running_mean.copy_(pattern(3, 5, 7, 3, 8.0, torch.float32))
        bn.running_var.copy_(pattern(3, 3, 5, -4, 4.0, torch.float32))
    for name, t in conv.state_dict().items():
        emit(f"conv.{name}", t)
    for name, t in bn.state_dict().items():
        emit(f"bn.{name}", t.to(torch.float64))
    x = pattern(2 * 2 * 4 * 5, 7, 23, 11, 8.0, torch.float32).reshape(2, 2, 4, 5)
    with torch.no_grad():
        emit("model.train.y", bn(conv(x)))
        emit("model.train.running_mean", bn.running_mean)
        emit("model.train.running_var", bn.running_var)
        emit("model.train.num_batches_tracked", bn.num_batches_tracked.to(torch.float64))
        bn.eval()
        emit("model.eval.y", bn(conv(x)))
    cumulative = nn.BatchNorm1d(3, momentum=None)
    with torch.no_grad():
        cumulative(pattern(4 * 3, 7, 13, 6, 4.0, torch.float32).reshape(4, 3))
        cumulative(pattern(5 * 3 * 2, 5, 11, 4, 2.0, torch.float32).reshape(5, 3, 2))
    emit("cumulative.running_mean", cumulative.running_mean)
    emit("cumulative.running_var", cumulative.running_var)


if __name__ == "__main__":
    ops() if sys.argv[1:] == ["ops"] else modules()
