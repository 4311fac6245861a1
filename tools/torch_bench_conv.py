#!/usr/bin/python3
"""PyTorch's conv2d forward + backward at bench_conv's shapes, offline only: the figures to set
beside tools/bench_conv.cpp's.

For each of bench_conv's shapes (batch 64: 1->32 at 28x28, 32->64 at 28x28, 64->64 at 14x14, 3x3,
padding 1, float32, bias) and torch.set_num_threads(1) and (2), it times F.conv2d forward plus a
backward of y with a ones gradient (the weight and bias gradients; the input's too except for the
first layer), reports the median over --seconds of runs and GFLOP/s counted as bench_conv counts
them (2*N*O*Ho*Wo*C*k*k per GEMM pass: forward, weight gradient, input gradient when needed).

Not needed to build or test depthgrad: run it by hand with Debian's python3-torch,
    env -u OPENBLAS_CORETYPE /usr/bin/python3 tools/torch_bench_conv.py [--seconds S]
It refuses nothing and checks nothing; it only prints.
"""
import argparse
import time

import torch
import torch.nn.functional as F

SHAPES = [(64, 1, 28, 28, 32, 3, 1, False), (64, 32, 28, 28, 64, 3, 1, True),
          (64, 64, 14, 14, 64, 3, 1, True)]


def gflops(shape, seconds):
    n, c, h, w, o, k, pad, input_grad = shape
    torch.manual_seed(0)
    x = torch.rand(n, c, h, w).requires_grad_(input_grad)
    weight = torch.rand(o, c, k, k, requires_grad=True)
    bias = torch.rand(o, requires_grad=True)

    def step():
        y = F.conv2d(x, weight, bias, 1, pad)
        y.backward(torch.ones_like(y))
        weight.grad = None
        bias.grad = None
        x.grad = None

    step()
    times = []
    start = time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    ho, wo = h + 2 * pad - k + 1, w + 2 * pad - k + 1
    passes = 3 if input_grad else 2
    return 2.0 * n * o * ho * wo * c * k * k * passes / times[len(times) // 2] * 1e-9


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    for threads in (1, 2):
        torch.set_num_threads(threads)
        print(f"threads {threads}: torch {torch.__version__}")
        for s in SHAPES:
            print(f"  conv2d fwd+bwd N={s[0]} {s[1]}->{s[4]} {s[2]}x{s[3]} k{s[5]} pad{s[6]}: "
                  f"{gflops(s, args.seconds):.1f} GFLOP/s")


if __name__ == "__main__":
    main()
