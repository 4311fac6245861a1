#!/usr/bin/python3
"""Golden values for tests/test_nn_repr.cpp and tests/test_packed_sequence.cpp from PyTorch 1.13.

Offline only: nothing in the build or the tests runs this script. It writes
tests/nn_misc_goldens.h (run from the repository root with Debian's python3-torch:
    /usr/bin/python3 tools/torch_goldens_nn_misc.py
). It holds:
  - kReprGoldens: repr(module) of torch.nn's built-in layers, as print(model) shows them;
  - kPackedGoldens: torch.nn.utils.rnn's pack_padded_sequence / pad_packed_sequence through
    RNN, LSTM and GRU (both directions, batch_first both ways, unsorted lengths with
    enforce_sorted=False, sorted ones with True) in float64: the packed data, batch_sizes,
    sorted_indices, the packed output, the padded output, h_n, c_n, and the gradients of
    sum(padded * A) + sum(h_n * B) + sum(c_n * C) (A, B, C patterns, not all ones) with respect
    to the padded input, h0, c0 and every parameter (named as the state dict).
Inputs and parameters are the pattern ((k·mul) mod m − shift) / div the test rebuilds (parameter k
of the state dict gets pattern(numel, 3 + 2 (k mod 5), 13 + k, (13 + k) // 2, 2 (13 + k)), as
tools/torch_goldens_recurrent.py).
"""
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

OUT = "tests/nn_misc_goldens.h"


def pattern(n, mul, mod, shift, div):
    return torch.tensor([((k * mul) % mod - shift) / div for k in range(n)], dtype=torch.float64)


def filled(shape, mul, mod, shift, div):
    return pattern(torch.Size(shape).numel(), mul, mod, shift, div).reshape(shape)


def set_parameters(module):
    with torch.no_grad():
        for k, (_, p) in enumerate(module.named_parameters()):
            mod = 13 + k
            p.copy_(filled(p.shape, 3 + 2 * (k % 5), mod, mod // 2, 2.0 * mod))


def reprs():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16)
    return {
        "linear": nn.Linear(2, 16),
        "linear_nobias": nn.Linear(3, 1, bias=False),
        "conv2d": nn.Conv2d(1, 32, 3, padding=1),
        "conv2d_all": nn.Conv2d(4, 8, (3, 5), stride=2, groups=2, bias=False, dilation=2),
        "conv1d": nn.Conv1d(2, 4, 3),
        "conv_transpose2d": nn.ConvTranspose2d(2, 4, 3, stride=2, output_padding=1),
        "maxpool": nn.MaxPool2d(2),
        "maxpool_pairs": nn.MaxPool2d((2, 3), stride=1, padding=1, ceil_mode=True),
        "avgpool": nn.AvgPool2d(3, 2, 1),
        "adaptive": nn.AdaptiveAvgPool2d(1),
        "flatten": nn.Flatten(),
        "batchnorm2d": nn.BatchNorm2d(16),
        "batchnorm1d": nn.BatchNorm1d(4, momentum=None, affine=False, track_running_stats=False),
        "groupnorm": nn.GroupNorm(2, 4),
        "lstm": nn.LSTM(10, 20, num_layers=2, batch_first=True),
        "gru": nn.GRU(3, 4, num_layers=2, dropout=0.5, bidirectional=True),
        "rnn": nn.RNN(3, 4, nonlinearity="relu", bias=False),
        "lstm_cell": nn.LSTMCell(3, 4),
        "rnn_cell": nn.RNNCell(3, 4, nonlinearity="relu", bias=False),
        "gru_cell": nn.GRUCell(3, 4),
        "dropout": nn.Dropout(0.5),
        "dropout_small": nn.Dropout(1e-05),
        "embedding": nn.Embedding(10, 3),
        "embedding_padding": nn.Embedding(10, 3, padding_idx=0),
        "layernorm": nn.LayerNorm(8),
        "mha": nn.MultiheadAttention(8, 2),
        "encoder_layer": layer,
        "encoder": nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8)),
        "sequential": nn.Sequential(nn.Linear(2, 16), nn.ReLU(),
                                    nn.Sequential(nn.Linear(16, 4), nn.Tanh()),
                                    nn.GELU(), nn.SiLU(), nn.Sigmoid()),
        "module_list": nn.ModuleList([nn.Linear(2, 2), nn.ReLU()]),
        "module_dict": nn.ModuleDict({"enc": nn.Linear(2, 3), "act": nn.ReLU()}),
        "parameter_list": nn.ParameterList([nn.Parameter(torch.zeros(2, 3)),
                                            nn.Parameter(torch.zeros(4, dtype=torch.float64))]),
    }


