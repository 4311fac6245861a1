#!/usr/bin/python3
"""PyTorch's nn.LSTM training step at tools/bench_recurrent.cpp's shape, offline only: the figures
to set beside bench_recurrent's.

For seq 64, batch 32, input 128, hidden 256, 2 layers (float32, time-major) and
torch.set_num_threads(1) and (2), it times the forward, a random-weighted loss over the outputs,
the backward and the gradients zeroed, and reports the best and the median milliseconds per step
over --seconds of runs (the best is the figure to compare on a shared machine).

Not needed to build or test depthgrad: run it by hand with Debian's python3-torch,
    env -u OPENBLAS_CORETYPE /usr/bin/python3 tools/torch_bench_lstm.py [--seconds S]
It refuses nothing and checks nothing; it only prints.
"""
import argparse
import time

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    seq, batch, inp, hidden, layers = 64, 32, 128, 256, 2
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(inp, hidden, layers)
    x = torch.rand(seq, batch, inp) * 2 - 1
    w = torch.rand(seq, batch, hidden) * 2 - 1
    print(f"torch {torch.__version__} nn.LSTM training step, seq {seq} batch {batch} "
          f"input {inp} hidden {hidden} layers {layers}, float32")
    for threads in (1, 2):
        torch.set_num_threads(threads)

        def step():
            lstm.zero_grad(set_to_none=False)
            (lstm(x)[0] * w).sum().backward()

        step()
        times = []
        start = time.perf_counter()
        while len(times) < 3 or time.perf_counter() - start < args.seconds:
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        times.sort()
        print(f"  threads {threads}: best {times[0] * 1e3:.1f} ms/step, "
              f"median {times[len(times) // 2] * 1e3:.1f} ms/step")


if __name__ == "__main__":
    main()
