#!/usr/bin/env python3
"""Images per second of torch's DataLoader alone over torchvision's ImageFolder, at 0, 1 and 2
workers: the twin of tools/bench_loader.cpp (same folder, transforms and flags; not needed to
build, test or run depthgrad).

The images are read as torchvision's ImageFolder reads them (PIL), converted to "L" with
--mode gray (the default) or "RGB", then ToTensor and Normalize(0.5, 0.5), after
RandomCrop(28, padding=2) and RandomHorizontalFlip with --augment.

Usage: env -u OPENBLAS_CORETYPE /usr/bin/python3 tools/torch_bench_loader.py --folder DIR/train
         [--workers 0,1,2] [--batch 64] [--batches N] [--augment] [--mode gray|rgb] [--threads 1]
"""
import argparse
import time

import torch
import torchvision.datasets as datasets
import torchvision.transforms as T
from PIL import Image


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", required=True)
    ap.add_argument("--workers", default="0,1,2")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batches", type=int, default=0)
    ap.add_argument("--augment", action="store_true")
    ap.add_argument("--mode", choices=["gray", "rgb"], default="gray")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    pil_mode = "L" if args.mode == "gray" else "RGB"
    half = (0.5,) if args.mode == "gray" else (0.5, 0.5, 0.5)
    steps = [T.RandomCrop(28, padding=2), T.RandomHorizontalFlip()] if args.augment else []
    transform = T.Compose(steps + [T.ToTensor(), T.Normalize(half, half)])

    def loader(path):
        with open(path, "rb") as f:
            return Image.open(f).convert(pil_mode)

    data = datasets.ImageFolder(args.folder, transform=transform, loader=loader)
    print(f"{len(data)} images in {len(data.classes)} classes, batch {args.batch}, "
          f"{'augmented' if args.augment else 'not augmented'}, torch {torch.__version__}")
    print(f"{'workers':>8} {'batches':>10} {'images/s':>12}")
    for workers in [int(w) for w in args.workers.split(",")]:
        g = torch.Generator().manual_seed(0)
        dl = torch.utils.data.DataLoader(data, batch_size=args.batch, shuffle=True, drop_last=True,
                                         generator=g, num_workers=workers)
        it = iter(dl)
        next(it)  # warm-up: the workers start
        batches = len(dl) - 1 if args.batches <= 0 else min(args.batches, len(dl) - 1)
        start = time.perf_counter()
        for _ in range(batches):
            next(it)
        seconds = time.perf_counter() - start
        print(f"{workers:>8} {batches:>10} {batches * args.batch / seconds:>12.0f}")
        del it


if __name__ == "__main__":
    main()
