#!/usr/bin/env python3
"""Writes tests/pytorch_idioms/masks_goldens.h: PyTorch 1.13's values for the bool / uint8 dtypes
and the mask ops (tests/test_masks.cpp) and for the mask idioms translated line by line
(tests/test_pytorch_idioms_masks.cpp).

Offline only: nothing in the build or the tests runs this script or needs PyTorch; it is kept so
the values can be regenerated and audited (python3 tools/pytorch_idioms/masks.py from the
repository root, PyTorch 1.13). Inputs are the integer patterns the tests rebuild with the same
formula (pattern() below, tests/pytorch_idioms/masks_goldens.h's kPattern comment); module weights
are filled parameter by parameter, in sorted name order, with pattern(n, 5 + 2i, 17 + i, 8, 20).
"""
import math
import os

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
OUT = os.path.join("tests", "pytorch_idioms", "masks_goldens.h")
lines = []


def pattern(n, mul, mod, shift, div):
    """((k * mul) % mod - shift) / div for k in 0..n-1 (the tests' pattern())."""
    return torch.tensor([((k * mul) % mod - shift) / div for k in range(n)])


def weights(n):
    """The random-looking loss weights of the gradients: pattern(n, 3, 7, 3, 4) + 0.1."""
    return pattern(n, 3, 7, 3, 4.0) + 0.1


def emit(name, t):
    t = torch.as_tensor(t)
    if t.dtype == torch.bool:
        t = t.to(torch.int64)
    vals = ", ".join(repr(float(v)) for v in t.reshape(-1).tolist())
    lines.append(f"inline const std::vector<double> {name} = {{{vals}}};")


def emit_str(name, s):
    lines.append(f'inline const std::string {name} = R"({s})";')


def grad_of(y, *xs):
    """Gradients of sum(weights * y) for each x."""
    loss = (y * weights(y.numel()).reshape(y.shape).to(y.dtype)).sum()
    return torch.autograd.grad(loss, xs)


def fill_module(m):
    """Every parameter, in sorted name order i, = pattern(n, 5 + 2i, 17 + i, 8, 20)."""
    with torch.no_grad():
        for i, (name, p) in enumerate(sorted(m.named_parameters())):
            p.copy_(pattern(p.numel(), 5 + 2 * i, 17 + i, 8, 20.0).reshape(p.shape).to(p.dtype))


DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bool, torch.uint8]


def dtypes_and_conversions():
    # torch.promote_types over (f32, f64, i32, i64, bool, u8)², as indices into that list
    emit("kPromote", [DTYPES.index(torch.promote_types(a, b)) for a in DTYPES for b in DTYPES])
    emit("kToBool", torch.tensor([0.5, 0.0, float("nan"), -0.0, -2.0]).bool())
    emit("kFloatToU8", torch.tensor([-1.0, 2.7, 300.0, 255.9]).to(torch.uint8))
    emit("kIntToU8", torch.tensor([-1, 256, 3, 1000]).to(torch.uint8))
    emit_str("kPrintBool", str(torch.tensor([True, False, True])))
    emit_str("kPrintBool2d", str(torch.tensor([[True, True], [True, True]])))
    emit_str("kPrintU8", str(torch.tensor([1, 255, 30], dtype=torch.uint8)))


def comparisons():
    a = torch.tensor([1, 2, 16777217, -3])
    b = torch.tensor([1, 3, 16777217, 4], dtype=torch.int32)
    emit("kEqI64I32", a == b)
    emit("kEqI64F32", a == torch.tensor([1.0, 2.5, 16777216.0, -3.0], dtype=torch.float32))
    x32 = torch.tensor([0.1, 0.2, 0.30000001192092896], dtype=torch.float32)
    emit("kF32EqScalar", x32 == 0.1)
    emit("kF32LtF64", x32 < torch.tensor([0.1, 0.3, 0.3]))
    emit("kF32LtF64ZeroD", x32 < torch.tensor(0.2))  # a 0-d float64 does not widen float32
    emit("kI64EqHalf", torch.tensor([0, 1, 2]) == 0.5)
    emit("kI64LtHalf", torch.tensor([0, 1, 2]) < 1.5)
    m = torch.tensor([[True, False, True], [False, False, True]])
    n = torch.tensor([True, True, False])
    emit("kAnd", m & n)
    emit("kOr", m | n)
    emit("kXor", m ^ n)
    emit("kNot", ~m)
    emit("kBitAndInt", torch.tensor([3, 6, -1]) & torch.tensor([1, 4, 12], dtype=torch.int32))
    emit("kBitNotInt", ~torch.tensor([3, 0, -1]))
    emit("kBoolAndInt", torch.tensor([True, False, True]) & torch.tensor([3, 3, 2]))
    f = torch.tensor([0.0, 2.0, float("nan"), -1.0])
    g = torch.tensor([1.0, 0.0, 0.0, -0.0])
    emit("kLogicalAnd", torch.logical_and(f, g))
    emit("kLogicalOr", torch.logical_or(f, g))
    emit("kLogicalXor", torch.logical_xor(f, g))
    emit("kLogicalNot", torch.logical_not(f))


