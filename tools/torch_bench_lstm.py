#!/usr/bin/python3
"""PyTorch's nn.LSTM (or nn.GRU) training step at tools/bench_recurrent.cpp's shape and flags,
offline only: the figures to set beside bench_recurrent's.

Default: seq 64, batch 32, input 128, hidden 256, 2 layers, float32, time-major, at
torch.set_num_threads(1) and (2). It times the forward, a random-weighted loss over the outputs,
the backward and the gradients zeroed, and reports the best and the median milliseconds per step
over --seconds of runs (the best is the figure to compare on a shared machine), and the mean CPU
time of the process per step (at one thread, the steadier figure on a busy machine). --precision bf16
runs the forward under torch.autocast("cpu", dtype=torch.bfloat16) (float32 weights, as
depthgrad's bf16 matmul precision); torch 1.13's CPU autocast leaves nn.LSTM and nn.GRU in
float32 (their output stays float32), so its bf16 figure is its float32 step.

Not needed to build or test depthgrad: run it by hand with Debian's python3-torch,
    env -u OPENBLAS_CORETYPE /usr/bin/python3 tools/torch_bench_lstm.py [--seconds S]
        [--threads 1|2|0] [--bidirectional 0|1] [--gru 0|1] [--precision float32|bf16]
It refuses nothing and checks nothing; it only prints.
"""
import argparse
import contextlib
import time

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=0, help="1 or 2; 0 runs both")
    parser.add_argument("--bidirectional", type=int, default=0)
    parser.add_argument("--gru", type=int, default=0)
    parser.add_argument("--precision", choices=["float32", "bf16"], default="float32")
    args = parser.parse_args()
    seq, batch, inp, hidden, layers = 64, 32, 128, 256, 2
    directions = 2 if args.bidirectional else 1
    torch.manual_seed(0)
    kind = torch.nn.GRU if args.gru else torch.nn.LSTM
    rnn = kind(inp, hidden, layers, bidirectional=bool(args.bidirectional))
    x = torch.rand(seq, batch, inp) * 2 - 1
    w = torch.rand(seq, batch, directions * hidden) * 2 - 1
    print(f"torch {torch.__version__} {'bidirectional ' if args.bidirectional else ''}"
          f"{'GRU' if args.gru else 'LSTM'} training step, seq {seq} batch {batch} "
          f"input {inp} hidden {hidden} layers {layers}, {args.precision} matmuls")
    for threads in ((args.threads,) if args.threads else (1, 2)):
        torch.set_num_threads(threads)

        def step():
            rnn.zero_grad(set_to_none=False)
            autocast = (torch.autocast("cpu", dtype=torch.bfloat16)
                        if args.precision == "bf16" else contextlib.nullcontext())
            with autocast:
                out = rnn(x)[0]
            (out.float() * w).sum().backward()

        step()
        times = []
        start, cpu_start = time.perf_counter(), time.process_time()
        while len(times) < 3 or time.perf_counter() - start < args.seconds:
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        cpu = (time.process_time() - cpu_start) / len(times)
        times.sort()
        print(f"  threads {threads}: best {times[0] * 1e3:.1f} ms/step, "
              f"median {times[len(times) // 2] * 1e3:.1f} ms/step, cpu {cpu * 1e3:.1f} ms/step")


if __name__ == "__main__":
    main()
