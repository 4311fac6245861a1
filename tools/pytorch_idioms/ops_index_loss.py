#!/usr/bin/env python3
"""Writes tests/pytorch_idioms/ops_index_loss_goldens.h: the PyTorch 1.13 values the translation
suite tests/test_pytorch_idioms_ops_index_loss.cpp checks (interpolate, kl_div, smooth_l1_loss,
huber_loss, cosine_similarity, randperm, multinomial, indexing and index assignment).

Offline only (python3 tools/pytorch_idioms/ops_index_loss.py from the repository root, PyTorch
1.13); nothing in the build or the tests runs it. Each block is one idiom: the torch lines as the
test spells them, then the values it emits (forward, and gradients of (y * w).sum() with
w = torch.linspace(-1, 1, y.numel()).reshape(y.shape)). Random inputs are float32 torch.randn
draws after torch.manual_seed, which depthgrad's generator reproduces; float64 idioms convert them
with .double().
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = []


def emit(name, t):
    t = torch.as_tensor(t).detach()
    vals = ", ".join(repr(float(v)) for v in t.reshape(-1).tolist())
    OUT.append(f"inline const std::vector<double> {name} = {{{vals}}};")


def w_like(y):
    return torch.linspace(-1, 1, y.numel(), dtype=y.dtype).reshape(y.shape)


def grads(name, y, *xs):
    (y * w_like(y)).sum().backward()
    for i, x in enumerate(xs):
        emit(f"{name}_grad{i}", x.grad)


# 1. F.interpolate(x, scale_factor=2, mode='nearest') (float32, torch's Upsample doc input)
x = torch.arange(1, 5, dtype=torch.float32).view(1, 1, 2, 2)
emit("nearest2", F.interpolate(x, scale_factor=2, mode="nearest"))
# 2. nn.Upsample(scale_factor=2, mode='bilinear', align_corners=False) (float32)
emit("upsample_bilinear2", nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)(x))
# 3, 4. F.interpolate(x, size=(5, 7), mode='bilinear', align_corners=False / True) (float64)
for tag, ac in [("false", False), ("true", True)]:
    x = torch.arange(12, dtype=torch.float64).view(1, 1, 3, 4).requires_grad_()
    y = F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=ac)
    emit(f"bilinear57_{tag}", y)
    grads(f"bilinear57_{tag}", y, x)
# 5. F.interpolate(x, scale_factor=0.5) (float64 downsampling, nearest is the default mode)
x = torch.arange(36, dtype=torch.float64).view(1, 1, 6, 6).requires_grad_()
y = F.interpolate(x, scale_factor=0.5)
emit("nearest_half", y)
grads("nearest_half", y, x)
# 6. F.interpolate(seq, scale_factor=1.5) on [N, C, L] (float64)
seq = torch.arange(10, dtype=torch.float64).view(1, 2, 5)
emit("nearest1d", F.interpolate(seq, scale_factor=1.5))
# 7. F.kl_div(F.log_softmax(a, 1), F.softmax(b, 1), reduction='batchmean') (float64)
torch.manual_seed(0)
a = torch.randn(3, 5).double().requires_grad_()
b = torch.randn(3, 5).double().requires_grad_()
loss = F.kl_div(F.log_softmax(a, 1), F.softmax(b, 1), reduction="batchmean")
emit("kl_batchmean", loss)
loss.backward()
emit("kl_batchmean_grad0", a.grad)
emit("kl_batchmean_grad1", b.grad)
# 8. nn.KLDivLoss(reduction='batchmean', log_target=True)(input, log_target) (float32)
torch.manual_seed(1)
inp = F.log_softmax(torch.randn(3, 5), dim=1)
tgt = F.log_softmax(torch.rand(3, 5), dim=1)
emit("kl_log_target", nn.KLDivLoss(reduction="batchmean", log_target=True)(inp, tgt))
# 9. F.smooth_l1_loss(input, target) (float64)
torch.manual_seed(2)
inp = (torch.randn(3, 5) * 2).double().requires_grad_()
tgt = torch.randn(3, 5).double()
loss = F.smooth_l1_loss(inp, tgt)
emit("smooth_l1", loss)
loss.backward()
emit("smooth_l1_grad0", inp.grad)
# 10. F.smooth_l1_loss(input, target, beta=0.5, reduction='none') (float32)
emit("smooth_l1_none", F.smooth_l1_loss(inp.detach().float(), tgt.float(), beta=0.5,
                                        reduction="none"))
# 11. F.huber_loss(input, target, delta=0.5) (float64)
inp.grad = None
loss = F.huber_loss(inp, tgt, delta=0.5)
emit("huber", loss)
loss.backward()
emit("huber_grad0", inp.grad)
# 12. F.cosine_similarity(a, b, dim=1) (float64)
torch.manual_seed(3)
a = torch.randn(4, 8).double().requires_grad_()
b = torch.randn(4, 8).double().requires_grad_()
y = F.cosine_similarity(a, b, dim=1)
emit("cosine", y)
grads("cosine", y, a, b)
# 13. F.cosine_similarity(x.unsqueeze(1), x.unsqueeze(0), dim=-1): pairwise (float64)
x = torch.randn(3, 4).double().requires_grad_()
y = F.cosine_similarity(x.unsqueeze(1), x.unsqueeze(0), dim=-1)
emit("cosine_pairwise", y)
grads("cosine_pairwise", y, x)
# 14. torch.randperm(10, generator=g) with g = torch.Generator().manual_seed(42)
g = torch.Generator().manual_seed(42)
emit("randperm10", torch.randperm(10, generator=g))
# 15. torch.manual_seed(0); idx = torch.randperm(8)[:3]
torch.manual_seed(0)
emit("randperm_subset", torch.randperm(8)[:3])
# 16. torch.manual_seed(1); torch.multinomial(weights, 2) (weights from torch.multinomial's doc)
weights = torch.tensor([0, 10, 3, 0], dtype=torch.float)
torch.manual_seed(1)
emit("multinomial2", torch.multinomial(weights, 2))
# 17. torch.multinomial(weights, 4, replacement=True)
torch.manual_seed(2)
emit("multinomial_rep", torch.multinomial(weights, 4, replacement=True))
# 18. next = torch.multinomial(F.softmax(logits / 0.8, dim=-1), num_samples=1) (sampling)
torch.manual_seed(3)
logits = torch.randn(2, 6)
emit("sample_next", torch.multinomial(F.softmax(logits / 0.8, dim=-1), num_samples=1))
# 19-24. indexing (float64, with gradients)
X = torch.arange(24, dtype=torch.float64).view(4, 6) / 10
for name, fn in [("x0", lambda x: x[0]), ("cols13", lambda x: x[:, 1:3]),
                 ("every2", lambda x: x[::2]), ("last", lambda x: x[..., -1]),
                 ("rows_step", lambda x: x[1:, ::2]),
                 ("pick", lambda x: x[:, torch.tensor([5, 0, 5])])]:
    x = X.clone().requires_grad_()
    y = fn(x)
    emit(name, y)
    grads(name, y, x)
# 25. torch.manual_seed(4); x[torch.randperm(4)] (shuffle the rows)
torch.manual_seed(4)
emit("shuffle_rows", X[torch.randperm(4)])
# 26. y = x * 2; y[:, 0] = 0 (gradient 0 in the overwritten column)
x = X.clone().requires_grad_()
y = x * 2
y[:, 0] = 0
emit("zero_col", y)
grads("zero_col", y, x)
# 27. y = x.clone(); y[1:3, 2] = v (gradients to x and v)
x = X.clone().requires_grad_()
v = torch.tensor([7.0, 8.0], dtype=torch.float64, requires_grad=True)
y = x.clone()
y[1:3, 2] = v
z = y * y
emit("put_v", z)
grads("put_v", z, x, v)

with open("tests/pytorch_idioms/ops_index_loss_goldens.h", "w") as f:
    f.write("// GENERATED by tools/pytorch_idioms/ops_index_loss.py; do not edit\n")
    f.write("// PyTorch 1.13 values for tests/test_pytorch_idioms_ops_index_loss.cpp.\n")
    f.write("#pragma once\n#include <vector>\n\nnamespace idioms_ops_index_loss {\n")
    f.write("\n".join(OUT))
    f.write("\n}  // namespace idioms_ops_index_loss\n")
