#!/usr/bin/python3
# Writes the Hugging Face test models of tests/data/hf/: a small random GPT-2 (GPT2LMHeadModel
# layout, float32, one model.safetensors) and a small random Llama (LlamaForCausalLM layout,
# bfloat16, sharded in two files with model.safetensors.index.json, grouped-query attention,
# rope_theta 500000, an untied head, an intermediate size that is no multiple of the width), each
# with a small byte-level tokenizer.json, and beside each the logits of a fixed id sequence
# computed by the independent PyTorch implementations below (float32); and torch's own
# gelu(approximate='tanh') with its gradient on a grid (gelu_tanh.safetensors).
#
# The implementations are written here from the published model definitions (GPT-2: Radford et
# al. 2019 and the Conv1D layout of its checkpoints; Llama: Touvron et al. 2023, with Hugging
# Face's rotate_half RoPE layout); nothing of transformers, tokenizers or safetensors is imported,
# so the C++ importer is compared with a second reading of the definitions, not with itself.
# It does not download anything. Run offline, from the repository's root:
#   /usr/bin/python3 tools/hf_goldens.py tests/data/hf
# (torch 1.13 or later). Running it again writes the same bytes.
import json
import math
import os
import struct
import sys

import torch


# ---- safetensors, written by hand (8-byte header length, JSON header, bytes)


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes(), "BF16"
    if t.dtype == torch.float32:
        return t.numpy().tobytes(), "F32"
    raise ValueError(f"unsupported dtype {t.dtype}")


def write_safetensors(path, tensors):
    header = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name in sorted(tensors):
        data, dtype = tensor_bytes(tensors[name])
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")


# ---- a byte-level BPE tokenizer.json in GPT-2's form


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [(b, chr(c)) for b, c in zip(bs, cs)]


def tokenizer_json(merge_count):
    byte_chars = bytes_to_unicode()
    vocab = {ch: i for i, (_, ch) in enumerate(byte_chars)}
    char_of = dict(byte_chars)
    # Merges: the most frequent adjacent pairs of a fixed text, greedily, as BPE training would.
    text = ("the tower stood on the hill; the river ran under the tower and the town "
            "listened to the rain on the stones of the tower. ") * 4
    words = [[char_of[b] for b in (" " + w if i else w).encode()]
             for i, w in enumerate(text.split(" ")) if w]
    merges = []
    while len(merges) < merge_count:
        counts = {}
        for w in words:
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + 1
        (a, b), _ = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append([a, b])
        vocab[a + b] = len(vocab)
        for w in words:
            i = 0
            while i + 1 < len(w):
                if w[i] == a and w[i + 1] == b:
                    w[i:i + 2] = [a + b]
                i += 1
    eot = len(vocab)
    vocab["<|endoftext|>"] = eot
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": eot, "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": True,
                          "special": True}],
        "normalizer": None, "pre_tokenizer": byte_level,
        "post_processor": dict(byte_level, trim_offsets=False),
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "vocab": vocab, "merges": merges},
    }, eot


# ---- GPT-2, from its definition


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def causal_attention(q, k, v):  # [H, T, hd] each -> [T, H * hd]
    T, hd = q.shape[1], q.shape[2]
    scores = q @ k.transpose(1, 2) / math.sqrt(hd)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(0, 1).reshape(T, -1)


