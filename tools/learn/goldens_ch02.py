#!/usr/bin/python3
"""Golden values of the learner's path's chapter 2 (the graph and backward) from PyTorch (1.13),
offline only.

Prints, as C++ constants for tools/learn/checks/ch02.cpp, the gradients of loss = sum(y * G) (G a
fixed pattern, not all ones: a plain sum hides a gradient sent to the wrong element) for:
  diamond:   a = sin(x); y = exp(a) + 3a            (a read by two ops)
  skip:      a = sin(x); y = a + exp(a / 2)          (a read directly and through a chain)
  twice:     y = x * x + sin(x)                      (x an input of one op twice)
  residual:  h = x; three times h = h + tanh(h * w_i)   (w_i [3] broadcast over x [2, 3])
  broadcast: y = (x * w + b) * c with x [2, 3, 4], w [3, 1], b [4], c [1]
all in float64, from the exact dyadic patterns pattern() below (tools/learn/checks/ch02.cpp builds
the same ones).

Not needed to build or test depthgrad: run it by hand with Debian's python3-torch,
    /usr/bin/python3 tools/learn/goldens_ch02.py
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


x = pattern((4,), 3, 7, 3, 4)
a = torch.sin(x)
y = torch.exp(a) + a * 3
(y * weights(y.shape)).sum().backward()
show("diamond.dx", x.grad)

x = pattern((4,), 3, 7, 3, 4)
a = torch.sin(x)
y = a + torch.exp(a * 0.5)
(y * weights(y.shape)).sum().backward()
show("skip.dx", x.grad)

x = pattern((4,), 3, 7, 3, 4)
y = x * x + torch.sin(x)
(y * weights(y.shape)).sum().backward()
show("twice.dx", x.grad)

x = pattern((2, 3), 5, 9, 4, 4)
ws = [pattern((3,), 2 + i, 5, 2, 4) for i in range(3)]
h = x
for w in ws:
    h = h + torch.tanh(h * w)
(h * weights(h.shape)).sum().backward()
show("residual.dx", x.grad)
for i, w in enumerate(ws):
    show(f"residual.dw{i}", w.grad)

x = pattern((2, 3, 4), 5, 13, 6, 8)
w = pattern((3, 1), 3, 5, 2, 2)
b = pattern((4,), 3, 7, 3, 4)
c = pattern((1,), 1, 3, 3, 2)
y = (x * w + b) * c
(y * weights(y.shape)).sum().backward()
show("broadcast.dx", x.grad)
show("broadcast.dw", w.grad)
show("broadcast.db", b.grad)
show("broadcast.dc", c.grad)
