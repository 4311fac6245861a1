#!/usr/bin/python3
"""Golden values of tests/test_pytorch_idioms_modules.cpp (module-level PyTorch idioms) from torch 1.13.

Offline only: nothing in the build or the tests runs it. Run from the repository root with
Debian's python3-torch (/usr/bin/python3 tools/pytorch_idioms/modules.py); it writes
tests/pytorch_idioms/modules_goldens.h: kText (print(model) texts and dtype names) and kValues
(tensors, flattened). Inputs and weights are the pattern ((k·mul) mod m − shift) / div the test
rebuilds (dyadic values, exact in float32 and float64, so both sides start from the same bits).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

OUT = "tests/pytorch_idioms/modules_goldens.h"
text = {}
values = {}


def pattern(n, mul, mod, shift, div, dtype=torch.float64):
    return torch.tensor([((k * mul) % mod - shift) / div for k in range(n)], dtype=dtype)


def filled(shape, mul, mod, shift, div, dtype=torch.float64):
    return pattern(torch.Size(shape).numel(), mul, mod, shift, div, dtype).reshape(shape)


def set_parameters(module):
    """Parameter k of the state dict gets pattern(numel, 3 + 2 (k mod 5), 13 + k, (13+k)//2, 16)."""
    with torch.no_grad():
        for k, (_, p) in enumerate(module.named_parameters()):
            mod = 13 + k
            p.copy_(filled(p.shape, 3 + 2 * (k % 5), mod, mod // 2, 16.0, p.dtype))


def put(name, t):
    values[name] = [float(v) for v in t.detach().reshape(-1).tolist()]


class Net(nn.Module):  # the CIFAR-10 tutorial's network
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)


def prints():
    text["print_linear"] = repr(nn.Linear(2, 16))
    text["print_conv"] = repr(nn.Conv2d(1, 32, 3, padding=1))
    text["print_sequential"] = repr(nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1)))
    text["print_nested"] = repr(nn.Sequential(
        nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Sequential(nn.Linear(8, 4), nn.Dropout(0.2))))
    text["print_lstm"] = repr(nn.LSTM(10, 20, num_layers=2, batch_first=True))
    text["print_gru"] = repr(nn.GRU(8, 16, bidirectional=True))
    text["print_batchnorm"] = repr(nn.BatchNorm2d(16))
    text["print_embedding"] = repr(nn.Embedding(10, 3))
    text["print_dropout"] = repr(nn.Dropout(p=0.5))
    text["print_layernorm"] = repr(nn.LayerNorm(8))
    text["print_mha"] = repr(nn.MultiheadAttention(embed_dim=8, num_heads=2))
    text["print_encoder_layer"] = repr(nn.TransformerEncoderLayer(
        d_model=8, nhead=2, dim_feedforward=16, batch_first=True))
    text["print_module_list"] = repr(nn.ModuleList([nn.Linear(10, 10) for _ in range(2)]))
    text["print_module_dict"] = repr(nn.ModuleDict({"conv": nn.Conv2d(10, 10, 3),
                                                    "pool": nn.MaxPool2d(3)}))
    text["print_net"] = repr(Net())


def dtypes():
    text["default_dtype_start"] = str(torch.get_default_dtype())
    torch.set_default_dtype(torch.float64)
    text["default_zeros"] = str(torch.zeros(2).dtype)
    text["default_literal"] = str(torch.tensor([1.5, 2.5]).dtype)
    text["default_linear"] = str(nn.Linear(2, 3).weight.dtype)
    text["default_arange"] = str(torch.arange(3).dtype)
    torch.set_default_dtype(torch.float32)
    # model.double(): a float32 model converted, run in float64
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    set_parameters(model)
    model.double()
    x = filled((2, 3), 5, 11, 5, 4.0)
    put("double_forward", model(x))
    text["double_dtype"] = str(next(model.parameters()).dtype)
    model.float()
    put("float_forward", model(x.float()))
    # the optimiser is built after .double()
    model.double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = (model(x) * filled((2, 2), 3, 7, 3, 4.0)).sum()
    loss.backward()
    opt.step()
    put("double_sgd_weight", model[0].weight)
    bn = nn.BatchNorm1d(3).to(torch.float64)
    text["bn_to_running_mean"] = str(bn.running_mean.dtype)
    text["bn_to_num_batches"] = str(bn.num_batches_tracked.dtype)


