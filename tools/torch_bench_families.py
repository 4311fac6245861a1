#!/usr/bin/python3
"""PyTorch's side of tools/bench_families.cpp (`make bench`): one workload at one thread count and
precision, timed as bench_families times depthgrad's, offline only (not needed to build or test
depthgrad; bench_families runs it once per row when /usr/bin/python3 imports torch).

Workloads (the same shapes, steps and definitions as bench_families.cpp's header says):
  gemm      torch.mm of two N x N float32 matrices (uniform in [-1, 1]), GFLOP/s
  conv1..3  F.conv2d 3x3 padding 1 with bias at bench_conv's shapes (1->32 28x28, 32->64 28x28,
            64->64 14x14), forward + backward of a ones gradient (the input's gradient except for
            the first), GFLOP/s as bench_conv counts them
  cnn       tools/torch_fashion_cnn.py's network, Adam 1e-3, cross-entropy, one synthetic batch
  lstm      nn.LSTM(128, 256, 2), forward, sum(output * W), backward (as torch_bench_lstm.py)
  encoder   nn.TransformerEncoderLayer(256, 8, 1024, 0.0, batch_first=True), forward, sum(y * W),
            backward (as torch_bench_encoder.py)
  resnet    the ResNet-18 of tools/example/resnet_cifar.h (3x3 stem, no max-pool), SGD lr 0.1
            momentum 0.9 weight decay 5e-4, cross-entropy, one synthetic batch
Timing: --warmup untimed steps, then --steps timed ones; the median step, or with --statistic
best the fastest (GFLOP/s from it for gemm and conv). bf16: the forward (and loss) under torch.autocast('cpu', dtype=torch.bfloat16),
the backward and optimizer outside it. Prints one JSON line {"workload": ..., "value": ...}.

    env -u OPENBLAS_CORETYPE /usr/bin/python3 tools/torch_bench_families.py --workload resnet \
        --threads 2 [--precision bf16] [--steps 10]
"""
import argparse
import contextlib
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONV_SHAPES = {"conv1": (1, 28, 28, 32, False), "conv2": (32, 28, 28, 64, True),
               "conv3": (64, 14, 14, 64, True)}


def fashion_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(128, 10))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(self.bn2(self.conv2(h)) + shortcut)


class ResNet18(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for stage in range(4):
            cout = 64 << stage
            layers.append(nn.Sequential(BasicBlock(cin, cout, 1 if stage == 0 else 2),
                                        BasicBlock(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.layer4(self.layer3(self.layer2(self.layer1(h))))
        return self.fc(torch.flatten(self.avgpool(h), 1))


def uniform(*shape):
    return torch.rand(*shape) * 2 - 1


def gemm_step(args, autocast):
    n = args.gemm
    a, b = uniform(n, n), uniform(n, n)

    def step():
        with torch.no_grad(), autocast():
            torch.mm(a, b)
    return step, 2.0 * n ** 3


def conv_step(args, autocast):
    c, h, w, o, input_grad = CONV_SHAPES[args.workload]
    n = args.conv_batch
    x = uniform(n, c, h, w).requires_grad_(input_grad)
    weight, bias = uniform(o, c, 3, 3).requires_grad_(), uniform(o).requires_grad_()

    def step():
        x.grad = weight.grad = bias.grad = None
        with autocast():
            y = F.conv2d(x, weight, bias, 1, 1)
        y.backward(torch.ones_like(y))
    return step, 2.0 * n * o * h * w * c * 9 * (3 if input_grad else 2)


def classifier_step(model, optimizer, images, autocast):
    labels = torch.randint(0, 10, (images.shape[0],))

    def step():
        optimizer.zero_grad()
        with autocast():
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        loss.item()
    return step, 0.0


def regression_step(model, x, w, forward, autocast):
    def step():
        model.zero_grad(set_to_none=True)
        with autocast():
            loss = (forward(model, x) * w).sum()
        loss.backward()
        loss.item()
    return step, 0.0


def make_step(args, autocast):
    if args.workload == "gemm":
        return gemm_step(args, autocast)
    if args.workload in CONV_SHAPES:
        return conv_step(args, autocast)
    if args.workload == "cnn":
        model = fashion_cnn()
        return classifier_step(model, torch.optim.Adam(model.parameters(), lr=1e-3),
                               torch.randn(args.cnn_batch, 1, 28, 28), autocast)
    if args.workload == "resnet":
        model = ResNet18()
        sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        return classifier_step(model, sgd, torch.randn(args.resnet_batch, 3, 32, 32), autocast)
    if args.workload == "lstm":
        t, n = args.lstm_seq, args.lstm_batch
        return regression_step(nn.LSTM(128, 256, 2), uniform(t, n, 128), uniform(t, n, 256),
                               lambda m, x: m(x)[0], autocast)
    if args.workload == "encoder":
        n, t = args.encoder_batch, args.encoder_seq
        layer = nn.TransformerEncoderLayer(256, 8, 1024, 0.0, batch_first=True)
        return regression_step(layer, uniform(n, t, 256), uniform(n, t, 256),
                               lambda m, x: m(x), autocast)
    raise SystemExit(f"torch_bench_families.py: unknown workload {args.workload}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--precision", choices=("float32", "bf16"), default="float32")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--statistic", choices=("median", "best"), default="median")
    ap.add_argument("--seed", type=int, default=0)
    for name, default in (("gemm", 1024), ("conv-batch", 64), ("cnn-batch", 128),
                          ("resnet-batch", 32), ("lstm-seq", 64), ("lstm-batch", 32),
                          ("encoder-batch", 32), ("encoder-seq", 128)):
        ap.add_argument("--" + name, type=int, default=default)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.precision == "bf16":
        def autocast():
            return torch.autocast("cpu", dtype=torch.bfloat16)
    else:
        autocast = contextlib.nullcontext
    step, flops = make_step(args, autocast)
    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    typical = times[0] if args.statistic == "best" else times[(len(times) - 1) // 2]
    value = flops / typical * 1e-9 if flops else typical * 1e3
    print(json.dumps({"workload": args.workload, "threads": args.threads,
                      "precision": args.precision, "torch": torch.__version__,
                      "unit": "GFLOP/s" if flops else "ms/step", "value": value}))


if __name__ == "__main__":
    main()
