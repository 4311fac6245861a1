#!/usr/bin/python3
"""Golden values of the learner's path's chapter 8 (the training loop and exact resume) from
PyTorch (1.13), offline only.

Prints, as C++ constants for tools/learn/checks/ch08.cpp, what torch.nn.utils.clip_grad_norm_
returns and leaves in the gradients for three float32 parameters ([2, 3], [3] and [10000]: the
last spans two of depthgrad's 8192-element norm blocks) whose gradients are the fixed patterns
below (the same the checks build), clipped at max_norm 1 (scaled) and at 1000 (left alone). Run by
hand with Debian's python3-torch:
    /usr/bin/python3 tools/learn/goldens_ch08.py
It checks nothing; it only prints. Not needed to build or test depthgrad.
"""
import torch


def pattern(n, mul, mod, shift, div):  # exact in float32
    return torch.tensor([((i * mul) % mod - shift) / div for i in range(n)], dtype=torch.float32)


def parameters():
    shapes = [(2, 3), (3,), (10000,)]
    grads = [pattern(6, 5, 11, 5, 4), pattern(3, 2, 5, 2, 8), pattern(10000, 37, 101, 50, 4096)]
    params = []
    for shape, g in zip(shapes, grads):
        p = torch.zeros(shape, requires_grad=True)
        p.grad = g.reshape(shape).clone()
        params.append(p)
    return params


def values(name, t):
    flat = ", ".join(repr(float(v)) for v in t.detach().reshape(-1).tolist())
    print(f"const std::vector<double> {name} = {{{flat}}};")


params = parameters()
total = torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)
print(f"const double kTotalNorm = {float(total)!r};")
values("kClippedW", params[0].grad)
values("kClippedB", params[1].grad)
print(f"const double kClippedBigFirst = {float(params[2].grad[1])!r};  // element 1")
params = parameters()
total = torch.nn.utils.clip_grad_norm_(params, max_norm=1000.0)
print(f"// max_norm 1000: total {float(total)!r}, gradients unchanged")
