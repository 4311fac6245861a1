# Prints the PyTorch 1.13 golden values of chapter 9's checks (tools/learn/checks/ch09.cpp):
# causal attention on fixed q, k, v (grouped-query: 2 query heads share 1 kv head). torch 1.13 has
# no F.scaled_dot_product_attention (torch 2.0 added it), so the attention is written as torch 2
# defines it for is_causal=True: softmax(q·kᵀ/sqrt(hd) + mask) v, the mask −inf above the
# diagonal. Inputs: x[i] = sin(0.37·i + offset) in row-major order, as the checks build them.
# It prints nothing else and changes no file. Run: python3 tools/learn/goldens_ch09.py
import math

import torch

torch.set_default_dtype(torch.float64)


def filled(shape, offset):
    n = math.prod(shape)
    return torch.tensor([math.sin(0.37 * i + offset) for i in range(n)]).reshape(shape)


def causal_attention(q, k, v):
    B, H, T, hd = q.shape
    group = H // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
    mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
    return torch.softmax(scores + mask, dim=-1) @ v


q = filled((1, 2, 4, 3), 0.0)
k = filled((1, 1, 4, 3), 1.0)
v = filled((1, 1, 4, 3), 2.0)
out = causal_attention(q, k, v)
print("// causal attention, q [1,2,4,3] offset 0, k and v [1,1,4,3] offsets 1 and 2 -> [1,2,4,3]")
print(", ".join(f"{x:.15g}" for x in out.flatten().tolist()))
