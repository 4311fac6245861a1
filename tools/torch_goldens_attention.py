#!/usr/bin/python3
"""Golden values of depthgrad's scaled_dot_product_attention, MultiheadAttention and
TransformerEncoderLayer from PyTorch (1.13), offline only.

torch 1.13 has no F.scaled_dot_product_attention: the reference is its definition,
softmax(q k^T * scale + mask) v in float64, with gradients by autograd. Prints a C++ table
(name -> values) of outputs and of the gradients of sum(y * G) (G a fixed pattern, not all ones)
w.r.t. the inputs (and, for the modules, every parameter, in named_parameters() order; the modules'
parameters are set from patterns too, so the C++ test loads the same values). The modules run in
eval mode (dropout off) with grad enabled, so torch takes its plain (not the fused inference)
path. Inputs are exact dyadic patterns, the same pattern() tests/test_attention_layers.cpp builds.
The table was pasted into that test between its GOLDENS markers.

Not needed to build or test depthgrad: run it by hand with Debian's python3-torch,
    /usr/bin/python3 tools/torch_goldens_attention.py > table.txt
It checks nothing; it only prints.
"""
import torch
import torch.nn as nn

torch.set_default_dtype(torch.float64)


def pattern(n, mul, mod, shift, div):
    return torch.tensor([((k * mul) % mod - shift) / div for k in range(n)], dtype=torch.float64)


def leaf(shape, mul, mod, shift, div):
    n = 1
    for s in shape:
        n *= s
    return pattern(n, mul, mod, shift, div).reshape(shape).requires_grad_(True)


def weights_for(y):
    return pattern(y.numel(), 3, 11, 5, 4.0).reshape(y.shape)


def emit(name, t):
    values = ", ".join(repr(float(v)) for v in t.detach().reshape(-1).tolist())
    print(f'    {{"{name}", {{{values}}}}},')


def sdpa(q, k, v, mask=None, is_causal=False, scale=None):
    """torch 2's definition, with rows that have no key set to zero (its math path since 2.5)."""
    L, S = q.shape[-2], k.shape[-2]
    scale = scale if scale is not None else q.shape[-1] ** -0.5
    bias = torch.zeros(L, S)
    if is_causal:
        bias = bias.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        bias = torch.zeros(mask.shape).masked_fill(~mask, float("-inf")) \
            if mask.dtype == torch.bool else mask
    scores = q @ k.transpose(-2, -1) * scale + bias
    dead = torch.isneginf(scores).all(-1, keepdim=True)
    p = torch.softmax(scores.masked_fill(dead, 0.0), -1).masked_fill(dead, 0.0)
    return p @ v


def run(name, fn, inputs, names):
    y = fn(*inputs)
    emit(f"{name}.y", y)
    (y * weights_for(y)).sum().backward()
    for t, n in zip(inputs, names):
        emit(f"{name}.d{n}", t.grad)


def set_parameters(module, seed):
    with torch.no_grad():
        for i, (_, p) in enumerate(module.named_parameters()):
            p.copy_(pattern(p.numel(), 5 + 2 * i + seed, 17, 8, 32.0).reshape(p.shape))


def run_module(name, module, inputs, names, forward):
    set_parameters(module, 0)
    module.eval()
    y = forward(module, *inputs)
    emit(f"{name}.y", y)
    (y * weights_for(y)).sum().backward()
    for t, n in zip(inputs, names):
        emit(f"{name}.d{n}", t.grad)
    for n, p in module.named_parameters():
        emit(f"{name}.{n}", p.grad)


def main():
    # boolean mask [3, 5]: row 1 keeps one key, row 2 none
    keep = torch.tensor([[1, 0, 1, 1, 0], [0, 0, 1, 0, 0], [0, 0, 0, 0, 0]], dtype=torch.bool)
    run("sdpa.bool", lambda q, k, v: sdpa(q, k, v, keep),
        [leaf((2, 3, 4), 7, 23, 11, 8.0), leaf((2, 5, 4), 5, 17, 8, 16.0),
         leaf((2, 5, 3), 3, 13, 6, 8.0)], ["q", "k", "v"])
    run("sdpa.additive", lambda q, k, v, m: sdpa(q, k, v, m, scale=0.7),
        [leaf((2, 2, 3, 4), 7, 23, 11, 8.0), leaf((2, 2, 5, 4), 5, 17, 8, 16.0),
         leaf((2, 2, 5, 3), 3, 13, 6, 8.0), leaf((2, 1, 3, 5), 5, 9, 4, 4.0)],
        ["q", "k", "v", "mask"])
    run("sdpa.causal", lambda q, k, v: sdpa(q, k, v, is_causal=True),
        [leaf((1, 2, 5, 4), 7, 23, 11, 8.0), leaf((1, 2, 3, 4), 5, 17, 8, 16.0),
         leaf((1, 2, 3, 4), 3, 13, 6, 8.0)], ["q", "k", "v"])

    # MultiheadAttention: E 8, 2 heads, seq-first, cross-attention L 3, S 4, batch 2, a
    # key_padding_mask (batch 1 ignores its last key) and a boolean attn_mask [L, S]
    kpm = torch.tensor([[False, False, False, False], [False, False, False, True]])
    attn_mask = torch.tensor([[False, True, False, False], [False, False, False, False],
                              [True, False, False, False]])
    mha = nn.MultiheadAttention(8, 2)
    run_module("mha", mha, [leaf((3, 2, 8), 7, 23, 11, 8.0), leaf((4, 2, 8), 5, 17, 8, 16.0),
                            leaf((4, 2, 8), 3, 13, 6, 8.0)], ["query", "key", "value"],
               lambda m, q, k, v: m(q, k, v, key_padding_mask=kpm, attn_mask=attn_mask,
                                    need_weights=False)[0])
    # batch_first, float attn_mask [N*H, L, S], and the head-averaged weights
    mha2 = nn.MultiheadAttention(8, 2, batch_first=True)
    float_mask = pattern(4 * 3 * 3, 5, 9, 4, 4.0).reshape(4, 3, 3)
    set_parameters(mha2, 0)
    mha2.eval()
    q = leaf((2, 3, 8), 7, 23, 11, 8.0)
    out, w = mha2(q, q, q, attn_mask=float_mask, need_weights=True)
    emit("mha_weights.y", out)
    emit("mha_weights.w", w)

    # kdim 6, vdim 5 (separate q/k/v_proj_weight), batch_first cross-attention with the padding
    mha3 = nn.MultiheadAttention(8, 2, kdim=6, vdim=5, batch_first=True)
    run_module("mha_kv", mha3, [leaf((2, 3, 8), 7, 23, 11, 8.0), leaf((2, 4, 6), 5, 17, 8, 16.0),
                                leaf((2, 4, 5), 3, 13, 6, 8.0)], ["query", "key", "value"],
               lambda m, q, k, v: m(q, k, v, key_padding_mask=kpm, need_weights=False)[0])

    for norm_first in (False, True):
        name = f"encoder.norm_first_{int(norm_first)}"
        layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=12, dropout=0.1,
                                           activation="gelu" if norm_first else "relu",
                                           batch_first=True, norm_first=norm_first)
        src_mask = torch.tensor([[False, True, False, False]] * 4)
        run_module(name, layer, [leaf((2, 4, 8), 7, 23, 11, 8.0)], ["src"],
                   lambda m, x: m(x, src_mask=src_mask, src_key_padding_mask=kpm))


if __name__ == "__main__":
    main()
