#!/usr/bin/env python3
"""Writes tests/pytorch_idioms/ops_shape_sort_goldens.h: PyTorch 1.13's values for the padding,
flipping, rolling, triangle, sorting, variance and one-hot idioms of
tests/test_pytorch_idioms_ops_shape_sort.cpp, each translated line by line there.

Offline only: nothing in the build or the tests runs this script or needs PyTorch; it is kept so
the values can be regenerated and audited (python3 tools/pytorch_idioms/ops_shape_sort.py from the
repository root, PyTorch 1.13). The snippets come from torch's documentation examples (torch.sort,
torch.topk, torch.var, torch.flip, torch.roll, torch.tril, F.pad, F.one_hot, nn.ReflectionPad*)
and common tutorial idioms (top-k accuracy, top-k sampling, causal masks, standardisation). Inputs
are literals both sides write, or arange; float32 goldens are computed in float32.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
OUT = os.path.join("tests", "pytorch_idioms", "ops_shape_sort_goldens.h")
lines = []

# torch.var's documentation input (also used for std, var_mean, sort)
A = [[0.2035, 1.2959, 1.8101, -0.4644], [1.5027, -0.3270, 0.5905, 0.6538],
     [-1.5745, 1.3330, -0.5596, -0.6548], [0.1264, -0.5080, 1.6420, 0.1992]]


def literal(v):
    v = float(v)
    if v != v:
        return "NAN"
    if v in (float("inf"), float("-inf")):
        return "INFINITY" if v > 0 else "-INFINITY"
    return repr(v)


def emit(name, t):
    t = torch.as_tensor(t)
    vals = ", ".join(literal(v) for v in t.reshape(-1).tolist())
    lines.append(f"inline const std::vector<double> {name} = {{{vals}}};")


def weights(n):
    """The loss weights of the gradients: ((k * 3) % 7 - 3) / 4 + 0.1, as the tests'."""
    return torch.tensor([((k * 3) % 7 - 3) / 4.0 + 0.1 for k in range(n)])


def grad_of(y, x):
    loss = (y * weights(y.numel()).reshape(y.shape).to(y.dtype)).sum()
    return torch.autograd.grad(loss, x)[0]


def both(name, fn):
    """fn(dtype) -> tensor, emitted as name64 and name32."""
    emit(name + "64", fn(torch.float64))
    emit(name + "32", fn(torch.float32))


