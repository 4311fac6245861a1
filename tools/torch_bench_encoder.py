#!/usr/bin/python3
"""PyTorch's nn.TransformerEncoderLayer training step at tools/bench_encoder.cpp's settings, offline
only: the figures to set beside bench_encoder's.

batch 32, seq 128, d_model 256, nhead 8, dim_feedforward 1024, dropout 0, batch_first, post-norm,
float32, no mask; one step is the forward plus a backward of sum(y * W) (W fixed), gradients reset
to None each step. At torch.set_num_threads(1) and (2) it reports the best and median ms/step
over --seconds (at least 5 steps), the mean CPU time of the process per step and the least CPU
time of one step (at one thread the steadier figures on a busy machine); --threads 1 or 2 runs
one count.

Not needed to build or test depthgrad: run it by hand with Debian's python3-torch,
    env -u OPENBLAS_CORETYPE /usr/bin/python3 tools/torch_bench_encoder.py [--seconds S] [--threads N]
It checks nothing; it only prints.
"""
import argparse
import time

import torch
import torch.nn as nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=0, help="1 or 2; 0 runs both")
    args = parser.parse_args()
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(256, 8, 1024, 0.0, batch_first=True)
    x = torch.rand(32, 128, 256) * 2 - 1
    w = torch.rand(32, 128, 256) * 2 - 1

    def step():
        layer.zero_grad(set_to_none=True)
        (layer(x) * w).sum().backward()

    for threads in ((args.threads,) if args.threads else (1, 2)):
        torch.set_num_threads(threads)
        step()
        times, cpus = [], []
        start, cpu_start = time.perf_counter(), time.process_time()
        while len(times) < 5 or time.perf_counter() - start < args.seconds:
            t0, c0 = time.perf_counter(), time.process_time()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
            cpus.append((time.process_time() - c0) * 1e3)
        cpu = (time.process_time() - cpu_start) / len(times) * 1e3
        times.sort()
        print(f"threads {threads}: torch {torch.__version__} TransformerEncoderLayer N=32 T=128 "
              f"d=256 heads=8 ff=1024 fwd+bwd: best {times[0]:.1f} ms/step, "
              f"median {times[len(times) // 2]:.1f} ({len(times)} steps), cpu {cpu:.1f} ms/step "
              f"(least {min(cpus):.1f})")


if __name__ == "__main__":
    main()
