#!/usr/bin/python3
"""Golden values for chapter 4 of the learner's path (reductions and a stable softmax), from
PyTorch 1.13 in float64, offline only.

Prints C++ constants (one `const std::vector<double> name = {...};` per line) that were pasted into
tools/learn/checks/ch04.cpp:
  - the gradient of sum(y * G) for y = x.sum(1), y = x.mean((0, 2), keepdim=True) and y = x.mean()
    (sum and mean's backward), x [2, 3, 4];
  - softmax over the last axis of x [3, 5] and log_softmax over axis 0 of x [4, 2, 3]: the first
    derivative d/dx sum(y * G) taken with create_graph, and the second derivative
    d/dx sum(U * first);
  - plain cross-entropy (mean) of logits [4, 5] with targets [1, 0, 4, 2]: the loss and its
    gradient, and of the large logits [[1000, 1001, 1002], [-1000, 0, 1000]] with targets [2, 0]
    (finite only when the row max is subtracted first).
Inputs, G and U are exact dyadic patterns, the same pattern() the checks build, so both sides
start from the same bits. Not needed to build or test depthgrad: run it by hand,
    /usr/bin/python3 tools/learn/goldens_ch04.py
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


def reduce_grad(name, fn):
    x = leaf([2, 3, 4], 5, 17, 8, 4.0)
    y = fn(x)
    (y * weights_for(y)).sum().backward()
    emit(name, x.grad)


reduce_grad("k_sum_axis1_grad", lambda x: x.sum(1))
reduce_grad("k_mean_axes02_keepdim_grad", lambda x: x.mean((0, 2), keepdim=True))
reduce_grad("k_mean_all_grad", lambda x: x.mean())


def softmax_grads(name, shape, fn):
    x = leaf(shape, 7, 13, 6, 4.0)
    y = fn(x)
    (first,) = torch.autograd.grad((y * weights_for(y)).sum(), x, create_graph=True)
    emit(name + "_first", first)
    u = pattern(shape, 5, 9, 4, 2.0)
    (second,) = torch.autograd.grad((first * u).sum(), x)
    emit(name + "_second", second)


softmax_grads("k_softmax_last", [3, 5], lambda x: F.softmax(x, -1))
softmax_grads("k_log_softmax_axis0", [4, 2, 3], lambda x: F.log_softmax(x, 0))


def cross_entropy(name, logits, targets):
    logits = logits.clone().requires_grad_(True)
    loss = F.cross_entropy(logits, torch.tensor(targets))
    loss.backward()
    emit(name + "_loss", loss)
    emit(name + "_grad", logits.grad)


cross_entropy("k_ce", pattern([4, 5], 7, 19, 9, 2.0), [1, 0, 4, 2])
cross_entropy("k_ce_large", torch.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]]), [2, 0])