def main():
    # F.pad's documentation
    t4d = torch.arange(3 * 3 * 4 * 2.0).reshape(3, 3, 4, 2)
    emit("kPad1d", F.pad(t4d, (1, 1), "constant", 0))
    emit("kPad2d", F.pad(t4d, (1, 1, 2, 2), "constant", 0))
    emit("kPad3dShape", list(F.pad(t4d, (0, 1, 2, 1, 3, 3)).shape))
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
    both("kPadReflect", lambda d: F.pad(x.to(d), (1, 1), mode="reflect"))
    # nn.ReflectionPad1d / 2d and nn.ReplicationPad2d documentation
    emit("kReflectionPad1d", nn.ReflectionPad1d(2)(torch.arange(8.0).reshape(1, 2, 4)))
    inp = torch.arange(9.0).reshape(1, 1, 3, 3)
    emit("kReflectionPad2d", nn.ReflectionPad2d(2)(inp))
    emit("kReplicationPad2d", nn.ReplicationPad2d(2)(inp))
    emit("kReplicationPad2dTuple", nn.ReplicationPad2d((1, 1, 2, 0))(inp))
    emit("kPadCircular", F.pad(inp, (1, 2, 3, 0), mode="circular"))
    emit("kConstantPad1d", nn.ConstantPad1d(2, 3.5)(torch.tensor([[1.0, -2.0, 3.0]])))
    # a gradient through reflect padding
    xr = torch.tensor([[0.5, -1.0, 2.0, 0.25, 1.5]], requires_grad=True)
    emit("kPadReflectGrad", grad_of(F.pad(xr, (2, 3), mode="reflect"), xr))
    # torch.topk's documentation
    both("kTopkValues", lambda d: torch.topk(torch.arange(1.0, 6.0, dtype=d), 3).values)
    emit("kTopkIndices", torch.topk(torch.arange(1.0, 6.0), 3).indices)
    # torch.sort's documentation (fixed values for randn)
    a = torch.tensor(A)
    both("kSortValues", lambda d: torch.sort(a.to(d)).values)
    emit("kSortIndices", torch.sort(a).indices)
    emit("kSort0Values", torch.sort(a, 0).values)
    emit("kSort0Indices", torch.sort(a, 0).indices)
    emit("kSortDescending", torch.sort(a, descending=True).values)
    emit("kSortStable", torch.sort(torch.tensor([0, 1] * 9), stable=True).indices)
    emit("kArgsort", torch.argsort(a, dim=1))
    # gradient through sort
    xs = a.clone().requires_grad_(True)
    emit("kSortGrad", grad_of(xs.sort(descending=True).values, xs))
    # torch.var / std documentation and friends
    both("kVarKeepdim", lambda d: torch.var(a.to(d), dim=1, keepdim=True))
    both("kVarBiased", lambda d: torch.var(a.to(d), dim=1, unbiased=False))
    both("kStdCorrection0", lambda d: a.to(d).std(dim=None, correction=0))
    emit("kStdDim", torch.std(a, dim=1, keepdim=True))
    vm = torch.var_mean(a, dim=0, keepdim=True)
    emit("kVarMeanVar", vm[0])
    emit("kVarMeanMean", vm[1])
    sm = torch.std_mean(a, unbiased=False)
    emit("kStdMean", torch.stack(sm))
    xv = a.clone().requires_grad_(True)
    emit("kVarGrad", grad_of(torch.var(xv, dim=0), xv))
    both("kStandardize", lambda d: (a.to(d) - a.to(d).mean(dim=0)) / a.to(d).std(dim=0))
    # torch.tril / triu documentation
    emit("kTrilOnes", torch.tril(torch.ones(3, 3)))
    b = torch.tensor([[-0.5, 1.25, 0.75, -2.0, 0.5, 1.5], [0.25, -1.0, 2.0, 0.125, -0.75, 1.0],
                      [1.75, 0.5, -0.25, 1.0, 2.5, -1.5], [-1.25, 0.375, 0.625, -0.5, 1.0, 0.25]])
    emit("kTrilDiag1", torch.tril(b, diagonal=1))
    emit("kTriuDiagM1", torch.triu(b, diagonal=-1))
    # the causal mask of attention: masked_fill with triu(ones, diagonal=1)
    scores = torch.tensor([[0.5, 1.0, -0.5], [2.0, 0.25, 1.5], [-1.0, 0.75, 0.0]])
    mask = torch.triu(torch.ones(3, 3), diagonal=1) == 1
    both("kCausal", lambda d: torch.softmax(scores.to(d).masked_fill(mask, float("-inf")), -1))
    # torch.flip / fliplr / roll documentation
    x8 = torch.arange(8).view(2, 2, 2)
    emit("kFlip01", torch.flip(x8, [0, 1]))
    emit("kFliplr", torch.fliplr(torch.arange(6.0).view(2, 3)))
    r = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8]).view(4, 2)
    emit("kRoll1", torch.roll(r, 1))
    emit("kRoll10", torch.roll(r, 1, 0))
    emit("kRollM10", torch.roll(r, -1, 0))
    emit("kRoll21", torch.roll(r, shifts=(2, 1), dims=(0, 1)))
    # F.one_hot documentation
    emit("kOneHot", F.one_hot(torch.arange(0, 5) % 3))
    emit("kOneHot5", F.one_hot(torch.arange(0, 5) % 3, num_classes=5))
    emit("kOneHot32", F.one_hot(torch.arange(0, 6).view(3, 2) % 3))
    # label smoothing with one_hot
    y = torch.tensor([2, 0, 1])
    emit("kSmooth32", F.one_hot(y, 4).float() * (1 - 0.1) + 0.1 / 4)
    # top-k accuracy (the ImageNet example's accuracy())
    out = torch.tensor([[0.1, 0.5, 0.2, 0.9], [0.8, 0.1, 0.3, 0.05], [0.2, 0.25, 0.7, 0.6]])
    target = torch.tensor([1, 1, 3])
    _, pred = out.topk(2, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    emit("kTopkAccuracy", correct.reshape(-1).float().sum(0, keepdim=True) * (100.0 / 3))
    # top-k sampling's logit filter (minGPT / nanoGPT)
    logits = torch.tensor([[1.0, 3.0, 2.0, -1.0, 0.5], [0.25, -2.0, 4.0, 1.0, 3.5]])
    v, _ = torch.topk(logits, 2)
    filtered = logits.clone()
    filtered[filtered < v[:, [-1]]] = -float("Inf")
    emit("kTopkFilter", filtered)

    with open(OUT, "w") as f:
        f.write("// GENERATED by tools/pytorch_idioms/ops_shape_sort.py; do not edit\n")
        f.write("// PyTorch 1.13 values for tests/test_pytorch_idioms_ops_shape_sort.cpp.\n")
        f.write("#pragma once\n#include <cmath>\n#include <vector>\n\nnamespace ops_shape_sort_goldens {\n")
        f.write("// clang-format off\n")
        f.write("\n".join(lines) + "\n")
        f.write("// clang-format on\n}  // namespace ops_shape_sort_goldens\n")


if __name__ == "__main__":
    main()
