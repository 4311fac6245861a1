#!/usr/bin/python3
"""Golden values of the learner's path's chapter 1 (tensors, shapes, strides and views) from
PyTorch (1.13), offline only.

Prints, as C++ constants for tools/learn/checks/ch01.cpp: the strides torch gives new tensors of a
few shapes (x.stride()), torch.broadcast_shapes of a few pairs, is_contiguous() of a few views,
and the values of three results that depend on them: a permuted tensor copied contiguous, a
transposed tensor reshaped (a copy), and a broadcast add. Inputs are arange patterns, so both
sides start from the same exact values.

Not needed to build or test depthgrad: run it by hand with Debian's python3-torch,
    /usr/bin/python3 tools/learn/goldens_ch01.py
It refuses nothing and checks nothing; it only prints.
"""
import torch


def cpp_list(values):
    return "{" + ", ".join(repr(float(v)) if isinstance(v, float) else str(v) for v in values) + "}"


print("// strides of new tensors: {shape, torch's x.stride()}")
for shape in [(2, 3, 4), (5,), (), (3, 1, 2), (1, 1), (4, 1, 6, 2)]:
    print(f"    {{{cpp_list(shape)}, {cpp_list(torch.empty(shape).stride())}}},")

print("// torch.broadcast_shapes: {a, b, result}")
for a, b in [((3, 1), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)), ((5, 1, 1), (1, 6, 1)),
             ((1,), (7, 1)), ((2, 3), (2, 3))]:
    print(f"    {{{cpp_list(a)}, {cpp_list(b)}, {cpp_list(torch.broadcast_shapes(a, b))}}},")

print("// is_contiguous of views")
x = torch.empty(2, 3, 4)
views = {
    "new [2, 3, 4]": x,
    "transpose(0, 1) of [2, 3, 4]": x.transpose(0, 1),
    "permute(2, 0, 1) of [2, 3, 4]": x.permute(2, 0, 1),
    "narrow(2, 1, 2) of [2, 3, 4]": x.narrow(2, 1, 2),
    "narrow(0, 1, 1) of [2, 3, 4]": x.narrow(0, 1, 1),
    "transpose(0, 1) of [5, 1]": torch.empty(5, 1).transpose(0, 1),
    "expand [3, 1] to [3, 4]": torch.empty(3, 1).expand(3, 4),
    "expand [1, 4] to [1, 4]": torch.empty(1, 4).expand(1, 4),
}
for name, v in views.items():
    print(f'    {{"{name}", {cpp_list(v.shape)}, {cpp_list(v.stride())}, '
          f'{"true" if v.is_contiguous() else "false"}}},')

a = torch.arange(24, dtype=torch.float64).reshape(2, 3, 4)
print("// arange(24).reshape(2, 3, 4).permute(2, 0, 1).contiguous()")
print(cpp_list(a.permute(2, 0, 1).contiguous().flatten().tolist()))
b = torch.arange(12, dtype=torch.float64).reshape(3, 4)
print("// arange(12).reshape(3, 4).transpose(0, 1).reshape(2, 6)")
print(cpp_list(b.transpose(0, 1).reshape(2, 6).flatten().tolist()))
c = torch.arange(3, dtype=torch.float64).reshape(3, 1) * 10
d = torch.arange(4, dtype=torch.float64) * 0.5
print("// (arange(3) * 10).reshape(3, 1) + arange(4) * 0.5  -> [3, 4]")
print(cpp_list((c + d).flatten().tolist()))
e = torch.arange(8, dtype=torch.float64).reshape(2, 1, 4) - 3
f = torch.arange(3, dtype=torch.float64).reshape(3, 1) + 1
print("// (arange(8).reshape(2, 1, 4) - 3) * (arange(3).reshape(3, 1) + 1)  -> [2, 3, 4]")
print(cpp_list((e * f).flatten().tolist()))
