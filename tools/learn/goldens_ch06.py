#!/usr/bin/python3
"""Golden values of the learner's path's chapter 6 (modules, parameters and initialisation) from
PyTorch (1.13), offline only.

Prints, as C++ constants for tools/learn/checks/ch06.cpp: torch's fan in and fan out of three weight
shapes; the values of seeded initialisers (xavier_uniform_ on a [4, 2, 3] weight, kaiming_normal_
with mode fan_out and relu on a [3, 5] weight, nn.Linear(4, 3)'s default init), all float32 after
torch.manual_seed; and the names, shapes and parameter count of a small model with a tied head,
as named_parameters() lists them. Run by hand with Debian's python3-torch:
    /usr/bin/python3 tools/learn/goldens_ch06.py
It checks nothing; it only prints. Not needed to build or test depthgrad.
"""
import torch
import torch.nn as nn


def values(name, t):
    flat = ", ".join(repr(float(v)) for v in t.detach().reshape(-1).tolist())
    print(f"const std::vector<double> {name} = {{{flat}}};")


for shape in ([5, 3], [4, 2, 3, 3], [6, 2, 5]):
    fan_in, fan_out = nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    print(f"// fans of {shape}: in {fan_in}, out {fan_out}")

torch.manual_seed(0)
w = torch.empty(4, 2, 3)
nn.init.xavier_uniform_(w)
values("kXavierUniform423Seed0", w)

torch.manual_seed(1)
w = torch.empty(3, 5)
nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
values("kKaimingNormalFanOut35Seed1", w)

torch.manual_seed(2)
linear = nn.Linear(4, 3)
values("kLinear43WeightSeed2", linear.weight)
values("kLinear43BiasSeed2", linear.bias)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.proj = nn.Linear(4, 4)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))  # the root's own parameter first: see ch06.cpp
        self.embed = nn.Embedding(10, 4)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight  # tied: listed once, under its first name


net = Net()
print("// named_parameters():")
for name, p in net.named_parameters():
    print(f'    {{"{name}", {{{", ".join(str(s) for s in p.shape)}}}}},')
print(f"// parameter count: {sum(p.numel() for p in net.parameters())}")
