#!/usr/bin/python3
"""Golden values of the learner's path's chapter 7 (optimisers and schedules) from PyTorch (1.13),
offline only.

Prints, as C++ constants for tools/learn/checks/ch07.cpp, the parameters after three steps of
torch.optim.SGD (momentum with dampening and weight decay in float64; Nesterov in float32; momentum
at the rates a schedule sets in float32; a parameter group's own weight decay in float64),
torch.optim.AdamW (float64, weight decay 0.1) and torch.optim.Adam (float32, L2 weight decay
0.05), each step with its own fixed gradient (the pattern gradient(t) below, the same as the
checks build), and the learning rates of depthgrad's warm-up then cosine schedule at chosen steps
(floors of 0.1 and 0.5 of the rate; and without warm-up down to zero)
(torch has no such scheduler: they are its formula evaluated in Python's double, the way
nanoGPT writes it). Run by hand with Debian's python3-torch:
    /usr/bin/python3 tools/learn/goldens_ch07.py
It checks nothing; it only prints. Not needed to build or test depthgrad.
"""
import math

import torch

START = [0.5, -1.0, 0.25, 2.0, -0.75, 1.5]


def gradient(t):  # step t's gradient of the [2, 3] parameter: dyadic, exact in float32
    return [((i * 3 + t * 5) % 7 - 3) * 0.25 for i in range(6)]


def run(dtype, make, steps=3, rates=None):
    p = torch.tensor(START, dtype=dtype).reshape(2, 3).requires_grad_()
    opt = make([p])
    for t in range(steps):
        p.grad = torch.tensor(gradient(t), dtype=dtype).reshape(2, 3)
        if rates:  # the rate a schedule sets before step t
            for group in opt.param_groups:
                group["lr"] = rates[t]
        opt.step()
    return p


def values(name, t):
    flat = ", ".join(repr(float(v)) for v in t.detach().reshape(-1).tolist())
    print(f"const std::vector<double> {name} = {{{flat}}};")


values("kSgdDampenedF64", run(torch.float64, lambda ps: torch.optim.SGD(
    ps, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)))
values("kSgdNesterovF32", run(torch.float32, lambda ps: torch.optim.SGD(
    ps, lr=0.05, momentum=0.9, nesterov=True)))
values("kSgdScheduledF32", run(torch.float32, lambda ps: torch.optim.SGD(
    ps, lr=0.1, momentum=0.9), rates=[0.1, 0.05, 0.02]))
values("kSgdGroupDecayF64", run(torch.float64, lambda ps: torch.optim.SGD(
    [{"params": ps, "weight_decay": 0.1}], lr=0.1, momentum=0.9, weight_decay=0.0)))
values("kAdamWF64", run(torch.float64, lambda ps: torch.optim.AdamW(
    ps, lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)))
values("kAdamL2F32", run(torch.float32, lambda ps: torch.optim.Adam(
    ps, lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05)))


def warmup_cosine(step, lr=1e-3, warmup=10, total=100, min_ratio=0.1):
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


STEPS = [0, 4, 9, 10, 11, 55, 99, 100, 150]
print("// steps:", STEPS)
print("const std::vector<double> kWarmupCosine = {" +
      ", ".join(repr(warmup_cosine(s)) for s in STEPS) + "};")
print("const std::vector<double> kWarmupCosineFloorHalf = {" +
      ", ".join(repr(warmup_cosine(s, min_ratio=0.5)) for s in STEPS) + "};")
print("const std::vector<double> kCosineToZero = {" +
      ", ".join(repr(warmup_cosine(s, lr=0.02, warmup=0, total=40, min_ratio=0.0))
                for s in [0, 1, 10, 20, 39, 40, 41]) + "};")
