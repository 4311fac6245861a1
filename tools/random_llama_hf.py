#!/usr/bin/python3
# Writes a random-weight Hugging Face LlamaForCausalLM folder of a realistic shape, for measuring
# `depthgrad finetune` and `depthgrad train --init-from` at real sizes without downloading a model
# ("Fine-tuning memory" in tools/README.md): config.json, model.safetensors (bf16 or f32; the
# weights drawn from N(0, 0.02) as transformers' initializer_range, the RMSNorm weights ones) and
# the tokenizer.json given (a byte-level BPE trained by `depthgrad tokenize --action train`).
# Random weights make losses and text meaningless; memory and speed depend only on the shapes.
# Nothing is downloaded; torch 1.13 is the only module used. From the repository's root:
#
#   build/depthgrad tokenize --action train --vocab 32000 --output tok32000.json
#   /usr/bin/python3 tools/random_llama_hf.py --shape llama-12x768 --tokenizer tok32000.json \
#       --output llama-12x768-hf
#   /usr/bin/python3 tools/random_llama_hf.py --shape tinyllama-1.1b --tokenizer tok32000.json \
#       --output tinyllama-hf --seq-len 512
#
# --seq-len sets max_position_embeddings: `depthgrad finetune` trains at the model's context, so
# it is the measured sequence length. Running it again writes the same bytes.
import argparse
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_goldens import write_json, write_safetensors  # noqa: E402

# name: (layers, hidden, heads, K/V heads, intermediate size). TinyLlama-1.1B's shape is that of
# its published config.json (vocabulary 32000, untied head).
SHAPES = {
    "llama-12x768": (12, 768, 12, 12, 2048),
    "tinyllama-1.1b": (22, 2048, 32, 4, 5632),
}


def llama_config(shape, vocab, seq_len, dtype, bos, eos):
    layers, hidden, heads, kv_heads, ffn = SHAPES[shape]
    return {"architectures": ["LlamaForCausalLM"], "attention_bias": False,
            "attention_dropout": 0.0, "bos_token_id": bos, "eos_token_id": eos,
            "hidden_act": "silu", "hidden_size": hidden, "initializer_range": 0.02,
            "intermediate_size": ffn, "max_position_embeddings": seq_len, "mlp_bias": False,
            "model_type": "llama", "num_attention_heads": heads, "num_hidden_layers": layers,
            "num_key_value_heads": kv_heads, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
            "rope_scaling": None, "rope_theta": 10000.0, "tie_word_embeddings": False,
            "torch_dtype": dtype, "transformers_version": "4.44.0", "use_cache": True,
            "vocab_size": vocab}


def random_weights(c, dtype):
    D, F, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    kv = c["num_key_value_heads"] * (D // c["num_attention_heads"])
    cast = torch.bfloat16 if dtype == "bfloat16" else torch.float32
    r = lambda *s: (torch.randn(*s) * 0.02).to(cast)  # noqa: E731
    ones = lambda n: torch.ones(n, dtype=cast)  # noqa: E731
    w = {"model.embed_tokens.weight": r(V, D), "model.norm.weight": ones(D),
         "lm_head.weight": r(V, D)}
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        w.update({p + "input_layernorm.weight": ones(D),
                  p + "self_attn.q_proj.weight": r(D, D), p + "self_attn.k_proj.weight": r(kv, D),
                  p + "self_attn.v_proj.weight": r(kv, D), p + "self_attn.o_proj.weight": r(D, D),
                  p + "post_attention_layernorm.weight": ones(D),
                  p + "mlp.gate_proj.weight": r(F, D), p + "mlp.up_proj.weight": r(F, D),
                  p + "mlp.down_proj.weight": r(D, F)})
    return w


def special_id(tokenizer, names):
    for t in tokenizer.get("added_tokens", []):
        if t["content"] in names:
            return t["id"]
    return None


def main():
    ap = argparse.ArgumentParser(description="a random-weight Hugging Face Llama folder")
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--tokenizer", required=True, help="a byte-level BPE tokenizer.json")
    ap.add_argument("--output", required=True)
    ap.add_argument("--seq-len", type=int, default=512, help="max_position_embeddings")
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    with open(a.tokenizer) as f:
        tok = json.load(f)
    vocab = len(tok["model"]["vocab"]) + sum(
        1 for t in tok.get("added_tokens", []) if t["content"] not in tok["model"]["vocab"])
    bos = special_id(tok, ("<bos>", "<s>", "<|endoftext|>"))
    eos = special_id(tok, ("<eos>", "</s>", "<|endoftext|>"))
    c = llama_config(a.shape, vocab, a.seq_len, a.dtype, bos, eos)
    torch.manual_seed(a.seed)
    w = random_weights(c, a.dtype)
    os.makedirs(a.output, exist_ok=True)
    write_json(os.path.join(a.output, "config.json"), c)
    shutil.copyfile(a.tokenizer, os.path.join(a.output, "tokenizer.json"))
    write_safetensors(os.path.join(a.output, "model.safetensors"), w)
    count = sum(t.numel() for t in w.values())
    print(f"{a.output}: {a.shape}, {count:,} parameters, vocab {vocab}, {a.dtype}")


if __name__ == "__main__":
    main()
