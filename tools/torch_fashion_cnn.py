#!/usr/bin/env python3
"""The Fashion-MNIST CNN of tools/example/fashion_cnn.cpp in PyTorch, for its time per epoch
beside depthgrad's on the same machine and threads (not needed to build, test or run depthgrad).

The same network (conv 1->32 3x3 pad 1, batch norm, ReLU, max-pool 2; conv 32->64 the same;
flatten, dropout 0.25, linear 3136->128, ReLU, dropout 0.25, linear 128->10), the same optimiser
(Adam, lr 1e-3), batch and epochs, images scaled to [0, 1] and normalised by the training set's
mean and std. Prints each epoch's seconds, training loss and test accuracy.

--augment: the training images go through torchvision's transforms in a torch DataLoader
(RandomCrop(28, padding=2), RandomHorizontalFlip(), ConvertImageDtype(float32), Normalize), with
--workers worker processes, as fashion_cnn --augment does with depthgrad's; --cosine anneals the
rate to 0 over the run (CosineAnnealingLR stepped each batch).

Usage: env -u OPENBLAS_CORETYPE /usr/bin/python3 tools/torch_fashion_cnn.py [--threads 2]
         [--epochs 4] [--batch 128] [--train-examples 60000] [--data /usr/share/datasets/fashion-mnist]
         [--augment] [--workers 1] [--cosine]
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.nn as nn


def read_idx(path):
    raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(raw[4 + 4 * rank:], np.uint8).reshape(dims)


def load(folder, split):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(folder, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(folder, f"{prefix}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return x, torch.from_numpy(labels.astype(np.int64))


class AugmentedImages(torch.utils.data.Dataset):
    """uint8 images [N, 1, 28, 28] and labels, each image through `transform` when asked for."""

    def __init__(self, pixels, labels, transform):
        self.pixels, self.labels, self.transform = pixels, labels, transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.transform(self.pixels[i]), self.labels[i]


def augmented_batches(args, mean, std):
    import torchvision.transforms as T
    prefix = os.path.join(args.data, "train")
    pixels = torch.from_numpy(read_idx(prefix + "-images-idx3-ubyte.gz").copy()).unsqueeze(1)
    labels = torch.from_numpy(read_idx(prefix + "-labels-idx1-ubyte.gz").astype(np.int64))
    transform = T.Compose([T.RandomCrop(28, padding=2), T.RandomHorizontalFlip(),
                           T.ConvertImageDtype(torch.float32), T.Normalize((mean,), (std,))])
    data = AugmentedImages(pixels[:args.train_examples], labels[:args.train_examples], transform)
    return torch.utils.data.DataLoader(data, batch_size=args.batch, shuffle=True, drop_last=True,
                                       num_workers=args.workers,
                                       persistent_workers=args.workers > 0)


def network():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(128, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train-examples", type=int, default=60000)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--augment", action="store_true")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--cosine", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x_train, y_train = load(args.data, "train")
    x_test, y_test = load(args.data, "test")
    mean, std = x_train.mean().item(), x_train.std().item()
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    x_train, y_train = x_train[:args.train_examples], y_train[:args.train_examples]
    model = network()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    steps = len(x_train) // args.batch
    schedule = (torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * steps)
                if args.cosine else None)
    loader = augmented_batches(args, mean, std) if args.augment else None
    print(f"torch {torch.__version__}, {args.threads} threads, {steps} steps of {args.batch} per epoch"
          + (f", augmented by {args.workers} workers" if args.augment else ""))
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(x_train))
        batches = loader if loader is not None else (
            (x_train[order[s * args.batch:(s + 1) * args.batch]],
             y_train[order[s * args.batch:(s + 1) * args.batch]]) for s in range(steps))
        start, total = time.perf_counter(), 0.0
        for xb, yb in batches:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            if schedule is not None:
                schedule.step()
            total += loss.item()
        seconds = time.perf_counter() - start
        model.eval()
        with torch.no_grad():
            correct = sum((model(x_test[i:i + 1000]).argmax(1) == y_test[i:i + 1000]).sum().item()
                          for i in range(0, len(x_test), 1000))
        print(f"epoch {epoch + 1}: {seconds:.1f} s ({1e3 * seconds / steps:.1f} ms/step), train loss {total / steps:.4f}, "
              f"test accuracy {correct / len(x_test):.4f}")


if __name__ == "__main__":
    main()