def pools():
    x = filled((1, 2, 5, 6), 7, 23, 11, 8.0, torch.float32)
    put("max_pool2d", F.max_pool2d(x, 2))
    v, i = F.max_pool2d(x, 2, return_indices=True)
    put("max_pool2d_indices.values", v)
    put("max_pool2d_indices.indices", i)
    put("maxpool_module", nn.MaxPool2d(3, stride=2, padding=1)(x))
    xd = filled((1, 2, 5, 6), 7, 23, 11, 8.0).requires_grad_(True)
    y = F.max_pool2d(xd, 2, ceil_mode=True)
    (y * filled(y.shape, 3, 7, 3, 4.0)).sum().backward()
    put("max_pool2d_ceil", y)
    put("max_pool2d_ceil.dx", xd.grad)


def packed():
    # An embedding of padded ids (padding_idx 0), packed by length, through a bidirectional GRU.
    emb = nn.Embedding(7, 3, padding_idx=0)
    gru = nn.GRU(3, 4, batch_first=True, bidirectional=True)
    set_parameters(emb)
    with torch.no_grad():
        emb.weight[0].zero_()
    set_parameters(gru)
    ids = torch.tensor([[1, 2, 0, 0], [3, 4, 5, 6], [2, 6, 1, 0]])
    lengths = torch.tensor([2, 4, 3])
    packed_in = pack_padded_sequence(emb(ids), lengths, batch_first=True, enforce_sorted=False)
    put("pack.data", packed_in.data)
    put("pack.batch_sizes", packed_in.batch_sizes)
    put("pack.sorted_indices", packed_in.sorted_indices)
    put("pack.unsorted_indices", packed_in.unsorted_indices)
    out, h_n = gru(packed_in)
    padded, out_lengths = pad_packed_sequence(out, batch_first=True)
    put("gru.padded", padded)
    put("gru.lengths", out_lengths)
    put("gru.h_n", h_n)
    padded_t, _ = pad_packed_sequence(out, batch_first=True, total_length=6)
    put("gru.total_length", padded_t)
    # pad_sequence / pack_sequence of three float64 sequences of different lengths
    from torch.nn.utils.rnn import pad_sequence, pack_sequence
    a, b, c = filled((2, 2), 3, 7, 3, 4.0), filled((4, 2), 5, 9, 4, 4.0), filled((1, 2), 1, 3, 1, 4.0)
    put("pad_sequence", pad_sequence([a, b, c], batch_first=True, padding_value=-1.0))
    ps = pack_sequence([a, b, c], enforce_sorted=False)
    put("pack_sequence.data", ps.data)
    put("pack_sequence.batch_sizes", ps.batch_sizes)
    put("pack_sequence.sorted_indices", ps.sorted_indices)
    # float64, time-major, sorted lengths: an LSTM's final states and the input gradient
    lstm = nn.LSTM(2, 3).double()
    set_parameters(lstm)
    x = filled((4, 3, 2), 7, 23, 11, 8.0).requires_grad_(True)
    out, (h_n, c_n) = lstm(pack_padded_sequence(x, [4, 3, 1]))
    padded, _ = pad_packed_sequence(out)
    (padded * filled(padded.shape, 3, 11, 5, 4.0)).sum().add(h_n.sum()).backward()
    put("lstm.padded", padded)
    put("lstm.h_n", h_n)
    put("lstm.c_n", c_n)
    put("lstm.dx", x.grad)


def main():
    prints()
    dtypes()
    pools()
    packed()
    lines = ["// GENERATED by tools/pytorch_idioms/modules.py; do not edit",
             "// torch 1.13's results for the module idioms of tests/test_pytorch_idioms_modules.cpp.",
             "#pragma once", "#include <map>", "#include <string>", "#include <vector>", "",
             "namespace idioms_modules {", "",
             "inline const std::map<std::string, std::string> kText = {"]
    for k, v in text.items():
        lines.append(f'    {{"{k}", R"golden({v})golden"}},')
    lines += ["};", "", "inline const std::map<std::string, std::vector<double>> kValues = {"]
    for k, v in values.items():
        lines.append(f'    {{"{k}", {{{", ".join(repr(x) for x in v)}}}}},')
    lines += ["};", "", "}  // namespace idioms_modules", ""]
    with open(OUT, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
