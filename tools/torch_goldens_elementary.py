#!/usr/bin/env python3
"""Prints the PyTorch golden values embedded in tests/test_elementary_ops.cpp.

Offline only: nothing in the build or the tests runs this script or needs PyTorch; it is kept so
the values can be regenerated and audited (python3 tools/torch_goldens_elementary.py, PyTorch
1.13, float64). It does not write any file: paste its output into the test.
For each op: the forward f(x) and the gradient of the random-weighted loss sum(w * f(x)); the
inputs and weights are the integer patterns the test rebuilds with the same formula.
"""
import torch

torch.set_default_dtype(torch.float64)


def pattern(n, mul, mod, shift, div):
    """The test's pattern(): ((k * mul) % mod - shift) / div for k in 0..n-1."""
    return torch.tensor([((k * mul) % mod - shift) / div for k in range(n)])


def weights(n):
    return pattern(n, 3, 7, 3, 4.0) + 0.1


def emit(name, t):
    vals = ", ".join(repr(float(v)) for v in t.reshape(-1).tolist())
    print(f"const std::vector<double> {name} = {{{vals}}};")


def unary(name, fn, x):
    x = x.clone().requires_grad_(True)
    y = fn(x)
    (y * weights(y.numel()).reshape(y.shape)).sum().backward()
    emit(f"k_{name}_out", y.detach())
    emit(f"k_{name}_grad", x.grad)


def main():
    symmetric = pattern(12, 7, 25, 12, 5.0)  # -2.4 .. 2.4 in steps of 0.2, 0 included
    positive = pattern(12, 7, 25, -1, 8.0)  # 0.125 .. 3.125
    halves = pattern(12, 5, 13, 6, 2.0)  # -3 .. 3 in steps of 0.5: ties of round
    unary("sin", torch.sin, symmetric)
    unary("cos", torch.cos, symmetric)
    unary("log1p", torch.log1p, positive)
    unary("expm1", torch.expm1, symmetric)
    unary("square", torch.square, symmetric)
    unary("rsqrt", torch.rsqrt, positive)
    unary("erf", torch.erf, symmetric)
    unary("sign", torch.sign, symmetric)
    unary("floor", torch.floor, halves)
    unary("ceil", torch.ceil, halves)
    unary("round", torch.round, halves)
    grid = pattern(12, 5, 11, 5, 4.0).reshape(3, 4)
    unary("cumsum0", lambda t: torch.cumsum(t, 0), grid)
    unary("cumsum1", lambda t: torch.cumsum(t, -1), grid)
    unary("cumsum_t", lambda t: torch.cumsum(t.t(), 1), grid)
    # embedding with padding_idx 1 (F.embedding), ids [2, 3] with the padding id twice
    w = pattern(15, 4, 9, 4, 3.0).reshape(5, 3).requires_grad_(True)
    ids = torch.tensor([[1, 3, 1], [0, 4, 2]])
    out = torch.nn.functional.embedding(ids, w, padding_idx=1)
    (out * weights(out.numel()).reshape(out.shape)).sum().backward()
    emit("k_embedding_out", out.detach())
    emit("k_embedding_grad", w.grad)
    w.grad = None
    out = torch.nn.functional.embedding(ids, w, padding_idx=-2)  # row 3
    (out * weights(out.numel()).reshape(out.shape)).sum().backward()
    emit("k_embedding_neg_grad", w.grad)
    # shapes of the views
    a = torch.zeros(2, 1, 3, 1)
    print("// squeeze:", list(a.squeeze().shape), list(a.squeeze(1).shape), list(a.squeeze(0).shape))
    print("// unsqueeze:", list(a.unsqueeze(-1).shape), list(a.unsqueeze(0).shape))
    b = torch.zeros(2, 3, 4, 5)
    print("// flatten:", list(b.flatten().shape), list(b.flatten(1, 2).shape),
          list(b.flatten(-2).shape), list(torch.zeros(()).flatten().shape))
    print("// sign(nan):", torch.sign(torch.tensor(float("nan"))).item())


if __name__ == "__main__":
    main()
