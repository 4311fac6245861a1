#!/usr/bin/python3
"""Golden values for chapter 5 of the learner's path (matmul and linear), from PyTorch 1.13 in
float64, offline only.

Prints C++ constants (one `const std::vector<double> name = {...};` per line) that were pasted into
tools/learn/checks/ch05.cpp:
  - linear(x [2, 3, 4], W [5, 4], b [5]): the gradients of sum(y * G) for x, W and b; and
    linear(x [3, 4], W) with W a transposed view of a [4, 5] tensor: the gradients for x and the
    [4, 5] tensor;
  - a [2, 1, 3, 4] @ b [3, 4, 2] (a's batch axis of size 1 broadcast, b broadcast over the first
    axis): the first derivatives da, db of sum(y * G) taken with create_graph, and the second
    derivatives d/da and d/db of sum(U_a * da) + sum(U_b * db).
Inputs, G and U are exact dyadic patterns, the same pattern() the checks build, so both sides
start from the same bits. Not needed to build or test depthgrad: run it by hand,
    /usr/bin/python3 tools/learn/goldens_ch05.py
It checks nothing; it only prints.
"""
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def pattern(shape, mul, mod, shift, div):
    n = 1
    for s in shape:
        n *= s
    values = [((k * mul) % mod - shift) / div for k in range(n)]
    return torch.tensor(values).reshape(shape)


def leaf(shape, mul, mod, shift, div):
    return pattern(shape, mul, mod, shift, div).requires_grad_(True)


def weights_for(y):  # G: a fixed pattern of y's shape, not all ones
    return pattern(list(y.shape), 3, 11, 5, 4.0)


def emit(name, t):
    values = ", ".join(repr(float(v)) for v in t.detach().reshape(-1).tolist())
    print(f"const std::vector<double> {name} = {{{values}}};")


x = leaf([2, 3, 4], 5, 17, 8, 4.0)
w = leaf([5, 4], 7, 13, 6, 4.0)
b = leaf([5], 3, 7, 3, 2.0)
y = F.linear(x, w, b)
(y * weights_for(y)).sum().backward()
emit("k_linear_dx", x.grad)
emit("k_linear_dw", w.grad)
emit("k_linear_db", b.grad)

x = leaf([3, 4], 5, 17, 8, 4.0)
w_stored = leaf([4, 5], 7, 13, 6, 4.0)
y = F.linear(x, w_stored.t())
(y * weights_for(y)).sum().backward()
emit("k_linear_transposed_dx", x.grad)
emit("k_linear_transposed_dw_stored", w_stored.grad)

a = leaf([2, 1, 3, 4], 5, 17, 8, 4.0)
b = leaf([3, 4, 2], 7, 13, 6, 4.0)
y = a @ b
da, db = torch.autograd.grad((y * weights_for(y)).sum(), (a, b), create_graph=True)
emit("k_matmul_da", da)
emit("k_matmul_db", db)
h = (da * pattern([2, 1, 3, 4], 5, 9, 4, 2.0)).sum() + (db * pattern([3, 4, 2], 3, 7, 2, 2.0)).sum()
dda, ddb = torch.autograd.grad(h, (a, b))
emit("k_matmul_second_a", dda)
emit("k_matmul_second_b", ddb)