def reductions():
    m = torch.tensor([[True, False, True], [False, False, False]])
    emit("kAny", m.any())
    emit("kAll", m.all())
    emit("kAnyDim1", m.any(1))
    emit("kAllDim0Keep", m.all(0, keepdim=True))
    emit("kAnyFloat", torch.tensor([[0.0, float("nan")], [0.0, 0.0]]).any(-1))
    u = torch.tensor([0, 3], dtype=torch.uint8)
    assert u.any().dtype == torch.uint8 and u.all().dtype == torch.uint8
    emit("kSumBool", m.sum())
    emit("kSumBoolDim1", m.sum(1))
    emit("kSumU8", torch.tensor([200, 100], dtype=torch.uint8).sum())
    emit("kSumI32Keep", torch.tensor([[1, 2], [3, 2147483647]], dtype=torch.int32).sum(0, True))


def masked_ops():
    x = pattern(24, 7, 25, 12, 5.0).reshape(2, 3, 4).requires_grad_(True)
    mask = torch.tensor([[True], [False], [True]])
    y = torch.masked_select(x, mask)
    emit("kMaskedSelect", y.detach())
    emit("kMaskedSelectGrad", grad_of(y, x)[0])
    small = pattern(3, 5, 7, 3, 4.0).reshape(3, 1).requires_grad_(True)
    big = torch.tensor([k % 3 != 1 for k in range(24)]).reshape(2, 3, 4)
    y = torch.masked_select(small, big)
    emit("kMaskedSelectBroadcast", y.detach())
    emit("kMaskedSelectBroadcastGrad", grad_of(y, small)[0])
    a = pattern(12, 5, 13, 6, 4.0).reshape(3, 4).requires_grad_(True)
    c = torch.tensor([True, False, False, True])
    y = torch.where(c, a, a * a)
    emit("kWhere", y.detach())
    emit("kWhereGrad", grad_of(y, a)[0])
    y = a.masked_fill(torch.tensor([[False], [True], [False]]), -1.5)
    emit("kMaskedFill", y.detach())
    emit("kMaskedFillGrad", grad_of(y, a)[0])
    emit("kTriu", torch.triu(a.detach(), 1))
    emit("kTrilNeg", torch.tril(a.detach(), -1))
    emit("kTriuBool", torch.triu(torch.ones(3, 4, dtype=torch.bool), 1))


