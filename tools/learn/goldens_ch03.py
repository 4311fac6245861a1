#!/usr/bin/python3
"""Golden values of the learner's path's chapter 3 (an op end to end) from PyTorch (1.13), offline
only.

Prints, as C++ constants for tools/learn/checks/ch03.cpp, the gradients of loss = sum(y * G) (G a
fixed pattern, not all ones: a plain sum hides a gradient sent to the wrong element) for
  mul: y = a * b with a [2, 3], b [3]        (b broadcast over a's rows)
  div: y = a / b with a [2, 1, 3], b [4, 1]  (both broadcast, to [2, 4, 3])
  exp: y = exp(a) with a [2, 3]
and for exp the second derivative through create_graph: d/da of sum(G * dL/da) where dL/da is the
first gradient, all in float64, from the exact dyadic patterns pattern() below (the checks build
the same ones).

Not needed to build or test depthgrad: run it by hand with Debian's python3-torch,
    /usr/bin/python3 tools/learn/goldens_ch03.py
It refuses nothing and checks nothing; it only prints.
"""
import torch


def pattern(shape, mul, mod, shift, div):
    n = 1
    for s in shape:
        n *= s
    values = [((k * mul) % mod - shift) / div for k in range(n)]
    return torch.tensor(values, dtype=torch.float64).reshape(shape).requires_grad_(True)


def weights(shape):
    return pattern(shape, 7, 11, 5, 4).detach()


def show(name, t):
    print(f'    {{"{name}", {{{", ".join(repr(v) for v in t.flatten().tolist())}}}}},')


a = pattern((2, 3), 5, 9, 4, 4)
b = pattern((3,), 3, 7, 3, 4)
y = a * b
(y * weights(y.shape)).sum().backward()
show("mul.da", a.grad)
show("mul.db", b.grad)

a = pattern((2, 1, 3), 5, 9, 4, 4)
b = pattern((4, 1), 3, 7, 3, 4) + 2.0  # away from zero
b = b.detach().requires_grad_(True)
y = a / b
(y * weights(y.shape)).sum().backward()
show("div.da", a.grad)
show("div.db", b.grad)

a = pattern((2, 3), 5, 9, 4, 4)
y = torch.exp(a)
(da,) = torch.autograd.grad((y * weights(y.shape)).sum(), a, create_graph=True)
show("exp.da", da)
(da * weights(da.shape)).sum().backward()
show("exp.dda", a.grad)