# name: (module, padded input shape, lengths, batch_first, enforce_sorted, with h0, with c0)
CASES = {
    "gru_bi_bf": (lambda: nn.GRU(3, 4, bidirectional=True, batch_first=True), (4, 5, 3),
                  [3, 5, 1, 4], True, False, True, False),
    "lstm_2l_bi": (lambda: nn.LSTM(3, 4, num_layers=2, bidirectional=True), (5, 3, 3),
                   [5, 3, 2], False, True, True, True),
    "rnn_relu_bi": (lambda: nn.RNN(3, 4, nonlinearity="relu", bidirectional=True), (4, 3, 3),
                    [2, 4, 1], False, False, False, False),
    "lstm_bf_ties": (lambda: nn.LSTM(2, 3, batch_first=True, bidirectional=True), (3, 3, 2),
                     [2, 3, 2], True, False, False, False),
    "gru_2l": (lambda: nn.GRU(2, 3, num_layers=2, batch_first=True), (3, 4, 2),
               [4, 1, 3], True, False, True, False),
}


def packed_case(name, spec):
    make, shape, lengths, batch_first, enforce_sorted, with_h, with_c = spec
    module = make().double()
    set_parameters(module)
    x = filled(shape, 7, 23, 11, 8.0).requires_grad_(True)
    B = shape[0] if batch_first else shape[1]
    D = 2 if module.bidirectional else 1
    state_shape = (module.num_layers * D, B, module.hidden_size)
    h = filled(state_shape, 5, 11, 5, 8.0).requires_grad_(True) if with_h else None
    c = filled(state_shape, 3, 13, 6, 8.0).requires_grad_(True) if with_c else None
    packed = pack_padded_sequence(x, torch.tensor(lengths), batch_first=batch_first,
                                  enforce_sorted=enforce_sorted)
    state = None
    if h is not None:
        state = (h, c) if c is not None else h
    out, s = module(packed, state) if state is not None else module(packed)
    h_n, c_n = s if isinstance(s, tuple) else (s, None)
    padded, out_lengths = pad_packed_sequence(out, batch_first=batch_first)
    loss = (padded * filled(padded.shape, 3, 11, 5, 4.0)).sum()
    loss = loss + (h_n * filled(h_n.shape, 5, 7, 3, 4.0)).sum()
    if c_n is not None:
        loss = loss + (c_n * filled(c_n.shape, 2, 9, 4, 4.0)).sum()
    loss.backward()
    rows = {
        "packed_data": packed.data, "batch_sizes": packed.batch_sizes,
        "output_data": out.data, "padded": padded, "lengths": out_lengths, "h_n": h_n,
        "dinput": x.grad,
    }
    if packed.sorted_indices is not None:
        rows["sorted_indices"] = packed.sorted_indices
        rows["unsorted_indices"] = packed.unsorted_indices
    if c_n is not None:
        rows["c_n"] = c_n
    if h is not None:
        rows["dh0"] = h.grad
    if c is not None:
        rows["dc0"] = c.grad
    for n, p in module.named_parameters():
        rows["d" + n] = p.grad
    return {f"{name}.{k}": v for k, v in rows.items()}


def main():
    lines = ["// GENERATED by tools/torch_goldens_nn_misc.py; do not edit",
             "// torch 1.13's repr of nn modules and its packed-sequence results (float64).",
             "#pragma once", "#include <map>", "#include <string>", "#include <vector>", "",
             "namespace nn_misc_goldens {", "",
             "inline const std::map<std::string, std::string> kReprGoldens = {"]
    for name, module in reprs().items():
        lines.append(f'    {{"{name}", R"golden({repr(module)})golden"}},')
    lines += ["};", "", "inline const std::map<std::string, std::vector<double>> kPackedGoldens = {"]
    for name, spec in CASES.items():
        for key, t in packed_case(name, spec).items():
            values = ", ".join(repr(float(v)) for v in t.detach().reshape(-1).tolist())
            lines.append(f'    {{"{key}", {{{values}}}}},')
    lines += ["};", "", "}  // namespace nn_misc_goldens", ""]
    with open(OUT, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