def idioms():
    """The translation suite: each block is one TEST_CASE of tests/test_pytorch_idioms_masks.cpp."""
    PAD = 0
    ids = torch.tensor([[5, 3, 0, 0], [7, 2, 9, 0]])
    # key_padding_mask = ids == PAD
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    fill_module(mha)
    mha.eval()
    x = pattern(64, 3, 11, 5, 6.0).reshape(2, 4, 8).requires_grad_(True)
    out, w = mha(x, x, x, key_padding_mask=ids == PAD)
    emit("kIdiomKpmOut", out.detach())
    emit("kIdiomKpmWeights", w.detach())
    emit("kIdiomKpmGrad", grad_of(out, x)[0])
    # attn_mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    T = 4
    attn_mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    out, w = mha(x, x, x, attn_mask=attn_mask)
    emit("kIdiomCausalOut", out.detach())
    emit("kIdiomCausalWeights", w.detach())
    # both masks together
    out, _ = mha(x, x, x, key_padding_mask=ids == PAD, attn_mask=attn_mask)
    emit("kIdiomBothOut", out.detach())
    # scores.masked_fill(mask, float('-inf')).softmax(-1), float32
    scores = pattern(16, 5, 9, 4, 3.0).reshape(4, 4).float()
    emit("kIdiomMaskedSoftmax", scores.masked_fill(attn_mask, float("-inf")).softmax(-1))
    # torch.where(x > 0, x, 0.1 * x)
    v = pattern(12, 7, 25, 12, 5.0).reshape(3, 4).requires_grad_(True)
    y = torch.where(v > 0, v, 0.1 * v)
    emit("kIdiomLeaky", y.detach())
    emit("kIdiomLeakyGrad", grad_of(y, v)[0])
    # (x > 0) & (x < 1)
    u = pattern(12, 5, 11, 4, 4.0)
    emit("kIdiomBetween", (u > 0) & (u < 1))
    m = (u > 0) & (u < 1)
    emit("kIdiomAnyAll", [m.any(), m.all(), (u > -2).all()])
    emit("kIdiomMaskSum", [m.sum()])
    # x[mask]
    y = v[v > 0.5]
    emit("kIdiomIndexMask", y.detach())
    emit("kIdiomIndexMaskGrad", grad_of(y, v)[0])
    # comparisons with promotion
    emit("kIdiomPromote", torch.tensor([1, 2, 3]) == torch.tensor([1, 5, 3], dtype=torch.int32))
    emit("kIdiomPromoteFloat", torch.tensor([1, 2, 3]) < torch.tensor([1.5, 1.5, 3.5]))
    # (pred == y).float().mean()
    logits = pattern(15, 7, 11, 5, 3.0).reshape(5, 3)
    labels = torch.tensor([0, 2, 1, 1, 0])
    emit("kIdiomAccuracy", [(logits.argmax(-1) == labels).float().mean()])
    # ~mask, mask.float(), x.bool()
    emit("kIdiomInvert", ~m)
    emit("kIdiomMaskFloat", m.float())
    emit("kIdiomToBool", torch.tensor([0.0, -0.5, float("nan"), 3.0]).bool())
    # lengths = (ids != PAD).sum(-1)
    emit("kIdiomLengths", (ids != PAD).sum(-1))
    # masked mean pooling
    keep = ids != PAD
    h = x.detach().clone().requires_grad_(True)
    pooled = (h * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
    emit("kIdiomPooled", pooled.detach())
    emit("kIdiomPooledGrad", grad_of(pooled, h)[0])
    # torch.where(x != x, torch.zeros_like(x), x)
    nan_x = torch.tensor([1.0, float("nan"), -2.0, float("nan")])
    emit("kIdiomScrubNan", torch.where(nan_x != nan_x, torch.zeros_like(nan_x), nan_x))
    # F.scaled_dot_product_attention(q, k, v, attn_mask=keep) (torch 2; 1.13 has the math path)
    q = pattern(24, 5, 13, 6, 5.0).reshape(1, 3, 8)
    k = pattern(32, 7, 17, 8, 6.0).reshape(1, 4, 8)
    vv = pattern(16, 3, 7, 3, 4.0).reshape(1, 4, 4)
    allowed = torch.tensor([[True, False, True, True], [True, True, False, False],
                            [False, False, False, True]])
    s = (q @ k.transpose(-2, -1)) / math.sqrt(8)
    emit("kIdiomSdpa", s.masked_fill(~allowed, float("-inf")).softmax(-1) @ vv)
    # x.masked_fill(ids.eq(PAD).unsqueeze(-1), 0.0)
    emit("kIdiomZeroPad", x.detach().masked_fill(ids.eq(PAD).unsqueeze(-1), 0.0))
    # nn.TransformerEncoderLayer(src, src_mask=causal, src_key_padding_mask=ids == PAD)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    fill_module(layer)
    src = x.detach().clone().requires_grad_(True)
    y = layer(src, src_mask=attn_mask, src_key_padding_mask=ids == PAD)
    emit("kIdiomEncoder", y.detach())
    emit("kIdiomEncoderGrad", grad_of(y, src)[0])
    # mask.logical_or(other), mask.any(dim=-1)
    other = torch.tensor([True, False, False, False, False, False, False, False, False, False,
                          False, True])
    emit("kIdiomLogicalOr", m.logical_or(other))
    emit("kIdiomAnyDim", (ids == PAD).any(dim=-1))
    # x.eq(0.1) on float32: the scalar is rounded to float32 first
    emit("kIdiomF32Eq", torch.tensor([0.1, 0.2], dtype=torch.float32).eq(0.1))
    # torch.triu(torch.ones(T, T), diagonal=1).bool()
    emit("kIdiomTriuBool", torch.triu(torch.ones(T, T), diagonal=1).bool())
    emit_str("kIdiomPrint", str(m.reshape(3, 4)))


def main():
    dtypes_and_conversions()
    comparisons()
    reductions()
    masked_ops()
    idioms()
    header = [
        "// GENERATED by tools/pytorch_idioms/masks.py; do not edit",
        "// PyTorch 1.13 values for tests/test_masks.cpp and tests/test_pytorch_idioms_masks.cpp.",
        "// Bool values are 1 and 0. kPattern: pattern(n, mul, mod, shift, div)[k] =",
        "// ((k * mul) % mod - shift) / div, the inputs both sides rebuild.",
        "#pragma once",
        "#include <string>",
        "#include <vector>",
        "",
        "namespace masks_goldens {",
    ]
    with open(OUT, "w") as f:
        f.write("\n".join(header + lines + ["}  // namespace masks_goldens", ""]))


if __name__ == "__main__":
    main()
