#!/usr/bin/env python3
"""Writes tests/torch_ops_b_goldens.h: PyTorch 1.13 golden values for tests/test_torch_ops_b.cpp.

Offline only: nothing in the build or the tests runs this script or needs PyTorch; it is kept so
the values can be regenerated and audited (python3 tools/torch_goldens_ops_b.py from the repository
root, PyTorch 1.13, float64). Covers interpolate (nearest, bilinear), kl_div, smooth_l1_loss,
huber_loss, cosine_similarity, select / strided slices / index_put, randperm and multinomial.
For each differentiable case: the forward f(inputs) and the gradient of the random-weighted loss
sum(w * f(inputs)) for every input; inputs and weights are the integer patterns the test rebuilds
with the same formula (pattern()).
"""
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
OUT = []


def pattern(n, mul, mod, shift, div):
    """The test's pattern(): ((k * mul) % mod - shift) / div for k in 0..n-1."""
    return torch.tensor([((k * mul) % mod - shift) / div for k in range(n)])


def weights(n):
    return pattern(n, 3, 7, 3, 4.0) + 0.1


def emit(name, values):
    vals = ", ".join(repr(float(v)) for v in torch.as_tensor(values).reshape(-1).tolist())
    OUT.append(f"inline const std::vector<double> {name} = {{{vals}}};")


def case(name, fn, *inputs):
    """inputs: (shape, mul, mod, shift, div, offset) patterns, each requiring grad."""
    xs = []
    for shape, mul, mod, shift, div, offset in inputs:
        n = 1
        for s in shape:
            n *= s
        xs.append((pattern(n, mul, mod, shift, div) + offset).reshape(shape).requires_grad_(True))
    y = fn(*xs)
    emit(f"{name}_out", y.detach())
    (y * weights(y.numel()).reshape(y.shape)).sum().backward()
    for i, x in enumerate(xs):
        emit(f"{name}_grad{i}", x.grad)


X4 = ((1, 2, 3, 4), 5, 11, 5, 3.0, 0.0)
case("nearest_scale2", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), X4)
case("nearest_size57", lambda x: F.interpolate(x, size=(5, 7), mode="nearest"), X4)
case("nearest_scale07", lambda x: F.interpolate(x, scale_factor=0.7, mode="nearest"),
     ((1, 2, 5, 6), 7, 13, 6, 4.0, 0.0))
case("nearest3d_scale17", lambda x: F.interpolate(x, scale_factor=1.7, mode="nearest"),
     ((2, 2, 5), 5, 11, 5, 3.0, 0.0))
case("bilinear_size57", lambda x: F.interpolate(x, size=(5, 7), mode="bilinear",
                                                align_corners=False), X4)
case("bilinear_size57_ac", lambda x: F.interpolate(x, size=(5, 7), mode="bilinear",
                                                   align_corners=True), X4)
case("bilinear_scale15", lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear",
                                                 align_corners=False),
     ((1, 2, 4, 5), 7, 13, 6, 4.0, 0.0))
case("bilinear_scale15_recompute",
     lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=False,
                             recompute_scale_factor=True), ((1, 2, 4, 5), 7, 13, 6, 4.0, 0.0))
case("bilinear_scale06", lambda x: F.interpolate(x, scale_factor=(0.6, 1.3), mode="bilinear",
                                                 align_corners=False),
     ((2, 1, 6, 5), 5, 17, 8, 5.0, 0.0))

LP = ((3, 4), 5, 11, 12, 4.0, 0.0)  # values in [-3, -0.5]: log-probabilities
TP = ((3, 4), 3, 7, -1, 8.0, 0.0)   # values in (0.1, 0.9]: probabilities
for red in ["batchmean", "mean", "sum", "none"]:
    case(f"kl_div_{red}", lambda a, b, r=red: F.kl_div(a, b, reduction=r), LP, TP)
