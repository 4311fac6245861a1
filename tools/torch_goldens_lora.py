#!/usr/bin/python3
"""Golden values for tests/test_lora.cpp from PyTorch 1.13: PEFT's LoRA initialisation.

Offline only: nothing in the build or the tests runs this script. It prints the C++ array the
test embeds (run from the repository root with Debian's python3-torch:
    /usr/bin/python3 tools/torch_goldens_lora.py
). PEFT's LoraLayer.update_layer (init_lora_weights=True) on a Linear(5, 4) with r = 2 builds
nn.Linear(in, r, bias=False) and nn.Linear(r, out, bias=False), each drawing torch's default
init, then draws A again with kaiming_uniform_(a=sqrt(5)) and zeroes B. Written here from that
published definition (PEFT is not installed): after torch.manual_seed(0) and the base
nn.Linear(5, 4), A's values are what dg::lora::apply must draw from dg::default_generator().
"""
import math

import torch
import torch.nn as nn

torch.manual_seed(0)
base = nn.Linear(5, 4)
lora_A = nn.Linear(5, 2, bias=False)
lora_B = nn.Linear(2, 4, bias=False)
nn.init.kaiming_uniform_(lora_A.weight, a=math.sqrt(5))
nn.init.zeros_(lora_B.weight)
values = ", ".join("%.9ef" % v for v in lora_A.weight.flatten().tolist())
print("// PEFT's lora_A [2, 5] after torch.manual_seed(0), nn.Linear(5, 4): "
      "tools/torch_goldens_lora.py")
print("const std::vector<float> kPeftLoraA = {%s};" % values)
