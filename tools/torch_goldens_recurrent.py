#!/usr/bin/python3
"""Golden values of depthgrad's recurrent layers (nn/recurrent.h) from PyTorch (1.13), offline only.

For torch.nn.LSTM, GRU and RNN (two layers, batch_first both ways, bidirectional, with and without
initial states, tanh and relu, without bias, unbatched) and LSTMCell, GRUCell, RNNCell, all in
float64, it prints a C++ table (name -> values) of the output, h_n and c_n, and the gradients of
the loss sum(output * A) + sum(h_n * B) + sum(c_n * C) (A, B, C fixed patterns, not all ones: a
plain sum hides index and transpose bugs) with respect to the input, the initial states and every
parameter, named as torch's state dict ("lstm.dweight_hh_l1_reverse"). Inputs and parameters are
patterns ((k·mul) mod m − shift) / div, one IEEE division each, the same pattern()
tests/test_recurrent.cpp builds, so both sides start from the same bits (parameter k of the
state dict, in order, gets pattern(numel, 3 + 2 (k mod 5), 13 + k, (13 + k) // 2, 2 (13 + k))).
The table was pasted into tests/test_recurrent.cpp between
its GOLDENS markers.

Not needed to build or test depthgrad: run it by hand with Debian's python3-torch,
    /usr/bin/python3 tools/torch_goldens_recurrent.py > table.txt
It refuses nothing and checks nothing; it only prints.
"""
import torch


def pattern(n, mul, mod, shift, div):
    return torch.tensor([((k * mul) % mod - shift) / div for k in range(n)], dtype=torch.float64)


def filled(shape, mul, mod, shift, div):
    return pattern(torch.Size(shape).numel(), mul, mod, shift, div).reshape(shape)


def emit(name, t):
    values = ", ".join(repr(float(v)) for v in t.detach().reshape(-1).tolist())
    print(f'    {{"{name}", {{{values}}}}},')


def set_parameters(module):
    with torch.no_grad():
        for k, (_, p) in enumerate(module.named_parameters()):
            mod = 13 + k
            p.copy_(filled(p.shape, 3 + 2 * (k % 5), mod, mod // 2, 2.0 * mod))


def run(name, module, x_shape, h_shape=None, with_c=False):
    module = module.double()
    set_parameters(module)
    x = filled(x_shape, 7, 23, 11, 8.0).requires_grad_(True)
    h = filled(h_shape, 5, 11, 5, 8.0).requires_grad_(True) if h_shape else None
    c = filled(h_shape, 3, 13, 6, 8.0).requires_grad_(True) if (h_shape and with_c) else None
    is_cell = isinstance(module, (torch.nn.LSTMCell, torch.nn.GRUCell, torch.nn.RNNCell))
    if is_cell:
        r = module(x, (h, c) if c is not None else h) if h is not None else module(x)
        out, h_n, c_n = (r[0], r[0], r[1]) if isinstance(r, tuple) else (r, r, None)
    else:
        state = ((h, c) if c is not None else h) if h is not None else None
        out, s = module(x, state) if state is not None else module(x)
        h_n, c_n = s if isinstance(s, tuple) else (s, None)
    loss = (out * filled(out.shape, 3, 11, 5, 4.0)).sum()
    if not is_cell:
        loss = loss + (h_n * filled(h_n.shape, 5, 7, 3, 4.0)).sum()
    if c_n is not None:
        loss = loss + (c_n * filled(c_n.shape, 2, 9, 4, 4.0)).sum()
    loss.backward()
    emit(f"{name}.output", out)
    if not is_cell:
        emit(f"{name}.h_n", h_n)
    if c_n is not None:
        emit(f"{name}.c_n", c_n)
    emit(f"{name}.dinput", x.grad)
    if h is not None:
        emit(f"{name}.dh0", h.grad)
    if c is not None:
        emit(f"{name}.dc0", c.grad)
    for n, p in module.named_parameters():
        emit(f"{name}.d{n}", p.grad)


def main():
    nn = torch.nn
    run("lstm", nn.LSTM(3, 4, 2), (4, 2, 3), (2, 2, 4), True)
    run("lstm_bf_bi", nn.LSTM(3, 4, 2, batch_first=True, bidirectional=True), (2, 4, 3),
        (4, 2, 4), True)
    run("lstm_unbatched", nn.LSTM(3, 4, 1), (4, 3))
    run("gru", nn.GRU(3, 4, 2), (4, 2, 3), (2, 2, 4))
    run("gru_bf_bi", nn.GRU(3, 4, 2, batch_first=True, bidirectional=True), (2, 4, 3), (4, 2, 4))
    run("rnn_tanh_bf", nn.RNN(3, 4, 2, batch_first=True), (2, 4, 3), (2, 2, 4))
    run("rnn_relu_nobias", nn.RNN(3, 4, 1, nonlinearity="relu", bias=False), (4, 2, 3))
    run("lstm_cell", nn.LSTMCell(3, 4), (2, 3), (2, 4), True)
    run("gru_cell", nn.GRUCell(3, 4), (2, 3), (2, 4))
    run("rnn_cell", nn.RNNCell(3, 4), (2, 3), (2, 4))


if __name__ == "__main__":
    main()