case("kl_div_log_target", lambda a, b: F.kl_div(a, b, reduction="sum", log_target=True), LP,
     ((3, 4), 3, 7, 9, 4.0, 0.0))
A = ((3, 4), 5, 11, 5, 2.0, 0.0)
B = ((3, 4), 3, 7, 3, 3.0, 0.0)
case("smooth_l1_mean", lambda a, b: F.smooth_l1_loss(a, b), A, B)
case("smooth_l1_beta03_none", lambda a, b: F.smooth_l1_loss(a, b, reduction="none", beta=0.3),
     A, B)
case("smooth_l1_beta0_sum", lambda a, b: F.smooth_l1_loss(a, b, reduction="sum", beta=0.0),
     A, B)
case("huber_mean", lambda a, b: F.huber_loss(a, b), A, B)
case("huber_delta04_none", lambda a, b: F.huber_loss(a, b, reduction="none", delta=0.4), A, B)
case("cosine_dim1", lambda a, b: F.cosine_similarity(a, b, dim=1), A, B)
case("cosine_broadcast", lambda a, b: F.cosine_similarity(a, b, dim=-1),
     ((2, 3, 4), 5, 11, 5, 2.0, 0.0), ((3, 1), 3, 7, 3, 3.0, 0.5))
case("cosine_small_norm", lambda a, b: F.cosine_similarity(a, b, dim=0, eps=0.5),
     ((2, 3), 1, 5, 2, 10.0, 0.0), ((2, 3), 3, 7, 3, 3.0, 0.0))

X = ((4, 5, 3), 5, 11, 5, 3.0, 0.0)
case("select_neg", lambda x: x.select(1, -2), X)
case("slice_step", lambda x: x[1:4:2, ::3], X)
case("index_mixed", lambda x: x[..., 1:, 2], X)
V = ((4, 3), 3, 7, 3, 3.0, 0.0)


def put_column(x, v):
    y = x * 2
    y[:, 1] = v
    return y * y


case("put_column", put_column, X, V)


def put_slice_broadcast(x, v):
    y = x.clone()
    y[1:4:2, :, 0] = v[0]
    return torch.sin(y)


case("put_slice_broadcast", put_slice_broadcast, X, ((1, 5), 3, 7, 3, 3.0, 0.0))

# ---- random: the same seed, the same values
for n, seed in [(10, 0), (37, 123), (1, 5), (100, 2026)]:
    g = torch.Generator().manual_seed(seed)
    emit(f"randperm_{n}_seed{seed}", torch.randperm(n, generator=g))
g = torch.Generator().manual_seed(7)
emit("randperm_then_randperm", torch.cat([torch.randperm(6, generator=g),
                                          torch.randperm(9, generator=g)]))
W = torch.tensor([0.1, 2.0, 0.5, 0.0, 1.4, 3.0])
W2 = torch.tensor([[0.2, 0.3, 0.5, 1.0], [4.0, 0.0, 1.0, 2.0], [1.0, 1.0, 1.0, 1.0]])
for dt, tag in [(torch.float64, "f64"), (torch.float32, "f32")]:
    for (name, w, k, rep, seed) in [("one", W, 1, False, 3), ("three", W, 3, False, 4),
                                    ("rep8", W, 8, True, 5), ("one_rep", W, 1, True, 6),
                                    ("rows2", W2, 2, False, 8), ("rows_rep5", W2, 5, True, 9)]:
        g = torch.Generator().manual_seed(seed)
        emit(f"multinomial_{name}_{tag}", torch.multinomial(w.to(dt), k, replacement=rep,
                                                             generator=g))

with open("tests/torch_ops_b_goldens.h", "w") as f:
    f.write("// GENERATED by tools/torch_goldens_ops_b.py (PyTorch 1.13); do not edit\n")
    f.write("#pragma once\n#include <vector>\n\nnamespace torch_ops_b {\n")
    f.write("\n".join(OUT))
    f.write("\n}  // namespace torch_ops_b\n")