def gpt2_logits(w, c, ids):
    D, H = c["n_embd"], c["n_head"]
    T = len(ids)
    h = w["wte.weight"][ids] + w["wpe.weight"][:T]
    for l in range(c["n_layer"]):
        p = f"h.{l}."
        x = layer_norm(h, w[p + "ln_1.weight"], w[p + "ln_1.bias"], c["layer_norm_epsilon"])
        qkv = x @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # Conv1D: x W + b
        q, k, v = (t.reshape(T, H, D // H).transpose(0, 1) for t in qkv.split(D, dim=-1))
        a = causal_attention(q, k, v)
        h = h + a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        x = layer_norm(h, w[p + "ln_2.weight"], w[p + "ln_2.bias"], c["layer_norm_epsilon"])
        m = gelu_new(x @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        h = h + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    h = layer_norm(h, w["ln_f.weight"], w["ln_f.bias"], c["layer_norm_epsilon"])
    return h @ w["wte.weight"].T  # tied head


# ---- Llama, from its definition


def rms_norm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope(x, theta):  # [H, T, hd], rotate_half layout: pairs (i, i + hd/2)
    hd, T = x.shape[-1], x.shape[1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    angles = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq[None, :]
    cos, sin = torch.cos(angles), torch.sin(angles)
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def llama_logits(w, c, ids):
    D, H, Hkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd, T, eps = D // H, len(ids), c["rms_norm_eps"]
    h = w["model.embed_tokens.weight"][ids]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        x = rms_norm(h, w[p + "input_layernorm.weight"], eps)
        q = (x @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, hd).transpose(0, 1)
        k = (x @ w[p + "self_attn.k_proj.weight"].T).reshape(T, Hkv, hd).transpose(0, 1)
        v = (x @ w[p + "self_attn.v_proj.weight"].T).reshape(T, Hkv, hd).transpose(0, 1)
        q, k = rope(q, c["rope_theta"]), rope(k, c["rope_theta"])
        group = H // Hkv  # query head i reads K/V head i // group
        k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
        h = h + causal_attention(q, k, v) @ w[p + "self_attn.o_proj.weight"].T
        x = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
        gate = x @ w[p + "mlp.gate_proj.weight"].T
        up = x @ w[p + "mlp.up_proj.weight"].T
        h = h + (gate * torch.sigmoid(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    h = rms_norm(h, w["model.norm.weight"], eps)
    return h @ w["lm_head.weight"].T


# ---- the models


def main(out):
    torch.manual_seed(0)
    tok, eot = tokenizer_json(31)
    vocab = len(tok["model"]["vocab"])  # 256 bytes + 31 merges + <|endoftext|> = 288
    ids = [5, 71, 200, 287, 3, 256, 260, 0, 44, 130, 271, 9]

    # GPT-2: 2 layers, width 64, 4 heads, 16 positions, float32, tied head.
    g = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
         "attn_pdrop": 0.1, "bos_token_id": eot, "embd_pdrop": 0.1, "eos_token_id": eot,
         "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
         "n_ctx": 16, "n_embd": 64, "n_head": 4, "n_inner": None, "n_layer": 2,
         "n_positions": 16, "resid_pdrop": 0.1, "summary_activation": None,
         "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
         "summary_type": "cls_index", "summary_use_proj": True, "vocab_size": vocab}
    D = g["n_embd"]
    r = lambda *shape, s=0.2: torch.randn(*shape) * s  # noqa: E731
    w = {"wte.weight": r(vocab, D), "wpe.weight": r(16, D),
         "ln_f.weight": 1 + r(D, s=0.1), "ln_f.bias": r(D, s=0.1)}
    for l in range(g["n_layer"]):
        p = f"h.{l}."
        w.update({p + "ln_1.weight": 1 + r(D, s=0.1), p + "ln_1.bias": r(D, s=0.1),
                  p + "attn.c_attn.weight": r(D, 3 * D), p + "attn.c_attn.bias": r(3 * D),
                  p + "attn.c_proj.weight": r(D, D), p + "attn.c_proj.bias": r(D),
                  p + "ln_2.weight": 1 + r(D, s=0.1), p + "ln_2.bias": r(D, s=0.1),
                  p + "mlp.c_fc.weight": r(D, 4 * D), p + "mlp.c_fc.bias": r(4 * D),
                  p + "mlp.c_proj.weight": r(4 * D, D), p + "mlp.c_proj.bias": r(D)})
    d = os.path.join(out, "gpt2")
    os.makedirs(d, exist_ok=True)
    write_json(os.path.join(d, "config.json"), g)
    write_json(os.path.join(d, "tokenizer.json"), tok)
    write_safetensors(os.path.join(d, "model.safetensors"), w)  # the hub's names: no prefix
    with torch.no_grad():
        logits = gpt2_logits(w, g, ids)
    write_safetensors(os.path.join(out, "gpt2-logits.safetensors"),
                      {"ids": torch.tensor(ids, dtype=torch.float32), "logits": logits})

    # Llama: 2 layers, width 64, 4 heads, 2 K/V heads, intermediate 96, rope_theta 500000,
    # untied head, bfloat16 weights in two shards.
    c = {"architectures": ["LlamaForCausalLM"], "attention_bias": False,
         "attention_dropout": 0.0, "bos_token_id": eot, "eos_token_id": eot, "head_dim": 16,
         "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
         "intermediate_size": 96, "max_position_embeddings": 32, "mlp_bias": False,
         "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2,
         "num_key_value_heads": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
         "rope_scaling": None, "rope_theta": 500000.0, "tie_word_embeddings": False,
         "torch_dtype": "bfloat16", "transformers_version": "4.44.0", "use_cache": True,
         "vocab_size": vocab}
    F, kv = c["intermediate_size"], c["num_key_value_heads"] * 16
    b = lambda t: t.to(torch.bfloat16)  # noqa: E731
    w = {"model.embed_tokens.weight": b(r(vocab, D, s=1.0)), "model.norm.weight": b(1 + r(D)),
         "lm_head.weight": b(r(vocab, D))}
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        w.update({p + "input_layernorm.weight": b(1 + r(D)),
                  p + "self_attn.q_proj.weight": b(r(D, D)),
                  p + "self_attn.k_proj.weight": b(r(kv, D)),
                  p + "self_attn.v_proj.weight": b(r(kv, D)),
                  p + "self_attn.o_proj.weight": b(r(D, D)),
                  p + "post_attention_layernorm.weight": b(1 + r(D)),
                  p + "mlp.gate_proj.weight": b(r(F, D)), p + "mlp.up_proj.weight": b(r(F, D)),
                  p + "mlp.down_proj.weight": b(r(D, F))})
    d = os.path.join(out, "llama")
    os.makedirs(d, exist_ok=True)
    write_json(os.path.join(d, "config.json"), c)
    write_json(os.path.join(d, "tokenizer.json"), tok)
    shards = {"model-00001-of-00002.safetensors": {}, "model-00002-of-00002.safetensors": {}}
    weight_map = {}
    for name in sorted(w):
        shard = "model-00001-of-00002.safetensors" if ".layers.0." in name or "embed" in name \
            else "model-00002-of-00002.safetensors"
        shards[shard][name] = w[name]
        weight_map[name] = shard
    for shard, tensors in shards.items():
        write_safetensors(os.path.join(d, shard), tensors)
    total = sum(t.numel() * 2 for t in w.values())
    write_json(os.path.join(d, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": weight_map})
    with torch.no_grad():
        logits = llama_logits({k: v.float() for k, v in w.items()}, c, ids)
    write_safetensors(os.path.join(out, "llama-logits.safetensors"),
                      {"ids": torch.tensor(ids, dtype=torch.float32), "logits": logits})

    # torch's own gelu(approximate='tanh') in float32, forward and backward, on a grid and at
    # random points: tests/test_hf_model.cpp compares gelu_tanh with these.
    x = torch.cat([torch.linspace(-6, 6, 97), torch.randn(31) * 3]).requires_grad_()
    y = torch.nn.functional.gelu(x, approximate="tanh")
    dy = torch.randn(x.shape)
    (dx,) = torch.autograd.grad(y, x, dy)
    write_safetensors(os.path.join(out, "gelu_tanh.safetensors"),
                      {"x": x.detach(), "y": y.detach(), "dy": dy, "dx": dx})


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/hf")
