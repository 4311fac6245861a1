#!/usr/bin/python3
"""Reads a GGUF v3 file on its own (struct + numpy, following the specification, sharing no code
with train/lm/gguf.cpp) and prints its header, metadata and tensors; with --logits IDS it also runs
the forward pass of the file's architecture the way llama.cpp does and prints the last position's
logits: llama (interleaved-pairs RoPE on the stored Q/K rows, grouped-query attention, SwiGLU,
RMSNorm) or gpt2 (learned positions, LayerNorm, the fused attn_qkv split Q | K | V, tanh GELU,
biases).

Offline and by hand, never at build time or under ctest:
  /usr/bin/python3 tools/gguf_dump.py model.gguf [--logits 5,17,42]
It reads F32, F16 and BF16 tensors only, and checks alignment, offsets and the file's size.
"""
import struct
import sys

import numpy as np

VALUE_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                 10: "<Q", 11: "<q", 12: "<d"}
TENSOR_TYPES = {0: ("F32", 4), 1: ("F16", 2), 30: ("BF16", 2)}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self):
        n = self.take("<Q")
        if self.pos + n > len(self.data):
            raise ValueError(f"string of {n} bytes at {self.pos} runs past the end")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, vtype):
        if vtype == 8:
            return self.string()
        if vtype == 9:
            etype, n = self.take("<I"), self.take("<Q")
            return [self.value(etype) for _ in range(n)]
        return self.take(VALUE_FORMATS[vtype])


def read_gguf(path):
    data = open(path, "rb").read()
    r = Reader(data)
    if data[:4] != b"GGUF":
        raise ValueError("bad magic")
    r.pos = 4
    version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    if version != 3:
        raise ValueError(f"version {version}")
    meta, types = {}, {}
    for _ in range(n_kv):
        key = r.string()
        vtype = r.take("<I")
        meta[key], types[key] = r.value(vtype), vtype
    alignment = meta.get("general.alignment", 32)
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take("<Q") for _ in range(r.take("<I"))]
        ttype, offset = r.take("<I"), r.take("<Q")
        infos.append((name, dims, ttype, offset))
    start = (r.pos + alignment - 1) // alignment * alignment
    tensors, end = {}, 0
    for name, dims, ttype, offset in infos:
        tname, size = TENSOR_TYPES[ttype]
        count = int(np.prod(dims))
        if offset % alignment:
            raise ValueError(f"{name}: offset {offset} not aligned")
        raw = data[start + offset:start + offset + count * size]
        if len(raw) != count * size:
            raise ValueError(f"{name}: data outside the file")
        if tname == "F32":
            values = np.frombuffer(raw, "<f4")
        elif tname == "F16":
            values = np.frombuffer(raw, "<f2").astype(np.float32)
        else:
            values = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        tensors[name] = (tname, dims, offset, values.reshape(list(reversed(dims))).astype(np.float64))
        end = max(end, offset + count * size)
    if len(data) > start + (end + alignment - 1) // alignment * alignment:
        raise ValueError("bytes after the last tensor's padding")
    return meta, types, tensors, start


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_interleaved(x, base):  # x [T, heads, hd]: pairs (2i, 2i+1), llama.cpp's "normal" rope
    T, _, hd = x.shape
    theta = base ** (-np.arange(0, hd, 2) / hd)
    angle = np.arange(T)[:, None] * theta[None, :]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    out = x.copy()
    out[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
    out[..., 1::2] = x[..., 0::2] * sin + x[..., 1::2] * cos
    return out


def llama_logits(meta, tensors, ids):
    W = {name: t[3] for name, t in tensors.items()}
    H, Hkv = meta["llama.attention.head_count"], meta["llama.attention.head_count_kv"]
    eps, base = meta["llama.attention.layer_norm_rms_epsilon"], meta["llama.rope.freq_base"]
    x = W["token_embd.weight"][ids]
    T, D = x.shape
    hd = D // H
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(meta["llama.block_count"]):
        b = f"blk.{l}."
        u = rms_norm(x, W[b + "attn_norm.weight"], eps)
        q = rope_interleaved((u @ W[b + "attn_q.weight"].T).reshape(T, H, hd), base)
        k = rope_interleaved((u @ W[b + "attn_k.weight"].T).reshape(T, Hkv, hd), base)
        v = (u @ W[b + "attn_v.weight"].T).reshape(T, Hkv, hd)
        out = np.zeros((T, H, hd))
        for h in range(H):
            g = h // (H // Hkv)
            s = q[:, h, :] @ k[:, g, :].T / np.sqrt(hd) + mask
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, h, :] = (p / p.sum(axis=1, keepdims=True)) @ v[:, g, :]
        x = x + out.reshape(T, D) @ W[b + "attn_output.weight"].T
        u = rms_norm(x, W[b + "ffn_norm.weight"], eps)
        gate, up = u @ W[b + "ffn_gate.weight"].T, u @ W[b + "ffn_up.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ W[b + "ffn_down.weight"].T
    x = rms_norm(x, W["output_norm.weight"], eps)
    head = W.get("output.weight", W["token_embd.weight"])  # tied: llama.cpp reuses token_embd
    return x @ head.T


def layer_norm(x, w, b, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def gelu_tanh(x):  # ggml_gelu
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def attention(q, k, v):  # q [T, H, hd], k and v [T, Hkv, hd], causal
    T, H, hd = q.shape
    Hkv = k.shape[1]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    out = np.zeros((T, H, hd))
    for h in range(H):
        g = h // (H // Hkv)
        s = q[:, h, :] @ k[:, g, :].T / np.sqrt(hd) + mask
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[:, h, :] = (p / p.sum(axis=1, keepdims=True)) @ v[:, g, :]
    return out.reshape(T, H * hd)


def gpt2_logits(meta, tensors, ids):
    W = {name: t[3] for name, t in tensors.items()}
    H = meta["gpt2.attention.head_count"]
    Hkv = meta.get("gpt2.attention.head_count_kv", H)
    eps = meta["gpt2.attention.layer_norm_epsilon"]
    x = W["token_embd.weight"][ids] + W["position_embd.weight"][np.arange(len(ids))]
    T, D = x.shape
    hd = D // H
    for l in range(meta["gpt2.block_count"]):
        b = f"blk.{l}."
        u = layer_norm(x, W[b + "attn_norm.weight"], W[b + "attn_norm.bias"], eps)
        qkv = u @ W[b + "attn_qkv.weight"].T + W[b + "attn_qkv.bias"]  # views at 0, D, D + kv
        kv = Hkv * hd
        q, k, v = qkv[:, :D], qkv[:, D:D + kv], qkv[:, D + kv:D + 2 * kv]
        out = attention(q.reshape(T, H, hd), k.reshape(T, Hkv, hd), v.reshape(T, Hkv, hd))
        x = x + out @ W[b + "attn_output.weight"].T + W[b + "attn_output.bias"]
        u = layer_norm(x, W[b + "ffn_norm.weight"], W[b + "ffn_norm.bias"], eps)
        up = gelu_tanh(u @ W[b + "ffn_up.weight"].T + W[b + "ffn_up.bias"])
        x = x + up @ W[b + "ffn_down.weight"].T + W[b + "ffn_down.bias"]
    x = layer_norm(x, W["output_norm.weight"], W["output_norm.bias"], eps)
    return x @ W["output.weight"].T


def main():
    meta, types, tensors, start = read_gguf(sys.argv[1])
    print(f"data section at byte {start}, {len(meta)} keys, {len(tensors)} tensors")
    for key, value in meta.items():
        shown = f"[{len(value)} items] {value[:4]}..." if isinstance(value, list) else repr(value)
        print(f"  {key} (type {types[key]}): {shown}")
    for name, (tname, dims, offset, _) in tensors.items():
        print(f"  {name}: {tname} dims {dims} offset {offset}")
    if len(sys.argv) > 3 and sys.argv[2] in ("--logits", "--llama"):
        ids = [int(i) for i in sys.argv[3].split(",")]
        arch = meta["general.architecture"]
        if arch not in ("llama", "gpt2"):
            raise ValueError(f"no forward pass for architecture '{arch}'")
        logits = (llama_logits if arch == "llama" else gpt2_logits)(meta, tensors, ids)
        print("last logits:", " ".join(f"{v:.6f}" for v in logits[-1]))


if __name__ == "__main__":
    main()
